/* Building the box's root filesystem.  The sequence, top to bottom:
 *
 *   1. Make every inherited mount private, so nothing we do propagates to
 *      the host and nothing the host does propagates in.
 *   2. Mount a small tmpfs as the staging root (on /tmp, as bubblewrap does:
 *      in our own mount namespace this hides nothing from the host).
 *      Steps 2 to 4 and the first half of 7 are the same for every box: a
 *      long-lived creator (the daemon's spawner) does them once, read-only,
 *      with rootfs_prepare(), and each box binds that instead.
 *   3. Bind the host's /usr read-only, nosuid, nodev (recursively), and
 *      mirror the host's /bin, /lib* links (or bind them on hosts without
 *      merged /usr).
 *   4. Generate /etc: passwd, group, hosts, hostname, nsswitch.conf,
 *      resolv.conf; bind the few host entries common tools need that hold
 *      no secrets (CA certificates, fonts config, alternatives links, the
 *      dynamic linker cache, MIME and protocol tables).
 *   5. Attach the writable tmpfs parts prepared by the host: /workspace,
 *      /tmp, /dev/shm (one size- and inode-limited filesystem).
 *   6. A fresh /proc for the new pid namespace, with kernel-information
 *      files masked and kernel knobs read-only.
 *   7. A minimal /dev, a directory of the root: six device binds and
 *      links; then the box's own devpts instance and /dev/shm.
 *   8. pivot_root into the staging root, detach the old root, and make the
 *      staging root itself read-only. */
#define _GNU_SOURCE
#include "jail/rootfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
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

__attribute__((format(printf, 4, 5))) static int fail(char *what, size_t len, int e,
                                                  const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, len, fmt, ap);
  va_end(ap);
  return -(e ? e : EIO);
}

/* Add flags to one mount (or a whole tree with `recursive`) without having
 * to restate the flags the kernel locked on it. */
static int set_attrs(const char *path, unsigned attrs, bool recursive) {
  struct mount_attr a = {.attr_set = attrs};
  if (mount_setattr(AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &a, sizeof a) == 0)
    return 0;
  if (errno != ENOSYS)
    return -errno;
  /* Kernel < 5.12: remount the top mount, restating its current flags. */
  struct statvfs sv;
  if (statvfs(path, &sv) < 0)
    return -errno;
  unsigned long fl = MS_REMOUNT | MS_BIND;
  if (sv.f_flag & ST_NOSUID || attrs & MOUNT_ATTR_NOSUID) fl |= MS_NOSUID;
  if (sv.f_flag & ST_NODEV || attrs & MOUNT_ATTR_NODEV) fl |= MS_NODEV;
  if (sv.f_flag & ST_NOEXEC || attrs & MOUNT_ATTR_NOEXEC) fl |= MS_NOEXEC;
  if (sv.f_flag & ST_RDONLY || attrs & MOUNT_ATTR_RDONLY) fl |= MS_RDONLY;
  if (sv.f_flag & ST_NOATIME) fl |= MS_NOATIME;
  if (sv.f_flag & ST_NODIRATIME) fl |= MS_NODIRATIME;
  if (sv.f_flag & ST_RELATIME) fl |= MS_RELATIME;
  return mount(NULL, path, NULL, fl, NULL) < 0 ? -errno : 0;
}

static int bind_ro(const char *src, const char *dst, bool recursive) {
  if (mount(src, dst, NULL, MS_BIND | (recursive ? MS_REC : 0), NULL) < 0)
    return -errno;
  return set_attrs(dst, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, recursive);
}

static int touch(const char *path, mode_t mode) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0)
    return -errno;
  close(fd);
  return 0;
}

static int write_new(const char *path, const char *content) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    return -errno;
  int rc = write_all(fd, content, strlen(content)) < 0 ? -errno : 0;
  close(fd);
  return rc;
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
} mirrored[48];
static size_t nmirrored;
static bool recording;

/* -ENOSPC when the entry cannot be tracked: a prepared root whose
 * freshness cannot be checked is not made. */
static int remember(const char *host, const struct stat *st) {
  if (!recording)
    return 0;
  if (nmirrored == sizeof mirrored / sizeof mirrored[0] || strlen(host) >= sizeof mirrored[0].path)
    return -ENOSPC;
  struct mirrored *m = &mirrored[nmirrored++];
  snprintf(m->path, sizeof m->path, "%s", host);
  m->present = st != NULL;
  m->dev = st ? st->st_dev : 0;
  m->ino = st ? st->st_ino : 0;
  return 0;
}

bool rootfs_prepared_current(void) {
  for (size_t i = 0; i < nmirrored; i++) {
    struct stat st;
    bool present = lstat(mirrored[i].path, &st) == 0;
    if (present != mirrored[i].present ||
        (present && (st.st_dev != mirrored[i].dev || st.st_ino != mirrored[i].ino)))
      return false;
  }
  return true;
}

/* Mirror a host entry into the staging root: a symlink is recreated as the
 * same symlink, a directory or file is bound read-only.  Absent: skipped. */
static int mirror(const char *host, const char *dst, char *what, size_t wl) {
  struct stat st;
  if (lstat(host, &st) < 0) {
    if (errno != ENOENT)
      return fail(what, wl, errno, "stat `%s`", host);
    return remember(host, NULL) < 0 ? fail(what, wl, ENOSPC, "track `%s`", host) : 0;
  }
  if (remember(host, &st) < 0)
    return fail(what, wl, ENOSPC, "track `%s`", host);
  if (S_ISLNK(st.st_mode)) {
    char target[PATH_MAX];
    ssize_t n = readlink(host, target, sizeof target - 1);
    if (n < 0)
      return fail(what, wl, errno, "readlink `%s`", host);
    target[n] = '\0';
    if (symlink(target, dst) < 0)
      return fail(what, wl, errno, "symlink `%s`", dst);
    return 0;
  }
  int rc;
  if (S_ISDIR(st.st_mode))
    rc = mkdir(dst, 0755) < 0 ? -errno : 0;
  else if (S_ISREG(st.st_mode))
    rc = touch(dst, 0644);
  else
    return 0;
  if (rc < 0)
    return fail(what, wl, -rc, "create mount point `%s`", dst);
  if ((rc = bind_ro(host, dst, S_ISDIR(st.st_mode))) < 0)
    return fail(what, wl, -rc, "bind `%s` read-only", host);
  return 0;
}

static int mkdirs(const char *const *dirs, mode_t mode, char *what, size_t wl) {
  for (size_t i = 0; dirs[i]; i++)
    if (mkdir(dirs[i], mode) < 0 && errno != EEXIST)
      return fail(what, wl, errno, "mkdir `%s`", dirs[i]);
  return 0;
}

static int build_etc(char *what, size_t wl) {
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
  for (size_t i = 0; i < sizeof gen / sizeof gen[0]; i++) {
    int rc = write_new(gen[i].name, gen[i].content);
    if (rc < 0)
      return fail(what, wl, -rc, "write `/%s`", gen[i].name);
  }
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
        return fail(what, wl, errno, "mkdir `%s`", dst);
      int rc = mirror("/etc/ssl/certs", "etc/ssl/certs", what, wl);
      if (rc < 0)
        return rc;
      continue;
    }
    int rc = mirror(src, dst, what, wl);
    if (rc < 0)
      return rc;
  }
  return 0;
}

static int build_proc(char *what, size_t wl) {
  int rc;
  if (mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    return fail(what, wl, errno, "mount proc");
  /* Files that leak kernel or host information: covered with /dev/null. */
  static const char *const masked_files[] = {
      "kcore", "keys", "key-users", "timer_list", "timer_stats", "sched_debug", "latency_stats",
      "kallsyms", "kmsg", "kpagecount", "kpageflags", "kpagecgroup", "vmallocinfo", "slabinfo",
      "config.gz", "pagetypeinfo", "zoneinfo", NULL};
  for (size_t i = 0; masked_files[i]; i++) {
    char p[128];
    snprintf(p, sizeof p, "proc/%s", masked_files[i]);
    /* Absent on this kernel: nothing to mask. */
    if (mount("/dev/null", p, NULL, MS_BIND, NULL) < 0 && errno != ENOENT)
      return fail(what, wl, errno, "mask /proc/%s", masked_files[i]);
  }
  /* Directories of hardware and driver details: an empty read-only tmpfs. */
  static const char *const masked_dirs[] = {"acpi", "scsi", "asound", "driver", "dynamic_debug",
                                            NULL};
  for (size_t i = 0; masked_dirs[i]; i++) {
    char p[128];
    snprintf(p, sizeof p, "proc/%s", masked_dirs[i]);
    if (mount("tmpfs", p, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0,nr_inodes=1") < 0 &&
        errno != ENOENT)
      return fail(what, wl, errno, "mask /proc/%s", masked_dirs[i]);
  }
  /* Kernel knobs: readable (tools read them) but never writable. */
  static const char *const readonly[] = {"sys", "sysrq-trigger", "irq", "bus", "fs", NULL};
  for (size_t i = 0; readonly[i]; i++) {
    char p[128];
    snprintf(p, sizeof p, "proc/%s", readonly[i]);
    if (mount(p, p, NULL, MS_BIND | MS_REC, NULL) < 0) {
      if (errno == ENOENT)
        continue;
      return fail(what, wl, errno, "bind /proc/%s", readonly[i]);
    }
    if ((rc = set_attrs(p, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                               MOUNT_ATTR_NOEXEC, true)) < 0)
      return fail(what, wl, -rc, "make /proc/%s read-only", readonly[i]);
  }
  return 0;
}

/* The part of /dev every box has: six device binds, the mount points of
 * its own devpts and /dev/shm, the usual links.  A directory of the root
 * (read-only with it), not a filesystem of its own. */
static int build_dev(char *what, size_t wl) {
  int rc;
  static const char *const devs[] = {"null", "zero", "full", "random", "urandom", "tty", NULL};
  for (size_t i = 0; devs[i]; i++) {
    char src[64], dst[64];
    snprintf(src, sizeof src, "/dev/%s", devs[i]);
    snprintf(dst, sizeof dst, "dev/%s", devs[i]);
    if ((rc = touch(dst, 0666)) < 0)
      return fail(what, wl, -rc, "create `%s`", dst);
    if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
      return fail(what, wl, errno, "bind `%s`", src);
    if ((rc = set_attrs(dst, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false)) < 0)
      return fail(what, wl, -rc, "restrict `%s`", src);
  }
  static const char *const dirs[] = {"dev/pts", "dev/shm", NULL};
  if ((rc = mkdirs(dirs, 0755, what, wl)) < 0)
    return rc;
  static const struct {
    const char *target, *link;
  } links[] = {{"pts/ptmx", "dev/ptmx"},     {"/proc/self/fd", "dev/fd"},
               {"/proc/self/fd/0", "dev/stdin"}, {"/proc/self/fd/1", "dev/stdout"},
               {"/proc/self/fd/2", "dev/stderr"}};
  for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
    if (symlink(links[i].target, links[i].link) < 0)
      return fail(what, wl, errno, "symlink `%s`", links[i].link);
  return 0;
}

/* The box's own part of /dev: a private devpts instance and its /dev/shm. */
static int attach_dev(int shm_fd, char *what, size_t wl) {
  char opts[128];
  snprintf(opts, sizeof opts, "newinstance,ptmxmode=0666,mode=0620,max=%d", HUSK_DEVPTS_MAX);
  if (mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, opts) < 0)
    return fail(what, wl, errno, "mount devpts");
  if (move_mount(shm_fd, "", AT_FDCWD, "dev/shm", MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return fail(what, wl, errno, "attach /dev/shm");
  return 0;
}

/* Steps 2 to 4 in the current directory, a fresh tmpfs: the part of the
 * root every box has in common. */
static int build_base(char *what, size_t wl) {
  int rc;
  static const char *const dirs[] = {"usr", "etc", "proc", "dev", "workspace", "tmp",
                                     "root", "var", "run", "home", NULL};
  if ((rc = mkdirs(dirs, 0755, what, wl)) < 0)
    return rc;
  if (symlink("/tmp", "var/tmp") < 0)
    return fail(what, wl, errno, "symlink /var/tmp");
  /* 3. */
  if ((rc = bind_ro("/usr", "usr", true)) < 0)
    return fail(what, wl, -rc, "bind /usr read-only");
  static const char *const top[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32", NULL};
  for (size_t i = 0; top[i]; i++) {
    char src[32];
    snprintf(src, sizeof src, "/%s", top[i]);
    if ((rc = mirror(src, top[i], what, wl)) < 0)
      return rc;
  }
  /* 4. */
  if ((rc = build_etc(what, wl)) < 0)
    return rc;
  /* 7, the shared part. */
  return build_dev(what, wl);
}

static int mount_staging(const char *dir, char *what, size_t wl) {
  if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV,
            "mode=0755,size=" HUSK_STAGING_ROOT_SIZE ",nr_inodes=1024") < 0)
    return fail(what, wl, errno, "mount staging root");
  return 0;
}

int rootfs_prepare(const char *dir, char *what, size_t wl) {
  int rc;
  cleanup_close int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (cwd < 0)
    return fail(what, wl, errno, "open the current directory");
  if ((rc = mount_staging(dir, what, wl)) < 0)
    return rc;
  nmirrored = 0;
  recording = true;
  if (chdir(dir) < 0)
    rc = fail(what, wl, errno, "chdir to `%s`", dir);
  else if ((rc = build_base(what, wl)) == 0 &&
           /* Not recursive: the binds keep their own flags (the device
            * binds must not become nodev). */
           (rc = set_attrs(".", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false)) < 0)
    rc = fail(what, wl, -rc, "make the prepared root read-only");
  recording = false;
  if (fchdir(cwd) < 0 && rc == 0)
    rc = fail(what, wl, errno, "return to the previous directory");
  if (rc < 0)
    umount2(dir, MNT_DETACH); /* what was built goes with it */
  return rc;
}

int rootfs_enter(const struct rootfs_mounts *m, const char *prepared, char *what, size_t wl) {
  int rc;
  /* 1. */
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    return fail(what, wl, errno, "make mounts private");
  if (prepared) {
    /* 2-4, done once: the prepared root, bound onto itself.  Copied into
     * our namespace from a more privileged one, its mounts are locked
     * (read-only for good); pivot_root wants a root mount of our own,
     * which this bind is. */
    if (mount(prepared, prepared, NULL, MS_BIND | MS_REC, NULL) < 0)
      return fail(what, wl, errno, "bind the prepared root");
    if (chdir(prepared) < 0)
      return fail(what, wl, errno, "chdir to the prepared root");
  } else {
    /* 2. */
    if ((rc = mount_staging(NR, what, wl)) < 0)
      return rc;
    if (chdir(NR) < 0)
      return fail(what, wl, errno, "chdir to staging root");
    if ((rc = build_base(what, wl)) < 0)
      return rc;
  }
  /* 5. */
  if (move_mount(m->workspace, "", AT_FDCWD, "workspace", MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return fail(what, wl, errno, "attach /workspace");
  if (move_mount(m->tmp, "", AT_FDCWD, "tmp", MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return fail(what, wl, errno, "attach /tmp");
  /* 6. */
  if ((rc = build_proc(what, wl)) < 0)
    return rc;
  /* 7, the box's own part. */
  if ((rc = attach_dev(m->shm, what, wl)) < 0)
    return rc;
  /* 8. pivot_root(".", ".") stacks the old root on top of the new one;
   * detaching it leaves only the new root, with no path back. */
  if (sys_pivot_root(".", ".") < 0)
    return fail(what, wl, errno, "pivot_root");
  if (umount2(".", MNT_DETACH) < 0)
    return fail(what, wl, errno, "detach old root");
  if (chdir("/") < 0)
    return fail(what, wl, errno, "chdir /");
  if ((rc = set_attrs("/", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false)) < 0)
    return fail(what, wl, -rc, "make root read-only");
  return 0;
}
