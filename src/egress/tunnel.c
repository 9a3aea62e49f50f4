/* TLS destinations: a CONNECT through the explicit proxy, or a connection
 * the firewall redirected from port 443.  The destination is decided and
 * its addresses checked first; then the box's ClientHello must name it
 * (SNI), and the connection is tunnelled as it is, or handed to inject
 * mode (inject.c) when the box's rule says so.  Tunnels carry TLS only. */
#define _GNU_SOURCE
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "egress/proxy_internal.h"
#include "egress/sni.h"
#include "util/clock.h"

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

void egress_tunnel_open(struct conn *c, const struct egress_host *h, unsigned port, bool via_connect) {
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

void egress_tunnel_transparent(struct conn *c) {
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
  egress_tunnel_open(c, &h, 443, false);
}
