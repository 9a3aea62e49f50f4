/* Long-lived boxes: the lifecycle behind `husk serve` (and later MCP and the
 * E2B-compatible API).  A box is created, runs commands, has files moved
 * in and out, and ends by request, by TTL, or by failure; its state lives
 * in SQLite (src/state) and survives daemon restarts: a restarted daemon
 * re-adopts every box whose init still runs, and destroys and marks failed
 * the ones it cannot.
 *
 * Every call takes the tenant making it; a box of another tenant is
 * reported as not found (ENOENT), never as forbidden, so ids don't leak.
 * Errors: -1 with err->code = ENOENT (unknown id), EINVAL (bad input),
 * EBUSY (wrong state, e.g. exec in a stopped box), EDQUOT (tenant quota),
 * ENOSPC (box disk full), others for internal failures. */
#ifndef HUSK_BOX_BOX_H
#define HUSK_BOX_BOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "box/exec.h"
#include "husk/husk.h"
#include "util/error.h"

struct state;
struct box_mgr;

/* One warm pool: `size` ready boxes of one shape.  A create whose limits
 * resolve to exactly this shape claims one.  The shape's timeout and output
 * fields are ignored (they count from the claim). */
struct box_pool_spec {
  struct husk_limits shape; /* as a create would give them; resolved at open */
  unsigned size;
};
#define BOX_POOL_MAX_SHAPES 16
/* All pools together.  As many as there are uid slots (HUSK_UID_SLOTS):
 * pools that large leave no slot for creates no pool serves. */
#define BOX_POOL_MAX_BOXES 4096

struct box_mgr_config {
  const char *data_dir;         /* boxes/<id>/ctl.sock are created under it */
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
  unsigned egress_max_conns;
  unsigned egress_idle_ms;
  /* Audit records older than this are removed (bounded batches, on the
   * egress audit thread); 0: kept forever. */
  int64_t audit_retention_ms;
};

/* Open the manager: lock the data directory (one daemon per directory:
 * EWOULDBLOCK if another holds it), start the box spawner, reconcile the
 * database with the kernel (re-adopt, or destroy and mark failed), sweep
 * leftovers, start the monitor. */
int box_mgr_open(struct box_mgr **out, const struct box_mgr_config *cfg, struct husk_err *err);

/* The warm pools' state, in configuration order (at most `max`); the
 * count of creates whose shape no pool keeps goes to *unmatched. */
struct box_pool_stat {
  struct husk_limits shape;
  unsigned size, ready;
  uint64_t claims; /* creates served from this pool */
  uint64_t empty;  /* creates of this shape that found it empty */
};
size_t box_pool_stats(struct box_mgr *m, struct box_pool_stat *out, size_t max, uint64_t *unmatched);

/* Stop the reaper and release in-memory state.  Boxes keep running (they
 * are re-adopted by the next daemon) unless `destroy_boxes`. */
void box_mgr_close(struct box_mgr *m, bool destroy_boxes);

/* Box states: "creating", "running", then one terminal state:
 * "stopped" (deleted by request), "killed" (killed by request or by the
 * operator), "expired" (TTL), "failed" (could not start or died). */

struct box_create_req {
  const char *template_name;  /* NULL or "default" */
  const char *network;        /* NULL or "none" (loopback only), or "egress" (through the proxy) */
  const char *egress_json;    /* egress mode: rules and secret bindings (see src/egress/policy.h) */
  struct husk_limits limits;  /* 0 = default; timeout_ms is the box TTL */
  char *const *env;           /* NAME=VALUE for every exec, NULL-terminated or NULL */
  const char *metadata_json;  /* a JSON object of strings, or NULL */
};

struct box_info {
  char id[40];
  char tenant_id[32];
  char state[16];
  char reason[256];
  char template_name[64];
  char network[16];           /* "none" or "egress" */
  char *egress_json;          /* egress mode: the policy with its placeholders (malloc'd), else NULL */
  struct husk_limits limits;
  int64_t created_ms, expires_ms, ended_ms;
  char *metadata_json; /* malloc'd, "{}" at least */
  char *env_json;      /* malloc'd JSON array of NAME=VALUE */
};
void box_info_free(struct box_info *bi);

int box_create(struct box_mgr *m, const char *tenant, const struct box_create_req *req,
               struct box_info *out, struct husk_err *err);
int box_get(struct box_mgr *m, const char *tenant, const char *id, struct box_info *out,
            struct husk_err *err);

/* List the tenant's boxes: state filter (NULL = any), metadata filters
 * (all must match), cursor pagination (next_cursor "" at the end). */
struct box_list_req {
  const char *state;
  const char *const *meta_keys;
  const char *const *meta_values;
  size_t nmeta;
  const char *cursor;
  int limit;
};
int box_list(struct box_mgr *m, const char *tenant, const struct box_list_req *req,
             int (*cb)(void *ctx, const struct box_info *bi), void *ctx, char *next_cursor,
             size_t next_len, struct husk_err *err);

/* End a box: `final_state` is "stopped" or "killed".  Returns once the box
 * is unreachable; teardown finishes at once too (it is fast). */
int box_destroy(struct box_mgr *m, const char *tenant, const char *id, const char *final_state,
                struct husk_err *err);

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
int box_tenant_delete(struct box_mgr *m, const char *tenant, const struct box_tenant_purge *purge,
                      struct husk_err *err);
int box_tenant_finish_delete(struct box_mgr *m, const char *tenant,
                             const struct box_tenant_purge *purge, struct husk_err *err);
/* Finish every deletion a previous run left midway (logged, audited). */
void box_tenant_resume(struct box_mgr *m, const struct box_tenant_purge *purge);

/* New TTL counted from now (extend or shorten). */
int box_set_timeout(struct box_mgr *m, const char *tenant, const char *id, uint64_t ttl_ms,
                    struct box_info *out, struct husk_err *err);

/* Run a command to completion (sync) or streaming (sink set in spec): the
 * box's env is applied under the request's env; cwd defaults to
 * /workspace; timeout and output limit default to the box's.  The result
 * is in *out (reason, exit code...). */
struct box_exec_req {
  char *const *argv;
  char *const *env;
  const char *cwd;
  uint64_t timeout_ms;
  uint64_t output_limit;
  const void *stdin_buf;
  size_t stdin_len;
  int (*sink)(void *ctx, int stream, const char *buf, size_t len);
  void (*started)(void *ctx, pid_t pid);
  void *sink_ctx;
  int cancel_fd;
};
int box_exec(struct box_mgr *m, const char *tenant, const char *id, const struct box_exec_req *req,
             struct exec_outcome *out, struct husk_err *err);

/* Background processes: started with output to files inside the box's
 * filesystem (outside what the box sees), which survive daemon restarts. */
struct box_proc {
  int64_t pid;          /* inside the box */
  char state[16];       /* running | exited */
  int exit_code;        /* when exited: code, or 128+signal */
  int signal;
  int64_t started_ms, ended_ms;
  char *cmd_json;       /* malloc'd JSON array */
};
void box_proc_free(struct box_proc *p);
int box_exec_background(struct box_mgr *m, const char *tenant, const char *id,
                        const struct box_exec_req *req, struct box_proc *out, struct husk_err *err);
int box_proc_list(struct box_mgr *m, const char *tenant, const char *id,
                  int (*cb)(void *ctx, const struct box_proc *p), void *ctx, struct husk_err *err);
int box_proc_get(struct box_mgr *m, const char *tenant, const char *id, int64_t pid,
                 struct box_proc *out, struct husk_err *err);
/* Signal the process (group = its whole process group). */
int box_proc_signal(struct box_mgr *m, const char *tenant, const char *id, int64_t pid, int sig,
                    bool group, struct husk_err *err);
/* Write to its stdin; eof closes it. */
int box_proc_stdin(struct box_mgr *m, const char *tenant, const char *id, int64_t pid,
                   const void *buf, size_t len, bool eof, struct husk_err *err);
/* Open its output (stream 1 stdout, 2 stderr): a read-only fd the caller
 * closes and reads at any offset (pread).  *running tells whether more
 * may come (to follow, re-check with box_proc_get). */
int box_proc_output(struct box_mgr *m, const char *tenant, const char *id, int64_t pid, int stream,
                    int *fd_out, bool *running, struct husk_err *err);

/* Change a running box's network: "none" removes its link at once (open
 * connections are cut); "egress" with a policy creates the link, or
 * replaces the policy of an egress box (new connections use it; secret
 * placeholders of bindings that keep their env name are kept).  The proxy
 * and CA variables are in the env of execs started afterwards. */
int box_set_network(struct box_mgr *m, const char *tenant, const char *id, const char *network,
                    const char *egress_json, struct box_info *out, struct husk_err *err);

/* The tenant's secrets vault (values are write-only: no call returns one). */
int box_secret_put(struct box_mgr *m, const char *tenant, const char *name, const void *value,
                   size_t len, struct husk_err *err);
int box_secret_delete(struct box_mgr *m, const char *tenant, const char *name, struct husk_err *err);
int box_secret_list(struct box_mgr *m, const char *tenant,
                    int (*cb)(void *ctx, const char *name, int64_t created_ms, int64_t updated_ms),
                    void *ctx, struct husk_err *err);

/* Usage of a running box. */
struct box_metrics {
  uint64_t cpu_usec, memory_current, memory_peak, pids, disk_used, disk_total;
};
int box_metrics(struct box_mgr *m, const char *tenant, const char *id, struct box_metrics *out,
                struct husk_err *err);

/* Borrow a running box's filesystem for file operations: *fs is a dup of
 * the box filesystem's root fd (close it when done), uid/gid the host ids
 * of the box user. */
int box_open_fs(struct box_mgr *m, const char *tenant, const char *id, int *fs, uid_t *uid,
                gid_t *gid, struct husk_err *err);

#endif
