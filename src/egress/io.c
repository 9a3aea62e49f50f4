/* A proxied connection's I/O, both ways (the box's socket and the
 * upstream's, plain or TLS), bounded by the connection's deadlines: the
 * idle time between two bytes and the total time of the connection.  The
 * tunnel, plain HTTP and inject mode all read and write through here. */
#define _GNU_SOURCE
#include <errno.h>
#include <openssl/err.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "egress/proxy_internal.h"
#include "util/clock.h"

int egress_io_remaining(const struct conn *c) {
  int64_t left = c->deadline - mono_ms();
  unsigned idle = c->e->cfg.idle_ms;
  if (left <= 0)
    return 0;
  return left < idle ? (int)left : (int)idle;
}

ssize_t egress_io_read(struct conn *c, struct io *io, void *buf, size_t n) {
  if (io->ssl) {
    if (!SSL_pending(io->ssl)) {
      struct pollfd p = {.fd = io->fd, .events = POLLIN};
      int t = egress_io_remaining(c);
      if (t == 0 || poll(&p, 1, t) <= 0)
        return -1;
    }
    int r = SSL_read(io->ssl, buf, (int)(n > INT32_MAX ? INT32_MAX : n));
    if (r > 0)
      return r;
    int e = SSL_get_error(io->ssl, r);
    return e == SSL_ERROR_ZERO_RETURN ? 0 : (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 ? 0 : -1);
  }
  for (;;) {
    struct pollfd p = {.fd = io->fd, .events = POLLIN};
    int t = egress_io_remaining(c);
    if (t == 0)
      return -1;
    int pr = poll(&p, 1, t);
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr <= 0)
      return -1;
    ssize_t r = recv(io->fd, buf, n, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    return r;
  }
}

int egress_io_write_all(struct conn *c, struct io *io, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    if (io->ssl) {
      int w = SSL_write(io->ssl, p, (int)(n > INT32_MAX ? INT32_MAX : n));
      if (w <= 0)
        return -1;
      p += w;
      n -= (size_t)w;
      continue;
    }
    ssize_t w = send(io->fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && errno == EAGAIN) {
      struct pollfd pf = {.fd = io->fd, .events = POLLOUT};
      int t = egress_io_remaining(c);
      if (t == 0 || poll(&pf, 1, t) <= 0)
        return -1;
      continue;
    }
    if (w <= 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int egress_io_wait(struct conn *c, struct io *a, struct io *b, int *ra, int *rb) {
  *ra = a->ssl && SSL_pending(a->ssl);
  *rb = b->ssl && SSL_pending(b->ssl);
  if (*ra || *rb)
    return 1;
  for (;;) {
    struct pollfd p[2] = {{.fd = a->fd, .events = POLLIN}, {.fd = b->fd, .events = POLLIN}};
    int t = egress_io_remaining(c);
    if (t == 0)
      return 0;
    int pr = poll(p, 2, t);
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr <= 0)
      return 0;
    *ra = p[0].revents != 0;
    *rb = p[1].revents != 0;
    return 1;
  }
}

void egress_io_relay(struct conn *c) {
  char buf[65536];
  for (;;) {
    int ra, rb;
    if (!egress_io_wait(c, &c->box, &c->up, &ra, &rb))
      return;
    if (ra) {
      ssize_t r = egress_io_read(c, &c->box, buf, sizeof buf);
      if (r <= 0 || egress_io_write_all(c, &c->up, buf, (size_t)r) < 0)
        return;
      c->bytes_up += (uint64_t)r;
    }
    if (rb) {
      ssize_t r = egress_io_read(c, &c->up, buf, sizeof buf);
      if (r <= 0 || egress_io_write_all(c, &c->box, buf, (size_t)r) < 0)
        return;
      c->bytes_down += (uint64_t)r;
    }
  }
}

void egress_reply(struct conn *c, int status, const char *reason) {
  /* The reason is cut to what fits twice (status line and body) in the
   * buffer: a longer one must not make the write run past it. */
  char buf[256];
  int rl = (int)strnlen(reason, 80);
  int n = snprintf(buf, sizeof buf,
                   "HTTP/1.1 %d %.*s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                   "Connection: close\r\n\r\n%.*s\n",
                   status, rl, reason, rl + 1, rl, reason);
  if (n < 0 || (size_t)n >= sizeof buf)
    return;
  if (egress_io_write_all(c, &c->box, buf, (size_t)n) < 0 || c->box.ssl)
    return;
  /* Close gracefully: a client still sending (an oversize head) would
   * get a reset, and lose this reply, if we closed with unread data. */
  shutdown(c->box.fd, SHUT_WR);
  char sink[4096];
  size_t drained = 0;
  int64_t until = mono_ms() + 1000;
  while (drained < 256 * 1024 && mono_ms() < until) {
    struct pollfd p = {.fd = c->box.fd, .events = POLLIN};
    if (poll(&p, 1, 200) <= 0)
      break;
    ssize_t r = recv(c->box.fd, sink, sizeof sink, MSG_DONTWAIT);
    if (r <= 0)
      break;
    drained += (size_t)r;
  }
}
