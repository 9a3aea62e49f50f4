/* husk: one program in a fresh box, the box gone when it ends.
 *
 * What `husk run` is: no daemon, no database; the calling process builds
 * the box (it must run as root: each box maps its root user onto a uid range
 * of its own), relays the program's stdio and removes every trace of the
 * box before returning. */
#ifndef HUSK_RUN_H
#define HUSK_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "husk/base.h"

/* Why a program (or a box) ended. */
enum husk_reason {
  HUSK_REASON_EXITED = 0,  /* the program exited by itself */
  HUSK_REASON_SIGNALED,    /* the program was killed by a signal */
  HUSK_REASON_TIMEOUT,     /* wall-time limit */
  HUSK_REASON_MEMORY,      /* memory limit (OOM kill) */
  HUSK_REASON_PIDS,        /* process/thread limit */
  HUSK_REASON_OUTPUT,      /* stdout+stderr limit */
  HUSK_REASON_SETUP_ERROR, /* husk could not build the box or start the program */
};

/* The reason's name as the CLI and the APIs print it ("exited", "timeout",
 * ...); "unknown" for a value outside the enum.  Never NULL. */
HUSK_PUBLIC const char *husk_reason_name(enum husk_reason r);

/* Limits of one box.  Zero means "the default"; every default and range is
 * in docs/limits.md. */
struct husk_limits {
  uint64_t memory_bytes;
  uint64_t pids;
  uint64_t cpu_milli;    /* 1000 = one CPU */
  uint64_t disk_bytes;   /* /workspace + /tmp + /dev/shm */
  uint64_t timeout_ms;   /* wall time of the run (a long-lived box: its lifetime) */
  uint64_t output_bytes; /* stdout + stderr */
};

/* Fill every zero field of *l with its default and check every field
 * against its range.
 * Returns 0, or -1 with err->code EINVAL and a message naming the field,
 * its value and the range. */
HUSK_PUBLIC int husk_limits_resolve(struct husk_limits *l, struct husk_err *err);

struct husk_run_spec {
  struct husk_limits limits;
  char *const *argv;          /* program and arguments, argv[0] looked up in the box's PATH */
  char *const *env;           /* extra NAME=VALUE entries (override the defaults), NULL-terminated, or NULL */
  const char *workdir;        /* inside the box; NULL: /workspace (created if missing) */
  const char *workspace_in;   /* host directory copied into /workspace first, or NULL */
  const char *export_dir;     /* host directory /workspace is copied to afterwards, or NULL */
  int stdin_fd, stdout_fd, stderr_fd; /* host fds relayed to and from the program (-1: none) */
  /* Non-fatal notices (entries skipped while copying, ...), one line each;
   * NULL: dropped. */
  void (*warn)(void *ctx, const char *line);
  void *warn_ctx;
  /* The box's software: NULL or "default", the host's /usr; else a
   * template the operator shares (husk template import), kept in the data
   * directory `data_dir` (husk serve's --data).  Its image config gives the
   * env (under `env`), the working directory (unless `workdir`), the user,
   * and the program when argv is NULL or empty (Entrypoint then Cmd). */
  const char *template_name;
  const char *data_dir;
  /* A snapshot kept in data_dir's store (husk/snapshot.h, any tenant's:
   * the caller is the operator): the box starts with its files, of its
   * template (template_name NULL or the same), its env under `env`, its
   * working directory unless `workdir`.  NULL: an empty box. */
  const char *snapshot;
};

struct husk_run_result {
  int exit_code; /* the program's code; 128+N signal N; 124 timeout; 125 husk failed;
                    126 not executable; 127 not found; 137 a memory, pids or output limit */
  int signal;    /* signal that ended the program, 0 if none */
  enum husk_reason reason;
  uint64_t wall_ms;
  uint64_t cpu_ms;
  uint64_t memory_peak_bytes;
  uint64_t output_bytes;
  bool output_truncated;
  bool stderr_open_line; /* the program's stderr did not end with a newline */
  char message[1024];    /* one line for a person when something went wrong, else "" */
};

/* Run spec->argv in a fresh box, relay its stdio, copy /workspace in and
 * out as asked, and remove every trace of the box (cgroup, mounts,
 * processes) before returning.  The caller must be root.  During the call
 * SIGINT, SIGTERM, SIGHUP and SIGQUIT are blocked in the calling thread and
 * forwarded to the program, and SIGPIPE is ignored.
 * Always fills *res (a failure of husk itself: reason
 * HUSK_REASON_SETUP_ERROR, exit_code 125, message saying why).
 * Returns res->exit_code. */
HUSK_PUBLIC int husk_run(const struct husk_run_spec *spec, struct husk_run_result *res);

#endif
