/* DNS resolver and stub (see dns.h).  Packets are parsed with explicit
 * bounds on every read; names in answers may use compression, which is
 * only skipped, never followed into loops. */
#define _GNU_SOURCE
#include "egress/dns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/clock.h"
#include "util/id.h"

#define T_A 1
#define T_AAAA 28

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

/* Skip a (possibly compressed) name at *off. */
static bool skip_name(const uint8_t *p, size_t len, size_t *off) {
  size_t o = *off;
  for (int guard = 0; guard < 128; guard++) {
    if (o >= len)
      return false;
    uint8_t l = p[o];
    if (l == 0) {
      *off = o + 1;
      return true;
    }
    if ((l & 0xc0) == 0xc0) {
      if (o + 2 > len)
        return false;
      *off = o + 2;
      return true;
    }
    if (l & 0xc0)
      return false;
    o += 1 + l;
  }
  return false;
}

size_t egress_dns_build_query(uint8_t *buf, size_t cap, uint16_t id, const char *name,
                              uint16_t type) {
  size_t o = 12;
  memset(buf, 0, 12);
  buf[0] = (uint8_t)(id >> 8);
  buf[1] = (uint8_t)id;
  buf[2] = 0x01; /* RD: we ask a recursive resolver */
  buf[5] = 1;    /* QDCOUNT */
  const char *s = name;
  while (*s) {
    const char *dot = strchr(s, '.');
    size_t l = dot ? (size_t)(dot - s) : strlen(s);
    if (l == 0 || l > 63 || o + 1 + l + 5 > cap)
      return 0;
    buf[o++] = (uint8_t)l;
    for (size_t i = 0; i < l; i++)
      buf[o++] = (uint8_t)s[i];
    s += l + (dot ? 1 : 0);
  }
  buf[o++] = 0;
  buf[o++] = (uint8_t)(type >> 8);
  buf[o++] = (uint8_t)type;
  buf[o++] = 0;
  buf[o++] = 1; /* IN */
  return o;
}

/* Parse an answer to query `id`/`type`: append addresses.  Returns the
 * rcode, or -1 if the packet is not that answer (ignored). */
int egress_dns_parse_answer(const uint8_t *p, size_t len, uint16_t id, const uint8_t *q,
                            size_t qlen, uint16_t type, struct sockaddr_storage *out, size_t max,
                            size_t *n) {
  if (len < 12 || rd16(p) != id || !(p[2] & 0x80))
    return -1;
  /* The question must be ours, byte for byte (0x20-insensitive is not
   * needed: we send lowercase). */
  if (len < qlen || memcmp(p + 12, q + 12, qlen - 12) != 0 || rd16(p + 4) != 1)
    return -1;
  int rcode = p[3] & 0x0f;
  size_t off = qlen;
  unsigned an = rd16(p + 6);
  for (unsigned i = 0; i < an; i++) {
    if (!skip_name(p, len, &off) || off + 10 > len)
      return -1;
    uint16_t t = rd16(p + off), cls = rd16(p + off + 2), rdlen = rd16(p + off + 8);
    off += 10;
    if (off + rdlen > len)
      return -1;
    if (cls == 1 && t == type && *n < max) {
      if (t == T_A && rdlen == 4) {
        struct sockaddr_in *a = (struct sockaddr_in *)&out[*n];
        memset(&out[*n], 0, sizeof out[*n]);
        a->sin_family = AF_INET;
        memcpy(&a->sin_addr, p + off, 4);
        (*n)++;
      } else if (t == T_AAAA && rdlen == 16) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&out[*n];
        memset(&out[*n], 0, sizeof out[*n]);
        a->sin6_family = AF_INET6;
        memcpy(&a->sin6_addr, p + off, 16);
        (*n)++;
      }
    }
    off += rdlen;
  }
  return rcode;
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
  if (a->ss_family != b->ss_family)
    return false;
  if (a->ss_family == AF_INET) {
    const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
  }
  const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
  return x->sin6_port == y->sin6_port && !memcmp(&x->sin6_addr, &y->sin6_addr, 16);
}

int egress_dns_resolve(const struct sockaddr_storage *server, const char *name, int timeout_ms,
                       struct sockaddr_storage *out, size_t max, size_t *n, struct husk_err *err) {
  *n = 0;
  cleanup_close int fd = socket(server->ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return husk_error(err, errno, "DNS socket");
  socklen_t sl = server->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
  if (connect(fd, (const struct sockaddr *)server, sl) < 0)
    return husk_error(err, errno, "cannot reach the DNS resolver");
  uint16_t ids[2];
  if (id_random_bytes(ids, sizeof ids, err) < 0)
    return -1;
  static const uint16_t types[2] = {T_A, T_AAAA};
  uint8_t q[2][300];
  size_t ql[2];
  for (int i = 0; i < 2; i++) {
    if (!(ql[i] = egress_dns_build_query(q[i], sizeof q[i], ids[i], name, types[i])))
      return husk_fail(err, EINVAL, "name cannot be asked in DNS");
    if (send(fd, q[i], ql[i], 0) < 0)
      return husk_error(err, errno, "DNS query");
  }
  bool done[2] = {false, false};
  int rc[2] = {-1, -1};
  struct sockaddr_storage got[2][EGRESS_DNS_MAX_ADDRS];
  size_t ngot[2] = {0, 0};
  int64_t deadline = mono_ms() + timeout_ms;
  while (!done[0] || !done[1]) {
    int64_t left = deadline - mono_ms();
    if (left <= 0)
      break;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int pr = poll(&p, 1, (int)left);
    if (pr < 0 && errno != EINTR)
      return husk_error(err, errno, "DNS poll");
    if (pr <= 0)
      continue;
    uint8_t buf[1500];
    struct sockaddr_storage from;
    socklen_t fl = sizeof from;
    ssize_t r = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
    if (r < 0) {
      if (errno == EAGAIN || errno == EINTR)
        continue;
      return husk_error(err, errno, "DNS answer");
    }
    if (!same_addr(&from, server))
      continue;
    for (int i = 0; i < 2; i++) {
      if (done[i])
        continue;
      size_t k = 0;
      int c = egress_dns_parse_answer(buf, (size_t)r, ids[i], q[i], ql[i], types[i], got[i],
                                      EGRESS_DNS_MAX_ADDRS, &k);
      if (c >= 0) {
        done[i] = true;
        rc[i] = c;
        ngot[i] = k;
      }
    }
  }
  for (int i = 0; i < 2; i++)
    for (size_t k = 0; k < ngot[i] && *n < max; k++)
      out[(*n)++] = got[i][k];
  if (*n > 0)
    return 0;
  if (!done[0] && !done[1])
    return husk_fail(err, ETIMEDOUT, "the DNS resolver did not answer");
  if (rc[0] == 3 || rc[1] == 3)
    return husk_fail(err, ENOENT, "no such host (NXDOMAIN)");
  if ((rc[0] > 0 || !done[0]) && (rc[1] > 0 || !done[1]))
    return husk_fail(err, EPROTO, "the DNS resolver failed (rcode %d)", rc[0] > 0 ? rc[0] : rc[1]);
  return husk_fail(err, ENOENT, "the host has no address");
}

int egress_dns_parse_server(const char *s, struct sockaddr_storage *out, struct husk_err *err) {
  char host[INET6_ADDRSTRLEN + 1];
  unsigned long port = 53;
  const char *ps = NULL;
  size_t hl;
  if (s[0] == '[') {
    const char *rb = strchr(s, ']');
    if (!rb)
      return husk_fail(err, EINVAL, "bad resolver address `%s`", s);
    hl = (size_t)(rb - s - 1);
    s++;
    if (rb[1] == ':')
      ps = rb + 2;
    else if (rb[1])
      return husk_fail(err, EINVAL, "bad resolver address");
  } else {
    const char *c = strchr(s, ':');
    hl = c ? (size_t)(c - s) : strlen(s);
    if (c)
      ps = c + 1;
  }
  if (hl == 0 || hl >= sizeof host)
    return husk_fail(err, EINVAL, "bad resolver address `%s`", s);
  memcpy(host, s, hl);
  host[hl] = '\0';
  if (ps) {
    char *end;
    errno = 0;
    port = strtoul(ps, &end, 10);
    if (errno || end == ps || *end || port == 0 || port > 65535)
      return husk_fail(err, EINVAL, "bad resolver port `%s`", ps);
  }
  memset(out, 0, sizeof *out);
  struct sockaddr_in *a4 = (struct sockaddr_in *)out;
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)out;
  if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)port);
  } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons((uint16_t)port);
  } else {
    return husk_fail(err, EINVAL, "resolver `%s` is not an IP address", host);
  }
  return 0;
}

int egress_dns_system_server(struct sockaddr_storage *out, struct husk_err *err) {
  cleanup_fclose FILE *f = fopen("/etc/resolv.conf", "re");
  if (!f)
    return husk_error(err, errno,
                      "no egress resolver configured and cannot read `/etc/resolv.conf`");
  char line[512];
  while (fgets(line, sizeof line, f)) {
    char addr[INET6_ADDRSTRLEN + 1];
    if (sscanf(line, " nameserver %46s", addr) == 1) {
      if (strchr(addr, ':')) {
        char br[INET6_ADDRSTRLEN + 4];
        snprintf(br, sizeof br, "[%s]", addr);
        return egress_dns_parse_server(br, out, err);
      }
      return egress_dns_parse_server(addr, out, err);
    }
  }
  return husk_fail(err, ENOENT,
                   "no egress resolver configured and no nameserver in `/etc/resolv.conf`");
}

/* ---- the stub --------------------------------------------------------------- */

int egress_dns_question(const uint8_t *p, size_t len, char *name, size_t name_len, uint16_t *qtype) {
  if (len < 12 || (p[2] & 0x80) || ((p[2] >> 3) & 0x0f) != 0 || rd16(p + 4) != 1 ||
      rd16(p + 6) != 0 || rd16(p + 8) != 0)
    return -1;
  size_t o = 12, w = 0;
  for (;;) {
    if (o >= len)
      return -1;
    uint8_t l = p[o++];
    if (l == 0)
      break;
    if (l > 63 || o + l > len)
      return -1;
    if (w + l + 2 > name_len)
      return -1;
    if (w)
      name[w++] = '.';
    for (uint8_t i = 0; i < l; i++) {
      char c = (char)p[o + i];
      if (c == '.' || c == '\0')
        return -1; /* a dot inside a label would forge label boundaries */
      name[w++] = (char)((c >= 'A' && c <= 'Z') ? c | 0x20 : c);
    }
    o += l;
  }
  if (w == 0 || o + 4 > len)
    return -1;
  name[w] = '\0';
  *qtype = rd16(p + o);
  if (rd16(p + o + 2) != 1)
    return -1; /* class IN only */
  return 0;
}

size_t egress_dns_answer(const uint8_t *q, size_t qlen, int rcode, uint32_t a4, uint8_t *out,
                         size_t out_len) {
  if (qlen < 12 || out_len < 12)
    return 0;
  /* Copy the header and, when it parses, the question. */
  size_t o = 12, qend = 0;
  if (rd16(q + 4) == 1 && skip_name(q, qlen, &o) && o + 4 <= qlen)
    qend = o + 4;
  size_t n = qend ? qend : 12;
  if (n > out_len)
    return 0;
  memcpy(out, q, n);
  out[2] = (uint8_t)(0x80 | 0x04 | (q[2] & 0x01)); /* QR, AA, RD copied */
  out[3] = (uint8_t)(rcode & 0x0f);                 /* RA clear: we never recurse */
  out[4] = 0;
  out[5] = qend ? 1 : 0;
  memset(out + 6, 0, 6);
  if (rcode == 0 && a4 && qend && rd16(q + qend - 4) == T_A) {
    if (n + 16 > out_len)
      return 0;
    uint8_t *a = out + n;
    a[0] = 0xc0;
    a[1] = 12; /* pointer to the question name */
    a[2] = 0;
    a[3] = T_A;
    a[4] = 0;
    a[5] = 1;
    a[6] = a[7] = 0;
    a[8] = 0;
    a[9] = 30; /* TTL 30 s */
    a[10] = 0;
    a[11] = 4;
    memcpy(a + 12, &a4, 4);
    n += 16;
    out[7] = 1;
  }
  return n;
}
