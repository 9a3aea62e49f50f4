/* cgroups for boxes, on pure v2, hybrid (v1 controllers + a v2 hierarchy for
 * tracking) and pure v1 hosts, behind one interface.
 *
 * Layout: every hierarchy husk uses gets a parent directory (default `husk`,
 * or $HUSK_CGROUP_PARENT, relative to the hierarchy's mount point) and one
 * child per box.  Which hierarchy provides what is detected from
 * /proc/self/mountinfo once per process, never assumed. */
#ifndef HUSK_JAIL_CGROUP_H
#define HUSK_JAIL_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/error.h"

enum cgroup_layout { CGROUP_V2, CGROUP_HYBRID, CGROUP_V1 };

struct cgroup_limits {
  uint64_t memory_bytes;
  uint64_t pids;
  uint64_t cpu_milli; /* 1000 = one CPU */
};

struct cgroup_stats {
  uint64_t cpu_usec;
  uint64_t memory_current;
  uint64_t memory_peak;
  uint64_t pids_current;
};

enum cgroup_trip { CGROUP_TRIP_NONE = 0, CGROUP_TRIP_MEMORY, CGROUP_TRIP_PIDS };

struct cgroup {
  char name[96];
  int v2;      /* dirfd of the box's cgroup in the v2 hierarchy, or -1 */
  int memory;  /* v1 dirfds, -1 when that controller lives in v2 or is absent */
  int pids;
  int cpu;
  int cpuacct;
  int freezer;
  bool memory_in_v2, pids_in_v2, cpu_in_v2;
};

#define CGROUP_INIT {.v2 = -1, .memory = -1, .pids = -1, .cpu = -1, .cpuacct = -1, .freezer = -1}

/* Which layout this host has (detected once, cached). */
int cgroup_layout(enum cgroup_layout *out, struct husk_err *err);
const char *cgroup_layout_name(enum cgroup_layout l);

/* Create the box cgroup `name` in every hierarchy and apply the limits.
 * Fails with EEXIST if a cgroup of that name exists. On failure nothing is
 * left behind. */
int cgroup_create(struct cgroup *cg, const char *name, const struct cgroup_limits *lim,
                  struct husk_err *err);

/* Re-open an existing box cgroup (daemon restart).  Returns -1 with
 * err->code ENOENT if it does not exist. */
int cgroup_open(struct cgroup *cg, const char *name, struct husk_err *err);

/* Files the box's first process writes "0" to, moving itself into the
 * cgroup: `tasks` of every v1 hierarchy, then (last, *v2_index) the v2
 * cgroup.procs for when clone3 could not place it there.  Moving the
 * current thread through `tasks` does not take the global threadgroup
 * lock that a cgroup.procs write by the host takes, which waits for an RCU
 * grace period (about 15 ms after a moment of idle time).  `fds` ends at
 * its first -1 (a cleanup_close_vec for the caller); on failure nothing is
 * left open. */
#define CGROUP_MAX_ATTACH 9
int cgroup_self_attach_fds(const struct cgroup *cg, int fds[CGROUP_MAX_ATTACH + 1], int *v2_index,
                           struct husk_err *err);

/* Did a limit trip (OOM kill, fork refused at pids.max) since creation? */
enum cgroup_trip cgroup_tripped(const struct cgroup *cg);

/* Resource usage; fields that cannot be read are 0. */
void cgroup_stats(const struct cgroup *cg, struct cgroup_stats *st);

/* Kill every task in the cgroup (cgroup.kill, else freeze + SIGKILL + thaw). */
int cgroup_kill(const struct cgroup *cg, struct husk_err *err);

/* Freeze (or thaw) every task of the cgroup: v2 cgroup.freeze, else the v1
 * freezer.  Returns once the kernel reports them all stopped (or running),
 * or ETIMEDOUT after timeout_ms (a freeze that times out is undone).
 * Frozen tasks use no CPU and keep their memory; SIGKILL still ends them
 * (v1: after a thaw, which cgroup_kill does).  ENOTSUP: no freezer. */
int cgroup_freeze(const struct cgroup *cg, bool frozen, int timeout_ms, struct husk_err *err);
/* Whether the cgroup is frozen, or being frozen (what was asked last). */
int cgroup_frozen(const struct cgroup *cg, bool *frozen, struct husk_err *err);

/* True while any task is in the cgroup. */
bool cgroup_populated(const struct cgroup *cg);

/* Remove the cgroup from every hierarchy (waits briefly for exiting tasks)
 * and close its fds.  Safe on a partly created cgroup. */
int cgroup_destroy(struct cgroup *cg, struct husk_err *err);

/* Close fds without removing anything. */
void cgroup_close(struct cgroup *cg);

/* Remove empty cgroups whose names start with `prefix` and for which
 * `is_stale(name)` says the owner is gone.  Returns how many were removed. */
int cgroup_sweep(const char *prefix, bool (*is_stale)(const char *name));

#endif
