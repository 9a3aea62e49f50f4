/* Dropping privileges inside the box: capabilities (all five sets),
 * securebits, uid/gid, no_new_privs, rlimits.  Usable in a freshly cloned
 * child: nothing here allocates, and a failure is formatted into the
 * caller's struct husk_err (snprintf and strerror, which allocate nothing
 * for the errno values of these calls). */
#ifndef HUSK_JAIL_PRIVS_H
#define HUSK_JAIL_PRIVS_H

#include <stdint.h>

#include "util/error.h"

/* For init: stay uid 0 of the box (so box programs, uid HUSK_BOX_UID, can
 * neither signal it nor change its limits or scheduling) but keep only
 * CAP_SETUID, CAP_SETGID and CAP_SETPCAP, which it needs to start programs
 * as the box user, and CAP_KILL, to signal them on the host's request
 * (capabilities of the box's own user namespace); lock securebits so root
 * gains nothing on exec; set no_new_privs.  Returns 0, or -1 with `err`
 * naming the step that failed. */
int privs_drop_for_init(struct husk_err *err);

/* For a program, in init's forked child: become uid/gid (the box user,
 * HUSK_BOX_UID, or an image's user) with no capability in any set
 * (bounding, ambient, inheritable included): the locked securebits keep
 * even uid 0 from gaining any. */
int privs_drop_for_program(uint32_t uid, uint32_t gid, struct husk_err *err);

/* Per-process limits every box process inherits. Returns 0 or -1. */
int privs_set_rlimits(struct husk_err *err);

/* For the host processes that hold keys and decrypted secrets (husk serve,
 * husk mcp, the box spawner): not dumpable (no ptrace or /proc/PID/mem for
 * anyone without CAP_SYS_PTRACE) and RLIMIT_CORE 0 (a crash writes no core
 * file).  Dumpable comes back at execve: call it again after one.  Returns 0
 * or -1. */
int privs_no_dumps(struct husk_err *err);

#endif
