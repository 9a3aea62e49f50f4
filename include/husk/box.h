/* husk: long-lived boxes: create, look up, list, end, and their lifetime,
 * network, secrets and usage.
 *
 * A box is an isolated computer: its own namespaces, cgroup limits, a
 * read-only root, and a writable /workspace, /tmp and /dev/shm that vanish
 * with it.  Its state moves "creating" -> "running" -> one terminal state:
 * "stopped" (deleted by request), "killed" (killed by request or by the
 * operator), "expired" (its lifetime ran out), "failed" (it could not start,
 * died, or could not be adopted after a restart).
 *
 * Every function takes the manager, the tenant making the call and the
 * box's id; a box of another tenant is ENOENT, never a distinct error. */
#ifndef HUSK_BOX_H
#define HUSK_BOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "husk/base.h"
#include "husk/manager.h"
#include "husk/run.h"

#define HUSK_BOX_ID_MAX 40 /* size of a box id buffer, NUL included */
#define HUSK_SNAPSHOT_ID_MAX 32 /* size of a snapshot id buffer, NUL included */

/* What a new box is made of.  Every field may be zero/NULL. */
struct husk_box_spec {
  const char *template_name; /* NULL or "default" (the host's /usr, read-only), or a template
                                the tenant sees (its own, else one the operator shares):
                                its image's layers under a writable layer of the box's
                                own, its user, env and working directory */
  const char *network;       /* NULL or "none" (loopback only), or "egress": the outside
                                only through husk's proxy, by egress_json's policy */
  const char *egress_json;   /* egress mode: {"rules":[...],"secrets":[...]} (docs/egress.md) */
  struct husk_limits limits; /* 0 = default; timeout_ms is the box's lifetime */
  char *const *env;          /* NAME=VALUE for every command, NULL-terminated, or NULL */
  const char *metadata_json; /* a JSON object of strings the caller can filter on, or NULL */
  /* A snapshot of the tenant's (husk/snapshot.h): the box starts with its
   * files, of its template (template_name NULL or the same), with its
   * limits, env and working directory unless these fields say otherwise
   * (env: on top of its env; disk: at least what it holds).  A snapshot
   * whose template was replaced since (a template of that name with
   * another id) is refused (ESTALE) unless `rebase`: then the files go
   * over the template as it is now. */
  const char *snapshot;
  bool rebase;
  /* Named volumes of the tenant's (husk/volume.h) mounted into the box,
   * at most HUSK_VOLUME_MOUNTS_MAX: each at an absolute path under
   * /workspace (not /workspace itself), no two nested in each other. */
  const struct husk_volume_mount *volumes;
  size_t nvolumes;
  /* Who creates it, recorded with it (husk_box_info.created_by): "u_" and
   * 24 hex digits (a user of the tenant's), "key:" and an API key id, or
   * NULL / "" for nobody in particular.  Anything else is EINVAL. */
  const char *created_by;
};

/* One volume mount of a box (husk_box_spec.volumes). */
struct husk_volume_mount {
  const char *name;  /* the tenant's volume */
  const char *path;  /* where, e.g. "/workspace/data" */
  bool read_only;    /* writes fail with EROFS */
};
#define HUSK_VOLUME_MOUNTS_MAX 8

/* A box as the manager knows it.  The malloc'd strings belong to the
 * struct: release them with husk_box_info_free. */
struct husk_box_info {
  char id[HUSK_BOX_ID_MAX];
  char tenant_id[HUSK_TENANT_ID_MAX];
  char state[16]; /* creating | running | stopped | killed | expired | failed */
  char reason[256];
  char template_name[64];
  char workdir[256]; /* where commands start unless they say */
  char network[16];  /* "none" or "egress" */
  char *egress_json; /* egress mode: the policy, secrets shown as placeholders; else NULL */
  struct husk_limits limits;
  int64_t created_ms, expires_ms, ended_ms; /* Unix time in ms; 0 when not applicable */
  char *metadata_json; /* "{}" at least */
  char *env_json;      /* JSON array of NAME=VALUE */
  /* Paused: since when, until when it may stay so (then it ends,
   * "paused_too_long"), and what is left of its lifetime (counted again
   * from its resume; expires_ms is 0 meanwhile).  Else all 0. */
  int64_t paused_ms, paused_until_ms;
  uint64_t remaining_ms;
  bool paused_to_disk; /* husk_box_pause_to_disk: no memory kept, resumed from a snapshot */
  char snapshot_id[HUSK_SNAPSHOT_ID_MAX]; /* the snapshot it was made from, or "" */
  /* Its volume mounts, a JSON array of {"name","path","read_only"}
   * (husk/volume.h); NULL when it has none, and in husk_box_list's
   * entries (husk_box_get fills it). */
  char *volumes_json;
  char created_by[HUSK_CREATED_BY_MAX]; /* husk_box_spec.created_by, or "" */
};

/* Free the strings of *bi (not bi itself); a zeroed struct is fine. */
HUSK_PUBLIC void husk_box_info_free(struct husk_box_info *bi);

/* Create a box and wait until it runs (a warm pool's box when one of the
 * same limits is ready).  The box is recorded before any kernel object
 * exists, so a crash midway leaves nothing the next open does not clean.
 * *out describes the running box.
 * Errors: EINVAL (a limit out of range, bad env or metadata or policy),
 * EDQUOT (the tenant's box or memory quota), ENOENT (no such tenant), others
 * (the box could not be built: the message says which step). */
HUSK_PUBLIC int husk_box_create(struct husk_mgr *m, const char *tenant,
                                const struct husk_box_spec *spec, struct husk_box_info *out,
                                struct husk_err *err);

/* Look a box up (running or ended).  Errors: ENOENT. */
HUSK_PUBLIC int husk_box_get(struct husk_mgr *m, const char *tenant, const char *id,
                             struct husk_box_info *out, struct husk_err *err);

/* Which boxes husk_box_list reports. */
struct husk_box_filter {
  const char *state;                /* NULL: any */
  const char *const *meta_keys;     /* metadata that must match, nmeta pairs */
  const char *const *meta_values;
  size_t nmeta;
  const char *cursor;               /* NULL or "": from the start; else a next_cursor */
  int limit;                        /* boxes per page, 1..1000; 0: 100 */
  const char *created_by;           /* NULL: anyone; else only the boxes it created
                                       (a creator as in husk_box_spec, not "") */
};

/* Call cb for each of the tenant's boxes that match, oldest first, one
 * page; the struct is valid only during the call.  cb returns 0 to go on,
 * > 0 to stop (the listing returns 0), < 0 to fail (the listing returns
 * that value; err is not filled: cb reports its own error).
 * next_cursor (next_len bytes) receives the cursor of the next page, "" at
 * the end.  Errors: EINVAL (bad filter, creator or cursor). */
HUSK_PUBLIC int husk_box_list(struct husk_mgr *m, const char *tenant,
                              const struct husk_box_filter *filter,
                              int (*cb)(void *ctx, const struct husk_box_info *bi), void *ctx,
                              char *next_cursor, size_t next_len, struct husk_err *err);

/* End a running box: final_state "stopped" (a delete) or "killed".  Its
 * processes are killed at once; the end is recorded before this returns;
 * the rest of the teardown (cgroup, mounts) follows in the background.
 * Errors: ENOENT, EBUSY (the box already ended). */
HUSK_PUBLIC int husk_box_destroy(struct husk_mgr *m, const char *tenant, const char *id,
                                 const char *final_state, struct husk_err *err);

/* A new lifetime counted from now, for a paused box from its resume
 * (longer or shorter); *out (may be NULL)
 * receives the box.  Errors: ENOENT, EBUSY, EINVAL (0 or above the
 * manager's max_ttl_ms). */
HUSK_PUBLIC int husk_box_set_timeout(struct husk_mgr *m, const char *tenant, const char *id,
                                     uint64_t ttl_ms, struct husk_box_info *out,
                                     struct husk_err *err);

/* Change a running box's network: "none" removes its link at once (open
 * connections are cut); "egress" with a policy creates the link or
 * replaces the policy (new connections use it).  Commands started
 * afterwards see the proxy variables.  Errors: ENOENT, EBUSY, EINVAL. */
HUSK_PUBLIC int husk_box_set_network(struct husk_mgr *m, const char *tenant, const char *id,
                                     const char *network, const char *egress_json,
                                     struct husk_box_info *out, struct husk_err *err);

/* Pause a running box: every process of it is frozen (the cgroup
 * freezer) and keeps its memory, its open files and connections; its
 * lifetime stops counting, and the manager's limit on paused time starts
 * (the box ends "expired", reason "paused_too_long", when it passes).
 * Commands, files, code contexts and process signals on a paused box fail
 * with EBUSY naming the state; its description, metrics, process list and
 * output, a snapshot and its deletion work.  Requests already under way
 * wait, frozen with it, until it resumes.  A paused box stays paused
 * across a restart of the daemon.  *out (may be NULL) receives the box.
 * Errors: ENOENT, EBUSY (not running: paused already, ended), ENOTSUP (no
 * freezer on this host), ETIMEDOUT (its processes could not all be
 * stopped in time: the box runs on). */
HUSK_PUBLIC int husk_box_pause(struct husk_mgr *m, const char *tenant, const char *id,
                               struct husk_box_info *out, struct husk_err *err);
/* Pause a running (or paused) box to disk: a snapshot of its files
 * (husk/snapshot.h) is kept as its own, and the box's processes and
 * memory go (background processes are recorded "lost", code contexts
 * end), so it costs no memory.  Its resume (husk_box_resume) builds it
 * again under the same id from that snapshot: its files as they were,
 * none of its processes (a template's start command is not run again:
 * templates have none).  Its lifetime and the paused-time limit are as
 * for a pause in memory.  Errors: as husk_box_pause, and as
 * husk_snapshot_create (EDQUOT, ENOSPC, ENOTSUP). */
HUSK_PUBLIC int husk_box_pause_to_disk(struct husk_mgr *m, const char *tenant, const char *id,
                                       struct husk_box_info *out, struct husk_err *err);
/* Resume a paused box where it stopped (paused to disk: from its files); its lifetime goes on with what was
 * left of it, its background processes' time limits likewise.
 * Errors: ENOENT, EBUSY (not paused). */
HUSK_PUBLIC int husk_box_resume(struct husk_mgr *m, const char *tenant, const char *id,
                                struct husk_box_info *out, struct husk_err *err);

/* Usage of a running or paused box. */
struct husk_box_metrics {
  uint64_t cpu_usec, memory_current, memory_peak, pids, disk_used, disk_total;
};
/* Errors: ENOENT, EBUSY (ended). */
HUSK_PUBLIC int husk_box_metrics(struct husk_mgr *m, const char *tenant, const char *id,
                                 struct husk_box_metrics *out, struct husk_err *err);

/* The tenant's secrets: values are write-only (no call returns one); an
 * egress box's policy binds a secret to hosts, and husk's proxy adds it to
 * requests for those hosts after they leave the box.  Names: 1..64 of
 * [A-Za-z0-9_], not starting with a digit.  Values: 1..8192 bytes of
 * printable ASCII (they go into HTTP headers).
 *
 * husk_secret_put stores `value` (`len` bytes) as secret `name` of
 * `tenant`, sealed, replacing one of that name.
 * Errors: EINVAL (a bad name or value), ENOTSUP (the manager has no
 * secrets vault), others (the vault or the state). */
HUSK_PUBLIC int husk_secret_put(struct husk_mgr *m, const char *tenant, const char *name,
                                const void *value, size_t len, struct husk_err *err);
/* Delete the tenant's secret `name`.
 * Errors: ENOENT (no such secret, or a name no secret can have), ENOTSUP
 * (no vault), others. */
HUSK_PUBLIC int husk_secret_delete(struct husk_mgr *m, const char *tenant, const char *name,
                                   struct husk_err *err);
/* Call cb for each of the tenant's secrets, by name: its name and when it
 * was created and last replaced (Unix ms), never its value.  cb returns 0
 * to go on, anything else to stop (the listing then returns 0).
 * Errors: ENOTSUP (no vault), others (the state). */
HUSK_PUBLIC int husk_secret_list(struct husk_mgr *m, const char *tenant,
                                 int (*cb)(void *ctx, const char *name, int64_t created_ms,
                                           int64_t updated_ms),
                                 void *ctx, struct husk_err *err);

#endif
