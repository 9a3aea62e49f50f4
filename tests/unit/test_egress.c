/* Unit tests for src/egress: host normalisation, strict IP literal
 * parsing, the always-on deny set, and policy matching. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "egress/host.h"
#include "egress/policy.h"
#include "unit.h"

static bool host_ok(const char *in, enum egress_host_kind kind, const char *want) {
  struct egress_host h;
  struct husk_err err;
  if (egress_host_parse(in, strlen(in), true, &h, &err) < 0) {
    printf("#   `%s` refused: %s\n", in, err.msg);
    return false;
  }
  if (h.kind != kind || strcmp(h.name, want)) {
    printf("#   `%s` -> kind %d `%s`, want kind %d `%s`\n", in, h.kind, h.name, kind, want);
    return false;
  }
  return true;
}

static bool host_bad(const char *in) {
  struct egress_host h;
  struct husk_err err = {0};
  if (egress_host_parse(in, strlen(in), true, &h, &err) == 0) {
    printf("#   `%s` accepted as `%s`\n", in, h.name);
    return false;
  }
  return err.code == EINVAL && err.msg[0];
}

TEST(names_normalised) {
  CHECK(host_ok("API.Example.COM", EGRESS_HOST_NAME, "api.example.com"));
  CHECK(host_ok("api.example.com.", EGRESS_HOST_NAME, "api.example.com"));
  CHECK(host_ok("xn--bcher-kva.example", EGRESS_HOST_NAME, "xn--bcher-kva.example"));
  CHECK(host_ok("a_b.example", EGRESS_HOST_NAME, "a_b.example"));
  CHECK(host_ok("localhost", EGRESS_HOST_NAME, "localhost"));
  CHECK(host_ok("1a.example", EGRESS_HOST_NAME, "1a.example"));
}

TEST(names_refused) {
  CHECK(host_bad(""));
  CHECK(host_bad("."));
  CHECK(host_bad("a..b"));
  CHECK(host_bad("example.com.."));
  CHECK(host_bad("b\xc3\xbc" "cher.example")); /* UTF-8: must be punycode */
  CHECK(host_bad("[example.com]"));
  CHECK(host_bad("exa mple.com"));
  CHECK(host_bad("user@example.com"));
  CHECK(host_bad("-a.example"));
  CHECK(host_bad("a-.example"));
  CHECK(host_bad("a%2eb"));
  CHECK(host_bad("::1"));          /* unbracketed v6 */
  CHECK(host_bad("[fe80::1%eth0]"));
  CHECK(host_bad("example.com\n"));
  char big[300];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  CHECK(host_bad(big));
  char lab[80];
  memset(lab, 'a', 64);
  strcpy(lab + 64, ".example");
  CHECK(host_bad(lab));
  struct egress_host h;
  struct husk_err err;
  CHECK(egress_host_parse("a\0b", 3, true, &h, &err) < 0);
}

TEST(ipv4_literal_forms) {
  /* Every inet_aton form of 127.0.0.1 is that address, not a name. */
  CHECK(host_ok("127.0.0.1", EGRESS_HOST_IPV4, "127.0.0.1"));
  CHECK(host_ok("2130706433", EGRESS_HOST_IPV4, "127.0.0.1"));
  CHECK(host_ok("0x7f000001", EGRESS_HOST_IPV4, "127.0.0.1"));
  CHECK(host_ok("0x7f.1", EGRESS_HOST_IPV4, "127.0.0.1"));
  CHECK(host_ok("0177.0.0.1", EGRESS_HOST_IPV4, "127.0.0.1"));
  CHECK(host_ok("127.1", EGRESS_HOST_IPV4, "127.0.0.1"));
  CHECK(host_ok("127.0.1", EGRESS_HOST_IPV4, "127.0.0.1"));
  CHECK(host_ok("0X7F.0.0.01", EGRESS_HOST_IPV4, "127.0.0.1"));
  CHECK(host_ok("169.254.43518", EGRESS_HOST_IPV4, "169.254.169.254"));
  CHECK(host_ok("0xa9fea9fe", EGRESS_HOST_IPV4, "169.254.169.254"));
  CHECK(host_ok("10.0.0.5.", EGRESS_HOST_IPV4, "10.0.0.5"));
  CHECK(host_ok("[::1]", EGRESS_HOST_IPV6, "::1"));
  CHECK(host_ok("[::FFFF:127.0.0.1]", EGRESS_HOST_IPV6, "::ffff:127.0.0.1"));
}

TEST(ipv4_literal_refused) {
  CHECK(host_bad("256.0.0.1"));
  CHECK(host_bad("1.2.3.4.5"));
  CHECK(host_bad("08.0.0.1"));     /* 8 is not octal */
  CHECK(host_bad("0x.1.2.3"));
  CHECK(host_bad("1.2.3.0x100"));
  CHECK(host_bad("4294967296"));
  CHECK(host_bad("1.16777216"));
  CHECK(host_bad("example.123")); /* ends in a number: must be an address */
  CHECK(host_bad("example.0x1f"));
  CHECK(host_ok("example.0x1g", EGRESS_HOST_NAME, "example.0x1g")); /* not a number */
  CHECK(host_bad("+1.2.3.4"));
  CHECK(host_bad("1.2.3.-4"));
  uint32_t a;
  CHECK(!egress_ipv4_literal("", 0, &a));
  CHECK(!egress_ipv4_literal("1..2", 4, &a));
  CHECK(egress_ipv4_literal("0", 1, &a) && a == 0);
  CHECK(egress_ipv4_literal("4294967295", 10, &a) && a == 0xffffffffu);
}

static const char *deny_v4(const char *s) {
  struct sockaddr_in sa = {.sin_family = AF_INET};
  if (inet_pton(AF_INET, s, &sa.sin_addr) != 1)
    return "bad-test-input";
  return egress_addr_denied((struct sockaddr *)&sa);
}

static const char *deny_v6(const char *s) {
  struct sockaddr_in6 sa = {.sin6_family = AF_INET6};
  if (inet_pton(AF_INET6, s, &sa.sin6_addr) != 1)
    return "bad-test-input";
  return egress_addr_denied((struct sockaddr *)&sa);
}

#define DENIED(f, s, why) CHECK(f(s) && !strcmp(f(s), why))

TEST(deny_set_ipv4) {
  DENIED(deny_v4, "127.0.0.1", "loopback");
  DENIED(deny_v4, "127.255.255.254", "loopback");
  DENIED(deny_v4, "10.0.0.5", "private");
  DENIED(deny_v4, "172.16.0.1", "private");
  DENIED(deny_v4, "172.31.255.255", "private");
  DENIED(deny_v4, "192.168.1.1", "private");
  DENIED(deny_v4, "100.64.0.1", "cgnat");
  DENIED(deny_v4, "100.127.255.255", "cgnat");
  DENIED(deny_v4, "169.254.169.254", "metadata");
  DENIED(deny_v4, "169.254.1.1", "link-local");
  DENIED(deny_v4, "0.0.0.0", "this-network");
  DENIED(deny_v4, "224.0.0.1", "multicast");
  DENIED(deny_v4, "239.255.255.250", "multicast");
  DENIED(deny_v4, "255.255.255.255", "reserved");
  DENIED(deny_v4, "240.0.0.1", "reserved");
  DENIED(deny_v4, "192.0.2.1", "documentation");
  DENIED(deny_v4, "198.18.0.1", "benchmarking");
  CHECK(deny_v4("1.1.1.1") == NULL);
  CHECK(deny_v4("8.8.8.8") == NULL);
  CHECK(deny_v4("172.32.0.1") == NULL);
  CHECK(deny_v4("100.128.0.1") == NULL);
  CHECK(deny_v4("11.0.0.1") == NULL);
}

TEST(deny_set_ipv6) {
  DENIED(deny_v6, "::1", "loopback");
  DENIED(deny_v6, "::", "unspecified");
  DENIED(deny_v6, "fd00:ec2::254", "metadata");
  DENIED(deny_v6, "::ffff:127.0.0.1", "ipv4-mapped");
  DENIED(deny_v6, "::ffff:8.8.8.8", "ipv4-mapped"); /* every embedding, even of a public address */
  DENIED(deny_v6, "::127.0.0.1", "ipv4-compatible");
  DENIED(deny_v6, "64:ff9b::a9fe:a9fe", "nat64");
  DENIED(deny_v6, "64:ff9b:1::1", "nat64");
  DENIED(deny_v6, "2002:7f00:1::1", "6to4");
  DENIED(deny_v6, "2001:0:4136:e378::1", "teredo");
  DENIED(deny_v6, "fc00::1", "private");
  DENIED(deny_v6, "fd12:3456::1", "private");
  DENIED(deny_v6, "fe80::1", "link-local");
  DENIED(deny_v6, "ff02::1", "multicast");
  DENIED(deny_v6, "2001:db8::1", "documentation");
  DENIED(deny_v6, "4000::1", "reserved");
  CHECK(deny_v6("2606:4700:4700::1111") == NULL);
  CHECK(deny_v6("2a00:1450:4001::1") == NULL);
}

TEST(cidr_allow) {
  struct egress_cidr c;
  struct husk_err err;
  CHECK(egress_cidr_parse("10.250.0.0/24", &c, &err) == 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  inet_pton(AF_INET, "10.250.0.7", &a.sin_addr);
  CHECK(egress_cidr_contains(&c, (struct sockaddr *)&a));
  inet_pton(AF_INET, "10.250.1.7", &a.sin_addr);
  CHECK(!egress_cidr_contains(&c, (struct sockaddr *)&a));
  CHECK(egress_cidr_parse("10.250.0.0/33", &c, &err) < 0);
  CHECK(egress_cidr_parse("nonsense", &c, &err) < 0);
  CHECK(egress_cidr_parse("10.0.0.0/x", &c, &err) < 0);
  CHECK(egress_cidr_parse("fd00::/8", &c, &err) == 0 && c.family == AF_INET6);
}

TEST(authority) {
  struct egress_host h;
  unsigned port = 0;
  struct husk_err err;
  CHECK(egress_authority_parse("Example.com:443", 15, 0, &h, &port, &err) == 0 && port == 443 &&
        !strcmp(h.name, "example.com"));
  CHECK(egress_authority_parse("[::1]:8443", 10, 0, &h, &port, &err) == 0 && port == 8443 &&
        h.kind == EGRESS_HOST_IPV6);
  CHECK(egress_authority_parse("example.com", 11, 0, &h, &port, &err) < 0);   /* CONNECT needs a port */
  CHECK(egress_authority_parse("example.com", 11, 80, &h, &port, &err) == 0 && port == 80);
  CHECK(egress_authority_parse("example.com:0", 13, 0, &h, &port, &err) < 0);
  CHECK(egress_authority_parse("example.com:65536", 17, 0, &h, &port, &err) < 0);
  CHECK(egress_authority_parse("example.com:+1", 14, 0, &h, &port, &err) < 0);
  CHECK(egress_authority_parse("a@example.com:443", 17, 0, &h, &port, &err) < 0);
  CHECK(egress_authority_parse("[example.com]:443", 17, 0, &h, &port, &err) < 0);
  CHECK(egress_authority_parse("::1:443", 7, 0, &h, &port, &err) < 0);
}

TEST(policy_match) {
  struct egress_policy *p = calloc(1, sizeof *p);
  struct husk_err err;
  CHECK(egress_policy_parse("{\"rules\":[{\"host\":\"API.ex.test.\"},"
                            "{\"host\":\"*.wild.test\",\"ports\":[443,8443],\"mode\":\"inject\"}],"
                            "\"secrets\":[{\"name\":\"TOK\",\"hosts\":[\"api.ex.test\"]}]}",
                            false, p, &err) == 0);
  CHECK(egress_policy_match(p, "api.ex.test", 443) != NULL);
  CHECK(egress_policy_match(p, "api.ex.test", 80) == NULL);
  CHECK(egress_policy_match(p, "x.api.ex.test", 443) == NULL);
  CHECK(egress_policy_match(p, "a.wild.test", 8443) && egress_policy_match(p, "a.wild.test", 8443)->mode == EGRESS_INJECT);
  CHECK(egress_policy_match(p, "a.b.wild.test", 443) != NULL);
  CHECK(egress_policy_match(p, "wild.test", 443) == NULL);
  CHECK(egress_policy_match(p, "badwild.test", 443) == NULL);
  CHECK(p->nbindings == 1 && !strncmp(p->bindings[0].placeholder, "husk_ph_", 8) &&
        !strcmp(p->bindings[0].headers[0], "authorization"));
  /* Round trip through the stored form keeps the placeholder. */
  char *js = egress_policy_to_json(p);
  struct egress_policy *q = calloc(1, sizeof *q);
  CHECK(js && egress_policy_parse(js, true, q, &err) == 0);
  CHECK(!strcmp(q->bindings[0].placeholder, p->bindings[0].placeholder));
  free(js);
  free(q);
  const char *bad[] = {
      "[]", "{\"rules\":{}}", "{\"rules\":[{\"host\":\"*.test\"}]}", "{\"rules\":[{\"host\":\"a.test\",\"ports\":[0]}]}",
      "{\"rules\":[{\"host\":\"a.test\",\"mode\":\"x\"}]}", "{\"rules\":[{\"host\":\"a.test\",\"extra\":1}]}",
      "{\"secrets\":[{\"name\":\"X\",\"hosts\":[\"a.test\"],\"headers\":[\"Host\"]}]}",
      "{\"secrets\":[{\"name\":\"X\",\"hosts\":[]}]}", "{\"secrets\":[{\"name\":\"X Y\",\"hosts\":[\"a.test\"]}]}",
      "{\"secrets\":[{\"name\":\"X\",\"hosts\":[\"a.test\"],\"placeholder\":\"husk_ph_00\"}]}",
      "{\"rules\":[{\"host\":\"*.10.0.0.1\"}]}", "{\"bogus\":1}",
      /* the daemon's own secrets cannot be bound */
      "{\"secrets\":[{\"name\":\"__husk_oidc_client_secret\",\"hosts\":[\"a.test\"]}]}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err.msg[0] = '\0';
    if (egress_policy_parse(bad[i], false, p, &err) == 0) {
      printf("#   accepted: %s\n", bad[i]);
      CHECK(0);
    }
    CHECK(err.msg[0] != '\0');
  }
  free(p);
}

int main(void) {
  RUN(names_normalised);
  RUN(names_refused);
  RUN(ipv4_literal_forms);
  RUN(ipv4_literal_refused);
  RUN(deny_set_ipv4);
  RUN(deny_set_ipv6);
  RUN(cidr_allow);
  RUN(authority);
  RUN(policy_match);
  return unit_done();
}
