/* The state plane: husk's durable memory.
 *
 * One SQLite database (WAL) under the daemon's data directory holds tenants,
 * API keys (as SHA-256 only), boxes, their background processes and the
 * audit log -- and the rows of the other planes, declared in headers of
 * their own: the object store's (store_state.h), the egress plane's
 * (egress_state.h).  The rule the daemon is built on: every state change that a
 * reply acknowledges is committed first.  So every function below that
 * changes something returns 0 only after its transaction has committed and
 * reached the disk (but see state_defer_begin); a change that returns -1
 * left nothing behind -- except when the disk itself fails: a failed sync
 * (EIO, ENOSPC...) after the commit returns -1 with the change in place but
 * not known to be durable, and every later change fails the same way.  A crash
 * (SIGKILL, power loss) at any moment leaves the database as it was after
 * the last change that returned 0.
 *
 * Threads: one `struct state` is shared by every thread of the daemon.
 * Calls are serialised on one connection by a mutex; each call is a few
 * indexed statements, so the lock is held briefly.  Listing functions copy
 * the matching rows out under the lock and run the callback after releasing
 * it: a callback may call back into the state plane, and a slow consumer
 * does not stall other threads.  The row handed to a callback is valid only
 * during that call.  A callback returns 0 to continue; any other value stops
 * the listing, and a negative one is returned as is (`err` untouched: the
 * callback reports its own error).
 *
 * Errors: -1 and `err` filled (util/error.h).  err->code says what kind:
 *   ENOENT  no such row -- also when the row exists but belongs to another
 *           tenant, so a tenant cannot even learn that another's box exists
 *   EINVAL  bad input: too long, bad characters, invalid JSON, bad cursor
 *   EEXIST  id or name already taken
 *   EACCES  API key unknown, malformed or revoked (state_key_authenticate)
 *   EDQUOT  the tenant's quota would be exceeded (state_box_insert)
 *   ESTALE  the row is not in the state the change requires
 *   EBUSY   the database is locked by another process past the busy timeout,
 *           or (state_box_delete) the box is still live
 *   ENOTSUP the file was written by a newer husk (state_open)
 *   EUCLEAN a stored value does not fit its field: the file was edited
 *   EIO, ENOSPC, EROFS, ENOMEM ...  the storage failed
 *
 * Input is untrusted.  Every value reaches SQL as a bound parameter, never as
 * SQL text.  Strings are length-checked against the field they are stored in
 * and refused (EINVAL) when too long, never cut into a different value.  Ids
 * are 1..size-1 bytes of [A-Za-z0-9_-]; other text (names, tags) must be
 * valid UTF-8 without control characters, so anything read back can go into
 * a JSON reply or a log line as is.  Two kinds of text are sanitized rather
 * than refused, because losing the write would be worse than rewording it:
 * a box's `reason` and an audit record's `box_id`/`detail` (see there).
 * Messages in `err` never repeat a key or free text the caller passed in. */
#ifndef HUSK_STATE_STATE_H
#define HUSK_STATE_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

/* Buffer sizes of ids, including the NUL. */
#define STATE_TENANT_ID_SIZE 32
#define STATE_KEY_ID_SIZE 32
#define STATE_BOX_ID_SIZE 40
#define STATE_USER_ID_SIZE 28   /* "u_" + 24 hex (auth/auth.h) */
#define STATE_CLIENT_ID_SIZE 28 /* "oc_" + 24 hex: an OAuth client */

/* Who created a box, job or upload link: "u_" + 24 hex (a user, when the
 * request came with an OAuth access token), "key:" + an API key id (with
 * a tenant key), or "" (neither: the library, the standalone MCP server,
 * and rows from before it was recorded).  The daemon chooses it, so a
 * malformed one is refused (EINVAL), never stored. */
#define STATE_CREATED_BY_SIZE (4 + STATE_KEY_ID_SIZE) /* "key:" + a key id + NUL */
/* 0 if `s` is such a creator ("" only when `empty_ok`), else -1 with
 * EINVAL (the message does not repeat `s`). */
int state_check_created_by(const char *s, bool empty_ok, struct husk_err *err);

/* A quota value meaning "no limit". */
#define STATE_UNLIMITED (-1)

/* Listing page sizes: limit 0 means STATE_LIST_DEFAULT; above STATE_LIST_MAX
 * is refused, not clamped. */
#define STATE_LIST_DEFAULT 100
#define STATE_LIST_MAX 1000

/* Upper bound of every JSON column (env, metadata, command): a box's
 * description is small, and the bound keeps one request from growing the
 * database without limit. */
#define STATE_JSON_MAX (64 * 1024)

/* Most metadata key=value pairs one box listing may filter on. */
#define STATE_META_FILTERS_MAX 16
/* Longest metadata filter key or value, in bytes. */
#define STATE_META_TEXT_MAX 256

struct state; /* opaque; thread-safe */

/* Open (creating it with mode 0600 if missing) the database at `path`, and
 * bring its schema up to date.  Refuses a file that is not a husk database,
 * and one written by a newer husk (schema version above ours: ENOTSUP).
 * Every file descriptor it opens is close-on-exec. */
int state_open(struct state **out, const char *path, struct husk_err *err);
/* NULL is fine.  No call may be running on `st` or start after this. */
void state_close(struct state *st);

/* Group commit for a thread answering a request.  Between begin and end,
 * the changes this thread commits are not synced one by one; end makes
 * them, and every change committed before it by other threads (which this
 * one may have read), durable -- one fdatasync shared with concurrent
 * requests, none if nothing is pending -- and must be called before the
 * reply leaves.  end
 * returns -1 if they could not be made durable (a disk error: from then on
 * every sync fails).  Commits outside begin/end are synced before the call
 * that made them returns, as the promise above says. */
void state_defer_begin(struct state *st);
int state_defer_end(struct state *st, struct husk_err *err);
/* Instead of end: what this thread committed since begin is left to the
 * next sync (anyone's), for a change no reply acknowledges (a count). */
void state_defer_forget(struct state *st);
/* Between begin and end: make what this thread committed (or read) so far
 * durable now, and keep deferring.  For a step that must follow a durable
 * commit (removing the file a committed row no longer names). */
int state_durable_now(struct state *st, struct husk_err *err);

/* Schema version of an open database (PRAGMA user_version). */
int state_schema_version(struct state *st, int *version, struct husk_err *err);
/* The schema version this husk brings a database to (its migration count). */
int state_schema_latest(void);

/* Wall-clock milliseconds since the epoch: the clock of every *_ms column. */
int64_t state_now_ms(void);

/* A fresh random id: `prefix` then 24 hex digits (96 random bits), e.g.
 * "b_8f3a09c1d2e4f5a6b7c8d9e0".  `size` must hold it and the NUL. */
int state_new_id(const char *prefix, char *out, size_t size, struct husk_err *err);

/* ---- Tenants ---------------------------------------------------------- */

/* A tenant's quotas bound its live boxes (see state_box_count_live): how
 * many, and their memory limits summed.  STATE_UNLIMITED (unset) means the
 * default of state_set_tenant_defaults, itself unlimited unless set; 0
 * forbids new boxes (a way to suspend a tenant without losing its data). */
struct state_tenant {
  char id[STATE_TENANT_ID_SIZE]; /* "t_" + 24 hex */
  char name[128];                /* unique */
  int64_t max_boxes;             /* >= 0 or STATE_UNLIMITED */
  int64_t max_memory;            /* bytes, >= 0 or STATE_UNLIMITED */
  /* Concurrency in the API: requests being handled at once, and of those
   * the ones that run or stream a command.  >= 1, or STATE_DEFAULT: the
   * daemon's --tenant-max-requests / --tenant-max-execs. */
  int64_t max_requests;
  int64_t max_execs;
  int64_t created_ms;
  int64_t deleted_ms; /* 0, or when its deletion began (see state_tenant_mark_deleted) */
};
/* A per-tenant concurrency bound that is not set: the daemon's applies. */
#define STATE_DEFAULT (-1)

/* What an unset max_boxes / max_memory of a tenant means from now on:
 * >= 0, or STATE_UNLIMITED (the default).  The daemon sets it at start
 * (husk serve --tenant-max-boxes, --tenant-max-memory). */
void state_set_tenant_defaults(struct state *st, int64_t max_boxes, int64_t max_memory);

/* EEXIST if the name is taken.  `out` (may be NULL) receives the new row. */
int state_tenant_create(struct state *st, const char *name, int64_t max_boxes, int64_t max_memory,
                        struct state_tenant *out, struct husk_err *err);
int state_tenant_get(struct state *st, const char *id, struct state_tenant *out,
                     struct husk_err *err);
/* Every tenant, oldest first. */
int state_tenant_list(struct state *st, int (*cb)(void *ctx, const struct state_tenant *t),
                      void *ctx, struct husk_err *err);
/* Lowering a quota below current use is allowed: running boxes keep
 * running, new ones are refused until use falls below it. */
int state_tenant_set_quota(struct state *st, const char *id, int64_t max_boxes, int64_t max_memory,
                           struct husk_err *err);
/* Create from `in` (name and the four bounds; other fields ignored). */
int state_tenant_create_with(struct state *st, const struct state_tenant *in,
                             struct state_tenant *out, struct husk_err *err);
/* Set all four bounds of `t->id` at once. */
int state_tenant_set_bounds(struct state *st, const struct state_tenant *t, struct husk_err *err);

/* Deleting a tenant, in steps that each survive a crash:
 *   1. state_tenant_mark_deleted: one transaction records deleted_ms and
 *      revokes every API key and S3 key of the tenant and every OAuth
 *      token of its users (their codes go), so nothing can act for it from
 *      then on, and no box, template or build cache entry can
 *      be inserted for it (ENOENT);
 *   2. the caller ends its live boxes and removes its storage (objects,
 *      their files, buckets, uploads, links: store_tenant_purge);
 *   3. state_tenant_purge: one transaction removes the rest (ended boxes,
 *      processes, jobs, secrets, keys, links, templates, build cache
 *      entries, users with their codes and tokens) and the tenant row.  EBUSY while a box is live or storage
 *      remains: step 2 is not finished;
 *   4. the caller collects the template layers no row names any more
 *      (template_collect).
 * A daemon killed in between finds the tenant marked (deleted_ms != 0) and
 * runs 2 and 3 again at start; one killed after 3 leaves only layers, which
 * the template store's collection at open removes.  Marking twice keeps
 * the first time.  The audit records of the tenant stay: they are the log
 * of what it did. */
int state_tenant_mark_deleted(struct state *st, const char *id, struct husk_err *err);
int state_tenant_purge(struct state *st, const char *id, struct husk_err *err);

/* ---- API keys --------------------------------------------------------- */

/* A key is "hk_" + 43 characters of unpadded base64url (32 random bytes).
 * Only SHA-256(key) is stored: the plaintext is handed out once, by
 * state_key_create, and cannot be recovered.  A key's id ("k_" + 24 hex)
 * names it in the audit log and for revocation; it is not secret. */
#define STATE_KEY_PREFIX "hk_"
#define STATE_KEY_LEN 46                    /* strlen of a key */
#define STATE_KEY_SIZE (STATE_KEY_LEN + 1) /* buffer for a key and its NUL */

struct state_key {
  char id[STATE_KEY_ID_SIZE];
  char tenant_id[STATE_TENANT_ID_SIZE];
  int64_t created_ms;
  int64_t revoked_ms; /* 0: active */
};

/* New key for an existing tenant.  The plaintext goes to `plaintext`
 * (`plaintext_size` >= STATE_KEY_SIZE); `out` (may be NULL) gets the row. */
int state_key_create(struct state *st, const char *tenant_id, char *plaintext,
                     size_t plaintext_size, struct state_key *out, struct husk_err *err);
/* The active key `presented` belongs to, or EACCES for anything else
 * (malformed, unknown, revoked) with one message that does not say which. */
int state_key_authenticate(struct state *st, const char *presented, struct state_key *out,
                           struct husk_err *err);
/* Revoke a key of `tenant_id` (NULL: of any tenant, for admin routes), and
 * in the same transaction every S3 key that was minted with it (the
 * credentials it handed out end with it).  Revoking a revoked key succeeds
 * and keeps the first revocation time; another tenant's key is ENOENT. */
int state_key_revoke(struct state *st, const char *tenant_id, const char *key_id,
                     struct husk_err *err);
/* Keys of `tenant_id` (NULL: all), oldest first, revoked ones included. */
int state_key_list(struct state *st, const char *tenant_id,
                   int (*cb)(void *ctx, const struct state_key *k), void *ctx,
                   struct husk_err *err);

/* ---- Boxes ------------------------------------------------------------ */

/* The state vocabulary of a box.  "Live" boxes hold host resources and count
 * against quotas: creating, running, stopping.  stopped and failed are
 * terminal: a box never leaves them, and entering one ends the box's
 * background processes (state "lost" unless already recorded). */
#define STATE_BOX_CREATING "creating"
#define STATE_BOX_RUNNING "running"
#define STATE_BOX_STOPPING "stopping"
#define STATE_BOX_PAUSED "paused" /* live: frozen, its lifetime not counting */
#define STATE_BOX_STOPPED "stopped"
#define STATE_BOX_FAILED "failed"

struct state_box {
  char id[STATE_BOX_ID_SIZE]; /* chosen by the caller, e.g. state_new_id("b_") */
  char tenant_id[STATE_TENANT_ID_SIZE];
  char state[16];          /* STATE_BOX_* */
  char reason[256];        /* why it is in this state ("timeout", "memory"...); may be "" */
  char template_name[64];  /* may be "" */
  char template_id[32];    /* an image template's id, else "" */
  char workdir[256];       /* where commands start unless they say; "": /workspace */
  int64_t memory, pids, cpu_milli, disk, timeout_ms; /* limits, >= 0 */
  char *env_json;      /* JSON object; NULL on insert means {}.  Heap, see state_box_free() */
  char *metadata_json; /* JSON object of string values; NULL on insert means {} */
  int64_t created_ms;  /* 0 on insert means now */
  int64_t expires_ms;  /* 0: no expiry */
  int64_t ended_ms;    /* set when the box enters a terminal state */
  int64_t init_pid;    /* host pid of the box's init, 0 if none */
  uint64_t init_start_time; /* its start time (/proc/PID/stat field 22), to tell it
                               from a reused pid after a daemon restart */
  int64_t uid_base;    /* first host uid of the box's range, -1 if none */
  int64_t slot;        /* uid-range slot, -1 if none */
  char cgroup[96];     /* cgroup name, may be "" */
  int64_t paused_ms;   /* paused: when (its lifetime stopped then); else 0 (not set on insert) */
  char snapshot_id[32]; /* the snapshot it was made from, or "" */
  char paused_snapshot[32]; /* paused to disk: what it resumes from; else "" */
  char created_by[STATE_CREATED_BY_SIZE]; /* see STATE_CREATED_BY_SIZE; may be "" */
};

/* Insert a new box (its state must be live: normally "creating").  Checks
 * and applies the tenant's quotas in the same transaction, so concurrent
 * creates cannot overshoot them together (EDQUOT).  ENOENT if the tenant
 * does not exist, EEXIST if the id is taken.  The runtime fields (init_pid
 * ... cgroup) are stored as given. */
int state_box_insert(struct state *st, const struct state_box *box, struct husk_err *err);
/* The box `id` if it belongs to `tenant_id` (NULL: to anyone), else ENOENT.
 * Free `out` with state_box_free(). */
int state_box_get(struct state *st, const char *tenant_id, const char *id, struct state_box *out,
                  struct husk_err *err);
/* Move box `id` to `state`, if it is currently in `expect` (NULL: any) --
 * a compare-and-set, so that, for example, a create that finishes after a
 * concurrent delete cannot bring the box back to "running" (ESTALE).  A box
 * in a terminal state is never moved (ESTALE).  `reason` NULL keeps the
 * current reason.  A reason is an explanation, often built from an error
 * message, and a state change must not fail over its wording: control
 * characters and invalid UTF-8 become '?', and one longer than 255 bytes is
 * cut to fit, ending in "..." (the same holds for `reason` on insert).
 * `ended_ms` is stored when `state` is terminal (0: now), ignored otherwise. */
int state_box_set_state(struct state *st, const char *id, const char *expect, const char *state,
                        const char *reason, int64_t ended_ms, struct husk_err *err);
/* Record what the daemon needs to find the box again after a restart.
 * `cgroup` NULL keeps the current value. */
int state_box_set_runtime(struct state *st, const char *id, int64_t init_pid,
                          uint64_t init_start_time, int64_t uid_base, int64_t slot,
                          const char *cgroup, struct husk_err *err);
/* 0: no expiry.  Only a live box's expiry can change (ESTALE otherwise). */
int state_box_set_expiry(struct state *st, const char *id, int64_t expires_ms,
                         struct husk_err *err);
/* Pause (running -> paused, paused_ms = now_ms) or resume (paused ->
 * running, paused_ms = 0) box `id`, storing `expires_ms` with it (a
 * paused box keeps what was left of its lifetime; the caller works out
 * the new expiry at resume).  ESTALE if it is not in the state it leaves. */
int state_box_set_paused(struct state *st, const char *id, bool paused, int64_t now_ms,
                         int64_t expires_ms, struct husk_err *err);
/* Paused to disk: running or paused -> paused (since now_ms, or since it
 * paused in memory), resuming from `snapshot_id`, with no runtime (its
 * processes recorded lost).  ESTALE if it is in neither state or paused
 * to disk already. */
int state_box_pause_to_disk(struct state *st, const char *id, int64_t now_ms,
                            const char *snapshot_id, struct husk_err *err);
/* Its resume: paused to disk from `snapshot_id` -> running, with its new
 * runtime and expiry (ESTALE if it is not so paused any more). */
int state_box_resume_from_disk(struct state *st, const char *id, const char *snapshot_id,
                               int64_t expires_ms, int64_t init_pid, uint64_t init_start_time,
                               int64_t uid_base, int64_t slot, struct husk_err *err);
/* Forget an ended box and its processes (EBUSY if it is live: its row is
 * how a restarted daemon finds its resources).  Audit records stay. */
int state_box_delete(struct state *st, const char *tenant_id, const char *id,
                     struct husk_err *err);

/* Box listing, ordered by (created_ms, id).  Every set filter must match:
 *   tenant_id  NULL only for admin and reconciliation: all tenants
 *   state      a STATE_BOX_* value, "live" for all live states, NULL: any
 *   meta_keys[i] = meta_values[i], i < nmeta: the metadata has that key
 *              with that string value (nmeta <= STATE_META_FILTERS_MAX)
 *   created_by NULL: anyone; else a creator (never ""): boxes it created
 *   cursor     NULL or "" for the first page, else a next_cursor from the
 *              previous page (opaque to callers)
 *   limit      0: STATE_LIST_DEFAULT; 1..STATE_LIST_MAX */
#define STATE_BOX_LIVE "live"
#define STATE_CURSOR_SIZE 64
struct state_box_filter {
  const char *tenant_id;
  const char *state;
  const char *const *meta_keys;
  const char *const *meta_values;
  size_t nmeta;
  const char *created_by;
  const char *cursor;
  int limit;
};
/* `next_cursor` (size >= STATE_CURSOR_SIZE, may be NULL) receives the
 * cursor of the next page, or "" when this page is the last.  Rows created
 * after a listing began may or may not appear; none appears twice. */
int state_box_list(struct state *st, const struct state_box_filter *filter,
                   int (*cb)(void *ctx, const struct state_box *b), void *ctx, char *next_cursor,
                   size_t next_size, struct husk_err *err);
/* Live boxes of a tenant: how many, and their memory limits summed
 * (saturating at INT64_MAX).  An unknown tenant has none. */
int state_box_count_live(struct state *st, const char *tenant_id, int64_t *boxes, int64_t *memory,
                         struct husk_err *err);
/* Frees the JSON strings; the struct itself is the caller's.  NULL is fine. */
void state_box_free(struct state_box *box);

/* ---- Background processes of a box ------------------------------------ */

/* A process started in the background in a long-lived box, kept across
 * daemon restarts.  `pid` is the pid inside the box; pids get reused, so a
 * box may hold several rows with one pid, of which at most one is running. */
#define STATE_PROC_RUNNING "running"
#define STATE_PROC_EXITED "exited" /* exit_code or signal recorded */
#define STATE_PROC_LOST "lost"     /* ended, status unknown (box ended, daemon restart) */

struct state_proc {
  char box_id[STATE_BOX_ID_SIZE];
  int64_t pid;       /* > 0 */
  char *cmd_json;    /* JSON array (argv); heap, see state_proc_free() */
  char state[16];    /* STATE_PROC_* */
  int64_t exit_code; /* valid when state is exited and signal is 0; else -1 */
  int64_t signal;    /* killed by this signal, 0 if none */
  int64_t started_ms; /* 0 on insert means now */
  int64_t ended_ms;
  char tag[64];      /* caller's label, may be "" */
  int64_t
      exec_id; /* the daemon's id of the exec that started it, >= 0; 0: none */
  /* Its limits (0: none): wall time from started_ms, stdout + stderr bytes;
   * and the one that ended it (STATE_PROC_LIMIT_*, "" if none). */
  int64_t timeout_ms;
  int64_t output_limit;
  char limit_hit[16];
  char created_by[STATE_CREATED_BY_SIZE]; /* who started it (STATE_CREATED_BY_SIZE); may be "" */
  /* Set by state_proc_page only: the row's place in the box's order (its
   * cursor), and whether cmd_json was cut to its program name. */
  int64_t seq;
  bool cmd_cut;
};
#define STATE_PROC_LIMIT_TIMEOUT "timeout"
#define STATE_PROC_LIMIT_OUTPUT "output"

/* Insert a running process.  ENOENT if the box does not exist, ESTALE if it
 * is not live, EEXIST if a running process of the box already has `pid`,
 * EINVAL for a malformed created_by. */
int state_proc_insert(struct state *st, const struct state_proc *p, struct husk_err *err);
/* Record the exit of the running process `pid` of box `box_id`: an exit
 * code (signal 0) or a signal (exit_code ignored, stored as -1).  ENOENT if
 * no process of the box is running with that pid.  `ended_ms` 0: now. */
int state_proc_set_exit(struct state *st, const char *box_id, int64_t pid, int64_t exit_code,
                        int64_t signal, int64_t ended_ms, struct husk_err *err);
/* The same for the process started by exec `exec_id` (a row inserted
 * without one matches any): a repeated or stale exit of an earlier process
 * with that pid is ENOENT and changes nothing. */
int state_proc_set_exit_of(struct state *st, const char *box_id, int64_t pid,
                           int64_t exec_id, int64_t exit_code, int64_t signal,
                           int64_t ended_ms, struct husk_err *err);
/* Record that limit `limit` (STATE_PROC_LIMIT_*) ends the running process
 * `pid` started by exec `exec_id` (0: any), before its process group is
 * killed; a limit recorded first is kept.  ENOENT if no such process runs. */
int state_proc_set_limit_hit(struct state *st, const char *box_id, int64_t pid, int64_t exec_id,
                             const char *limit, struct husk_err *err);
/* Mark the running process `pid` as lost (its status is gone). */
int state_proc_set_lost(struct state *st, const char *box_id, int64_t pid, int64_t ended_ms,
                        struct husk_err *err);
/* The most recent process with `pid` of box `box_id`, if the box belongs to
 * `tenant_id` (NULL: anyone).  Free `out` with state_proc_free(). */
int state_proc_get(struct state *st, const char *tenant_id, const char *box_id, int64_t pid,
                   struct state_proc *out, struct husk_err *err);
/* Processes of a box, newest first; `running_only` keeps running ones.
 * `limit` as for state_box_list. */
int state_proc_list(struct state *st, const char *tenant_id, const char *box_id, int running_only,
                    int limit, int (*cb)(void *ctx, const struct state_proc *p), void *ctx,
                    struct husk_err *err);
/* A page of them, newest first: at most `limit` (1..STATE_LIST_MAX) rows
 * whose seq is below `before` (0: from the newest).  A cmd_json longer
 * than `cmd_max` bytes comes as a one-element array, its program name cut
 * to STATE_PROC_CMD_CUT characters (cmd_cut set), so that a page holds at
 * most limit × (cmd_max + a row) bytes whatever the commands were. */
#define STATE_PROC_CMD_CUT 1024
int state_proc_page(struct state *st, const char *tenant_id, const char *box_id, int64_t before,
                    int limit, size_t cmd_max, int (*cb)(void *ctx, const struct state_proc *p),
                    void *ctx, struct husk_err *err);
void state_proc_free(struct state_proc *p);

/* ---- MCP jobs ------------------------------------------------------- */

/* A job: a background process of a box started by an MCP tool call, kept
 * so that a later call (job_status / job_wait), even after a daemon
 * restart, can pick up its result.  `result_json` is the front's summary,
 * stored once when the job ended and its result was collected. */
#define STATE_JOB_ID_SIZE 40
#define STATE_JOB_RUNNING "running"
#define STATE_JOB_DONE "done"           /* ended; result collected */
#define STATE_JOB_CANCELLED "cancelled" /* killed by request */
#define STATE_JOB_RESULT_MAX (1024 * 1024)

struct state_job {
  char id[STATE_JOB_ID_SIZE];           /* "j_" + 24 hex */
  char tenant_id[STATE_TENANT_ID_SIZE];
  char box_id[STATE_BOX_ID_SIZE];
  int64_t pid;                          /* the process in the box */
  char kind[16];                        /* "run_code", "exec" */
  int ephemeral;                        /* 1: the box is destroyed when the job ends */
  char state[16];                       /* STATE_JOB_* */
  char *result_json;                    /* heap, NULL until collected */
  int64_t created_ms, ended_ms;
  char created_by[STATE_CREATED_BY_SIZE]; /* who started it; may be "" */
};
/* ENOENT if the tenant does not exist, EEXIST if the id is taken, EINVAL
 * for a malformed created_by. */
int state_job_insert(struct state *st, const struct state_job *job, struct husk_err *err);
/* The job `id` if it belongs to `tenant_id`, else ENOENT. */
int state_job_get(struct state *st, const char *tenant_id, const char *id, struct state_job *out,
                  struct husk_err *err);
/* End a running job: state STATE_JOB_DONE or STATE_JOB_CANCELLED and its
 * result (may be NULL; at most STATE_JOB_RESULT_MAX bytes).  ESTALE if the
 * job is not running (another caller ended it first). */
int state_job_end(struct state *st, const char *tenant_id, const char *id, const char *state,
                  const char *result_json, struct husk_err *err);
void state_job_free(struct state_job *job);

/* ---- Audit log -------------------------------------------------------- */

/* One state-changing call: who (tenant, key), what (action), on which box,
 * when, and how it ended.  Never secrets or file contents: `detail` is for
 * short context such as "memory=256M" or a path, which the caller builds.
 * Records are immutable (the database refuses UPDATE, and DELETE of a
 * record younger than STATE_AUDIT_MIN_AGE_MS) and their ids only grow. */
struct state_audit {
  int64_t id;            /* assigned on insert */
  int64_t ts_ms;         /* 0 on insert means now */
  char tenant_id[STATE_TENANT_ID_SIZE]; /* "" for admin or unauthenticated calls */
  char key_id[STATE_KEY_ID_SIZE];       /* "" if none */
  char action[64];       /* "box.create", "tenant.create", "key.revoke"... (non-empty) */
  char box_id[STATE_BOX_ID_SIZE];       /* "" if none */
  char detail[512];      /* free text, may be "" */
  char outcome[16];      /* "ok", "error", "denied"... (non-empty) */
  int status;            /* the reply's status (HTTP code), 0 if none */
  /* The person behind a request made with an access token ("" if none):
   * the user's id, its display name (else its name) at the time, and
   * the OAuth client it signed in through. */
  char user_id[STATE_USER_ID_SIZE];
  char user_name[129];
  char client_id[STATE_CLIENT_ID_SIZE];
  char client_name[129];
  char idp_subject[256]; /* the user's provider `sub`, "" if none */
};

/* Append a record.  `id_out` (may be NULL) receives its id.  tenant_id and
 * key_id must be ids or "", action and outcome non-empty text: the daemon
 * chooses them, so a bad one is refused.  box_id and detail may echo what a
 * client sent: their control characters and invalid UTF-8 are replaced by
 * '?' instead, so that the record of a hostile call is never lost. */
int state_audit_add(struct state *st, const struct state_audit *rec, int64_t *id_out,
                    struct husk_err *err);

/* Every set filter must match.  NULL/0 means unset.  Time bounds are
 * since_ms <= ts_ms < until_ms; id bounds are after_id < id < before_id, for
 * paging in either direction.  Oldest first unless `newest_first`. */
struct state_audit_filter {
  const char *tenant_id;
  const char *box_id;
  const char *action;
  const char *user_id;
  int64_t since_ms, until_ms;
  int64_t after_id, before_id;
  int newest_first;
  int limit; /* 0: STATE_LIST_DEFAULT; 1..STATE_LIST_MAX */
};
int state_audit_list(struct state *st, const struct state_audit_filter *filter,
                     int (*cb)(void *ctx, const struct state_audit *rec), void *ctx,
                     struct husk_err *err);

/* Retention: remove up to max_rows of the oldest records with ts_ms <
 * before_ms (never one younger than STATE_AUDIT_MIN_AGE_MS: the cut-off is
 * moved back to that); *deleted says how many went. */
#define STATE_AUDIT_MIN_AGE_MS (86400LL * 1000)
int state_audit_prune(struct state *st, int64_t before_ms, unsigned max_rows, size_t *deleted,
                      struct husk_err *err);

#endif
