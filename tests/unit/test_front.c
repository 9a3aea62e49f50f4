/* Unit tests for src/front/: what the HTTP fronts (API, S3) share. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>

#include "front/listen.h"
#include "unit.h"

static bool listen_ok(const char *s, int family, unsigned port) {
  struct sockaddr_storage ss;
  socklen_t len = 0;
  struct husk_err err = {0};
  if (front_parse_listen(s, &ss, &len, &err) < 0)
    return false;
  if (ss.ss_family != family)
    return false;
  if (family == AF_INET)
    return len == sizeof(struct sockaddr_in) &&
           ntohs(((struct sockaddr_in *)&ss)->sin_port) == port;
  return len == sizeof(struct sockaddr_in6) &&
         ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) == port;
}

static bool listen_bad(const char *s, const char *msg) {
  struct sockaddr_storage ss;
  socklen_t len = 0;
  struct husk_err err = {0};
  return front_parse_listen(s, &ss, &len, &err) < 0 && strstr(err.msg, msg) != NULL;
}

TEST(listen_addresses) {
  CHECK(listen_ok("127.0.0.1:7070", AF_INET, 7070));
  CHECK(listen_ok("0.0.0.0:0", AF_INET, 0)); /* any free port */
  CHECK(listen_ok("10.1.2.3:65535", AF_INET, 65535));
  CHECK(listen_ok("[::1]:7071", AF_INET6, 7071));
  CHECK(listen_ok("[::]:80", AF_INET6, 80));
  CHECK(listen_ok("[fe80::1:2]:00080", AF_INET6, 80));
  CHECK(listen_bad(NULL, "empty"));
  CHECK(listen_bad("", "empty"));
  CHECK(listen_bad("127.0.0.1", "ADDR:PORT"));
  CHECK(listen_bad("::1:7070", "ADDR:PORT")); /* IPv6 needs brackets */
  CHECK(listen_bad("[::1]7070", "ADDR:PORT"));
  CHECK(listen_bad("[::1", "ADDR:PORT"));
  CHECK(listen_bad("127.0.0.1:", "bad port"));
  CHECK(listen_bad("127.0.0.1:65536", "bad port"));
  CHECK(listen_bad("127.0.0.1:123456", "bad port"));
  CHECK(listen_bad("127.0.0.1:-1", "bad port"));
  CHECK(listen_bad("127.0.0.1:80x", "bad port"));
  CHECK(listen_bad("[::1]:", "bad port"));
  CHECK(listen_bad("localhost:80", "numeric"));
  CHECK(listen_ok("[127.0.0.1]:80", AF_INET, 80)); /* brackets are not only for IPv6 */
  CHECK(listen_bad("1.2.3:80", "numeric"));
  char longhost[300];
  memset(longhost, '1', sizeof longhost);
  memcpy(longhost + 280, ":80", 4);
  CHECK(listen_bad(longhost, "ADDR:PORT"));
}

TEST(listen_hosts_for_urls) {
  char h[64];
  front_listen_host("127.0.0.1:7070", h, sizeof h);
  CHECK_STR(h, "127.0.0.1");
  front_listen_host("[::1]:7071", h, sizeof h);
  CHECK_STR(h, "[::1]");
  front_listen_host("[fe80::1:2]:0", h, sizeof h);
  CHECK_STR(h, "[fe80::1:2]");
  front_listen_host("127.0.0.1:7070", h, 4);
  CHECK_STR(h, "127");
}

int main(void) {
  RUN(listen_addresses);
  RUN(listen_hosts_for_urls);
  return unit_done();
}
