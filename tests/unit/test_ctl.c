/* Unit tests for src/jail/ctl.{h,c}: the host <-> init control protocol.
 * Packing and unpacking exec requests, every malformation the unpacker
 * must reject, fd passing over a real SOCK_SEQPACKET pair, a
 * deterministic fuzz of the unpacker (ASan catches any overread), and a
 * real init (init_main in a child process) keeping exits until they are
 * acknowledged. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/ctl.h"
#include "jail/init.h"
#include "jail/jail.h"
#include "unit.h"

#define CAP 16 /* argv/env capacity for unpack, NULL slot included */

/* The ctl calls with a failure as -errno (err->code), the form the checks
 * below compare; each also checks that a failure is -1 with err filled. */
static ssize_t failed_as(ssize_t rc, const struct husk_err *err) {
  CHECK(rc >= -1);
  if (rc == -1) {
    CHECK(err->code > 0 && err->msg[0] != '\0');
    return -err->code;
  }
  return rc;
}

static ssize_t pack_exec(void *buf, size_t size, uint64_t id, const char *cwd, char *const argv[],
                         char *const env[], bool with_fds) {
  struct husk_err err;
  return failed_as(ctl_pack_exec(buf, size, id, cwd, argv, env, with_fds ? 3 : 0, &err), &err);
}

static int unpack_exec(const void *msg, size_t len, const char **cwd, const char **argv,
                       size_t argv_cap, const char **env, size_t env_cap) {
  struct husk_err err;
  return (int)failed_as(ctl_unpack_exec(msg, len, cwd, argv, argv_cap, env, env_cap, &err), &err);
}

static int send_msg(int sock, const void *msg, size_t len, const int *fds, size_t nfds) {
  struct husk_err err;
  return (int)failed_as(ctl_send(sock, msg, len, fds, nfds, &err), &err);
}

static ssize_t recv_msg(int sock, void *buf, size_t size, int *fds, size_t *nfds) {
  struct husk_err err;
  return failed_as(ctl_recv(sock, buf, size, fds, nfds, &err), &err);
}

/* Message buffers must be aligned like struct ctl_exec (uint64_t id). */
typedef union {
  struct ctl_exec m;
  unsigned char b[65536];
} msgbuf;

struct unpacked {
  const char *cwd;
  const char *argv[CAP];
  const char *env[CAP];
};

static int unpack(const void *msg, size_t len, struct unpacked *u) {
  memset(u, 0, sizeof *u);
  return unpack_exec(msg, len, &u->cwd, u->argv, CAP, u->env, CAP);
}

/* Build an exec message by hand: header fields and a raw string area. */
static size_t build_raw(msgbuf *mb, uint32_t argc, uint32_t envc, const char *strings,
                        size_t slen) {
  memset(mb, 0, sizeof *mb);
  mb->m.h.type = CTL_EXEC;
  mb->m.h.len = (uint32_t)(sizeof mb->m + slen);
  mb->m.id = 77;
  mb->m.argc = argc;
  mb->m.envc = envc;
  mb->m.strings_len = (uint32_t)slen;
  memcpy(mb->b + sizeof mb->m, strings, slen);
  return sizeof mb->m + slen;
}

/* Copy a message into a heap block of exactly `len` bytes so that ASan
 * flags any read past the end. */
static int unpack_exact(const void *msg, size_t len, struct unpacked *u) {
  void *p = malloc(len ? len : 1);
  if (!p)
    abort();
  memcpy(p, msg, len);
  int rc = unpack(p, len, u);
  free(p);
  return rc;
}

static int fd_is_open(int fd) { return fcntl(fd, F_GETFD) >= 0; }

/* ---- pack / unpack ------------------------------------------------------ */

TEST(pack_unpack_round_trip) {
  static msgbuf mb;
  char *argv[] = {"/bin/sh", "-c", "echo 'hello world'", "", "with\nnewline", NULL};
  char *env[] = {"PATH=/usr/bin:/bin", "EMPTY=", "X=a=b", NULL};
  ssize_t n = pack_exec(&mb, sizeof mb, 0x1122334455667788ULL, "/workspace", argv, env, true);
  CHECK(n > (ssize_t)sizeof(struct ctl_exec));
  CHECK(mb.m.h.type == CTL_EXEC);
  CHECK(mb.m.h.len == (uint32_t)n);
  CHECK(mb.m.id == 0x1122334455667788ULL);
  CHECK(mb.m.argc == 5);
  CHECK(mb.m.envc == 3);
  CHECK(mb.m.nfds == 3);
  CHECK(mb.m.strings_len == (uint32_t)n - sizeof(struct ctl_exec));

  struct unpacked u;
  CHECK(unpack_exact(&mb, (size_t)n, &u) == 0);
  /* unpack_exact freed its copy; unpack in place to compare strings. */
  CHECK(unpack(&mb, (size_t)n, &u) == 0);
  CHECK_STR(u.cwd, "/workspace");
  for (int i = 0; i < 5; i++)
    CHECK_STR(u.argv[i], argv[i]);
  CHECK(u.argv[5] == NULL);
  for (int i = 0; i < 3; i++)
    CHECK_STR(u.env[i], env[i]);
  CHECK(u.env[3] == NULL);
  /* Pointers point into the message (in place, no copies). */
  const char *lo = (const char *)&mb, *hi = lo + n;
  CHECK(u.cwd >= lo && u.cwd < hi);
  CHECK(u.argv[4] >= lo && u.argv[4] < hi);
}

TEST(pack_unpack_empty_env_and_cwd) {
  static msgbuf mb;
  char *argv[] = {"true", NULL};
  char *noenv[] = {NULL};
  ssize_t n = pack_exec(&mb, sizeof mb, 1, "/", argv, noenv, false);
  CHECK(n == (ssize_t)(sizeof(struct ctl_exec) + 2 + 5));
  CHECK(mb.m.envc == 0);
  CHECK(mb.m.nfds == 0);
  struct unpacked u;
  CHECK(unpack(&mb, (size_t)n, &u) == 0);
  CHECK_STR(u.cwd, "/");
  CHECK_STR(u.argv[0], "true");
  CHECK(u.argv[1] == NULL);
  CHECK(u.env[0] == NULL);

  /* NULL env array and NULL cwd (packed as ""). */
  n = pack_exec(&mb, sizeof mb, 2, NULL, argv, NULL, false);
  CHECK(n == (ssize_t)(sizeof(struct ctl_exec) + 1 + 5));
  CHECK(unpack(&mb, (size_t)n, &u) == 0);
  CHECK_STR(u.cwd, "");
  CHECK(u.env[0] == NULL);

  /* Empty argv packs, but is not a valid request. */
  n = pack_exec(&mb, sizeof mb, 3, "/", NULL, NULL, false);
  CHECK(n == (ssize_t)(sizeof(struct ctl_exec) + 2));
  CHECK(mb.m.argc == 0);
  CHECK(unpack(&mb, (size_t)n, &u) == -EPROTO);
}

TEST(pack_capacity_edges) {
  static msgbuf mb;
  char *argv[] = {"abc", "de", NULL};
  char *env[] = {"K=v", NULL};
  const size_t need = sizeof(struct ctl_exec) + 2 + 4 + 3 + 4; /* "/" "abc" "de" "K=v" */
  CHECK(pack_exec(&mb, need, 9, "/", argv, env, true) == (ssize_t)need);
  struct unpacked u;
  CHECK(unpack(&mb, need, &u) == 0);
  /* One byte short anywhere fails with E2BIG, never a partial message. */
  for (size_t size = 0; size < need; size++) {
    unsigned char *b = malloc(size ? size : 1); /* exact size: ASan sees overflows */
    ssize_t r = pack_exec(b, size, 9, "/", argv, env, true);
    CHECK(r == -E2BIG);
    free(b);
  }
}

TEST(pack_too_large) {
  static msgbuf mb;
  char *big = malloc(100000);
  memset(big, 'a', 99999);
  big[99999] = '\0';
  char *argv[] = {"x", big, NULL};
  CHECK(pack_exec(&mb, sizeof mb, 1, "/", argv, NULL, false) == -E2BIG);
  char *env[] = {big, NULL};
  char *argv1[] = {"x", NULL};
  CHECK(pack_exec(&mb, sizeof mb, 1, "/", argv1, env, false) == -E2BIG);
  CHECK(pack_exec(&mb, sizeof mb, 1, big, argv1, NULL, false) == -E2BIG);
  /* Many small strings. */
  char **many = calloc(40001, sizeof *many);
  for (int i = 0; i < 40000; i++)
    many[i] = "ab";
  CHECK(pack_exec(&mb, sizeof mb, 1, "/", many, NULL, false) == -E2BIG);
  free(many);
  free(big);
}

TEST(unpack_capacity) {
  static msgbuf mb;
  struct unpacked u;
  char *argv[CAP + 1];
  for (int i = 0; i < CAP; i++)
    argv[i] = "a";
  /* argc == cap-1 fits (the NULL needs the last slot); argc == cap does not. */
  argv[CAP - 1] = NULL;
  ssize_t n = pack_exec(&mb, sizeof mb, 1, "/", argv, NULL, false);
  CHECK(unpack(&mb, (size_t)n, &u) == 0);
  CHECK(u.argv[CAP - 2] != NULL && u.argv[CAP - 1] == NULL);
  argv[CAP - 1] = "a";
  argv[CAP] = NULL;
  n = pack_exec(&mb, sizeof mb, 1, "/", argv, NULL, false);
  CHECK(unpack(&mb, (size_t)n, &u) == -EPROTO);

  char *one[] = {"a", NULL};
  argv[CAP - 1] = NULL;
  n = pack_exec(&mb, sizeof mb, 1, "/", one, argv, false); /* env of cap-1 */
  CHECK(unpack(&mb, (size_t)n, &u) == 0);
  CHECK(u.env[CAP - 2] != NULL && u.env[CAP - 1] == NULL);
  argv[CAP - 1] = "a";
  n = pack_exec(&mb, sizeof mb, 1, "/", one, argv, false); /* env of cap */
  CHECK(unpack(&mb, (size_t)n, &u) == -EPROTO);

  /* Zero capacity for env: even an empty env has no room for its NULL. */
  const char *cwd, *av[4], *ev[1];
  n = pack_exec(&mb, sizeof mb, 1, "/", one, NULL, false);
  CHECK(unpack_exec(&mb, (size_t)n, &cwd, av, 4, ev, 0) == -EPROTO);
  CHECK(unpack_exec(&mb, (size_t)n, &cwd, av, 1, ev, 1) == -EPROTO);
  CHECK(unpack_exec(&mb, (size_t)n, &cwd, av, 2, ev, 1) == 0);
}

TEST(unpack_rejects_malformed) {
  static msgbuf mb;
  struct unpacked u;
  size_t len;

  /* A valid baseline. */
  len = build_raw(&mb, 2, 1, "/\0a\0b\0E=1", 10);
  CHECK(unpack_exact(&mb, len, &u) == 0);

  /* Shorter than the fixed part. */
  for (size_t l = 0; l < sizeof(struct ctl_exec); l++)
    CHECK(unpack_exact(&mb, l, &u) == -EPROTO);

  /* Header len differs from the actual length. */
  len = build_raw(&mb, 2, 1, "/\0a\0b\0E=1", 10);
  mb.m.h.len++;
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);
  mb.m.h.len -= 2;
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);
  mb.m.h.len = 0xffffffff;
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);

  /* strings_len differs from the rest of the message. */
  len = build_raw(&mb, 2, 1, "/\0a\0b\0E=1", 10);
  mb.m.strings_len = 9;
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);
  mb.m.strings_len = 11;
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);
  mb.m.strings_len = 0xffffffff;
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);

  /* argc 0. */
  len = build_raw(&mb, 0, 0, "/\0", 2);
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);

  /* argc/envc beyond capacity, including values that overflow a sum. */
  len = build_raw(&mb, CAP, 0, "/\0a\0", 4);
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);
  len = build_raw(&mb, 0xffffffff, 0, "/\0a\0", 4);
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);
  len = build_raw(&mb, 1, CAP, "/\0a\0", 4);
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);
  len = build_raw(&mb, 1, 0xffffffff, "/\0a\0", 4);
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);

  /* Fewer strings than argc + envc + 1 (truncated string area). */
  len = build_raw(&mb, 3, 0, "/\0a\0b\0", 6);
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);
  len = build_raw(&mb, 1, 2, "/\0a\0E=1\0", 8);
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);
  len = build_raw(&mb, 1, 0, "", 0); /* no strings at all */
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);
  len = build_raw(&mb, 1, 0, "/", 1); /* cwd without NUL */
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);

  /* Last string without its NUL. */
  len = build_raw(&mb, 2, 1, "/\0a\0b\0E=1", 9);
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);
  len = build_raw(&mb, 1, 0, "/\0abc", 5);
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);

  /* Extra trailing bytes after the last string. */
  len = build_raw(&mb, 1, 0, "/\0a\0x", 5);
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);
  len = build_raw(&mb, 1, 0, "/\0a\0\0", 5); /* an extra empty string */
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);
  len = build_raw(&mb, 1, 0, "/\0a\0b\0", 6);
  CHECK(unpack_exact(&mb, len, &u) == -EPROTO);

  /* Empty strings are fine when counted. */
  len = build_raw(&mb, 2, 1, "\0\0\0\0", 4);
  CHECK(unpack_exact(&mb, len, &u) == 0);
}

/* ---- fuzz ----------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) { /* xorshift64*: deterministic */
  uint64_t x = rng_state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  rng_state = x;
  return x * 0x2545f4914f6cdd1dULL;
}

/* On success, every pointer must be inside the message and its string
 * terminated inside it. */
static bool unpack_result_sane(const unsigned char *msg, size_t len, const struct unpacked *u) {
  const struct ctl_exec *m = (const void *)msg;
  const char *lo = (const char *)msg + sizeof *m, *hi = (const char *)msg + len;
  if (m->argc == 0 || m->argc >= CAP || m->envc >= CAP)
    return false;
  if (!u->cwd || u->cwd < lo || u->cwd >= hi || !memchr(u->cwd, 0, (size_t)(hi - u->cwd)))
    return false;
  for (uint32_t i = 0; i < m->argc; i++)
    if (!u->argv[i] || u->argv[i] < lo || u->argv[i] >= hi ||
        !memchr(u->argv[i], 0, (size_t)(hi - u->argv[i])))
      return false;
  for (uint32_t i = 0; i < m->envc; i++)
    if (!u->env[i] || u->env[i] < lo || u->env[i] >= hi ||
        !memchr(u->env[i], 0, (size_t)(hi - u->env[i])))
      return false;
  return u->argv[m->argc] == NULL && u->env[m->envc] == NULL;
}

TEST(fuzz_unpack) {
  static msgbuf base;
  char *argv[] = {"/usr/bin/python3", "-c", "print(1)", NULL};
  char *env[] = {"HOME=/workspace", "LANG=C.UTF-8", NULL};
  ssize_t blen = pack_exec(&base, sizeof base, 5, "/workspace", argv, env, true);
  CHECK(blen > 0);
  unsigned accepted = 0, rejected = 0, bad = 0, bad_rc = 0;
  for (int iter = 0; iter < 20000; iter++) {
    size_t len;
    unsigned char *p;
    int kind = (int)(rnd() % 6);
    if (kind == 0) { /* pure random bytes, random length */
      len = (size_t)(rnd() % 200);
      p = malloc(len ? len : 1);
      for (size_t i = 0; i < len; i++)
        p[i] = (unsigned char)rnd();
      if (len >= sizeof(struct ctl_exec) && (rnd() & 1)) {
        /* make the length checks pass so the string walk is exercised */
        struct ctl_exec h;
        memcpy(&h, p, sizeof h);
        h.h.len = (uint32_t)len;
        h.strings_len = (uint32_t)(len - sizeof h);
        h.argc = (uint32_t)(rnd() % 6);
        h.envc = (uint32_t)(rnd() % 6);
        memcpy(p, &h, sizeof h);
      }
    } else {
      /* mutate a valid message: flips, truncation, extension, field edits */
      len = (size_t)blen;
      if (kind == 1)
        len = (size_t)(rnd() % (uint64_t)(blen + 1));
      else if (kind == 2)
        len = (size_t)blen + (size_t)(rnd() % 16);
      p = malloc(len ? len : 1);
      for (size_t i = 0; i < len; i++)
        p[i] = i < (size_t)blen ? base.b[i] : (unsigned char)rnd();
      int flips = (int)(rnd() % 4);
      for (int f = 0; f < flips && len; f++)
        p[rnd() % len] ^= (unsigned char)(1u << (rnd() % 8));
      if (len >= sizeof(struct ctl_exec)) {
        struct ctl_exec h;
        memcpy(&h, p, sizeof h);
        if (kind >= 2 || (rnd() & 1)) { /* keep lengths consistent */
          h.h.len = (uint32_t)len;
          h.strings_len = (uint32_t)(len - sizeof h);
        }
        if (kind == 3)
          h.argc = (uint32_t)(rnd() % 8);
        if (kind == 4)
          h.envc = (uint32_t)(rnd() % 8);
        if (kind == 5) { /* zero or NUL-ify string bytes */
          size_t off = sizeof h + (size_t)(rnd() % (len - sizeof h + 1));
          if (off < len)
            p[off] = (rnd() & 1) ? 0 : 'Z';
        }
        memcpy(p, &h, sizeof h);
      }
    }
    struct unpacked u;
    int rc = unpack(p, len, &u);
    if (rc == 0) {
      accepted++;
      if (!unpack_result_sane(p, len, &u))
        bad++;
    } else if (rc == -EPROTO) {
      rejected++;
    } else {
      bad_rc++;
    }
    free(p);
  }
  CHECK(bad == 0);
  CHECK(bad_rc == 0);
  CHECK(accepted > 100); /* the fuzz reaches the success path too */
  CHECK(rejected > 100);
  printf("#   fuzz: %u accepted, %u rejected\n", accepted, rejected);
}

/* ---- ctl_send / ctl_recv ------------------------------------------------- */

static void seqpair(int sv[2]) {
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
    perror("socketpair");
    abort();
  }
}

/* A pipe whose read end reports EOF only once every copy of the write end
 * is closed: a leak detector for passed fds. */
struct leakpipe {
  int r, w;
};
static void leakpipe_open(struct leakpipe *lp) {
  int p[2];
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
    abort();
  lp->r = p[0];
  lp->w = p[1];
}
/* After the caller closed its own copies: 1 if no write end is left open. */
static int leakpipe_all_closed(struct leakpipe *lp) {
  char c;
  ssize_t n = read(lp->r, &c, 1);
  int ok = n == 0;
  close(lp->r);
  return ok;
}

TEST(send_recv_with_three_fds) {
  int sv[2];
  seqpair(sv);
  static msgbuf mb;
  char *argv[] = {"ls", "-l", NULL};
  ssize_t n = pack_exec(&mb, sizeof mb, 42, "/tmp", argv, NULL, true);
  int p0[2], p1[2], p2[2];
  CHECK(pipe(p0) == 0 && pipe(p1) == 0 && pipe(p2) == 0);
  int fds[3] = {p0[0], p1[1], p2[1]};
  CHECK(send_msg(sv[0], &mb, (size_t)n, fds, 3) == 0);

  static msgbuf rb;
  int got[3] = {-1, -1, -1};
  size_t nfds = 3;
  ssize_t r = recv_msg(sv[1], &rb, sizeof rb, got, &nfds);
  CHECK(r == n);
  CHECK(nfds == 3);
  CHECK(memcmp(&rb, &mb, (size_t)n) == 0);
  for (int i = 0; i < 3; i++) {
    struct stat a, b;
    CHECK(got[i] >= 0 && got[i] != fds[i]);
    CHECK(fstat(got[i], &a) == 0 && fstat(fds[i], &b) == 0);
    CHECK(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
    CHECK(fcntl(got[i], F_GETFD) & FD_CLOEXEC); /* received close-on-exec */
  }
  /* The received fds work: write through the passed write end. */
  CHECK(write(got[1], "x", 1) == 1);
  char c = 0;
  CHECK(read(p1[0], &c, 1) == 1 && c == 'x');

  struct unpacked u;
  CHECK(unpack(&rb, (size_t)r, &u) == 0);
  CHECK_STR(u.cwd, "/tmp");
  CHECK_STR(u.argv[1], "-l");
  CHECK(rb.m.nfds == 3);

  for (int i = 0; i < 3; i++)
    close(got[i]);
  close(p0[0]), close(p0[1]), close(p1[0]), close(p1[1]), close(p2[0]), close(p2[1]);
  close(sv[0]);
  close(sv[1]);
}

TEST(recv_more_fds_than_wanted) {
  int sv[2];
  seqpair(sv);
  struct ctl_hdr h = {.type = CTL_READY, .len = sizeof h};
  for (size_t want = 0; want <= 3; want++) {
    struct leakpipe lp;
    leakpipe_open(&lp);
    int w[3] = {lp.w, dup(lp.w), dup(lp.w)};
    CHECK(send_msg(sv[0], &h, sizeof h, w, 3) == 0);
    for (int i = 0; i < 3; i++)
      close(w[i]);
    int got[3] = {-1, -1, -1};
    size_t nfds = want;
    struct ctl_hdr rh;
    CHECK(recv_msg(sv[1], &rh, sizeof rh, got, &nfds) == (ssize_t)sizeof h);
    CHECK(nfds == want);
    for (size_t i = 0; i < want; i++) {
      CHECK(fd_is_open(got[i]));
      close(got[i]);
    }
    for (size_t i = want; i < 3; i++)
      CHECK(got[i] == -1); /* untouched beyond what was wanted */
    CHECK(leakpipe_all_closed(&lp)); /* the extras were closed */
  }
  /* nfds == NULL: take no fds at all. */
  struct leakpipe lp;
  leakpipe_open(&lp);
  int w[2] = {lp.w, dup(lp.w)};
  CHECK(send_msg(sv[0], &h, sizeof h, w, 2) == 0);
  close(w[0]);
  close(w[1]);
  struct ctl_hdr rh;
  CHECK(recv_msg(sv[1], &rh, sizeof rh, NULL, NULL) == (ssize_t)sizeof h);
  CHECK(leakpipe_all_closed(&lp));
  close(sv[0]);
  close(sv[1]);
}

TEST(recv_no_fds_sent) {
  int sv[2];
  seqpair(sv);
  struct ctl_signal s = {.h = {.type = CTL_SIGNAL, .len = sizeof s}, .pid = 7, .sig = 15, .group = 1};
  CHECK(send_msg(sv[0], &s, sizeof s, NULL, 0) == 0);
  int got[3] = {-1, -1, -1};
  size_t nfds = 3;
  struct ctl_signal r;
  CHECK(recv_msg(sv[1], &r, sizeof r, got, &nfds) == (ssize_t)sizeof s);
  CHECK(nfds == 0);
  CHECK(r.pid == 7 && r.sig == 15 && r.group == 1);
  close(sv[0]);
  close(sv[1]);
}

TEST(send_rejects_too_many_fds) {
  int sv[2];
  seqpair(sv);
  struct ctl_hdr h = {.type = CTL_READY, .len = sizeof h};
  int fds[CTL_MAX_FDS + 1] = {0};
  CHECK(send_msg(sv[0], &h, sizeof h, fds, CTL_MAX_FDS + 1) == -EINVAL);
  /* Nothing was sent. */
  CHECK(fcntl(sv[1], F_SETFL, O_NONBLOCK) == 0);
  struct ctl_hdr rh;
  CHECK(recv_msg(sv[1], &rh, sizeof rh, NULL, NULL) == -EAGAIN);
  close(sv[0]);
  close(sv[1]);
}

TEST(send_to_closed_peer) {
  int sv[2];
  seqpair(sv);
  close(sv[1]);
  struct ctl_hdr h = {.type = CTL_READY, .len = sizeof h};
  /* MSG_NOSIGNAL: an error, not a SIGPIPE. */
  CHECK(send_msg(sv[0], &h, sizeof h, NULL, 0) == -EPIPE);
  CHECK(send_msg(-1, &h, sizeof h, NULL, 0) == -EBADF);
  close(sv[0]);
}

TEST(recv_short_message) {
  int sv[2];
  seqpair(sv);
  for (size_t len = 1; len < sizeof(struct ctl_hdr); len++) {
    struct leakpipe lp;
    leakpipe_open(&lp);
    unsigned char raw[8] = {CTL_READY, 0, 0, 0, (unsigned char)len, 0, 0, 0};
    CHECK(send_msg(sv[0], raw, len, &lp.w, 1) == 0);
    close(lp.w);
    int got[3] = {-1, -1, -1};
    size_t nfds = 3;
    union {
      struct ctl_hdr h;
      unsigned char b[64];
    } rb;
    CHECK(recv_msg(sv[1], &rb, sizeof rb, got, &nfds) == -EPROTO);
    CHECK(nfds == 0);
    CHECK(leakpipe_all_closed(&lp));
  }
  close(sv[0]);
  close(sv[1]);
}

TEST(recv_header_len_mismatch) {
  int sv[2];
  seqpair(sv);
  uint32_t lens[] = {0, 1, 8, 15, 17, 32, 0xffffffff};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    struct leakpipe lp;
    leakpipe_open(&lp);
    union {
      struct ctl_hdr h;
      unsigned char b[16];
    } m = {.h = {.type = CTL_EXITED, .len = lens[i]}};
    CHECK(send_msg(sv[0], &m, sizeof m, &lp.w, 1) == 0);
    close(lp.w);
    int got[3] = {-1, -1, -1};
    size_t nfds = 3;
    union {
      struct ctl_hdr h;
      unsigned char b[64];
    } rb;
    CHECK(recv_msg(sv[1], &rb, sizeof rb, got, &nfds) == -EPROTO);
    CHECK(nfds == 0);
    CHECK(leakpipe_all_closed(&lp));
  }
  /* The stream stays usable: packet boundaries are kept. */
  struct ctl_hdr h = {.type = CTL_READY, .len = sizeof h};
  CHECK(send_msg(sv[0], &h, sizeof h, NULL, 0) == 0);
  struct ctl_hdr rh;
  CHECK(recv_msg(sv[1], &rh, sizeof rh, NULL, NULL) == (ssize_t)sizeof h);
  close(sv[0]);
  close(sv[1]);
}

TEST(recv_truncated_message) {
  int sv[2];
  seqpair(sv);
  struct leakpipe lp;
  leakpipe_open(&lp);
  union {
    struct ctl_hdr h;
    unsigned char b[128];
  } m;
  memset(&m, 'q', sizeof m);
  m.h.type = CTL_SETUP_ERROR;
  m.h.len = sizeof m;
  int w[3] = {lp.w, dup(lp.w), dup(lp.w)};
  CHECK(send_msg(sv[0], &m, sizeof m, w, 3) == 0);
  for (int i = 0; i < 3; i++)
    close(w[i]);
  int got[3] = {-1, -1, -1};
  size_t nfds = 3;
  union {
    struct ctl_hdr h;
    unsigned char b[64];
  } rb;
  CHECK(recv_msg(sv[1], &rb, sizeof rb, got, &nfds) == -EMSGSIZE);
  CHECK(nfds == 0);
  CHECK(leakpipe_all_closed(&lp));
  /* The rest of that packet is discarded; the next message is intact. */
  struct ctl_hdr h = {.type = CTL_READY, .len = sizeof h};
  CHECK(send_msg(sv[0], &h, sizeof h, NULL, 0) == 0);
  CHECK(recv_msg(sv[1], &rb, sizeof rb, NULL, NULL) == (ssize_t)sizeof h);
  CHECK(rb.h.type == CTL_READY);
  close(sv[0]);
  close(sv[1]);
}

/* More fds than the receive control buffer holds (a raw sender, not
 * ctl_send): MSG_CTRUNC, reported as -EMSGSIZE, nothing leaked. */
TEST(recv_control_truncated) {
  int sv[2];
  seqpair(sv);
  struct leakpipe lp;
  leakpipe_open(&lp);
  enum { N = CTL_MAX_FDS + 6 };
  int w[N];
  w[0] = lp.w;
  for (int i = 1; i < N; i++)
    w[i] = dup(lp.w);
  struct ctl_hdr h = {.type = CTL_READY, .len = sizeof h};
  struct iovec iov = {.iov_base = &h, .iov_len = sizeof h};
  union {
    char buf[CMSG_SPACE(sizeof(int) * N)];
    struct cmsghdr align;
  } u;
  memset(&u, 0, sizeof u);
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                      .msg_controllen = sizeof u.buf};
  struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * N);
  memcpy(CMSG_DATA(c), w, sizeof w);
  CHECK(sendmsg(sv[0], &mh, 0) == (ssize_t)sizeof h);
  for (int i = 0; i < N; i++)
    close(w[i]);
  int got[3] = {-1, -1, -1};
  size_t nfds = 3;
  struct ctl_hdr rh;
  CHECK(recv_msg(sv[1], &rh, sizeof rh, got, &nfds) == -EMSGSIZE);
  CHECK(nfds == 0);
  CHECK(leakpipe_all_closed(&lp));
  close(sv[0]);
  close(sv[1]);
}

TEST(recv_eof) {
  int sv[2];
  seqpair(sv);
  close(sv[0]);
  int got[3] = {-1, -1, -1};
  size_t nfds = 3;
  struct ctl_hdr rh;
  CHECK(recv_msg(sv[1], &rh, sizeof rh, got, &nfds) == 0);
  CHECK(nfds == 0);
  CHECK(recv_msg(sv[1], &rh, sizeof rh, got, &nfds) == 0); /* stays at EOF */
  close(sv[1]);
  CHECK(recv_msg(-1, &rh, sizeof rh, got, &nfds) == -EBADF);
}

/* An empty packet is not a message.  If it carries fds, ctl_recv must not
 * hand them to a caller that will treat the 0 return as EOF (init's loop
 * skips its close loop on n == 0): either the fds are closed, or the packet
 * is rejected as malformed. */
TEST(recv_empty_packet_with_fds) {
  int sv[2];
  seqpair(sv);
  struct leakpipe lp;
  leakpipe_open(&lp);
  char dummy = 0;
  CHECK(send_msg(sv[0], &dummy, 0, &lp.w, 1) == 0);
  close(lp.w);
  int got[3] = {-1, -1, -1};
  size_t nfds = 3;
  struct ctl_hdr rh;
  ssize_t r = recv_msg(sv[1], &rh, sizeof rh, got, &nfds);
  CHECK(r == 0 || r == -EPROTO);
  CHECK(nfds == 0);
  if (nfds > 0) {
    printf("#   ctl_recv returned %zd with %zu fds for an empty packet\n", r, nfds);
    for (size_t i = 0; i < nfds && i < 3; i++)
      close(got[i]);
  }
  CHECK(leakpipe_all_closed(&lp));
  close(sv[0]);
  close(sv[1]);
}

TEST(end_to_end_exec_request) {
  int sv[2];
  seqpair(sv);
  static msgbuf mb, rb;
  char *argv[] = {"/bin/echo", "hi", NULL};
  char *env[] = {"A=1", NULL};
  for (int round = 0; round < 50; round++) {
    ssize_t n = pack_exec(&mb, sizeof mb, (uint64_t)round, "/workspace", argv, env, round & 1);
    int fds[3] = {0, 1, 2};
    CHECK(send_msg(sv[0], &mb, (size_t)n, fds, (round & 1) ? 3 : 0) == 0);
    int got[3] = {-1, -1, -1};
    size_t nfds = 3;
    ssize_t r = recv_msg(sv[1], &rb, sizeof rb, got, &nfds);
    CHECK(r == n);
    CHECK(nfds == ((round & 1) ? 3u : 0u));
    struct unpacked u;
    CHECK(unpack(&rb, (size_t)r, &u) == 0);
    CHECK(rb.m.id == (uint64_t)round);
    CHECK(rb.m.nfds == nfds);
    CHECK_STR(u.argv[0], "/bin/echo");
    CHECK_STR(u.env[0], "A=1");
    for (size_t i = 0; i < nfds; i++)
      close(got[i]);
  }
  close(sv[0]);
  close(sv[1]);
}

/* ---- a real init: exits kept until acknowledged ----------------------------
 */

/* init_main in a child process: no box around it, but the same protocol.
 * Its programs drop to the box uid, which needs root. */
struct test_init {
  pid_t pid;
  int ctl; /* the connection it was started with */
  char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

#define INIT_WAIT_MS 20000 /* a liveness bound: init answers long before */

static ssize_t recv_wait(int fd, void *buf, size_t size) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  int r;
  do
    r = poll(&p, 1, INIT_WAIT_MS);
  while (r < 0 && errno == EINTR);
  if (r <= 0)
    return -ETIMEDOUT;
  return recv_msg(fd, buf, size, NULL, NULL);
}

static bool init_start(struct test_init *ti, int sndbuf) {
  static unsigned n;
  int sv[2];
  seqpair(sv);
  if (sndbuf > 0 &&
      setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf) < 0)
    return false;
  snprintf(ti->path, sizeof ti->path, "/tmp/husk-test-ctl-%d-%u.sock",
           (int)getpid(), n++);
  unlink(ti->path);
  int l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  memcpy(a.sun_path, ti->path, strlen(ti->path) + 1);
  if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 ||
      listen(l, 16) < 0)
    return false;
  ti->pid = fork();
  if (ti->pid < 0)
    return false;
  if (ti->pid == 0) {
    close(sv[0]);
    struct init_config cfg = {
        .ctl = sv[1], .listen = l, .fs = -1, .landlock_abi = 0};
    init_main(&cfg);
  }
  close(sv[1]);
  close(l);
  ti->ctl = sv[0];
  struct ctl_hdr h;
  return recv_wait(ti->ctl, &h, sizeof h) == (ssize_t)sizeof h &&
         h.type == CTL_READY;
}

static void init_stop(struct test_init *ti) {
  if (ti->pid > 0) {
    kill(ti->pid, SIGKILL);
    waitpid(ti->pid, NULL, 0);
  }
  close(ti->ctl);
  unlink(ti->path);
}

static int init_connect(const struct test_init *ti) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  memcpy(a.sun_path, ti->path, strlen(ti->path) + 1);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
    abort();
  return fd;
}

/* Start `sh -c script` with stdin from `in` (or /dev/null); its pid, or 0. */
static pid_t init_exec(int fd, uint64_t id, const char *script, int in,
                       uint32_t flags) {
  static msgbuf mb;
  char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
  char *env[] = {"PATH=/usr/bin:/bin", NULL};
  ssize_t n = pack_exec(&mb, sizeof mb, id, "/", argv, env, in >= 0);
  if (n < 0)
    return 0;
  mb.m.flags = flags;
  int fds[3] = {in, 2, 2};
  if (send_msg(fd, &mb, (size_t)n, fds, in >= 0 ? 3 : 0) < 0)
    return 0;
  struct ctl_started st;
  if (recv_wait(fd, &st, sizeof st) != (ssize_t)sizeof st ||
      st.h.type != CTL_STARTED || st.error)
    return 0;
  return st.pid;
}

static bool send_hdr(int fd, uint32_t type) {
  struct ctl_hdr h = {.type = type, .len = sizeof h};
  return send_msg(fd, &h, sizeof h, NULL, 0) == 0;
}

static bool send_ack(int fd, uint64_t id, pid_t pid) {
  struct ctl_exit_ack a = {
      .h = {.type = CTL_EXIT_ACK, .len = sizeof a}, .id = id, .pid = pid};
  return send_msg(fd, &a, sizeof a, NULL, 0) == 0;
}

/* The next message: an exit (*e filled, returns CTL_EXITED), the answer to
 * CTL_HELLO (CTL_HELLO), or 0 on anything else or nothing. */
static uint32_t next_msg(int fd, struct ctl_exited *e) {
  union {
    struct ctl_exited e;
    struct ctl_hello h;
  } u;
  ssize_t n = recv_wait(fd, &u, sizeof u);
  if (n == (ssize_t)sizeof u.e && u.e.h.type == CTL_EXITED) {
    *e = u.e;
    return CTL_EXITED;
  }
  if (n == (ssize_t)sizeof u.h && u.h.h.type == CTL_HELLO &&
      u.h.version == CTL_VERSION)
    return CTL_HELLO;
  return 0;
}

/* Everything sent on fd before is handled once this returns true. */
static bool barrier(int fd) {
  struct ctl_exited e;
  return send_hdr(fd, CTL_HELLO) && next_msg(fd, &e) == CTL_HELLO;
}

/* On a new watch connection: the exits init still holds, then the answer
 * to a CTL_HELLO sent after the watch (init serves a connection in order). */
static size_t watch_and_collect(int fd, struct ctl_exited *out, size_t cap) {
  if (!send_hdr(fd, CTL_WATCH) || !send_hdr(fd, CTL_HELLO))
    return (size_t)-1;
  size_t n = 0;
  struct ctl_exited e;
  for (;;) {
    uint32_t t = next_msg(fd, &e);
    if (t == CTL_HELLO)
      return n;
    if (t != CTL_EXITED || n == cap)
      return (size_t)-1;
    out[n++] = e;
  }
}

static const struct ctl_exited *find_exit(const struct ctl_exited *v, size_t n,
                                          uint64_t id) {
  for (size_t i = 0; i < n; i++)
    if (v[i].id == id)
      return &v[i];
  return NULL;
}

TEST(init_keeps_exits_until_acked) {
  if (geteuid() != 0) {
    printf("#   skipped: needs root (programs drop to the box uid)\n");
    return;
  }
  struct test_init ti;
  CHECK(init_start(&ti, 0));
  CHECK(send_hdr(ti.ctl, CTL_HELLO) &&
        next_msg(ti.ctl, &(struct ctl_exited){0}) == CTL_HELLO);

  /* 1 ends while its connection is there: it hears the exit first. */
  int c1 = init_connect(&ti);
  pid_t p1 = init_exec(c1, 1, "exit 7", -1, CTL_EXEC_ACK_EXIT);
  CHECK(p1 > 0);
  struct ctl_exited e;
  CHECK(next_msg(c1, &e) == CTL_EXITED && e.id == 1 && e.pid == p1 &&
        WEXITSTATUS(e.status) == 7);
  close(c1); /* as if the daemon died before recording it */

  /* 2 (acknowledged) and 3 (not) end with nobody connected. */
  int c2 = init_connect(&ti);
  int in[2];
  CHECK(pipe2(in, O_CLOEXEC) == 0);
  pid_t p2 = init_exec(c2, 2, "read x; exit 9", in[0], CTL_EXEC_ACK_EXIT);
  pid_t p3 = init_exec(c2, 3, "read x; exit 5", in[0], 0);
  CHECK(p2 > 0 && p3 > 0);
  close(in[0]);
  close(c2);
  close(in[1]);

  /* A watch gets all three (the third may still be ending: wait for it). */
  struct ctl_exited got[8];
  int w1 = init_connect(&ti);
  CHECK(send_hdr(w1, CTL_WATCH));
  size_t n = 0;
  while (n < 3 && next_msg(w1, &got[n]) == CTL_EXITED)
    n++;
  CHECK(n == 3);
  const struct ctl_exited *x1 = find_exit(got, n, 1),
                          *x2 = find_exit(got, n, 2),
                          *x3 = find_exit(got, n, 3);
  CHECK(x1 && x1->pid == p1 && WEXITSTATUS(x1->status) == 7);
  CHECK(x2 && x2->pid == p2 && WEXITSTATUS(x2->status) == 9);
  CHECK(x3 && x3->pid == p3 && WEXITSTATUS(x3->status) == 5);
  CHECK(send_ack(w1, 1, p1));
  CHECK(send_ack(w1, 2, p1));  /* names no exit: ignored */
  CHECK(send_ack(w1, 77, p2)); /* wrong id: ignored */
  CHECK(barrier(
      w1)); /* init serves connections in turn: let it take the acks first */
  close(w1);

  /* The next watch: only 2 (1 was acknowledged, 3 needs none). */
  int w2 = init_connect(&ti);
  n = watch_and_collect(w2, got, 8);
  CHECK(n == 1 && got[0].id == 2 && got[0].pid == p2 &&
        WEXITSTATUS(got[0].status) == 9);
  close(w2);
  /* Again: unacknowledged exits are re-sent to every new watch. */
  int w3 = init_connect(&ti);
  n = watch_and_collect(w3, got, 8);
  CHECK(n == 1 && got[0].id == 2);
  CHECK(send_ack(w3, 2, p2));
  CHECK(barrier(w3));
  int w4 = init_connect(&ti);
  n = watch_and_collect(w4, got, 8);
  CHECK(n == 0);
  close(w3);
  close(w4);
  init_stop(&ti);
}

/* Many exits to a watch connection nobody reads: init keeps serving the
 * others, and hands every exit over once the reader is back. */
TEST(init_never_blocks_on_the_watch) {
  if (geteuid() != 0) {
    printf("#   skipped: needs root (programs drop to the box uid)\n");
    return;
  }
  enum { N = 64 };
  struct test_init ti;
  CHECK(init_start(&ti,
                   1)); /* the smallest send buffer: a few messages fill it */
  CHECK(send_hdr(ti.ctl, CTL_WATCH));
  int c = init_connect(&ti);
  int in[2];
  CHECK(pipe2(in, O_CLOEXEC) == 0);
  pid_t pids[N + 1] = {0};
  for (uint64_t id = 1; id <= N; id++)
    if ((pids[id] = init_exec(c, id, "read x; exit 3", in[0],
                              CTL_EXEC_ACK_EXIT)) <= 0) {
      CHECK(!"init starts the program");
      break;
    }
  close(in[0]);
  close(c); /* their exits go to the watch */
  close(in[1]);
  /* Every exit has happened once every pid is gone from init's children:
   * init reaps them, so /proc shows no such process under it. */
  for (uint64_t id = 1; id <= N; id++) {
    for (int k = 0; k < INIT_WAIT_MS / 10 && kill(pids[id], 0) == 0; k++)
      usleep(10000);
  }
  int other = init_connect(&ti);
  CHECK(send_hdr(other, CTL_HELLO) &&
        next_msg(other, &(struct ctl_exited){0}) == CTL_HELLO);
  close(other);
  bool seen[N + 1] = {false};
  size_t n = 0, bad = 0;
  struct ctl_exited e;
  while (n < N && next_msg(ti.ctl, &e) == CTL_EXITED) {
    if (e.id < 1 || e.id > N || seen[e.id] || e.pid != pids[e.id] ||
        WEXITSTATUS(e.status) != 3)
      bad++;
    else
      seen[e.id] = true;
    n++;
    CHECK(send_ack(ti.ctl, e.id, e.pid));
  }
  CHECK(n == N);
  CHECK(bad == 0);
  CHECK(barrier(ti.ctl));
  /* All acknowledged: a new watch gets nothing. */
  int w = init_connect(&ti);
  struct ctl_exited got[4];
  CHECK(watch_and_collect(w, got, 4) == 0);
  close(w);
  init_stop(&ti);
}

/* A setup failure, reported from a child as the jail's child reports one
 * (ctl_setup_error_exit): the host reads its errno and its whole message,
 * or, when the message is longer than CTL_SETUP_ERROR holds, its start
 * marked as cut; the child exits 125. */
TEST(setup_error_reaches_the_host) {
  for (int round = 0; round < 2; round++) {
    int sv[2];
    seqpair(sv);
    pid_t p = fork();
    CHECK(p >= 0);
    if (p == 0) {
      struct husk_err e;
      char big[800];
      memset(big, 'x', sizeof big - 1);
      big[sizeof big - 1] = '\0';
      if (round == 0)
        husk_error(&e, EPERM, "cannot mount proc on `%s`", "/proc");
      else
        husk_fail(&e, ENOSPC, "%s", big);
      ctl_setup_error_exit(sv[0], &e);
    }
    close(sv[0]);
    union jail_event ev;
    struct husk_err err;
    CHECK(jail_recv_fd(sv[1], &ev, &err) == 1);
    CHECK(ev.h.type == CTL_SETUP_ERROR);
    const char *text = ev.setup_error.text;
    if (round == 0) {
      CHECK(ev.setup_error.error == EPERM);
      CHECK_STR(text, "cannot mount proc on `/proc`: Operation not permitted");
    } else {
      size_t n = strlen(text);
      CHECK(ev.setup_error.error == ENOSPC);
      CHECK(n == sizeof ev.setup_error.text - 1);
      CHECK(n > 3 && !strcmp(text + n - 3, "...") && text[0] == 'x');
    }
    int st = 0;
    CHECK(waitpid(p, &st, 0) == p);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 125);
    close(sv[1]);
  }
}

/* Init keeps a process's host-side pipe ends (CTL_HOLD): with every copy
 * of ours closed the program still reads no end of file, and a new
 * connection takes the ends up again (CTL_GET_HELD), which makes it the
 * connection the exit is reported on.  The program gets fds 3..5; an ended
 * program's ends are gone (ESRCH). */
TEST(init_holds_pipes_for_the_next_host) {
  struct test_init ti;
  CHECK(init_start(&ti, 0));
  int to[2], from[2];
  CHECK(pipe2(to, O_CLOEXEC) == 0 && pipe2(from, O_CLOEXEC) == 0);
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  CHECK(null >= 0);
  static msgbuf mb;
  char *argv[] = {"/bin/sh", "-c",
                  "echo up:$(ls /proc/self/fd | grep -c '^[345]$') >&4; read x <&3; "
                  "echo got:$x >&4; exit 7",
                  NULL};
  char *env[] = {"PATH=/usr/bin:/bin", NULL};
  struct husk_err err;
  ssize_t n = ctl_pack_exec(&mb, sizeof mb, 77, "/", argv, env, 6, &err);
  CHECK(n > 0);
  int fds[6] = {null, 2, 2, to[0], from[1], null};
  CHECK(send_msg(ti.ctl, &mb, (size_t)n, fds, 6) == 0);
  struct ctl_started st;
  CHECK(recv_wait(ti.ctl, &st, sizeof st) == (ssize_t)sizeof st);
  CHECK(st.h.type == CTL_STARTED && st.error == 0 && st.pid > 0);
  int keep[2] = {to[1], from[0]};
  CHECK(jail_hold_fds(ti.ctl, 77, st.pid, keep, 2, &err) == 0);
  /* Ours all go, as in a daemon that died. */
  close(to[0]);
  close(to[1]);
  close(from[1]);
  close(null);
  char buf[64];
  ssize_t r = read(from[0], buf, sizeof buf);
  CHECK(r > 0 && !strncmp(buf, "up:3\n", (size_t)r));
  close(from[0]);
  close(ti.ctl);
  ti.ctl = -1;
  int c2 = init_connect(&ti);
  int back[2] = {-1, -1};
  CHECK(jail_get_held(c2, 78, st.pid, back, 2, &err) == -1 && err.code == ESRCH);
  CHECK(jail_get_held(c2, 77, st.pid, back, 1, &err) == -1 && err.code == EPROTO);
  CHECK(jail_get_held(c2, 77, st.pid, back, 2, &err) == 0);
  CHECK(write(back[0], "hello\n", 6) == 6);
  struct pollfd p = {.fd = back[1], .events = POLLIN};
  CHECK(poll(&p, 1, INIT_WAIT_MS) == 1);
  r = read(back[1], buf, sizeof buf);
  CHECK(r > 0 && !strncmp(buf, "got:hello\n", (size_t)r));
  /* Its exit comes on the connection that took it up. */
  struct ctl_exited e;
  CHECK(recv_wait(c2, &e, sizeof e) == (ssize_t)sizeof e);
  CHECK(e.h.type == CTL_EXITED && e.pid == st.pid && e.id == 77);
  CHECK(WIFEXITED(e.status) && WEXITSTATUS(e.status) == 7);
  CHECK(jail_get_held(c2, 77, st.pid, back + 0, 2, &err) == -1 && err.code == ESRCH);
  close(back[0]);
  close(back[1]);
  close(c2);
  init_stop(&ti);
}

TEST(stage_names) {
  CHECK_STR(ctl_stage_name(CTL_STAGE_FORK), "fork");
  CHECK_STR(ctl_stage_name(CTL_STAGE_CWD), "working directory");
  CHECK_STR(ctl_stage_name(CTL_STAGE_EXEC), "exec");
  CHECK_STR(ctl_stage_name(CTL_STAGE_SETUP), "process setup");
  CHECK_STR(ctl_stage_name(CTL_STAGE_NONE), "unknown");
  CHECK_STR(ctl_stage_name(-1), "unknown");
  CHECK_STR(ctl_stage_name(1000), "unknown");
}

int main(void) {
  /* SIGPIPE keeps its default action on purpose: send_to_closed_peer
   * checks that ctl_send uses MSG_NOSIGNAL. */
  signal(SIGPIPE, SIG_DFL);
  RUN(pack_unpack_round_trip);
  RUN(pack_unpack_empty_env_and_cwd);
  RUN(pack_capacity_edges);
  RUN(pack_too_large);
  RUN(unpack_capacity);
  RUN(unpack_rejects_malformed);
  RUN(fuzz_unpack);
  RUN(send_recv_with_three_fds);
  RUN(recv_more_fds_than_wanted);
  RUN(recv_no_fds_sent);
  RUN(send_rejects_too_many_fds);
  RUN(init_holds_pipes_for_the_next_host);
  RUN(send_to_closed_peer);
  RUN(recv_short_message);
  RUN(recv_header_len_mismatch);
  RUN(recv_truncated_message);
  RUN(recv_control_truncated);
  RUN(recv_eof);
  RUN(recv_empty_packet_with_fds);
  RUN(end_to_end_exec_request);
  RUN(stage_names);
  RUN(setup_error_reaches_the_host);
  RUN(init_keeps_exits_until_acked);
  RUN(init_never_blocks_on_the_watch);
  return unit_done();
}
