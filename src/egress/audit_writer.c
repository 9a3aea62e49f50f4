/* The egress audit writer: every decision of the proxy goes through the
 * aggregation (audit_agg.h) and becomes a record in the database.  A
 * connection thread writes its own records; the DNS stub, which runs on
 * the acceptor, queues them for a thread of its own, so that the acceptor
 * never waits for the database.  Once a second that thread also writes the
 * aggregated records of an interval that ended and runs the retention pass
 * (audit records of every kind, older than the configured age, removed in
 * bounded batches). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "egress/proxy_internal.h"
#include "util/clock.h"

struct aud_item {
  struct aud_item *next;
  uint64_t seq;
  struct state_audit rec;
};

static void write_rows(struct egress *e, struct state_audit *rows, size_t n) {
  for (size_t i = 0; i < n; i++) {
    struct husk_err err;
    if (state_audit_add(e->cfg.state, &rows[i], NULL, &err) < 0)
      egress_log(e, "egress: box %s: cannot write audit record: %s", rows[i].box_id, err.msg);
  }
  free(rows);
}

/* Retention: audit records older than the configured age go, in bounded
 * batches, so that one pass never holds the database for long. */
#define PRUNE_BATCH 1000
#define PRUNE_BATCHES 10
#define PRUNE_EVERY_MS (3600 * 1000)

static void prune(struct egress *e, int64_t now) {
  if (!e->cfg.audit_retention_ms || now < e->prune_at)
    return;
  size_t total = 0, n = PRUNE_BATCH;
  for (int i = 0; i < PRUNE_BATCHES && n == PRUNE_BATCH; i++) {
    struct husk_err err;
    if (state_audit_prune(e->cfg.state, state_now_ms() - e->cfg.audit_retention_ms, PRUNE_BATCH,
                          &n, &err) < 0) {
      egress_log(e, "audit retention: %s", err.msg);
      break;
    }
    total += n;
  }
  /* More left: continue at the next interval rather than in one go. */
  e->prune_at = now + (n == PRUNE_BATCH ? e->agg_interval_ms : PRUNE_EVERY_MS);
  if (total)
    egress_log(e, "audit retention: %zu record(s) older than %lld day(s) removed", total,
               (long long)(e->cfg.audit_retention_ms / 86400000));
}

/* Once a second: the aggregated records of an interval that ended, and
 * the retention pass when due. */
static void housekeeping(struct egress *e) {
  int64_t now = mono_ms();
  struct state_audit *rows;
  pthread_mutex_lock(&e->agg_write_lock);
  size_t n = egress_agg_tick(e->agg, now, &rows);
  write_rows(e, rows, n);
  pthread_mutex_unlock(&e->agg_write_lock);
  prune(e, now);
}

static void *audit_writer_main(void *arg) {
  struct egress *e = arg;
  int64_t house_at = 0;
  pthread_mutex_lock(&e->aq_lock);
  for (;;) {
    if (mono_ms() >= house_at) {
      pthread_mutex_unlock(&e->aq_lock);
      housekeeping(e);
      house_at = mono_ms() + 1000;
      pthread_mutex_lock(&e->aq_lock);
    }
    struct aud_item *it = e->aq_head;
    if (!it) {
      if (e->aq_stop)
        break; /* stopping and drained */
      struct timespec ts = clock_after_ms(CLOCK_MONOTONIC, 1000);
      pthread_cond_timedwait(&e->aq_cond, &e->aq_lock, &ts);
      continue;
    }
    e->aq_head = it->next;
    if (!e->aq_head)
      e->aq_tail = NULL;
    e->aq_len--;
    pthread_mutex_unlock(&e->aq_lock);
    struct husk_err err;
    if (state_audit_add(e->cfg.state, &it->rec, NULL, &err) < 0)
      egress_log(e, "egress: box %s: cannot write audit record: %s", it->rec.box_id, err.msg);
    uint64_t seq = it->seq;
    free(it);
    pthread_mutex_lock(&e->aq_lock);
    e->aq_done = seq;
    pthread_cond_broadcast(&e->aq_done_cond);
  }
  e->aq_done = e->aq_seq;
  pthread_cond_broadcast(&e->aq_done_cond);
  unsigned dropped = e->aq_dropped;
  pthread_mutex_unlock(&e->aq_lock);
  /* What is still counted goes in records before the daemon stops. */
  struct state_audit *rows;
  size_t n = egress_agg_drain(e->agg, NULL, &rows);
  write_rows(e, rows, n);
  if (dropped)
    egress_log(e, "egress: %u audit records were dropped (queue full)", dropped);
  uint64_t lost = egress_agg_lost(e->agg);
  if (lost)
    egress_log(e, "egress: %llu audit decisions were lost (out of memory)", (unsigned long long)lost);
  return NULL;
}

int egress_audit_writer_start(struct egress *e, struct husk_err *err) {
  if (egress_agg_new(&e->agg, &e->cfg.audit, err) < 0)
    return -1;
  e->agg_interval_ms = e->cfg.audit.interval_ms ? e->cfg.audit.interval_ms : EGRESS_AUDIT_INTERVAL_MS;
  pthread_mutex_init(&e->aq_lock, NULL);
  pthread_mutex_init(&e->agg_write_lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&e->aq_cond, &ca);
  pthread_cond_init(&e->aq_done_cond, &ca);
  pthread_condattr_destroy(&ca);
  if (pthread_create(&e->aq_thread, NULL, audit_writer_main, e) != 0) {
    pthread_cond_destroy(&e->aq_cond);
    pthread_cond_destroy(&e->aq_done_cond);
    pthread_mutex_destroy(&e->aq_lock);
    pthread_mutex_destroy(&e->agg_write_lock);
    return husk_fail(err, EAGAIN, "cannot start the egress audit thread");
  }
  e->aq_running = true;
  return 0;
}

void egress_audit_writer_stop(struct egress *e) {
  if (e->aq_running) {
    pthread_mutex_lock(&e->aq_lock);
    e->aq_stop = true;
    pthread_cond_signal(&e->aq_cond);
    pthread_mutex_unlock(&e->aq_lock);
    pthread_join(e->aq_thread, NULL); /* drains the queue first */
    pthread_cond_destroy(&e->aq_cond);
    pthread_cond_destroy(&e->aq_done_cond);
    pthread_mutex_destroy(&e->aq_lock);
    pthread_mutex_destroy(&e->agg_write_lock);
  }
  egress_agg_free(e->agg);
}

/* Queue a record; never blocks.  A full queue drops (and counts) it. */
static void audit_queue(struct egress *e, const struct state_audit *a) {
  struct aud_item *it = malloc(sizeof *it);
  pthread_mutex_lock(&e->aq_lock);
  if (!it || e->aq_len >= EGRESS_AUDIT_QUEUE_MAX || !e->aq_running) {
    e->aq_dropped++;
    pthread_mutex_unlock(&e->aq_lock);
    free(it);
    return;
  }
  it->rec = *a;
  it->next = NULL;
  it->seq = ++e->aq_seq;
  if (e->aq_tail)
    e->aq_tail->next = it;
  else
    e->aq_head = it;
  e->aq_tail = it;
  e->aq_len++;
  pthread_cond_signal(&e->aq_cond);
  pthread_mutex_unlock(&e->aq_lock);
}

/* A decision goes through the aggregation (audit_agg.h): written now if it
 * is the first of its kind, else counted.  Once the box is stopped (its
 * counts already written) the few decisions of its last connections are
 * written on their own. */
static void audit_record(struct conn *c, const char *action, const char *outcome, int status,
                         const char *why, bool queued) {
  struct egress_agg_event ev = {
      .box_id = c->b->id, .tenant = c->b->tenant, .action = action, .outcome = outcome,
      .status = status, .host = c->host, .port = c->port, .addr = c->addr, .mode = c->mode,
      .via = c->kind == L_PROXY  ? "proxy"
             : c->kind == L_HTTP ? "transparent-80"
                                 : "transparent-443",
      .reason = why, .dns = !strcmp(action, "egress.dns"), .bytes_up = c->bytes_up,
      .bytes_down = c->bytes_down};
  struct state_audit a;
  if (atomic_load(&c->b->dead))
    egress_agg_row(&ev, &a);
  else if (!egress_agg_add(c->e->agg, &ev, &a))
    return;
  if (queued) {
    audit_queue(c->e, &a);
    return;
  }
  struct husk_err err;
  if (state_audit_add(c->e->cfg.state, &a, NULL, &err) < 0)
    egress_log(c->e, "egress: box %s: cannot write audit record: %s", c->b->id, err.msg);
}

void egress_audit(struct conn *c, const char *action, const char *outcome, int status,
                  const char *why) {
  audit_record(c, action, outcome, status, why, false);
}

void egress_audit_queued(struct conn *c, const char *action, const char *outcome, int status,
                         const char *why) {
  audit_record(c, action, outcome, status, why, true);
}

/* The box's counts are written now, and the call returns once every row
 * of the box taken out before it -- by an interval's end on the writer
 * thread, or queued by the DNS stub -- is written too (the queue is
 * waited for at most EGRESS_AUDIT_FLUSH_WAIT_MS). */
#define EGRESS_AUDIT_FLUSH_WAIT_MS 5000
void egress_audit_flush(struct egress *e, const char *box_id) {
  struct state_audit *rows;
  if (!e->aq_running) { /* no writer thread: nothing else takes rows */
    size_t n = egress_agg_drain(e->agg, box_id, &rows);
    write_rows(e, rows, n);
    return;
  }
  pthread_mutex_lock(&e->agg_write_lock);
  size_t n = egress_agg_drain(e->agg, box_id, &rows);
  write_rows(e, rows, n);
  pthread_mutex_unlock(&e->agg_write_lock);
  struct timespec until = clock_after_ms(CLOCK_MONOTONIC, EGRESS_AUDIT_FLUSH_WAIT_MS);
  pthread_mutex_lock(&e->aq_lock);
  uint64_t target = e->aq_seq;
  while (e->aq_done < target)
    if (pthread_cond_timedwait(&e->aq_done_cond, &e->aq_lock, &until) == ETIMEDOUT)
      break;
  pthread_mutex_unlock(&e->aq_lock);
}
