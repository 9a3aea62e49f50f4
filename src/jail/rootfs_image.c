/* The root of an image template's box (see rootfs_image.h).  In order:
 *
 *   1. A user namespace with the box's map (0 -> uid_base, 65536 ids),
 *      held by a child that waits: the idmap of the layers' mounts needs
 *      one, and the box's own does not exist yet.
 *   2. A private tmpfs on `scratch` for the mount points.
 *   3. Each layer cloned (open_tree), idmapped with that namespace, and
 *      attached at scratch/L<i>.  overlayfs takes idmapped lower layers
 *      (Linux 5.19) but is not idmappable itself, hence one idmap per
 *      layer.
 *   4. The box's writable layer: rootfs/upper and rootfs/work on its
 *      tmpfs, upper owned by the box's root.
 *   5. The overlay (lowerdir: the layers top first), nosuid, nodev, at
 *      scratch/root; then, written through it as the box's root would,
 *      the mount points husk's parts need and husk's three /etc files.
 * The layers' clones stay attached under scratch until rootfs_image_drop:
 * the overlay keeps private clones of them, and the box's namespace a copy
 * of the whole view. */
#define _GNU_SOURCE
#include "jail/rootfs_image.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/limits.h"
#include "jail/rootfs.h"
#include "jail/syscalls.h"
#include "util/cleanup.h"
#include "util/fileio.h"

#define ROOT_DIR "root"
#define RANGE 65536

/* 1.  Returns the namespace's fd. */
int rootfs_image_userns(uint32_t base, struct husk_err *err) {
  int go[2];
  if (pipe2(go, O_CLOEXEC) < 0)
    return husk_error(err, errno, "cannot make the idmap's user namespace");
  pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);
  if (pid < 0) {
    close(go[0]);
    close(go[1]);
    return husk_error(err, errno, "cannot make the idmap's user namespace");
  }
  if (pid == 0) {
    /* Waits until the parent has the namespace, then ends. */
    char c;
    close(go[1]);
    while (read(go[0], &c, 1) < 0 && errno == EINTR)
      ;
    _exit(0);
  }
  close(go[0]);
  int ns = -1;
  char path[64], map[64];
  snprintf(map, sizeof map, "0 %u %u\n", base, RANGE);
  snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
  bool ok = write_file_at(AT_FDCWD, path, map) == 0;
  snprintf(path, sizeof path, "/proc/%d/setgroups", (int)pid);
  ok = ok && write_file_at(AT_FDCWD, path, "deny") == 0;
  snprintf(path, sizeof path, "/proc/%d/gid_map", (int)pid);
  ok = ok && write_file_at(AT_FDCWD, path, map) == 0;
  snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
  if (ok)
    ns = open(path, O_RDONLY | O_CLOEXEC);
  int e = errno;
  close(go[1]); /* the child ends */
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
    ;
  if (ns < 0)
    return husk_error(err, e, "cannot map the idmap's user namespace");
  return ns;
}

/* 4.  mkdir (if missing) and open a directory of the box's tmpfs. */
static int box_dir(int at, const char *name, mode_t mode, uid_t uid, struct husk_err *err) {
  if (mkdirat(at, name, mode) < 0 && errno != EEXIST)
    return husk_error(err, errno, "cannot create the box's `%s`", name);
  int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || fchown(fd, uid, uid) < 0 || fchmod(fd, mode) < 0) {
    int e = errno;
    close_quiet(fd);
    return husk_error(err, e, "cannot prepare the box's `%s`", name);
  }
  return fd;
}

/* 5.  A directory the box's root needs (a mount point), made through the
 * overlay when the image lacks it. */
static int need_dir(int root, const char *name, uid_t uid, mode_t mode, struct husk_err *err) {
  struct stat st;
  if (fstatat(root, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISDIR(st.st_mode))
      return 0;
    return husk_fail(err, EINVAL, "the image's `/%s` is not a directory: a box needs one there",
                     name);
  }
  if (errno != ENOENT)
    return husk_error(err, errno, "cannot look at the image's `/%s`", name);
  if (mkdirat(root, name, mode) < 0 || fchownat(root, name, uid, uid, AT_SYMLINK_NOFOLLOW) < 0 ||
      fchmodat(root, name, mode, 0) < 0)
    return husk_error(err, errno, "cannot create `/%s` in the box's root", name);
  return 0;
}

/* 5.  husk's own /etc files, replacing the image's (its /etc/resolv.conf
 * is often a link to a resolver the box does not have). */
static int etc_file(int etc, const char *name, const char *content, uid_t uid,
                    struct husk_err *err) {
  if (unlinkat(etc, name, 0) < 0 && errno != ENOENT)
    return husk_error(err, errno, "cannot replace the image's `/etc/%s`", name);
  cleanup_close int fd =
      openat(etc, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0 || write_all(fd, content, strlen(content)) < 0 || fchown(fd, uid, uid) < 0)
    return husk_error(err, errno, "cannot write the box's `/etc/%s`", name);
  return 0;
}

static int husk_parts(int root, const struct rootfs_image *im, struct husk_err *err) {
  uid_t broot = im->uid_base, owner = im->uid_base + im->owner;
  if (need_dir(root, "proc", broot, 0555, err) < 0 || need_dir(root, "dev", broot, 0755, err) < 0 ||
      need_dir(root, "tmp", owner, 01777, err) < 0 ||
      need_dir(root, "workspace", owner, 0755, err) < 0 ||
      need_dir(root, "etc", broot, 0755, err) < 0)
    return -1;
  cleanup_close int etc = openat(root, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (etc < 0)
    return husk_error(err, errno, "cannot open the box's `/etc`");
  return etc_file(etc, "hosts",
                  "127.0.0.1\tlocalhost " HUSK_BOX_HOSTNAME "\n::1\tlocalhost ip6-localhost\n",
                  broot, err) < 0 ||
                 etc_file(etc, "hostname", HUSK_BOX_HOSTNAME "\n", broot, err) < 0 ||
                 etc_file(etc, "resolv.conf",
                          "# husk: DNS answers only names the box's egress policy allows\n"
                          "nameserver 169.254.0.53\noptions timeout:2 attempts:1\n",
                          broot, err) < 0
             ? -1
             : 0;
}

/* 5.  The overlay, mounted at `at`. */
static int mount_overlay(const char *scratch, size_t n, int upper, int work, const char *at,
                         struct husk_err *err) {
  char lower[PATH_MAX * 2];
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    int w = snprintf(lower + o, sizeof lower - o, "%s%s/L%zu", i ? ":" : "", scratch, i);
    if (w < 0 || (size_t)w >= sizeof lower - o)
      return husk_fail(err, ENAMETOOLONG, "too many layers for one overlay");
    o += (size_t)w;
  }
  /* The box's tmpfs is a detached mount: its directories go by fd. */
  cleanup_close int fs = fsopen("overlay", FSOPEN_CLOEXEC);
  if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", lower, 0) < 0 ||
      fsconfig(fs, FSCONFIG_SET_FD, "upperdir", NULL, upper) < 0 ||
      fsconfig(fs, FSCONFIG_SET_FD, "workdir", NULL, work) < 0 ||
      fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
    return husk_error(err, errno, "cannot make the overlay of the image's layers");
  cleanup_close int mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  if (mnt < 0 || move_mount(mnt, "", AT_FDCWD, at, MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return husk_error(err, errno, "cannot mount the box's root");
  return 0;
}

static int view(const struct rootfs_image *im, const char *scratch, char *at, size_t at_len,
                struct husk_err *err) {
  if (im->nlayers == 0)
    return husk_fail(err, EINVAL, "an image with no layers has no root");
  /* 2. */
  if (mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
            "mode=0755,size=64k,nr_inodes=512") < 0)
    return husk_error(err, errno, "cannot mount a tmpfs on `%s`", scratch);
  if (snprintf(at, at_len, "%s/" ROOT_DIR, scratch) >= (int)at_len)
    return husk_fail(err, ENAMETOOLONG, "`%s` is too long", scratch);
  cleanup_close int sfd = open(scratch, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sfd < 0 || mkdirat(sfd, ROOT_DIR, 0755) < 0)
    return husk_error(err, errno, "cannot prepare `%s`", scratch);
  /* 1 and 3. */
  cleanup_close int ns = rootfs_image_userns(im->uid_base, err);
  if (ns < 0)
    return -1;
  for (size_t i = 0; i < im->nlayers; i++) {
    char name[32];
    snprintf(name, sizeof name, "L%zu", i);
    if (mkdirat(sfd, name, 0700) < 0)
      return husk_error(err, errno, "cannot prepare a layer's mount point");
    cleanup_close int tree =
        open_tree(im->layers[i], "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    struct mount_attr a = {.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                           .userns_fd = (uint64_t)ns};
    if (tree < 0 || mount_setattr(tree, "", AT_EMPTY_PATH, &a, sizeof a) < 0)
      return husk_error(err, errno, "cannot idmap layer %zu of the image", i + 1);
    if (move_mount(tree, "", sfd, name, MOVE_MOUNT_F_EMPTY_PATH) < 0)
      return husk_error(err, errno, "cannot attach layer %zu of the image", i + 1);
  }
  /* 4. */
  cleanup_close int rdir = box_dir(im->boxfs, "rootfs", 0700, 0, err);
  if (rdir < 0)
    return -1;
  cleanup_close int upper = box_dir(rdir, "upper", 0755, im->uid_base, err);
  cleanup_close int work = upper < 0 ? -1 : box_dir(rdir, "work", 0700, 0, err);
  if (upper < 0 || work < 0)
    return -1;
  /* 5. */
  if (mount_overlay(scratch, im->nlayers, upper, work, at, err) < 0)
    return -1;
  cleanup_close int root = open(at, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0)
    return husk_error(err, errno, "cannot open the box's root");
  if (husk_parts(root, im, err) < 0)
    return -1;
  /* A /dev of the box's own, as every box has (rootfs_dev_make). */
  cleanup_close int dev = rootfs_dev_make(err);
  if (dev < 0)
    return husk_error_wrap(err, "cannot make the box's /dev");
  if (move_mount(dev, "", root, "dev", MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return husk_error(err, errno, "cannot mount the box's /dev");
  return 0;
}

int rootfs_image_view(const struct rootfs_image *im, const char *scratch, char *at, size_t at_len,
                      struct husk_err *err) {
  int rc = view(im, scratch, at, at_len, err);
  if (rc < 0)
    umount2(scratch, MNT_DETACH); /* with everything attached below it */
  return rc;
}

int rootfs_image_drop(const char *scratch, struct husk_err *err) {
  if (umount2(scratch, MNT_DETACH) < 0)
    return husk_error(err, errno, "cannot take a box's image root off `%s`", scratch);
  return 0;
}
