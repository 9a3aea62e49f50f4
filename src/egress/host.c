/* Host names, IP literals and the always-on deny set (see host.h). */
#define _GNU_SOURCE
#include "egress/host.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* One inet_aton part: decimal, 0x-hex or leading-0 octal.  No sign, no
 * empty part, no digits outside the base, no overflow past 32 bits. */
static bool ipv4_part(const char *s, size_t len, uint64_t *out) {
  if (len == 0)
    return false;
  unsigned base = 10;
  if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s += 2;
    len -= 2;
    if (len == 0)
      return false;
  } else if (len >= 2 && s[0] == '0') {
    base = 8;
    s += 1;
    len -= 1;
  }
  uint64_t v = 0;
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    unsigned d;
    if (is_digit(c))
      d = (unsigned)(c - '0');
    else if (base == 16 && is_hex(c))
      d = (unsigned)((c | 0x20) - 'a' + 10);
    else
      return false;
    if (d >= base)
      return false;
    v = v * base + d;
    if (v > 0xffffffffULL)
      return false;
  }
  *out = v;
  return true;
}

bool egress_ipv4_literal(const char *s, size_t len, uint32_t *addr_be) {
  uint64_t part[4];
  size_t n = 0, start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i == len || s[i] == '.') {
      if (n == 4 || !ipv4_part(s + start, i - start, &part[n]))
        return false;
      n++;
      start = i + 1;
    }
  }
  /* The first n-1 parts are bytes; the last fills the remaining bytes. */
  uint32_t v = 0;
  for (size_t i = 0; i + 1 < n; i++) {
    if (part[i] > 0xff)
      return false;
    v |= (uint32_t)part[i] << (24 - 8 * i);
  }
  unsigned rest_bits = (unsigned)(32 - 8 * (n - 1));
  if (rest_bits < 32 && part[n - 1] >> rest_bits)
    return false;
  v |= (uint32_t)part[n - 1];
  *addr_be = htonl(v);
  return true;
}

/* A label that looks like a number (the WHATWG "ends in a number" test):
 * all decimal digits, or 0x followed by hex digits. */
static bool numeric_label(const char *s, size_t len) {
  if (len == 0)
    return false;
  if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    for (size_t i = 2; i < len; i++)
      if (!is_hex(s[i]))
        return false;
    return true;
  }
  for (size_t i = 0; i < len; i++)
    if (!is_digit(s[i]))
      return false;
  return true;
}

static int parse_v6(const char *s, size_t len, struct egress_host *out, struct husk_err *err) {
  char buf[INET6_ADDRSTRLEN + 1];
  if (len == 0 || len >= sizeof buf)
    return husk_fail(err, EINVAL, "bad IPv6 literal");
  memcpy(buf, s, len);
  buf[len] = '\0';
  if (memchr(buf, '%', len))
    return husk_fail(err, EINVAL, "IPv6 zone identifiers are not allowed");
  struct sockaddr_in6 *a = (struct sockaddr_in6 *)&out->addr;
  memset(&out->addr, 0, sizeof out->addr);
  a->sin6_family = AF_INET6;
  if (inet_pton(AF_INET6, buf, &a->sin6_addr) != 1)
    return husk_fail(err, EINVAL, "bad IPv6 literal");
  out->kind = EGRESS_HOST_IPV6;
  inet_ntop(AF_INET6, &a->sin6_addr, out->name, sizeof out->name);
  return 0;
}

int egress_host_parse(const char *s, size_t len, bool bracketed_v6, struct egress_host *out,
                      struct husk_err *err) {
  memset(out, 0, sizeof *out);
  if (!s || len == 0)
    return husk_fail(err, EINVAL, "empty host");
  if (s[0] == '[') {
    if (!bracketed_v6 || len < 3 || s[len - 1] != ']')
      return husk_fail(err, EINVAL, "brackets are only for IPv6 literals");
    return parse_v6(s + 1, len - 2, out, err);
  }
  /* One trailing dot is the same name (an absolute name); two are not. */
  if (s[len - 1] == '.')
    len--;
  if (len == 0 || len > 253)
    return husk_fail(err, EINVAL, "host name is empty or longer than 253 bytes");
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x80)
      return husk_fail(err, EINVAL, "host names must be ASCII (use the punycode xn-- form)");
    if (c == ':')
      return husk_fail(err, EINVAL, "IPv6 literals must be in brackets");
    if (!(is_digit((char)c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
          c == '_' || c == '.'))
      return husk_fail(err, EINVAL, "host contains a character that is not allowed in a name");
  }
  /* Last label numeric: this is an IPv4 literal in some form, or nothing. */
  size_t last = len;
  while (last > 0 && s[last - 1] != '.')
    last--;
  if (numeric_label(s + last, len - last)) {
    uint32_t a4;
    if (!egress_ipv4_literal(s, len, &a4))
      return husk_fail(err, EINVAL, "host looks like an IPv4 address but is not a valid one");
    struct sockaddr_in *a = (struct sockaddr_in *)&out->addr;
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = a4;
    out->kind = EGRESS_HOST_IPV4;
    inet_ntop(AF_INET, &a->sin_addr, out->name, sizeof out->name);
    return 0;
  }
  size_t lab = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i == len || s[i] == '.') {
      size_t l = i - lab;
      if (l == 0 || l > 63)
        return husk_fail(err, EINVAL, "host has an empty label or one longer than 63 bytes");
      if (s[lab] == '-' || s[i - 1] == '-')
        return husk_fail(err, EINVAL, "a host label cannot start or end with '-'");
      lab = i + 1;
    }
  }
  for (size_t i = 0; i < len; i++)
    out->name[i] = (char)((s[i] >= 'A' && s[i] <= 'Z') ? s[i] | 0x20 : s[i]);
  out->name[len] = '\0';
  out->kind = EGRESS_HOST_NAME;
  return 0;
}

int egress_authority_parse(const char *s, size_t len, unsigned default_port, struct egress_host *out,
                           unsigned *port, struct husk_err *err) {
  if (!s || len == 0)
    return husk_fail(err, EINVAL, "empty authority");
  if (memchr(s, '@', len))
    return husk_fail(err, EINVAL, "user information is not allowed in an authority");
  size_t hlen = len;
  const char *colon = NULL;
  if (s[0] == '[') {
    const char *rb = memchr(s, ']', len);
    if (!rb)
      return husk_fail(err, EINVAL, "unterminated IPv6 literal");
    hlen = (size_t)(rb - s) + 1;
    if (hlen < len) {
      if (s[hlen] != ':')
        return husk_fail(err, EINVAL, "bad authority");
      colon = s + hlen;
    }
  } else {
    colon = memrchr(s, ':', len);
    if (colon)
      hlen = (size_t)(colon - s);
  }
  if (colon) {
    const char *p = colon + 1;
    size_t pl = len - (size_t)(p - s);
    if (pl == 0 || pl > 5)
      return husk_fail(err, EINVAL, "bad port");
    unsigned v = 0;
    for (size_t i = 0; i < pl; i++) {
      if (!is_digit(p[i]))
        return husk_fail(err, EINVAL, "bad port");
      v = v * 10 + (unsigned)(p[i] - '0');
    }
    if (v == 0 || v > 65535)
      return husk_fail(err, EINVAL, "port out of range");
    *port = v;
  } else {
    if (!default_port)
      return husk_fail(err, EINVAL, "the authority needs a port (host:port)");
    *port = default_port;
  }
  return egress_host_parse(s, hlen, true, out, err);
}

/* ---- CIDR and the deny set ------------------------------------------------ */

int egress_cidr_parse(const char *s, struct egress_cidr *out, struct husk_err *err) {
  char buf[INET6_ADDRSTRLEN + 8];
  if (!s || strlen(s) >= sizeof buf)
    return husk_fail(err, EINVAL, "bad address range `%s`", s ? s : "");
  strcpy(buf, s);
  char *slash = strchr(buf, '/');
  long prefix = -1;
  if (slash) {
    *slash = '\0';
    char *end;
    errno = 0;
    prefix = strtol(slash + 1, &end, 10);
    if (errno || end == slash + 1 || *end || prefix < 0)
      return husk_fail(err, EINVAL, "bad prefix length in `%s`", s);
  }
  memset(out, 0, sizeof *out);
  if (inet_pton(AF_INET, buf, out->addr) == 1) {
    out->family = AF_INET;
    if (prefix < 0)
      prefix = 32;
    if (prefix > 32)
      return husk_fail(err, EINVAL, "bad prefix length in `%s`", s);
  } else if (inet_pton(AF_INET6, buf, out->addr) == 1) {
    out->family = AF_INET6;
    if (prefix < 0)
      prefix = 128;
    if (prefix > 128)
      return husk_fail(err, EINVAL, "bad prefix length in `%s`", s);
  } else {
    return husk_fail(err, EINVAL, "bad address range `%s` (want ADDRESS/PREFIX)", s);
  }
  out->prefix = (unsigned)prefix;
  return 0;
}

static bool prefix_match(const uint8_t *a, const uint8_t *net, unsigned prefix) {
  unsigned full = prefix / 8, rest = prefix % 8;
  if (memcmp(a, net, full))
    return false;
  if (rest) {
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    if ((a[full] & mask) != (net[full] & mask))
      return false;
  }
  return true;
}

bool egress_cidr_contains(const struct egress_cidr *c, const struct sockaddr *sa) {
  if (sa->sa_family != c->family)
    return false;
  const uint8_t *a = sa->sa_family == AF_INET
                         ? (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr
                         : (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
  return prefix_match(a, c->addr, c->prefix);
}

struct range {
  uint8_t net[16];
  unsigned prefix;
  const char *why;
};

/* IPv4: everything that is not public unicast (RFC 6890 and friends). */
static const struct range deny4[] = {
    {{0, 0, 0, 0}, 8, "this-network"},
    {{10, 0, 0, 0}, 8, "private"},
    {{100, 64, 0, 0}, 10, "cgnat"},
    {{127, 0, 0, 0}, 8, "loopback"},
    {{169, 254, 169, 254}, 32, "metadata"},
    {{169, 254, 0, 0}, 16, "link-local"},
    {{172, 16, 0, 0}, 12, "private"},
    {{192, 0, 0, 0}, 24, "reserved"},
    {{192, 0, 2, 0}, 24, "documentation"},
    {{192, 88, 99, 0}, 24, "reserved"},
    {{192, 168, 0, 0}, 16, "private"},
    {{198, 18, 0, 0}, 15, "benchmarking"},
    {{198, 51, 100, 0}, 24, "documentation"},
    {{203, 0, 113, 0}, 24, "documentation"},
    {{224, 0, 0, 0}, 4, "multicast"},
    {{240, 0, 0, 0}, 4, "reserved"},
};

/* IPv6: only global unicast (2000::/3) may pass, minus these; every form
 * that carries an IPv4 address inside is refused outright (mapped,
 * compatible, NAT64, 6to4, Teredo), since what it reaches is decided by
 * translation we do not see. */
static const struct range deny6[] = {
    {{0xfd, 0x00, 0x0e, 0xc2, [15] = 0x54, [14] = 0x02}, 128, "metadata"},
    {{0}, 96, "ipv4-compatible"},
    {{[10] = 0xff, [11] = 0xff}, 96, "ipv4-mapped"},
    {{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 96, "ipv4-translated"},
    {{0x00, 0x64, 0xff, 0x9b}, 96, "nat64"},
    {{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48, "nat64"},
    {{0x20, 0x02}, 16, "6to4"},
    {{0x20, 0x01, 0x00, 0x00}, 32, "teredo"},
    {{0x20, 0x01, 0x0d, 0xb8}, 32, "documentation"},
    {{0x20, 0x01, 0x00, 0x10}, 28, "reserved"},
    {{0x20, 0x01, 0x00, 0x20}, 28, "reserved"},
    {{0x20, 0x01, 0x00, 0x00}, 23, "reserved"},
    {{0x3f, 0xff}, 20, "documentation"},
    {{0xfc}, 7, "private"},
    {{0xfe, 0x80}, 10, "link-local"},
    {{0xff}, 8, "multicast"},
};

const char *egress_addr_denied(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET) {
    const uint8_t *a = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
    for (size_t i = 0; i < sizeof deny4 / sizeof deny4[0]; i++)
      if (prefix_match(a, deny4[i].net, deny4[i].prefix))
        return deny4[i].why;
    return NULL;
  }
  if (sa->sa_family == AF_INET6) {
    const uint8_t *a = (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
    static const uint8_t loop[16] = {[15] = 1};
    static const uint8_t any[16] = {0};
    if (!memcmp(a, loop, 16))
      return "loopback";
    if (!memcmp(a, any, 16))
      return "unspecified";
    for (size_t i = 0; i < sizeof deny6 / sizeof deny6[0]; i++)
      if (prefix_match(a, deny6[i].net, deny6[i].prefix))
        return deny6[i].why;
    if ((a[0] & 0xe0) != 0x20)
      return "reserved"; /* outside 2000::/3 */
    return NULL;
  }
  return "unsupported-family";
}

void egress_addr_str(const struct sockaddr *sa, char *out, size_t len) {
  if (!len)
    return;
  out[0] = '\0';
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)len);
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out, (socklen_t)len);
}
