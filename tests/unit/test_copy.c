/* Unit tests for src/box/copy.{h,c}: copy_tree() against hostile source
 * and destination trees.  Each test builds its trees in a fresh mkdtemp
 * directory and removes it afterwards (fd-based, never following links,
 * never crossing into another mount).  Tests that need root (mknod, tmpfs
 * mounts, chown, immutable files) are skipped with a note otherwise. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "box/copy.h"
#include "unit.h"

/* ---- scaffolding ---------------------------------------------------------- */

static _Noreturn void die(const char *what) {
  printf("Bail out! setup failed: %s: %s\n", what, strerror(errno));
  fflush(stdout);
  exit(2);
}

static void on_alarm(int sig) {
  (void)sig;
  static const char m[] = "Bail out! test_copy did not finish (blocked on a FIFO?)\n";
  if (write(1, m, sizeof m - 1) < 0) {
  }
  _exit(3);
}

/* Remove dirfd/name recursively by fd: no symlink is followed and nothing
 * on another device (a leftover mount) is entered. */
static void rm_at(int dirfd, const char *name, dev_t dev) {
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return;
  if (S_ISDIR(st.st_mode)) {
    if (st.st_dev != dev)
      return;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
      return;
    DIR *d = fdopendir(fd);
    if (!d) {
      close(fd);
      return;
    }
    struct dirent *e;
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
        rm_at(fd, e->d_name, dev);
    closedir(d);
    unlinkat(dirfd, name, AT_REMOVEDIR);
  } else {
    unlinkat(dirfd, name, 0);
  }
}

static void rm_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st) < 0)
    return;
  rm_at(AT_FDCWD, path, st.st_dev);
}

struct fx {
  char root[PATH_MAX]; /* mkdtemp */
  int rootfd, src, dst;
};

static char active_root[PATH_MAX]; /* for the atexit cleanup */
static char active_mount[PATH_MAX + 64];

static void cleanup_at_exit(void) {
  if (active_mount[0])
    umount2(active_mount, MNT_DETACH);
  if (active_root[0])
    rm_tree(active_root);
}

static void fx_open(struct fx *f) {
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp || strlen(tmp) > 60)
    tmp = "/tmp";
  snprintf(f->root, sizeof f->root, "%s/husk-test-copy-XXXXXX", tmp);
  if (!mkdtemp(f->root))
    die("mkdtemp");
  snprintf(active_root, sizeof active_root, "%s", f->root);
  f->rootfd = open(f->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (f->rootfd < 0 || mkdirat(f->rootfd, "src", 0755) < 0 || mkdirat(f->rootfd, "dst", 0755) < 0)
    die("fixture");
  f->src = openat(f->rootfd, "src", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  f->dst = openat(f->rootfd, "dst", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (f->src < 0 || f->dst < 0)
    die("fixture open");
}

static void fx_close(struct fx *f) {
  close(f->src);
  close(f->dst);
  close(f->rootfd);
  rm_tree(f->root);
  active_root[0] = '\0';
}

/* A fresh source fd.  copy_tree() reads the directory through a dup of
 * the caller's fd, which shares the read position: a second copy_tree() on
 * the same fd sees an exhausted directory (see fd_can_be_reused). */
static void fx_reopen_src(struct fx *f) {
  close(f->src);
  f->src = openat(f->rootfd, "src", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (f->src < 0)
    die("open src");
}

/* Empty the destination: remove and recreate it, reopen f->dst (and src). */
static void fx_reset_dst(struct fx *f) {
  fx_reopen_src(f);
  struct stat st;
  if (fstat(f->rootfd, &st) < 0)
    die("fstat root");
  close(f->dst);
  rm_at(f->rootfd, "dst", st.st_dev);
  if (mkdirat(f->rootfd, "dst", 0755) < 0)
    die("mkdir dst");
  f->dst = openat(f->rootfd, "dst", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (f->dst < 0)
    die("open dst");
}

static void put(int dirfd, const char *rel, const char *content, mode_t mode) {
  int fd = openat(dirfd, rel, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    die(rel);
  size_t n = strlen(content);
  if (write(fd, content, n) != (ssize_t)n || fchmod(fd, mode) < 0)
    die(rel);
  close(fd);
}

static void mkd(int dirfd, const char *rel, mode_t mode) {
  if (mkdirat(dirfd, rel, mode) < 0 || fchmodat(dirfd, rel, mode, 0) < 0)
    die(rel);
}

static void sym(int dirfd, const char *rel, const char *target) {
  if (symlinkat(target, dirfd, rel) < 0)
    die(rel);
}

/* Whole content of a regular file reached without following links, or
 * NULL.  Caller frees. */
static char *slurp(int dirfd, const char *rel) {
  int fd = openat(dirfd, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return NULL;
  }
  char *b = malloc((size_t)st.st_size + 1);
  ssize_t n = read(fd, b, (size_t)st.st_size);
  close(fd);
  if (n != st.st_size) {
    free(b);
    return NULL;
  }
  b[n] = '\0';
  return b;
}

static bool content_is(int dirfd, const char *rel, const char *want) {
  char *s = slurp(dirfd, rel);
  bool ok = s && !strcmp(s, want);
  if (!ok)
    printf("#     content of `%s`: `%s`, expected `%s`\n", rel, s ? s : "(unreadable)", want);
  free(s);
  return ok;
}

/* Type of dirfd/rel without following: 'f' 'd' 'l' 'p' 's' 'c' 'b' or 0. */
static char kind(int dirfd, const char *rel) {
  struct stat st;
  if (fstatat(dirfd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return 0;
  switch (st.st_mode & S_IFMT) {
  case S_IFREG: return 'f';
  case S_IFDIR: return 'd';
  case S_IFLNK: return 'l';
  case S_IFIFO: return 'p';
  case S_IFSOCK: return 's';
  case S_IFCHR: return 'c';
  case S_IFBLK: return 'b';
  default: return '?';
  }
}

static bool link_is(int dirfd, const char *rel, const char *want) {
  static char buf[PATH_MAX + 1];
  ssize_t n = readlinkat(dirfd, rel, buf, sizeof buf - 1);
  if (n < 0)
    return false;
  buf[n] = '\0';
  return !strcmp(buf, want);
}

/* Number of entries (recursively, links not followed) under dirfd. */
static int count_entries(int dirfd) {
  int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fdopendir(fd);
  if (!d)
    return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    n++;
    if (kind(fd, e->d_name) == 'd') {
      int sub = openat(fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      n += count_entries(sub);
      close(sub);
    }
  }
  closedir(d);
  return n;
}

struct skiplog {
  int n;
  char *path[128];
  char *why[128];
};

static void on_skip(void *ctx, const char *rel, const char *why) {
  struct skiplog *l = ctx;
  if (l->n < 128) {
    l->path[l->n] = strdup(rel);
    l->why[l->n] = strdup(why);
  }
  l->n++;
}

static int skiplog_find(const struct skiplog *l, const char *rel) {
  for (int i = 0; i < l->n && i < 128; i++)
    if (!strcmp(l->path[i], rel))
      return i;
  return -1;
}

static void skiplog_free(struct skiplog *l) {
  for (int i = 0; i < l->n && i < 128; i++) {
    free(l->path[i]);
    free(l->why[i]);
  }
  l->n = 0;
}

static struct copy_opts opts_for(struct skiplog *l, unsigned max_depth) {
  return (struct copy_opts){.uid = (uid_t)-1, .gid = (gid_t)-1, .max_depth = max_depth,
                            .skipped = l ? on_skip : NULL, .ctx = l};
}

static int do_copy(struct fx *f, const struct copy_opts *o, struct copy_stats *st,
                   struct husk_err *err) {
  memset(st, 0, sizeof *st);
  memset(err, 0, sizeof *err);
  int rc = copy_tree(f->src, f->dst, o, st, err);
  if (rc != 0)
    printf("#     copy_tree: %d, code %d: %s\n", rc, err->code, err->msg);
  return rc;
}

/* Mount a small tmpfs at root/name; returns an fd on it or -1 (skip). */
static int mount_tmpfs(struct fx *f, const char *name, const char *data, unsigned long flags) {
  if (mkdirat(f->rootfd, name, 0755) < 0)
    die("mkdir mountpoint");
  snprintf(active_mount, sizeof active_mount, "%s/%s", f->root, name);
  if (mount("husk-test", active_mount, "tmpfs", flags, data) < 0) {
    printf("#   skipped: cannot mount tmpfs (%s)\n", strerror(errno));
    active_mount[0] = '\0';
    return -1;
  }
  int fd = open(active_mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    die("open tmpfs");
  return fd;
}

static void unmount_tmpfs(void) {
  if (!active_mount[0])
    return;
  if (umount2(active_mount, 0) < 0)
    CHECK(umount2(active_mount, MNT_DETACH) == 0);
  active_mount[0] = '\0';
}

/* ---- tests ------------------------------------------------------------------ */

TEST(copies_plain_tree) {
  struct fx f;
  fx_open(&f);
  put(f.src, "a.txt", "alpha", 0644);
  put(f.src, "empty", "", 0600);
  mkd(f.src, "d", 0755);
  mkd(f.src, "d/e", 0700);
  mkd(f.src, "d/e/empty_dir", 0755);
  put(f.src, "d/b.txt", "bravo", 0640);
  put(f.src, "d/e/c.txt", "charlie", 0600);
  struct skiplog l = {0};
  struct copy_opts o = opts_for(&l, 64);
  struct copy_stats st;
  struct husk_err err;
  CHECK(do_copy(&f, &o, &st, &err) == 0);
  CHECK(content_is(f.dst, "a.txt", "alpha"));
  CHECK(content_is(f.dst, "empty", ""));
  CHECK(content_is(f.dst, "d/b.txt", "bravo"));
  CHECK(content_is(f.dst, "d/e/c.txt", "charlie"));
  CHECK(kind(f.dst, "d/e/empty_dir") == 'd');
  CHECK(st.files == 4);
  CHECK(st.dirs == 3);
  CHECK(st.symlinks == 0 && st.hardlinks == 0 && st.skipped == 0);
  CHECK(st.bytes == 5 + 5 + 7);
  CHECK(l.n == 0);
  CHECK(count_entries(f.dst) == 7);
  /* The source is untouched. */
  CHECK(count_entries(f.src) == 7);
  /* A NULL stats pointer is allowed. */
  fx_reset_dst(&f);
  CHECK(copy_tree(f.src, f.dst, &o, NULL, &err) == 0);
  CHECK(content_is(f.dst, "d/e/c.txt", "charlie"));
  skiplog_free(&l);
  fx_close(&f);
}

TEST(symlinks_are_copied_never_followed) {
  struct fx f;
  fx_open(&f);
  /* A victim outside the source, reachable through links. */
  mkd(f.rootfd, "victim", 0755);
  put(f.rootfd, "victim/secret", "do not copy", 0600);
  char victim[PATH_MAX + 32];
  snprintf(victim, sizeof victim, "%s/victim", f.root);

  mkd(f.src, "sub", 0755);
  put(f.src, "sub/inner", "in", 0644);
  sym(f.src, "abs", "/etc/passwd");
  sym(f.src, "rel", "sub/inner");
  sym(f.src, "outside", "../../../../../../../etc/shadow");
  sym(f.src, "dangling", "does/not/exist");
  sym(f.src, "to_dir_inside", "sub");
  sym(f.src, "to_dir_outside", victim);
  sym(f.src, "to_dir_outside_rel", "../victim");
  sym(f.src, "sub/up", "..");
  sym(f.src, "loop", "loop");
  sym(f.src, "weird target", "a\nb c\x01");
  char longt[PATH_MAX];
  memset(longt, 'x', PATH_MAX - 1); /* the longest target symlink() accepts */
  longt[PATH_MAX - 1] = '\0';
  for (int i = 100; i < PATH_MAX - 1; i += 100)
    longt[i] = '/';
  CHECK(symlinkat(longt, f.src, "long") == 0);

  struct skiplog l = {0};
  struct copy_opts o = opts_for(&l, 64);
  struct copy_stats st;
  struct husk_err err;
  CHECK(do_copy(&f, &o, &st, &err) == 0);
  const struct {
    const char *name, *target;
  } want[] = {{"abs", "/etc/passwd"},
              {"rel", "sub/inner"},
              {"outside", "../../../../../../../etc/shadow"},
              {"dangling", "does/not/exist"},
              {"to_dir_inside", "sub"},
              {"to_dir_outside", victim},
              {"to_dir_outside_rel", "../victim"},
              {"sub/up", ".."},
              {"loop", "loop"},
              {"weird target", "a\nb c\x01"},
              {"long", longt}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    CHECK(kind(f.dst, want[i].name) == 'l');
    CHECK(link_is(f.dst, want[i].name, want[i].target));
  }
  CHECK(st.symlinks == sizeof want / sizeof want[0]);
  CHECK(st.files == 1 && st.dirs == 1);
  CHECK(l.n == 0);
  /* Nothing was read through a link: exactly the source's entries exist. */
  CHECK(count_entries(f.dst) == count_entries(f.src));
  CHECK(count_entries(f.dst) == 13);
  /* The victim is untouched. */
  CHECK(content_is(f.rootfd, "victim/secret", "do not copy"));
  int vfd = openat(f.rootfd, "victim", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  CHECK(count_entries(vfd) == 1);
  close(vfd);
  skiplog_free(&l);
  fx_close(&f);
}

/* The destination already holds links where the copy will write: they are
 * replaced, and whatever they point at is never written, chmod'ed or
 * chown'ed. */
TEST(destination_links_are_replaced_not_followed) {
  struct fx f;
  fx_open(&f);
  mkd(f.rootfd, "victim_dir", 0750);
  put(f.rootfd, "victim_dir/keep", "victim", 0640);
  put(f.rootfd, "victim_file", "precious", 0600);
  put(f.rootfd, "victim_file2", "precious2", 0600);
  char vdir[PATH_MAX + 32], vfile[PATH_MAX + 32], vfile2[PATH_MAX + 32];
  snprintf(vdir, sizeof vdir, "%s/victim_dir", f.root);
  snprintf(vfile, sizeof vfile, "%s/victim_file", f.root);
  snprintf(vfile2, sizeof vfile2, "%s/victim_file2", f.root);
  struct stat vdir_before, vfile_before;
  CHECK(stat(vdir, &vdir_before) == 0 && stat(vfile, &vfile_before) == 0);

  /* dir over a link to a dir */
  sym(f.dst, "a", vdir);
  mkd(f.src, "a", 0777);
  put(f.src, "a/f", "new", 0666);
  put(f.src, "a/keep", "overwrite?", 0666);
  /* file over a link to a file */
  sym(f.dst, "b", vfile);
  put(f.src, "b", "new b", 04777);
  /* symlink over a link to a dir */
  sym(f.dst, "c", vdir);
  sym(f.src, "c", "elsewhere");
  /* file over a link to a dir */
  sym(f.dst, "d", vdir);
  put(f.src, "d", "new d", 0644);
  /* file over a hardlink of an outside file */
  CHECK(linkat(f.rootfd, "victim_file2", f.dst, "e", 0) == 0);
  put(f.src, "e", "new e", 0644);
  /* nested: a real dir in dst holding a link */
  mkd(f.dst, "sub", 0755);
  sym(f.dst, "sub/x", vdir);
  mkd(f.src, "sub", 0755);
  mkd(f.src, "sub/x", 0755);
  put(f.src, "sub/x/keep", "nested", 0644);
  /* dir over a relative link escaping the destination */
  sym(f.dst, "g", "../victim_dir");
  mkd(f.src, "g", 0700);
  put(f.src, "g/h", "g", 0644);
  /* dangling link in dst where a file goes: must not create the target */
  sym(f.dst, "i", "../created_through_link");
  put(f.src, "i", "new i", 0644);

  struct skiplog l = {0};
  struct copy_opts o = opts_for(&l, 64);
  if (geteuid() == 0) {
    o.uid = 4321; /* chown must hit the new entries only */
    o.gid = 4321;
  }
  struct copy_stats st;
  struct husk_err err;
  CHECK(do_copy(&f, &o, &st, &err) == 0);
  CHECK(kind(f.dst, "a") == 'd');
  CHECK(content_is(f.dst, "a/f", "new"));
  CHECK(content_is(f.dst, "a/keep", "overwrite?"));
  CHECK(kind(f.dst, "b") == 'f');
  CHECK(content_is(f.dst, "b", "new b"));
  CHECK(kind(f.dst, "c") == 'l' && link_is(f.dst, "c", "elsewhere"));
  CHECK(kind(f.dst, "d") == 'f');
  CHECK(content_is(f.dst, "d", "new d"));
  CHECK(content_is(f.dst, "e", "new e"));
  CHECK(kind(f.dst, "sub/x") == 'd');
  CHECK(content_is(f.dst, "sub/x/keep", "nested"));
  CHECK(kind(f.dst, "g") == 'd');
  CHECK(content_is(f.dst, "g/h", "g"));
  CHECK(content_is(f.dst, "i", "new i"));
  CHECK(kind(f.rootfd, "created_through_link") == 0);
  CHECK(l.n == 0);

  /* The victims. */
  CHECK(content_is(f.rootfd, "victim_dir/keep", "victim"));
  CHECK(kind(f.rootfd, "victim_dir/f") == 0);
  CHECK(kind(f.rootfd, "victim_dir/h") == 0);
  int vfd = openat(f.rootfd, "victim_dir", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  CHECK(count_entries(vfd) == 1);
  close(vfd);
  CHECK(content_is(f.rootfd, "victim_file", "precious"));
  CHECK(content_is(f.rootfd, "victim_file2", "precious2"));
  struct stat vdir_after, vfile_after;
  CHECK(stat(vdir, &vdir_after) == 0 && stat(vfile, &vfile_after) == 0);
  CHECK(vdir_after.st_mode == vdir_before.st_mode);
  CHECK(vdir_after.st_uid == vdir_before.st_uid && vdir_after.st_gid == vdir_before.st_gid);
  CHECK(vfile_after.st_mode == vfile_before.st_mode);
  CHECK(vfile_after.st_uid == vfile_before.st_uid);
  CHECK(vdir_after.st_mtim.tv_sec == vdir_before.st_mtim.tv_sec &&
        vdir_after.st_mtim.tv_nsec == vdir_before.st_mtim.tv_nsec);
  skiplog_free(&l);
  fx_close(&f);
}

static int make_socket(int dirfd, const char *name) {
  int cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", name);
  int rc = -1;
  if (cwd >= 0 && s >= 0 && fchdir(dirfd) == 0)
    rc = bind(s, (struct sockaddr *)&a, sizeof a);
  if (cwd >= 0 && fchdir(cwd) < 0)
    die("fchdir back");
  close(cwd);
  return rc < 0 ? (close(s), -1) : s;
}

TEST(special_files_are_skipped) {
  struct fx f;
  fx_open(&f);
  put(f.src, "regular", "r", 0644);
  CHECK(mkfifoat(f.src, "fifo", 0666) == 0);
  mkd(f.src, "sub", 0755);
  CHECK(mkfifoat(f.src, "sub/fifo2", 0600) == 0);
  int sock = make_socket(f.src, "sock");
  CHECK(sock >= 0);
  int expect_skips = 3;
  bool root = geteuid() == 0;
  if (root) {
    CHECK(mknodat(f.src, "chr", S_IFCHR | 0666, makedev(1, 3)) == 0);
    CHECK(mknodat(f.src, "sub/blk", S_IFBLK | 0600, makedev(7, 0)) == 0);
    expect_skips += 2;
  }
  /* A FIFO in the destination where a file goes: replaced, never opened. */
  CHECK(mkfifoat(f.dst, "regular", 0666) == 0);
  /* A link to a FIFO is a link. */
  sym(f.src, "to_fifo", "fifo");

  struct skiplog l = {0};
  struct copy_opts o = opts_for(&l, 64);
  struct copy_stats st;
  struct husk_err err;
  CHECK(do_copy(&f, &o, &st, &err) == 0);
  CHECK(content_is(f.dst, "regular", "r"));
  CHECK(kind(f.dst, "to_fifo") == 'l');
  CHECK(kind(f.dst, "fifo") == 0);
  CHECK(kind(f.dst, "sub/fifo2") == 0);
  CHECK(kind(f.dst, "sock") == 0);
  CHECK(kind(f.dst, "chr") == 0);
  CHECK(kind(f.dst, "sub/blk") == 0);
  CHECK(kind(f.dst, "sub") == 'd');
  CHECK(st.skipped == (uint64_t)expect_skips);
  CHECK(l.n == expect_skips);
  CHECK(skiplog_find(&l, "fifo") >= 0);
  CHECK(skiplog_find(&l, "sub/fifo2") >= 0);
  CHECK(skiplog_find(&l, "sock") >= 0);
  if (root) {
    CHECK(skiplog_find(&l, "chr") >= 0);
    CHECK(skiplog_find(&l, "sub/blk") >= 0);
  }
  for (int i = 0; i < l.n && i < 128; i++)
    CHECK(l.why[i] && l.why[i][0]);

  /* Without a callback: still skipped and counted. */
  fx_reset_dst(&f);
  o.skipped = NULL;
  o.ctx = NULL;
  CHECK(do_copy(&f, &o, &st, &err) == 0);
  CHECK(st.skipped == (uint64_t)expect_skips);
  close(sock);
  skiplog_free(&l);
  fx_close(&f);
}

static ino_t ino_of(int dirfd, const char *rel) {
  struct stat st;
  return fstatat(dirfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_ino : 0;
}

static nlink_t nlink_of(int dirfd, const char *rel) {
  struct stat st;
  return fstatat(dirfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_nlink : 0;
}

TEST(hardlinks_stay_hardlinks) {
  struct fx f;
  fx_open(&f);
  put(f.src, "a", "shared content", 0644);
  CHECK(linkat(f.src, "a", f.src, "b", 0) == 0);
  mkd(f.src, "sub", 0755);
  mkd(f.src, "sub/deeper", 0755);
  CHECK(linkat(f.src, "a", f.src, "sub/c", 0) == 0);
  CHECK(linkat(f.src, "a", f.src, "sub/deeper/d", 0) == 0);
  put(f.src, "single", "alone", 0644);
  put(f.src, "pair1", "pair", 0644);
  CHECK(linkat(f.src, "pair1", f.src, "sub/pair2", 0) == 0);
  /* A link whose other name is outside the source tree. */
  put(f.rootfd, "outside", "outside", 0644);
  CHECK(linkat(f.rootfd, "outside", f.src, "sub/in", 0) == 0);

  struct skiplog l = {0};
  struct copy_opts o = opts_for(&l, 64);
  struct copy_stats st;
  struct husk_err err;
  CHECK(do_copy(&f, &o, &st, &err) == 0);
  ino_t ia = ino_of(f.dst, "a");
  CHECK(ia != 0);
  CHECK(ino_of(f.dst, "b") == ia);
  CHECK(ino_of(f.dst, "sub/c") == ia);
  CHECK(ino_of(f.dst, "sub/deeper/d") == ia);
  CHECK(nlink_of(f.dst, "a") == 4);
  CHECK(ino_of(f.dst, "pair1") == ino_of(f.dst, "sub/pair2"));
  CHECK(nlink_of(f.dst, "pair1") == 2);
  CHECK(ino_of(f.dst, "single") != ia);
  CHECK(nlink_of(f.dst, "sub/in") == 1); /* a copy, not linked to anything outside */
  CHECK(ino_of(f.dst, "sub/in") != ino_of(f.rootfd, "outside"));
  CHECK(content_is(f.dst, "sub/deeper/d", "shared content"));
  CHECK(content_is(f.dst, "sub/in", "outside"));
  CHECK(st.hardlinks == 3 + 1);
  CHECK(st.files == 4); /* a, single, pair, in */
  CHECK(st.bytes == strlen("shared content") + 5 + 4 + 7);
  skiplog_free(&l);
  fx_close(&f);
}

TEST(many_hardlinks) {
  /* Enough distinct linked inodes to grow the link table several times. */
  struct fx f;
  fx_open(&f);
  mkd(f.src, "x", 0755);
  mkd(f.src, "y", 0755);
  enum { N = 300 };
  char a[64], b[64];
  for (int i = 0; i < N; i++) {
    snprintf(a, sizeof a, "x/f%d", i);
    snprintf(b, sizeof b, "y/g%d", i);
    put(f.src, a, a, 0644);
    if (linkat(f.src, a, f.src, b, 0) < 0)
      die("linkat");
  }
  struct copy_opts o = opts_for(NULL, 64);
  struct copy_stats st;
  struct husk_err err;
  CHECK(do_copy(&f, &o, &st, &err) == 0);
  CHECK(st.files == N);
  CHECK(st.hardlinks == N);
  int bad = 0;
  for (int i = 0; i < N; i++) {
    snprintf(a, sizeof a, "x/f%d", i);
    snprintf(b, sizeof b, "y/g%d", i);
    if (ino_of(f.dst, a) == 0 || ino_of(f.dst, a) != ino_of(f.dst, b) || nlink_of(f.dst, a) != 2)
      bad++;
  }
  CHECK(bad == 0);
  fx_close(&f);
}

static bool region_is(int fd, off_t off, size_t len, int byte) {
  char *b = malloc(len);
  bool ok = pread(fd, b, len, off) == (ssize_t)len;
  for (size_t i = 0; ok && i < len; i++)
    ok = b[i] == (char)byte;
  free(b);
  return ok;
}

TEST(sparse_files_stay_sparse) {
  struct fx f;
  fx_open(&f);
  const off_t MiB = 1 << 20;
  char blk[4096];
  /* 64 MiB with data at 1 MiB and at the very end. */
  int fd = openat(f.src, "sparse", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  CHECK(fd >= 0);
  memset(blk, 'A', sizeof blk);
  CHECK(ftruncate(fd, 64 * MiB) == 0);
  CHECK(pwrite(fd, blk, sizeof blk, MiB) == (ssize_t)sizeof blk);
  memset(blk, 'B', sizeof blk);
  CHECK(pwrite(fd, blk, sizeof blk, 64 * MiB - (off_t)sizeof blk) == (ssize_t)sizeof blk);
  close(fd);
  /* 1 GiB, all hole. */
  fd = openat(f.src, "hole", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  CHECK(fd >= 0 && ftruncate(fd, 1024 * MiB) == 0);
  close(fd);
  /* Data at the start, then a hole to the end. */
  fd = openat(f.src, "tailhole", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  memset(blk, 'C', sizeof blk);
  CHECK(fd >= 0 && pwrite(fd, blk, sizeof blk, 0) == (ssize_t)sizeof blk);
  CHECK(ftruncate(fd, 32 * MiB) == 0);
  close(fd);
  /* Odd size, not block aligned, data not aligned either. */
  fd = openat(f.src, "odd", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  CHECK(fd >= 0 && ftruncate(fd, 10 * MiB + 123) == 0);
  memset(blk, 'D', 100);
  CHECK(pwrite(fd, blk, 100, 5 * MiB + 7) == 100);
  close(fd);

  struct skiplog l = {0};
  struct copy_opts o = opts_for(&l, 64);
  struct copy_stats st;
  struct husk_err err;
  CHECK(do_copy(&f, &o, &st, &err) == 0);
  struct stat s;
  CHECK(fstatat(f.dst, "sparse", &s, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK(s.st_size == 64 * MiB);
  CHECK((off_t)s.st_blocks * 512 <= 1 * MiB);
  fd = openat(f.dst, "sparse", O_RDONLY | O_CLOEXEC);
  CHECK(region_is(fd, MiB, 4096, 'A'));
  CHECK(region_is(fd, 64 * MiB - 4096, 4096, 'B'));
  CHECK(region_is(fd, 0, 4096, 0));
  CHECK(region_is(fd, 32 * MiB, 4096, 0));
  close(fd);

  CHECK(fstatat(f.dst, "hole", &s, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK(s.st_size == 1024 * MiB);
  CHECK((off_t)s.st_blocks * 512 <= 64 * 1024);

  CHECK(fstatat(f.dst, "tailhole", &s, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK(s.st_size == 32 * MiB);
  CHECK((off_t)s.st_blocks * 512 <= 1 * MiB);
  fd = openat(f.dst, "tailhole", O_RDONLY | O_CLOEXEC);
  CHECK(region_is(fd, 0, 4096, 'C'));
  CHECK(region_is(fd, 32 * MiB - 4096, 4096, 0));
  close(fd);

  CHECK(fstatat(f.dst, "odd", &s, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK(s.st_size == 10 * MiB + 123);
  fd = openat(f.dst, "odd", O_RDONLY | O_CLOEXEC);
  CHECK(region_is(fd, 5 * MiB + 7, 100, 'D'));
  CHECK(region_is(fd, 5 * MiB + 107, 1000, 0));
  CHECK(region_is(fd, 10 * MiB, 123, 0));
  close(fd);

  CHECK(st.files == 4);
  CHECK(st.bytes < 1 * (uint64_t)MiB); /* only data was copied */
  skiplog_free(&l);
  fx_close(&f);
}

TEST(depth_limit_skips) {
  struct fx f;
  fx_open(&f);
  mkd(f.src, "d1", 0755);
  mkd(f.src, "d1/d2", 0755);
  mkd(f.src, "d1/d2/d3", 0755);
  mkd(f.src, "d1/d2/d3/d4", 0755);
  put(f.src, "d1/d2/d3/d4/f", "deep", 0644);
  put(f.src, "d1/d2/f2", "level2", 0644);
  put(f.src, "top", "top", 0644);
  struct skiplog l = {0};
  struct copy_opts o = opts_for(&l, 2);
  struct copy_stats st;
  struct husk_err err;
  CHECK(do_copy(&f, &o, &st, &err) == 0);
  CHECK(kind(f.dst, "d1/d2") == 'd');
  CHECK(content_is(f.dst, "d1/d2/f2", "level2"));
  CHECK(kind(f.dst, "d1/d2/d3") == 0);
  CHECK(content_is(f.dst, "top", "top"));
  CHECK(st.skipped == 1);
  CHECK(l.n == 1 && skiplog_find(&l, "d1/d2/d3") == 0);
  skiplog_free(&l);

  /* max_depth 0: top-level files only. */
  fx_reset_dst(&f);
  o = opts_for(&l, 0);
  CHECK(do_copy(&f, &o, &st, &err) == 0);
  CHECK(content_is(f.dst, "top", "top"));
  CHECK(kind(f.dst, "d1") == 0);
  CHECK(l.n == 1 && skiplog_find(&l, "d1") == 0);
  skiplog_free(&l);
  fx_close(&f);
}

TEST(deep_tree_is_bounded) {
  /* 400 levels, as the box could build, with husk's limit of 256. */
  struct fx f;
  fx_open(&f);
  int cur = dup(f.src);
  for (int i = 0; i < 400; i++) {
    if (mkdirat(cur, "d", 0755) < 0)
      die("mkdirat deep");
    int next = openat(cur, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(cur);
    cur = next;
  }
  put(cur, "bottom", "b", 0644);
  close(cur);
  struct skiplog l = {0};
  struct copy_opts o = opts_for(&l, 256);
  struct copy_stats st;
  struct husk_err err;
  CHECK(do_copy(&f, &o, &st, &err) == 0);
  CHECK(st.dirs == 256);
  CHECK(st.skipped == 1);
  CHECK(st.files == 0);
  CHECK(l.n == 1);
  /* Walk the copy: exactly 256 levels. */
  int levels = 0;
  cur = dup(f.dst);
  for (;;) {
    int next = openat(cur, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0)
      break;
    close(cur);
    cur = next;
    levels++;
  }
  close(cur);
  CHECK(levels == 256);
  skiplog_free(&l);
  fx_close(&f);
}

TEST(overlong_paths_are_skipped) {
  /* Relative paths beyond PATH_MAX: skipped, not a failure. */
  struct fx f;
  fx_open(&f);
  char name[201];
  memset(name, 'n', 200);
  name[200] = '\0';
  int cur = dup(f.src);
  for (int i = 0; i < 30; i++) { /* ~6000 bytes of path */
    if (mkdirat(cur, name, 0755) < 0)
      die("mkdirat long");
    int next = openat(cur, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(cur);
    cur = next;
  }
  put(cur, "leaf", "leaf", 0644);
  close(cur);
  struct skiplog l = {0};
  struct copy_opts o = opts_for(&l, 256);
  struct copy_stats st;
  struct husk_err err;
  CHECK(do_copy(&f, &o, &st, &err) == 0);
  CHECK(st.skipped >= 1);
  CHECK(st.dirs >= 19 && st.dirs < 30);
  CHECK(l.n >= 1);
  for (int i = 0; i < l.n && i < 128; i++)
    CHECK(strlen(l.path[i]) < PATH_MAX);
  skiplog_free(&l);
  fx_close(&f);
}

TEST(modes_owners_times) {
  struct fx f;
  fx_open(&f);
  umask(022);
  put(f.src, "suid", "s", 04755);
  put(f.src, "sgid", "g", 02755);
  put(f.src, "both", "b", 06777);
  put(f.src, "sticky_file", "t", 01644);
  put(f.src, "p640", "x", 0640);
  put(f.src, "p000", "x", 0000);
  put(f.src, "p777", "x", 0777);
  put(f.src, "p711", "x", 0711);
  mkd(f.src, "sgid_dir", 02775);
  mkd(f.src, "sticky_dir", 01777);
  mkd(f.src, "closed_dir", 0000);
  put(f.src, "closed_dir/inside", "i", 0644);
  mkd(f.src, "suid_dir", 04755);
  sym(f.src, "link", "p640");
  /* Times (set last so entry creation does not bump them). */
  struct timespec t_file[2] = {{1000000000, 111}, {1234567890, 123456789}};
  struct timespec t_dir[2] = {{1100000000, 0}, {1300000000, 987654321}};
  struct timespec t_link[2] = {{1200000000, 5}, {1400000000, 42}};
  CHECK(utimensat(f.src, "p640", t_file, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK(utimensat(f.src, "closed_dir", t_dir, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK(utimensat(f.src, "link", t_link, AT_SYMLINK_NOFOLLOW) == 0);

  bool root = geteuid() == 0;
  struct skiplog l = {0};
  struct copy_opts o = opts_for(&l, 64);
  if (root) {
    o.uid = 1234;
    o.gid = 5678;
  }
  struct copy_stats st;
  struct husk_err err;
  CHECK(do_copy(&f, &o, &st, &err) == 0);
  const struct {
    const char *name;
    mode_t mode;
  } want[] = {{"suid", 0755},       {"sgid", 0755},         {"both", 0777},
              {"sticky_file", 0644}, {"p640", 0640},         {"p000", 0000},
              {"p777", 0777},       {"p711", 0711},         {"sgid_dir", 0775},
              {"sticky_dir", 01777}, {"closed_dir", 0000},   {"suid_dir", 0755},
              {"closed_dir/inside", 0644}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    struct stat s;
    CHECK(fstatat(f.dst, want[i].name, &s, AT_SYMLINK_NOFOLLOW) == 0);
    if ((s.st_mode & 07777) != want[i].mode)
      printf("#     `%s`: mode %04o, expected %04o\n", want[i].name, s.st_mode & 07777,
             want[i].mode);
    CHECK((s.st_mode & 07777) == want[i].mode);
    CHECK(!(s.st_mode & (S_ISUID | S_ISGID)));
    if (root)
      CHECK(s.st_uid == 1234 && s.st_gid == 5678);
  }
  struct stat s;
  CHECK(fstatat(f.dst, "link", &s, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(s.st_mode));
  if (root)
    CHECK(s.st_uid == 1234 && s.st_gid == 5678);
  CHECK(s.st_mtim.tv_sec == t_link[1].tv_sec && s.st_mtim.tv_nsec == t_link[1].tv_nsec);
  CHECK(fstatat(f.dst, "p640", &s, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK(s.st_mtim.tv_sec == t_file[1].tv_sec && s.st_mtim.tv_nsec == t_file[1].tv_nsec);
  CHECK(s.st_atim.tv_sec == t_file[0].tv_sec);
  CHECK(fstatat(f.dst, "closed_dir", &s, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK(s.st_mtim.tv_sec == t_dir[1].tv_sec && s.st_mtim.tv_nsec == t_dir[1].tv_nsec);
  /* The target of the copied link was not re-chowned through the link. */
  CHECK(content_is(f.dst, "closed_dir/inside", "i"));

  /* (uid_t)-1 leaves ownership as created. */
  fx_reset_dst(&f);
  o = opts_for(&l, 64);
  CHECK(do_copy(&f, &o, &st, &err) == 0);
  CHECK(fstatat(f.dst, "p640", &s, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK(s.st_uid == geteuid());
  skiplog_free(&l);
  fx_close(&f);
}

TEST(weird_names) {
  struct fx f;
  fx_open(&f);
  char n255[256];
  memset(n255, 'L', 255);
  n255[255] = '\0';
  const char *names[] = {"a b", " leading", "trailing ", "new\nline", "tab\there", "-rf", "--",
                         "\xc3\xbc\xc3\xb1\xc3\xaf", "\x01" "ctrl", "*", "?", "\\", "'q\"",
                         "...", ".hidden", "\x1b[31mred", "\xff\xfe", n255};
  size_t n = sizeof names / sizeof names[0];
  for (size_t i = 0; i < n; i++)
    put(f.src, names[i], names[i], 0644);
  mkd(f.src, "dir\nwith newline", 0755);
  put(f.src, "dir\nwith newline/file with space", "inner", 0644);
  struct skiplog l = {0};
  struct copy_opts o = opts_for(&l, 64);
  struct copy_stats st;
  struct husk_err err;
  CHECK(do_copy(&f, &o, &st, &err) == 0);
  for (size_t i = 0; i < n; i++)
    CHECK(content_is(f.dst, names[i], names[i]));
  CHECK(content_is(f.dst, "dir\nwith newline/file with space", "inner"));
  CHECK(st.files == n + 1);
  CHECK(l.n == 0);
  skiplog_free(&l);
  fx_close(&f);
}

TEST(merges_into_existing_destination) {
  struct fx f;
  fx_open(&f);
  mkd(f.dst, "d", 0700);
  put(f.dst, "d/keep", "kept", 0644);
  put(f.dst, "d/over", "old", 0644);
  put(f.dst, "top", "old top", 0644);
  put(f.dst, "file_becomes_dir", "old", 0644);
  mkd(f.dst, "dir_stays", 0755);
  put(f.dst, "dir_stays/x", "x", 0644);

  mkd(f.src, "d", 0750);
  put(f.src, "d/over", "new", 0600);
  put(f.src, "d/add", "added", 0644);
  put(f.src, "top", "new top", 0644);
  mkd(f.src, "file_becomes_dir", 0755);
  put(f.src, "file_becomes_dir/in", "in", 0644);
  put(f.src, "dir_stays", "a file where the destination has a directory", 0644);

  struct skiplog l = {0};
  struct copy_opts o = opts_for(&l, 64);
  struct copy_stats st;
  struct husk_err err;
  CHECK(do_copy(&f, &o, &st, &err) == 0);
  CHECK(content_is(f.dst, "d/keep", "kept"));
  CHECK(content_is(f.dst, "d/over", "new"));
  CHECK(content_is(f.dst, "d/add", "added"));
  CHECK(content_is(f.dst, "top", "new top"));
  CHECK(kind(f.dst, "file_becomes_dir") == 'd');
  CHECK(content_is(f.dst, "file_becomes_dir/in", "in"));
  /* A directory in the way of a file: skipped and reported, kept intact. */
  CHECK(kind(f.dst, "dir_stays") == 'd');
  CHECK(content_is(f.dst, "dir_stays/x", "x"));
  CHECK(l.n == 1 && skiplog_find(&l, "dir_stays") == 0);
  CHECK(st.skipped == 1);
  struct stat s;
  CHECK(fstatat(f.dst, "d", &s, 0) == 0 && (s.st_mode & 07777) == 0750);
  CHECK(fstatat(f.dst, "d/over", &s, 0) == 0 && (s.st_mode & 07777) == 0600);

  /* Copying the same tree again is idempotent. */
  skiplog_free(&l);
  fx_reopen_src(&f);
  CHECK(do_copy(&f, &o, &st, &err) == 0);
  CHECK(st.files == 4 && st.skipped == 1);
  CHECK(content_is(f.dst, "d/over", "new"));
  CHECK(content_is(f.dst, "d/keep", "kept"));
  CHECK(count_entries(f.dst) == 9);
  skiplog_free(&l);
  fx_close(&f);
}

TEST(enospc_is_an_error) {
  struct fx f;
  fx_open(&f);
  if (geteuid() != 0) {
    printf("#   skipped: needs root for a tmpfs\n");
    fx_close(&f);
    return;
  }
  int small = mount_tmpfs(&f, "small", "size=64k", 0);
  if (small < 0) {
    fx_close(&f);
    return;
  }
  /* 1 MiB of non-zero data (a hole would not use space). */
  int fd = openat(f.src, "big", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  char buf[4096];
  for (size_t i = 0; i < sizeof buf; i++)
    buf[i] = (char)(i * 7 + 1);
  for (int i = 0; i < 256; i++)
    CHECK(write(fd, buf, sizeof buf) == (ssize_t)sizeof buf);
  close(fd);
  struct skiplog l = {0};
  struct copy_opts o = opts_for(&l, 64);
  struct copy_stats st = {0};
  struct husk_err err = {0};
  CHECK(copy_tree(f.src, small, &o, &st, &err) == -1);
  CHECK(err.code == ENOSPC);
  CHECK(strstr(err.msg, "big") != NULL);
  CHECK(strstr(err.msg, strerror(ENOSPC)) != NULL);
  close(small);
  unmount_tmpfs();
  skiplog_free(&l);
  fx_close(&f);
}

TEST(out_of_inodes_is_an_error) {
  struct fx f;
  fx_open(&f);
  if (geteuid() != 0) {
    printf("#   skipped: needs root for a tmpfs\n");
    fx_close(&f);
    return;
  }
  int small = mount_tmpfs(&f, "small", "size=1m,nr_inodes=4", 0);
  if (small < 0) {
    fx_close(&f);
    return;
  }
  char name[32];
  for (int i = 0; i < 10; i++) {
    snprintf(name, sizeof name, "f%d", i);
    put(f.src, name, "x", 0644);
  }
  struct copy_opts o = opts_for(NULL, 64);
  struct copy_stats st = {0};
  struct husk_err err = {0};
  CHECK(copy_tree(f.src, small, &o, &st, &err) == -1);
  CHECK(err.code == ENOSPC);
  CHECK(strstr(err.msg, "cannot create") != NULL);
  CHECK(st.files >= 1 && st.files < 10);

  /* Directories too. */
  close(small);
  unmount_tmpfs();
  CHECK(unlinkat(f.rootfd, "small", AT_REMOVEDIR) == 0);
  small = mount_tmpfs(&f, "small", "size=1m,nr_inodes=4", 0);
  if (small >= 0) {
    for (int i = 0; i < 10; i++) {
      snprintf(name, sizeof name, "d%d", i);
      mkd(f.src, name, 0755);
    }
    memset(&err, 0, sizeof err);
    fx_reopen_src(&f);
    CHECK(copy_tree(f.src, small, &o, &st, &err) == -1);
    CHECK(err.code == ENOSPC);
    CHECK(err.msg[0] != '\0');
    close(small);
    unmount_tmpfs();
  }
  fx_close(&f);
}

TEST(read_only_destination) {
  struct fx f;
  fx_open(&f);
  if (geteuid() != 0) {
    printf("#   skipped: needs root for a tmpfs\n");
    fx_close(&f);
    return;
  }
  int ro = mount_tmpfs(&f, "ro", "size=1m", MS_RDONLY);
  if (ro < 0) {
    fx_close(&f);
    return;
  }
  put(f.src, "file", "x", 0644);
  struct copy_opts o = opts_for(NULL, 64);
  struct husk_err err = {0};
  CHECK(copy_tree(f.src, ro, &o, NULL, &err) == -1);
  CHECK(err.code == EROFS);
  CHECK(strstr(err.msg, "file") != NULL);
  /* A directory entry fails the same way. */
  CHECK(unlinkat(f.src, "file", 0) == 0);
  mkd(f.src, "dir", 0755);
  memset(&err, 0, sizeof err);
  fx_reopen_src(&f);
  CHECK(copy_tree(f.src, ro, &o, NULL, &err) == -1);
  CHECK(err.code == EROFS);
  CHECK(strstr(err.msg, "dir") != NULL);
  close(ro);
  unmount_tmpfs();
  fx_close(&f);
}

TEST(unreplaceable_destination_entry) {
  /* An immutable file in the destination cannot be unlinked: an error
   * naming the entry, and the file is left as it was. */
  struct fx f;
  fx_open(&f);
  put(f.dst, "locked", "old", 0644);
  int fd = openat(f.dst, "locked", O_RDONLY | O_CLOEXEC);
  int flags = 0;
  if (fd < 0 || ioctl(fd, FS_IOC_GETFLAGS, &flags) < 0 ||
      (flags |= FS_IMMUTABLE_FL, ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0)) {
    printf("#   skipped: cannot make a file immutable here (%s)\n", strerror(errno));
    if (fd >= 0)
      close(fd);
    fx_close(&f);
    return;
  }
  put(f.src, "locked", "new", 0644);
  struct copy_opts o = opts_for(NULL, 64);
  struct husk_err err = {0};
  CHECK(copy_tree(f.src, f.dst, &o, NULL, &err) == -1);
  CHECK(err.code == EPERM);
  CHECK(strstr(err.msg, "locked") != NULL);
  flags &= ~FS_IMMUTABLE_FL;
  CHECK(ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0);
  close(fd);
  CHECK(content_is(f.dst, "locked", "old"));
  fx_close(&f);
}

TEST(bad_directory_fds) {
  struct fx f;
  fx_open(&f);
  put(f.src, "file", "x", 0644);
  struct copy_opts o = opts_for(NULL, 64);
  struct husk_err err = {0};
  /* An O_PATH source: either copied properly or a clean error. */
  int opath = openat(f.rootfd, "src", O_PATH | O_DIRECTORY | O_CLOEXEC);
  int rc = copy_tree(opath, f.dst, &o, NULL, &err);
  CHECK(rc == 0 || rc == -1);
  if (rc == 0)
    CHECK(content_is(f.dst, "file", "x"));
  else
    CHECK(err.code != 0 && err.msg[0] != '\0');
  close(opath);
  fx_reset_dst(&f);
  /* A regular file as the source. */
  int reg = openat(f.src, "file", O_RDONLY | O_CLOEXEC);
  memset(&err, 0, sizeof err);
  CHECK(copy_tree(reg, f.dst, &o, NULL, &err) == -1);
  CHECK(err.code == ENOTDIR);
  close(reg);
  /* A closed source fd. */
  memset(&err, 0, sizeof err);
  CHECK(copy_tree(-1, f.dst, &o, NULL, &err) == -1);
  CHECK(err.code == EBADF);
  /* A bad destination fd, with something to copy. */
  memset(&err, 0, sizeof err);
  CHECK(copy_tree(f.src, -1, &o, NULL, &err) == -1);
  CHECK(err.code == EBADF);
  CHECK(strstr(err.msg, "file") != NULL);
  CHECK(kind(f.dst, "file") == 0);
  fx_close(&f);
}

TEST(no_fd_leaks) {
  /* Every path above returns without leaking fds or memory (ASan reports
   * leaks at exit); check fds explicitly on both success and failure. */
  struct fx f;
  fx_open(&f);
  mkd(f.src, "a", 0755);
  mkd(f.src, "a/b", 0755);
  put(f.src, "a/b/f", "x", 0644);
  CHECK(linkat(f.src, "a/b/f", f.src, "g", 0) == 0);
  int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
  close(probe);
  struct copy_opts o = opts_for(NULL, 64);
  struct husk_err err;
  CHECK(copy_tree(f.src, f.dst, &o, NULL, &err) == 0);
  int after = open("/dev/null", O_RDONLY | O_CLOEXEC);
  CHECK(after == probe);
  close(after);
  fx_reopen_src(&f);
  probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
  close(probe);
  CHECK(copy_tree(f.src, -1, &o, NULL, &err) == -1);
  after = open("/dev/null", O_RDONLY | O_CLOEXEC);
  CHECK(after == probe);
  close(after);
  fx_close(&f);
}

/* The same source fd copied twice (a retry after ENOSPC, or one workspace
 * into two boxes) must copy the same tree twice. */
TEST(fd_can_be_reused) {
  struct fx f;
  fx_open(&f);
  put(f.src, "a", "a", 0644);
  mkd(f.src, "d", 0755);
  put(f.src, "d/b", "b", 0644);
  struct copy_opts o = opts_for(NULL, 64);
  struct copy_stats st;
  struct husk_err err;
  CHECK(do_copy(&f, &o, &st, &err) == 0);
  CHECK(st.files == 2 && st.dirs == 1);
  /* Second copy, same src fd, into a second destination. */
  CHECK(mkdirat(f.rootfd, "dst2", 0755) == 0);
  int dst2 = openat(f.rootfd, "dst2", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  memset(&st, 0, sizeof st);
  CHECK(copy_tree(f.src, dst2, &o, &st, &err) == 0);
  CHECK(st.files == 2 && st.dirs == 1);
  CHECK(content_is(dst2, "a", "a"));
  CHECK(content_is(dst2, "d/b", "b"));
  close(dst2);
  fx_close(&f);
}

int main(void) {
  atexit(cleanup_at_exit);
  signal(SIGALRM, on_alarm);
  alarm(600); /* a hang guard, not a timing assertion */
  RUN(copies_plain_tree);
  RUN(symlinks_are_copied_never_followed);
  RUN(destination_links_are_replaced_not_followed);
  RUN(special_files_are_skipped);
  RUN(hardlinks_stay_hardlinks);
  RUN(many_hardlinks);
  RUN(sparse_files_stay_sparse);
  RUN(depth_limit_skips);
  RUN(deep_tree_is_bounded);
  RUN(overlong_paths_are_skipped);
  RUN(modes_owners_times);
  RUN(weird_names);
  RUN(merges_into_existing_destination);
  RUN(enospc_is_an_error);
  RUN(out_of_inodes_is_an_error);
  RUN(read_only_destination);
  RUN(unreplaceable_destination_entry);
  RUN(bad_directory_fds);
  RUN(no_fd_leaks);
  RUN(fd_can_be_reused);
  return unit_done();
}
