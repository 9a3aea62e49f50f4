/* Building the box's root filesystem.  The sequence, top to bottom:
 *
 *   1. Make every inherited mount private, so nothing we do propagates to
 *      the host and nothing the host does propagates in.
 *   2. Mount a small tmpfs as the staging root (on /tmp, as bubblewrap does:
 *      in our own mount namespace this hides nothing from the host).
 *      Steps 2 to 4 and the first half of 7 are the same for every box: a
 *      long-lived creator (the daemon's spawner) does them once, read-only,
 *      with rootfs_prepare(), and each box binds that instead.
 *   3. Show the host's /usr read-only, nosuid, nodev, and mirror the
 *      host's /bin, /lib* links (or show those directories on hosts
 *      without merged /usr).
 *   4. Generate /etc: passwd, group, hosts, hostname, nsswitch.conf,
 *      resolv.conf; mirror the few host entries common tools need that
 *      hold no secrets (CA certificates, fonts config, alternatives links,
 *      the dynamic linker cache, MIME and protocol tables).
 *   A host directory is shown through a read-only overlayfs of its own
 *   (lower layers only), a host file is copied, never bound: a bind shares
 *   the host's inodes, and inotify watches are on inodes, so a box
 *   watching /usr/bin through a bind would see every program the host and
 *   the other boxes run.  An overlay mount has inodes of its own: its
 *   watches see only what is done through it.  A prepared root is shown
 *   to each box through such an overlay too (rootfs_instance).
 *   5. Attach the writable tmpfs parts prepared by the host: /workspace,
 *      /tmp, /dev/shm (one size- and inode-limited filesystem).
 *   6. A fresh /proc for the new pid namespace, with kernel-information
 *      files masked and kernel knobs read-only.
 *   7. A minimal /dev: a tiny tmpfs of the box's own with six device
 *      nodes made for it and links (rootfs_dev_make; by the spawner for a
 *      prepared root, by the host side for a root built from scratch).
 *      Only where nodes cannot be made (EPERM), binds of the host's six
 *      devices on a directory of the root, which share the host's inodes.
 *      Then the box's own devpts instance and /dev/shm.
 *   8. pivot_root into the staging root, detach the old root, and make the
 *      staging root itself read-only. */
#define _GNU_SOURCE
#include "jail/rootfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "jail/limits.h"
#include "jail/syscalls.h"
#include "util/cleanup.h"
#include "util/fileio.h"

#define NR "/tmp" /* staging root of a box built from scratch, before pivot_root */

/* The error of set_attrs: which flags could not be added to which mount. */
static int attrs_error(const char *path, unsigned attrs, struct husk_err *err) {
  return husk_error(
      err, errno, "cannot make `%s`%s%s%s%s", path, attrs & MOUNT_ATTR_RDONLY ? " read-only" : "",
      attrs & MOUNT_ATTR_NOSUID ? " nosuid" : "", attrs & MOUNT_ATTR_NODEV ? " nodev" : "",
      attrs & MOUNT_ATTR_NOEXEC ? " noexec" : "");
}

/* Add flags to one mount (or a whole tree with `recursive`) without having
 * to restate the flags the kernel locked on it. */
static int set_attrs(const char *path, unsigned attrs, bool recursive, struct husk_err *err) {
  struct mount_attr a = {.attr_set = attrs};
  if (mount_setattr(AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &a, sizeof a) == 0)
    return 0;
  /* Kernel < 5.12: remount the top mount, restating its current flags. */
  struct statvfs sv;
  if (errno != ENOSYS || statvfs(path, &sv) < 0)
    return attrs_error(path, attrs, err);
  unsigned long fl = MS_REMOUNT | MS_BIND;
  if (sv.f_flag & ST_NOSUID || attrs & MOUNT_ATTR_NOSUID) fl |= MS_NOSUID;
  if (sv.f_flag & ST_NODEV || attrs & MOUNT_ATTR_NODEV) fl |= MS_NODEV;
  if (sv.f_flag & ST_NOEXEC || attrs & MOUNT_ATTR_NOEXEC) fl |= MS_NOEXEC;
  if (sv.f_flag & ST_RDONLY || attrs & MOUNT_ATTR_RDONLY) fl |= MS_RDONLY;
  if (sv.f_flag & ST_NOATIME) fl |= MS_NOATIME;
  if (sv.f_flag & ST_NODIRATIME) fl |= MS_NODIRATIME;
  if (sv.f_flag & ST_RELATIME) fl |= MS_RELATIME;
  if (mount(NULL, path, NULL, fl, NULL) < 0)
    return attrs_error(path, attrs, err);
  return 0;
}

/* A new file `/path` of the root (`path` relative to its top) holding
 * `content`. */
static int write_new(const char *path, const char *content, mode_t mode, struct husk_err *err) {
  cleanup_close int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0 || write_all(fd, content, strlen(content)) < 0)
    return husk_error(err, errno, "cannot create `/%s`", path);
  return 0;
}

/* The host entries a prepared root mirrors, as they were when it was
 * prepared (rootfs_prepare, in the one single-threaded spawner).  A
 * package update replaces files by renaming new ones over them, and a bind
 * keeps showing the old file: rootfs_prepared_current() notices. */
static struct mirrored {
  char path[64];
  bool present;
  dev_t dev;
  ino_t ino;
  off_t size;             /* of a copied file: an edit in place changes these */
  struct timespec mtime;
} mirrored[48];
static size_t nmirrored;
static bool recording;

/* The host directories a root shows through overlays of their own, and
 * where (relative to the root).  Filled by build_base(); those of a
 * prepared root are mounted for each box by rootfs_instance(). */
static struct layer {
  char host[64];
  char dst[64];
} layers[HUSK_ROOT_LAYERS_MAX];
static size_t nlayers;

/* ENOSPC when the entry cannot be tracked: a prepared root whose
 * freshness cannot be checked is not made. */
static int remember(const char *host, const struct stat *st, struct husk_err *err) {
  if (!recording)
    return 0;
  if (nmirrored == sizeof mirrored / sizeof mirrored[0] || strlen(host) >= sizeof mirrored[0].path)
    return husk_error(err, ENOSPC, "cannot track `%s` for changes", host);
  struct mirrored *m = &mirrored[nmirrored++];
  snprintf(m->path, sizeof m->path, "%s", host);
  m->present = st != NULL;
  m->dev = st ? st->st_dev : 0;
  m->ino = st ? st->st_ino : 0;
  m->size = st && S_ISREG(st->st_mode) ? st->st_size : 0;
  m->mtime = st && S_ISREG(st->st_mode) ? st->st_mtim : (struct timespec){0};
  return 0;
}

bool rootfs_prepared_current(void) {
  for (size_t i = 0; i < nmirrored; i++) {
    struct stat st;
    bool present = lstat(mirrored[i].path, &st) == 0;
    if (present != mirrored[i].present)
      return false;
    if (!present)
      continue;
    bool reg = S_ISREG(st.st_mode);
    if (st.st_dev != mirrored[i].dev || st.st_ino != mirrored[i].ino ||
        (reg ? st.st_size : 0) != mirrored[i].size ||
        (reg ? st.st_mtim.tv_sec : 0) != mirrored[i].mtime.tv_sec ||
        (reg ? st.st_mtim.tv_nsec : 0) != mirrored[i].mtime.tv_nsec)
      return false;
  }
  return true;
}

static int add_layer(const char *host, const char *dst, struct husk_err *err) {
  if (nlayers == sizeof layers / sizeof layers[0] || strlen(host) >= sizeof layers[0].host ||
      strlen(dst) >= sizeof layers[0].dst)
    return husk_error(err, ENOSPC, "cannot show `%s`", host);
  snprintf(layers[nlayers].host, sizeof layers[0].host, "%s", host);
  snprintf(layers[nlayers].dst, sizeof layers[0].dst, "%s", dst);
  nlayers++;
  return 0;
}

/* A copy of the host file `host` (as `st` found it) at `dst`: files of
 * package data, small (HUSK_ROOT_COPY_MAX), read by the box. */
static int copy_file(const char *host, const char *dst, const struct stat *st,
                     struct husk_err *err) {
  if (st->st_size > HUSK_ROOT_COPY_MAX)
    return husk_error(err, EFBIG, "cannot copy `%s`", host);
  cleanup_close int in = open(host, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  struct stat now;
  if (in < 0 || fstat(in, &now) < 0)
    return husk_error(err, errno, "cannot copy `%s`", host);
  if (!S_ISREG(now.st_mode) || now.st_dev != st->st_dev || now.st_ino != st->st_ino)
    /* replaced since it was looked at: the next check sees it */
    return husk_error(err, ESTALE, "cannot copy `%s`", host);
  cleanup_close int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (out < 0)
    return husk_error(err, errno, "cannot copy `%s`", host);
  char buf[16384];
  off_t total = 0;
  for (;;) {
    ssize_t n = read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return husk_error(err, errno, "cannot copy `%s`", host);
    if (n == 0)
      return 0;
    if ((total += n) > HUSK_ROOT_COPY_MAX)
      return husk_error(err, EFBIG, "cannot copy `%s`", host); /* grew while read */
    if (write_all(out, buf, (size_t)n) < 0)
      return husk_error(err, errno, "cannot copy `%s`", host);
  }
}

/* Overlayfs options are a comma-separated list and lowerdir a
 * colon-separated one: a path with either (or a backslash) is refused
 * rather than escaped. */
static bool overlay_safe(const char *path) {
  return !strpbrk(path, ":,\\");
}

/* A detached read-only overlay of the directory `lower` (its own mount
 * only, not what is mounted below it), nosuid, nodev.  Without an upper
 * layer overlayfs wants two lower ones: the second is `empty`, an empty
 * directory outside `lower` (layers may not overlap).  Returns the
 * mount's fd. */
static int overlay_ro(const char *lower, const char *empty, struct husk_err *err) {
  if (!overlay_safe(lower) || !overlay_safe(empty))
    return husk_fail(err, EINVAL, "cannot overlay `%s`: a layer's path holds `:`, `,` or `\\`",
                     lower);
  char opt[2 * PATH_MAX + 2];
  if (snprintf(opt, sizeof opt, "%s:%s", lower, empty) >= (int)sizeof opt)
    return husk_error(err, ENAMETOOLONG, "cannot overlay `%s`", lower);
  cleanup_close int fs = fsopen("overlay", FSOPEN_CLOEXEC);
  if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", opt, 0) < 0 ||
      fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
    return husk_error(err, errno, "cannot overlay `%s`", lower);
  int mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  if (mnt < 0)
    return husk_error(err, errno, "cannot mount the overlay of `%s`", lower);
  return mnt;
}

/* Mirror a host entry into the staging root: a symlink is recreated as the
 * same symlink, a directory or file is bound read-only.  Absent: skipped. */
static int mirror(const char *host, const char *dst, struct husk_err *err) {
  struct stat st;
  if (lstat(host, &st) < 0) {
    if (errno != ENOENT)
      return husk_error(err, errno, "cannot stat `%s`", host);
    return remember(host, NULL, err);
  }
  if (remember(host, &st, err) < 0)
    return -1;
  if (S_ISLNK(st.st_mode)) {
    char target[PATH_MAX];
    ssize_t n = readlink(host, target, sizeof target - 1);
    if (n < 0)
      return husk_error(err, errno, "cannot read the link `%s`", host);
    target[n] = '\0';
    if (symlink(target, dst) < 0)
      return husk_error(err, errno, "cannot create the link `/%s`", dst);
    return 0;
  }
  if (S_ISDIR(st.st_mode)) {
    if (mkdir(dst, 0755) < 0)
      return husk_error(err, errno, "cannot create the mount point `/%s`", dst);
    return add_layer(host, dst, err);
  }
  if (S_ISREG(st.st_mode))
    return copy_file(host, dst, &st, err);
  return 0;
}

static int mkdirs(const char *const *dirs, mode_t mode, struct husk_err *err) {
  for (size_t i = 0; dirs[i]; i++)
    if (mkdir(dirs[i], mode) < 0 && errno != EEXIST)
      return husk_error(err, errno, "cannot create `/%s`", dirs[i]);
  return 0;
}

static int build_etc(struct husk_err *err) {
  char passwd[512], group[256];
  snprintf(passwd, sizeof passwd,
           "root:x:0:0:root:/root:/bin/sh\n"
           "user:x:%d:%d:box user:/workspace:/bin/bash\n"
           "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
           HUSK_BOX_UID, HUSK_BOX_GID);
  snprintf(group, sizeof group, "root:x:0:\ntty:x:5:\nuser:x:%d:\nnogroup:x:65534:\n", HUSK_BOX_GID);
  const struct {
    const char *name;
    const char *content;
  } gen[] = {
      {"etc/passwd", passwd},
      {"etc/group", group},
      {"etc/hosts", "127.0.0.1\tlocalhost " HUSK_BOX_HOSTNAME "\n::1\tlocalhost ip6-localhost\n"},
      {"etc/hostname", HUSK_BOX_HOSTNAME "\n"},
      {"etc/nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
                                "networks: files\nprotocols: files\nservices: files\n"},
      /* Mode none: this address is unreachable (no route), lookups fail at
       * once.  Mode egress: UDP 53 leaving the box is redirected to husk's
       * DNS stub, which answers only names the policy allows
       * (src/egress/link.h, EGRESS_DNS_VIRTUAL). */
      {"etc/resolv.conf", "# husk: DNS answers only names the box's egress policy allows\n"
                              "nameserver 169.254.0.53\noptions timeout:2 attempts:1\n"},
  };
  for (size_t i = 0; i < sizeof gen / sizeof gen[0]; i++)
    if (write_new(gen[i].name, gen[i].content, 0644, err) < 0)
      return -1;
  /* Host entries that hold package data, not host secrets. */
  static const char *const from_host[] = {
      "ssl", "ca-certificates.conf", "fonts", "alternatives", "ld.so.cache", "localtime",
      "mime.types", "protocols", "services", "magic", "magic.mime", "matplotlibrc",
      "python3", "python3.11", "ImageMagick-6", NULL};
  for (size_t i = 0; from_host[i]; i++) {
    char src[128], dst[128];
    snprintf(src, sizeof src, "/etc/%s", from_host[i]);
    snprintf(dst, sizeof dst, "etc/%s", from_host[i]);
    if (!strcmp(from_host[i], "ssl")) {
      /* Only the certificates, never /etc/ssl/private. */
      if (mkdir(dst, 0755) < 0)
        return husk_error(err, errno, "cannot create `/%s`", dst);
      if (mirror("/etc/ssl/certs", "etc/ssl/certs", err) < 0)
        return -1;
      continue;
    }
    if (mirror(src, dst, err) < 0)
      return -1;
  }
  return 0;
}

static int build_proc(struct husk_err *err) {
  if (mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    return husk_error(err, errno, "cannot mount proc on `/proc`");
  /* Files that leak kernel or host information: covered with the box's
   * /dev/null (its own node in a box of a prepared root), not the host's:
   * a watch on them would otherwise see the host's /dev/null. */
  static const char *const masked_files[] = {
      "kcore", "keys", "key-users", "timer_list", "timer_stats", "sched_debug", "latency_stats",
      "kallsyms", "kmsg", "kpagecount", "kpageflags", "kpagecgroup", "vmallocinfo", "slabinfo",
      "config.gz", "pagetypeinfo", "zoneinfo", NULL};
  for (size_t i = 0; masked_files[i]; i++) {
    char p[128];
    snprintf(p, sizeof p, "proc/%s", masked_files[i]);
    /* Absent on this kernel: nothing to mask. */
    if (mount("dev/null", p, NULL, MS_BIND, NULL) < 0 && errno != ENOENT)
      return husk_error(err, errno, "cannot mask `/proc/%s`", masked_files[i]);
  }
  /* Directories of hardware and driver details: an empty read-only tmpfs. */
  static const char *const masked_dirs[] = {"acpi", "scsi", "asound", "driver", "dynamic_debug",
                                            NULL};
  for (size_t i = 0; masked_dirs[i]; i++) {
    char p[128];
    snprintf(p, sizeof p, "proc/%s", masked_dirs[i]);
    if (mount("tmpfs", p, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0,nr_inodes=1") < 0 &&
        errno != ENOENT)
      return husk_error(err, errno, "cannot mask `/proc/%s`", masked_dirs[i]);
  }
  /* Kernel knobs: readable (tools read them) but never writable. */
  static const char *const readonly[] = {"sys", "sysrq-trigger", "irq", "bus", "fs", NULL};
  for (size_t i = 0; readonly[i]; i++) {
    char p[128];
    snprintf(p, sizeof p, "proc/%s", readonly[i]);
    if (mount(p, p, NULL, MS_BIND | MS_REC, NULL) < 0) {
      if (errno == ENOENT)
        continue;
      return husk_error(err, errno, "cannot bind `/proc/%s` onto itself", readonly[i]);
    }
    if (set_attrs(p, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                  true, err) < 0)
      return -1;
  }
  return 0;
}

static const char *const devices[] = {"null", "zero", "full", "random", "urandom", "tty", NULL};

/* What /dev holds besides the devices, in the directory `dev`: the mount
 * points of the box's own devpts and /dev/shm, the usual links. */
static int dev_rest(int dev, struct husk_err *err) {
  static const char *const dirs[] = {"pts", "shm", NULL};
  for (size_t i = 0; dirs[i]; i++)
    if (mkdirat(dev, dirs[i], 0755) < 0)
      return husk_error(err, errno, "cannot create `/dev/%s`", dirs[i]);
  static const struct {
    const char *target, *link;
  } links[] = {{"pts/ptmx", "ptmx"},     {"/proc/self/fd", "fd"},
               {"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"},
               {"/proc/self/fd/2", "stderr"}};
  for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
    if (symlinkat(links[i].target, dev, links[i].link) < 0)
      return husk_error(err, errno, "cannot create the link `/dev/%s`", links[i].link);
  return 0;
}

/* The part of /dev every box has: the mount points of six devices (bound
 * from the host's by a root built from scratch; a box of a prepared root
 * gets its own /dev over this one, dev_instance) and dev_rest.  A
 * directory of the root (read-only with it), not a filesystem of its own. */
static int build_dev(struct husk_err *err) {
  for (size_t i = 0; devices[i]; i++) {
    char dst[64];
    snprintf(dst, sizeof dst, "dev/%s", devices[i]);
    if (write_new(dst, "", 0666, err) < 0)
      return -1;
  }
  cleanup_close int dev = open("dev", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dev < 0)
    return husk_error(err, errno, "cannot open `/dev`");
  return dev_rest(dev, err);
}

/* A box's own /dev: a tiny tmpfs with the six devices made anew (mknod,
 * with the host's device numbers and modes) and dev_rest, read-only,
 * nosuid, noexec.  Its device nodes are inodes of this box alone, so an
 * inotify watch on /dev/null in the box sees only the box's own opens and
 * writes, not the host's or another box's (a bind of the host's node
 * would share its inode).  Works for a creator that is root in the
 * initial user namespace: the tmpfs then belongs to that namespace, where
 * device nodes work.  Elsewhere mknod fails with EPERM.  The box cannot
 * add a node: mknod needs CAP_MKNOD in the initial user namespace, the
 * filesystem is read-only and its root directory belongs to a user the
 * box does not map. */
int rootfs_dev_make(struct husk_err *err) {
  cleanup_close int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
  if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "size", HUSK_BOX_DEV_SIZE, 0) < 0 ||
      fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", HUSK_BOX_DEV_INODES, 0) < 0 ||
      fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0 ||
      fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
    return husk_error(err, errno, "cannot create the tmpfs of the box's /dev");
  cleanup_close int mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
  if (mnt < 0)
    return husk_error(err, errno, "cannot mount the tmpfs of the box's /dev");
  for (size_t i = 0; devices[i]; i++) {
    char src[64];
    snprintf(src, sizeof src, "/dev/%s", devices[i]);
    struct stat st;
    if (stat(src, &st) < 0)
      return husk_error(err, errno, "cannot stat `%s`", src);
    if (!S_ISCHR(st.st_mode))
      return husk_fail(err, ENODEV, "`%s` is not a character device", src);
    /* The umask does not apply: the mode is set again after. */
    if (mknodat(mnt, devices[i], S_IFCHR | 0600, st.st_rdev) < 0 ||
        fchmodat(mnt, devices[i], st.st_mode & 0777, 0) < 0 ||
        fchownat(mnt, devices[i], st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
      return husk_error(err, errno, "cannot create the box's `%s`", src);
  }
  if (dev_rest(mnt, err) < 0)
    return -1;
  struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
  if (mount_setattr(mnt, "", AT_EMPTY_PATH, &ro, sizeof ro) < 0)
    return husk_error(err, errno, "cannot make the box's /dev read-only");
  return take_fd(&mnt);
}

/* The devices of the root at `root`: `dev` (a rootfs_dev_make() mount, or
 * -1 to make one here) mounted on its /dev.  Where device nodes cannot be
 * made (EPERM: not root in the initial user namespace, as in a box's own
 * namespace when the host side could not make them either), binds of the
 * host's six devices on the mount points build_dev left: they work, but
 * share the host's inodes. */
static int attach_devices(const char *root, int dev, struct husk_err *err) {
  char path[PATH_MAX];
  cleanup_close int own = dev < 0 ? rootfs_dev_make(err) : -1;
  if (dev < 0 && own >= 0)
    dev = own;
  if (dev >= 0) {
    snprintf(path, sizeof path, "%s/dev", root);
    if (move_mount(dev, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
      return husk_error(err, errno, "cannot mount the box's /dev");
    return 0;
  }
  if (err->code != EPERM)
    return -1;
  for (size_t i = 0; devices[i]; i++) {
    char src[64];
    snprintf(src, sizeof src, "/dev/%s", devices[i]);
    snprintf(path, sizeof path, "%s/dev/%s", root, devices[i]);
    if (mount(src, path, NULL, MS_BIND, NULL) < 0)
      return husk_error(err, errno, "cannot bind `%s`", src);
    if (set_attrs(path, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false, err) < 0)
      return -1;
  }
  return 0;
}

/* What a root shows of the host, mounted into the root at `root`: each
 * layer (an overlay of a host directory) and the devices (attach_devices,
 * with `dev`).  With `lower`, first a read-only overlay of that directory becomes `root`
 * itself (*mounted then says so).  `empty`: an empty directory that no
 * overlay covers, the second lower layer of each overlay. */
static int attach_host(const char *root, const char *lower, const char *empty, int dev,
                       bool *mounted, struct husk_err *err) {
  /* Every overlay is made before the root one covers the paths. */
  cleanup_close_vec int fds[HUSK_ROOT_LAYERS_MAX + 1] = {-1};
  for (size_t i = 0; i < nlayers; i++) {
    fds[i + 1] = -1;
    if ((fds[i] = overlay_ro(layers[i].host, empty, err)) < 0)
      return -1;
  }
  if (lower) {
    cleanup_close int fd = overlay_ro(lower, empty, err);
    if (fd < 0)
      return husk_error_wrap(err, "cannot make the box's view of the prepared root");
    if (move_mount(fd, "", AT_FDCWD, root, MOVE_MOUNT_F_EMPTY_PATH) < 0)
      return husk_error(err, errno, "cannot mount the box's view of the prepared root on `%s`",
                        root);
    *mounted = true;
  }
  char path[PATH_MAX];
  for (size_t i = 0; i < nlayers; i++) {
    snprintf(path, sizeof path, "%s/%s", root, layers[i].dst);
    if (move_mount(fds[i], "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
      return husk_error(err, errno, "cannot mount `%s` on `/%s`", layers[i].host, layers[i].dst);
  }
  return attach_devices(root, dev, err);
}

/* The box's own part of /dev: a private devpts instance and its /dev/shm. */
static int attach_dev(int shm_fd, struct husk_err *err) {
  char opts[128];
  snprintf(opts, sizeof opts, "newinstance,ptmxmode=0666,mode=0620,max=%d", HUSK_DEVPTS_MAX);
  if (mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, opts) < 0)
    return husk_error(err, errno, "cannot mount devpts on `/dev/pts`");
  if (move_mount(shm_fd, "", AT_FDCWD, "dev/shm", MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return husk_error(err, errno, "cannot attach `/dev/shm`");
  return 0;
}

/* Steps 2 to 4 in the current directory, a fresh tmpfs: the part of the
 * root every box has in common.  What it shows of the host's directories
 * (and its devices) is only listed, in layers[]: attach_host() mounts it. */
static int build_base(struct husk_err *err) {
  nlayers = 0;
  static const char *const dirs[] = {"usr", "etc", "proc", "dev", "workspace", "tmp",
                                     "root", "var", "run", "home", NULL};
  if (mkdirs(dirs, 0755, err) < 0)
    return -1;
  if (symlink("/tmp", "var/tmp") < 0)
    return husk_error(err, errno, "cannot create the link `/var/tmp`");
  /* 3. */
  if (add_layer("/usr", "usr", err) < 0)
    return -1;
  static const char *const top[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32", NULL};
  for (size_t i = 0; top[i]; i++) {
    char src[32];
    snprintf(src, sizeof src, "/%s", top[i]);
    if (mirror(src, top[i], err) < 0)
      return -1;
  }
  /* 4. */
  if (build_etc(err) < 0)
    return -1;
  /* 7, the shared part. */
  return build_dev(err);
}

static int mount_staging(const char *dir, struct husk_err *err) {
  if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV,
            "mode=0755,size=" HUSK_STAGING_ROOT_SIZE ",nr_inodes=1024") < 0)
    return husk_error(err, errno, "cannot mount the staging root on `%s`", dir);
  return 0;
}

/* A prepared root's tmpfs holds the tree and, beside it, the empty
 * directory its overlays take as their second layer (overlayfs refuses a
 * layer inside another). */
#define PREPARED_TREE "root"
#define PREPARED_EMPTY "empty"

/* The tree of a prepared root, in `dir` (rootfs_prepare). */
static int prepare_tree(const char *dir, struct husk_err *err) {
  if (chdir(dir) < 0)
    return husk_error(err, errno, "cannot change to `%s`", dir);
  if (mkdir(PREPARED_TREE, 0755) < 0 || mkdir(PREPARED_EMPTY, 0755) < 0 || chdir(PREPARED_TREE) < 0)
    return husk_error(err, errno, "cannot create the prepared root's directories");
  if (build_base(err) < 0)
    return -1;
  return set_attrs(dir, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false, err);
}

int rootfs_prepare(const char *dir, struct husk_err *err) {
  cleanup_close int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (cwd < 0)
    return husk_error(err, errno, "cannot open the current directory");
  if (mount_staging(dir, err) < 0)
    return -1;
  nmirrored = 0;
  recording = true;
  int rc = prepare_tree(dir, err);
  recording = false;
  if (fchdir(cwd) < 0 && rc == 0)
    rc = husk_error(err, errno, "cannot return to the previous directory");
  if (rc < 0)
    umount2(dir, MNT_DETACH); /* what was built goes with it */
  return rc;
}

int rootfs_instance(const char *dir, char *at, size_t at_len, struct husk_err *err) {
  char empty[PATH_MAX];
  if (snprintf(empty, sizeof empty, "%s/" PREPARED_EMPTY, dir) >= (int)sizeof empty ||
      snprintf(at, at_len, "%s/" PREPARED_TREE, dir) >= (int)at_len)
    return husk_error(err, ENAMETOOLONG, "cannot use the prepared root `%s`", dir);
  bool mounted = false;
  int rc = attach_host(at, at, empty, -1, &mounted, err);
  if (rc < 0 && mounted)
    umount2(at, MNT_DETACH); /* the partly built view goes with it */
  return rc;
}

int rootfs_instance_drop(const char *at, struct husk_err *err) {
  if (umount2(at, MNT_DETACH) < 0)
    return husk_error(err, errno, "cannot take a box's view off the shared root (`%s`)", at);
  return 0;
}

int rootfs_enter(const struct rootfs_mounts *m, const char *prepared, struct husk_err *err) {
  /* 1. */
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    return husk_error(err, errno, "cannot make the mounts private");
  if (prepared) {
    /* 2-4, done once: this box's view of the prepared root
     * (rootfs_instance), bound onto itself.  Copied into
     * our namespace from a more privileged one, its mounts are locked
     * (read-only for good); pivot_root wants a root mount of our own,
     * which this bind is. */
    if (mount(prepared, prepared, NULL, MS_BIND | MS_REC, NULL) < 0)
      return husk_error(err, errno, "cannot bind the prepared root `%s`", prepared);
    if (chdir(prepared) < 0)
      return husk_error(err, errno, "cannot change to the prepared root `%s`", prepared);
  } else {
    /* 2. */
    if (mount_staging(NR, err) < 0)
      return -1;
    if (chdir(NR) < 0)
      return husk_error(err, errno, "cannot change to the staging root `%s`", NR);
    bool mounted = false;
    if (build_base(err) < 0 || attach_host(".", NULL, NR "/run", m->dev, &mounted, err) < 0)
      return -1;
  }
  /* 5. */
  if (move_mount(m->workspace, "", AT_FDCWD, "workspace", MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return husk_error(err, errno, "cannot attach `/workspace`");
  if (move_mount(m->tmp, "", AT_FDCWD, "tmp", MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return husk_error(err, errno, "cannot attach `/tmp`");
  /* 6. */
  if (build_proc(err) < 0)
    return -1;
  /* 7, the box's own part. */
  if (attach_dev(m->shm, err) < 0)
    return -1;
  /* 8. pivot_root(".", ".") stacks the old root on top of the new one;
   * detaching it leaves only the new root, with no path back. */
  if (sys_pivot_root(".", ".") < 0)
    return husk_error(err, errno, "cannot pivot_root into the box's root");
  if (umount2(".", MNT_DETACH) < 0)
    return husk_error(err, errno, "cannot detach the old root");
  if (chdir("/") < 0)
    return husk_error(err, errno, "cannot change to `/`");
  return set_attrs("/", (m->root_writable ? 0 : MOUNT_ATTR_RDONLY) | MOUNT_ATTR_NOSUID |
                            MOUNT_ATTR_NODEV,
                   false, err);
}
