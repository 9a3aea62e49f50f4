/* husk: the manager of long-lived boxes, and tenants.
 *
 * A manager owns one data directory: the state database (SQLite) and the
 * boxes' runtime files.  Boxes outlive the manager: closing it (or the
 * process dying) leaves them running, and the next manager opened on the
 * same directory adopts them again, or destroys and marks failed the ones
 * it cannot.  One manager per data directory at a time (a second open
 * fails with EWOULDBLOCK).  The caller must be root.
 *
 * Every box belongs to a tenant; every call on a box names the tenant
 * making it, and a box of another tenant is reported as not found.  A
 * program with one user creates one tenant and keeps its id.
 *
 * All functions are thread-safe: any number of threads may call them on
 * one manager at once. */
#ifndef HUSK_MANAGER_H
#define HUSK_MANAGER_H

#include <stdbool.h>
#include <stdint.h>

#include "husk/base.h"

/* Opaque. */
struct husk_mgr;

struct husk_mgr_config {
  const char *data_dir;    /* created (mode 0700) if missing; required */
  uint64_t default_ttl_ms; /* lifetime of a box created without one; 0: 300 s */
  uint64_t max_ttl_ms;     /* longest lifetime a box may ask for; 0: 7 days */
  unsigned pool_size;      /* boxes of the default shape kept ready; 0: none */
  const char *husk_binary; /* the `husk` program every box is started from (its init is a
                              copy of it); NULL: the one installed with this library */
  husk_log_fn log;         /* the manager's log lines (box ended, teardown problems) */
  void *log_ctx;
};

/* Open a manager on cfg->data_dir: open (or create) its database, start the
 * box spawner, adopt the boxes a previous manager left running, sweep what
 * crashed runs left behind, start the monitor (TTLs, exits) and the pools.
 * *out is set on success; close it with husk_mgr_close.
 * Errors: EINVAL (no data_dir, a bad value), EWOULDBLOCK (another manager
 * holds the directory), EPERM (not root), ENOTSUP (the database was written
 * by a newer husk), EPROTO (husk_binary is not the `husk` of this library's
 * version), others (I/O, kernel). */
HUSK_PUBLIC int husk_mgr_open(struct husk_mgr **out, const struct husk_mgr_config *cfg,
                              struct husk_err *err);

/* Stop the manager's threads and free it.  Boxes keep running (the next
 * manager adopts them) unless destroy_boxes.  NULL is fine.  No call may be
 * running on `m` or start after this. */
HUSK_PUBLIC void husk_mgr_close(struct husk_mgr *m, bool destroy_boxes);

#define HUSK_TENANT_ID_MAX 32 /* size of a tenant id buffer, NUL included */
/* Size of a creator buffer (husk_box_spec.created_by, husk_proc's), NUL
 * included: "u_" and 24 hex digits, or "key:" and an API key id. */
#define HUSK_CREATED_BY_MAX 36

/* Create a tenant named `name` (1..127 bytes of UTF-8, unique) with no
 * quota; its id ("t_" + 24 hex digits) goes to id_out.
 * Errors: EINVAL (bad name), EEXIST (the name is taken). */
HUSK_PUBLIC int husk_tenant_create(struct husk_mgr *m, const char *name,
                                   char id_out[HUSK_TENANT_ID_MAX], struct husk_err *err);

/* Find a tenant by name; its id goes to id_out.  Errors: ENOENT. */
HUSK_PUBLIC int husk_tenant_find(struct husk_mgr *m, const char *name,
                                 char id_out[HUSK_TENANT_ID_MAX], struct husk_err *err);

/* Delete a tenant with its boxes (ended first), processes, secrets and
 * records.  A crash midway leaves it marked deleted (its calls fail with
 * ENOENT at once); the next husk_mgr_open finishes the deletion.
 * Errors: ENOENT (no such tenant), EBUSY (one of its boxes is being
 * created: retry). */
HUSK_PUBLIC int husk_tenant_delete(struct husk_mgr *m, const char *tenant, struct husk_err *err);

#endif
