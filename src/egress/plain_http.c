/* Requests the box sends as HTTP: on the explicit proxy (a CONNECT, handed
 * to tunnel.c, or an absolute http:// URL) and on the transparent port 80
 * (origin-form, named by its Host header).  Plain HTTP is forwarded with
 * Connection: close, one request per connection, and never carries a
 * secret: inject rules need HTTPS, and a placeholder in a cleartext
 * request is refused. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egress/http.h"
#include "egress/proxy_internal.h"
#include "util/cleanup.h"

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

void egress_plain_http(struct conn *c, bool explicit_proxy) {
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
      egress_tunnel_open(c, &h, port, true);
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
