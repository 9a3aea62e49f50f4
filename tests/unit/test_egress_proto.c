/* Unit tests for the egress proxy's parsers of hostile input: the HTTP
 * head parser (smuggling shapes), the ClientHello SNI reader and the DNS
 * stub's question parser and answers. */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/dns.h"
#include "egress/http.h"
#include "egress/sni.h"
#include "unit.h"

static int parse(const char *s, bool request) {
  struct http_head h;
  struct husk_err err;
  int st = egress_http_parse(s, strlen(s), request, &h, &err);
  if (st == 0)
    egress_http_free(&h);
  return st;
}

TEST(http_accepts_plain_requests) {
  struct http_head h;
  struct husk_err err;
  const char *r = "GET /a?b HTTP/1.1\r\nHost: x.test\r\nX-A:  v  \r\nContent-Length: 3\r\n\r\n";
  CHECK(egress_http_parse(r, strlen(r), true, &h, &err) == 0);
  CHECK_STR(h.start[0], "GET");
  CHECK_STR(h.start[1], "/a?b");
  CHECK_STR(egress_http_get(&h, "x-a"), "v");
  CHECK(h.has_length && h.length == 3 && !h.chunked);
  egress_http_remove(&h, "X-A");
  CHECK(egress_http_get(&h, "x-a") == NULL && egress_http_get(&h, "host") != NULL);
  egress_http_free(&h);
  CHECK(parse("CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n", true) == 0);
  CHECK(parse("GET / HTTP/1.0\r\n\r\n", true) == 0); /* 1.0 may omit Host */
  CHECK(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false) == 0);
}

TEST(http_refuses_smuggling_shapes) {
  CHECK(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", true) == 400);
  CHECK(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", true) == 400);
  CHECK(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n", true) == 400);
  CHECK(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 1\r\n\r\n", true) == 400);
  CHECK(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n", true) == 501);
  CHECK(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", true) == 501);
  CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", true) == 400);
  CHECK(parse("GET / HTTP/1.1\r\nhost: a\r\nHOST: a\r\n\r\n", true) == 400);
  CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n", true) == 400);   /* obs-fold */
  CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n\t2\r\n\r\n", true) == 400);
  CHECK(parse("GET / HTTP/1.1\r\nHost : a\r\n\r\n", true) == 400);              /* space before colon */
  CHECK(parse("GET / HTTP/1.1\nHost: a\r\n\r\n", true) == 400);                   /* bare LF */
  CHECK(parse("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", true) == 400);              /* bare CR */
  CHECK(parse("GET / HTTP/1.1\r\nHost: a\x01\r\n\r\n", true) == 400);
  CHECK(parse("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", true) == 400);
  CHECK(parse("GET / HTTP/2.0\r\nHost: a\r\n\r\n", true) == 505);
  CHECK(parse("G(T / HTTP/1.1\r\nHost: a\r\n\r\n", true) == 400);
  CHECK(parse("GET / HTTP/1.1\r\n\r\n", true) == 400);                           /* no Host */
  CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\n", true) == 400);                     /* incomplete */
  CHECK(parse("HTTP/1.1 2000 OK\r\n\r\n", false) == 502);
  /* Size caps: the head and the number of lines. */
  size_t big = EGRESS_HTTP_HEAD_MAX + 100;
  char *b = malloc(big + 1);
  memset(b, 'a', big);
  memcpy(b, "GET / HTTP/1.1\r\nHost: a\r\nX: ", 28);
  memcpy(b + big - 4, "\r\n\r\n", 4);
  b[big] = '\0';
  CHECK(parse(b, true) == 431);
  size_t o = (size_t)sprintf(b, "GET / HTTP/1.1\r\nHost: a\r\n");
  for (int i = 0; i < EGRESS_HTTP_MAX_HEADERS + 1; i++)
    o += (size_t)sprintf(b + o, "X%d: 1\r\n", i);
  strcpy(b + o, "\r\n");
  CHECK(parse(b, true) == 431);
  free(b);
  CHECK(egress_http_head_end("a\r\n\r\nb", 7) == 5);
  CHECK(egress_http_head_end("a\r\n\r", 4) == 0);
}

/* A minimal ClientHello with the given SNI (NULL: no extension). */
static size_t hello(unsigned char *out, const char *sni, bool ech) {
  unsigned char ext[600];
  size_t el = 0;
  if (sni) {
    size_t n = strlen(sni);
    ext[el++] = 0;
    ext[el++] = 0; /* server_name */
    ext[el++] = (unsigned char)((n + 5) >> 8);
    ext[el++] = (unsigned char)(n + 5);
    ext[el++] = (unsigned char)((n + 3) >> 8);
    ext[el++] = (unsigned char)(n + 3);
    ext[el++] = 0;
    ext[el++] = (unsigned char)(n >> 8);
    ext[el++] = (unsigned char)n;
    memcpy(ext + el, sni, n);
    el += n;
  }
  if (ech) {
    ext[el++] = 0xfe;
    ext[el++] = 0x0d;
    ext[el++] = 0;
    ext[el++] = 0;
  }
  unsigned char body[1024];
  size_t bl = 0;
  body[bl++] = 3;
  body[bl++] = 3;
  memset(body + bl, 7, 32);
  bl += 32;
  body[bl++] = 0;                        /* session id */
  body[bl++] = 0;
  body[bl++] = 2;
  body[bl++] = 0x13;
  body[bl++] = 0x01;                     /* one suite */
  body[bl++] = 1;
  body[bl++] = 0;                        /* null compression */
  body[bl++] = (unsigned char)(el >> 8);
  body[bl++] = (unsigned char)el;
  memcpy(body + bl, ext, el);
  bl += el;
  size_t o = 0;
  out[o++] = 22;
  out[o++] = 3;
  out[o++] = 1;
  out[o++] = (unsigned char)((bl + 4) >> 8);
  out[o++] = (unsigned char)(bl + 4);
  out[o++] = 1;
  out[o++] = 0;
  out[o++] = (unsigned char)(bl >> 8);
  out[o++] = (unsigned char)bl;
  memcpy(out + o, body, bl);
  return o + bl;
}

TEST(sni_reader) {
  unsigned char h[2048];
  char sni[256];
  size_t n = hello(h, "api.ex.test", false);
  CHECK(egress_sni_peek(h, n, sni, sizeof sni) == 1);
  CHECK_STR(sni, "api.ex.test");
  for (size_t cut = 0; cut < n; cut += 7)
    CHECK(egress_sni_peek(h, cut, sni, sizeof sni) == 0); /* partial: wait */
  n = hello(h, NULL, false);
  CHECK(egress_sni_peek(h, n, sni, sizeof sni) == 1 && sni[0] == '\0');
  n = hello(h, "public.test", true);
  CHECK(egress_sni_peek(h, n, sni, sizeof sni) == 1 && sni[0] == '\0'); /* ECH: no trusted name */
  n = hello(h, "a b", false);
  CHECK(egress_sni_peek(h, n, sni, sizeof sni) == -1);
  CHECK(egress_sni_peek((const unsigned char *)"GET / HTTP/1.1\r\n", 16, sni, sizeof sni) == -1);
  /* Lengths that lie: every one refused, never read past the buffer. */
  n = hello(h, "api.ex.test", false);
  for (size_t i = 5; i < n; i++) {
    unsigned char m[2048];
    memcpy(m, h, n);
    m[i] ^= 0xff;
    int r = egress_sni_peek(m, n, sni, sizeof sni);
    CHECK(r >= -1 && r <= 1 && strlen(sni) < sizeof sni);
  }
}

TEST(dns_stub_parsing) {
  uint8_t q[512] = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
  size_t o = 12;
  const char *labels[] = {"API", "ex", "test"};
  for (int i = 0; i < 3; i++) {
    q[o++] = (uint8_t)strlen(labels[i]);
    memcpy(q + o, labels[i], strlen(labels[i]));
    o += strlen(labels[i]);
  }
  q[o++] = 0;
  q[o++] = 0;
  q[o++] = 1;
  q[o++] = 0;
  q[o++] = 1;
  char name[300];
  uint16_t qt;
  CHECK(egress_dns_question(q, o, name, sizeof name, &qt) == 0);
  CHECK_STR(name, "api.ex.test");
  CHECK(qt == 1);
  uint8_t a[600];
  uint32_t ip;
  inet_pton(AF_INET, "10.239.0.1", &ip);
  size_t al = egress_dns_answer(q, o, 0, ip, a, sizeof a);
  CHECK(al == o + 16 && a[3] == 0 && a[7] == 1 && (a[2] & 0x80) && !(a[3] & 0x80));
  CHECK(!memcmp(a + al - 4, &ip, 4));
  al = egress_dns_answer(q, o, 3, 0, a, sizeof a);
  CHECK(al == o && (a[3] & 15) == 3 && a[7] == 0);
  /* Broken questions: refused, never read past the end. */
  for (size_t cut = 0; cut < o; cut++)
    CHECK(egress_dns_question(q, cut, name, sizeof name, &qt) == -1);
  uint8_t dot[64] = {0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 'a', '.', 'b', 0, 0, 1, 0, 1};
  CHECK(egress_dns_question(dot, 21, name, sizeof name, &qt) == -1); /* a dot inside a label */
  uint8_t resp[64] = {0, 1, 0x81, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 'a', 0, 0, 1, 0, 1};
  CHECK(egress_dns_question(resp, 19, name, sizeof name, &qt) == -1); /* a response, not a query */
  uint8_t ptr[64] = {0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1};
  CHECK(egress_dns_question(ptr, 18, name, sizeof name, &qt) == -1); /* compression in a question */
  struct sockaddr_storage ss;
  struct husk_err err;
  CHECK(egress_dns_parse_server("10.250.0.2:5353", &ss, &err) == 0 &&
        ntohs(((struct sockaddr_in *)&ss)->sin_port) == 5353);
  CHECK(egress_dns_parse_server("[::1]:53", &ss, &err) == 0 && ss.ss_family == AF_INET6);
  CHECK(egress_dns_parse_server("dns.example", &ss, &err) < 0);
  CHECK(egress_dns_parse_server("1.2.3.4:0", &ss, &err) < 0);
}

int main(void) {
  RUN(http_accepts_plain_requests);
  RUN(http_refuses_smuggling_shapes);
  RUN(sni_reader);
  RUN(dns_stub_parsing);
  return unit_done();
}
