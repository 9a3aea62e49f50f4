/* husk: a disposable, isolated computer for AI agents.
 *
 * Public interface of the core library (libhusk).  Fronts (the CLI, and
 * later the HTTP API, MCP server and S3 front) call these functions and
 * only format their results. */
#ifndef HUSK_HUSK_H
#define HUSK_HUSK_H

#include <stdbool.h>
#include <stdint.h>

#define HUSK_VERSION "0.1.0"

/* Why a run ended. */
enum husk_reason {
  HUSK_REASON_EXITED = 0,  /* the program exited by itself */
  HUSK_REASON_SIGNALED,    /* the program was killed by a signal */
  HUSK_REASON_TIMEOUT,     /* wall-time limit */
  HUSK_REASON_MEMORY,      /* memory limit (OOM kill) */
  HUSK_REASON_PIDS,        /* process/thread limit */
  HUSK_REASON_OUTPUT,      /* stdout+stderr limit */
  HUSK_REASON_SETUP_ERROR, /* husk could not build the box or start the run */
};

const char *husk_reason_name(enum husk_reason r);

/* Limits of one box.  Zero means "the default" (see docs/limits.md). */
struct husk_limits {
  uint64_t memory_bytes;
  uint64_t pids;
  uint64_t cpu_milli;    /* 1000 = one CPU */
  uint64_t disk_bytes;   /* /workspace + /tmp + /dev/shm */
  uint64_t timeout_ms;   /* wall time of the run */
  uint64_t output_bytes; /* stdout + stderr */
};

/* Fill every zero field with its default and check ranges.  Returns 0, or
 * -1 with a message in msg (msg_len bytes). */
int husk_limits_resolve(struct husk_limits *l, char *msg, unsigned msg_len);

struct husk_run_spec {
  struct husk_limits limits;
  char *const *argv;          /* program and arguments, argv[0] looked up in PATH */
  char *const *env;           /* extra NAME=VALUE entries (override the defaults), NULL-terminated */
  const char *workdir;        /* inside the box; default /workspace */
  const char *workspace_in;   /* host directory copied into /workspace first, or NULL */
  const char *export_dir;     /* host directory /workspace is copied to afterwards, or NULL */
  int stdin_fd, stdout_fd, stderr_fd; /* host fds relayed to and from the program (-1: none) */
  /* Non-fatal notices (entries skipped while copying, ...), one line each. */
  void (*warn)(void *ctx, const char *line);
  void *warn_ctx;
};

struct husk_run_result {
  int exit_code; /* program's code; 128+N signal; 124 timeout; 125 husk error; 126/127 */
  int signal;    /* signal that ended the program, 0 if none */
  enum husk_reason reason;
  uint64_t wall_ms;
  uint64_t cpu_ms;
  uint64_t memory_peak_bytes;
  uint64_t output_bytes;
  bool output_truncated;
  bool stderr_open_line; /* the program's stderr did not end with a newline */
  char message[1024]; /* one line for the user when something went wrong, else "" */
};

/* Run one program in a fresh box and remove every trace of the box.  Always
 * fills `res`; returns res->exit_code. */
int husk_run(const struct husk_run_spec *spec, struct husk_run_result *res);

#endif
