/* The egress proxy: listeners, connection threads, tunnels and plain HTTP
 * forwarding (see egress.h).  Inject mode (TLS termination and secret
 * substitution) is in inject.c, a connection's I/O in io.c, the policy
 * decisions on its destination in destination.c, the audit records in
 * audit_writer.c. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "egress/dns.h"
#include "egress/http.h"
#include "egress/proxy_internal.h"
#include "egress/sni.h"
#include "util/cleanup.h"
#include "util/clock.h"

#include <openssl/err.h>

void egress_log(struct egress *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  husk_vlog(e->cfg.log, e->cfg.log_ctx, fmt, ap);
  va_end(ap);
}

/* ---- TLS destinations: tunnels ---------------------------------------------------- */

/* Read the ClientHello without consuming it (it must still reach the
 * upstream or our own TLS server).  1 with sni, 0 not TLS / no SNI /
 * timeout / closed.
 *
 * A peek never drains the socket, so once part of a hello is queued poll()
 * reports it readable at every call and a peer that stops sending (or
 * closes: the FIN stays behind the queued bytes) would keep this loop
 * spinning.  So: the hello has its own short deadline, a peer that shut
 * its side (POLLRDHUP) or a socket we shut (POLLHUP, box deleted) ends it,
 * and while no new byte arrives the loop sleeps instead of polling. */
#define HELLO_TIMEOUT_MS 10000
static int peek_sni(struct conn *c, char *sni, size_t len) {
  unsigned char buf[16384 + 5];
  int64_t hello_deadline = mono_ms() + HELLO_TIMEOUT_MS;
  ssize_t seen = 0;
  long nap_ms = 2;
  for (;;) {
    int t = egress_io_remaining(c);
    int64_t hl = hello_deadline - mono_ms();
    if (t == 0 || hl <= 0)
      return 0;
    if (hl < t)
      t = (int)hl;
    struct pollfd p = {.fd = c->box.fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, t) <= 0 || (p.revents & (POLLHUP | POLLERR | POLLNVAL)))
      return 0;
    ssize_t r = recv(c->box.fd, buf, sizeof buf, MSG_PEEK);
    if (r <= 0)
      return 0;
    int st = egress_sni_peek(buf, (size_t)r, sni, len);
    if (st < 0)
      return 0;
    if (st == 1)
      return 1;
    if ((size_t)r == sizeof buf)
      return 0;
    if (r == seen) {
      /* Nothing new.  A peer that has closed its side will send no more. */
      if (p.revents & POLLRDHUP)
        return 0;
      struct timespec ts = {0, nap_ms * 1000 * 1000};
      nanosleep(&ts, NULL);
      if (nap_ms < 50)
        nap_ms *= 2;
    } else {
      seen = r;
      nap_ms = 2;
    }
  }
}

/* TLS to host:port through a tunnel (or the inject path): the hello's SNI
 * must name the destination. */
static void tls_destination(struct conn *c, const struct egress_host *h, unsigned port,
                            bool via_connect) {
  const struct egress_rule *rule;
  const char *why = NULL;
  int st = egress_decide(c, h, port, &rule, &why);
  /* Resolve and check before answering: a refused destination is a 403
   * to the client, not a tunnel that dies.  The connection is made only
   * after the TLS hello names the same host, to an address checked here. */
  if (!st)
    st = egress_resolve(c, h, &why);
  if (st) {
    if (via_connect)
      egress_reply(c, st, st == 403 ? "destination not allowed by the box's egress policy"
                                     : "cannot resolve the destination");
    egress_audit(c, "egress.connect", st == 403 ? "denied" : "error", st, why);
    return;
  }
  if (via_connect)
    egress_io_write_all(c, &c->box, "HTTP/1.1 200 Connection established\r\n\r\n", 39);
  char sni[256] = "";
  if (!peek_sni(c, sni, sizeof sni)) {
    /* Not a TLS ClientHello (or none in time): tunnels carry TLS only. */
    egress_audit(c, "egress.connect", "denied", 403, "not-tls");
    return;
  }
  if (!sni[0]) {
    /* Names need their SNI; an IP literal destination has none. */
    if (h->kind == EGRESS_HOST_NAME) {
      egress_audit(c, "egress.connect", "denied", 403, "missing-sni");
      return;
    }
  } else {
    struct egress_host sh;
    struct husk_err err;
    if (egress_host_parse(sni, strlen(sni), false, &sh, &err) < 0 || strcmp(sh.name, h->name)) {
      egress_audit(c, "egress.connect", "denied", 403, "sni-mismatch");
      return;
    }
  }
  if (rule->mode == EGRESS_INJECT) {
    egress_inject(c, h);
    return;
  }
  st = egress_connect(c, &why);
  if (st) {
    egress_audit(c, "egress.connect", "error", st, why);
    return;
  }
  egress_io_relay(c);
  egress_audit(c, "egress.connect", "ok", 200, NULL);
}

/* Plain HTTP (absolute-form through the proxy, or transparent port 80):
 * forwarded with Connection: close; no secrets over cleartext. */
static void forward_http(struct conn *c, struct http_head *hd, const char *target,
                         const struct egress_host *h, unsigned port, const char *extra,
                         size_t extra_len) {
  const struct egress_rule *rule;
  const char *why = NULL;
  int st = egress_decide(c, h, port, &rule, &why);
  if (!st && rule->mode == EGRESS_INJECT) {
    st = 403;
    why = "inject-needs-https";
  }
  for (size_t i = 0; !st && i < hd->nh; i++)
    if (strstr(hd->h[i].value, "husk_ph_")) {
      st = 403;
      why = "placeholder-over-plain-http";
    }
  if (!st)
    st = egress_dial(c, h, &why);
  if (st) {
    egress_reply(c, st, st == 403 ? "destination not allowed by the box's egress policy"
                                  : "cannot reach the destination");
    egress_audit(c, "egress.http", st == 403 ? "denied" : "error", st, why);
    return;
  }
  static const char *const hop[] = {"connection", "proxy-connection", "keep-alive", "proxy-authorization",
                                    "te", "upgrade"};
  for (size_t i = 0; i < sizeof hop / sizeof hop[0]; i++)
    egress_http_remove(hd, hop[i]);
  /* A box holding placeholders gets its plain HTTP responses scrubbed too
   * (a host reached over HTTP may hand back what it was sent over HTTPS):
   * the body must then be readable. */
  bool scrub = c->b->pol.nbindings > 0;
  if (scrub)
    egress_http_remove(hd, "accept-encoding");
  size_t cap = EGRESS_HTTP_HEAD_MAX + 256, o = 0;
  cleanup_free char *out = malloc(cap);
  if (!out)
    return;
  o += (size_t)snprintf(out + o, cap - o, "%s %s %s\r\n", hd->start[0], target, hd->start[2]);
  for (size_t i = 0; i < hd->nh && o < cap; i++)
    o += (size_t)snprintf(out + o, cap - o, "%s: %s\r\n", hd->h[i].name, hd->h[i].value);
  if (o < cap)
    o += (size_t)snprintf(out + o, cap - o, "%sConnection: close\r\n\r\n",
                          scrub ? "Accept-Encoding: identity\r\n" : "");
  if (o >= cap) {
    egress_reply(c, 431, "request head too large");
    egress_audit(c, "egress.http", "denied", 431, "head-too-large");
    return;
  }
  if (egress_io_write_all(c, &c->up, out, o) < 0 ||
      (extra_len && egress_io_write_all(c, &c->up, extra, extra_len) < 0)) {
    egress_audit(c, "egress.http", "error", 502, "upstream-write");
    return;
  }
  c->bytes_up += o + extra_len;
  if (!scrub) {
    egress_io_relay(c);
  } else if ((st = egress_scrubbed_relay(c, !strcmp(hd->start[0], "HEAD"), &why))) {
    egress_audit(c, "egress.http", "error", st, why);
    return;
  }
  egress_audit(c, "egress.http", "ok", 200, NULL);
}

/* Read a request head from the box (plain socket).  Returns the head
 * length, and the bytes read past it stay in buf after it. */
static size_t read_head(struct conn *c, char *buf, size_t cap, size_t *got) {
  *got = 0;
  for (;;) {
    size_t end = egress_http_head_end(buf, *got);
    if (end)
      return end;
    if (*got == cap)
      return 0;
    ssize_t r = egress_io_read(c, &c->box, buf + *got, cap - *got);
    if (r <= 0)
      return 0;
    *got += (size_t)r;
  }
}

static void handle_http_request(struct conn *c, bool explicit_proxy) {
  size_t cap = EGRESS_HTTP_HEAD_MAX + 1, got;
  cleanup_free char *buf = malloc(cap);
  if (!buf)
    return;
  size_t end = read_head(c, buf, cap, &got);
  if (!end) {
    if (got == cap) {
      egress_reply(c, 431, "request head too large");
      egress_audit(c, "egress.http", "denied", 431, "head-too-large");
    } else if (got) {
      egress_reply(c, 400, "incomplete request");
      egress_audit(c, "egress.http", "denied", 400, "incomplete-head");
    }
    return;
  }
  struct http_head hd;
  struct husk_err err;
  int st = egress_http_parse(buf, end, true, &hd, &err);
  if (st) {
    egress_reply(c, st, err.msg);
    egress_audit(c, "egress.http", "denied", st, err.msg);
    return;
  }
  struct egress_host h;
  unsigned port;
  const char *host_hdr = egress_http_get(&hd, "host");
  if (explicit_proxy && !strcmp(hd.start[0], "CONNECT")) {
    if (egress_authority_parse(hd.start[1], strlen(hd.start[1]), 0, &h, &port, &err) < 0) {
      egress_reply(c, 400, "malformed CONNECT target");
      egress_audit(c, "egress.connect", "denied", 400, "malformed-connect");
    } else if (got != end) {
      /* Bytes after the CONNECT head before our 200: a client that does
       * not wait is not speaking the protocol we check. */
      egress_reply(c, 400, "data before the tunnel was established");
      egress_audit(c, "egress.connect", "denied", 400, "early-data");
    } else {
      tls_destination(c, &h, port, true);
    }
    egress_http_free(&hd);
    return;
  }
  const char *target = hd.start[1];
  char origin[EGRESS_HTTP_HEAD_MAX];
  if (explicit_proxy) {
    /* absolute-form: http://authority/path; https:// goes through CONNECT. */
    if (strncasecmp(target, "http://", 7)) {
      egress_reply(c, 400, "use CONNECT for https, or an absolute http:// URL");
      egress_audit(c, "egress.http", "denied", 400, "not-absolute-form");
      egress_http_free(&hd);
      return;
    }
    const char *auth = target + 7;
    size_t al = strcspn(auth, "/?#");
    if (egress_authority_parse(auth, al, 80, &h, &port, &err) < 0) {
      egress_reply(c, 400, "malformed URL host");
      egress_audit(c, "egress.http", "denied", 400, "malformed-url");
      egress_http_free(&hd);
      return;
    }
    snprintf(origin, sizeof origin, "%s%s", auth[al] == '/' ? "" : "/", auth + al);
    target = origin;
    /* The Host header, when present, must name the same place. */
    struct egress_host hh;
    unsigned hp;
    if (host_hdr && (egress_authority_parse(host_hdr, strlen(host_hdr), 80, &hh, &hp, &err) < 0 ||
                     strcmp(hh.name, h.name) || hp != port)) {
      egress_reply(c, 400, "Host header does not match the URL");
      egress_audit(c, "egress.http", "denied", 400, "host-mismatch");
      egress_http_free(&hd);
      return;
    }
  } else {
    if (!host_hdr || egress_authority_parse(host_hdr, strlen(host_hdr), 80, &h, &port, &err) < 0 ||
        target[0] != '/') {
      egress_reply(c, 400, "a Host header and an origin-form target are required");
      egress_audit(c, "egress.http", "denied", 400, "bad-host");
      egress_http_free(&hd);
      return;
    }
    port = 80; /* where the box connected; the Host header's port is advice */
  }
  forward_http(c, &hd, target, &h, port, buf + end, got - end);
  egress_http_free(&hd);
}

static void handle_transparent_tls(struct conn *c) {
  char sni[256];
  c->port = 443;
  if (!peek_sni(c, sni, sizeof sni) || !sni[0]) {
    egress_audit(c, "egress.connect", "denied", 403, "missing-sni");
    return;
  }
  struct egress_host h;
  struct husk_err err;
  if (egress_host_parse(sni, strlen(sni), false, &h, &err) < 0) {
    egress_audit(c, "egress.connect", "denied", 400, "bad-sni");
    return;
  }
  tls_destination(c, &h, 443, false);
}

/* ---- connection threads ---------------------------------------------------------- */

static void box_unref(struct egress *e, struct ebox *b);

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
  atomic_fetch_sub(&c->b->nconns, 1);
  box_unref(e, c->b);
  free(c);
  atomic_fetch_sub(&e->live, 1);
}

static void *conn_main(void *arg) {
  struct conn *c = arg;
  switch (c->kind) {
  case L_PROXY:
    handle_http_request(c, true);
    break;
  case L_HTTP:
    handle_http_request(c, false);
    break;
  case L_HTTPS:
    handle_transparent_tls(c);
    break;
  default:
    break;
  }
  conn_end(c);
  return NULL;
}

static void accept_one(struct egress *e, struct ebox *b, enum listener kind) {
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
  pthread_mutex_unlock(&e->lock);
  if (atomic_fetch_add(&b->nconns, 1) >= e->cfg.max_conns) {
    if (kind == L_PROXY)
      egress_reply(c, 429, "too many connections from this box");
    egress_audit(c, "egress.connect", "denied", 429, "too-many-connections");
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

/* ---- the DNS stub ------------------------------------------------------------------ */

static void dns_one(struct egress *e, struct ebox *b) {
  uint8_t q[1500], a[1600];
  struct sockaddr_in from;
  socklen_t fl = sizeof from;
  ssize_t n = recvfrom(b->dns_fd, q, sizeof q, MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
  if (n <= 0)
    return;
  char name[300];
  uint16_t qtype;
  struct conn c = {.e = e, .b = b, .kind = L_PROXY, .mode = "dns"};
  int rcode;
  uint32_t a4 = 0;
  const char *outcome = "denied", *why = "not-allowed";
  if (egress_dns_question(q, (size_t)n, name, sizeof name, &qtype) < 0) {
    rcode = 1; /* FORMERR */
    why = "malformed-query";
  } else {
    struct egress_host h;
    struct husk_err err;
    snprintf(c.host, sizeof c.host, "%.253s", name);
    if (egress_host_parse(name, strlen(name), false, &h, &err) == 0 && h.kind == EGRESS_HOST_NAME &&
        egress_policy_names(&b->pol, h.name)) {
      rcode = 0;
      a4 = b->host_ip; /* connections go to the proxy whatever the name */
      outcome = "ok";
      why = NULL;
    } else {
      rcode = 3; /* NXDOMAIN, and no one else is asked */
    }
  }
  size_t al = egress_dns_answer(q, (size_t)n, rcode, a4, a, sizeof a);
  if (al)
    sendto(b->dns_fd, a, al, MSG_DONTWAIT, (struct sockaddr *)&from, fl);
  egress_audit_queued(&c, "egress.dns", outcome, rcode, why);
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
        dns_one(e, b);
      else
        accept_one(e, b, (enum listener)slot);
    }
    pthread_mutex_lock(&e->lock);
    for (size_t i = 1; i < k; i += L_COUNT + 1)
      if (--who[i]->in_poll == 0)
        pthread_cond_broadcast(&e->poll_done);
    pthread_mutex_unlock(&e->lock);
    for (size_t i = 1; i < k; i += L_COUNT + 1)
      box_unref(e, who[i]);
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

static void box_unref(struct egress *e, struct ebox *b) {
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

/* The CA bundle the box trusts: the system roots plus its own CA, written
 * into the box's /tmp by the host, owned by host root (not writable or
 * removable from inside: /tmp is sticky). */
#define BOX_CA_BUNDLE "tmp/.husk-ca-bundle.pem"
#define BOX_CA_PATH "/tmp/.husk-ca-bundle.pem"

static int write_bundle(int fs, const char *ca_pem, struct husk_err *err) {
  cleanup_free char *sys = NULL;
  size_t syslen = 0;
  {
    cleanup_fclose FILE *f = fopen("/etc/ssl/certs/ca-certificates.crt", "re");
    if (f) {
      FILE *m = open_memstream(&sys, &syslen);
      if (m) {
        char buf[8192];
        size_t r;
        while ((r = fread(buf, 1, sizeof buf, f)) > 0)
          fwrite(buf, 1, r, m);
        fclose(m);
      }
    }
  }
  const char *tmpname = "tmp/.husk-ca-bundle.pem.new";
  unlinkat(fs, tmpname, 0);
  cleanup_close int fd = openat(fs, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
  if (fd < 0)
    return husk_error(err, errno, "cannot write the CA bundle into the box");
  size_t cl = strlen(ca_pem);
  if ((sys && write(fd, sys, syslen) != (ssize_t)syslen) || write(fd, ca_pem, cl) != (ssize_t)cl)
    return husk_error(err, errno, "cannot write the CA bundle into the box");
  if (renameat(fs, tmpname, fs, BOX_CA_BUNDLE) < 0)
    return husk_error(err, errno, "cannot install the CA bundle in the box");
  return 0;
}

static char **make_env(const struct ebox *b, bool inject) {
  size_t n = 0, cap = 32 + b->pol.nbindings;
  char **env = calloc(cap, sizeof *env);
  if (!env)
    return NULL;
  char hs[16];
  inet_ntop(AF_INET, &b->host_ip, hs, sizeof hs);
  char url[64];
  snprintf(url, sizeof url, "http://%s:%d", hs, EGRESS_PORT_PROXY);
  static const char *const proxy_vars[] = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                                           "http_proxy", "https_proxy", "all_proxy"};
  for (size_t i = 0; i < 6; i++)
    if (asprintf(&env[n++], "%s=%s", proxy_vars[i], url) < 0)
      goto fail;
  if (asprintf(&env[n++], "NO_PROXY=localhost,127.0.0.1,::1") < 0 ||
      asprintf(&env[n++], "no_proxy=localhost,127.0.0.1,::1") < 0)
    goto fail;
  if (inject) {
    static const char *const ca_vars[] = {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
                                          "CURL_CA_BUNDLE", "AWS_CA_BUNDLE", "GIT_SSL_CAINFO"};
    for (size_t i = 0; i < 6; i++)
      if (asprintf(&env[n++], "%s=%s", ca_vars[i], BOX_CA_PATH) < 0)
        goto fail;
  }
  for (size_t i = 0; i < b->pol.nbindings; i++)
    if (asprintf(&env[n++], "%s=%s", b->pol.bindings[i].env, b->pol.bindings[i].placeholder) < 0)
      goto fail;
  return env;
fail:
  for (size_t i = 0; i < cap; i++)
    free(env[i]);
  free(env);
  return NULL;
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
    if (write_bundle(spec->fs, pem, err) < 0)
      goto fail;
  }
  b->slot = spec->slot;
  if (fresh ? egress_link_up(&e->net, spec->slot, spec->init_pid, spec->pidfd, err)
            : egress_link_allow(&e->net, spec->slot, err)) {
    if (!fresh)
      b->slot = (unsigned)-1; /* not ours to remove */
    goto fail;
  }
  if (!(*env_add = make_env(b, inject))) {
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
    /* Cut live connections: their threads see EOF/errors and end. */
    for (struct conn *c = b->conns; c; c = c->next) {
      shutdown(c->box.fd, SHUT_RDWR);
      if (c->up.fd >= 0)
        shutdown(c->up.fd, SHUT_RDWR);
    }
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
  box_unref(e, b);
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
    for (struct conn *c = b->conns; c; c = c->next) {
      shutdown(c->box.fd, SHUT_RDWR);
      if (c->up.fd >= 0)
        shutdown(c->up.fd, SHUT_RDWR);
    }
    pthread_mutex_unlock(&e->lock);
    box_unref(e, b);
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
