/* A proxied connection's life: accepted on one of its box's listeners
 * (which one says where it came from and what it speaks), bounded by the
 * box's connection limit and by its deadlines, served on a thread of its
 * own, and ended with its sockets closed and its box let go of.  The box's
 * list of connections lets a stop cut them (proxy.c). */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "egress/proxy_internal.h"
#include "util/cleanup.h"
#include "util/clock.h"

static void conn_end(struct conn *c) {
  struct egress *e = c->e;
  pthread_mutex_lock(&e->lock);
  for (struct conn **pp = &c->b->conns; *pp; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  pthread_mutex_unlock(&e->lock);
  if (c->up.ssl)
    SSL_free(c->up.ssl);
  if (c->box.ssl)
    SSL_free(c->box.ssl);
  close_quiet(c->up.fd);
  close_quiet(c->box.fd);
  if (c->counted) {
    atomic_fetch_sub(&c->b->nconns, 1);
    atomic_fetch_sub(&e->nconns, 1);
  }
  egress_ebox_unref(e, c->b);
  free(c);
  atomic_fetch_sub(&e->live, 1);
}

static void *conn_main(void *arg) {
  struct conn *c = arg;
  switch (c->kind) {
  case L_PROXY:
    egress_plain_http(c, true);
    break;
  case L_HTTP:
    egress_plain_http(c, false);
    break;
  case L_HTTPS:
    egress_tunnel_transparent(c);
    break;
  default:
    break;
  }
  conn_end(c);
  return NULL;
}

/* Under e->lock: count a new connection of `b` if the bounds allow (NULL),
 * else say which bound it meets (its audit reason).  Every connection is
 * a thread: one box, one tenant's boxes, and all of them are bounded. */
static const char *admit(struct egress *e, struct ebox *b) {
  if (atomic_load(&b->nconns) >= e->cfg.max_conns)
    return "too-many-connections";
  if (atomic_load(&e->nconns) >= e->cfg.total_max_conns)
    return "proxy-too-many-connections";
  unsigned n = 0;
  for (struct ebox *o = e->boxes; o; o = o->next)
    if (!strcmp(o->tenant, b->tenant))
      n += atomic_load(&o->nconns);
  if (n >= e->cfg.tenant_max_conns)
    return "tenant-too-many-connections";
  atomic_fetch_add(&b->nconns, 1);
  atomic_fetch_add(&e->nconns, 1);
  return NULL;
}

void egress_conn_accept(struct egress *e, struct ebox *b, enum listener kind) {
  int fd = accept4(b->lfd[kind], NULL, NULL, SOCK_CLOEXEC);
  if (fd < 0)
    return;
  struct conn *c = calloc(1, sizeof *c);
  if (!c) {
    close(fd);
    return;
  }
  c->e = e;
  c->b = b;
  c->kind = kind;
  c->box.fd = fd;
  c->up.fd = -1;
  c->deadline = mono_ms() + e->cfg.total_ms;
  atomic_fetch_add(&e->live, 1);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  /* The socket stays blocking for OpenSSL; timeouts bound every call. */
  struct timeval tv = {.tv_sec = e->cfg.idle_ms / 1000, .tv_usec = (e->cfg.idle_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  pthread_mutex_lock(&e->lock);
  b->refs++;
  const char *full = admit(e, b);
  c->counted = !full;
  pthread_mutex_unlock(&e->lock);
  if (full) {
    if (kind == L_PROXY)
      egress_reply(c, 429, !strcmp(full, "too-many-connections") ? "too many connections from this box"
                           : !strcmp(full, "tenant-too-many-connections")
                               ? "too many connections from this tenant's boxes"
                               : "the proxy has too many connections");
    egress_audit(c, "egress.connect", "denied", 429, full);
    conn_end(c);
    return;
  }
  pthread_mutex_lock(&e->lock);
  c->next = b->conns;
  b->conns = c;
  pthread_mutex_unlock(&e->lock);
  pthread_t t;
  if (pthread_create(&t, &e->attr, conn_main, c) != 0) {
    egress_log(e, "egress: box %s: cannot start a connection thread", b->id);
    conn_end(c);
  }
}
