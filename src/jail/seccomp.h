/* The box's seccomp policy, compiled once per process into classic BPF.
 *
 * Three filters are stacked (the kernel applies the strictest result):
 *  1. a hand-written guard: wrong architecture or an x32 syscall number
 *     kills the process;
 *  2. the allowlist (libseccomp): everything not listed fails with EPERM,
 *     io_uring and clone3 fail with ENOSYS so libc falls back;
 *  3. argument denials (libseccomp, default allow): terminal-injection
 *     ioctls compared on the low 32 bits, and clone with namespace flags.
 * The compiled programs are plain memory, so installing them in a freshly
 * forked child needs no allocation and no libseccomp call. */
#ifndef HUSK_JAIL_SECCOMP_H
#define HUSK_JAIL_SECCOMP_H

#include <linux/filter.h>

#include "util/error.h"

#define HUSK_SECCOMP_FILTERS 3

struct seccomp_policy {
  struct sock_fprog prog[HUSK_SECCOMP_FILTERS];
};

/* Compile the policy with libseccomp into `out` (heap-allocated programs,
 * except the static guard).  Used at build time by tools/gen-seccomp.c and
 * at run time when no precompiled policy is linked in. */
int seccomp_policy_compile(struct seccomp_policy *out, struct husk_err *err);

/* The policy compiled at build time (build/gen/seccomp_bpf.c).  The build
 * tool itself links an empty one (tools/seccomp-none.c): all lengths 0. */
extern const struct seccomp_policy husk_seccomp_precompiled;

/* The shared policy: the precompiled one when present (no libseccomp work
 * on the hot path), else compiled on first call.  Thread-safe. */
int seccomp_policy_get(const struct seccomp_policy **out, struct husk_err *err);

/* Install all filters on the calling thread.  Requires no_new_privs.
 * Usable between fork and exec: nothing here allocates (errors are
 * formatted into `err` as privs.h says).  Returns 0 or -1. */
int seccomp_policy_apply(const struct seccomp_policy *p, struct husk_err *err);

#endif
