/* Dropping privileges inside the box: capabilities (all five sets),
 * securebits, uid/gid, no_new_privs, rlimits.  Async-signal-safe. */
#ifndef HUSK_JAIL_PRIVS_H
#define HUSK_JAIL_PRIVS_H

/* Become uid/gid HUSK_BOX_UID with no capabilities in any set, locked
 * securebits and no_new_privs.  Returns 0 or -errno; *step names the step
 * that failed. */
int privs_drop_to_box_user(const char **step);

/* Per-process limits every box process inherits. Returns 0 or -errno. */
int privs_set_rlimits(const char **step);

#endif
