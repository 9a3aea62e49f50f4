/* A volume's image as a box's mount (see volume_mount.h).  In order:
 *
 *   1. Refuse an image some loop device still holds: a box that had the
 *      volume may still be going away, and two ext4 instances on one
 *      image would corrupt it.  Wait a little for it first.
 *   2. A free loop device (LOOP_CTL_GET_FREE), configured on the image in
 *      one call (LOOP_CONFIGURE), autoclear, read-only for a read-only
 *      mount.  Another creator may take the same device first: try again.
 *   3. The ext4 filesystem on it, with the new mount API, detached,
 *      nosuid and nodev (and read-only).
 *   4. Idmapped onto the box's range: the files, stored with the ids the
 *      box sees (the volume's root is uid 1000's), show as the box's.
 * The loop device's fd goes at the end: the filesystem holds the device
 * from here, and autoclear frees it when the filesystem is unmounted. */
#define _GNU_SOURCE
#include "jail/volume_mount.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jail/syscalls.h"
#include "util/cleanup.h"

/* How long 1. waits for a loop device of an ending box to go. */
#define VOLUME_BUSY_WAIT_MS 3000
/* How often 2. tries again when another creator took the free device. */
#define VOLUME_LOOP_TRIES 16

/* 1.  Whether a loop device is bound to the inode `st` names. */
static bool image_held(const struct stat *st) {
  DIR *d = opendir("/sys/block");
  if (!d)
    return false;
  bool held = false;
  struct dirent *e;
  while (!held && (e = readdir(d))) {
    if (strncmp(e->d_name, "loop", 4) != 0)
      continue;
    char dev[300];
    snprintf(dev, sizeof dev, "/dev/%s", e->d_name);
    cleanup_close int fd = open(dev, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct loop_info64 li;
    if (fd >= 0 && ioctl(fd, LOOP_GET_STATUS64, &li) == 0 && li.lo_device == (uint64_t)st->st_dev &&
        li.lo_inode == (uint64_t)st->st_ino)
      held = true;
  }
  closedir(d);
  return held;
}

static int wait_free(int image, struct husk_err *err) {
  struct stat st;
  if (fstat(image, &st) < 0)
    return husk_error(err, errno, "cannot look at the volume's image");
  if (!S_ISREG(st.st_mode))
    return husk_fail(err, EINVAL, "a volume's image is not a regular file");
  for (int waited = 0; image_held(&st); waited += 50) {
    if (waited >= VOLUME_BUSY_WAIT_MS)
      return husk_fail(err, EBUSY,
                       "the volume is still attached for a sandbox that is ending: try again");
    nanosleep(&(struct timespec){.tv_nsec = 50 * 1000 * 1000}, NULL);
  }
  return 0;
}

/* 2.  Returns the configured loop device's fd, its path in dev. */
static int loop_attach(int image, bool read_only, char *dev, size_t dev_len, struct husk_err *err) {
  cleanup_close int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  if (ctl < 0 && (errno == ENOENT || errno == ENXIO || errno == ENODEV))
    return husk_fail(err, ENOTSUP,
                     "this host has no loop devices (`/dev/loop-control`: %s): "
                     "volumes need the loop module",
                     strerror(errno));
  if (ctl < 0)
    return husk_error(err, errno, "cannot open `/dev/loop-control`");
  for (int i = 0; i < VOLUME_LOOP_TRIES; i++) {
    int n = ioctl(ctl, LOOP_CTL_GET_FREE);
    if (n < 0)
      return husk_error(err, errno, "cannot get a free loop device");
    snprintf(dev, dev_len, "/dev/loop%d", n);
    cleanup_close int fd = open(dev, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
    if (fd < 0)
      return husk_error(err, errno, "cannot open `%s`", dev);
    struct loop_config lc = {.fd = (uint32_t)image};
    lc.info.lo_flags = LO_FLAGS_AUTOCLEAR | (read_only ? LO_FLAGS_READ_ONLY : 0);
    if (ioctl(fd, LOOP_CONFIGURE, &lc) == 0)
      return take_fd(&fd);
    if (errno != EBUSY)
      return husk_error(err, errno, "cannot attach the volume's image to `%s`", dev);
  }
  return husk_fail(err, EBUSY, "every free loop device was taken before it could be used");
}

int volume_mount_make(int image, bool read_only, int userns, struct husk_err *err) {
  /* 1. */
  if (wait_free(image, err) < 0)
    return -1;
  /* 2. */
  char dev[64];
  cleanup_close int loop = loop_attach(image, read_only, dev, sizeof dev, err);
  if (loop < 0)
    return -1;
  /* 3. */
  cleanup_close int fs = fsopen("ext4", FSOPEN_CLOEXEC);
  if (fs < 0 && errno == ENODEV)
    return husk_fail(err, ENOTSUP, "this host's kernel has no ext4: volumes need it");
  if (fs < 0)
    return husk_error(err, errno, "fsopen ext4");
  if (fsconfig(fs, FSCONFIG_SET_STRING, "source", dev, 0) < 0 ||
      (read_only && fsconfig(fs, FSCONFIG_SET_FLAG, "ro", NULL, 0) < 0) ||
      fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
    return husk_error(err, errno, "cannot mount the volume's filesystem (`%s`)", dev);
  unsigned attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (read_only ? MOUNT_ATTR_RDONLY : 0);
  cleanup_close int mnt = fsmount(fs, FSMOUNT_CLOEXEC, attrs);
  if (mnt < 0)
    return husk_error(err, errno, "fsmount of the volume's filesystem");
  /* 4. */
  struct mount_attr a = {.attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns};
  if (mount_setattr(mnt, "", AT_EMPTY_PATH, &a, sizeof a) < 0)
    return husk_error(err, errno, "cannot idmap the volume's mount");
  return take_fd(&mnt);
}

int volume_mount_point(int ws, const char *path, uint32_t owner, struct husk_err *err) {
  cleanup_close int at = fcntl(ws, F_DUPFD_CLOEXEC, 3);
  if (at < 0)
    return husk_error(err, errno, "cannot open the box's workspace");
  char part[256];
  for (const char *p = path; *p;) {
    size_t n = strcspn(p, "/");
    if (n == 0 || n >= sizeof part)
      return husk_fail(err, EINVAL, "volume path `%s` is malformed", path);
    memcpy(part, p, n);
    part[n] = '\0';
    if (mkdirat(at, part, 0755) == 0) {
      if (fchownat(at, part, owner, owner, AT_SYMLINK_NOFOLLOW) < 0)
        return husk_error(err, errno, "cannot set the owner of `/workspace/%s`", path);
    } else if (errno != EEXIST) {
      return husk_error(err, errno, "cannot make the mount point `/workspace/%s`", path);
    }
    int next = openat(at, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0)
      return husk_fail(err, errno == ENOTDIR || errno == ELOOP ? ENOTDIR : errno,
                       "the sandbox's `/workspace/%s` is not a directory: a volume needs one "
                       "there",
                       path);
    close(at);
    at = next;
    p += n;
    if (*p == '/')
      p++;
  }
  return 0;
}
