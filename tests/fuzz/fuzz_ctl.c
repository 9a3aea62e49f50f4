/* The control protocol between husk and a box's init (src/jail/ctl.c,
 * src/jail/spawn.c): one packet as it arrives on the SOCK_SEQPACKET
 * socket, with up to five file descriptors attached, read by either end:
 * the host (jail_recv_fd: messages from init are the box's) or init
 * (ctl_recv and ctl_unpack_exec, as init's serve() reads a request).
 * Input: a selector byte (bit 0: host side; bits 1-3: fds to attach;
 * bit 4: a receive buffer too small for most messages), then the
 * packet. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "jail/ctl.h"
#include "jail/jail.h"
#include "jail/limits.h"

#define MAX_ARGS 8192

static int sv[2] = {-1, -1};
static int devnull = -1;
static char msgbuf[HUSK_CTL_MSG_MAX];
static const char *argv_buf[MAX_ARGS];
static const char *env_buf[MAX_ARGS];

static void send_packet(const void *p, size_t n, int nfds) {
  struct iovec iov = {.iov_base = (void *)p, .iov_len = n};
  union {
    char buf[CMSG_SPACE(sizeof(int) * 8)];
    struct cmsghdr align;
  } u;
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
  if (nfds) {
    memset(&u, 0, sizeof u);
    mh.msg_control = u.buf;
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
    int fds[8];
    for (int i = 0; i < nfds; i++)
      fds[i] = devnull;
    memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
  }
  if (sendmsg(sv[0], &mh, 0) != (ssize_t)n)
    abort();
}

/* The lowest free descriptor: the same after a run, or a run leaked one. */
static int lowest_fd(void) {
  int fd = dup(devnull);
  if (fd < 0)
    abort();
  close(fd);
  return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (sv[0] < 0) {
    int big = 4 * HUSK_CTL_MSG_MAX;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
        (devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
      abort();
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  }
  struct fz f = {data, size};
  uint8_t sel = fz_byte(&f);
  int nfds = (sel >> 1) & 7;
  if (nfds > 5)
    nfds = 5;
  if (f.n > 65536)
    return 0;
  size_t n;
  uint8_t *pkt = fz_rest(&f, &n);
  int low = lowest_fd();
  send_packet(pkt, n, nfds);
  if (sel & 1) {
    union jail_event ev;
    struct husk_err err;
    if (jail_recv_fd(sv[1], &ev, &err) == 1 && ev.h.type == CTL_SETUP_ERROR &&
        !memchr(ev.setup_error.text, '\0', sizeof ev.setup_error.text))
      abort();
  } else {
    int fds[3];
    size_t got = 3;
    size_t cap = (sel & 16) ? 64 : sizeof msgbuf;
    ssize_t len = ctl_recv(sv[1], msgbuf, cap, fds, &got, NULL);
    if (got > 3 || (len <= 0 && got))
      abort();
    if (len > 0 && ((const struct ctl_hdr *)msgbuf)->type == CTL_EXEC) {
      const char *cwd;
      if (ctl_unpack_exec(msgbuf, (size_t)len, &cwd, argv_buf, MAX_ARGS, env_buf, MAX_ARGS, NULL) ==
          0) {
        size_t i = 0;
        while (i < MAX_ARGS && argv_buf[i])
          (void)strlen(argv_buf[i++]);
        if (i == 0 || i == MAX_ARGS)
          abort(); /* argc >= 1, and the array is NULL-terminated */
        (void)strlen(cwd);
      }
    }
    for (size_t i = 0; i < got; i++)
      close(fds[i]);
  }
  if (lowest_fd() != low)
    abort();
  free(pkt);
  return 0;
}
