/* husk: commands in a running box: to completion, streaming, or in the
 * background.
 *
 * A command runs as the box's user (uid 1000, no capabilities), in its own
 * process group, with the box's environment under the request's, in cwd
 * (default /workspace).  A command's end never ends the box; its timeout
 * or output limit kills the command's process group, not the box. */
#ifndef HUSK_EXEC_H
#define HUSK_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "husk/base.h"
#include "husk/manager.h"
#include "husk/run.h"

#define HUSK_STDOUT 1
#define HUSK_STDERR 2

struct husk_exec_req {
  char *const *argv;      /* program and arguments (argv[0] looked up in the box's PATH) */
  char *const *env;       /* NAME=VALUE over the box's env, NULL-terminated, or NULL */
  const char *cwd;        /* NULL: /workspace */
  uint64_t timeout_ms;    /* 0: the default (docs/limits.md) */
  uint64_t output_limit;  /* stdout + stderr bytes; 0: the default */
  const void *stdin_buf;  /* the command's whole stdin (then EOF); may be empty */
  size_t stdin_len;
  /* Output as it comes: stream HUSK_STDOUT or HUSK_STDERR, a chunk of the
   * bytes the command wrote (any bytes: not text, not NUL-terminated).  A
   * negative return stops the command (its process group is killed).
   * NULL: output is dropped (but counted). */
  int (*sink)(void *ctx, int stream, const char *buf, size_t len);
  /* Called once the command runs, with its pid inside the box; or NULL. */
  void (*started)(void *ctx, pid_t pid);
  void *sink_ctx;
  /* Readable means "stop now" (the caller's client went away): the
   * command's process group is killed.  -1: none. */
  int cancel_fd;
  /* husk_box_exec_background: who starts it, recorded with it
   * (husk_proc.created_by), as husk_box_spec.created_by says; NULL or ""
   * for nobody in particular.  Ignored by the other calls. */
  const char *created_by;
};

struct husk_exec_result {
  int exit_code;           /* the command's; 128+N signal N; 124 timeout; 127 not found */
  int signal;              /* signal that ended it, 0 if none */
  enum husk_reason reason; /* exited, signaled, timeout, output, setup_error ... */
  pid_t pid;               /* inside the box */
  uint64_t wall_ms;
  uint64_t output_bytes;   /* all it wrote, also past the limit */
  bool truncated;          /* the output limit cut it */
  char message[512];       /* why, when reason is setup_error ("command not found") */
};

/* Run a command to its end, output through req->sink as it comes.  A
 * command that cannot start (not found, not executable) is a result
 * (reason setup_error, exit code 127 or 126, message), not an error.
 * Returns 0 with *out filled, or -1.
 * Errors: ENOENT (no such box), EBUSY (not running, or it ended during the
 * command), EINVAL (empty argv, an env entry not NAME=VALUE), others (the
 * box's init could not be reached). */
HUSK_PUBLIC int husk_box_exec(struct husk_mgr *m, const char *tenant, const char *id,
                              const struct husk_exec_req *req, struct husk_exec_result *out,
                              struct husk_err *err);

/* A background process: output goes to files kept in the box's memory
 * (outside what the box's programs can see, counted against its disk) and
 * survives manager restarts; its exit is recorded even if it happens while
 * no manager runs, and its limits hold across restarts. */
struct husk_proc {
  int64_t pid;          /* inside the box */
  char state[16];       /* running | exited | lost */
  int exit_code;        /* when exited: its code, or 128+signal; 124 its timeout ended it */
  int signal;
  int64_t started_ms, ended_ms;
  char *cmd_json;       /* its argv as a JSON array (malloc'd) */
  uint64_t timeout_ms;  /* its limits as started; 0: none */
  uint64_t output_limit;
  /* When exited: exited, signaled, timeout (exit code 124, signal SIGKILL)
   * or output (exit code 137, signal SIGKILL), as a sync exec reports them. */
  enum husk_reason reason;
  bool truncated; /* the output limit cut its output to output_limit bytes */
  char created_by[HUSK_CREATED_BY_MAX]; /* husk_exec_req.created_by of its start, or "" */
};

/* Free p->cmd_json (not p). */
HUSK_PUBLIC void husk_proc_free(struct husk_proc *p);

/* Start req->argv in the background (req->sink, started, stdin_buf and
 * cancel_fd are not used: stdin stays open for husk_proc_stdin).  *out
 * describes the running process.
 * Limits, kept across manager restarts (0: none, unlike a sync exec: the
 * process runs until it ends or its box does, its output bounded by the
 * box's disk):
 *   req->timeout_ms    its process group is killed that long after the
 *                      start (reason timeout, exit code 124); a manager
 *                      that was not running then kills it when it opens;
 *   req->output_limit  stdout + stderr bytes kept: past it its process
 *                      group is killed (reason output, exit code 137), and
 *                      once it ended its output is cut to exactly that many
 *                      bytes (each stream keeps at least half, or all of
 *                      itself if shorter).  The output is measured a few
 *                      times a second, so the files may pass the limit for
 *                      that long before the cut.
 * Errors: as husk_box_exec, and EINVAL for a command that cannot start (the
 * message says why). */
HUSK_PUBLIC int husk_box_exec_background(struct husk_mgr *m, const char *tenant, const char *id,
                                         const struct husk_exec_req *req, struct husk_proc *out,
                                         struct husk_err *err);

/* Call cb for each background process of the box, oldest first (the
 * struct is valid during the call; cb returns 0 to go on, > 0 to stop,
 * < 0 to fail with that value).  Errors: ENOENT. */
HUSK_PUBLIC int husk_proc_list(struct husk_mgr *m, const char *tenant, const char *id,
                               int (*cb)(void *ctx, const struct husk_proc *p), void *ctx,
                               struct husk_err *err);

/* A page of the box's background processes, newest first: at most
 * `limit` (1..1000) of them older than the cursor `before` (0: from the
 * newest).  cb also gets each one's cursor (pass the last one as `before`
 * for the next page) and whether its cmd_json, longer than `cmd_max`
 * bytes, was cut to its program name (at most 1024 characters).  cb
 * returns as for husk_proc_list.  Errors: ENOENT, EINVAL (limit). */
HUSK_PUBLIC int husk_proc_list_page(struct husk_mgr *m, const char *tenant, const char *id,
                                    uint64_t before, unsigned limit, size_t cmd_max,
                                    int (*cb)(void *ctx, const struct husk_proc *p, uint64_t cursor,
                                              bool cmd_cut),
                                    void *ctx, struct husk_err *err);

/* One process by its pid in the box.  Errors: ENOENT (box or process). */
HUSK_PUBLIC int husk_proc_get(struct husk_mgr *m, const char *tenant, const char *id, int64_t pid,
                              struct husk_proc *out, struct husk_err *err);

/* Send signal `sig` to the process, or with `group` to its whole process
 * group.  Errors: ENOENT, EBUSY (it has ended), EINVAL (bad signal). */
HUSK_PUBLIC int husk_proc_signal(struct husk_mgr *m, const char *tenant, const char *id,
                                 int64_t pid, int sig, bool group, struct husk_err *err);

/* Write len bytes to the process's stdin; `eof` closes it afterwards.
 * Errors: ENOENT, EBUSY (ended, or stdin already closed), EAGAIN (it does
 * not read: part of the bytes may have been written, the message says how
 * many), EPIPE (it closed its stdin). */
HUSK_PUBLIC int husk_proc_stdin(struct husk_mgr *m, const char *tenant, const char *id,
                                int64_t pid, const void *buf, size_t len, bool eof,
                                struct husk_err *err);

/* Open the process's output (stream HUSK_STDOUT or HUSK_STDERR): *fd_out
 * is a read-only fd the caller reads at any offset (pread) and closes;
 * *running says whether more may come (to follow it, read on and check
 * again with husk_proc_get).  Errors: ENOENT, EINVAL (bad stream), EBUSY
 * (the output is gone: the process ended long ago). */
HUSK_PUBLIC int husk_proc_output(struct husk_mgr *m, const char *tenant, const char *id,
                                 int64_t pid, int stream, int *fd_out, bool *running,
                                 struct husk_err *err);

#endif
