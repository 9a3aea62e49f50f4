/* The jail: one box = one set of namespaces (user, mount, pid, net, ipc,
 * uts, cgroup), a cgroup with limits, a read-only root built from the host's
 * /usr and a generated /etc, a size-limited tmpfs for /workspace, /tmp and
 * /dev/shm, and a pid 1 (init) that starts programs on request.
 *
 * Host side:  jail_create()  ->  jail_exec() / jail_signal()  ->  events
 *             from jail_recv()  ->  jail_destroy().
 * The box's writable tmpfs stays reachable from the host through `fs`
 * (a directory fd), also after every process in the box is gone: copy-out
 * happens through it with fd-relative, no-follow operations. */
#ifndef HUSK_JAIL_JAIL_H
#define HUSK_JAIL_JAIL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "jail/cgroup.h"
#include "jail/ctl.h"
#include "util/error.h"

struct jail_config {
  struct cgroup_limits limits;
  uint64_t disk_bytes;  /* size of the tmpfs behind /workspace, /tmp, /dev/shm */
  const char *name;     /* cgroup name; unique per host */
  bool die_with_parent; /* kill the box if the creating thread dies */
  /* Long-lived boxes: init also listens on this unix socket path (created
   * here, mode 0600), so a restarted daemon can reconnect.  NULL: no socket. */
  const char *ctl_path;
  /* A root prepared with rootfs_prepare() in this process's mount
   * namespace, which every box binds instead of building its own; NULL:
   * each box builds it. */
  const char *prepared_root;
  /* A box of an image template (rootfs_image.h): its layers, top first, as
   * O_PATH directory fds, stacked on `image_scratch` (an empty directory
   * of this process's private mount namespace); the root stays writable
   * (the box's own layer).  No layers: the host's /usr, read-only. */
  const int *image_layers;
  size_t image_nlayers;
  const char *image_scratch;
  /* Whom programs run as inside the box; user_set false: the box user
   * (HUSK_BOX_UID, HUSK_BOX_GID).  Root (0) has no capability either. */
  bool user_set;
  uint32_t uid, gid;
  /* Called with the box's fresh writable filesystem (its root fd) and uid
   * range once it is made, before the root is built on it and before
   * anything of the box runs: what fills it (a snapshot's restore).
   * A failure fails the create.  NULL: nothing. */
  int (*fill_fs)(void *ctx, int fs, uint32_t uid_base, struct husk_err *err);
  void *fill_ctx;
  /* Volumes mounted into /workspace (volume_mount.h), after fill_fs. */
  const struct jail_volume *volumes;
  size_t nvolumes; /* at most JAIL_MAX_VOLUMES */
};

/* A volume of a box: its ext4 image (a regular file, opened O_RDWR, or
 * O_RDONLY for a read-only mount) and where it goes, relative to
 * /workspace ("data", "a/b": normalized, no "..", checked by the caller). */
struct jail_volume {
  int image;
  const char *path;
  bool read_only;
};
#define JAIL_MAX_VOLUMES 8

struct jail {
  pid_t pid;         /* host pid of the box's init */
  int pidfd;         /* pidfd of init */
  int ctl;           /* control socket to init */
  int fs;            /* dirfd of the box's writable tmpfs (workspace/, tmp/, shm/) */
  int slot_lock;     /* holds the uid-range slot; init holds a copy */
  unsigned slot;
  uint32_t uid_base; /* host uid of uid 0 inside the box */
  int landlock_abi;  /* 0 when Landlock is unavailable */
  struct cgroup cg;
};

#define JAIL_INIT {.pid = -1, .pidfd = -1, .ctl = -1, .fs = -1, .slot_lock = -1, .cg = CGROUP_INIT}

/* Build the box and start its init; returns when init reported ready. */
int jail_create(struct jail *j, const struct jail_config *cfg, struct husk_err *err);

/* Ask init to start a program.  fds: stdin, stdout, stderr for it (sent
 * with the request; the caller keeps its copies).  The result arrives as a
 * CTL_STARTED event, then CTL_EXITED. */
int jail_exec(struct jail *j, uint64_t id, char *const argv[], char *const env[], const char *cwd,
              const int fds[3], struct husk_err *err);

/* Signal a process (pid inside the box), or its whole process group. */
int jail_signal(struct jail *j, pid_t pid, int sig, bool group, struct husk_err *err);

/* One event from init.  Returns 1 with *ev filled, 0 when init closed the
 * connection, -1 on error. */
union jail_event {
  struct ctl_hdr h;
  struct ctl_started started;
  struct ctl_exited exited;
  struct ctl_setup_error setup_error;
};
int jail_recv(struct jail *j, union jail_event *ev, struct husk_err *err);

/* Connect to the control socket of a running box (reconnect after a
 * restart, or one connection per concurrent exec).  Returns the fd. */
int jail_connect(const char *ctl_path, struct husk_err *err);

/* Over connection `fd`: ask init for the box filesystem's root fd.  With
 * `version`, ask for init's protocol version too (CTL_VERSION; 0 for an
 * init from before versions). */
int jail_get_fs(int fd, uint32_t *version, struct husk_err *err);

/* Over connection `fd`: the exit of (exec id, pid) is recorded (an init of
 * CTL_VERSION 1 or later). */
int jail_ack_exit(int fd, uint64_t id, pid_t pid, struct husk_err *err);

/* Over connection `fd`: become the sink for exits of orphaned processes. */
int jail_watch(int fd, struct husk_err *err);

/* Event from any connection to init (jail_recv reads j->ctl). */
int jail_recv_fd(int fd, union jail_event *ev, struct husk_err *err);
int jail_exec_fd(int fd, uint64_t id, char *const argv[], char *const env[], const char *cwd,
                 const int fds[3], uint32_t flags, struct husk_err *err);
int jail_signal_fd(int fd, pid_t pid, int sig, bool group, struct husk_err *err);

/* As jail_exec_fd with nfds fds (0, or 3 to CTL_EXEC_MAX_FDS): the
 * program's fds 0, 1, 2, 3, ... (an init of version 2 or later). */
int jail_exec_fds(int fd, uint64_t id, char *const argv[], char *const env[], const char *cwd,
                  const int *fds, size_t nfds, uint32_t flags, struct husk_err *err);

/* Over connection `fd` (version 2+): init keeps copies of `fds` (the
 * host's ends of the pipes of process `pid`, started by exec `id`) until
 * it exits, and jail_get_held gives them back, exactly `nfds` of them, and
 * makes `fd` the connection its exit is reported on.  ESRCH: no such live
 * process (it has ended). */
int jail_hold_fds(int fd, uint64_t id, pid_t pid, const int *fds, size_t nfds,
                  struct husk_err *err);
int jail_get_held(int fd, uint64_t id, pid_t pid, int *fds, size_t nfds, struct husk_err *err);

/* Kill everything in the box now (SIGKILL to init ends the pid namespace;
 * the cgroup is killed as well, as a second line). */
void jail_kill(struct jail *j);

/* Kill, reap, remove the cgroup, release the uid slot.  `fs` is kept open
 * (the caller may still copy out of it) unless `close_fs`.  With `final`,
 * the cgroup's usage is read after every process is gone and before the
 * cgroup is removed. */
int jail_destroy(struct jail *j, bool close_fs, struct cgroup_stats *final, struct husk_err *err);

/* Host uid/gid that a uid/gid inside the box maps to. */
static inline uint32_t jail_host_id(const struct jail *j, uint32_t inside) {
  return j->uid_base + inside;
}

#endif
