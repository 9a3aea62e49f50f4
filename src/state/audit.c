/* The audit log: one immutable record per state-changing call, kept
 * until the retention pass removes it (state_audit_prune).
 *
 * Who, what, which box, when, outcome -- never secrets or file contents; the
 * caller decides what goes in `detail`, this file only stores it.  The
 * fields the daemon itself chooses (tenant, key, action, outcome) are
 * checked strictly: a bad one is a bug to report.  The fields that may echo
 * what a client sent (the box id it asked about, the detail) are sanitized
 * instead: a record of a hostile call must not be lost because the call was
 * hostile. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "state/db.h"
#include "util/cleanup.h"

#define AUDIT_COLUMNS                                                                              \
  "id, ts_ms, tenant_id, key_id, action, box_id, detail, outcome, status, user_id, user_name, "    \
  "client_id, client_name, idp_subject"

/* A char array field must hold its NUL: otherwise the caller overflowed it
 * and what follows is not the value they meant. */
#define FIELD_TERMINATED(f) (memchr((f), '\0', sizeof(f)) != NULL)

int state_audit_add(struct state *st, const struct state_audit *rec, int64_t *id_out,
                    struct husk_err *err) {
  if (!rec)
    return husk_fail(err, EINVAL, "audit record is missing");
  if (!FIELD_TERMINATED(rec->box_id) || !FIELD_TERMINATED(rec->detail) ||
      !FIELD_TERMINATED(rec->user_name) || !FIELD_TERMINATED(rec->client_name) ||
      !FIELD_TERMINATED(rec->idp_subject))
    return husk_fail(err, EINVAL, "audit record field is not terminated");
  if (check_id_or_empty("audit tenant id", rec->tenant_id, sizeof rec->tenant_id, err) < 0 ||
      check_id_or_empty("audit key id", rec->key_id, sizeof rec->key_id, err) < 0 ||
      check_id_or_empty("audit user id", rec->user_id, sizeof rec->user_id, err) < 0 ||
      check_id_or_empty("audit client id", rec->client_id, sizeof rec->client_id, err) < 0 ||
      check_text("audit action", rec->action, sizeof rec->action, false, err) < 0 ||
      check_text("audit outcome", rec->outcome, sizeof rec->outcome, false, err) < 0)
    return -1;
  if (rec->ts_ms < 0)
    return husk_fail(err, EINVAL, "audit time must be >= 0");
  /* Names a person or a client chose: sanitized like the detail. */
  char box_id[sizeof rec->box_id], detail[sizeof rec->detail];
  char user_name[sizeof rec->user_name], client_name[sizeof rec->client_name];
  char idp_subject[sizeof rec->idp_subject];
  memcpy(idp_subject, rec->idp_subject, sizeof idp_subject);
  sanitize_text(idp_subject); /* the provider chose it */
  memcpy(box_id, rec->box_id, sizeof box_id);
  memcpy(detail, rec->detail, sizeof detail);
  memcpy(user_name, rec->user_name, sizeof user_name);
  memcpy(client_name, rec->client_name, sizeof client_name);
  sanitize_text(box_id);
  sanitize_text(detail);
  sanitize_text(user_name);
  sanitize_text(client_name);

  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "INSERT INTO audit (ts_ms, tenant_id, key_id, action, box_id, detail, outcome,"
                 " status, user_id, user_name, client_id, client_name, idp_subject) VALUES (?1,"
                 " ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_int(s, 1, rec->ts_ms ? rec->ts_ms : state_now_ms())) ||
      (rc = db_text(s, 2, rec->tenant_id)) || (rc = db_text(s, 3, rec->key_id)) ||
      (rc = db_text(s, 4, rec->action)) || (rc = db_text(s, 5, box_id)) ||
      (rc = db_text(s, 6, detail)) || (rc = db_text(s, 7, rec->outcome)) ||
      (rc = db_int(s, 8, rec->status)) || (rc = db_text(s, 9, rec->user_id)) ||
      (rc = db_text(s, 10, user_name)) || (rc = db_text(s, 11, rec->client_id)) ||
      (rc = db_text(s, 12, client_name)) || (rc = db_text(s, 13, idp_subject)))
    return db_fail(st, err, rc, "cannot bind audit record");
  if (db_step_done(st, s, "cannot append audit record", err) < 0)
    return -1;
  if (id_out)
    *id_out = sqlite3_last_insert_rowid(st->db);
  return 0;
}

static int read_audit(sqlite3_stmt *s, void *row, struct husk_err *err) {
  struct state_audit *a = row;
  a->id = sqlite3_column_int64(s, 0);
  a->ts_ms = sqlite3_column_int64(s, 1);
  bool ok = db_col_text(s, 2, a->tenant_id, sizeof a->tenant_id);
  ok &= db_col_text(s, 3, a->key_id, sizeof a->key_id);
  ok &= db_col_text(s, 4, a->action, sizeof a->action);
  ok &= db_col_text(s, 5, a->box_id, sizeof a->box_id);
  ok &= db_col_text(s, 6, a->detail, sizeof a->detail);
  ok &= db_col_text(s, 7, a->outcome, sizeof a->outcome);
  a->status = sqlite3_column_int(s, 8);
  ok &= db_col_text(s, 9, a->user_id, sizeof a->user_id);
  ok &= db_col_text(s, 10, a->user_name, sizeof a->user_name);
  ok &= db_col_text(s, 11, a->client_id, sizeof a->client_id);
  ok &= db_col_text(s, 12, a->client_name, sizeof a->client_name);
  ok &= db_col_text(s, 13, a->idp_subject, sizeof a->idp_subject);
  if (!ok)
    return husk_fail(err, EUCLEAN, "audit record %lld has an oversized value", (long long)a->id);
  return 0;
}

static int check_filter(const struct state_audit_filter *f, struct husk_err *err) {
  if (!f)
    return husk_fail(err, EINVAL, "audit filter is missing");
  if ((f->tenant_id && check_id("tenant id", f->tenant_id, STATE_TENANT_ID_SIZE, err) < 0) ||
      (f->box_id && check_text("box id", f->box_id, STATE_BOX_ID_SIZE, false, err) < 0) ||
      (f->user_id && check_id("user id", f->user_id, STATE_USER_ID_SIZE, err) < 0) ||
      (f->action &&
       check_text("action", f->action, sizeof((struct state_audit *)0)->action, false, err) < 0))
    return -1;
  if (f->since_ms < 0 || f->until_ms < 0 || f->after_id < 0 || f->before_id < 0)
    return husk_fail(err, EINVAL, "audit filter bounds must be >= 0");
  return 0;
}

int state_audit_list(struct state *st, const struct state_audit_filter *filter,
                     int (*cb)(void *ctx, const struct state_audit *rec), void *ctx,
                     struct husk_err *err) {
  int limit;
  if (check_filter(filter, err) < 0 || db_check_limit(filter->limit, &limit, err) < 0)
    return -1;
  /* Constant fragments only, chosen by which filters are set, so SQLite
   * can pick the matching index; values are bound by name. */
  char sql[1024];
  snprintf(
      sql, sizeof sql,
      "SELECT " AUDIT_COLUMNS " FROM audit WHERE 1%s%s%s%s%s%s%s%s ORDER BY id%s LIMIT :limit",
      filter->tenant_id ? " AND tenant_id = :tenant" : "",
      filter->box_id ? " AND box_id = :box" : "", filter->action ? " AND action = :action" : "",
      /* The != '' lets SQLite use the partial index audit_user. */
      filter->user_id ? " AND user_id = :user AND user_id != ''" : "",
      filter->since_ms ? " AND ts_ms >= :since" : "", filter->until_ms ? " AND ts_ms < :until" : "",
      filter->after_id ? " AND id > :after" : "", filter->before_id ? " AND id < :before" : "",
      filter->newest_first ? " DESC" : "");

  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_audit)};
  {
    cleanup_unlock struct state *locked = db_lock(st);
    cleanup_stmt sqlite3_stmt *s = NULL;
    if (db_prepare(st, &s, sql, err) < 0)
      return -1;
    int rc = db_int_named(s, ":limit", limit);
    if (!rc && filter->tenant_id)
      rc = db_text_named(s, ":tenant", filter->tenant_id);
    if (!rc && filter->box_id)
      rc = db_text_named(s, ":box", filter->box_id);
    if (!rc && filter->action)
      rc = db_text_named(s, ":action", filter->action);
    if (!rc && filter->user_id)
      rc = db_text_named(s, ":user", filter->user_id);
    if (!rc && filter->since_ms)
      rc = db_int_named(s, ":since", filter->since_ms);
    if (!rc && filter->until_ms)
      rc = db_int_named(s, ":until", filter->until_ms);
    if (!rc && filter->after_id)
      rc = db_int_named(s, ":after", filter->after_id);
    if (!rc && filter->before_id)
      rc = db_int_named(s, ":before", filter->before_id);
    if (rc)
      return db_fail(st, err, rc, "cannot bind audit filter");
    if (db_rows_fill(st, s, &rows, read_audit, "cannot list audit records", err) < 0)
      return -1;
  }
  return db_rows_each(&rows, rows.n, cb, ctx);
}

int state_audit_prune(struct state *st, int64_t before_ms, unsigned max_rows, size_t *deleted,
                      struct husk_err *err) {
  *deleted = 0;
  /* The database refuses to delete a record younger than a day. */
  int64_t floor_ms = state_now_ms() - STATE_AUDIT_MIN_AGE_MS;
  if (before_ms > floor_ms)
    before_ms = floor_ms;
  if (max_rows == 0 || before_ms <= 0)
    return 0;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "DELETE FROM audit WHERE id IN"
                 " (SELECT id FROM audit WHERE ts_ms < ?1 ORDER BY ts_ms LIMIT ?2)",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_int(s, 1, before_ms)) || (rc = db_int(s, 2, (int64_t)max_rows)))
    return db_fail(st, err, rc, "cannot bind audit retention");
  if (db_step_done(st, s, "cannot remove old audit records", err) < 0)
    return -1;
  *deleted = (size_t)sqlite3_changes(st->db);
  return 0;
}
