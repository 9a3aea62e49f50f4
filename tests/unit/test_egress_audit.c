/* Egress audit aggregation (src/egress/audit_agg.c) and audit retention
 * (state_audit_prune): records stay O(intervals x kinds of decision), not
 * O(decisions); the counts add up; floods stay under the caps; old records
 * go in bounded batches and young ones never. */
#define _GNU_SOURCE
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "egress/audit_agg.h"
#include "state/state.h"
#include "unit.h"

/* Every record the aggregation hands out, as the proxy would write them. */
struct sink {
  struct state_audit *r;
  size_t n, cap;
};

static void sink_add(struct sink *s, const struct state_audit *r) {
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 256;
    s->r = realloc(s->r, s->cap * sizeof *s->r);
    if (!s->r)
      abort();
  }
  s->r[s->n++] = *r;
}

static void sink_take(struct sink *s, struct state_audit *rows, size_t n) {
  for (size_t i = 0; i < n; i++)
    sink_add(s, &rows[i]);
  free(rows);
}

static void tick(struct sink *s, struct egress_agg *a, int64_t now) {
  struct state_audit *rows = NULL;
  size_t n = egress_agg_tick(a, now, &rows);
  sink_take(s, rows, n);
}

static void drain(struct sink *s, struct egress_agg *a, const char *box) {
  struct state_audit *rows = NULL;
  size_t n = egress_agg_drain(a, box, &rows);
  sink_take(s, rows, n);
}

static uint64_t count_of(const struct state_audit *r) {
  const char *c = strstr(r->detail, "count=");
  return c ? strtoull(c + 6, NULL, 10) : 0;
}

/* Records and summed counts of `box` whose detail holds `needle`. */
static size_t rows_with(const struct sink *s, const char *box, const char *needle,
                        uint64_t *sum) {
  size_t n = 0;
  *sum = 0;
  for (size_t i = 0; i < s->n; i++)
    if (!strcmp(s->r[i].box_id, box) && strstr(s->r[i].detail, needle)) {
      n++;
      *sum += count_of(&s->r[i]);
    }
  return n;
}

static size_t rows_of(const struct sink *s, const char *box, uint64_t *sum) {
  return rows_with(s, box, "", sum);
}

static void dns(struct egress_agg *a, struct sink *s, const char *box, const char *tenant,
                const char *name, bool ok) {
  struct egress_agg_event ev = {.box_id = box, .tenant = tenant, .action = "egress.dns",
                                .outcome = ok ? "ok" : "denied", .status = ok ? 0 : 3,
                                .host = name, .port = 0, .mode = "dns", .via = "proxy",
                                .reason = ok ? NULL : "not-allowed", .dns = true};
  struct state_audit r;
  if (egress_agg_add(a, &ev, &r))
    sink_add(s, &r);
}

static void conn(struct egress_agg *a, struct sink *s, const char *box, const char *host,
                 uint64_t up) {
  struct egress_agg_event ev = {.box_id = box, .tenant = "t_1", .action = "egress.connect",
                                .outcome = "ok", .status = 200, .host = host, .port = 443,
                                .addr = "10.250.0.2", .mode = "tunnel", .via = "proxy",
                                .bytes_up = up, .bytes_down = 2 * up};
  struct state_audit r;
  if (egress_agg_add(a, &ev, &r))
    sink_add(s, &r);
}

static struct egress_agg *agg(unsigned box_rows, unsigned tenant_rows, unsigned box_keys) {
  struct egress_agg_limits lim = {.interval_ms = 1000, .box_rows = box_rows,
                                  .tenant_rows = tenant_rows, .box_keys = box_keys};
  struct egress_agg *a = NULL;
  struct husk_err err;
  if (egress_agg_new(&a, &lim, &err) < 0) {
    printf("# egress_agg_new: %s\n", err.msg);
    exit(1);
  }
  return a;
}

/* Thousands of questions for a few names over ten intervals: a record per
 * name per interval (plus the first, written at once), counts exact. */
TEST(repeated_decisions_are_counted) {
  struct egress_agg *a = agg(0, 0, 0);
  struct sink s = {0};
  int64_t now = 1000000;
  tick(&s, a, now); /* starts the first interval */
  const char *names[] = {"a.test", "b.test", "c.test"};
  for (int iv = 0; iv < 10; iv++) {
    for (int i = 0; i < 1000; i++)
      for (int k = 0; k < 3; k++)
        dns(a, &s, "b_1", "t_1", names[k], k != 2);
    for (int i = 0; i < 7; i++)
      conn(a, &s, "b_1", "api.test", 100);
    now += 1000;
    tick(&s, a, now);
  }
  drain(&s, a, "b_1");
  uint64_t sum;
  for (int k = 0; k < 3; k++) {
    char needle[64];
    snprintf(needle, sizeof needle, "host=%s ", names[k]);
    size_t n = rows_with(&s, "b_1", needle, &sum);
    CHECK(n >= 10 && n <= 11);
    CHECK(sum == 10000);
  }
  CHECK(rows_with(&s, "b_1", "host=c.test port=0 addr=- mode=dns via=proxy", &sum) >= 10);
  CHECK(rows_with(&s, "b_1", "reason=not-allowed", &sum) >= 10 && sum == 10000);
  size_t n = rows_with(&s, "b_1", "host=api.test ", &sum);
  CHECK(n >= 10 && n <= 11);
  CHECK(sum == 70);
  /* Bytes are summed: 7 x 100 per interval, 6 of them in the aggregated
   * record of the first interval. */
  CHECK(rows_with(&s, "b_1", "bytes_up=600 bytes_down=1200 count=6 first_ms=", &sum) == 1);
  CHECK(rows_with(&s, "b_1", "bytes_up=700 bytes_down=1400 count=7 first_ms=", &sum) == 9);
  CHECK(rows_with(&s, "b_1", "egress.audit", &sum) == 0);
  CHECK(s.n <= 4 * 11);
  free(s.r);
  egress_agg_free(a);
}

/* A flood of distinct names: at most box_rows records per interval plus one
 * "suppressed" record, every question still counted. */
TEST(a_flood_of_distinct_names_is_capped) {
  struct egress_agg *a = agg(20, 0, 64);
  struct sink s = {0};
  int64_t now = 1000000;
  tick(&s, a, now);
  char name[64];
  for (int iv = 0; iv < 3; iv++) {
    for (int i = 0; i < 5000; i++) {
      snprintf(name, sizeof name, "n%d-%d.flood.test", iv, i);
      dns(a, &s, "b_1", "t_1", name, false);
    }
    now += 1000;
    tick(&s, a, now);
  }
  drain(&s, a, NULL);
  uint64_t sum, sup;
  size_t n = rows_of(&s, "b_1", &sum);
  CHECK(n <= 4 * (20 + 1));
  CHECK(sum == 15000);
  for (size_t i = 0; i < s.n; i++)
    if (!strcmp(s.r[i].action, "egress.audit"))
      CHECK_STR(s.r[i].outcome, "suppressed");
  CHECK(rows_with(&s, "b_1", "over the audit caps", &sup) >= 3);
  CHECK(sup > 14000);
  free(s.r);
  egress_agg_free(a);
}

/* Names may take only half of a box's entries, and connections are
 * written before DNS at the end of an interval: after a flood of names,
 * the box's connections are still in the records. */
TEST(connections_survive_a_dns_flood) {
  struct egress_agg *a = agg(10, 0, 16);
  struct sink s = {0};
  int64_t now = 1000000;
  tick(&s, a, now);
  char name[64];
  for (int i = 0; i < 2000; i++) {
    snprintf(name, sizeof name, "n%d.flood.test", i);
    dns(a, &s, "b_1", "t_1", name, false);
  }
  for (int i = 0; i < 5; i++)
    conn(a, &s, "b_1", "reached.test", 1);
  now += 1000;
  tick(&s, a, now);
  uint64_t sum;
  CHECK(rows_with(&s, "b_1", "host=reached.test ", &sum) == 1);
  CHECK(sum == 5);
  free(s.r);
  egress_agg_free(a);
}

/* The tenant cap holds across its boxes; another tenant is not affected. */
TEST(tenant_cap) {
  struct egress_agg *a = agg(4, 6, 0);
  struct sink s = {0};
  char name[64];
  for (int i = 0; i < 100; i++) {
    snprintf(name, sizeof name, "n%d.test", i);
    dns(a, &s, "b_1", "t_1", name, false);
    dns(a, &s, "b_2", "t_1", name, false);
    dns(a, &s, "b_3", "t_2", name, false);
  }
  uint64_t sum;
  size_t r1 = rows_of(&s, "b_1", &sum), r2 = rows_of(&s, "b_2", &sum);
  CHECK(r1 <= 4 && r2 <= 4 && r1 + r2 == 6); /* the tenant's 6 */
  CHECK(rows_of(&s, "b_3", &sum) == 4);
  free(s.r);
  s = (struct sink){0};
  drain(&s, a, NULL);
  uint64_t s1, s2, s3;
  rows_of(&s, "b_1", &s1);
  rows_of(&s, "b_2", &s2);
  rows_of(&s, "b_3", &s3);
  CHECK(s1 + s2 == 200 - 6);
  CHECK(s3 == 100 - 4);
  free(s.r);
  egress_agg_free(a);
}


/* A box deleted in the interval in which a flood of distinct names used up
 * its cap: the counts of the names it asked again and again are still
 * written when it goes, not turned into "suppressed". */
TEST(drain_keeps_the_counts_of_known_names) {
  struct egress_agg *a = agg(0, 0, 0);
  struct sink s = {0};
  int64_t now = 1000000;
  tick(&s, a, now);
  for (int i = 0; i < 1000; i++)
    dns(a, &s, "b_1", "t_1", "api.ex.test", true);
  for (int i = 0; i < 3000; i++) {
    char name[64];
    snprintf(name, sizeof name, "n%d.flood.test", i);
    dns(a, &s, "b_1", "t_1", name, true);
  }
  drain(&s, a, "b_1");
  uint64_t sum;
  size_t n = rows_with(&s, "b_1", "host=api.ex.test ", &sum);
  CHECK(n == 2);
  CHECK(sum == 1000);
  rows_of(&s, "b_1", &sum);
  CHECK(sum == 4000);
  free(s.r);
  egress_agg_free(a);
}

/* A box going away writes what was counted for it, and only for it. */
TEST(drain_one_box) {
  struct egress_agg *a = agg(0, 0, 0);
  struct sink s = {0};
  for (int i = 0; i < 50; i++) {
    dns(a, &s, "b_1", "t_1", "a.test", true);
    dns(a, &s, "b_2", "t_1", "a.test", true);
  }
  CHECK(s.n == 2);
  drain(&s, a, "b_1");
  uint64_t sum;
  CHECK(rows_of(&s, "b_1", &sum) == 2 && sum == 50);
  CHECK(rows_of(&s, "b_2", &sum) == 1 && sum == 1);
  /* b_1 is forgotten: its next decision is a first again. */
  dns(a, &s, "b_1", "t_1", "a.test", true);
  CHECK(rows_of(&s, "b_1", &sum) == 3);
  drain(&s, a, NULL);
  CHECK(rows_of(&s, "b_2", &sum) == 2 && sum == 50);
  CHECK(egress_agg_lost(a) == 0);
  free(s.r);
  egress_agg_free(a);
}

static int count_cb(void *ctx, const struct state_audit *r) {
  (void)r;
  ++*(int *)ctx;
  return 0;
}

static int audit_count(struct state *st) {
  int n = 0;
  struct state_audit_filter f = {.limit = STATE_LIST_MAX};
  struct husk_err err;
  if (state_audit_list(st, &f, count_cb, &n, &err) < 0)
    return -1;
  return n;
}

/* Retention: records past the cut-off go, a batch at a time; a record
 * younger than a day never goes, whatever cut-off is asked for, and the
 * database itself refuses to delete it. */
TEST(retention) {
  char dir[] = "/tmp/husk-egress-audit-XXXXXX";
  if (!mkdtemp(dir)) {
    CHECK(!"mkdtemp");
    return;
  }
  char path[64];
  snprintf(path, sizeof path, "%s/husk.db", dir);
  struct state *st = NULL;
  struct husk_err err;
  CHECK(state_open(&st, path, &err) == 0);
  if (!st)
    return;
  int64_t now = state_now_ms(), day = 86400LL * 1000;
  struct state_audit r = {0};
  snprintf(r.action, sizeof r.action, "egress.dns");
  snprintf(r.outcome, sizeof r.outcome, "ok");
  for (int i = 0; i < 25; i++) {
    r.ts_ms = now - 40 * day - i;
    CHECK(state_audit_add(st, &r, NULL, &err) == 0);
  }
  r.ts_ms = now - 2 * day;
  CHECK(state_audit_add(st, &r, NULL, &err) == 0);
  r.ts_ms = 0; /* now */
  CHECK(state_audit_add(st, &r, NULL, &err) == 0);
  CHECK(audit_count(st) == 27);
  size_t n = 0;
  CHECK(state_audit_prune(st, now - 30 * day, 10, &n, &err) == 0 && n == 10);
  CHECK(state_audit_prune(st, now - 30 * day, 10, &n, &err) == 0 && n == 10);
  CHECK(state_audit_prune(st, now - 30 * day, 10, &n, &err) == 0 && n == 5);
  CHECK(state_audit_prune(st, now - 30 * day, 10, &n, &err) == 0 && n == 0);
  CHECK(audit_count(st) == 2);
  /* A cut-off of "now" is moved back a day: the fresh record stays. */
  CHECK(state_audit_prune(st, now + day, 10, &n, &err) == 0 && n == 1);
  CHECK(audit_count(st) == 1);
  sqlite3 *db = NULL;
  CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  CHECK(sqlite3_exec(db, "DELETE FROM audit", NULL, NULL, NULL) == SQLITE_CONSTRAINT);
  sqlite3_close(db);
  CHECK(audit_count(st) == 1);
  state_close(st);
  char cmd[96];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    printf("# cannot remove %s\n", dir);
}

int main(void) {
  RUN(repeated_decisions_are_counted);
  RUN(a_flood_of_distinct_names_is_capped);
  RUN(connections_survive_a_dns_flood);
  RUN(tenant_cap);
  RUN(drain_one_box);
  RUN(drain_keeps_the_counts_of_known_names);
  RUN(retention);
  return unit_done();
}
