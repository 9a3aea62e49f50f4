/* Private to src/box/box*.c: the in-memory side of long-lived boxes. */
#ifndef HUSK_BOX_INTERNAL_H
#define HUSK_BOX_INTERNAL_H

/* The empty directory on which each spawner mounts, in its own mount
 * namespace, the read-only root boxes share (rootfs_prepare). */
#define BOX_PREPARED_ROOT "/run/husk/root"

/* The nice value the warm pool builds boxes at (box_pool.c). */
#define BOX_POOL_NICE 19

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "box/box.h"
#include "box/spawner.h"
#include "jail/jail.h"
#include "state/state.h"
#include "state/volume_state.h"
#include "template/template.h"
#include "util/disk_reserve.h"

/* A background process of a live box, in its box's list from its start
 * until the box goes (the list only grows; a node is never freed while the
 * box is referenced, so the monitor walks it from a head read under
 * b->lock).  pid, exec_id and output_limit never change; once listed,
 * deadline_ms (moved by the time the box spends paused) and the limit
 * fields below are the monitor's alone. */
struct bgproc {
  struct bgproc *next;
  int64_t pid;
  uint64_t exec_id;
  int conn;    /* the control connection that started it (monitor reads EXITED), -1 after */
  int stdin_w; /* write end of its stdin pipe, -1 once closed */
  int64_t deadline_ms;    /* wall clock (state_now_ms): its group is killed then; 0: none */
  uint64_t output_limit;  /* stdout + stderr bytes kept; past it its group is killed; 0: none */
  enum husk_reason limit; /* the limit that ends it (TIMEOUT, OUTPUT), else EXITED */
  int64_t due_ms;         /* when the monitor looks at it next (0: at once) */
  bool killed;            /* its group was killed for `limit` */
  bool ended;             /* its exit is recorded */
  bool counted;           /* under the box's lock: in its box's nprocs */
};

/* Background processes one tenant may have running at once by default
 * (husk serve --tenant-max-procs): each holds two of the daemon's fds (its
 * control connection, its stdin) until its exit is seen. */
#define BOX_TENANT_PROCS_DEFAULT 512

struct live_box {
  struct live_box *next;
  struct pool_class *pool; /* the pool it was claimed from (for box_pool_return) */
  int refs;        /* under mgr->lock */
  bool listed;     /* in mgr->boxes */
  pthread_mutex_t lock; /* serialises lifecycle changes and bgproc list */
  atomic_bool ending; /* destroy started: no new work */
  char id[STATE_BOX_ID_SIZE];
  char tenant[STATE_TENANT_ID_SIZE];
  struct jail j;
  char ctl_path[PATH_MAX];
  char **env;      /* NAME=VALUE, NULL-terminated, owned */
  struct husk_limits limits;
  int64_t expires_ms;
  struct bgproc *procs;
  /* Background processes started by this daemon whose exit it has not yet
   * seen (and those being started): what the tenant's bound counts. */
  atomic_uint nprocs;
  uint64_t next_exec_id; /* starts at random: unique across daemon lifetimes */
  bool init_acks; /* its init keeps exits until CTL_EXIT_ACK (version 1+) */
  uint32_t init_version; /* CTL_VERSION of its init */
  struct box_ctx *ctxs;  /* its code contexts (context.c), under lock */
  bool ctx_loaded;       /* those a previous daemon left are taken up (under lock) */
  /* Re-adopted: its processes' limits are enforced from this time (wall
   * clock ms) on, once its init has re-sent the exits it held (INT64_MAX
   * until the monitor asked for them). */
  int64_t limits_from_ms;
  bool
      need_watch; /* re-adopted: the monitor sends CTL_WATCH (it reads j.ctl) */
  bool egress;          /* registered with the egress proxy (under lock) */
  char **user_env;      /* the env the box was created with (egress adds to b->env) */
  char workdir[256];    /* where commands start unless they say ("": /workspace) */
  struct retired_env *retired; /* env arrays replaced while execs may still read them */
  /* Paused (pause.c), under mgr->lock: its processes frozen since
   * paused_ms (wall clock); its lifetime does not count meanwhile. */
  bool paused;
  int64_t paused_ms;
  pthread_mutex_t pause_lock; /* one pause or resume at a time (taken before mgr->lock) */
  /* Under mgr->lock: time the box spent paused that its background
   * processes' deadlines have not been moved by yet (the monitor moves
   * them: those fields are its own). */
  int64_t limits_shift_ms;
};

struct retired_env {
  struct retired_env *next;
  char **env;
};

/* One warm pool (box_pool.c), under box_mgr.pool_lock. */
struct pool_class {
  struct husk_limits shape; /* resolved */
  struct box_image *img;    /* the template its boxes are of, or NULL: default */
  unsigned size, count;
  struct live_box *boxes;   /* singly linked through ->next */
  uint64_t claims;          /* creates it served */
  uint64_t empty;           /* creates of its shape that found it empty */
  unsigned failures;        /* builds failed in a row (the pool thread's alone) */
  int64_t retry_ms;         /* CLOCK_MONOTONIC ms: no build before (after a failure) */
};

struct husk_mgr {
  struct box_mgr_config cfg;
  struct disk_reserve data_reserve; /* cfg.data_reserve, parsed */
  struct state *own_state; /* opened by husk_mgr_open, closed with the manager; else NULL */
  struct template_store *own_templates; /* likewise */
  char data_dir[PATH_MAX];
  pthread_mutex_t lock;
  struct live_box *boxes;
  pthread_t monitor;
  bool monitor_running;
  atomic_bool stop;
  int wake[2]; /* written to when the set of things to watch changes */
  struct spawner *spawner; /* creates boxes from a clean single-threaded process */
  struct spawner *pool_spawner; /* the same at low priority, for the pool (or NULL) */
  int dir_lock;            /* flock on DATA/husk.lock: one daemon per data directory */
  /* "box-<8 hex of the data directory>-": this daemon's cgroups.  Daemons
   * with other data directories share the host's cgroup tree; the prefix
   * keeps each one's sweep to its own boxes. */
  char cg_prefix[32];

  /* The warm pools (box_pool.c): ready boxes, one list per shape, not yet
   * anyone's (no tenant, no database row: a crash leaves them to the
   * sweep). */
  pthread_mutex_t pool_lock;
  pthread_cond_t pool_cond;
  struct pool_class *pools;     /* cfg.npools of them */
  uint64_t pool_unmatched;      /* creates of a shape no pool keeps */
  pthread_t pool_thread;
  bool pool_running;

  /* Teardown off the request path (reaper.c): boxes whose last reference
   * went, under reap_lock. */
  pthread_mutex_t reap_lock;
  pthread_cond_t reap_cond;
  struct live_box *reap; /* singly linked through ->next */
  bool reaper_stop;      /* under reap_lock: drain the queue and end */
  bool reaper_running;   /* under reap_lock: it takes work */
  pthread_t reaper_thread;
  bool reaper_started; /* reaper_thread is to be joined (start/stop's thread only) */

  struct store *store; /* where snapshots go (box_mgr_set_store), or NULL */
  atomic_int paused_on_disk; /* boxes paused to disk (pause.c) */
  int64_t paused_checked_ms; /* the monitor's: when it last looked at them */
  pthread_mutex_t disk_resume_lock; /* one resume from disk at a time */

  /* The network and secrets plane (box_egress.c). */
  struct egress *egress;
  struct egress_vault *vault;

  /* Templates' profiles by id (box_template.c): a template never changes,
   * so what its image config and /etc/passwd say is worked out once, not
   * at each create. */
  pthread_mutex_t profile_lock;
  struct profile_entry *profiles; /* PROFILE_CACHE_MAX, least recently used replaced */
  uint64_t profile_tick;

  /* Preview exchanges in progress (preview.c), under preview_lock: each
   * one's socket and preview, so that a preview's connections are counted
   * and a revocation cuts them; and the previews revoked lately, which an
   * exchange that resolved its token just before the revocation must not
   * open. */
  pthread_mutex_t preview_lock;
  struct preview_conn *pconns;
  size_t npconns, cappconns;
  struct preview_revoked *previews_revoked;
  /* This daemon's own network namespace, to come back to after a socket
   * was made in a box's (preview.c); -1 until first needed. */
  int host_netns;
  /* When a preview's access record last synced the database (monotonic
   * ms): records are synced in batches (preview.c). */
  _Atomic int64_t preview_synced_ms;
};
#define PROFILE_CACHE_MAX 64
void box_profiles_free(struct husk_mgr *m);
/* preview.c: what the manager holds for previews, freed at its close. */
void box_previews_free(struct husk_mgr *m);

/* box.c */
/* Where a command starts: the one it names, else the box's (an image's
 * WorkingDir), else /workspace. */
static inline const char *box_cwd(const struct live_box *b, const char *cwd) {
  return cwd ? cwd : b->workdir[0] ? b->workdir : "/workspace";
}
void box_log(struct husk_mgr *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void box_wake_monitor(struct husk_mgr *m);
char **box_env_from_json(const char *s);
void box_env_free(char **env);
struct live_box *lb_new(void);
void lb_free(struct husk_mgr *m, struct live_box *b);
void lb_unref(struct husk_mgr *m, struct live_box *b);
struct live_box *lb_get(struct husk_mgr *m, const char *tenant, const char *id);
void lb_list_add(struct husk_mgr *m, struct live_box *b);
bool box_valid_id(const char *id);
uint64_t box_proc_start_time(pid_t pid);
/* The process with this pid and start time exists and is not a zombie. */
bool box_init_alive(pid_t pid, uint64_t start_time);
int box_ctl_path(struct husk_mgr *m, const char *id, char *out, size_t len, struct husk_err *err);
int box_end(struct husk_mgr *m, struct live_box *b, const char *state, const char *reason,
            struct husk_err *err);
/* As box_end, but the row is the caller's to change (a pause to disk):
 * no new work, its processes killed, off the list, torn down with the
 * last reference. */
void box_retire(struct husk_mgr *m, struct live_box *b);
/* pause.c: one more (+1) or one fewer (-1) box paused to disk, which the
 * monitor then looks for in the state (their time paused ends them). */
void box_paused_on_disk(struct husk_mgr *m, int delta);
/* pause.c: end the boxes paused to disk for longer than max_paused_ms
 * (the monitor, at most once a second while there are any). */
void box_paused_expire(struct husk_mgr *m, int64_t now);
/* Enter the box's network namespace (by the pidfd of its init), make a
 * socket of family fam1 there (and one of fam2 when fd2 is not NULL and
 * fam2 not 0: -1 if that one fails), come back.  A socket keeps the
 * namespace it was made in: whatever it connects to, it reaches exactly
 * what the box's own programs reach (preview.c). */
int box_netns_sockets(struct husk_mgr *m, int pidfd, int type, int fam1, int *fd1, int fam2, int *fd2,
                      struct husk_err *err);
struct live_box *box_running(struct husk_mgr *m, const char *tenant, const char *id,
                             struct husk_err *err);
/* As box_running, but a paused box too (for what reads a box without
 * running anything in it). */
struct live_box *box_live(struct husk_mgr *m, const char *tenant, const char *id,
                          struct husk_err *err);
int box_check_exec(const struct husk_exec_req *req, struct husk_err *err);
/* A caller's creator (husk_box_spec.created_by, husk_exec_req's) into dst
 * (STATE_CREATED_BY_SIZE bytes): NULL is "", anything that is not a
 * creator (state.h) EINVAL, checked before anything is made. */
int box_created_by(char *dst, size_t size, const char *src, struct husk_err *err);
/* Create a box's jail (through the spawner) for `b`, whose id is set;
 * `for_pool`: through the pool's low-priority spawner. */
/* A box of an image template (box_template.c). */
struct box_image {
  struct state_template t;
  char ids[IMAGE_MAX_LAYERS][65]; /* its layers' diff_ids (hex), top first */
  const char *idv[IMAGE_MAX_LAYERS];
  size_t n;
  struct template_profile p;
  char **env; /* the image's env under the request's (strings borrowed) */
};
int box_image_resolve(struct husk_mgr *m, const char *tenant, const char *name,
                      char *const *req_env, struct box_image *out, struct husk_err *err);
/* The same from a row of one's own (*t is taken over, even on failure):
 * a build's image so far. */
int box_image_of(struct husk_mgr *m, struct state_template *t, char *const *req_env,
                 struct box_image *out, struct husk_err *err);
/* A box made from a snapshot: which, and its archive to restore. */
struct box_restore {
  const char *snapshot_id;
  struct spawn_restore restore;
};
/* husk_box_create with `img` (NULL: the default template) and `from`
 * (NULL: an empty box; else never a pool's). */
int box_create(struct husk_mgr *m, const char *tenant, const struct husk_box_spec *req,
               struct box_image *img, const struct box_restore *from, struct husk_box_info *out,
               struct husk_err *err);
/* snapshot.c: husk_box_create with req->snapshot. */
int box_create_from_snapshot(struct husk_mgr *m, const char *tenant,
                             const struct husk_box_spec *req, struct husk_box_info *out,
                             struct husk_err *err);
/* volume.c: a create's volume mounts checked (at most
 * HUSK_VOLUME_MOUNTS_MAX, paths made relative to /workspace) into out[]. */
int box_volumes_check(const struct husk_box_spec *req, struct state_volume_mount *out,
                      struct husk_err *err);
/* volume.c: each of the tenant's volumes exists and no live box mounts it
 * (ENOENT, EBUSY): a clean refusal before a box row is made; the attach
 * after it (state_volume_attach) is the one that counts. */
int box_volumes_precheck(struct husk_mgr *m, const char *tenant,
                         const struct state_volume_mount *mounts, size_t n, struct husk_err *err);
/* volume.c: the images of box_id's recorded mounts opened for its jail
 * (out[], their paths in paths[]), *n of them; box_volumes_close after. */
int box_volumes_open(struct husk_mgr *m, const char *box_id, struct jail_volume *out,
                     char paths[][STATE_VOLUME_PATH_SIZE], size_t *n, struct husk_err *err);
void box_volumes_close(struct jail_volume *v, size_t n);
/* volume.c: rows left 'creating' and image files no row names, removed
 * (at open; after a tenant's purge, only the files of the main directory). */
void box_volume_sweep(struct husk_mgr *m, bool at_start);
/* snapshot.c: what a crash left of snapshots being made, removed (at open). */
void box_snapshot_sweep(struct husk_mgr *m);
/* snapshot.c: snapshot b (running: frozen meanwhile; paused: as it is);
 * for_pause: the box's own, to resume from.  Its id goes to id_out. */
int box_snapshot_take(struct husk_mgr *m, struct live_box *b, bool for_pause,
                      const char *metadata_json, char id_out[32], struct husk_err *err);
/* snapshot.c: a snapshot's row, then its archive, removed (logged). */
void box_snapshot_drop(struct husk_mgr *m, const char *tenant, const char *id);
/* snapshot.c: a snapshot's archive as a readable file (the caller's). */
int box_snapshot_open(struct husk_mgr *m, const char *tenant, const char *id,
                      struct husk_err *err);
void box_image_free(struct box_image *bi);

/* Build the box's jail through the spawner; `img`: a template's box, or
 * NULL. */
int box_make_jail(struct husk_mgr *m, struct live_box *b, const struct husk_limits *lim,
                  bool for_pool, const struct box_image *img, const struct spawn_restore *restore,
                  struct husk_err *err);
void bgproc_free_all(struct live_box *b);

/* The cgroup name of box `id` of this daemon. */
void box_cgroup_name(const struct husk_mgr *m, const char *id, char *out, size_t len);

/* box_pool.c */
int box_pool_init(struct husk_mgr *m, struct husk_err *err); /* checks cfg.pools */
int box_pool_start(struct husk_mgr *m, struct husk_err *err);
void box_pool_stop(struct husk_mgr *m);
/* A ready box of this shape and template (its id; "" default), or NULL. */
struct live_box *box_pool_claim(struct husk_mgr *m, const struct husk_limits *lim,
                                const char *template_id);
void box_pool_return(struct husk_mgr *m, struct live_box *b);

/* reaper.c */
int box_reaper_start(struct husk_mgr *m, struct husk_err *err);
/* Tear down what is queued, then stop the thread. */
void box_reaper_stop(struct husk_mgr *m);
/* A box with no references left: torn down by the reaper thread (at once
 * when it does not run). */
void box_reap_later(struct husk_mgr *m, struct live_box *b);

/* box_egress.c */
int box_egress_open(struct husk_mgr *m, struct husk_err *err);
void box_egress_close(struct husk_mgr *m);
/* Start egress for a live box with a stored policy (fresh: new link). */
int box_egress_attach(struct husk_mgr *m, struct live_box *b, const char *policy_json, bool fresh,
                      struct husk_err *err);
void box_egress_detach(struct husk_mgr *m, struct live_box *b);
/* Validate a create request's network settings; *policy (stored form) is
 * malloc'd for egress, NULL for none. */
int box_egress_prepare(struct husk_mgr *m, const char *tenant, const char *network,
                       const char *egress_json, char **policy, struct husk_err *err);
/* Env for an exec: the box's (with egress variables) under the request's. */
char **box_exec_env(struct live_box *b, char *const *req_env);

/* box_proc.c: one more process of b's tenant in its bound (background
 * processes and code contexts), or -1 with EUSERS; b->nprocs counts it
 * until its owner gives it back. */
int box_procs_reserve(struct husk_mgr *m, struct live_box *b, struct husk_err *err);

/* context.c: the box's code contexts go with it (their processes die with
 * the box). */
void box_ctx_free_all(struct live_box *b);
/* context.c: a re-adopted box's contexts taken up (their pipes from init),
 * so that they count in the tenant's bounds from the start. */
void box_ctx_adopt(struct husk_mgr *m, struct live_box *b);
void box_env_retire_all(struct live_box *b);

/* proc_limits.c: the limits of background processes, enforced by the
 * monitor thread.  How often the monitor measures the output of a process
 * that has an output limit, and how long after re-adopting a box it waits
 * for the exits its init held before it enforces any limit there. */
#define BOX_OUTPUT_CHECK_MS 200
#define BOX_ADOPT_LIMITS_GRACE_MS 1000
/* The running processes of a re-adopted box that have limits, from the
 * state, into b->procs (before the box is listed). */
int proc_limits_adopt(struct husk_mgr *m, struct live_box *b, struct husk_err *err);
/* The earliest time (wall clock ms) a check of b's processes is due, or
 * INT64_MAX; under b->lock. */
int64_t proc_limits_next(const struct live_box *b, int64_t now);
/* Move the deadlines of b's processes `ms` later (the time the box spent
 * paused); the monitor's thread only. */
void proc_limits_shift(struct live_box *b, int64_t ms);
/* Kill the process group of each process past its deadline or output
 * limit (the limit recorded first). */
void proc_limits_check(struct husk_mgr *m, struct live_box *b, int64_t now);
/* Before its exit is recorded: cut the output of a process to its limit
 * (recording the output limit as what ended it, unless a limit already
 * did), and mark it ended. */
void proc_limits_exit(struct husk_mgr *m, struct live_box *b, int64_t pid, uint64_t exec_id);

/* pause.c: the pause a re-adopted box's row records, made true of its
 * cgroup (its init was thawed for the handshake, or a crash came between
 * a freeze and its record); before the box is listed. */
int box_pause_adopt(struct husk_mgr *m, struct live_box *b, bool paused, int64_t paused_ms,
                    struct husk_err *err);
/* How long a freeze or thaw may take before it counts as failed. */
#define BOX_FREEZE_TIMEOUT_MS 5000

/* box_monitor.c */
void *box_monitor_main(void *arg);
void box_reconcile(struct husk_mgr *m);

#endif
