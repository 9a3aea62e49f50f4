/* Running one program in a box and relaying its I/O: the loop shared by
 * one-shot runs (husk run) and execs in long-lived boxes (husk serve).
 *
 * The program is started by the box's init over a control connection; its
 * stdout/stderr come back through pipes and go to a sink callback, capped
 * at output_limit; stdin comes from a host fd or a buffer; a wall-time
 * limit ends it.  In whole-box mode (one-shot runs) the program's end, or
 * any limit, kills the whole box and the output is drained to EOF; in
 * process mode (long-lived boxes) only the program's process group is
 * killed, and output still held open by its leftovers is not waited for. */
#ifndef HUSK_BOX_EXEC_H
#define HUSK_BOX_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "husk/exec.h" /* struct husk_exec_result */
#include "husk/run.h"
#include "jail/jail.h"

struct exec_spec {
  char *const *argv;
  char *const *env; /* complete environment */
  const char *cwd;
  uint64_t timeout_ms;
  uint64_t output_limit;
  /* stdin: a host fd to relay (>= 0), else a buffer (may be empty) */
  int stdin_fd;
  const void *stdin_buf;
  size_t stdin_len;
  /* stdout (stream 1) / stderr (stream 2) chunks; a negative return stops
   * relaying (e.g. the client went away): the program is then killed. */
  int (*sink)(void *ctx, int stream, const char *buf, size_t len);
  void *sink_ctx;
  /* Called once the program runs, with its pid inside the box. */
  void (*started)(void *ctx, pid_t pid);
  /* Signals read from this signalfd are forwarded to the program's group
   * (husk run), -1 for none. */
  int signal_fd;
  /* A cancellation fd: readable means "stop now" (client gone), or -1. */
  int cancel_fd;
};

/* Run spec in the box whose init listens on `conn` (a connection of its
 * own, or j->ctl).  `j` gives the cgroup (limit trips) and, in whole-box
 * mode, the box to kill.  Always fills *out; returns 0, or -1 when husk
 * itself failed (out->reason == HUSK_REASON_SETUP_ERROR). */
int exec_relay(struct jail *j, int conn, bool whole_box, const struct exec_spec *spec,
               struct husk_exec_result *out);

/* The default environment of a box program, with `extra` NAME=VALUE
 * entries applied on top (later ones win).  Free with free(); the strings
 * are not copied. */
char **exec_build_env(char *const *base_extra, char *const *extra);

#endif
