/* husk: code contexts -- long-lived interpreters in a box that keep their
 * state between executions and answer with what a notebook shows.
 *
 * A context is one interpreter process (Python, JavaScript on Node, or an
 * interactive bash) started in a running box by husk's own runner (part of
 * husk, handed to the box with the process: nothing fetched, no network).
 * It runs as the box's user with the box's isolation, in its own process
 * group; code in it can break only its own context.  Several contexts per
 * box, each with its own variables.  A context lives until it is deleted
 * or its box ends; it survives manager restarts while the box lives (init
 * keeps its pipes open meanwhile).  One execution at a time per context.
 *
 * Each box has a default context per language, made on first use: its id
 * is "default-<language>" ("default-python", ...). */
#ifndef HUSK_CONTEXT_H
#define HUSK_CONTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "husk/base.h"
#include "husk/manager.h"

#define HUSK_CTX_ID_MAX 40

struct husk_ctx_req {
  const char *language; /* "python" (NULL: python), "javascript", "bash" */
  const char *cwd;      /* NULL: the box's working directory */
  char *const *env;     /* NAME=VALUE for every execution, NULL-terminated, or NULL */
};

struct husk_ctx_info {
  char id[HUSK_CTX_ID_MAX];
  char language[16];
  char state[16];       /* idle | busy | ended (the interpreter exited;
                           the next execution restarts it) */
  char version[32];     /* the interpreter's, as it reported it; may be "" */
  char cwd[256];        /* as created; cut if longer (the context has all of it) */
  int64_t pid;          /* the interpreter's, inside the box */
  uint64_t execution_count; /* executions since its last (re)start */
  int64_t created_ms;
  int64_t started_ms;   /* its last (re)start */
};

/* Start a context.  Errors: ENOENT (no such box), EBUSY (not running),
 * EINVAL (unknown language, bad env entry or cwd), ENOTSUP (the language's
 * interpreter is not in the box: python3, node, bash; or the box was
 * started by a husk too old for contexts), EUSERS (the box has
 * HUSK_CTX_MAX contexts), others (the interpreter did not start). */
#define HUSK_CTX_MAX 32
HUSK_PUBLIC int husk_ctx_create(struct husk_mgr *m, const char *tenant, const char *box,
                                const struct husk_ctx_req *req, struct husk_ctx_info *out,
                                struct husk_err *err);

/* The box's contexts, oldest first (the struct is valid during the call;
 * cb returns 0 to go on, > 0 to stop, < 0 to fail with that value).
 * Errors: ENOENT, EBUSY. */
HUSK_PUBLIC int husk_ctx_list(struct husk_mgr *m, const char *tenant, const char *box,
                              int (*cb)(void *ctx, const struct husk_ctx_info *c), void *ctx,
                              struct husk_err *err);

/* One context (a default one that does not exist yet is ENOENT).
 * Errors: ENOENT (no such box or context), EBUSY. */
HUSK_PUBLIC int husk_ctx_get(struct husk_mgr *m, const char *tenant, const char *box,
                             const char *ctx_id, struct husk_ctx_info *out, struct husk_err *err);

/* Fresh state, same id, language, cwd and env: the interpreter (and its
 * process group) is killed and started again; an execution in flight ends
 * as "restarted".  Errors: as husk_ctx_create, ENOENT for the context. */
HUSK_PUBLIC int husk_ctx_restart(struct husk_mgr *m, const char *tenant, const char *box,
                                 const char *ctx_id, struct husk_ctx_info *out,
                                 struct husk_err *err);

/* SIGINT to the context's process group: the execution in flight ends as
 * "interrupted" (Python: KeyboardInterrupt) and the context goes on.  An
 * idle context ignores it.  Errors: ENOENT, EBUSY (box not running). */
HUSK_PUBLIC int husk_ctx_interrupt(struct husk_mgr *m, const char *tenant, const char *box,
                                   const char *ctx_id, struct husk_err *err);

/* Kill the interpreter's process group and forget the context.
 * Errors: ENOENT, EBUSY (box not running). */
HUSK_PUBLIC int husk_ctx_delete(struct husk_mgr *m, const char *tenant, const char *box,
                                const char *ctx_id, struct husk_err *err);

/* One representation of a result: mime type and its data, text for text
 * types, base64 for image/png, image/jpeg and application/pdf. */
struct husk_ctx_repr {
  const char *mime;
  const char *data;
  size_t len;
};

/* A result (the last expression's value, display data, a figure) or the
 * execution's error.  Everything in it came from the box: it is valid
 * UTF-8 JSON text the core checked, but its content is the box's. */
struct husk_ctx_output {
  bool is_error;
  bool is_main_result;                /* the value of the last expression */
  const struct husk_ctx_repr *reprs;  /* results */
  size_t nreprs;
  const char *const *truncated;       /* mimes left out for their size */
  size_t ntruncated;
  const char *name, *value, *traceback; /* errors: "ZeroDivisionError", ... */
};

enum husk_ctx_status {
  HUSK_CTX_OK = 0,
  HUSK_CTX_ERROR,       /* the code raised (the error output says what) */
  HUSK_CTX_INTERRUPTED, /* husk_ctx_interrupt */
  HUSK_CTX_TIMEOUT,     /* interrupted at its timeout */
  HUSK_CTX_DIED,        /* the interpreter ended during it (killed itself,
                           exit(), out of memory): restarted */
  HUSK_CTX_RESTARTED,   /* husk_ctx_restart or delete during it */
};

struct husk_ctx_exec_req {
  const char *code; /* any bytes; not NUL-terminated */
  size_t code_len;
  char *const *env;       /* NAME=VALUE for this execution only, or NULL */
  uint64_t timeout_ms;    /* 0: the default (docs/limits.md); then SIGINT, and
                             a restart if it is ignored */
  uint64_t output_limit;  /* stdout + stderr bytes; 0: the default.  Past it
                             output is dropped (the execution goes on) */
  /* Output as it comes.  A negative return stops the execution (it is
   * interrupted; the caller's client went away).  Either may be NULL. */
  int (*stream)(void *ctx, int stream, const char *buf, size_t len); /* 1, 2 */
  int (*output)(void *ctx, const struct husk_ctx_output *o);
  /* Called once the code is on its way to the interpreter (everything
   * that can refuse the execution has passed), before any output; or NULL. */
  void (*started)(void *ctx);
  void *sink_ctx;
  /* Readable means "stop now": the execution is interrupted.  -1: none. */
  int cancel_fd;
};

struct husk_ctx_exec_result {
  enum husk_ctx_status status;
  uint64_t execution_count; /* this execution's number in the context */
  double duration_ms;
  uint64_t output_bytes;    /* stdout + stderr, also past the limit */
  bool truncated;           /* output or a result was cut */
  bool restarted;           /* the context was restarted because of it
                               (timeout ignored, interpreter died) */
  char message[256];        /* for DIED and RESTARTED: what happened */
};

/* Run code in a context; a default one ("default-<language>", language
 * from ctx_id's suffix) is made if missing.  Returns 0 with *out filled (an
 * error in the code is a result), or -1.  Errors: ENOENT (no such box or
 * context), EBUSY (not running), EALREADY (the context is running another
 * execution), EINVAL, and as husk_ctx_create for a context that has to be
 * (re)started first. */
HUSK_PUBLIC int husk_ctx_execute(struct husk_mgr *m, const char *tenant, const char *box,
                                 const char *ctx_id, const struct husk_ctx_exec_req *req,
                                 struct husk_ctx_exec_result *out, struct husk_err *err);

HUSK_PUBLIC const char *husk_ctx_status_name(enum husk_ctx_status s);

#endif
