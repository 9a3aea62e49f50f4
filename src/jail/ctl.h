/* The control protocol between husk (host side) and a box's init (pid 1).
 *
 * Transport: SOCK_SEQPACKET unix sockets, one message per packet, file
 * descriptors (an exec's stdin/stdout/stderr) attached with SCM_RIGHTS.
 * Both ends validate every length: the host treats messages from init as
 * untrusted (they come from inside a box), init rejects malformed requests.
 * Init serves several connections at once: the one it was started with and,
 * for long-lived boxes, any accepted on its listening socket (a path in the
 * daemon's data directory, reachable only by root on the host).  Exits are
 * reported on the connection that started the process, or, when that one is
 * gone, on the CTL_WATCH connection.
 *
 * Exits of processes started with CTL_EXEC_ACK_EXIT stay queued in init
 * until the host answers CTL_EXIT_ACK for them (after it has committed
 * them): every new CTL_WATCH gets all of them again, so an exit reaches a
 * daemon that crashed before recording it once it is back.  The host
 * therefore sees an exit more than once and must take it idempotently.
 * Init never blocks on the watch connection: what does not fit waits for
 * the socket to drain.
 *
 * Versions: CTL_HELLO (answered with CTL_HELLO and CTL_VERSION) tells a
 * host which of this it may use.  An init of version 0 (before CTL_HELLO)
 * ignores CTL_HELLO, CTL_EXIT_ACK and the flag, and delivers an exit once.
 *
 *   host -> init  CTL_EXEC      run a program (argv, env, cwd; 3 fds)
 *   host -> init  CTL_SIGNAL    signal a process or its process group
 *   host -> init  CTL_WATCH     make this connection the sink for orphan exits
 *   host -> init  CTL_GET_FS    ask for the box filesystem (after a restart)
 *   init -> host  CTL_FS        the box filesystem's root fd, attached
 *   init -> host  CTL_READY     setup finished, box is idle
 *   init -> host  CTL_SETUP_ERROR  setup failed (text), init exits
 *   init -> host  CTL_STARTED   exec result: pid inside the box, or errno
 *   init -> host  CTL_EXITED    a started process ended (wait status)
 *   host -> init  CTL_EXIT_ACK  that exit is recorded: forget it
 *   host -> init  CTL_HELLO     which version are you?  init -> host: the
 * answer
 *   host -> init  CTL_HOLD      keep these fds for a started process (the
 *                               host's ends of its pipes) until it exits
 *   host -> init  CTL_GET_HELD  give them back (after a daemon restart), and
 *                               make this connection the process's own
 *   init -> host  CTL_HELD      the fds attached, or none (no such process)
 *
 * A process whose host-side pipes init holds keeps them open while no
 * daemon runs: it neither reads end of file nor gets SIGPIPE, and the next
 * daemon takes up its pipes where the last one left them. */
#ifndef HUSK_JAIL_CTL_H
#define HUSK_JAIL_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/error.h"

enum ctl_type {
  CTL_READY = 1,
  CTL_SETUP_ERROR = 2,
  CTL_EXEC = 3,
  CTL_STARTED = 4,
  CTL_EXITED = 5,
  CTL_SIGNAL = 6,
  CTL_WATCH = 7,  /* host -> init: this connection gets exits of processes
                     whose own connection is gone (and those queued so far) */
  CTL_GET_FS = 8, /* host -> init: reply CTL_FS with the box filesystem's fd */
  CTL_FS = 9,     /* init -> host: the fd attached */
  CTL_EXIT_ACK = 10, /* host -> init: struct ctl_exit_ack */
  CTL_HELLO =
      11, /* host -> init: header only; init -> host: struct ctl_hello */
  CTL_HOLD = 12,     /* host -> init: struct ctl_hold, fds attached */
  CTL_GET_HELD = 13, /* host -> init: struct ctl_hold, nfds 0 */
  CTL_HELD = 14,     /* init -> host: struct ctl_hold, its fds attached */
};

/* 1: CTL_HELLO, CTL_EXIT_ACK, CTL_EXEC_ACK_EXIT.
 * 2: CTL_HOLD, CTL_GET_HELD; CTL_EXEC with up to CTL_EXEC_MAX_FDS fds. */
#define CTL_VERSION 2u

/* The fds an exec may carry: stdin, stdout, stderr, then fds 3, 4, ... of
 * the program (version 2). */
#define CTL_EXEC_MAX_FDS 6
/* The most fds any one message carries (ctl_send, ctl_recv): a spawn
 * request's archive and its volumes' images (box/spawner.c) are more than
 * an exec's. */
#define CTL_MAX_FDS 16
/* The fds init holds for one process. */
#define CTL_HOLD_MAX_FDS 6

struct ctl_hdr {
  uint32_t type;
  uint32_t len; /* whole message, header included */
};

/* Followed by strings_len bytes: cwd\0 argv[0]\0 ... argv[argc-1]\0 env[0]\0 ... */
struct ctl_exec {
  struct ctl_hdr h;
  uint64_t id;
  uint32_t argc;
  uint32_t envc;
  uint32_t strings_len;
  uint32_t nfds; /* 0, or 3 to CTL_EXEC_MAX_FDS: the program's fds 0, 1, ... */
  uint32_t flags; /* CTL_EXEC_* */
};

/* The program belongs to its connection: when that connection closes (the
 * client or the daemon went away), init kills the program's process group.
 * Background processes are started without it and outlive connections. */
#define CTL_EXEC_KILL_ON_HANGUP 1u
/* Keep the exit until CTL_EXIT_ACK names it (see the top). */
#define CTL_EXEC_ACK_EXIT 2u

struct ctl_started {
  struct ctl_hdr h;
  uint64_t id;
  int32_t pid;   /* pid inside the box, 0 on failure */
  int32_t error; /* errno of the failed step, 0 on success */
  int32_t stage; /* enum ctl_stage */
};

enum ctl_stage { CTL_STAGE_NONE = 0, CTL_STAGE_FORK, CTL_STAGE_CWD, CTL_STAGE_EXEC, CTL_STAGE_SETUP };

struct ctl_exited {
  struct ctl_hdr h;
  uint64_t id;
  int32_t pid;
  int32_t status; /* as from waitpid() */
};

/* The exit of process `pid` started by exec `id` is recorded. */
struct ctl_exit_ack {
  struct ctl_hdr h;
  uint64_t id;
  int32_t pid;
  int32_t pad; /* 0 */
};

struct ctl_hello {
  struct ctl_hdr h;
  uint32_t version; /* CTL_VERSION of the init */
  uint32_t pad;     /* 0 */
};

struct ctl_hold {
  struct ctl_hdr h;
  uint64_t id; /* the exec that started it */
  int32_t pid;
  uint32_t nfds; /* attached: 1 to CTL_HOLD_MAX_FDS (CTL_GET_HELD: 0) */
};

struct ctl_signal {
  struct ctl_hdr h;
  int32_t pid;
  int32_t sig;
  uint32_t group; /* 1: the whole process group */
};

struct ctl_setup_error {
  struct ctl_hdr h;
  int32_t error;
  char text[512];
};

/* Errors are reported as everywhere in the core: -1 and `err` filled (NULL
 * when the caller does not want the message), err->code the errno. */

/* Send one message with optional fds.  Returns 0 or -1. */
int ctl_send(int sock, const void *msg, size_t len, const int *fds, size_t nfds,
             struct husk_err *err);

/* Receive one message into buf (size bytes) and up to *nfds fds (closed
 * and dropped if more arrive).  Returns the message length, 0 on EOF, or
 * -1 (err->code EMSGSIZE when truncated, EPROTO when malformed).  The fds
 * of a message not returned are closed, and -1 in `fds`. */
ssize_t ctl_recv(int sock, void *buf, size_t size, int *fds, size_t *nfds, struct husk_err *err);

/* Pack an exec request into buf, for `nfds` fds sent with it (0, or 3 to
 * CTL_EXEC_MAX_FDS); returns total length or -1 (E2BIG). */
ssize_t ctl_pack_exec(void *buf, size_t size, uint64_t id, const char *cwd, char *const argv[],
                      char *const env[], size_t nfds, struct husk_err *err);

/* Unpack in place: fills the pointer arrays (NULL-terminated).  Returns 0 or
 * -1 (EPROTO) if the message is malformed. */
int ctl_unpack_exec(const void *msg, size_t len, const char **cwd, const char **argv,
                    size_t argv_cap, const char **env, size_t env_cap, struct husk_err *err);

const char *ctl_stage_name(int stage);

/* The box's setup failed, in the jail's child or in init before CTL_READY:
 * send `err` to the host as CTL_SETUP_ERROR (its message cut, and marked
 * "...", to what the message holds) and exit, as crun's
 * send_error_to_sync_socket_and_die.  Allocates nothing. */
_Noreturn void ctl_setup_error_exit(int sock, const struct husk_err *err);

#endif
