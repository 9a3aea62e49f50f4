/* The root of an image template's box: layers stacked in order (the top
 * one wins, whiteouts and opaque directories hide what is below), owners
 * idmapped onto the box's uid range, writes going to the box's own layer
 * on its tmpfs (the image's layers untouched), husk's /etc files and mount
 * points in place, nothing left mounted after the drop. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "jail/rootfs_image.h"
#include "unit.h"

#define BASE 0x40000000u

static char dir[] = "/tmp/husk-rimg-XXXXXX";
static char path[512];

/* dir/rel, in a static buffer (used at once). */
static const char *P(const char *rel) {
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  return path;
}

static void put(const char *rel, const char *content, uid_t uid) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, rel);
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    if (write(fd, content, strlen(content)) < 0)
      perror("write");
    if (fchown(fd, uid, uid) < 0)
      perror("fchown");
    close(fd);
  }
}

static char *slurp(const char *p) {
  static char buf[512];
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  buf[n > 0 ? n : 0] = '\0';
  return buf;
}

TEST(an_image_root_stacks_layers_maps_owners_and_writes_to_the_box) {
  /* base: etc/motd, etc/passwd, home/app (uid 1000), var/cache/x;
   * top: etc/motd replaced, a whiteout of etc/gone, var/cache opaque. */
  const char *dirs[] = {"base",           "base/etc", "base/home", "base/var",
                        "base/var/cache", "top",      "top/etc",   "top/var",
                        "top/var/cache",  "scratch",  NULL};
  for (int i = 0; dirs[i]; i++)
    mkdir(P(dirs[i]), 0755);
  put("base/etc/motd", "base\n", 0);
  put("base/etc/gone", "gone\n", 0);
  put("base/etc/passwd", "root:x:0:0::/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n", 0);
  put("base/home/app.txt", "mine\n", 1000);
  put("base/var/cache/x", "x\n", 0);
  put("top/etc/motd", "top\n", 0);
  CHECK(mknod(P("top/etc/gone"), S_IFCHR, makedev(0, 0)) == 0);
  CHECK(setxattr(P("top/var/cache"), "trusted.overlay.opaque", "y", 1, 0) == 0);
  int layers[2] = {open(P("top"), O_PATH | O_DIRECTORY | O_CLOEXEC),
                   open(P("base"), O_PATH | O_DIRECTORY | O_CLOEXEC)};
  /* The box's tmpfs, detached, as the jail makes it. */
  int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
  CHECK(fs >= 0 && fsconfig(fs, FSCONFIG_SET_STRING, "size", "4m", 0) == 0 &&
        fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0);
  int mnt = fsmount(fs, FSMOUNT_CLOEXEC, 0);
  CHECK(mnt >= 0);
  struct rootfs_image im = {
      .nlayers = 2, .layers = layers, .boxfs = mnt, .uid_base = BASE, .owner = 1000};
  char at[512];
  struct husk_err err = {0};
  int rc = rootfs_image_view(&im, P("scratch"), at, sizeof at, &err);
  CHECK(rc == 0);
  if (rc < 0) {
    printf("#   %s\n", err.msg);
    return;
  }
  char p[600];
  snprintf(p, sizeof p, "%s/etc/motd", at);
  CHECK_STR(slurp(p), "top\n");
  snprintf(p, sizeof p, "%s/etc/gone", at);
  struct stat st;
  CHECK(lstat(p, &st) < 0 && errno == ENOENT);
  snprintf(p, sizeof p, "%s/var/cache/x", at);
  CHECK(lstat(p, &st) < 0 && errno == ENOENT);
  snprintf(p, sizeof p, "%s/etc/passwd", at);
  CHECK(slurp(p) && strstr(slurp(p), "app:x:1000") != NULL);
  CHECK(lstat(p, &st) == 0 && st.st_uid == BASE);
  snprintf(p, sizeof p, "%s/home/app.txt", at);
  CHECK(lstat(p, &st) == 0 && st.st_uid == BASE + 1000 && st.st_gid == BASE + 1000);
  snprintf(p, sizeof p, "%s/etc/hosts", at);
  CHECK(slurp(p) && strstr(slurp(p), "localhost") != NULL);
  snprintf(p, sizeof p, "%s/workspace", at);
  CHECK(lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == BASE + 1000);
  snprintf(p, sizeof p, "%s/proc", at);
  CHECK(lstat(p, &st) == 0 && S_ISDIR(st.st_mode));
  /* A write lands in the box's layer, not in the image's. */
  snprintf(p, sizeof p, "%s/etc/motd", at);
  int fd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC);
  CHECK(fd >= 0 && write(fd, "box\n", 4) == 4);
  close(fd);
  CHECK_STR(slurp(P("top/etc/motd")), "top\n");
  CHECK(fstatat(mnt, "rootfs/upper/etc/motd", &st, 0) == 0);
  /* The image's root user owns the root directory. */
  CHECK(lstat(at, &st) == 0 && st.st_uid == BASE);
  CHECK(rootfs_image_drop(P("scratch"), &err) == 0);
  snprintf(p, sizeof p, "%s/etc", at);
  CHECK(lstat(p, &st) < 0 && errno == ENOENT);
  close(mnt);
  close(fs);
  close(layers[0]);
  close(layers[1]);
}

TEST(an_image_without_a_needed_directory_gets_one_and_a_file_in_the_way_is_refused) {
  mkdir(P("flat"), 0755);
  put("flat/tmp", "not a directory\n", 0);
  int layer = open(P("flat"), O_PATH | O_DIRECTORY | O_CLOEXEC);
  int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
  fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0);
  int mnt = fsmount(fs, FSMOUNT_CLOEXEC, 0);
  struct rootfs_image im = {.nlayers = 1, .layers = &layer, .boxfs = mnt, .uid_base = BASE};
  char at[512];
  struct husk_err err = {0};
  CHECK(rootfs_image_view(&im, P("scratch"), at, sizeof at, &err) == -1);
  CHECK(strstr(err.msg, "/tmp") != NULL);
  /* Nothing stays mounted on failure. */
  struct stat st;
  char p[600];
  snprintf(p, sizeof p, "%s/root", P("scratch"));
  CHECK(lstat(p, &st) < 0 && errno == ENOENT);
  close(mnt);
  close(fs);
  close(layer);
}

int main(void) {
  if (!mkdtemp(dir) || unshare(CLONE_NEWNS) < 0 ||
      mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
    perror("setup");
    return 1;
  }
  RUN(an_image_root_stacks_layers_maps_owners_and_writes_to_the_box);
  RUN(an_image_without_a_needed_directory_gets_one_and_a_file_in_the_way_is_refused);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    printf("# cannot remove %s\n", dir);
  return unit_done();
}
