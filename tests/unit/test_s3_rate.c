/* The budget of refused link fetches (src/s3/s3_ratelimit.c): each source
 * has its own, IPv6 sources are grouped by /64, all share one, and the
 * fixed table forgets the sources seen least recently first. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "s3/s3_internal.h"
#include "unit.h"

/* Spends the source's budget; how many were granted (at most `max`). */
static int spend(struct s3_rate *rl, const char *key, int64_t now, int max) {
  int n = 0;
  while (n < max && s3_rate_take(rl, key, now))
    n++;
  return n;
}

static void source_of(const char *addr, char *out, size_t size) {
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  if (strchr(addr, ':')) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    if (inet_pton(AF_INET6, addr, &a->sin6_addr) != 1)
      snprintf(out, size, "bad");
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    if (inet_pton(AF_INET, addr, &a->sin_addr) != 1)
      snprintf(out, size, "bad");
  }
  s3_rate_source((const struct sockaddr *)&ss, out, size);
}

TEST(separate_sources) {
  struct s3_rate_limits lim = {.burst = 5, .per_s = 1, .shared_burst = 1000, .shared_per_s = 100};
  struct s3_rate *rl = NULL;
  CHECK(s3_rate_init(&rl, &lim) == 0);
  CHECK(spend(rl, "192.0.2.1", 1000, 100) == 5);
  CHECK(!s3_rate_take(rl, "192.0.2.1", 1000));
  /* Another source has its whole budget. */
  CHECK(spend(rl, "192.0.2.2", 1000, 100) == 5);
  /* Refilled at per_s: one more after a second, not before. */
  CHECK(!s3_rate_take(rl, "192.0.2.1", 1999));
  CHECK(s3_rate_take(rl, "192.0.2.1", 2000));
  CHECK(!s3_rate_take(rl, "192.0.2.1", 2000));
  /* And never past the burst. */
  CHECK(spend(rl, "192.0.2.1", 1000000, 100) == 5);
  s3_rate_free(rl);
}

TEST(ipv6_by_64) {
  char a[S3_RATE_KEY_MAX], b[S3_RATE_KEY_MAX], c[S3_RATE_KEY_MAX], d[S3_RATE_KEY_MAX];
  source_of("2001:db8:1:2:aaaa::1", a, sizeof a);
  source_of("2001:db8:1:2:ffff:1:2:3", b, sizeof b);
  source_of("2001:db8:1:3::1", c, sizeof c);
  CHECK_STR(a, "2001:db8:1:2::");
  CHECK_STR(a, b);
  CHECK(strcmp(a, c) != 0);
  /* IPv4, plain or mapped, is the whole address. */
  source_of("203.0.113.7", d, sizeof d);
  CHECK_STR(d, "203.0.113.7");
  source_of("::ffff:203.0.113.7", d, sizeof d);
  CHECK_STR(d, "::ffff:203.0.113.7");
  source_of("127.0.0.2", d, sizeof d);
  CHECK_STR(d, "127.0.0.2");
  /* Unknown families and no address: one shared name. */
  s3_rate_source(NULL, d, sizeof d);
  CHECK_STR(d, "-");
  struct sockaddr_storage un = {.ss_family = AF_UNIX};
  s3_rate_source((const struct sockaddr *)&un, d, sizeof d);
  CHECK_STR(d, "-");

  /* One /64 shares one budget. */
  struct s3_rate_limits lim = {.burst = 3, .per_s = 1, .shared_burst = 1000, .shared_per_s = 100};
  struct s3_rate *rl = NULL;
  CHECK(s3_rate_init(&rl, &lim) == 0);
  CHECK(spend(rl, a, 1000, 2) == 2);
  CHECK(spend(rl, b, 1000, 100) == 1);
  CHECK(spend(rl, c, 1000, 100) == 3);
  s3_rate_free(rl);
}

TEST(shared_bucket) {
  struct s3_rate_limits lim = {.burst = 3, .per_s = 1, .shared_burst = 10, .shared_per_s = 2};
  struct s3_rate *rl = NULL;
  CHECK(s3_rate_init(&rl, &lim) == 0);
  char key[S3_RATE_KEY_MAX];
  int granted = 0;
  for (int i = 0; i < 20; i++) {
    snprintf(key, sizeof key, "198.51.100.%d", i);
    granted += spend(rl, key, 1000, 100);
  }
  CHECK(granted == 10);
  /* A fresh source is refused too while the shared budget is spent... */
  CHECK(!s3_rate_take(rl, "198.51.100.200", 1000));
  /* ...and a refused take costs the source nothing: after the shared
   * bucket refills (2/s), it still has its own 3. */
  CHECK(spend(rl, "198.51.100.200", 2500, 100) == 3);
  s3_rate_free(rl);
}

TEST(table_forgets_least_recent) {
  /* No refill: a remembered source stays spent, a forgotten one starts
   * with a full budget again. */
  struct s3_rate_limits lim = {.burst = 1, .per_s = 0, .shared_burst = 1e12, .shared_per_s = 0};
  struct s3_rate *rl = NULL;
  CHECK(s3_rate_init(&rl, &lim) == 0);
  enum { N = S3_RATE_SLOTS * 8, RECENT = 64, OLD = 64 };
  char key[S3_RATE_KEY_MAX];
  /* Each source spends its budget, one millisecond after the previous. */
  for (int i = 0; i < N; i++) {
    snprintf(key, sizeof key, "10.%d.%d.%d", (i >> 16) & 255, (i >> 8) & 255, i & 255);
    CHECK(s3_rate_take(rl, key, 1000 + i));
  }
  /* The sources seen last are remembered, spent... */
  int remembered = 0;
  for (int i = N - RECENT; i < N; i++) {
    snprintf(key, sizeof key, "10.%d.%d.%d", (i >> 16) & 255, (i >> 8) & 255, i & 255);
    remembered += !s3_rate_take(rl, key, 1000 + N);
  }
  CHECK(remembered == RECENT);
  /* ...the first ones were replaced by later ones. */
  int forgotten = 0;
  for (int i = 0; i < OLD; i++) {
    snprintf(key, sizeof key, "10.%d.%d.%d", (i >> 16) & 255, (i >> 8) & 255, i & 255);
    forgotten += s3_rate_take(rl, key, 1000 + N);
  }
  CHECK(forgotten == OLD);
  s3_rate_free(rl);
}

TEST(long_key_cut) {
  /* A key longer than a slot's is cut, not overrun. */
  struct s3_rate_limits lim = {.burst = 2, .per_s = 0, .shared_burst = 100, .shared_per_s = 0};
  struct s3_rate *rl = NULL;
  CHECK(s3_rate_init(&rl, &lim) == 0);
  char key[256];
  memset(key, 'k', sizeof key - 1);
  key[sizeof key - 1] = 0;
  CHECK(s3_rate_take(rl, key, 1000));
  CHECK(s3_rate_take(rl, key, 1000));
  s3_rate_free(rl);
}

TEST(give_back) {
  /* Taken before the work, given back when it succeeded: only failures
   * stay spent, and a give never raises a budget past its burst. */
  struct s3_rate_limits lim = {.burst = 3, .per_s = 0, .shared_burst = 100, .shared_per_s = 0};
  struct s3_rate *rl = NULL;
  CHECK(s3_rate_init(&rl, &lim) == 0);
  for (int i = 0; i < 10; i++) {
    CHECK(s3_rate_take(rl, "192.0.2.9", 1000));
    s3_rate_give(rl, "192.0.2.9", 1000);
  }
  CHECK(spend(rl, "192.0.2.9", 1000, 100) == 3);
  s3_rate_give(rl, "192.0.2.9", 1000);
  s3_rate_give(rl, "192.0.2.9", 1000);
  s3_rate_give(rl, "192.0.2.9", 1000);
  s3_rate_give(rl, "192.0.2.9", 1000);
  CHECK(spend(rl, "192.0.2.9", 1000, 100) == 3);
  s3_rate_free(rl);
}

TEST(ipv6_by_48) {
  struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
  char a[S3_RATE_KEY_MAX], b[S3_RATE_KEY_MAX], c[S3_RATE_KEY_MAX];
  CHECK(inet_pton(AF_INET6, "2001:db8:1:2:aaaa::1", &a6.sin6_addr) == 1);
  s3_rate_source_prefix((const struct sockaddr *)&a6, 48, a, sizeof a);
  CHECK(inet_pton(AF_INET6, "2001:db8:1:ffff:1::2", &a6.sin6_addr) == 1);
  s3_rate_source_prefix((const struct sockaddr *)&a6, 48, b, sizeof b);
  CHECK(inet_pton(AF_INET6, "2001:db8:2::1", &a6.sin6_addr) == 1);
  s3_rate_source_prefix((const struct sockaddr *)&a6, 48, c, sizeof c);
  CHECK(!strcmp(a, "2001:db8:1::"));
  CHECK(!strcmp(a, b)); /* another /64 of the same /48: one source */
  CHECK(strcmp(a, c) != 0);
  struct sockaddr_in a4 = {.sin_family = AF_INET};
  CHECK(inet_pton(AF_INET, "192.0.2.7", &a4.sin_addr) == 1);
  s3_rate_source_prefix((const struct sockaddr *)&a4, 48, a, sizeof a);
  CHECK(!strcmp(a, "192.0.2.7"));
}

int main(void) {
  RUN(separate_sources);
  RUN(ipv6_by_64);
  RUN(shared_bucket);
  RUN(table_forgets_least_recent);
  RUN(long_key_cut);
  RUN(give_back);
  RUN(ipv6_by_48);
  return unit_done();
}
