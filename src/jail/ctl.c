#define _GNU_SOURCE
#include "jail/ctl.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int ctl_send(int sock, const void *msg, size_t len, const int *fds, size_t nfds,
             struct husk_err *err) {
  struct iovec iov = {.iov_base = (void *)msg, .iov_len = len};
  union {
    char buf[CMSG_SPACE(sizeof(int) * CTL_MAX_FDS)];
    struct cmsghdr align;
  } u;
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
  if (nfds > CTL_MAX_FDS)
    return husk_fail(err, EINVAL, "cannot send %zu fds with a control message (at most %d)", nfds,
                     CTL_MAX_FDS);
  if (nfds) {
    memset(u.buf, 0, sizeof u.buf);
    mh.msg_control = u.buf;
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  ssize_t n;
  do
    n = sendmsg(sock, &mh, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return husk_error(err, errno, "cannot send a control message");
  if ((size_t)n != len)
    return husk_error(err, EIO, "cannot send a control message (%zd of %zu bytes sent)", n, len);
  return 0;
}

/* The fds that came with a message that is not used: closed, and -1 in
 * their place. */
static void drop_fds(int *fds, size_t *nfds, size_t got) {
  for (size_t i = 0; i < got; i++) {
    close(fds[i]);
    fds[i] = -1;
  }
  if (nfds)
    *nfds = 0;
}

ssize_t ctl_recv(int sock, void *buf, size_t size, int *fds, size_t *nfds, struct husk_err *err) {
  struct iovec iov = {.iov_base = buf, .iov_len = size};
  union {
    char buf[CMSG_SPACE(sizeof(int) * CTL_MAX_FDS)];
    struct cmsghdr align;
  } u;
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                      .msg_controllen = sizeof u.buf};
  size_t want = nfds ? *nfds : 0;
  if (nfds)
    *nfds = 0;
  ssize_t n;
  do
    n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return husk_error(err, errno, "cannot receive a control message");
  size_t got = 0;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
      continue;
    size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    int tmp[CTL_MAX_FDS + 8];
    if (k > sizeof tmp / sizeof tmp[0])
      k = sizeof tmp / sizeof tmp[0];
    memcpy(tmp, CMSG_DATA(c), k * sizeof(int));
    for (size_t i = 0; i < k; i++) {
      if (got < want)
        fds[got++] = tmp[i];
      else
        close(tmp[i]);
    }
  }
  if (nfds)
    *nfds = got;
  if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
    drop_fds(fds, nfds, got);
    return husk_fail(err, EMSGSIZE, "a control message was cut: longer than %zu bytes or %d fds",
                     size, CTL_MAX_FDS);
  }
  if (n == 0) {
    /* EOF, or an empty packet: any fds that came with it are not used. */
    drop_fds(fds, nfds, got);
    return 0;
  }
  if ((size_t)n < sizeof(struct ctl_hdr) || ((struct ctl_hdr *)buf)->len != (uint32_t)n) {
    drop_fds(fds, nfds, got);
    return husk_fail(err, EPROTO, "malformed control message of %zd bytes", n);
  }
  return n;
}

ssize_t ctl_pack_exec(void *buf, size_t size, uint64_t id, const char *cwd, char *const argv[],
                      char *const env[], size_t nfds, struct husk_err *err) {
  if (size < sizeof(struct ctl_exec))
    return husk_fail(err, E2BIG, "the exec request does not fit in %zu bytes", size);
  struct ctl_exec *m = buf;
  char *p = (char *)buf + sizeof *m;
  char *end = (char *)buf + size;
  uint32_t argc = 0, envc = 0;
#define PUT(s)                                                                                     \
  do {                                                                                             \
    size_t l_ = strlen(s) + 1;                                                                     \
    if ((size_t)(end - p) < l_)                                                                    \
      return husk_fail(err, E2BIG, "the exec request does not fit in %zu bytes", size);            \
    memcpy(p, s, l_);                                                                              \
    p += l_;                                                                                       \
  } while (0)
  PUT(cwd ? cwd : "");
  for (; argv && argv[argc]; argc++)
    PUT(argv[argc]);
  for (; env && env[envc]; envc++)
    PUT(env[envc]);
#undef PUT
  memset(m, 0, sizeof *m);
  m->h.type = CTL_EXEC;
  m->h.len = (uint32_t)(p - (char *)buf);
  m->id = id;
  m->argc = argc;
  m->envc = envc;
  m->strings_len = (uint32_t)(p - (char *)buf - sizeof *m);
  m->nfds = (uint32_t)nfds;
  return p - (char *)buf;
}

int ctl_unpack_exec(const void *msg, size_t len, const char **cwd, const char **argv,
                    size_t argv_cap, const char **env, size_t env_cap, struct husk_err *err) {
  const struct ctl_exec *m = msg;
  if (len < sizeof *m || m->h.len != len || m->strings_len != len - sizeof *m)
    return husk_fail(err, EPROTO, "malformed exec request: its lengths do not add up");
  if (m->argc == 0 || m->argc >= argv_cap || m->envc >= env_cap)
    return husk_fail(err, EPROTO, "malformed exec request: %u arguments and %u variables", m->argc,
                     m->envc);
  const char *p = (const char *)msg + sizeof *m;
  const char *end = (const char *)msg + len;
  size_t want = 1 + (size_t)m->argc + m->envc;
  for (size_t i = 0; i < want; i++) {
    const char *z = memchr(p, '\0', (size_t)(end - p));
    if (!z)
      return husk_fail(err, EPROTO, "malformed exec request: a string is not terminated");
    if (i == 0)
      *cwd = p;
    else if (i <= m->argc)
      argv[i - 1] = p;
    else
      env[i - 1 - m->argc] = p;
    p = z + 1;
  }
  if (p != end)
    return husk_fail(err, EPROTO, "malformed exec request: bytes after its strings");
  argv[m->argc] = NULL;
  env[m->envc] = NULL;
  return 0;
}

const char *ctl_stage_name(int stage) {
  switch (stage) {
  case CTL_STAGE_FORK: return "fork";
  case CTL_STAGE_CWD: return "working directory";
  case CTL_STAGE_EXEC: return "exec";
  case CTL_STAGE_SETUP: return "process setup";
  default: return "unknown";
  }
}

void ctl_setup_error_exit(int sock, const struct husk_err *err) {
  struct ctl_setup_error m = {.h = {.type = CTL_SETUP_ERROR, .len = sizeof m}, .error = err->code};
  size_t n = strnlen(err->msg, sizeof err->msg);
  if (n < sizeof m.text) {
    memcpy(m.text, err->msg, n);
  } else {
    memcpy(m.text, err->msg, sizeof m.text - 4);
    memcpy(m.text + sizeof m.text - 4, "...", 4);
  }
  ctl_send(sock, &m, sizeof m, NULL, 0, NULL);
  _exit(125);
}
