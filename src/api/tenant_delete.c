/* Deleting a tenant with everything it owns (DELETE /v1/tenants/{id}).
 *
 * The order makes every step safe to interrupt (state.h,
 * state_tenant_mark_deleted): the mark comes first and takes away every
 * key of the tenant, so nothing new can be made for it while the rest goes;
 * then its live boxes are ended through the box manager (killed, torn
 * down), its storage removed (store_tenant_purge), and the remaining rows
 * and the tenant itself dropped in one transaction.  A daemon killed midway
 * finds the mark at its next start and finishes (api_tenant_resume). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "box/box.h"
#include "storage/store.h"

/* Rounds of "list the live boxes, end them": a box whose create was in
 * flight at the mark may become live after a listing. */
#define DELETE_BOX_ROUNDS 3

struct id_list {
  char (*ids)[STATE_BOX_ID_SIZE];
  size_t n, cap;
};

static int collect_id(struct id_list *l, const char *id) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 64;
    void *p = realloc(l->ids, cap * sizeof *l->ids);
    if (!p)
      return -2;
    l->ids = p;
    l->cap = cap;
  }
  snprintf(l->ids[l->n++], STATE_BOX_ID_SIZE, "%s", id);
  return 0;
}

static int collect_box(void *ctx, const struct state_box *b) { return collect_id(ctx, b->id); }

/* End every live box of the tenant.  *left: how many a listing still
 * found live in the last round (0: none). */
static int end_boxes(const struct api_config *cfg, const char *tenant, size_t *left,
                     struct husk_err *err) {
  for (int round = 0; round < DELETE_BOX_ROUNDS; round++) {
    struct id_list l = {0};
    char cursor[STATE_CURSOR_SIZE] = "";
    do {
      char next[STATE_CURSOR_SIZE];
      struct state_box_filter f = {
          .tenant_id = tenant, .state = STATE_BOX_LIVE, .cursor = cursor, .limit = STATE_LIST_MAX};
      int rc = state_box_list(cfg->state, &f, collect_box, &l, next, sizeof next, err);
      if (rc < 0) {
        free(l.ids);
        return rc == -2 ? husk_error(err, ENOMEM, "listing the tenant's boxes") : -1;
      }
      snprintf(cursor, sizeof cursor, "%s", next);
    } while (cursor[0]);
    *left = l.n;
    for (size_t i = 0; i < l.n; i++) {
      struct husk_err e;
      /* EBUSY: already ending, or still being created; the next round or
       * the final check sees it. */
      if (box_destroy(cfg->mgr, tenant, l.ids[i], "killed", &e) < 0 && e.code != EBUSY &&
          e.code != ENOENT) {
        *err = e;
        free(l.ids);
        return -1;
      }
    }
    free(l.ids);
    if (*left == 0)
      return 0;
  }
  return 0;
}

int api_tenant_finish_delete(const struct api_config *cfg, const char *tenant,
                             struct husk_err *err) {
  size_t left = 0;
  if (end_boxes(cfg, tenant, &left, err) < 0)
    return -1;
  if (cfg->store && store_tenant_purge(cfg->store, tenant, err) < 0)
    return -1;
  return state_tenant_purge(cfg->state, tenant, err);
}

int api_tenant_delete(const struct api_config *cfg, const char *tenant, struct husk_err *err) {
  if (state_tenant_mark_deleted(cfg->state, tenant, err) < 0)
    return -1;
  return api_tenant_finish_delete(cfg, tenant, err);
}

static int collect_deleted(void *ctx, const struct state_tenant *t) {
  return t->deleted_ms ? collect_id(ctx, t->id) : 0;
}

void api_tenant_resume(struct api_server *s) {
  struct id_list l = {0};
  struct husk_err err;
  int rc = state_tenant_list(s->cfg.state, collect_deleted, &l, &err);
  if (rc < 0) {
    api_log(s, "cannot list the tenants being deleted: %s", rc == -1 ? err.msg : "out of memory");
    free(l.ids);
    return;
  }
  for (size_t i = 0; i < l.n; i++) {
    bool ok = api_tenant_finish_delete(&s->cfg, l.ids[i], &err) == 0;
    if (ok)
      api_log(s, "finished deleting tenant %s", l.ids[i]);
    else
      api_log(s, "deleting tenant %s: %s (DELETE it again to retry)", l.ids[i], err.msg);
    /* The admin's call was audited when it began; its end is too. */
    struct state_audit rec = {0};
    snprintf(rec.action, sizeof rec.action, "tenant.delete");
    snprintf(rec.detail, sizeof rec.detail, "tenant=%s resumed at start", l.ids[i]);
    snprintf(rec.outcome, sizeof rec.outcome, "%s", ok ? "ok" : "error");
    struct husk_err aerr;
    if (state_audit_add(s->cfg.state, &rec, NULL, &aerr) < 0)
      api_log(s, "audit record for tenant.delete failed: %s", aerr.msg);
  }
  free(l.ids);
}
