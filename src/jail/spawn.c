/* Creating and destroying a box.  The host-side sequence:
 *
 *   1. Compile (once per process) the seccomp policy.
 *   2. Claim a uid-range slot (abstract-socket lock).
 *   3. Create the cgroup and apply limits.
 *   4. Create the box's writable tmpfs with the new mount API, as detached
 *      mounts, so the host keeps a handle on it that outlives the box.
 *   5. clone3() into new user, mount, pid, net, ipc and uts namespaces,
 *      directly into the cgroup where the host supports that.
 *   6. Write the child's uid/gid maps, move it into the v1 cgroups, release it.
 *   7. Wait for init to report ready (or the reason it could not start).
 *
 * The child's side (child_main) is the bubblewrap-style story: enter the
 * cgroup namespace, build and pivot into the root, bring up loopback, drop
 * every privilege, apply Landlock, install seccomp last, then become init. */
#define _GNU_SOURCE
#include "jail/jail.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/init.h"
#include "jail/landlock.h"
#include "jail/limits.h"
#include "jail/privs.h"
#include "jail/rootfs.h"
#include "jail/rootfs_image.h"
#include "jail/seccomp.h"
#include "jail/syscalls.h"
#include "jail/volume_mount.h"
#include "util/cleanup.h"
#include "util/fileio.h"

/* Fixed fd numbers in the child, after it closed everything it inherited. */
enum {
  CHILD_SYNC = 3, CHILD_CTL, CHILD_SLOT, CHILD_WS, CHILD_TMP, CHILD_SHM, CHILD_FS, CHILD_LISTEN,
  CHILD_DEV, CHILD_ATTACH, /* CGROUP_MAX_ATTACH fds from here */
  CHILD_VOL = CHILD_ATTACH + CGROUP_MAX_ATTACH, /* JAIL_MAX_VOLUMES mount fds from here */
  CHILD_FIRST_FREE = CHILD_VOL + JAIL_MAX_VOLUMES
};
#define CHILD_NFDS (CHILD_FIRST_FREE - CHILD_SYNC)

/* What the host tells the child on the sync pipe. */
#define SYNC_GO '1'        /* maps written, clone3 placed it in the v2 cgroup */
#define SYNC_GO_ATTACH_V2 '2' /* ... and it must move itself into v2 too */

struct child_args {
  int sync, ctl, slot, ws, tmp, shm, fs, listen, dev;
  int attach[CGROUP_MAX_ATTACH];
  size_t nattach;
  int attach_v2; /* index in attach[] of the v2 cgroup.procs, -1 if none */
  int vol[JAIL_MAX_VOLUMES]; /* detached mounts of the volumes */
  const char *vol_path[JAIL_MAX_VOLUMES]; /* where, relative to /workspace */
  size_t nvol;
  bool die_with_parent;
  int landlock_abi;
  const struct seccomp_policy *seccomp;
  const char *prepared_root; /* jail_config.prepared_root, or an image box's root */
  bool root_writable;        /* an image box's */
  uint32_t uid, gid;         /* whom programs run as */
};

/* ---- uid-range slots ------------------------------------------------- */

/* A slot is claimed by binding an abstract unix socket named after it.  The
 * kernel releases the name when the last fd closes: the box's init inherits
 * one, so the slot stays taken exactly as long as the box lives, even if
 * the husk process that created it dies. */
static int slot_claim(unsigned *slot, struct husk_err *err) {
  unsigned start = 0;
  if (getrandom(&start, sizeof start, GRND_NONBLOCK) != sizeof start)
    start = (unsigned)getpid();
  for (unsigned i = 0; i < HUSK_UID_SLOTS; i++) {
    unsigned s = (start + i) % HUSK_UID_SLOTS;
    cleanup_close int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      return husk_error(err, errno, "cannot create the uid slot lock (socket)");
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "husk/uid-slot/%u", s);
    if (bind(fd, (struct sockaddr *)&a,
             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)) == 0) {
      *slot = s;
      return take_fd(&fd);
    }
    if (errno != EADDRINUSE)
      return husk_error(err, errno, "cannot bind the lock of uid slot %u", s);
  }
  return husk_fail(err, EAGAIN, "all %u uid slots are in use (too many boxes on this host)",
                   HUSK_UID_SLOTS);
}

/* ---- the writable tmpfs ------------------------------------------------ */

/* The box's tmpfs: j->fs, a directory fd on it for the host, and in
 * out_mnts detached mounts of its workspace/, tmp/ and shm/, in that
 * order (a cleanup_close_vec of the caller's: a failure leaves a -1 after
 * the last one made). */
/* The box's tmpfs: j->fs on its root, out_mnts its three parts (clones
 * the child attaches), *mnt_out the detached mount itself (while it is
 * open the mount stays mounted: an image box's overlay takes its writable
 * layer from it). */
static int make_fs(struct jail *j, uint64_t disk, uint32_t user_uid, int out_mnts[3],
                   int *mnt_out, struct husk_err *err) {
  cleanup_close int fsfd = fsopen("tmpfs", FSOPEN_CLOEXEC);
  if (fsfd < 0)
    return husk_error(err, errno, "fsopen tmpfs (kernel 5.2+ required)");
  char v[32];
  uint64_t inodes = disk / HUSK_DISK_BYTES_PER_INODE;
  if (inodes < HUSK_MIN_INODES)
    inodes = HUSK_MIN_INODES;
  snprintf(v, sizeof v, "%llu", (unsigned long long)disk);
  if (fsconfig(fsfd, FSCONFIG_SET_STRING, "size", v, 0) < 0)
    return husk_error(err, errno, "tmpfs size=%s", v);
  snprintf(v, sizeof v, "%llu", (unsigned long long)inodes);
  if (fsconfig(fsfd, FSCONFIG_SET_STRING, "nr_inodes", v, 0) < 0)
    return husk_error(err, errno, "tmpfs nr_inodes=%s", v);
  if (fsconfig(fsfd, FSCONFIG_SET_STRING, "mode", "0700", 0) < 0 ||
      fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
    return husk_error(err, errno, "create tmpfs");
  cleanup_close int mnt = fsmount(fsfd, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  if (mnt < 0)
    return husk_error(err, errno, "fsmount tmpfs");
  j->fs = openat(mnt, ".", O_DIRECTORY | O_RDONLY | O_CLOEXEC);
  if (j->fs < 0)
    return husk_error(err, errno, "open box filesystem");
  uint32_t user = jail_host_id(j, user_uid), root = jail_host_id(j, 0);
  static const struct {
    const char *name;
    mode_t mode;
    bool user_owned;
  } parts[] = {{"workspace", 0755, true}, {"tmp", 01777, false}, {"shm", 01777, false}};
  for (int i = 0; i < 3; i++) {
    if (mkdirat(j->fs, parts[i].name, 0700) < 0)
      return husk_error(err, errno, "mkdir `%s` in box filesystem", parts[i].name);
    uint32_t owner = parts[i].user_owned ? user : root;
    if (fchownat(j->fs, parts[i].name, owner, owner, AT_SYMLINK_NOFOLLOW) < 0 ||
        fchmodat(j->fs, parts[i].name, parts[i].mode, 0) < 0)
      return husk_error(err, errno, "set owner of `%s` in box filesystem", parts[i].name);
    out_mnts[i] = open_tree(mnt, parts[i].name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (out_mnts[i] < 0)
      return husk_error(err, errno, "open_tree `%s`", parts[i].name);
  }
  *mnt_out = take_fd(&mnt);
  return 0;
}

/* ---- volumes --------------------------------------------------------------- */

/* The box's volumes as detached mounts in out[] (a cleanup_close_vec of
 * the caller's, -1 after the last), their mount points made in its
 * workspace, owned by the box user. */
static int make_volumes(struct jail *j, const struct jail_config *cfg, uint32_t user_uid,
                        int out[], struct husk_err *err) {
  if (cfg->nvolumes == 0)
    return 0;
  if (cfg->nvolumes > JAIL_MAX_VOLUMES)
    return husk_fail(err, EINVAL, "a box mounts at most %d volumes", JAIL_MAX_VOLUMES);
  cleanup_close int ws = openat(j->fs, "workspace", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (ws < 0)
    return husk_error(err, errno, "cannot open the box's workspace");
  cleanup_close int userns = rootfs_image_userns(j->uid_base, err);
  if (userns < 0)
    return husk_error_wrap(err, "cannot idmap the box's volumes");
  for (size_t i = 0; i < cfg->nvolumes; i++) {
    const struct jail_volume *v = &cfg->volumes[i];
    if (volume_mount_point(ws, v->path, jail_host_id(j, user_uid), err) < 0)
      return -1;
    out[i] = volume_mount_make(v->image, v->read_only, userns, err);
    if (out[i] < 0)
      return husk_error_wrap(err, "cannot mount the volume at `/workspace/%s`", v->path);
    out[i + 1] = -1;
  }
  return 0;
}

/* ---- the control socket of a long-lived box ------------------------------ */

static int listen_ctl(const char *path, struct husk_err *err) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof a.sun_path)
    return husk_fail(err, ENAMETOOLONG, "control socket path `%s` is too long", path);
  strcpy(a.sun_path, path);
  cleanup_close int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return husk_error(err, errno, "cannot create the control socket `%s`", path);
  if (unlink(path) < 0 && errno != ENOENT)
    return husk_error(err, errno, "cannot remove stale `%s`", path);
  /* Created 0600 under the umask we set: only root on the host can connect. */
  mode_t old = umask(0177);
  int rc = bind(fd, (struct sockaddr *)&a, sizeof a);
  int e = errno;
  umask(old);
  if (rc < 0)
    return husk_error(err, e, "cannot listen on `%s`", path);
  if (listen(fd, 64) < 0) {
    husk_error(err, errno, "cannot listen on `%s`", path);
    unlink(path); /* bound, but nobody will ever accept on it */
    return -1;
  }
  return take_fd(&fd);
}

int jail_connect(const char *path, struct husk_err *err) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof a.sun_path)
    return husk_fail(err, ENAMETOOLONG, "control socket path `%s` is too long", path);
  strcpy(a.sun_path, path);
  cleanup_close int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return husk_error(err, errno, "cannot create a socket to connect to the box's init");
  if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
    return husk_error(err, errno, "cannot connect to the box's init");
  return take_fd(&fd);
}

/* ---- the child -------------------------------------------------------- */

/* What goes wrong in the child reaches the host in full, as in crun
 * (send_error_to_sync_socket_and_die): each step fills a struct husk_err on
 * the child's stack, child_main() sends it over the control socket and
 * exits, and wait_ready() makes it the error of jail_create().  The child
 * of a multi-threaded process must not allocate (another thread may have
 * held malloc's lock at the clone): husk_error() formats with vsnprintf and
 * strerror, which allocate nothing for the errno values of these calls
 * (glibc, in the C locale husk never leaves). */

/* Put the fds the child keeps at fixed numbers and close everything else
 * it inherited from the host (terminals, sockets, cgroup dirs...).  *ctl
 * names an fd of the control socket all along, to report a failure on. */
static int child_fds(const struct child_args *a, int *ctl, struct husk_err *err) {
  int src[CHILD_NFDS] = {a->sync, a->ctl, a->slot, a->ws, a->tmp, a->shm, a->fs, a->listen,
                            a->dev};
  for (size_t i = 0; i < CGROUP_MAX_ATTACH; i++)
    src[CHILD_ATTACH - CHILD_SYNC + i] = i < a->nattach ? a->attach[i] : -1;
  for (size_t i = 0; i < JAIL_MAX_VOLUMES; i++)
    src[CHILD_VOL - CHILD_SYNC + i] = i < a->nvol ? a->vol[i] : -1;
  *ctl = a->ctl;
  int tmp[CHILD_NFDS];
  for (int i = 0; i < CHILD_NFDS; i++)
    if ((tmp[i] = src[i] < 0 ? -1 : fcntl(src[i], F_DUPFD_CLOEXEC, 64)) < 0 && src[i] >= 0)
      return husk_error(err, errno, "cannot move the box's file descriptors");
  /* Above every fixed number: the moves below leave it alone. */
  *ctl = tmp[CHILD_CTL - CHILD_SYNC];
  for (int i = 0; i < CHILD_NFDS; i++) {
    if (tmp[i] < 0)
      close(CHILD_SYNC + i); /* absent: make sure nothing inherited sits there */
    else if (dup3(tmp[i], CHILD_SYNC + i, O_CLOEXEC) < 0)
      return husk_error(err, errno, "cannot move the box's file descriptors");
  }
  *ctl = CHILD_CTL;
  if (sys_close_range(CHILD_FIRST_FREE, ~0U, 0) < 0)
    return husk_error(err, errno, "cannot close the file descriptors inherited from the host");
  return 0;
}

static int loopback_up(struct husk_err *err) {
  cleanup_close int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    return husk_error(err, errno, "cannot bring up loopback");
  struct ifreq ifr = {0};
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
  if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
    return husk_error(err, errno, "cannot bring up loopback");
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
    return husk_error(err, errno, "cannot bring up loopback");
  return 0;
}

/* init is a copy of the husk process that made it: its command line and
 * environment (host paths, --env values, a daemon's arguments) are still in
 * its memory, and /proc/1/cmdline is readable by the box.  Overwrite both
 * areas; the process also gets a name of its own. */
static void wipe_cmdline(void) {
  unsigned long long v[52];
  if (proc_stat_fields(0, v, 52) < 0)
    return;
  /* fields 48..51: arg_start arg_end env_start env_end */
  static const char name[] = "husk-init";
  if (v[48] && v[49] > v[48]) {
    size_t len = (size_t)(v[49] - v[48]);
    memset((void *)(uintptr_t)v[48], 0, len);
    if (len > sizeof name)
      memcpy((void *)(uintptr_t)v[48], name, sizeof name);
  }
  if (v[50] && v[51] > v[50])
    memset((void *)(uintptr_t)v[50], 0, (size_t)(v[51] - v[50]));
  prctl(PR_SET_NAME, name, 0, 0, 0);
}

/* The child's story once the host has released it (`go`): enter the
 * cgroup, become root of the user namespace, build the root, drop every
 * privilege, Landlock, seccomp.  Returns 0, ready to become init. */
static int child_setup(const struct child_args *args, char go, struct husk_err *err) {
  /* Move ourselves into the box cgroup before anything else runs here. */
  for (size_t i = 0; i < args->nattach; i++) {
    int fd = CHILD_ATTACH + (int)i;
    bool v2 = (int)i == args->attach_v2;
    if ((!v2 || go == SYNC_GO_ATTACH_V2) && write(fd, "0", 1) != 1)
      return husk_error(err, errno, "cannot enter the box cgroup");
    close(fd);
  }

  /* Become root of the new user namespace (mapped to the slot's base uid). */
  if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
    return husk_error(err, errno, "cannot become root in the box's user namespace");
  /* Now that we are in the box's cgroup, make it the cgroup root we see. */
  if (unshare(CLONE_NEWCGROUP) < 0)
    return husk_error(err, errno, "cannot create cgroup namespace");

  struct rootfs_mounts m = {.workspace = CHILD_WS, .tmp = CHILD_TMP, .shm = CHILD_SHM,
                            .dev = args->dev >= 0 ? CHILD_DEV : -1,
                            .root_writable = args->root_writable};
  if (rootfs_enter(&m, args->prepared_root, err) < 0)
    return husk_error_wrap(err, "cannot build the box root");
  close(CHILD_WS);
  close(CHILD_TMP);
  close(CHILD_SHM);
  close(CHILD_DEV); /* absent or attached: nothing to keep either way */
  /* The volumes, on their mount points under the /workspace just
   * attached (the host made them, refusing anything but directories, and
   * nothing of the box has run yet to change that). */
  for (size_t i = 0; i < args->nvol; i++) {
    char at[300];
    snprintf(at, sizeof at, "/workspace/%s", args->vol_path[i]);
    if (move_mount(CHILD_VOL + (int)i, "", AT_FDCWD, at, MOVE_MOUNT_F_EMPTY_PATH) < 0)
      return husk_error(err, errno, "cannot mount a volume on `%s`", at);
    close(CHILD_VOL + (int)i);
  }

  if (sethostname(HUSK_BOX_HOSTNAME, strlen(HUSK_BOX_HOSTNAME)) < 0)
    return husk_error(err, errno, "cannot set the box's hostname (sethostname)");
  if (loopback_up(err) < 0)
    return -1;

  /* init holds no host file: stdio becomes /dev/null of the box. */
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
    return husk_error(err, errno, "cannot open /dev/null in the box");
  if (null > 2)
    close(null);
  if (setsid() < 0)
    return husk_error(err, errno, "cannot start a session for init (setsid)");

  if (privs_set_rlimits(err) < 0)
    return -1;
  wipe_cmdline();
  if (privs_drop_for_init(err) < 0)
    return husk_error_wrap(err, "cannot drop privileges");
  /* Not dumpable: box processes (same uid) cannot open /proc/1/mem, attach
   * to init, or read its environment. */
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
    return husk_error(err, errno, "cannot make init not dumpable (PR_SET_DUMPABLE)");
  if (landlock_apply_box(args->landlock_abi, args->root_writable, err) < 0)
    return husk_error_wrap(err, "cannot apply Landlock");
  /* Seccomp last: everything above needed syscalls the box may not make. */
  return seccomp_policy_apply(args->seccomp, err);
}

static _Noreturn void child_main(const struct child_args *args) {
  struct husk_err err;
  if (args->die_with_parent && prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
    husk_error(&err, errno, "cannot tie the box to the life of its creator (PR_SET_PDEATHSIG)");
    ctl_setup_error_exit(args->ctl, &err);
  }
  int ctl;
  if (child_fds(args, &ctl, &err) < 0)
    ctl_setup_error_exit(ctl, &err);
  /* Wait until the host has written our id maps and cgroups.  EOF means the
   * host died before that: nobody is left to tell, stop here. */
  char go;
  ssize_t n;
  do
    n = read(CHILD_SYNC, &go, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1)
    _exit(125);
  close(CHILD_SYNC);
  if (child_setup(args, go, &err) < 0)
    ctl_setup_error_exit(CHILD_CTL, &err);

  struct init_config ic = {.ctl = CHILD_CTL,
                           .landlock_abi = args->landlock_abi,
                           .listen = args->listen >= 0 ? CHILD_LISTEN : -1,
                           .fs = args->fs >= 0 ? CHILD_FS : -1,
                           .exit_on_hangup = args->die_with_parent,
                           .uid = args->uid,
                           .gid = args->gid,
                           .writable_root = args->root_writable};
  init_main(&ic);
}

/* ---- host side -------------------------------------------------------- */

static int write_id_maps(pid_t pid, uint32_t base, struct husk_err *err) {
  char path[64], map[64];
  snprintf(map, sizeof map, "0 %u %u\n", base, HUSK_UID_RANGE);
  const char *files[] = {"uid_map", "gid_map"};
  for (int i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, files[i]);
    cleanup_close int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write_all(fd, map, strlen(map)) < 0)
      return husk_error(err, errno, "cannot write %s of the box", files[i]);
  }
  return 0;
}

/* Boxes are disposable: under host memory pressure they go first, whatever
 * oom_score_adj husk itself runs with (-1000 under some service managers).
 * Written by the host, so the box cannot lower it again. */
static int set_oom_score(pid_t pid, struct husk_err *err) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/oom_score_adj", (int)pid);
  cleanup_close int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write_all(fd, HUSK_BOX_OOM_SCORE_ADJ, strlen(HUSK_BOX_OOM_SCORE_ADJ)) < 0) {
    if (errno == EACCES)
      return 0; /* husk runs above it already: lowering needs CAP_SYS_RESOURCE */
    return husk_error(err, errno, "cannot set oom_score_adj of the box");
  }
  return 0;
}

static pid_t clone_box(int cgroup_fd, int *pidfd, bool *into_cgroup, struct husk_err *err) {
  uint64_t ns = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
  struct clone_args ca = {.flags = ns | CLONE_PIDFD, .pidfd = (uint64_t)(uintptr_t)pidfd,
                          .exit_signal = SIGCHLD};
  if (cgroup_fd >= 0) {
    ca.flags |= CLONE_INTO_CGROUP;
    ca.cgroup = (uint64_t)cgroup_fd;
  }
  long pid = sys_clone3(&ca);
  if (pid >= 0) {
    *into_cgroup = cgroup_fd >= 0;
    return (pid_t)pid;
  }
  /* Fallback ladder: without CLONE_INTO_CGROUP (kernel < 5.7), then plain
   * clone (kernel < 5.3); the host attaches the cgroup before release. */
  if (cgroup_fd >= 0 && (errno == EINVAL || errno == E2BIG || errno == EOPNOTSUPP)) {
    ca.flags &= ~CLONE_INTO_CGROUP;
    ca.cgroup = 0;
    pid = sys_clone3(&ca);
    if (pid >= 0) {
      *into_cgroup = false;
      return (pid_t)pid;
    }
  }
  if (errno != ENOSYS)
    return husk_error(err, errno, "cannot create the box's namespaces");
  *into_cgroup = false;
  *pidfd = -1;
  pid = syscall(SYS_clone, (unsigned long)(ns | SIGCHLD), NULL, NULL, NULL, 0);
  if (pid < 0)
    return husk_error(err, errno, "cannot create the box's namespaces");
  if (pid > 0)
    *pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
  return (pid_t)pid;
}

int jail_recv(struct jail *j, union jail_event *ev, struct husk_err *err) {
  return jail_recv_fd(j->ctl, ev, err);
}

int jail_recv_fd(int fd, union jail_event *ev, struct husk_err *err) {
  size_t nfds = 0;
  ssize_t n = ctl_recv(fd, ev, sizeof *ev, NULL, &nfds, err);
  if (n == 0)
    return 0;
  if (n < 0)
    return husk_error_wrap(err, "cannot read from the box's init");
  size_t want = 0;
  switch (ev->h.type) {
  case CTL_READY: want = sizeof ev->h; break;
  case CTL_STARTED: want = sizeof ev->started; break;
  case CTL_EXITED: want = sizeof ev->exited; break;
  case CTL_SETUP_ERROR:
    want = sizeof ev->setup_error;
    ev->setup_error.text[sizeof ev->setup_error.text - 1] = '\0';
    break;
  default:
    return husk_fail(err, EPROTO, "unexpected message type %u from the box's init", ev->h.type);
  }
  if ((size_t)n != want)
    return husk_fail(err, EPROTO, "malformed message from the box's init");
  return 1;
}

static int wait_ready(struct jail *j, struct husk_err *err) {
  struct pollfd p = {.fd = j->ctl, .events = POLLIN};
  int r;
  do
    r = poll(&p, 1, 60 * 1000);
  while (r < 0 && errno == EINTR);
  if (r == 0)
    return husk_fail(err, ETIMEDOUT, "box setup did not finish within 60 s");
  union jail_event ev;
  int rc = jail_recv(j, &ev, err);
  if (rc < 0)
    return -1;
  if (rc == 0)
    return husk_fail(err, EIO, "box setup failed: init exited without a reason");
  if (ev.h.type == CTL_SETUP_ERROR)
    return husk_fail(err, ev.setup_error.error, "cannot set up the box: %s", ev.setup_error.text);
  if (ev.h.type != CTL_READY)
    return husk_fail(err, EPROTO, "unexpected first message from the box's init");
  return 0;
}

/* A jail being built: what its steps made is undone (jail_destroy) when
 * one fails, unless it was handed to the caller. */
static void cleanup_unfinished_jailp(struct jail **j) {
  if (*j) {
    struct husk_err ignored;
    jail_destroy(*j, true, NULL, &ignored);
  }
}
#define cleanup_unfinished_jail __attribute__((cleanup(cleanup_unfinished_jailp)))

/* An image box's root while it is mounted for the clone. */
struct image_view {
  const char *scratch;
  bool on;
};
static void image_view_drop(struct image_view *v) {
  struct husk_err ignored;
  if (v->on)
    rootfs_image_drop(v->scratch, &ignored);
  v->on = false;
}
#define cleanup_image_view __attribute__((cleanup(image_view_drop)))

int jail_create(struct jail *j, const struct jail_config *cfg, struct husk_err *err) {
  *j = (struct jail)JAIL_INIT;
  /* Until it is handed over at the end, a failed step undoes every one
   * before it: the fds held below are closed and a half-started child is
   * killed and reaped (cleanup_close, cleanup_pid), then the jail is
   * destroyed. */
  cleanup_unfinished_jail struct jail *unfinished = j;

  /* 1. */
  const struct seccomp_policy *policy;
  if (seccomp_policy_get(&policy, err) < 0)
    return husk_error_wrap(err, "cannot build the seccomp policy");
  j->landlock_abi = landlock_abi();

  /* 2. */
  if ((j->slot_lock = slot_claim(&j->slot, err)) < 0)
    return -1;
  j->uid_base = HUSK_UID_BASE + j->slot * HUSK_UID_RANGE;

  /* 3. */
  if (cgroup_create(&j->cg, cfg->name, &cfg->limits, err) < 0)
    return -1;

  /* 4. */
  uint32_t uid = cfg->user_set ? cfg->uid : HUSK_BOX_UID;
  uint32_t gid = cfg->user_set ? cfg->gid : HUSK_BOX_GID;
  cleanup_close_vec int mnts[4] = {-1, -1, -1, -1}; /* workspace, tmp, shm */
  cleanup_close int fsmnt = -1;
  if (make_fs(j, cfg->disk_bytes, uid, mnts, &fsmnt, err) < 0)
    return -1;
  if (cfg->fill_fs && cfg->fill_fs(cfg->fill_ctx, j->fs, j->uid_base, err) < 0)
    return -1;
  cleanup_close_vec int vols[JAIL_MAX_VOLUMES + 1] = {-1};
  if (make_volumes(j, cfg, uid, vols, err) < 0)
    return -1;
  /* An image box's root: its template's layers over a layer of its own on
   * the tmpfs just made, mounted here for the clone (the child's
   * namespace keeps a copy) and taken off right after it. */
  const char *prepared = cfg->prepared_root;
  char image_root[PATH_MAX];
  cleanup_image_view struct image_view view = {.scratch = cfg->image_scratch};
  if (cfg->image_nlayers) {
    struct rootfs_image im = {.nlayers = cfg->image_nlayers, .layers = cfg->image_layers,
                              .boxfs = fsmnt, .uid_base = j->uid_base, .owner = uid};
    if (rootfs_image_view(&im, cfg->image_scratch, image_root, sizeof image_root, err) < 0)
      return husk_error_wrap(err, "cannot build the box's root from its template");
    view.on = true;
    prepared = image_root;
  }
  /* A root built from scratch gets its /dev from here, where device
   * nodes can be made (a prepared root's view has its own already).  Where
   * they cannot (EPERM), the box binds the host's (rootfs.c). */
  cleanup_close int dev = -1;
  if (!prepared && (dev = rootfs_dev_make(err)) < 0 && err->code != EPERM)
    return husk_error_wrap(err, "cannot make the box's /dev");

  /* What the child takes along: its end of the control socket, the sync
   * pipe's read end, the files that move it into the cgroup, and for a
   * long-lived box the listening socket. */
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
    return husk_error(err, errno, "cannot create the box's control socket (socketpair)");
  cleanup_close int ctl_host = pair[0], ctl_box = pair[1];
  if (pipe2(pair, O_CLOEXEC) < 0)
    return husk_error(err, errno, "cannot create the box's sync pipe");
  cleanup_close int sync_box = pair[0], sync_host = pair[1];
  cleanup_close_vec int attach[CGROUP_MAX_ATTACH + 1] = {-1};
  int attach_v2;
  if (cgroup_self_attach_fds(&j->cg, attach, &attach_v2, err) < 0)
    return -1;
  cleanup_close int listener = -1;
  if (cfg->ctl_path && (listener = listen_ctl(cfg->ctl_path, err)) < 0)
    return -1;

  /* 5. */
  struct child_args args = {.sync = sync_box,
                            .ctl = ctl_box,
                            .slot = j->slot_lock,
                            .ws = mnts[0],
                            .tmp = mnts[1],
                            .shm = mnts[2],
                            .dev = dev,
                            .fs = cfg->ctl_path ? j->fs : -1,
                            .listen = listener,
                            .attach_v2 = attach_v2,
                            .die_with_parent = cfg->die_with_parent,
                            .landlock_abi = j->landlock_abi,
                            .seccomp = policy,
                            .prepared_root = prepared,
                            .root_writable = cfg->image_nlayers > 0,
                            .uid = uid,
                            .gid = gid};
  for (; attach[args.nattach] >= 0; args.nattach++)
    args.attach[args.nattach] = attach[args.nattach];
  for (; args.nvol < cfg->nvolumes; args.nvol++) {
    args.vol[args.nvol] = vols[args.nvol];
    args.vol_path[args.nvol] = cfg->volumes[args.nvol].path;
  }
  bool into_cgroup = false;
  cleanup_close int pidfd = -1;
  cleanup_pid pid_t pid = clone_box(j->cg.v2, &pidfd, &into_cgroup, err);
  if (pid < 0) {
    if (cfg->ctl_path)
      unlink(cfg->ctl_path); /* nobody will ever accept on it */
    return -1;
  }
  if (pid == 0)
    child_main(&args);
  image_view_drop(&view);
  /* The child has its own copies: the host's go now, so that the host
   * sees the control socket close as soon as the child is gone. */
  cleanup_closep(&ctl_box);
  cleanup_closep(&sync_box);
  cleanup_close_vecp(mnts);
  cleanup_closep(&dev);
  cleanup_close_vecp(attach);
  cleanup_close_vecp(vols);
  cleanup_closep(&listener);

  /* 6. */
  if (write_id_maps(pid, j->uid_base, err) < 0 || set_oom_score(pid, err) < 0)
    return -1;
  char go = into_cgroup ? SYNC_GO : SYNC_GO_ATTACH_V2;
  if (write_all(sync_host, &go, 1) < 0)
    return husk_error(err, errno, "cannot release the box's init");

  /* 7.  The jail owns the child from here: jail_destroy kills it if init
   * does not come up. */
  j->pid = take_pid(&pid);
  j->pidfd = take_fd(&pidfd);
  j->ctl = take_fd(&ctl_host);
  if (wait_ready(j, err) < 0)
    return -1;
  unfinished = NULL; /* the caller's */
  return 0;
}

int jail_exec(struct jail *j, uint64_t id, char *const argv[], char *const env[], const char *cwd,
              const int fds[3], struct husk_err *err) {
  return jail_exec_fd(j->ctl, id, argv, env, cwd, fds, CTL_EXEC_KILL_ON_HANGUP, err);
}

int jail_exec_fd(int sock, uint64_t id, char *const argv[], char *const env[], const char *cwd,
                 const int fds[3], uint32_t flags, struct husk_err *err) {
  return jail_exec_fds(sock, id, argv, env, cwd, fds, fds ? 3 : 0, flags, err);
}

int jail_exec_fds(int sock, uint64_t id, char *const argv[], char *const env[], const char *cwd,
                  const int *fds, size_t nfds, uint32_t flags, struct husk_err *err) {
  if (nfds != 0 && (nfds < 3 || nfds > CTL_EXEC_MAX_FDS))
    return husk_fail(err, EINVAL, "an exec carries 0 or 3 to %d fds", CTL_EXEC_MAX_FDS);
  cleanup_free char *buf = malloc(HUSK_CTL_MSG_MAX);
  if (!buf)
    return husk_error(err, ENOMEM, "exec request");
  ssize_t len = ctl_pack_exec(buf, HUSK_CTL_MSG_MAX, id, cwd, argv, env, nfds, NULL);
  if (len < 0)
    return husk_fail(err, E2BIG, "arguments and environment exceed %llu KiB",
                     (unsigned long long)(HUSK_CTL_MSG_MAX / 1024));
  ((struct ctl_exec *)(void *)buf)->flags = flags;
  if (ctl_send(sock, buf, (size_t)len, fds, nfds, err) < 0)
    return husk_error_wrap(err, "cannot send the exec request to the box");
  return 0;
}

int jail_hold_fds(int sock, uint64_t id, pid_t pid, const int *fds, size_t nfds,
                  struct husk_err *err) {
  if (nfds < 1 || nfds > CTL_HOLD_MAX_FDS)
    return husk_fail(err, EINVAL, "init holds 1 to %d fds for a process", CTL_HOLD_MAX_FDS);
  struct ctl_hold m = {.h = {.type = CTL_HOLD, .len = sizeof m}, .id = id, .pid = pid,
                       .nfds = (uint32_t)nfds};
  if (ctl_send(sock, &m, sizeof m, fds, nfds, err) < 0)
    return husk_error_wrap(err, "cannot hand the box's init a process's pipes");
  return 0;
}

int jail_get_held(int sock, uint64_t id, pid_t pid, int *fds, size_t nfds, struct husk_err *err) {
  struct ctl_hold m = {.h = {.type = CTL_GET_HELD, .len = sizeof m}, .id = id, .pid = pid};
  if (ctl_send(sock, &m, sizeof m, NULL, 0, err) < 0)
    return husk_error_wrap(err, "cannot ask the box's init for a process's pipes");
  struct ctl_hold r;
  int got[CTL_HOLD_MAX_FDS];
  size_t n = CTL_HOLD_MAX_FDS;
  for (;;) {
    ssize_t len = ctl_recv(sock, &r, sizeof r, got, &n, err);
    if (len <= 0)
      return len == 0 ? husk_fail(err, EIO, "the sandbox ended")
                      : husk_error_wrap(err, "cannot read from the box's init");
    if (r.h.type == CTL_HELD)
      break;
    /* An exit of this connection's process may come first: the caller
     * learns of it from the missing fds. */
    for (size_t i = 0; i < n; i++)
      close(got[i]);
    n = CTL_HOLD_MAX_FDS;
  }
  if ((size_t)r.h.len != sizeof r || r.id != id || r.pid != pid || r.nfds != n ||
      (n != 0 && n != nfds)) {
    for (size_t i = 0; i < n; i++)
      close(got[i]);
    return husk_fail(err, EPROTO, "malformed answer from the box's init");
  }
  if (n == 0)
    return husk_fail(err, ESRCH, "the process has ended");
  memcpy(fds, got, n * sizeof *fds);
  return 0;
}

int jail_signal(struct jail *j, pid_t pid, int sig, bool group, struct husk_err *err) {
  return jail_signal_fd(j->ctl, pid, sig, group, err);
}

int jail_signal_fd(int fd, pid_t pid, int sig, bool group, struct husk_err *err) {
  struct ctl_signal m = {.h = {.type = CTL_SIGNAL, .len = sizeof m}, .pid = pid, .sig = sig,
                         .group = group};
  if (ctl_send(fd, &m, sizeof m, NULL, 0, err) < 0)
    return husk_error_wrap(err, "cannot signal in the box");
  return 0;
}

int jail_watch(int fd, struct husk_err *err) {
  struct ctl_hdr m = {.type = CTL_WATCH, .len = sizeof m};
  if (ctl_send(fd, &m, sizeof m, NULL, 0, err) < 0)
    return husk_error_wrap(err, "cannot watch the box");
  return 0;
}

int jail_ack_exit(int fd, uint64_t id, pid_t pid, struct husk_err *err) {
  struct ctl_exit_ack m = {
      .h = {.type = CTL_EXIT_ACK, .len = sizeof m}, .id = id, .pid = pid};
  if (ctl_send(fd, &m, sizeof m, NULL, 0, err) < 0)
    return husk_error_wrap(err, "cannot acknowledge an exit to the box");
  return 0;
}

int jail_get_fs(int fd, uint32_t *version, struct husk_err *err) {
  /* An init that predates CTL_HELLO ignores it: the answer to CTL_GET_FS,
   * which is served after it, then comes first. */
  struct ctl_hdr hello = {.type = CTL_HELLO, .len = sizeof hello};
  struct ctl_hdr m = {.type = CTL_GET_FS, .len = sizeof m};
  if ((version && ctl_send(fd, &hello, sizeof hello, NULL, 0, err) < 0) ||
      ctl_send(fd, &m, sizeof m, NULL, 0, err) < 0)
    return husk_error_wrap(err, "cannot ask the box for its filesystem");
  union {
    struct ctl_hdr h;
    struct ctl_hello hello;
  } reply;
  cleanup_close int got = -1;
  size_t nfds = 1;
  ssize_t n = ctl_recv(fd, &reply, sizeof reply, &got, &nfds, NULL);
  if (version) {
    *version = 0;
    if (n == (ssize_t)sizeof reply.hello && reply.h.type == CTL_HELLO && nfds == 0) {
      *version = reply.hello.version;
      nfds = 1;
      n = ctl_recv(fd, &reply, sizeof reply, &got, &nfds, NULL);
    }
  }
  if (n != (ssize_t)sizeof reply.h || reply.h.type != CTL_FS || nfds != 1)
    return husk_fail(err, EPROTO, "the box did not hand over its filesystem");
  /* It comes from inside the box: accept only a directory on a tmpfs. */
  struct statfs sf;
  struct stat st;
  if (fstatfs(got, &sf) < 0 || sf.f_type != TMPFS_MAGIC || fstat(got, &st) < 0 ||
      !S_ISDIR(st.st_mode))
    return husk_fail(err, EPROTO, "the box handed over something that is not its filesystem");
  return take_fd(&got);
}

void jail_kill(struct jail *j) {
  if (j->pidfd >= 0)
    sys_pidfd_send_signal(j->pidfd, SIGKILL);
  else if (j->pid > 0)
    kill(j->pid, SIGKILL);
  if (j->cg.name[0])
    cgroup_kill(&j->cg, NULL);
}

int jail_destroy(struct jail *j, bool close_fs, struct cgroup_stats *final, struct husk_err *err) {
  int rc = 0;
  if (j->pid > 0) {
    jail_kill(j);
    /* Reaping init returns only after the kernel has killed and reaped
     * every other process of its pid namespace. */
    int status;
    pid_t r;
    while ((r = waitpid(j->pid, &status, __WALL)) < 0 && errno == EINTR)
      ;
    if (r < 0 && errno == ECHILD && j->pidfd >= 0) {
      /* Not our child (adopted after a daemon restart): its exit shows on
       * the pidfd, after the kernel emptied its pid namespace. */
      struct pollfd p = {.fd = j->pidfd, .events = POLLIN};
      while (poll(&p, 1, 10000) < 0 && errno == EINTR)
        ;
    }
    j->pid = -1;
  }
  close_quiet(j->pidfd);
  j->pidfd = -1;
  close_quiet(j->ctl);
  j->ctl = -1;
  if (j->cg.name[0]) {
    if (final)
      cgroup_stats(&j->cg, final);
    if (cgroup_populated(&j->cg))
      cgroup_kill(&j->cg, NULL);
    if (cgroup_destroy(&j->cg, err) < 0)
      rc = -1;
  }
  close_quiet(j->slot_lock);
  j->slot_lock = -1;
  if (close_fs) {
    close_quiet(j->fs);
    j->fs = -1;
  }
  return rc;
}
