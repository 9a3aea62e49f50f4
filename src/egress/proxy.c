/* The egress proxy (see egress.h): the `struct egress` of the daemon, its
 * boxes with their listeners on the host end of each box's link, and the
 * acceptor thread that polls every listener and DNS stub.  What happens
 * to an accepted connection is in conn.c and the files it hands on to:
 * plain_http.c, tunnel.c, inject.c; the DNS stub is dns_stub.c and the
 * audit records are audit_writer.c (proxy_internal.h lists them all). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress/proxy_internal.h"
#include "util/cleanup.h"

void egress_log(struct egress *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  husk_vlog(e->cfg.log, e->cfg.log_ctx, fmt, ap);
  va_end(ap);
}

/* ---- the acceptor ------------------------------------------------------------------- */

static void *acceptor_main(void *arg) {
  struct egress *e = arg;
  size_t cap = 0;
  struct pollfd *p = NULL;
  struct ebox **who = NULL;
  while (!atomic_load(&e->stop)) {
    pthread_mutex_lock(&e->lock);
    size_t n = 1;
    for (struct ebox *b = e->boxes; b; b = b->next)
      n += b->dead ? 0 : L_COUNT + 1;
    if (n > cap) {
      struct pollfd *np = realloc(p, n * sizeof *p);
      struct ebox **nw = np ? realloc(who, n * sizeof *who) : NULL;
      if (np)
        p = np;
      if (nw)
        who = nw;
      if (!np || !nw) {
        pthread_mutex_unlock(&e->lock);
        sleep(1);
        continue;
      }
      cap = n;
    }
    size_t k = 0;
    p[k] = (struct pollfd){.fd = e->wake[0], .events = POLLIN};
    who[k++] = NULL;
    for (struct ebox *b = e->boxes; b; b = b->next) {
      if (b->dead)
        continue;
      for (int l = 0; l < L_COUNT; l++) {
        p[k] = (struct pollfd){.fd = b->lfd[l], .events = POLLIN};
        who[k++] = b;
      }
      p[k] = (struct pollfd){.fd = b->dns_fd, .events = POLLIN};
      who[k++] = b;
      b->refs++;    /* memory */
      b->in_poll++; /* fds: stop waits for this before closing them */
    }
    pthread_mutex_unlock(&e->lock);
    int pr = poll(p, k, 1000);
    if (pr > 0 && (p[0].revents & POLLIN)) {
      char drain[64];
      while (read(e->wake[0], drain, sizeof drain) > 0)
        ;
    }
    for (size_t i = 1; pr > 0 && i < k; i++) {
      if (!(p[i].revents & POLLIN))
        continue;
      struct ebox *b = who[i];
      if (b->dead)
        continue;
      size_t slot = (i - 1) % (L_COUNT + 1);
      if (slot == L_COUNT)
        egress_dns_stub_answer(e, b);
      else
        egress_conn_accept(e, b, (enum listener)slot);
    }
    pthread_mutex_lock(&e->lock);
    for (size_t i = 1; i < k; i += L_COUNT + 1)
      if (--who[i]->in_poll == 0)
        pthread_cond_broadcast(&e->poll_done);
    pthread_mutex_unlock(&e->lock);
    for (size_t i = 1; i < k; i += L_COUNT + 1)
      egress_ebox_unref(e, who[i]);
  }
  free(p);
  free(who);
  return NULL;
}

static void wake(struct egress *e) {
  if (write(e->wake[1], "x", 1) < 0) {
    /* full: the acceptor will wake anyway */
  }
}

/* ---- boxes ------------------------------------------------------------------------- */

static void box_free(struct egress *e, struct ebox *b) {
  for (int l = 0; l < L_COUNT; l++)
    close_quiet(b->lfd[l]);
  close_quiet(b->dns_fd);
  if (b->has_ca)
    egress_ca_free(&b->ca);
  if (e->net_ready && b->slot != (unsigned)-1)
    egress_link_down(&e->net, b->slot);
  free(b);
}

void egress_ebox_unref(struct egress *e, struct ebox *b) {
  pthread_mutex_lock(&e->lock);
  bool last = --b->refs == 0;
  pthread_mutex_unlock(&e->lock);
  if (last)
    box_free(e, b);
}

static int listen_on(uint32_t ip, int port, int type, struct husk_err *err) {
  int fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return husk_error(err, errno, "egress socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  /* Bind even if the address is not configured yet (it is, a moment later). */
  setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof one);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = ip};
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || (type == SOCK_STREAM && listen(fd, 128) < 0)) {
    int e = errno;
    close(fd);
    return husk_error(err, e, "cannot listen on the box's link (port %d)", port);
  }
  return fd;
}


int egress_box_start(struct egress *e, const struct egress_box_spec *spec, bool fresh,
                     char ***env_add, struct husk_err *err) {
  *env_add = NULL;
  struct ebox *b = calloc(1, sizeof *b);
  if (!b)
    return husk_fail(err, ENOMEM, "out of memory");
  b->refs = 1;
  b->slot = (unsigned)-1;
  b->dns_fd = -1;
  for (int l = 0; l < L_COUNT; l++)
    b->lfd[l] = -1;
  snprintf(b->id, sizeof b->id, "%s", spec->box_id);
  snprintf(b->tenant, sizeof b->tenant, "%s", spec->tenant);
  if (egress_policy_parse(spec->policy_json, true, &b->pol, err) < 0) {
    free(b);
    return -1;
  }
  egress_link_addrs(spec->slot, &b->host_ip, &b->box_ip);
  bool inject = false;
  for (size_t i = 0; i < b->pol.nrules; i++)
    inject |= b->pol.rules[i].mode == EGRESS_INJECT;
  pthread_mutex_lock(&e->lock);
  int rc = 0;
  if (!e->net_ready) {
    rc = egress_net_init(&e->net, e->cfg.hash, err);
    e->net_ready = rc == 0;
  }
  pthread_mutex_unlock(&e->lock);
  if (rc < 0) {
    free(b);
    return -1;
  }
  static const int ports[L_COUNT] = {EGRESS_PORT_PROXY, EGRESS_PORT_HTTP, EGRESS_PORT_HTTPS};
  for (int l = 0; l < L_COUNT; l++)
    if ((b->lfd[l] = listen_on(b->host_ip, ports[l], SOCK_STREAM, err)) < 0)
      goto fail;
  if ((b->dns_fd = listen_on(b->host_ip, EGRESS_PORT_DNS, SOCK_DGRAM, err)) < 0)
    goto fail;
  if (inject) {
    if (egress_ca_new(&b->ca, b->id, err) < 0)
      goto fail;
    b->has_ca = true;
    cleanup_free char *pem = egress_ca_pem(&b->ca);
    if (!pem) {
      husk_fail(err, ENOMEM, "cannot encode the box's CA");
      goto fail;
    }
    if (egress_box_env_write_ca(spec->fs, pem, err) < 0)
      goto fail;
  }
  b->slot = spec->slot;
  if (fresh ? egress_link_up(&e->net, spec->slot, spec->init_pid, spec->pidfd, err)
            : egress_link_allow(&e->net, spec->slot, err)) {
    if (!fresh)
      b->slot = (unsigned)-1; /* not ours to remove */
    goto fail;
  }
  if (!(*env_add = egress_box_env_new(b, inject))) {
    husk_fail(err, ENOMEM, "out of memory");
    goto fail;
  }
  pthread_mutex_lock(&e->lock);
  b->next = e->boxes;
  e->boxes = b;
  pthread_mutex_unlock(&e->lock);
  wake(e);
  egress_log(e, "egress: box %s: link up, %zu rule(s), %zu secret binding(s)", b->id, b->pol.nrules,
             b->pol.nbindings);
  return 0;
fail:
  box_free(e, b);
  return -1;
}

void egress_box_flush(struct egress *e, const char *box_id) { egress_audit_flush(e, box_id); }

/* Cut a box's live connections (under e->lock): their threads see
 * EOF/errors and end. */
static void conns_cut(struct ebox *b) {
  for (struct conn *c = b->conns; c; c = c->next) {
    shutdown(c->box.fd, SHUT_RDWR);
    if (c->up.fd >= 0)
      shutdown(c->up.fd, SHUT_RDWR);
  }
}

void egress_box_stop(struct egress *e, const char *box_id) {
  pthread_mutex_lock(&e->lock);
  struct ebox *b = NULL;
  for (struct ebox **pp = &e->boxes; *pp; pp = &(*pp)->next)
    if (!strcmp((*pp)->id, box_id)) {
      b = *pp;
      *pp = b->next;
      break;
    }
  if (b) {
    b->dead = true;
    /* The acceptor lets go of our fds at its next wake-up (now). */
    wake(e);
    while (b->in_poll > 0)
      pthread_cond_wait(&e->poll_done, &e->lock);
    conns_cut(b);
  }
  pthread_mutex_unlock(&e->lock);
  if (!b)
    return;
  /* Listeners, stub and link go now, not when the last connection thread
   * lets go of the memory: a new link for the same box (a network update)
   * must not be torn down by a late clean-up of the old one. */
  for (int l = 0; l < L_COUNT; l++) {
    close_quiet(b->lfd[l]);
    b->lfd[l] = -1;
  }
  close_quiet(b->dns_fd);
  b->dns_fd = -1;
  if (e->net_ready && b->slot != (unsigned)-1)
    egress_link_down(&e->net, b->slot);
  b->slot = (unsigned)-1;
  /* The box's counted decisions become records now. */
  egress_audit_flush(e, b->id);
  egress_ebox_unref(e, b);
}

unsigned egress_box_conns(struct egress *e, const char *box_id) {
  unsigned n = 0;
  pthread_mutex_lock(&e->lock);
  for (struct ebox *b = e->boxes; b; b = b->next)
    if (!strcmp(b->id, box_id))
      n = atomic_load(&b->nconns);
  pthread_mutex_unlock(&e->lock);
  return n;
}

static bool keep_slot(void *ctx, unsigned slot) {
  struct egress *e = ctx;
  for (struct ebox *b = e->boxes; b; b = b->next)
    if (b->slot == slot)
      return true;
  return false;
}

void egress_sweep(struct egress *e) {
  pthread_mutex_lock(&e->lock);
  if (!e->net_ready) {
    /* No egress box survived: a previous run's table (a crash) goes. */
    snprintf(e->net.table, sizeof e->net.table, "husk_%.8s", e->cfg.hash);
    snprintf(e->net.ifprefix, sizeof e->net.ifprefix, "hk%.6s-", e->cfg.hash);
    egress_link_sweep(&e->net, keep_slot, e);
    egress_net_fini(&e->net);
  } else {
    egress_link_sweep(&e->net, keep_slot, e);
  }
  pthread_mutex_unlock(&e->lock);
}

/* ---- open / close ------------------------------------------------------------------- */

int egress_open(struct egress **out, const struct egress_config *cfg, struct husk_err *err) {
  struct egress *e = calloc(1, sizeof *e);
  if (!e)
    return husk_fail(err, ENOMEM, "out of memory");
  e->cfg = *cfg;
  snprintf(e->hash, sizeof e->hash, "%.15s", cfg->hash ? cfg->hash : "0");
  e->cfg.hash = e->hash;
  if (!e->cfg.max_conns)
    e->cfg.max_conns = EGRESS_DEFAULT_MAX_CONNS;
  if (!e->cfg.tenant_max_conns)
    e->cfg.tenant_max_conns = EGRESS_DEFAULT_TENANT_CONNS;
  if (!e->cfg.total_max_conns)
    e->cfg.total_max_conns = EGRESS_DEFAULT_TOTAL_CONNS;
  if (!e->cfg.idle_ms)
    e->cfg.idle_ms = EGRESS_DEFAULT_IDLE_MS;
  if (!e->cfg.total_ms)
    e->cfg.total_ms = EGRESS_DEFAULT_TOTAL_MS;
  pthread_mutex_init(&e->lock, NULL);
  pthread_cond_init(&e->poll_done, NULL);
  pthread_attr_init(&e->attr);
  pthread_attr_setdetachstate(&e->attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&e->attr, EGRESS_THREAD_STACK);
  e->wake[0] = e->wake[1] = -1;
  if (pipe2(e->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
    husk_error(err, errno, "pipe");
    goto fail;
  }
  if (!(e->client_ctx = egress_tls_client_ctx(cfg->ca_file, err)))
    goto fail;
  if (egress_audit_writer_start(e, err) < 0)
    goto fail;
  if (pthread_create(&e->acceptor, NULL, acceptor_main, e) != 0) {
    husk_fail(err, EAGAIN, "cannot start the egress proxy thread");
    goto fail;
  }
  e->acceptor_running = true;
  *out = e;
  return 0;
fail:
  egress_close(e);
  return -1;
}

void egress_close(struct egress *e) {
  if (!e)
    return;
  if (e->acceptor_running) {
    atomic_store(&e->stop, true);
    wake(e);
    pthread_join(e->acceptor, NULL);
  }
  /* Boxes outlive the daemon: keep their links (the next start re-adopts
   * them); only listeners and connections go. */
  pthread_mutex_lock(&e->lock);
  struct ebox *list = e->boxes;
  e->boxes = NULL;
  bool any = list != NULL;
  pthread_mutex_unlock(&e->lock);
  while (list) {
    struct ebox *b = list;
    list = b->next;
    pthread_mutex_lock(&e->lock);
    b->dead = true;
    b->slot = (unsigned)-1; /* the link stays with the box */
    conns_cut(b);
    pthread_mutex_unlock(&e->lock);
    egress_ebox_unref(e, b);
  }
  /* Connection threads use `e` until their last line: wait for them (their
   * sockets are shut down, so they end at their next read or write). */
  for (int i = 0; i < 500 && atomic_load(&e->live) > 0; i++)
    usleep(10000);
  if (atomic_load(&e->live) > 0) {
    egress_log(e, "egress: connection threads did not end; leaving the proxy state in place");
    return;
  }
  if (e->net_ready && !any)
    egress_net_fini(&e->net);
  egress_audit_writer_stop(e); /* drains the queue first */
  SSL_CTX_free(e->client_ctx);
  close_quiet(e->wake[0]);
  close_quiet(e->wake[1]);
  pthread_attr_destroy(&e->attr);
  pthread_cond_destroy(&e->poll_done);
  pthread_mutex_destroy(&e->lock);
  free(e);
}
