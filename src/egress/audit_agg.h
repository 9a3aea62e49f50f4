/* Egress audit aggregation: a box's repeated decisions (DNS questions,
 * connections to the same host with the same outcome) become one audit
 * record per (box, decision) per interval carrying a count, instead of a
 * record each.
 *
 * A decision is the tuple (box, action, outcome, status, host, port, mode,
 * via, reason).  The first one of its kind is written at once (so "who
 * reached what, when" stays answerable to the second); repeats are counted
 * in memory and written as one record at the end of the interval (or when
 * the box goes, or the daemon stops), with `count=N first_ms=T` and the
 * bytes summed.  Every egress record carries `count=`: summing it gives the
 * number of decisions.
 *
 * Bounded by configuration, never by what a box does:
 *   - records per box and per tenant per interval; past the cap decisions
 *     are counted and one `egress.audit suppressed` record per box and
 *     interval says how many (a drain, when the box goes or the daemon
 *     stops, writes every count it holds: at most one record per entry);
 *   - entries in memory, in all and per box (DNS names may take half of a
 *     box's entries, so a flood of distinct names leaves room for its
 *     connections); a decision that finds no room is written at once if
 *     the caps allow, else counted as suppressed.
 * Thread-safe (one internal mutex, never held while writing records). */
#ifndef HUSK_EGRESS_AUDIT_AGG_H
#define HUSK_EGRESS_AUDIT_AGG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state/state.h"
#include "util/error.h"

/* Defaults (docs/limits.md, "Egress audit"). */
#define EGRESS_AUDIT_INTERVAL_MS 10000
#define EGRESS_AUDIT_BOX_ROWS 60     /* records per box per interval */
#define EGRESS_AUDIT_TENANT_ROWS 240 /* records per tenant per interval */
#define EGRESS_AUDIT_MAX_KEYS 8192   /* aggregation entries, all boxes */
#define EGRESS_AUDIT_BOX_KEYS 256    /* aggregation entries per box */

struct egress_agg_limits {
  unsigned interval_ms, box_rows, tenant_rows, max_keys, box_keys; /* 0: default */
};

/* One decision.  Strings may be NULL ("-"); they are copied. */
struct egress_agg_event {
  const char *box_id, *tenant;
  const char *action, *outcome;
  int status;
  const char *host;
  unsigned port;
  const char *addr, *mode, *via, *reason;
  bool dns;
  uint64_t bytes_up, bytes_down;
  int64_t ts_ms; /* wall clock; 0: now */
};

struct egress_agg;

int egress_agg_new(struct egress_agg **out, const struct egress_agg_limits *lim,
                   struct husk_err *err);
void egress_agg_free(struct egress_agg *a);

/* Count one decision.  1: *row must be written now (count=1); 0:
 * counted, nothing to write now. */
int egress_agg_add(struct egress_agg *a, const struct egress_agg_event *ev,
                   struct state_audit *row);

/* The record of a decision written on its own, outside the aggregation
 * (a box already stopped): same shape, count=1. */
void egress_agg_row(const struct egress_agg_event *ev, struct state_audit *row);

/* Monotonic time the current interval ends. */
int64_t egress_agg_due(struct egress_agg *a);

/* If the interval has ended at now_ms: start the next one and return the
 * records of the one that ended (malloc'd in *rows, free it), else 0. */
size_t egress_agg_tick(struct egress_agg *a, int64_t now_ms, struct state_audit **rows);

/* Everything counted for box_id (all boxes if NULL), as records, and
 * forget it: the box is gone, or the daemon stops. */
size_t egress_agg_drain(struct egress_agg *a, const char *box_id, struct state_audit **rows);

/* Decisions lost for want of memory (not even counted in a record). */
uint64_t egress_agg_lost(struct egress_agg *a);

#endif
