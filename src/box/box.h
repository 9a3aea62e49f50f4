/* Long-lived boxes: what the core offers beyond the public interface
 * (include/husk/box.h, exec.h, files.h, manager.h), for the fronts of
 * `husk serve`: a manager on a state the caller opened and shares with the
 * other planes, warm pools per shape, the egress settings, and the
 * deletion of a tenant with what it owns in other planes.
 *
 * A box's state lives in SQLite (src/state) and survives daemon restarts:
 * a restarted daemon re-adopts every box whose init still runs, and
 * destroys and marks failed the ones it cannot. */
#ifndef HUSK_BOX_BOX_H
#define HUSK_BOX_BOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "box/exec.h"
#include "husk/husk.h"
#include "state/template_state.h"
#include "util/error.h"

struct state;
struct store;
struct template_store;
struct husk_mgr;

/* One warm pool: `size` ready boxes of one shape.  A create whose limits
 * resolve to exactly this shape claims one.  The shape's timeout and output
 * fields are ignored (they count from the claim). */
struct box_pool_spec {
  struct husk_limits shape; /* as a create would give them; resolved at open */
  unsigned size;
  const char *template_name; /* NULL or "default"; else a shared template (the operator's) */
};
#define BOX_POOL_MAX_SHAPES 16
/* All pools together.  As many as there are uid slots (HUSK_UID_SLOTS):
 * pools that large leave no slot for creates no pool serves. */
#define BOX_POOL_MAX_BOXES 4096

#define BOX_MAX_PAUSED_DEFAULT_MS (24ULL * 3600 * 1000)
#define BOX_TENANT_SNAPSHOTS_DEFAULT 1000

struct box_mgr_config {
  const char *data_dir;         /* boxes/<id>/ctl.sock are created under it */
  const char *spawner_path;     /* the `husk` binary boxes are built by; NULL: found */
  struct template_store *templates; /* image templates (opened by the caller); NULL: only
                                       `default` */
  struct state *state;          /* opened by the caller */
  uint64_t default_ttl_ms;      /* box lifetime when create gives none */
  uint64_t max_ttl_ms;
  const struct box_pool_spec *pools; /* warm pools, distinct shapes (none: npools 0) */
  size_t npools;
  void (*log)(void *ctx, const char *line);
  void *log_ctx;
  /* Network mode `egress` (src/egress): the proxy's upstream resolver
   * ("IP[:port]", NULL: /etc/resolv.conf), operator-only CIDRs exempt from
   * the deny set (test ranges), extra trust roots for re-originated TLS,
   * and per-box connection limits (0: defaults). */
  const char *egress_resolver;
  const char *const *egress_allow;
  size_t egress_nallow;
  const char *egress_ca_file;
  unsigned egress_max_conns;        /* per box; 0: the proxy's default */
  unsigned egress_tenant_max_conns; /* per tenant, all its boxes; 0: the proxy's default */
  unsigned egress_total_max_conns;  /* the whole daemon; 0: the proxy's default */
  unsigned egress_idle_ms;
  /* Background processes one tenant may have running at once, over all
   * its boxes (each holds two of the daemon's fds while it runs); 0:
   * BOX_TENANT_PROCS_DEFAULT. */
  unsigned tenant_max_procs;
  /* Snapshots one tenant may keep (a box paused to disk keeps one too);
   * 0: BOX_TENANT_SNAPSHOTS_DEFAULT. */
  unsigned tenant_max_snapshots;
  /* How long a box may stay paused before it ends ("paused_too_long");
   * 0: BOX_MAX_PAUSED_DEFAULT_MS. */
  uint64_t max_paused_ms;
  /* Audit records older than this are removed (bounded batches, on the
   * egress audit thread); 0: kept forever. */
  int64_t audit_retention_ms;
  /* Free space of the data disk no volume may be made in (a disk_reserve
   * text: util/disk_reserve.h; NULL: the default), as for stored objects
   * and template layers. */
  const char *data_reserve;
};

/* Open the manager: lock the data directory (one daemon per directory:
 * EWOULDBLOCK if another holds it), start the box spawner, reconcile the
 * database with the kernel (re-adopt, or destroy and mark failed), sweep
 * leftovers, start the monitor. */
int box_mgr_open(struct husk_mgr **out, const struct box_mgr_config *cfg, struct husk_err *err);

/* The proxy settings of husk_mgr_open_egress (box_mgr_config's egress_*). */
struct box_egress_settings {
  const char *resolver;
  const char *const *allow;
  size_t nallow;
  const char *ca_file;
};
/* husk_mgr_open (include/husk/manager.h) with the egress proxy's operator
 * settings: for `husk template build`, whose RUN steps may use the proxy.
 * `eg` NULL: the defaults, as husk_mgr_open. */
int husk_mgr_open_egress(struct husk_mgr **out, const struct husk_mgr_config *cfg,
                         const struct box_egress_settings *eg, struct husk_err *err);

/* The warm pools' state, in configuration order (at most `max`); the
 * count of creates whose shape no pool keeps goes to *unmatched. */
struct box_pool_stat {
  struct husk_limits shape;
  char template_name[64]; /* "default", or the template its boxes are of */
  unsigned size, ready;
  uint64_t claims; /* creates served from this pool */
  uint64_t empty;  /* creates of this shape that found it empty */
};
size_t box_pool_stats(struct husk_mgr *m, struct box_pool_stat *out, size_t max, uint64_t *unmatched);

/* The object store snapshots go to (husk/snapshot.h); without one they
 * are ENOTSUP.  Set once, before any request; removes what a crash left
 * of snapshots being made. */
void box_mgr_set_store(struct husk_mgr *m, struct store *s);

/* The template store the manager was opened with (NULL: only `default`). */
struct template_store *box_mgr_templates(struct husk_mgr *m);

/* The templates `tenant` may use (its own, then the shared), by name. */
int box_template_list(struct husk_mgr *m, const char *tenant,
                      int (*cb)(void *ctx, const struct state_template *t), void *ctx,
                      struct husk_err *err);

/* Delete the owner's template (template_delete) unless a warm pool keeps
 * boxes of it (EBUSY: its boxes have no row the store's check would see). */
int box_template_delete(struct husk_mgr *m, const char *tenant, const char *name_or_id,
                        struct husk_err *err);

/* Stop the reaper and release in-memory state.  Boxes keep running (they
 * are re-adopted by the next daemon) unless `destroy_boxes`. */
void box_mgr_close(struct husk_mgr *m, bool destroy_boxes);

/* Deleting a tenant with everything it owns (src/box/tenant.c).  The box
 * plane ends the tenant's boxes and drops its rows; what it owns elsewhere
 * (the object store) the caller removes through `storage` (NULL: nothing
 * else), called after the boxes are gone and before the rows go.
 * box_tenant_delete marks the tenant first (its keys stop working at once);
 * a failure after the mark leaves it marked, and box_tenant_finish_delete
 * (a repeated delete) or box_tenant_resume (at start) finishes it.  EBUSY:
 * a box of the tenant is still being created. */
struct box_tenant_purge {
  int (*storage)(void *ctx, const char *tenant, struct husk_err *err);
  void *ctx;
};
int box_tenant_delete(struct husk_mgr *m, const char *tenant, const struct box_tenant_purge *purge,
                      struct husk_err *err);
int box_tenant_finish_delete(struct husk_mgr *m, const char *tenant,
                             const struct box_tenant_purge *purge, struct husk_err *err);
/* Finish every deletion a previous run left midway (logged, audited). */
void box_tenant_resume(struct husk_mgr *m, const struct box_tenant_purge *purge);

/* A Dockerfile build (build.c): its steps run in boxes of `tenant` (RUN
 * steps with the network `egress_json` allows, else none), the template
 * made belongs to `owner` ("" : the operator's, shared), named `name`.
 * Output (step headers and the steps' own output) goes to log(ctx, ...)
 * as it comes.  The build context is `context`, a directory fd, or what
 * `context_tar` (an fd: a tar stream, read to its end) holds, unpacked
 * into the store's work space (at most context_max bytes of tar, 0:
 * TEMPLATE_CONTEXT_MAX); neither (-1): COPY fails.  The Dockerfile is
 * `dockerfile`, or NULL: the file `dockerfile_path` ("Dockerfile" if
 * NULL) of the context.  Errors: EINVAL (the Dockerfile, a failed step:
 * the message names the step), EEXIST (the name is taken), as a box
 * create or an import otherwise. */
struct box_build_req {
  const char *tenant;
  const char *owner;
  const char *name;
  const char *dockerfile;
  size_t dockerfile_len;
  const char *dockerfile_path;
  char *const *build_args; /* NAME=VALUE, NULL-terminated, or NULL */
  int context;
  int context_tar;
  uint64_t context_max;
  const char *egress_json;
  struct husk_limits limits; /* of each step's box; timeout_ms: each RUN's (default 30 min) */
  bool no_cache;
  void (*log)(void *ctx, const char *buf, size_t len);
  void *log_ctx;
  int cancel_fd; /* readable: stop (the client went away), or -1 */
};
int box_build(struct husk_mgr *m, const struct box_build_req *req, struct state_template *out,
              struct husk_err *err);

/* The egress policy (JSON, malloc'd; NULL when out of memory) that lets
 * a build's RUN steps reach `hosts` (names, "*.suffix" patterns) on ports
 * 80 and 443 through the proxy (tunnel mode), and nothing else. */
char *box_build_egress_policy(const char *const *hosts, size_t n);

/* The tenant the operator's builds (of shared templates) run their steps'
 * boxes as: found, or made the first time. */
#define BOX_BUILD_TENANT "husk-builds"
int box_build_tenant(struct husk_mgr *m, char out[HUSK_TENANT_ID_MAX], struct husk_err *err);

/* The egress vault (NULL before box_egress_open or without egress): for
 * the daemon's own secrets (vault.h's reserved names). */
struct egress_vault *box_mgr_vault(struct husk_mgr *m);

#endif
