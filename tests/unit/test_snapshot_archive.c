/* A box's writable state as one archive (src/box/snapshot_archive.c):
 * round trips between two tmpfs laid out as the spawner lays out a box
 * filesystem, and hostile archives built here with libarchive, each of
 * which must be refused without anything landing outside the target.
 *
 * The suite runs as root and aims links at host paths on purpose, so it
 * runs in a private mount namespace with everything it makes on a tmpfs
 * of its own, and /etc/passwd bind-covered by a decoy file: a broken
 * restore can only hurt the decoy, and every hostile case checks that the
 * decoy, a canary directory beside the target and the directory holding
 * both are untouched.  It needs root (it mounts tmpfs and sets owners):
 * run as another user it fails, saying so, rather than pass unseen. */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "box/snapshot_archive.h"
#include "unit.h"

#define CHECK_E(cond)                                                                              \
  do {                                                                                             \
    bool ok_ = (cond);                                                                             \
    if (!ok_)                                                                                      \
      printf("#   last error: %d (%s) %s\n", E.code, strerror(E.code), E.msg);                     \
    CHECK(ok_ &&#cond);                                                                            \
  } while (0)

#define BASE 3000000U /* the box's uid_base */
#define HOST(id) (BASE + (id))

static char top[64];      /* our tmpfs: everything the suite makes */
static char srcdir[128];  /* the box filesystem written */
static char dstdir[128];  /* the box filesystem restored into */
static char canary[128];  /* beside the target: must stay empty */
static char hostdir[128]; /* a "host" directory links aim at */
static const char decoy[] = "root:x:0:0:decoy:/root:/bin/sh\n";
static struct husk_err E;

/* A setup step that must work. */
#define DO(x)                                                                                      \
  do {                                                                                             \
    if ((x) < 0)                                                                                   \
      printf("#   %s: %s\n", #x, strerror(errno));                                                 \
  } while (0)

/* ---- fixture ------------------------------------------------------------ */

static const char *fs_size = "256m"; /* of the next new_fs() */

/* A box filesystem as make_fs() lays it out. */
static int new_fs(const char *dir) {
  if (mkdir(dir, 0700) < 0 && errno != EEXIST)
    return -1;
  char opts[64];
  snprintf(opts, sizeof opts, "size=%s,mode=0700", fs_size);
  if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
    return -1;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  static const struct {
    const char *name;
    mode_t mode;
    uid_t owner;
  } parts[] = {{"workspace", 0755, HOST(1000)}, {"tmp", 01777, HOST(0)}, {"shm", 01777, HOST(0)}};
  for (int i = 0; fd >= 0 && i < 3; i++) {
    if (mkdirat(fd, parts[i].name, 0700) < 0 ||
        fchownat(fd, parts[i].name, parts[i].owner, parts[i].owner, AT_SYMLINK_NOFOLLOW) < 0 ||
        fchmodat(fd, parts[i].name, parts[i].mode, 0) < 0) {
      close(fd);
      return -1;
    }
  }
  return fd;
}

static void drop_fs(const char *dir, int fd) {
  if (fd >= 0)
    close(fd);
  umount2(dir, MNT_DETACH);
  rmdir(dir);
}

struct sbuf {
  unsigned char *p;
  size_t len, cap, pos;
  size_t fail_after; /* out: refuse once this many bytes were taken (0: never) */
};

static int sink(void *ctx, const void *buf, size_t len) {
  struct sbuf *b = ctx;
  if (b->fail_after && b->len + len > b->fail_after) {
    errno = EPIPE;
    return -1;
  }
  if (b->len + len > b->cap) {
    b->cap = (b->len + len) * 2;
    b->p = realloc(b->p, b->cap);
  }
  memcpy(b->p + b->len, buf, len);
  b->len += len;
  return 0;
}

static ssize_t source(void *ctx, void *buf, size_t cap) {
  struct sbuf *b = ctx;
  size_t n = b->len - b->pos;
  if (n > cap)
    n = cap;
  if (n > 7777)
    n = 7777; /* odd chunks */
  memcpy(buf, b->p + b->pos, n);
  b->pos += n;
  return (ssize_t)n;
}

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      n++;
  closedir(d);
  return n;
}

static char *slurp(int dirfd, const char *path) {
  int fd = openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  char *buf = calloc(1, 4096);
  ssize_t r = read(fd, buf, 4095);
  close(fd);
  if (r < 0) {
    free(buf);
    return NULL;
  }
  return buf;
}

static bool host_untouched(void) {
  char *p = slurp(AT_FDCWD, "/etc/passwd");
  bool ok = p && !strcmp(p, decoy);
  free(p);
  char hp[192];
  snprintf(hp, sizeof hp, "%s/target", hostdir);
  p = slurp(AT_FDCWD, hp);
  ok = ok && p && !strcmp(p, "host target\n");
  free(p);
  /* top holds src (maybe), dst, canary, host, decoy: nothing else. */
  ok = ok && count_entries(canary) == 0 && count_entries(hostdir) == 1;
  DIR *d = opendir(top);
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "src") &&
        strcmp(e->d_name, "dst") && strcmp(e->d_name, "canary") && strcmp(e->d_name, "host") &&
        strcmp(e->d_name, "decoy")) {
      printf("#   stray `%s` beside the target\n", e->d_name);
      ok = false;
    }
  if (d)
    closedir(d);
  return ok;
}

static void put(int dirfd, const char *path, const char *data, mode_t mode, uid_t owner) {
  int fd = openat(dirfd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    printf("#   cannot create %s: %s\n", path, strerror(errno));
    return;
  }
  if (write(fd, data, strlen(data)) < 0)
    perror("write");
  if (fchown(fd, owner, owner) < 0 || fchmod(fd, mode) < 0)
    perror("fchown");
  close(fd);
}

static void mkd(int dirfd, const char *path, mode_t mode, uid_t owner) {
  if (mkdirat(dirfd, path, 0700) < 0 || fchownat(dirfd, path, owner, owner, 0) < 0 ||
      fchmodat(dirfd, path, mode, 0) < 0)
    printf("#   cannot make %s: %s\n", path, strerror(errno));
}

static void set_mtime(int dirfd, const char *path, time_t t) {
  struct timespec ts[2] = {{t, 123456789}, {t, 123456789}};
  utimensat(dirfd, path, ts, AT_SYMLINK_NOFOLLOW);
}

static bool owner_mode(int dirfd, const char *path, uid_t uid, mode_t mode) {
  struct stat st;
  if (fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0) {
    printf("#   %s: %s\n", path, strerror(errno));
    return false;
  }
  if (st.st_uid != uid || st.st_gid != uid || (st.st_mode & 07777) != mode) {
    printf("#   %s: uid %u gid %u mode %o\n", path, st.st_uid, st.st_gid, st.st_mode & 07777);
    return false;
  }
  return true;
}

static time_t mtime_of(int dirfd, const char *path) {
  struct stat st;
  return fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0 ? -1 : st.st_mtim.tv_sec;
}

/* ---- the round trip ------------------------------------------------------ */

#define DEEP SNAP_MAX_DEPTH
#define SNAP_VALUE_TEST 65536 /* the largest user.* value a restore takes */

/* A chain of "d" directories under workspace/deep: the one at depth DEEP
 * (kept, empty) holds "f" (too deep: skipped); the one above holds "g"
 * (depth DEEP: kept). */
static void make_deep(int ws) {
  int cur = dup(ws);
  mkdirat(cur, "deep", 0755);
  int n = openat(cur, "deep", O_RDONLY | O_DIRECTORY);
  close(cur);
  cur = n;
  for (int depth = 2; depth <= DEEP && cur >= 0; depth++) {
    if (depth == DEEP)
      put(cur, "g", "deep\n", 0644, HOST(1000));
    mkdirat(cur, "d", 0755);
    n = openat(cur, "d", O_RDONLY | O_DIRECTORY);
    close(cur);
    cur = n;
  }
  if (cur >= 0) {
    put(cur, "f", "too deep\n", 0644, HOST(1000));
    close(cur);
  }
}

static int deep_depth(int ws, bool *has_g, bool *has_f) {
  int cur = openat(ws, "deep", O_RDONLY | O_DIRECTORY);
  int depth = cur >= 0 ? 1 : 0;
  *has_g = *has_f = false;
  while (cur >= 0) {
    struct stat st;
    if (fstatat(cur, "g", &st, 0) == 0)
      *has_g = true;
    if (fstatat(cur, "f", &st, 0) == 0)
      *has_f = true;
    int n = openat(cur, "d", O_RDONLY | O_DIRECTORY);
    close(cur);
    cur = n;
    if (cur >= 0)
      depth++;
  }
  return depth;
}

static void populate(int fs) {
  int ws = openat(fs, "workspace", O_RDONLY | O_DIRECTORY);
  int tmp = openat(fs, "tmp", O_RDONLY | O_DIRECTORY);
  int shm = openat(fs, "shm", O_RDONLY | O_DIRECTORY);
  put(ws, "hello.txt", "hello, box\n", 0640, HOST(1000));
  set_mtime(ws, "hello.txt", 1700000000);
  put(ws, "setuid", "#!/bin/sh\n", 04755, HOST(1000));
  mkd(ws, "sub", 0750, HOST(1001));
  put(ws, "sub/inner", "inner\n", 0600, HOST(1001));
  mkd(ws, "empty", 0700, HOST(1000));
  mkd(ws, "ro", 0755, HOST(1000));
  put(ws, "ro/child", "child of a read-only dir\n", 0444, HOST(1000));
  DO(fchmodat(ws, "ro", 0555, 0));
  set_mtime(ws, "ro", 1600000000);
  DO(symlinkat("hello.txt", ws, "link"));
  DO(symlinkat("nowhere/at/all", ws, "dangling"));
  DO(symlinkat("/etc/shadow", ws, "abs"));
  DO(fchownat(ws, "abs", HOST(1002), HOST(1002), AT_SYMLINK_NOFOLLOW));
  put(ws, "hard1", "linked\n", 0644, HOST(1000));
  DO(linkat(ws, "hard1", tmp, "hard2", 0));
  DO(linkat(ws, "hard1", ws, "sub/hard3", 0));
  int sp = openat(ws, "sparse", O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (ftruncate(sp, 64 << 20) < 0 || pwrite(sp, "A", 1, 0) != 1 ||
      pwrite(sp, "B", 1, 32 << 20) != 1)
    perror("sparse");
  DO(fchown(sp, HOST(1000), HOST(1000)));
  close(sp);
  DO(mkfifoat(ws, "fifo", 0600));
  DO(fchmodat(ws, "fifo", 0620, 0));
  DO(fchownat(ws, "fifo", HOST(1000), HOST(1000), 0));
  put(ws, "xattr", "with xattrs\n", 0644, HOST(1000));
  int xf = openat(ws, "xattr", O_RDONLY);
  if (fsetxattr(xf, "user.test", "v1", 2, 0) < 0)
    printf("#   user xattr: %s\n", strerror(errno));
  close(xf);
  /* A socket: skipped. */
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%.80s/workspace/sock", srcdir);
  if (bind(s, (struct sockaddr *)&a, sizeof a) < 0)
    perror("bind");
  close(s);
  put(ws, "caf\xc3\xa9 \xff\xfe\n", "bytes\n", 0644, HOST(1000)); /* UTF-8, not UTF-8, a newline */
  DO(symlinkat("\xe2\x82\xac/\xff", ws, "odd-link"));
  put(tmp, "owned-by-root", "r\n", 0600, HOST(0));
  put(shm, "max-uid", "m\n", 0644, HOST(65535));
  put(shm, "host-uid", "h\n", 0644, 5); /* outside the box's range: nobody */
  make_deep(ws);
  /* An image box's upper layer. */
  mkd(fs, "rootfs", 0700, 0);
  mkd(fs, "rootfs/upper", 0755, HOST(0));
  mkd(fs, "rootfs/work", 0700, 0);
  mkd(fs, "rootfs/upper/etc", 0755, HOST(0));
  int etc = openat(fs, "rootfs/upper/etc", O_RDONLY | O_DIRECTORY);
  if (fsetxattr(etc, "trusted.overlay.opaque", "y", 1, 0) < 0)
    printf("#   opaque: %s\n", strerror(errno));
  if (mknodat(etc, "gone", S_IFCHR | 0, makedev(0, 0)) < 0)
    printf("#   whiteout: %s\n", strerror(errno));
  DO(fchownat(etc, "gone", HOST(0), HOST(0), AT_SYMLINK_NOFOLLOW));
  put(etc, "hosts", "127.0.0.1 box\n", 0644, HOST(0));
  close(etc);
  mkd(fs, "rootfs/upper/usr", 0755, HOST(0));
  put(fs, "rootfs/upper/usr/tool", "tool\n", 0755, HOST(0));
  close(ws);
  close(tmp);
  close(shm);
}

TEST(round_trip) {
  int src = new_fs(srcdir), dst = new_fs(dstdir);
  CHECK(src >= 0 && dst >= 0);
  populate(src);
  struct sbuf b = {0};
  struct snap_stats ws = {0}, rs = {0};
  CHECK_E(snap_archive_write(src, BASE, 3, sink, &b, &ws, &E) == 0);
  CHECK(b.len > 4 && b.p[0] == 0x28 && b.p[1] == 0xb5 && b.p[2] == 0x2f && b.p[3] == 0xfd);
  CHECK(ws.entries > 20);
  CHECK(ws.skipped >= 2); /* the socket, the too-deep directory's contents */
  CHECK(ws.bytes < 1 << 20);
  CHECK_E(snap_archive_read(dst, BASE, source, &b, 0, 0, &rs, &E) == 0);
  CHECK(rs.entries == ws.entries);
  CHECK(rs.bytes == ws.bytes);
  int w = openat(dst, "workspace", O_RDONLY | O_DIRECTORY);
  char *s = slurp(w, "hello.txt");
  CHECK_STR(s, "hello, box\n");
  free(s);
  CHECK(owner_mode(w, "hello.txt", HOST(1000), 0640));
  CHECK(mtime_of(w, "hello.txt") == 1700000000);
  CHECK(owner_mode(w, "setuid", HOST(1000), 0755));
  CHECK(owner_mode(w, "sub", HOST(1001), 0750));
  CHECK(owner_mode(w, "sub/inner", HOST(1001), 0600));
  CHECK(owner_mode(w, "empty", HOST(1000), 0700));
  CHECK(count_entries(dstdir) == 4); /* workspace tmp shm rootfs */
  CHECK(owner_mode(w, "ro", HOST(1000), 0555));
  CHECK(mtime_of(w, "ro") == 1600000000);
  s = slurp(w, "ro/child");
  CHECK_STR(s, "child of a read-only dir\n");
  free(s);
  CHECK(owner_mode(dst, "workspace", HOST(1000), 0755));
  CHECK(owner_mode(dst, "tmp", HOST(0), 01777));
  CHECK(owner_mode(dst, "shm", HOST(0), 01777));
  char l[PATH_MAX];
  ssize_t n = readlinkat(w, "link", l, sizeof l - 1);
  CHECK(n == 9 && !memcmp(l, "hello.txt", 9));
  n = readlinkat(w, "dangling", l, sizeof l - 1);
  CHECK(n == 14 && !memcmp(l, "nowhere/at/all", 14));
  n = readlinkat(w, "abs", l, sizeof l - 1);
  CHECK(n == 11 && !memcmp(l, "/etc/shadow", 11));
  struct stat st, st2, st3;
  CHECK(fstatat(w, "abs", &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_uid == HOST(1002));
  CHECK(fstatat(w, "hard1", &st, 0) == 0 && fstatat(dst, "tmp/hard2", &st2, 0) == 0 &&
        fstatat(w, "sub/hard3", &st3, 0) == 0);
  CHECK(st.st_ino == st2.st_ino && st.st_ino == st3.st_ino && st.st_nlink == 3);
  int sp = openat(w, "sparse", O_RDONLY);
  CHECK(fstat(sp, &st) == 0 && st.st_size == 64 << 20 && st.st_blocks * 512 < 1 << 20);
  CHECK(lseek(sp, 4096, SEEK_DATA) >= 32 << 20 && lseek(sp, 4096, SEEK_DATA) < (32 << 20) + 4096);
  char c = 0;
  CHECK(pread(sp, &c, 1, 32 << 20) == 1 && c == 'B');
  CHECK(pread(sp, &c, 1, 0) == 1 && c == 'A');
  close(sp);
  s = slurp(w, "caf\xc3\xa9 \xff\xfe\n");
  CHECK_STR(s, "bytes\n");
  free(s);
  n = readlinkat(w, "odd-link", l, sizeof l - 1);
  CHECK(n == 5 && !memcmp(l, "\xe2\x82\xac/\xff", 5));
  CHECK(fstatat(w, "fifo", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISFIFO(st.st_mode));
  CHECK(owner_mode(w, "fifo", HOST(1000), 0620));
  int xf = openat(w, "xattr", O_RDONLY);
  char xv[16] = {0};
  CHECK(fgetxattr(xf, "user.test", xv, sizeof xv) == 2 && !strcmp(xv, "v1"));
  close(xf);
  CHECK(fstatat(w, "sock", &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);
  CHECK(owner_mode(dst, "tmp/owned-by-root", HOST(0), 0600));
  CHECK(owner_mode(dst, "shm/max-uid", HOST(65535), 0644));
  CHECK(owner_mode(dst, "shm/host-uid", HOST(65534), 0644));
  bool g, f;
  CHECK(deep_depth(w, &g, &f) == DEEP);
  CHECK(g && !f);
  /* The upper layer: rootfs/ host root's, no work/ (the spawner makes it). */
  CHECK(owner_mode(dst, "rootfs", 0, 0700));
  CHECK(owner_mode(dst, "rootfs/upper", HOST(0), 0755));
  CHECK(fstatat(dst, "rootfs/work", &st, 0) < 0 && errno == ENOENT);
  int etc = openat(dst, "rootfs/upper/etc", O_RDONLY | O_DIRECTORY);
  CHECK(etc >= 0);
  memset(xv, 0, sizeof xv);
  CHECK(fgetxattr(etc, "trusted.overlay.opaque", xv, sizeof xv) == 1 && xv[0] == 'y');
  CHECK(fstatat(etc, "gone", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISCHR(st.st_mode) &&
        st.st_rdev == makedev(0, 0) && st.st_uid == HOST(0));
  s = slurp(etc, "hosts");
  CHECK_STR(s, "127.0.0.1 box\n");
  free(s);
  close(etc);
  CHECK(owner_mode(dst, "rootfs/upper/usr/tool", HOST(0), 0755));
  CHECK(host_untouched());
  close(w);
  free(b.p);
  drop_fs(srcdir, src);
  drop_fs(dstdir, dst);
}

/* A box of the default template: no upper/, and none made on restore. */
TEST(no_upper) {
  int src = new_fs(srcdir), dst = new_fs(dstdir);
  put(src, "workspace/a", "a\n", 0644, HOST(1000));
  struct sbuf b = {0};
  struct snap_stats ws, rs;
  CHECK_E(snap_archive_write(src, BASE, 1, sink, &b, &ws, &E) == 0);
  CHECK(ws.entries == 4 && ws.skipped == 0 && ws.bytes == 2);
  CHECK_E(snap_archive_read(dst, BASE, source, &b, 0, 0, &rs, &E) == 0);
  CHECK(rs.entries == 4);
  CHECK(count_entries(dstdir) == 3);
  char *s = slurp(dst, "workspace/a");
  CHECK_STR(s, "a\n");
  free(s);
  /* A level outside 1..19. */
  CHECK(snap_archive_write(src, BASE, 0, sink, &b, &ws, &E) < 0 && E.code == EINVAL);
  free(b.p);
  drop_fs(srcdir, src);
  drop_fs(dstdir, dst);
}

/* The consumer stops reading: an error, and what it got does not restore. */
TEST(consumer_fails) {
  int src = new_fs(srcdir), dst = new_fs(dstdir);
  int big = openat(src, "workspace/big", O_WRONLY | O_CREAT | O_EXCL, 0644);
  char *junk = malloc(1 << 20);
  uint64_t x = 88172645463325252ULL; /* xorshift: incompressible */
  for (int i = 0; i < 1 << 20; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    junk[i] = (char)x;
  }
  for (int i = 0; i < 4; i++)
    CHECK(write(big, junk, 1 << 20) == 1 << 20);
  close(big);
  free(junk);
  struct sbuf b = {.fail_after = 100000};
  struct snap_stats ws;
  CHECK(snap_archive_write(src, BASE, 1, sink, &b, &ws, &E) < 0 && E.code == EPIPE);
  CHECK(b.len > 0 && b.len <= 100000);
  b.fail_after = 0;
  CHECK(snap_archive_read(dst, BASE, source, &b, 0, 0, NULL, &E) < 0);
  CHECK(host_untouched());
  drop_fs(dstdir, dst);
  /* The whole archive into a box filesystem too small for it: ENOSPC. */
  b.len = b.pos = 0;
  CHECK_E(snap_archive_write(src, BASE, 1, sink, &b, &ws, &E) == 0);
  fs_size = "1m";
  dst = new_fs(dstdir);
  fs_size = "256m";
  CHECK(snap_archive_read(dst, BASE, source, &b, 0, 0, NULL, &E) < 0 && E.code == ENOSPC);
  CHECK(host_untouched());
  free(b.p);
  drop_fs(srcdir, src);
  drop_fs(dstdir, dst);
}

/* ---- hostile archives ------------------------------------------------------ */

struct hent {
  const char *name;
  mode_t type; /* AE_IF*; 0 = AE_IFREG */
  const char *data;
  const char *link; /* symlink target */
  const char *hard; /* hardlink target */
  int64_t uid;
  unsigned maj, min;
  const char *xname, *xval;
  mode_t perm;
};

enum { F_ZSTD, F_NONE, F_GZIP };

static la_ssize_t writecb(struct archive *a, void *ctx, const void *buf, size_t len) {
  (void)a;
  return sink(ctx, buf, len) < 0 ? -1 : (la_ssize_t)len;
}

static void build_archive(const struct hent *es, size_t n, int filter, struct sbuf *out) {
  struct archive *a = archive_write_new();
  archive_write_set_format_pax(a);
  if (filter == F_ZSTD)
    archive_write_add_filter_zstd(a);
  else if (filter == F_GZIP)
    archive_write_add_filter_gzip(a);
  archive_write_set_bytes_in_last_block(a, 1);
  archive_write_open2(a, out, NULL, writecb, NULL, NULL);
  for (size_t i = 0; i < n; i++) {
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, es[i].name);
    mode_t type = es[i].type ? es[i].type : AE_IFREG;
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, es[i].perm ? es[i].perm : 0644);
    archive_entry_set_uid(e, es[i].uid);
    archive_entry_set_gid(e, es[i].uid);
    archive_entry_set_mtime(e, 1700000000, 0);
    if (es[i].link)
      archive_entry_set_symlink(e, es[i].link);
    if (es[i].hard)
      archive_entry_set_hardlink(e, es[i].hard);
    if (type == AE_IFCHR || type == AE_IFBLK) {
      archive_entry_set_rdevmajor(e, es[i].maj);
      archive_entry_set_rdevminor(e, es[i].min);
    }
    if (es[i].xname)
      archive_entry_xattr_add_entry(e, es[i].xname, es[i].xval, strlen(es[i].xval));
    size_t len = es[i].data ? strlen(es[i].data) : 0;
    archive_entry_set_size(e, type == AE_IFREG && !es[i].hard ? (la_int64_t)len : 0);
    if (archive_write_header(a, e) != ARCHIVE_OK)
      printf("#   cannot build `%s`: %s\n", es[i].name, archive_error_string(a));
    if (len && type == AE_IFREG && !es[i].hard)
      archive_write_data(a, es[i].data, len);
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

/* Restore es into a fresh box filesystem; the return of snap_archive_read. */
static int restore(const struct hent *es, size_t n, int filter, uint64_t max_bytes,
                   uint64_t max_entries, int *fs_out) {
  struct sbuf b = {0};
  build_archive(es, n, filter, &b);
  int dst = new_fs(dstdir);
  int rc = snap_archive_read(dst, BASE, source, &b, max_bytes, max_entries, NULL, &E);
  free(b.p);
  if (fs_out)
    *fs_out = dst;
  else
    drop_fs(dstdir, dst);
  return rc;
}

#define ROOTS                                                                                      \
  { .name = "workspace/", .type = AE_IFDIR, .uid = 1000, .perm = 0755 }

/* Each case: what the archive tries, and that it is refused with `code`
 * and nothing lands outside. */
static void refused(const char *what, const struct hent *es, size_t n, int code) {
  int rc = restore(es, n, F_ZSTD, 0, 0, NULL);
  if (rc == 0 || E.code != code)
    printf("#   %s: rc %d, error %d (%s)\n", what, rc, E.code, E.msg);
  if (getenv("SNAP_VERBOSE"))
    printf("#   %s: %s\n", what, E.msg);
  CHECK(rc < 0 && E.code == code);
  CHECK(host_untouched());
}
#define REFUSED(what, code, ...)                                                                   \
  do {                                                                                             \
    const struct hent es_[] = {__VA_ARGS__};                                                       \
    refused(what, es_, sizeof es_ / sizeof *es_, code);                                            \
  } while (0)

TEST(hostile_names) {
  REFUSED("dot-dot", EINVAL, {.name = "../x", .data = "x"});
  REFUSED("absolute", EINVAL, {.name = "/abs", .data = "x"});
  REFUSED("climb", EINVAL, ROOTS, {.name = "workspace/../../x", .data = "x"});
  REFUSED("dot", EINVAL, ROOTS, {.name = "workspace/./x", .data = "x"});
  REFUSED("empty component", EINVAL, ROOTS, {.name = "workspace//x", .data = "x"});
  REFUSED("outside the roots", EINVAL, {.name = "etc/x", .data = "x"});
  REFUSED("rootfs itself", EINVAL, {.name = "rootfs/upper/x", .data = "x"});
  REFUSED("a root as a file", EINVAL, {.name = "workspace", .data = "x"});
  REFUSED("control chars", EINVAL, {.name = "work\x1b[2Jspace/x", .data = "x"});
  CHECK(!strchr(E.msg, '\x1b'));
  char longname[PATH_MAX + 16] = "workspace/";
  memset(longname + 10, 'a', PATH_MAX);
  longname[PATH_MAX + 10] = '\0';
  REFUSED("too long", EINVAL, ROOTS, {.name = longname, .data = "x"});
  /* Deeper than SNAP_MAX_DEPTH. */
  static char deep[4 * (SNAP_MAX_DEPTH + 2) + 16];
  size_t o = (size_t)snprintf(deep, sizeof deep, "workspace");
  for (int i = 0; i <= SNAP_MAX_DEPTH; i++)
    o += (size_t)snprintf(deep + o, sizeof deep - o, "/d");
  REFUSED("too deep", EINVAL, ROOTS, {.name = deep, .data = "x"});
  REFUSED("missing parent", EINVAL, ROOTS, {.name = "workspace/no/x", .data = "x"});
}

TEST(hostile_links) {
  char hostlink[192], hosttarget[192];
  snprintf(hostlink, sizeof hostlink, "%s", hostdir);
  snprintf(hosttarget, sizeof hosttarget, "%s/target", hostdir);
  /* A symlink to /etc, then a file through it: the decoy stays. */
  REFUSED("through /etc", EINVAL, ROOTS, {.name = "workspace/l", .type = AE_IFLNK, .link = "/etc"},
          {.name = "workspace/l/passwd", .data = "pwned\n"});
  REFUSED("through a host dir", EINVAL, ROOTS,
          {.name = "workspace/l", .type = AE_IFLNK, .link = hostlink},
          {.name = "workspace/l/new", .data = "pwned\n"});
  REFUSED("through ../..", EINVAL, ROOTS,
          {.name = "workspace/l", .type = AE_IFLNK, .link = "../../.."},
          {.name = "workspace/l/x", .data = "pwned\n"});
  REFUSED("hardlink to /etc/passwd", EINVAL, ROOTS, {.name = "workspace/h", .hard = "/etc/passwd"});
  REFUSED("hardlink to ../..", EINVAL, ROOTS, {.name = "workspace/h", .hard = "../../decoy"});
  REFUSED("hardlink to a dir", EINVAL, ROOTS, {.name = "workspace/d/", .type = AE_IFDIR},
          {.name = "workspace/h", .hard = "workspace/d"});
  REFUSED("hardlink to nothing", EINVAL, ROOTS, {.name = "workspace/h", .hard = "workspace/none"});
  REFUSED("hardlink through a symlink", EINVAL, ROOTS,
          {.name = "workspace/l", .type = AE_IFLNK, .link = hostlink},
          {.name = "workspace/h", .hard = "workspace/l/target"});
  REFUSED("hardlink to a symlink", EINVAL, ROOTS,
          {.name = "workspace/l", .type = AE_IFLNK, .link = hosttarget},
          {.name = "workspace/h", .hard = "workspace/l"});
  REFUSED("a file over a directory", EINVAL, ROOTS, {.name = "workspace/d/", .type = AE_IFDIR},
          {.name = "workspace/d", .data = "x"});

  /* A file over an earlier symlink to a host file replaces the link. */
  int dst;
  const struct hent over[] = {ROOTS,
                              {.name = "workspace/s", .type = AE_IFLNK, .link = hosttarget},
                              {.name = "workspace/s", .data = "mine\n"}};
  CHECK_E(restore(over, 3, F_ZSTD, 0, 0, &dst) == 0);
  struct stat st;
  CHECK(fstatat(dst, "workspace/s", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode));
  char *s = slurp(dst, "workspace/s");
  CHECK_STR(s, "mine\n");
  free(s);
  drop_fs(dstdir, dst);
  CHECK(host_untouched());
  /* A hardlink to a file restored before it is fine; setuid is dropped. */
  const struct hent ok[] = {ROOTS,
                            {.name = "workspace/f", .data = "f\n", .perm = 06755},
                            {.name = "workspace/h", .hard = "workspace/f"}};
  CHECK_E(restore(ok, 3, F_ZSTD, 0, 0, &dst) == 0);
  CHECK(owner_mode(dst, "workspace/f", HOST(0), 0755));
  struct stat st2;
  CHECK(fstatat(dst, "workspace/h", &st2, 0) == 0 && fstatat(dst, "workspace/f", &st, 0) == 0 &&
        st.st_ino == st2.st_ino);
  drop_fs(dstdir, dst);
  CHECK(host_untouched());
}

TEST(hostile_kinds) {
  const struct hent up = {.name = "upper/", .type = AE_IFDIR, .perm = 0755};
  REFUSED("block device", EINVAL, up, {.name = "upper/sda", .type = AE_IFBLK, .maj = 8});
  REFUSED("char 1:3", EINVAL, up, {.name = "upper/null", .type = AE_IFCHR, .maj = 1, .min = 3});
  REFUSED("whiteout outside upper", EINVAL, ROOTS, {.name = "workspace/wh", .type = AE_IFCHR});
  REFUSED("uid 70000", EINVAL, ROOTS, {.name = "workspace/x", .data = "x", .uid = 70000});
  REFUSED(
      "overlay redirect", EINVAL, up,
      {.name = "upper/d/", .type = AE_IFDIR, .xname = "trusted.overlay.redirect", .xval = "/etc"});
  REFUSED("opaque on a file", EINVAL, up,
          {.name = "upper/f", .data = "x", .xname = "trusted.overlay.opaque", .xval = "y"});
  REFUSED(
      "opaque outside upper", EINVAL, ROOTS,
      {.name = "workspace/d/", .type = AE_IFDIR, .xname = "trusted.overlay.opaque", .xval = "y"});
  REFUSED("opaque value", EINVAL, up,
          {.name = "upper/d/", .type = AE_IFDIR, .xname = "trusted.overlay.opaque", .xval = "yes"});
  REFUSED("security xattr", EINVAL, ROOTS,
          {.name = "workspace/f", .data = "x", .xname = "security.capability", .xval = "x"});
  static char big[SNAP_VALUE_TEST + 2];
  memset(big, 'v', SNAP_VALUE_TEST + 1);
  REFUSED("xattr value too big", EINVAL, ROOTS,
          {.name = "workspace/f", .data = "x", .xname = "user.big", .xval = big});
  /* The largest value is fine (libarchive reports it twice: counted once). */
  big[SNAP_VALUE_TEST] = '\0';
  int fs;
  const struct hent bx[] = {ROOTS,
                            {.name = "workspace/f", .data = "x", .xname = "user.big", .xval = big}};
  CHECK_E(restore(bx, 2, F_ZSTD, 0, 0, &fs) == 0);
  drop_fs(dstdir, fs);
  /* A whiteout under upper/ is fine; rootfs/ is made for it. */
  int dst;
  const struct hent wh[] = {up, {.name = "upper/gone", .type = AE_IFCHR}};
  CHECK_E(restore(wh, 2, F_ZSTD, 0, 0, &dst) == 0);
  struct stat st;
  CHECK(fstatat(dst, "rootfs/upper/gone", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISCHR(st.st_mode) &&
        st.st_rdev == 0);
  CHECK(owner_mode(dst, "rootfs", 0, 0700));
  drop_fs(dstdir, dst);
  CHECK(host_untouched());
}

TEST(hostile_streams) {
  const struct hent es[] = {ROOTS,
                            {.name = "workspace/a", .data = "0123456789abcdef"},
                            {.name = "workspace/b", .data = "0123456789abcdef"}};
  /* max_bytes and max_entries. */
  CHECK(restore(es, 3, F_ZSTD, 20, 0, NULL) < 0 && E.code == EFBIG && strstr(E.msg, "20 bytes"));
  CHECK_E(restore(es, 3, F_ZSTD, 32, 0, NULL) == 0);
  CHECK(restore(es, 3, F_ZSTD, 0, 2, NULL) < 0 && E.code == EFBIG);
  CHECK_E(restore(es, 3, F_ZSTD, 0, 3, NULL) == 0);
  /* Uncompressed is accepted; gzip is not. */
  CHECK_E(restore(es, 3, F_NONE, 0, 0, NULL) == 0);
  CHECK(restore(es, 3, F_GZIP, 0, 0, NULL) < 0);
  CHECK(host_untouched());

  /* Truncated: half the compressed bytes; and a tar cut at an entry's
   * boundary (no end-of-archive marker). */
  struct sbuf b = {0};
  int src = new_fs(srcdir);
  populate(src);
  CHECK_E(snap_archive_write(src, BASE, 3, sink, &b, NULL, &E) == 0);
  drop_fs(srcdir, src);
  size_t full = b.len;
  b.len = full / 2;
  int dst = new_fs(dstdir);
  CHECK(snap_archive_read(dst, BASE, source, &b, 0, 0, NULL, &E) < 0);
  printf("#   half: %s\n", E.msg);
  drop_fs(dstdir, dst);
  b.len = full - 1;
  b.pos = 0;
  dst = new_fs(dstdir);
  CHECK(snap_archive_read(dst, BASE, source, &b, 0, 0, NULL, &E) < 0);
  drop_fs(dstdir, dst);
  free(b.p);
  b = (struct sbuf){0};
  build_archive(es, 3, F_NONE, &b);
  CHECK(b.len > 1024 && b.len % 512 == 0);
  b.len -= 1024;
  dst = new_fs(dstdir);
  CHECK(snap_archive_read(dst, BASE, source, &b, 0, 0, NULL, &E) < 0 && E.code == EIO);
  drop_fs(dstdir, dst);
  free(b.p);
  /* Garbage, and nothing at all. */
  unsigned char junk[4096];
  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] = (unsigned char)(i * 131 + 7);
  b = (struct sbuf){.p = junk, .len = sizeof junk};
  dst = new_fs(dstdir);
  CHECK(snap_archive_read(dst, BASE, source, &b, 0, 0, NULL, &E) < 0);
  b = (struct sbuf){.p = junk, .len = 0};
  CHECK(snap_archive_read(dst, BASE, source, &b, 0, 0, NULL, &E) < 0);
  drop_fs(dstdir, dst);
  CHECK(host_untouched());
}

/* Damaged archives: a real snapshot (uncompressed, so the damage reaches
 * the tar headers) with bytes overwritten at random.  Restores may fail
 * or succeed; none may crash or write outside the target. */
TEST(mutations) {
  int src = new_fs(srcdir);
  populate(src);
  struct sbuf z = {0};
  CHECK_E(snap_archive_write(src, BASE, 1, sink, &z, NULL, &E) == 0);
  drop_fs(srcdir, src);
  /* Decompress it with libarchive's raw reader to mutate the tar itself. */
  struct archive *a = archive_read_new();
  archive_read_support_filter_zstd(a);
  archive_read_support_format_raw(a);
  struct sbuf tar = {0};
  struct archive_entry *e;
  if (archive_read_open_memory(a, z.p, z.len) == ARCHIVE_OK &&
      archive_read_next_header(a, &e) == ARCHIVE_OK) {
    char chunk[65536];
    la_ssize_t n;
    while ((n = archive_read_data(a, chunk, sizeof chunk)) > 0)
      sink(&tar, chunk, (size_t)n);
  }
  archive_read_free(a);
  free(z.p);
  CHECK(tar.len > 4096);
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  int ok = 0, failed = 0;
  unsigned char *copy = malloc(tar.len);
  int rounds = getenv("SNAP_MUTATIONS") ? atoi(getenv("SNAP_MUTATIONS")) : 150;
  for (int round = 0; round < rounds && tar.len > 0; round++) {
    memcpy(copy, tar.p, tar.len);
    for (int k = 0; k < 1 + round % 8; k++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      /* Mostly in the first blocks, where the headers of the roots are. */
      size_t at = (size_t)(x >> 8) % (round % 2 ? tar.len : (tar.len < 8192 ? tar.len : 8192));
      copy[at] = (unsigned char)(x >> 56);
    }
    struct sbuf b = {.p = copy, .len = tar.len};
    int dst = new_fs(dstdir);
    if (snap_archive_read(dst, BASE, source, &b, 64 << 20, 100000, NULL, &E) == 0)
      ok++;
    else
      failed++;
    drop_fs(dstdir, dst);
  }
  printf("#   mutations: %d restored, %d refused\n", ok, failed);
  CHECK(failed > 0);
  CHECK(host_untouched());
  free(copy);
  free(tar.p);
}

/* ---- main ------------------------------------------------------------------ */

static int setup(void) {
  if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
      mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=0700") < 0)
    return -1;
  snprintf(srcdir, sizeof srcdir, "%s/src", top);
  snprintf(dstdir, sizeof dstdir, "%s/dst", top);
  snprintf(canary, sizeof canary, "%s/canary", top);
  snprintf(hostdir, sizeof hostdir, "%s/host", top);
  char p[192];
  snprintf(p, sizeof p, "%s/decoy", top);
  int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 || write(fd, decoy, strlen(decoy)) < 0)
    return -1;
  close(fd);
  if (mount(p, "/etc/passwd", NULL, MS_BIND, NULL) < 0)
    return -1;
  if (mkdir(canary, 0755) < 0 || mkdir(hostdir, 0755) < 0)
    return -1;
  snprintf(p, sizeof p, "%s/target", hostdir);
  fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 || write(fd, "host target\n", 12) != 12)
    return -1;
  close(fd);
  return 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (geteuid() != 0) {
    printf("not ok 1 - needs root (mounts tmpfs, sets owners): run the suite as root\n");
    return 1;
  }
  snprintf(top, sizeof top, "/tmp/husk-snap-XXXXXX");
  if (!mkdtemp(top)) {
    printf("not ok 1 - mkdtemp: %s\n", strerror(errno));
    return 1;
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    if (setup() < 0) {
      printf("not ok 1 - cannot set the suite up: %s\n", strerror(errno));
      _exit(1);
    }
    RUN(round_trip);
    RUN(no_upper);
    RUN(consumer_fails);
    RUN(hostile_names);
    RUN(hostile_links);
    RUN(hostile_kinds);
    RUN(hostile_streams);
    RUN(mutations);
    exit(unit_done()); /* exit: LeakSanitizer checks the suite at exit */
  }
  int st = 0;
  bool waited = pid > 0 && waitpid(pid, &st, 0) == pid;
  rmdir(top); /* its tmpfs went with the namespace */
  return waited && WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
