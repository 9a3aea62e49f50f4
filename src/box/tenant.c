/* Deleting a tenant with everything it owns.
 *
 * The order makes every step safe to interrupt (state.h,
 * state_tenant_mark_deleted): the mark comes first and takes away every
 * key of the tenant, so nothing new can be made for it while the rest goes;
 * then its live boxes are ended (killed, torn down), its storage removed
 * (the caller's purge: the box plane does not know the store), the
 * remaining rows and the tenant itself dropped in one transaction, and
 * the template layers no one else has collected.  A
 * daemon killed midway finds the mark at its next start and finishes
 * (box_tenant_resume). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "box/box_internal.h"

/* Rounds of "list the live boxes, end them": a box whose create was in
 * flight at the mark may become live after a listing. */
#define DELETE_BOX_ROUNDS 3

/* What collect_id returns when out of memory (the listing passes a
 * callback's non-zero result back unchanged). */
#define COLLECT_NOMEM (-2)

struct id_list {
  char (*ids)[STATE_BOX_ID_SIZE];
  size_t n, cap;
};

static int collect_id(struct id_list *l, const char *id) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 64;
    void *p = realloc(l->ids, cap * sizeof *l->ids);
    if (!p)
      return COLLECT_NOMEM;
    l->ids = p;
    l->cap = cap;
  }
  snprintf(l->ids[l->n++], STATE_BOX_ID_SIZE, "%s", id);
  return 0;
}

static int collect_box(void *ctx, const struct state_box *b) { return collect_id(ctx, b->id); }

/* End every live box of the tenant. */
static int end_boxes(struct husk_mgr *m, const char *tenant, struct husk_err *err) {
  for (int round = 0; round < DELETE_BOX_ROUNDS; round++) {
    struct id_list l = {0};
    char cursor[STATE_CURSOR_SIZE] = "";
    do {
      char next[STATE_CURSOR_SIZE];
      struct state_box_filter f = {
          .tenant_id = tenant, .state = STATE_BOX_LIVE, .cursor = cursor, .limit = STATE_LIST_MAX};
      int rc = state_box_list(m->cfg.state, &f, collect_box, &l, next, sizeof next, err);
      if (rc < 0) {
        free(l.ids);
        return rc == COLLECT_NOMEM ? husk_error(err, ENOMEM, "listing the tenant's boxes") : -1;
      }
      snprintf(cursor, sizeof cursor, "%s", next);
    } while (cursor[0]);
    size_t left = l.n;
    for (size_t i = 0; i < l.n; i++) {
      struct husk_err e;
      /* EBUSY: already ending, or still being created; the next round or
       * the final purge (which refuses a tenant with a live box) sees it. */
      if (husk_box_destroy(m, tenant, l.ids[i], "killed", &e) < 0 && e.code != EBUSY &&
          e.code != ENOENT) {
        *err = e;
        free(l.ids);
        return -1;
      }
    }
    free(l.ids);
    if (left == 0)
      return 0;
  }
  return 0;
}

int box_tenant_finish_delete(struct husk_mgr *m, const char *tenant,
                             const struct box_tenant_purge *purge, struct husk_err *err) {
  if (end_boxes(m, tenant, err) < 0)
    return -1;
  if (purge && purge->storage && purge->storage(purge->ctx, tenant, err) < 0)
    return -1;
  if (state_tenant_purge(m->cfg.state, tenant, err) < 0)
    return -1;
  box_volume_sweep(m, false); /* its volumes' images */
  /* Its templates' and build cache's rows went with the purge; their
   * layers go now unless another template or cache entry has them.  The
   * tenant is gone whatever happens here: a layer left (a crash before
   * this, a failure, an import holding the store) goes at the store's
   * next collection, at the latest when it is opened. */
  if (m->cfg.templates) {
    struct husk_err e2;
    int n = template_collect(m->cfg.templates, &e2);
    if (n < 0)
      box_log(m, "deleting tenant %s: cannot collect its template layers: %s", tenant, e2.msg);
    else if (n > 0)
      box_log(m, "deleting tenant %s: %d template layer(s) and blob(s) removed", tenant, n);
  }
  return 0;
}

int box_tenant_delete(struct husk_mgr *m, const char *tenant, const struct box_tenant_purge *purge,
                      struct husk_err *err) {
  if (state_tenant_mark_deleted(m->cfg.state, tenant, err) < 0)
    return -1;
  return box_tenant_finish_delete(m, tenant, purge, err);
}

static int collect_deleted(void *ctx, const struct state_tenant *t) {
  return t->deleted_ms ? collect_id(ctx, t->id) : 0;
}

void box_tenant_resume(struct husk_mgr *m, const struct box_tenant_purge *purge) {
  struct id_list l = {0};
  struct husk_err err;
  int rc = state_tenant_list(m->cfg.state, collect_deleted, &l, &err);
  if (rc < 0) {
    box_log(m, "cannot list the tenants being deleted: %s", rc == -1 ? err.msg : "out of memory");
    free(l.ids);
    return;
  }
  for (size_t i = 0; i < l.n; i++) {
    bool ok = box_tenant_finish_delete(m, l.ids[i], purge, &err) == 0;
    if (ok)
      box_log(m, "finished deleting tenant %s", l.ids[i]);
    else
      box_log(m, "deleting tenant %s: %s (DELETE it again to retry)", l.ids[i], err.msg);
    /* The admin's call was audited when it began; its end is too. */
    struct state_audit rec = {0};
    snprintf(rec.action, sizeof rec.action, "tenant.delete");
    snprintf(rec.detail, sizeof rec.detail, "tenant=%s resumed at start", l.ids[i]);
    snprintf(rec.outcome, sizeof rec.outcome, "%s", ok ? "ok" : "error");
    struct husk_err aerr;
    if (state_audit_add(m->cfg.state, &rec, NULL, &aerr) < 0)
      box_log(m, "audit record for tenant.delete failed: %s", aerr.msg);
  }
  free(l.ids);
}
