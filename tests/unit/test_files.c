/* The files API and tar streams of a box, against a real tmpfs laid out as
 * the daemon sees a box (workspace/, tmp/, shm/), beside a "host" that
 * nothing may ever touch: planted symlinks, hostile archives, a box racing
 * the daemon with RENAME_EXCHANGE.
 *
 * The suite runs as root and its whole point is to aim hostile links at
 * host paths, so it must not be able to hurt the machine if the code under
 * test is broken: it runs in new mount and pid namespaces, chrooted into a
 * temp directory that plays the host (its own /etc/passwd, /tmp/host/secret,
 * a fresh read-only /proc, /usr bound read-only), and every check compares
 * a snapshot of that whole host.  Skips when not root. */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
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
#include <time.h>
#include <unistd.h>

#include "box/files.h"
#include "box/tar.h"
#include "unit.h"

/* CHECK, plus the last error's code and message when it fails. */
#define CHECK_E(cond)                                                                     \
  do {                                                                                    \
    bool ok_ = (cond);                                                                    \
    if (!ok_)                                                                             \
      printf("#   last error: %d (%s) %s\n", E.code, strerror(E.code), E.msg);            \
    CHECK(ok_ && #cond);                                                                  \
  } while (0)

#define UID ((uid_t)0x40000000 + 1000)
#define GID ((gid_t)0x40000000 + 1000)

/* Paths inside the jail (the temp directory is its "/"). */
static const char boxdir[] = "/box";           /* the box tmpfs */
static const char hostdir[] = "/tmp/host";     /* a host directory */
static const char secret[] = "/tmp/host/secret";
static const char fake_passwd[] = "root:x:0:0:the jail's passwd:/root:/bin/sh\n";
static char base[64];                          /* the jail, seen from outside */
static struct husk_fs B;
static struct husk_err E;
static int WS; /* fd of workspace/ for planting things as box code would */

/* ---- fixture ------------------------------------------------------------ */

static int mount_box(const char *dir, const char *opts) {
  if (mkdir(dir, 0700) < 0 && errno != EEXIST)
    return -1;
  if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
    return -1;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  static const char *const areas[] = {"workspace", "tmp", "shm"};
  for (int i = 0; i < 3; i++) {
    if ((mkdirat(fd, areas[i], 0755) < 0 && errno != EEXIST) ||
        fchownat(fd, areas[i], i == 0 ? UID : 0x40000000, i == 0 ? GID : 0x40000000, 0) < 0 ||
        fchmodat(fd, areas[i], i == 0 ? 0755 : 01777, 0) < 0) {
      close(fd);
      return -1;
    }
  }
  return fd;
}

static void write_host(const char *path, const char *data) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    if (write(fd, data, strlen(data)) < 0)
      perror("write");
    close(fd);
  }
}

/* Build the jail in `base` and enter it (we are in our own namespaces). */
static int enter_jail(void) {
  char p[128];
  static const char *const dirs[] = {"proc", "usr", "etc", "tmp", "tmp/host", "tmp/host/sub"};
  for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
    snprintf(p, sizeof p, "%s/%s", base, dirs[i]);
    if (mkdir(p, 0755) < 0)
      return -1;
  }
  static const char *const links[][2] = {{"usr/bin", "bin"}, {"usr/lib", "lib"}, {"usr/lib64", "lib64"}};
  for (size_t i = 0; i < sizeof links / sizeof *links; i++) {
    snprintf(p, sizeof p, "%s/%s", base, links[i][1]);
    if (symlink(links[i][0], p) < 0)
      return -1;
  }
  /* /usr read-only (for the sanitizers' symbolizer), a /proc of our own pid namespace. */
  snprintf(p, sizeof p, "%s/usr", base);
  if (mount("/usr", p, NULL, MS_BIND | MS_REC, NULL) < 0 ||
      mount(NULL, p, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
    return -1;
  snprintf(p, sizeof p, "%s/proc", base);
  if (mount("proc", p, "proc", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    return -1;
  if (chroot(base) < 0 || chdir("/") < 0)
    return -1;
  write_host("/etc/passwd", fake_passwd);
  write_host(secret, "HOST SECRET\n");
  write_host("/tmp/host/sub/inner.txt", "host inner\n");
  B = (struct husk_fs){.uid = UID, .gid = GID};
  if ((B.fs = mount_box(boxdir, "size=64m,mode=0700")) < 0)
    return -1;
  WS = openat(B.fs, "workspace", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return WS < 0 ? -1 : 0;
}

static int rm_cb(const char *p, const struct stat *s, int flag, struct FTW *f) {
  (void)s, (void)flag, (void)f;
  remove(p);
  return 0;
}

/* Everything about the host directory, to compare before and after. */
static char *snap_buf;
static size_t snap_len, snap_cap;
static int snap_cb(const char *p, const struct stat *s, int flag, struct FTW *f) {
  (void)flag, (void)f;
  char line[1024];
  int n = snprintf(line, sizeof line, "%s %o %lld %lld.%09ld %lu|", p, (unsigned)s->st_mode,
                   (long long)s->st_size, (long long)s->st_mtim.tv_sec, s->st_mtim.tv_nsec,
                   (unsigned long)s->st_nlink);
  if (S_ISREG(s->st_mode)) {
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    ssize_t r = fd >= 0 ? read(fd, line + n, sizeof line - (size_t)n - 1) : -1;
    if (r > 0)
      n += (int)r;
    close(fd);
  }
  if (snap_len + (size_t)n + 1 > snap_cap) {
    snap_cap = (snap_len + (size_t)n + 1) * 2;
    snap_buf = realloc(snap_buf, snap_cap);
  }
  memcpy(snap_buf + snap_len, line, (size_t)n);
  snap_len += (size_t)n;
  snap_buf[snap_len] = '\0';
  return 0;
}
/* The whole host side of the jail: every file but the box's (and /proc,
 * /usr: other filesystems, which FTW_MOUNT leaves out). */
static char *host_snapshot(void) {
  snap_buf = NULL;
  snap_len = snap_cap = 0;
  nftw("/", snap_cb, 16, FTW_PHYS | FTW_MOUNT);
  return snap_buf ? snap_buf : strdup("");
}

/* ---- API helpers ----------------------------------------------------------- */

static int put(const char *path, const char *data, bool mkparents) {
  int fd;
  char tmp[HUSK_TMPNAME_MAX];
  if (husk_file_create(&B, path, mkparents, 0644, &fd, tmp, sizeof tmp, &E) < 0)
    return -1;
  size_t n = strlen(data);
  if (write(fd, data, n) != (ssize_t)n) {
    husk_file_abort(&B, path, fd, tmp);
    close(fd);
    return -1;
  }
  int rc = husk_file_commit(&B, path, fd, tmp, &E);
  if (rc < 0)
    husk_file_abort(&B, path, fd, tmp);
  close(fd);
  return rc;
}

static char *get(const char *path) {
  int fd;
  struct stat st;
  if (husk_file_open_read(&B, path, &fd, &st, &E) < 0)
    return NULL;
  size_t cap = (size_t)st.st_size + 1, len = 0;
  char *buf = malloc(cap + 1);
  ssize_t r;
  while ((r = read(fd, buf + len, cap - len)) > 0) {
    len += (size_t)r;
    if (len == cap)
      buf = realloc(buf, (cap *= 2) + 1);
  }
  buf[len] = '\0';
  close(fd);
  return buf;
}

static bool get_is(const char *path, const char *want) {
  char *s = get(path);
  bool ok = s && !strcmp(s, want);
  free(s);
  return ok;
}

static bool exists_at(int dirfd, const char *p) {
  struct stat st;
  return fstatat(dirfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  while (d && readdir(d))
    n++;
  if (d)
    closedir(d);
  return n;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Tests plant copies of the host paths inside the box's own /tmp (where a
 * link to "/tmp/host" really points); later tests want them gone. */
static void drop_decoys(void) {
  husk_file_remove(&B, hostdir, true, &E);
}

/* ---- tests ------------------------------------------------------------------ */

TEST(path_mapping) {
  CHECK(put("/workspace/a.txt", "A", false) == 0);
  CHECK(get_is("a.txt", "A"));
  CHECK(get_is("/workspace/./a.txt", "A"));
  CHECK(get_is("//workspace//a.txt", "A"));
  CHECK(put("/tmp/t.txt", "T", false) == 0);
  CHECK(put("/dev/shm/s.txt", "S", false) == 0);
  CHECK(exists_at(B.fs, "tmp/t.txt"));
  CHECK(exists_at(B.fs, "shm/s.txt"));
  CHECK(get_is("/dev//shm/s.txt", "S"));
  /* ".." follows the box's layout: /workspace/.. is the box's "/". */
  CHECK(get_is("/workspace/../tmp/t.txt", "T"));
  CHECK(get_is("../tmp/t.txt", "T"));
  CHECK(get_is("/dev/shm/../shm/s.txt", "S"));
  CHECK(get_is("/../../workspace/a.txt", "A"));

  static const char *const denied[] = {"/etc/passwd", "/proc/self/environ", "/usr/bin/env", "/",
                                       "/workspacefoo", "/dev/null", "/dev", "/workspace/../etc/passwd",
                                       "../../../etc/passwd", "/dev/shm/../../etc/shadow", ".."};
  for (size_t i = 0; i < sizeof denied / sizeof *denied; i++) {
    char *s = get(denied[i]);
    CHECK(s == NULL);
    CHECK_E(E.code == EACCES);
    free(s);
    CHECK(strstr(E.msg, "only /workspace, /tmp and /dev/shm") != NULL);
    /* ".." is not even an entry name to write to. */
    CHECK_E(put(denied[i], "x", true) < 0 && E.code == (strcmp(denied[i], "..") ? EACCES : EINVAL));
  }
  CHECK_E(husk_file_mkdir(&B, "/etc/x", true, &E) < 0 && E.code == EACCES);
  CHECK_E(husk_file_remove(&B, "/usr", true, &E) < 0 && E.code == EACCES);

  CHECK_E(get("") == NULL && E.code == EINVAL);
  CHECK_E(husk_path_check("a\0b", 3, &E) < 0 && E.code == EINVAL);
  CHECK_E(husk_path_check("a/b", 3, &E) == 0);
  char *longp = malloc(PATH_MAX + 100);
  memset(longp, 'a', PATH_MAX + 99);
  longp[PATH_MAX + 99] = '\0';
  CHECK_E(get(longp) == NULL && E.code == ENAMETOOLONG);
  CHECK_E(husk_path_check(longp, strlen(longp), &E) < 0 && E.code == ENAMETOOLONG);
  longp[300] = '\0'; /* one 300-byte component */
  CHECK_E(put(longp, "x", false) < 0 && E.code == ENAMETOOLONG);
  free(longp);
  /* Area roots are not entries. */
  CHECK_E(husk_file_remove(&B, "/workspace", true, &E) < 0 && E.code == EBUSY);
  CHECK_E(husk_file_remove(&B, "/dev/shm", false, &E) < 0 && E.code == EBUSY);
  CHECK_E(husk_file_move(&B, "/tmp", "/workspace/tmp2", false, &E) < 0 && E.code == EBUSY);
  CHECK_E(husk_file_move(&B, "a.txt", "/workspace", true, &E) < 0 && E.code == EBUSY);
  CHECK_E(put("/workspace", "x", false) < 0 && E.code == EISDIR);
  CHECK_E(husk_file_remove(&B, "/workspace/..", true, &E) < 0 && E.code == EINVAL);
  CHECK_E(husk_file_remove(&B, ".", true, &E) < 0 && E.code == EINVAL);
  CHECK(exists_at(B.fs, "workspace/a.txt"));
}

TEST(write_read_roundtrip) {
  CHECK_E(put("d1/d2/f.txt", "hello", false) < 0 && E.code == ENOENT);
  CHECK(put("d1/d2/f.txt", "hello", true) == 0);
  CHECK(get_is("/workspace/d1/d2/f.txt", "hello"));
  struct stat st;
  CHECK(fstatat(WS, "d1/d2/f.txt", &st, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK(st.st_uid == UID && st.st_gid == GID && (st.st_mode & 07777) == 0644);
  CHECK(fstatat(WS, "d1", &st, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK(S_ISDIR(st.st_mode) && st.st_uid == UID && st.st_gid == GID && (st.st_mode & 07777) == 0755);
  CHECK(fstatat(WS, "d1/d2", &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_uid == UID);
  /* Replace: atomically, a new inode. */
  CHECK(fstatat(WS, "d1/d2/f.txt", &st, 0) == 0);
  ino_t old = st.st_ino;
  CHECK(put("d1/d2/f.txt", "bye", false) == 0);
  CHECK(get_is("d1/d2/f.txt", "bye"));
  CHECK(fstatat(WS, "d1/d2/f.txt", &st, 0) == 0 && st.st_ino != old);
  /* setuid/setgid are never set. */
  int fd;
  char tmp[HUSK_TMPNAME_MAX];
  CHECK_E(husk_file_create(&B, "suid", false, 06755, &fd, tmp, sizeof tmp, &E) == 0);
  CHECK(tmp[0] == '\0'); /* O_TMPFILE on tmpfs */
  CHECK_E(husk_file_commit(&B, "suid", fd, tmp, &E) == 0);
  close(fd);
  CHECK(fstatat(WS, "suid", &st, 0) == 0 && (st.st_mode & 07777) == 0755);
  /* Abort leaves nothing behind. */
  CHECK_E(husk_file_create(&B, "aborted", false, 0644, &fd, tmp, sizeof tmp, &E) == 0);
  CHECK(write(fd, "zzz", 3) == 3);
  husk_file_abort(&B, "aborted", fd, tmp);
  close(fd);
  CHECK(!exists_at(WS, "aborted"));
  /* A directory is not overwritten by a file. */
  CHECK_E(put("d1", "x", false) < 0 && E.code == EISDIR);
  CHECK_E(put("d1/d2/", "x", false) < 0 && E.code == EISDIR);
  CHECK_E(put("d1/d2/f.txt/x", "x", true) < 0 && E.code == ENOTDIR);
  CHECK_E(get("d1") == NULL && E.code == EISDIR);
  CHECK_E(get("nope") == NULL && E.code == ENOENT);
  /* An empty body is a file too. */
  CHECK(put("empty", "", false) == 0 && get_is("empty", ""));
  /* A big one, streamed. */
  CHECK_E(husk_file_create(&B, "big", false, 0600, &fd, tmp, sizeof tmp, &E) == 0);
  char *chunk = malloc(1 << 20);
  memset(chunk, 'b', 1 << 20);
  for (int i = 0; i < 8; i++)
    CHECK(write(fd, chunk, 1 << 20) == 1 << 20);
  CHECK_E(husk_file_commit(&B, "big", fd, tmp, &E) == 0);
  close(fd);
  free(chunk);
  CHECK_E(husk_file_open_read(&B, "big", &fd, &st, &E) == 0 && st.st_size == 8 << 20);
  CHECK((fcntl(fd, F_GETFL) & O_NONBLOCK) == 0);
  close(fd);
}

TEST(read_through_planted_symlinks) {
  CHECK(put("real.txt", "box file", false) == 0);
  CHECK(put("/tmp/intmp.txt", "tmp file", false) == 0);
  CHECK(symlinkat("/etc/passwd", WS, "l_etc") == 0);
  CHECK(symlinkat("../../../../../../../etc/passwd", WS, "l_dots") == 0);
  CHECK(symlinkat(secret, WS, "l_secret") == 0); /* an absolute host path */
  CHECK(symlinkat("/", WS, "l_root") == 0);
  CHECK(symlinkat("loop_b", WS, "loop_a") == 0);
  CHECK(symlinkat("loop_a", WS, "loop_b") == 0);
  CHECK(symlinkat("/workspace/real.txt", WS, "l_abs_ws") == 0);
  CHECK(symlinkat("/tmp/intmp.txt", WS, "l_abs_tmp") == 0);
  CHECK(symlinkat("real.txt", WS, "l_rel") == 0);
  CHECK(symlinkat("..", WS, "l_up") == 0);
  CHECK(symlinkat("/proc/self/root/etc/passwd", WS, "l_proc") == 0);
  CHECK_E(get("l_etc") == NULL && E.code == EACCES);
  CHECK_E(get("l_dots") == NULL && E.code == EACCES);
  CHECK_E(get("l_secret") == NULL && E.code == ENOENT); /* the box's /tmp has no such path */
  CHECK_E(get("l_root/etc/passwd") == NULL && E.code == EACCES);
  CHECK_E(get("l_up/l_up/etc/passwd") == NULL && E.code == EACCES);
  CHECK_E(get("l_proc") == NULL && E.code == EACCES);
  CHECK_E(get("loop_a") == NULL && E.code == ELOOP);
  /* In-box links behave as they do in the box. */
  CHECK(get_is("l_abs_ws", "box file"));
  CHECK(get_is("l_abs_tmp", "tmp file"));
  CHECK(get_is("l_rel", "box file"));
  CHECK(get_is("l_root/workspace/real.txt", "box file"));
  CHECK(get_is("l_up/tmp/intmp.txt", "tmp file"));
  /* A link to a path that also exists in the box's /tmp reads the box's copy. */
  CHECK_E(husk_file_mkdir(&B, hostdir, true, &E) == 0); /* the box's /tmp/host */
  CHECK_E(put(secret, "decoy in the box", false) == 0);
  CHECK(get_is("l_secret", "decoy in the box"));
  /* Listing and stat never follow. */
  struct husk_dirent d;
  CHECK_E(husk_file_stat(&B, "l_secret", &d, &E) == 0);
  CHECK(d.type == 'l');
  CHECK_STR(d.link_target, secret);
  husk_dirent_free(&d);
  drop_decoys();
}

TEST(write_replaces_symlinks) {
  char *before = host_snapshot();
  CHECK(symlinkat(secret, WS, "w_secret") == 0);
  CHECK(symlinkat("/etc/passwd", WS, "w_etc") == 0);
  CHECK(put("w_secret", "mine", false) == 0);
  CHECK(put("w_etc", "mine too", false) == 0);
  struct stat st;
  CHECK(fstatat(WS, "w_secret", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode));
  CHECK(fstatat(WS, "w_etc", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode));
  CHECK(get_is("w_secret", "mine"));
  /* Directory links on the way resolve in the box. */
  CHECK(symlinkat(hostdir, WS, "w_hostdir") == 0);
  CHECK(symlinkat("/", WS, "w_root") == 0);
  CHECK(symlinkat("../../../..", WS, "w_dots") == 0);
  CHECK_E(put("w_root/etc/evil", "x", true) < 0 && E.code == EACCES);
  CHECK_E(put("w_dots/evil", "x", true) < 0 && E.code == EACCES);
  CHECK(put("w_dots/workspace/via_dots", "ok", false) == 0);
  CHECK(get_is("via_dots", "ok"));
  /* Missing directories named only by a link's target are not created. */
  CHECK_E(put("w_hostdir/new.txt", "x", true) < 0 && E.code == ENOENT);
  /* ... and where the box has that path, the file lands in the box. */
  CHECK_E(husk_file_mkdir(&B, hostdir, true, &E) == 0);
  CHECK_E(put("w_hostdir/new.txt", "in the box", false) == 0);
  CHECK(exists_at(B.fs, "tmp/host/new.txt"));
  drop_decoys();
  char *after = host_snapshot();
  CHECK_STR(after, before);
  free(before);
  free(after);
  int fd = open(secret, O_RDONLY);
  char buf[64] = {0};
  CHECK(read(fd, buf, sizeof buf - 1) == 12);
  close(fd);
  CHECK_STR(buf, "HOST SECRET\n");
}

TEST(mkdir_cases) {
  CHECK_E(husk_file_mkdir(&B, "m/a/b/c", false, &E) < 0 && E.code == ENOENT);
  CHECK_E(husk_file_mkdir(&B, "m/a/b/c", true, &E) == 0);
  CHECK_E(husk_file_mkdir(&B, "m/a/b/c", true, &E) == 0);
  CHECK_E(husk_file_mkdir(&B, "m/a/b/c", false, &E) < 0 && E.code == EEXIST);
  CHECK_E(husk_file_mkdir(&B, "m/new", false, &E) == 0);
  struct stat st;
  CHECK(fstatat(WS, "m/a/b/c", &st, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK(S_ISDIR(st.st_mode) && st.st_uid == UID && (st.st_mode & 07777) == 0755);
  CHECK(fstatat(WS, "m/new", &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_uid == UID);
  CHECK_E(husk_file_mkdir(&B, "/workspace", true, &E) == 0);
  CHECK_E(husk_file_mkdir(&B, "/workspace", false, &E) < 0 && E.code == EEXIST);
  CHECK(put("m/file", "f", false) == 0);
  CHECK_E(husk_file_mkdir(&B, "m/file", true, &E) < 0 && E.code == ENOTDIR);
  CHECK_E(husk_file_mkdir(&B, "m/file/sub", true, &E) < 0 && E.code == ENOTDIR);
  /* Through symlinked parents: stays in the box, or is refused. */
  char *before = host_snapshot();
  CHECK(symlinkat("/", WS, "m/l_root") == 0);
  CHECK(symlinkat(hostdir, WS, "m/l_host") == 0);
  CHECK(symlinkat("a/b", WS, "m/l_in") == 0);
  CHECK_E(husk_file_mkdir(&B, "m/l_root/etc/evil", true, &E) < 0 && E.code == EACCES);
  CHECK_E(husk_file_mkdir(&B, "m/l_host/sub2", true, &E) < 0 && E.code == ENOENT);
  CHECK_E(husk_file_mkdir(&B, "m/l_in/x", true, &E) == 0);
  CHECK(exists_at(WS, "m/a/b/x"));
  CHECK_E(husk_file_mkdir(&B, "m/l_in", true, &E) == 0); /* a link to a directory is one */
  CHECK_E(husk_file_mkdir(&B, "m/l_in", false, &E) < 0 && E.code == EEXIST);
  char *after = host_snapshot();
  CHECK_STR(after, before);
  free(before);
  free(after);
}

TEST(move_cases) {
  char *before = host_snapshot();
  CHECK(put("mv/a", "A", true) == 0);
  CHECK(put("mv/b", "B", false) == 0);
  CHECK_E(husk_file_move(&B, "mv/a", "mv/b", false, &E) < 0 && E.code == EEXIST);
  CHECK_E(husk_file_move(&B, "mv/a", "mv/c", false, &E) == 0);
  CHECK(get_is("mv/c", "A") && !exists_at(WS, "mv/a"));
  CHECK_E(husk_file_move(&B, "mv/c", "mv/b", true, &E) == 0);
  CHECK(get_is("mv/b", "A"));
  /* Onto a symlink: the link is replaced, its target untouched. */
  CHECK(symlinkat(secret, WS, "mv/l_secret") == 0);
  CHECK_E(husk_file_move(&B, "mv/b", "mv/l_secret", false, &E) < 0 && E.code == EEXIST);
  CHECK_E(husk_file_move(&B, "mv/b", "mv/l_secret", true, &E) == 0);
  struct stat st;
  CHECK(fstatat(WS, "mv/l_secret", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode));
  /* A symlink moves as itself. */
  CHECK(symlinkat(hostdir, WS, "mv/l_host") == 0);
  CHECK_E(husk_file_move(&B, "mv/l_host", "/tmp/moved_link", false, &E) == 0);
  CHECK(fstatat(B.fs, "tmp/moved_link", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode));
  /* Through symlinked parents: resolved in the box. */
  CHECK(symlinkat("/", WS, "mv/l_root") == 0);
  CHECK(put("mv/x", "X", false) == 0);
  CHECK_E(husk_file_move(&B, "mv/x", "mv/l_root/etc/x", false, &E) < 0 && E.code == EACCES);
  CHECK_E(husk_file_move(&B, "mv/x", "mv/l_root/tmp/x", false, &E) == 0);
  CHECK(exists_at(B.fs, "tmp/x"));
  CHECK_E(husk_file_move(&B, "/tmp/moved_link/sub", "mv/y", false, &E) < 0); /* box /tmp has no host dir */
  CHECK_E(husk_file_move(&B, "mv/nope", "mv/z", false, &E) < 0 && E.code == ENOENT);
  CHECK_E(husk_file_mkdir(&B, "mv/dir/sub", true, &E) == 0);
  CHECK_E(husk_file_move(&B, "mv/dir", "mv/dir/sub/in", false, &E) < 0 && E.code == EINVAL);
  char *after = host_snapshot();
  CHECK_STR(after, before);
  free(before);
  free(after);
}

static void make_deep(int dirfd, const char *name, int levels) {
  int cur = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (int i = 0; i < levels; i++) {
    mkdirat(cur, name, 0755);
    int n = openat(cur, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(cur);
    cur = n;
    if (i % 50 == 0) {
      int f = openat(cur, "file", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      close(f);
    }
  }
  close(cur);
}

TEST(remove_cases) {
  char *before = host_snapshot();
  CHECK(put("rm/f", "f", true) == 0);
  CHECK_E(husk_file_remove(&B, "rm/f", false, &E) == 0 && !exists_at(WS, "rm/f"));
  CHECK_E(husk_file_remove(&B, "rm/f", false, &E) < 0 && E.code == ENOENT);
  /* A symlink to a host file: the link goes, the file stays. */
  CHECK(symlinkat(secret, WS, "rm/l_secret") == 0);
  CHECK_E(husk_file_remove(&B, "rm/l_secret", false, &E) == 0 && !exists_at(WS, "rm/l_secret"));
  /* Recursive removal of a tree holding links to host directories. */
  CHECK_E(husk_file_mkdir(&B, "rm/t/a/b", true, &E) == 0);
  CHECK(put("rm/t/a/b/f", "x", false) == 0);
  CHECK(symlinkat(hostdir, WS, "rm/t/l_host") == 0);
  CHECK(symlinkat(hostdir, WS, "rm/t/a/l_host") == 0);
  CHECK(symlinkat("../../../../../../..", WS, "rm/t/a/b/l_up") == 0);
  char p[256];
  snprintf(p, sizeof p, "%s/sub", hostdir);
  CHECK(symlinkat(p, WS, "rm/t/a/b/l_sub") == 0);
  mkfifoat(WS, "rm/t/a/fifo", 0644);
  CHECK_E(husk_file_remove(&B, "rm/t", false, &E) < 0 && E.code == ENOTEMPTY);
  CHECK_E(husk_file_remove(&B, "rm/t", true, &E) == 0);
  CHECK(!exists_at(WS, "rm/t"));
  /* Removing a symlink to a directory, recursively, removes the link only. */
  CHECK_E(husk_file_mkdir(&B, "rm/keep/inner", true, &E) == 0);
  CHECK(symlinkat("keep", WS, "rm/l_keep") == 0);
  CHECK_E(husk_file_remove(&B, "rm/l_keep", true, &E) == 0);
  CHECK(exists_at(WS, "rm/keep/inner") && !exists_at(WS, "rm/l_keep"));
  /* Deeper than any fd budget: constant fds, no recursion. */
  CHECK_E(husk_file_mkdir(&B, "rm/deep", true, &E) == 0);
  int d = openat(WS, "rm/deep", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  make_deep(d, "d", 1500);
  close(d);
  int fds = count_fds();
  CHECK_E(husk_file_remove(&B, "rm/deep", true, &E) == 0);
  CHECK(!exists_at(WS, "rm/deep"));
  CHECK(count_fds() == fds);
  char *after = host_snapshot();
  CHECK_STR(after, before);
  free(before);
  free(after);
}

/* A hardlink to a host file cannot be planted in the box: link(2) across
 * filesystems is EXDEV, so the box tmpfs can only hold links to its own
 * inodes.  (This is why the API needs no special hardlink rule.) */
TEST(hardlink_across_fs_impossible) {
  CHECK(linkat(AT_FDCWD, secret, WS, "hl", 0) < 0 && errno == EXDEV);
  char p[256];
  snprintf(p, sizeof p, "%s/workspace/hl2", boxdir);
  CHECK(link(secret, p) < 0 && errno == EXDEV);
}

TEST(fifo_does_not_hang) {
  CHECK(mkfifoat(WS, "fifo", 0644) == 0);
  CHECK(symlinkat("fifo", WS, "l_fifo") == 0);
  double t0 = now_s();
  CHECK_E(get("fifo") == NULL && E.code == EINVAL);
  CHECK_E(get("l_fifo") == NULL && E.code == EINVAL);
  CHECK(now_s() - t0 < 2);
  /* A socket file too. */
  int sk = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s/workspace/sock", boxdir);
  CHECK(bind(sk, (struct sockaddr *)&sa, sizeof sa) == 0);
  CHECK_E(get("sock") == NULL && E.code == EINVAL);
  close(sk);
  CHECK_E(husk_file_remove(&B, "sock", false, &E) == 0);
  struct husk_dirent d;
  CHECK_E(husk_file_stat(&B, "fifo", &d, &E) == 0 && d.type == 'o');
  husk_dirent_free(&d);
  CHECK_E(husk_file_remove(&B, "fifo", false, &E) == 0);
  CHECK_E(husk_file_remove(&B, "l_fifo", false, &E) == 0);
}

struct collect {
  char names[64][128];
  char types[64];
  int depths[64];
  int n;
  int stop_after;
};
static int collect_cb(void *ctx, const struct husk_dirent *e) {
  struct collect *c = ctx;
  if (c->n < 64) {
    snprintf(c->names[c->n], sizeof c->names[c->n], "%s", e->path);
    c->types[c->n] = e->type;
    c->depths[c->n] = e->depth;
  }
  c->n++;
  if (c->stop_after && c->n >= c->stop_after)
    return 1;
  return 0;
}

TEST(list_cases) {
  CHECK_E(husk_file_mkdir(&B, "ls/a/b/c", true, &E) == 0);
  CHECK(put("ls/f1", "1", false) == 0);
  CHECK(put("ls/a/f2", "22", false) == 0);
  CHECK(put("ls/a/b/f3", "333", false) == 0);
  CHECK(symlinkat(hostdir, WS, "ls/l_host") == 0);
  CHECK(symlinkat("/", WS, "ls/l_root") == 0);
  struct collect c = {0};
  CHECK_E(husk_file_list(&B, "ls", 1, collect_cb, &c, &E) == 0);
  CHECK(c.n == 4);
  CHECK_STR(c.names[0], "/workspace/ls/a");
  CHECK_STR(c.names[1], "/workspace/ls/f1");
  CHECK_STR(c.names[2], "/workspace/ls/l_host");
  CHECK(c.types[0] == 'd' && c.types[1] == 'f' && c.types[2] == 'l' && c.types[3] == 'l');
  memset(&c, 0, sizeof c);
  CHECK_E(husk_file_list(&B, "/workspace/ls/", 2, collect_cb, &c, &E) == 0);
  CHECK(c.n == 6); /* a, a/b, a/f2, f1, l_host, l_root */
  CHECK_STR(c.names[1], "/workspace/ls/a/b");
  CHECK(c.depths[1] == 2);
  memset(&c, 0, sizeof c);
  CHECK_E(husk_file_list(&B, "ls", 32, collect_cb, &c, &E) == 0);
  CHECK(c.n == 8); /* + a/b/c, a/b/f3; links never descended */
  CHECK_E(husk_file_list(&B, "ls", 0, collect_cb, &c, &E) < 0 && E.code == EINVAL);
  CHECK_E(husk_file_list(&B, "ls", 33, collect_cb, &c, &E) < 0 && E.code == EINVAL);
  CHECK_E(husk_file_list(&B, "ls/f1", 1, collect_cb, &c, &E) < 0 && E.code == ENOTDIR);
  CHECK_E(husk_file_list(&B, "ls/l_host", 1, collect_cb, &c, &E) < 0 && E.code == ENOENT);
  CHECK_E(husk_file_list(&B, "ls/l_root", 1, collect_cb, &c, &E) < 0 && E.code == EACCES);
  CHECK_E(husk_file_list(&B, "/", 1, collect_cb, &c, &E) < 0 && E.code == EACCES);
  /* Bounded: at list_max entries the listing stops and says so. */
  struct husk_fs small = B;
  small.list_max = 3;
  memset(&c, 0, sizeof c);
  CHECK_E(husk_file_list(&small, "ls", 32, collect_cb, &c, &E) == 1);
  CHECK(c.n == 3);
  small.list_max = 8;
  memset(&c, 0, sizeof c);
  CHECK_E(husk_file_list(&small, "ls", 32, collect_cb, &c, &E) == 0 && c.n == 8);
  /* The consumer can stop early. */
  memset(&c, 0, sizeof c);
  c.stop_after = 2;
  CHECK_E(husk_file_list(&B, "ls", 32, collect_cb, &c, &E) == 0 && c.n == 2);
  /* Depth bound on a deep tree. */
  CHECK_E(husk_file_mkdir(&B, "ls2", true, &E) == 0);
  int d = openat(WS, "ls2", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  make_deep(d, "d", 100);
  close(d);
  memset(&c, 0, sizeof c);
  CHECK_E(husk_file_list(&B, "ls2", 32, collect_cb, &c, &E) == 0);
  CHECK(c.n == 32 + 1); /* 32 directories + the file at level 1 */
  CHECK_E(husk_file_remove(&B, "ls2", true, &E) == 0);
}

TEST(stat_cases) {
  struct husk_dirent d;
  CHECK(put("st/file", "12345", true) == 0);
  CHECK_E(husk_file_stat(&B, "st/file", &d, &E) == 0);
  CHECK(d.type == 'f' && d.size == 5 && d.mode == 0644 && d.depth == 0 && d.mtime_ms > 0);
  CHECK_STR(d.name, "file");
  CHECK_STR(d.path, "/workspace/st/file");
  CHECK(d.link_target == NULL);
  husk_dirent_free(&d);
  CHECK(symlinkat("/etc/shadow", WS, "st/link") == 0);
  CHECK_E(husk_file_stat(&B, "st/link", &d, &E) == 0 && d.type == 'l');
  CHECK_STR(d.link_target, "/etc/shadow");
  husk_dirent_free(&d);
  CHECK_E(husk_file_stat(&B, "/dev/shm", &d, &E) == 0 && d.type == 'd');
  CHECK_STR(d.name, "shm");
  CHECK_STR(d.path, "/dev/shm");
  husk_dirent_free(&d);
  CHECK_E(husk_file_stat(&B, "/workspace/st/..", &d, &E) == 0 && d.type == 'd');
  husk_dirent_free(&d);
  CHECK_E(husk_file_stat(&B, "st/missing", &d, &E) < 0 && E.code == ENOENT);
  CHECK_E(husk_file_stat(&B, "/etc", &d, &E) < 0 && E.code == EACCES);
  CHECK_E(husk_file_stat(&B, "/workspace/..", &d, &E) < 0 && E.code == EACCES);
}

/* ---- tar -------------------------------------------------------------------- */

struct membuf {
  char *p;
  size_t len, cap, rpos;
  size_t chunk; /* read chunk size, to vary how the stream is cut */
};
static int mem_out(void *ctx, const void *buf, size_t len) {
  struct membuf *m = ctx;
  if (m->len + len > m->cap) {
    m->cap = (m->len + len) * 2;
    m->p = realloc(m->p, m->cap);
  }
  memcpy(m->p + m->len, buf, len);
  m->len += len;
  return 0;
}
static ssize_t mem_in(void *ctx, void *buf, size_t cap) {
  struct membuf *m = ctx;
  size_t n = m->len - m->rpos;
  if (n > cap)
    n = cap;
  if (m->chunk && n > m->chunk)
    n = m->chunk;
  if (n == 0)
    return 0;
  memcpy(buf, m->p + m->rpos, n);
  m->rpos += n;
  return (ssize_t)n;
}
static la_ssize_t ar_out(struct archive *a, void *ctx, const void *buf, size_t len) {
  (void)a;
  mem_out(ctx, buf, len);
  return (la_ssize_t)len;
}

static struct archive *ar_new(struct membuf *m) {
  struct archive *a = archive_write_new();
  archive_write_set_format_pax(a);
  archive_write_open2(a, m, NULL, ar_out, NULL, NULL);
  return a;
}
static void ar_add(struct archive *a, const char *path, unsigned type, unsigned perm, const char *data,
                   const char *symlink, const char *hardlink) {
  struct archive_entry *e = archive_entry_new();
  archive_entry_set_pathname(e, path);
  archive_entry_set_filetype(e, type);
  archive_entry_set_perm(e, perm);
  archive_entry_set_uid(e, 0);
  archive_entry_set_gid(e, 0);
  archive_entry_set_mtime(e, 1000000000, 0);
  if (symlink)
    archive_entry_set_symlink(e, symlink);
  if (hardlink)
    archive_entry_set_hardlink(e, hardlink);
  if (type == AE_IFCHR)
    archive_entry_set_rdev(e, makedev(1, 3));
  size_t n = data ? strlen(data) : 0;
  archive_entry_set_size(e, (la_int64_t)n);
  archive_write_header(a, e);
  if (n)
    archive_write_data(a, data, n);
  archive_entry_free(e);
}
static void ar_done(struct archive *a) {
  archive_write_close(a);
  archive_write_free(a);
}

static void pwrite_at(int dirfd, const char *name, const char *data, off_t off) {
  int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (pwrite(fd, data, strlen(data), off) < 0)
    perror("pwrite");
  close(fd);
}

static bool same_content(const char *a, const char *b) {
  char *x = get(a), *y = get(b);
  bool ok = x && y && !strcmp(x, y);
  free(x);
  free(y);
  return ok;
}

TEST(tar_roundtrip) {
  CHECK_E(husk_file_mkdir(&B, "src/dir/sub", true, &E) == 0);
  CHECK_E(husk_file_mkdir(&B, "src/emptydir", true, &E) == 0);
  CHECK(put("src/a.txt", "alpha\n", false) == 0);
  CHECK(put("src/dir/b.txt", "bravo\n", false) == 0);
  CHECK(put("src/dir/sub/c.txt", "charlie\n", false) == 0);
  CHECK(symlinkat("a.txt", WS, "src/rel_link") == 0);
  CHECK(symlinkat("/etc/passwd", WS, "src/abs_link") == 0);
  CHECK(linkat(WS, "src/a.txt", WS, "src/dir/hard_a", 0) == 0);
  /* sparse: data at 0 and at 8 MiB, 16 MiB long; and one all hole */
  pwrite_at(WS, "src/sparse", "AAAA", 0);
  pwrite_at(WS, "src/sparse", "BBBB", 8 << 20);
  int fd = openat(WS, "src/sparse", O_WRONLY | O_CLOEXEC);
  CHECK(ftruncate(fd, 16 << 20) == 0);
  close(fd);
  fd = openat(WS, "src/hole", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  CHECK(ftruncate(fd, (off_t)1 << 30) == 0);
  close(fd);
  /* written zeros (allocated, so archived densely) come back as a hole */
  fd = openat(WS, "src/zeros", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  char *z = calloc(1, 1 << 20);
  CHECK(write(fd, z, 1 << 20) == 1 << 20 && write(fd, "end", 3) == 3);
  close(fd);
  free(z);
  /* a long path and name */
  char longp[400];
  snprintf(longp, sizeof longp, "src/%0100d/%0100d/%0150d", 1, 2, 3);
  CHECK(put(longp, "long\n", true) == 0);
  /* special files are skipped, setuid dropped */
  mkfifoat(WS, "src/fifo", 0644);
  CHECK(put("src/suid", "s", false) == 0);
  CHECK(fchmodat(WS, "src/suid", 04755, 0) == 0);

  struct membuf m = {0};
  int skipped = husk_tar_write(&B, "src", mem_out, &m, &E);
  CHECK(skipped == 1); /* the FIFO */
  if (skipped < 0)
    printf("# %s\n", E.msg);
  CHECK(m.len > 0 && m.len < (4 << 20)); /* holes are not in the stream */

  /* What the archive says, read back with libarchive. */
  struct archive *a = archive_read_new();
  archive_read_support_format_tar(a);
  archive_read_open_memory(a, m.p, m.len);
  struct archive_entry *e;
  int n = 0, uid0 = 1, sawsuid = 0, sawhard = 0, sawsparse = 0;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
    n++;
    if (archive_entry_uid(e) != 0 || archive_entry_gid(e) != 0)
      uid0 = 0;
    if (!strcmp(archive_entry_pathname(e), "suid"))
      sawsuid = (archive_entry_perm(e) & 07777) == 0755;
    if (!strcmp(archive_entry_pathname(e), "dir/hard_a") && archive_entry_hardlink(e))
      sawhard = !strcmp(archive_entry_hardlink(e), "a.txt");
    if (!strcmp(archive_entry_pathname(e), "sparse"))
      sawsparse = archive_entry_sparse_count(e) > 0;
  }
  archive_read_free(a);
  CHECK(n == 16);
  CHECK(uid0 && sawsuid && sawhard && sawsparse);

  m.chunk = 777; /* cut the input at odd places */
  skipped = husk_tar_read(&B, "dst/x", mem_in, &m, &E);
  CHECK(skipped == 0);
  if (skipped < 0)
    printf("# %s\n", E.msg);
  struct stat s1, s2;
  CHECK(same_content("src/a.txt", "dst/x/a.txt"));
  CHECK(same_content("src/dir/b.txt", "dst/x/dir/b.txt"));
  CHECK(same_content("src/dir/sub/c.txt", "dst/x/dir/sub/c.txt"));
  CHECK(same_content("src/sparse", "dst/x/sparse"));
  CHECK(same_content("src/zeros", "dst/x/zeros"));
  CHECK(fstatat(WS, "dst/x/zeros", &s1, 0) == 0 && s1.st_size == (1 << 20) + 3 && s1.st_blocks <= 8);
  char dl[420];
  snprintf(dl, sizeof dl, "dst/x/%s", longp + 4);
  CHECK(get_is(dl, "long\n"));
  CHECK(fstatat(WS, "dst/x/emptydir", &s1, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(s1.st_mode));
  CHECK(s1.st_uid == UID && s1.st_gid == GID);
  char t[64] = {0};
  CHECK(readlinkat(WS, "dst/x/rel_link", t, sizeof t - 1) == 5 && !strcmp(t, "a.txt"));
  memset(t, 0, sizeof t);
  CHECK(readlinkat(WS, "dst/x/abs_link", t, sizeof t - 1) == 11 && !strcmp(t, "/etc/passwd"));
  CHECK(fstatat(WS, "dst/x/abs_link", &s1, AT_SYMLINK_NOFOLLOW) == 0 && s1.st_uid == UID);
  CHECK(fstatat(WS, "dst/x/a.txt", &s1, 0) == 0 && fstatat(WS, "dst/x/dir/hard_a", &s2, 0) == 0);
  CHECK(s1.st_ino == s2.st_ino && s1.st_nlink == 2 && s1.st_uid == UID);
  CHECK(fstatat(WS, "dst/x/sparse", &s1, 0) == 0);
  CHECK(s1.st_size == 16 << 20 && s1.st_blocks * 512 < (1 << 20));
  CHECK(fstatat(WS, "dst/x/hole", &s1, 0) == 0 && s1.st_size == (off_t)1 << 30 && s1.st_blocks == 0);
  CHECK(fstatat(WS, "dst/x/suid", &s1, 0) == 0 && (s1.st_mode & 07777) == 0755);
  CHECK(!exists_at(WS, "dst/x/fifo"));
  CHECK(fstatat(WS, "dst/x/a.txt", &s1, 0) == 0 && (s1.st_mode & 0777) == 0644);
  /* Extracting again over the same tree replaces files, merges dirs. */
  m.rpos = 0;
  CHECK_E(husk_tar_read(&B, "dst/x", mem_in, &m, &E) == 0);
  CHECK(same_content("src/a.txt", "dst/x/a.txt"));
  /* Writing an empty directory, and a missing one. */
  struct membuf m2 = {0};
  CHECK_E(husk_tar_write(&B, "src/emptydir", mem_out, &m2, &E) == 0 && m2.len > 0);
  CHECK_E(husk_tar_write(&B, "nope", mem_out, &m2, &E) < 0 && E.code == ENOENT);
  CHECK_E(husk_tar_write(&B, "src/a.txt", mem_out, &m2, &E) < 0 && E.code == ENOTDIR);
  CHECK_E(husk_tar_write(&B, "/etc", mem_out, &m2, &E) < 0 && E.code == EACCES);
  free(m2.p);
  /* An empty upload is an empty archive. */
  struct membuf m3 = {0};
  CHECK_E(husk_tar_read(&B, "dst/empty", mem_in, &m3, &E) == 0);
  CHECK(exists_at(WS, "dst/empty"));
  /* Garbage is an error, not a crash. */
  struct membuf m4 = {.p = strdup("this is not a tar archive, not even close................"), .len = 58};
  CHECK_E(husk_tar_read(&B, "dst/garbage", mem_in, &m4, &E) < 0 && E.code == EINVAL);
  free(m4.p);
  free(m.p);
  CHECK_E(husk_file_remove(&B, "dst", true, &E) == 0);
  CHECK_E(husk_file_remove(&B, "src", true, &E) == 0);
}

TEST(tar_depth_bound) {
  CHECK_E(husk_file_mkdir(&B, "tdeep", true, &E) == 0);
  int d = openat(WS, "tdeep", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  make_deep(d, "d", HUSK_TAR_MAX_DEPTH + 40);
  close(d);
  int fds = count_fds();
  struct membuf m = {0};
  CHECK_E(husk_tar_write(&B, "tdeep", mem_out, &m, &E) == 1);
  CHECK(count_fds() == fds);
  CHECK_E(husk_tar_read(&B, "tdeep_out", mem_in, &m, &E) == 0);
  char p[2 * HUSK_TAR_MAX_DEPTH + 16] = "tdeep_out";
  size_t n = strlen(p);
  for (int i = 0; i < HUSK_TAR_MAX_DEPTH; i++, n += 2)
    memcpy(p + n, "/d", 3);
  CHECK(exists_at(WS, p));
  memcpy(p + n, "/d", 3);
  CHECK(!exists_at(WS, p));
  free(m.p);
  CHECK_E(husk_file_remove(&B, "tdeep", true, &E) == 0);
  CHECK_E(husk_file_remove(&B, "tdeep_out", true, &E) == 0);
}

static int failing_out(void *ctx, const void *buf, size_t len) {
  (void)buf, (void)len;
  int *calls = ctx;
  if (++*calls > 1) {
    errno = EPIPE;
    return -1;
  }
  return 0;
}
static ssize_t failing_in(void *ctx, void *buf, size_t cap) {
  (void)ctx, (void)buf, (void)cap;
  errno = ECONNRESET;
  return -1;
}

TEST(tar_consumer_errors) {
  CHECK_E(husk_file_mkdir(&B, "ce", true, &E) == 0);
  int fd;
  char tmp[HUSK_TMPNAME_MAX];
  CHECK_E(husk_file_create(&B, "ce/big", false, 0644, &fd, tmp, sizeof tmp, &E) == 0);
  char *chunk = calloc(1, 1 << 20);
  for (int i = 0; i < 4; i++)
    CHECK(write(fd, chunk, 1 << 20) == 1 << 20);
  free(chunk);
  CHECK_E(husk_file_commit(&B, "ce/big", fd, tmp, &E) == 0);
  close(fd);
  int calls = 0;
  CHECK_E(husk_tar_write(&B, "ce", failing_out, &calls, &E) < 0 && E.code == EPIPE);
  CHECK(calls == 2); /* nothing after the failure, no trailer */
  CHECK_E(husk_tar_read(&B, "ce/out", failing_in, NULL, &E) < 0 && E.code == ECONNRESET);
  CHECK_E(husk_file_remove(&B, "ce", true, &E) == 0);
}

TEST(tar_hostile) {
  char *before = host_snapshot();
  struct stat st;
  CHECK(stat("/etc/passwd", &st) == 0);
  struct timespec passwd_mtime = st.st_mtim;
  struct membuf m = {0};
  struct archive *a = ar_new(&m);
  ar_add(a, "../evil_up", AE_IFREG, 0644, "evil", NULL, NULL);
  ar_add(a, "ok/../../evil_mid", AE_IFREG, 0644, "evil", NULL, NULL);
  ar_add(a, "/abs/evil_abs", AE_IFREG, 0644, "abs", NULL, NULL); /* -> dest/abs/evil_abs */
  ar_add(a, "link_etc", AE_IFLNK, 0777, NULL, "/etc", NULL);
  ar_add(a, "link_etc/passwd", AE_IFREG, 0644, "root::0:0::/:/bin/sh\n", NULL, NULL);
  ar_add(a, "link_etc/sub/x", AE_IFREG, 0644, "x", NULL, NULL);
  ar_add(a, "link_host", AE_IFLNK, 0777, NULL, hostdir, NULL);
  char p[512];
  ar_add(a, "link_host/pwned", AE_IFREG, 0644, "pwned", NULL, NULL);
  ar_add(a, "link_dot", AE_IFLNK, 0777, NULL, ".", NULL);
  ar_add(a, "link_dot/link_dot/through_dot", AE_IFREG, 0644, "x", NULL, NULL);
  ar_add(a, "hl_etc", AE_IFREG, 0644, NULL, NULL, "/etc/passwd");
  snprintf(p, sizeof p, "../../../../../..%s", secret);
  ar_add(a, "hl_secret", AE_IFREG, 0644, NULL, NULL, p);
  ar_add(a, "hl_secret_abs", AE_IFREG, 0644, NULL, NULL, secret);
  ar_add(a, "hl_via_link", AE_IFREG, 0644, NULL, NULL, "link_etc/passwd");
  ar_add(a, "dev_null", AE_IFCHR, 0666, NULL, NULL, NULL);
  ar_add(a, "a_fifo", AE_IFIFO, 0644, NULL, NULL, NULL);
  char longname[400];
  memset(longname, 'n', 300);
  longname[300] = '\0';
  ar_add(a, longname, AE_IFREG, 0644, "long", NULL, NULL);
  ar_add(a, "setuid_file", AE_IFREG, 06755, "suid", NULL, NULL);
  ar_add(a, "sticky_dir", AE_IFDIR, 07777, NULL, NULL, NULL);
  ar_add(a, "good.txt", AE_IFREG, 0644, "good", NULL, NULL);
  ar_add(a, "hl_good", AE_IFREG, 0644, NULL, NULL, "good.txt");
  ar_add(a, "good.txt", AE_IFREG, 0644, "good, again", NULL, NULL); /* duplicate: replaced */
  ar_add(a, "to_be_dir", AE_IFLNK, 0777, NULL, hostdir, NULL);
  ar_add(a, "to_be_dir", AE_IFDIR, 0755, NULL, NULL, NULL); /* the link is replaced by a dir */
  ar_add(a, "to_be_dir/in", AE_IFREG, 0644, "in", NULL, NULL);
  ar_add(a, "./", AE_IFDIR, 0755, NULL, NULL, NULL);
  ar_add(a, "/", AE_IFDIR, 0755, NULL, NULL, NULL);
  ar_done(a);

  /* Planted by the box in the destination beforehand. */
  CHECK_E(husk_file_mkdir(&B, "hx", true, &E) == 0);
  CHECK(symlinkat(hostdir, WS, "hx/planted") == 0);
  int skipped = husk_tar_read(&B, "hx", mem_in, &m, &E);
  if (skipped < 0)
    printf("# %s\n", E.msg);
  /* skipped: evil_up, evil_mid, link_etc/passwd, link_etc/sub/x, link_host/pwned,
   * through_dot, hl_etc, hl_secret, hl_secret_abs, hl_via_link, dev_null, a_fifo, longname */
  CHECK(skipped == 13);
  CHECK(!exists_at(WS, "evil_up") && !exists_at(B.fs, "evil_up") && !exists_at(WS, "hx/evil_up"));
  CHECK(!exists_at(WS, "evil_mid") && !exists_at(WS, "hx/evil_mid"));
  CHECK(get_is("hx/abs/evil_abs", "abs"));
  CHECK(fstatat(WS, "hx/link_etc", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode));
  CHECK(!exists_at(WS, "hx/etc"));
  CHECK(!exists_at(WS, "hx/hl_etc") && !exists_at(WS, "hx/hl_secret") && !exists_at(WS, "hx/dev_null"));
  CHECK(!exists_at(WS, "hx/hl_via_link") && !exists_at(WS, "hx/a_fifo"));
  CHECK(fstatat(WS, "hx/setuid_file", &st, 0) == 0 && (st.st_mode & 07777) == 0755);
  CHECK(st.st_uid == UID && st.st_gid == GID);
  CHECK(fstatat(WS, "hx/sticky_dir", &st, 0) == 0 && (st.st_mode & 07777) == 01777);
  CHECK(get_is("hx/good.txt", "good, again"));
  CHECK(get_is("hx/hl_good", "good")); /* linked to the first good.txt, which was replaced */
  CHECK(fstatat(WS, "hx/to_be_dir", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode));
  CHECK(get_is("hx/to_be_dir/in", "in"));
  CHECK(fstatat(WS, "hx/planted", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode));
  free(m.p);

  /* Through a symlink the box planted in the destination. */
  memset(&m, 0, sizeof m);
  a = ar_new(&m);
  ar_add(a, "planted/pwned2", AE_IFREG, 0644, "pwned", NULL, NULL);
  ar_add(a, "planted", AE_IFREG, 0644, "replaced the link", NULL, NULL);
  ar_done(a);
  CHECK_E(husk_tar_read(&B, "hx", mem_in, &m, &E) == 1);
  CHECK(get_is("hx/planted", "replaced the link"));
  free(m.p);

  /* The destination itself reached through a planted link: resolved in the box. */
  CHECK(symlinkat("/", WS, "hx/l_root") == 0);
  memset(&m, 0, sizeof m);
  a = ar_new(&m);
  ar_add(a, "f", AE_IFREG, 0644, "f", NULL, NULL);
  ar_done(a);
  CHECK_E(husk_tar_read(&B, "hx/l_root/etc", mem_in, &m, &E) < 0 && E.code == EACCES);
  m.rpos = 0;
  CHECK_E(husk_tar_read(&B, "hx/l_root/tmp/via_root", mem_in, &m, &E) == 0);
  CHECK(exists_at(B.fs, "tmp/via_root/f"));
  free(m.p);

  char *after = host_snapshot();
  CHECK_STR(after, before);
  free(before);
  free(after);
  CHECK(stat("/etc/passwd", &st) == 0);
  CHECK(st.st_mtim.tv_sec == passwd_mtime.tv_sec && st.st_mtim.tv_nsec == passwd_mtime.tv_nsec);
  CHECK_E(husk_file_remove(&B, "hx", true, &E) == 0);
}

TEST(enospc) {
  const char *dir = "/small";
  int fs = mount_box(dir, "size=1m,nr_inodes=64");
  CHECK(fs >= 0);
  if (fs < 0)
    return;
  struct husk_fs small = {.fs = fs, .uid = UID, .gid = GID};
  /* The front's writes into the temp file fail; abort frees the space. */
  int fd;
  char tmp[HUSK_TMPNAME_MAX];
  CHECK_E(husk_file_create(&small, "big", false, 0644, &fd, tmp, sizeof tmp, &E) == 0);
  char *chunk = calloc(1, 256 << 10);
  ssize_t w = 0;
  int i;
  for (i = 0; i < 8 && (w = write(fd, chunk, 256 << 10)) > 0; i++)
    ;
  CHECK(w < 0 && errno == ENOSPC);
  husk_file_abort(&small, "big", fd, tmp);
  close(fd);
  CHECK_E(husk_file_create(&small, "after", false, 0644, &fd, tmp, sizeof tmp, &E) == 0);
  CHECK(write(fd, chunk, 256 << 10) == 256 << 10); /* the space came back */
  CHECK(write(fd, chunk, 256 << 10) == 256 << 10);
  CHECK_E(husk_file_commit(&small, "after", fd, tmp, &E) == 0);
  close(fd);
  /* Extraction reports ENOSPC as such. */
  struct membuf m = {0};
  struct archive *a = ar_new(&m);
  struct archive_entry *e = archive_entry_new();
  archive_entry_set_pathname(e, "huge");
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 0644);
  archive_entry_set_size(e, 2 << 20);
  archive_write_header(a, e);
  char *two = calloc(1, 2 << 20);
  memset(two, 'z', 2 << 20);
  archive_write_data(a, two, 2 << 20);
  archive_entry_free(e);
  ar_done(a);
  CHECK_E(husk_tar_read(&small, "x", mem_in, &m, &E) < 0 && E.code == ENOSPC);
  CHECK(strstr(E.msg, "out of space") != NULL);
  free(m.p);
  free(two);
  /* Inodes run out too. */
  memset(&m, 0, sizeof m);
  a = ar_new(&m);
  for (i = 0; i < 100; i++) {
    char n[32];
    snprintf(n, sizeof n, "many/f%03d", i);
    ar_add(a, n, AE_IFREG, 0644, "", NULL, NULL);
  }
  ar_done(a);
  CHECK_E(husk_tar_read(&small, "y", mem_in, &m, &E) < 0 && E.code == ENOSPC);
  free(m.p);
  free(chunk);
  close(fs);
  umount2(dir, MNT_DETACH);
  rmdir(dir);
}

/* ---- the box races the daemon ------------------------------------------------ */

static volatile sig_atomic_t stop_child;
static void on_term(int sig) {
  (void)sig;
  stop_child = 1;
}

static pid_t start_racer(const char *dir, const char *a, const char *const *others, int nothers) {
  pid_t pid = fork();
  if (pid != 0)
    return pid;
  signal(SIGTERM, on_term);
  int d = openat(WS, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (unsigned long i = 0; !stop_child; i++)
    renameat2(d, a, d, others[i % (unsigned long)nothers], RENAME_EXCHANGE);
  _exit(0);
}

static void stop_racer(pid_t pid) {
  kill(pid, SIGTERM);
  waitpid(pid, NULL, 0);
}

/* Box code keeps moving a directory out of the tree being removed and back:
 * the removal must never climb ".." into the wrong parent and delete
 * siblings of its target. */
TEST(remove_stays_in_target) {
  CHECK_E(husk_file_mkdir(&B, "rr/keep/deep", true, &E) == 0);
  CHECK_E(put("rr/keep/deep/precious", "keep me", false) == 0);
  CHECK_E(put("rr/sibling", "keep me too", false) == 0);
  int rr = openat(WS, "rr", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int stopped = 0, done = 0;
  for (int round = 0; round < 40; round++) {
    husk_file_mkdir(&B, "rr/t/a/b", true, &E);
    int b = openat(rr, "t/a/b", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    make_deep(b, "d", 60);
    for (int i = 0; i < 50; i++) {
      char n[32];
      snprintf(n, sizeof n, "f%02d", i);
      close(openat(b, n, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    }
    close(b);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      signal(SIGTERM, on_term);
      while (!stop_child) {
        renameat(rr, "t/a/b", rr, "b");
        renameat(rr, "b", rr, "t/a/b");
      }
      _exit(0);
    }
    if (husk_file_remove(&B, "rr/t", true, &E) == 0)
      done++;
    else if (E.code == EBUSY)
      stopped++;
    stop_racer(pid);
    husk_file_remove(&B, "rr/t", true, &E);
    husk_file_remove(&B, "rr/b", true, &E);
  }
  close(rr);
  printf("# remove race: %d completed, %d stopped on a moved directory\n", done, stopped);
  CHECK(get_is("rr/keep/deep/precious", "keep me"));
  CHECK(get_is("rr/sibling", "keep me too"));
  CHECK_E(husk_file_remove(&B, "rr", true, &E) == 0);
}

static int sink_cb(void *ctx, const struct husk_dirent *e) {
  (void)e;
  ++*(int *)ctx;
  return 0;
}

TEST(race_rename_exchange) {
  char *before = host_snapshot();
  CHECK_E(husk_file_mkdir(&B, "race/d", true, &E) == 0);
  CHECK(put("race/d/f", "box", false) == 0);
  CHECK(symlinkat(hostdir, WS, "race/s_host") == 0);
  CHECK(symlinkat("../../../../../../../..", WS, "race/s_up") == 0);
  CHECK(symlinkat("/", WS, "race/s_root") == 0);
  char rel[256];
  snprintf(rel, sizeof rel, "../../../..%s", hostdir);
  CHECK(symlinkat(rel, WS, "race/s_relhost") == 0);
  static const char *const others[] = {"s_host", "s_up", "s_root", "s_relhost"};
  /* The host path also exists in the box's own /tmp, so operations through
   * the swapped-in links succeed too: in the box. */
  CHECK_E(husk_file_mkdir(&B, hostdir, true, &E) == 0);
  /* A second racer swaps the last component: a file and a link to the secret. */
  CHECK(symlinkat(secret, WS, "race/d/lf") == 0);
  static const char *const others_f[] = {"lf"};
  pid_t pid_f = start_racer("race/d", "f", others_f, 1);
  pid_t pid = start_racer("race", "d", others, 4);
  CHECK(pid > 0 && pid_f > 0);
  double end = now_s() + 2.0;
  int ops = 0, ok = 0, listed = 0;
  struct membuf m = {0};
  while (now_s() < end) {
    ok += put("race/d/f", "box", false) == 0;
    ok += put("race/d/g", "box", true) == 0;
    char *s = get("race/d/f");
    if (s) {
      CHECK(strcmp(s, "HOST SECRET\n") != 0);
      ok++;
    }
    free(s);
    ok += husk_file_list(&B, "race/d", 3, sink_cb, &listed, &E) >= 0;
    struct husk_dirent d;
    if (husk_file_stat(&B, "race/d/f", &d, &E) == 0) {
      husk_dirent_free(&d);
      ok++;
    }
    ok += husk_file_mkdir(&B, "race/d/sub/x", true, &E) == 0;
    ok += husk_file_remove(&B, "race/d/sub", true, &E) == 0;
    ok += husk_file_move(&B, "race/d/f", "race/d/f2", true, &E) == 0;
    ok += husk_file_move(&B, "race/d/f2", "race/d/f", true, &E) == 0;
    m.len = m.rpos = 0;
    if (husk_tar_write(&B, "race/d", mem_out, &m, &E) >= 0) {
      ok++;
      ok += husk_tar_read(&B, "race/d/t", mem_in, &m, &E) >= 0;
    }
    husk_file_remove(&B, "race/d/t", true, &E);
    husk_file_remove(&B, "race/d/g", false, &E);
    ops += 12;
  }
  stop_racer(pid);
  stop_racer(pid_f);
  free(m.p);
  drop_decoys();
  printf("# race: %d of %d operations succeeded\n", ok, ops);
  CHECK(ok > 0 && ok < ops);

  /* Recursive removal while the box swaps a subdirectory for host links. */
  CHECK_E(husk_file_mkdir(&B, "race2", true, &E) == 0);
  CHECK(symlinkat(hostdir, WS, "race2/s_host") == 0);
  CHECK(symlinkat("../../../../../..", WS, "race2/s_up") == 0);
  static const char *const others2[] = {"s_host", "s_up"};
  for (int round = 0; round < 20; round++) {
    husk_file_mkdir(&B, "race2/t/a/b/c", true, &E);
    for (int i = 0; i < 20; i++) {
      char n[64];
      snprintf(n, sizeof n, "race2/t/a/b/f%d", i);
      put(n, "x", false);
    }
    pid = start_racer("race2", "t", others2, 2);
    husk_file_remove(&B, "race2/t", true, &E);
    husk_file_remove(&B, "race2/s_host/sub", true, &E);
    stop_racer(pid);
  }
  char *after = host_snapshot();
  CHECK_STR(after, before);
  free(before);
  free(after);
}

TEST(host_untouched) {
  int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
  char buf[256] = {0};
  CHECK(fd >= 0 && read(fd, buf, sizeof buf - 1) > 0);
  close(fd);
  CHECK_STR(buf, fake_passwd);
  struct stat st;
  CHECK(stat("/etc", &st) == 0 && st.st_uid == 0);
  CHECK(stat(secret, &st) == 0 && st.st_uid == 0 && st.st_size == 12);
  /* Nothing appeared at the jail's "/" (a write through "l -> /" would). */
  static const char *const allowed[] = {".", "..", "bin", "box", "etc", "lib", "lib64", "proc", "tmp", "usr"};
  DIR *d = opendir("/");
  struct dirent *e;
  while (d && (e = readdir(d))) {
    bool known = false;
    for (size_t i = 0; i < sizeof allowed / sizeof *allowed; i++)
      known = known || !strcmp(e->d_name, allowed[i]);
    if (!known)
      printf("#   unexpected /%s\n", e->d_name);
    CHECK(known);
  }
  if (d)
    closedir(d);
  /* ... nor in its /etc and /tmp. */
  d = opendir("/etc");
  int n = 0;
  while (d && (e = readdir(d)))
    n++;
  if (d)
    closedir(d);
  CHECK(n == 3); /* . .. passwd */
  d = opendir("/tmp");
  n = 0;
  while (d && (e = readdir(d)))
    n++;
  if (d)
    closedir(d);
  CHECK(n == 3); /* . .. host */
}

static void on_alarm(int sig) {
  (void)sig;
  static const char m[] = "not ok - the suite hung (120 s)\n";
  if (write(1, m, sizeof m - 1) < 0)
    _exit(2);
  _exit(1);
}

static int run_suite(void) {
  /* A hang (FIFO, lease, endless race) fails the suite.  We are pid 1 of our
   * namespace, which ignores signals left at their default: hence a handler. */
  signal(SIGALRM, on_alarm);
  alarm(120);
  if (enter_jail() < 0) {
    printf("not ok 1 - cannot build the jail: %s\n", strerror(errno));
    return 1;
  }
  int fds = count_fds();
  RUN(path_mapping);
  RUN(write_read_roundtrip);
  RUN(read_through_planted_symlinks);
  RUN(write_replaces_symlinks);
  RUN(mkdir_cases);
  RUN(move_cases);
  RUN(remove_cases);
  RUN(hardlink_across_fs_impossible);
  RUN(fifo_does_not_hang);
  RUN(list_cases);
  RUN(stat_cases);
  RUN(tar_roundtrip);
  RUN(tar_depth_bound);
  RUN(tar_consumer_errors);
  RUN(tar_hostile);
  RUN(enospc);
  RUN(race_rename_exchange);
  RUN(remove_stays_in_target);
  RUN(host_untouched);
  unit_cur_failed = count_fds() != fds;
  if (unit_cur_failed)
    printf("#   fds: %d at start, %d at end\n", fds, count_fds());
  unit_n++;
  unit_failed += unit_cur_failed;
  printf("%s %d - no fd leaks\n", unit_cur_failed ? "not ok" : "ok", unit_n);
  close(WS);
  close(B.fs);
  return unit_done();
}

/* New mount and pid namespaces: our mounts vanish with us, even on a
 * crash, and the /proc we mount shows only our own processes. */
static int run_isolated(void) {
  if (unshare(CLONE_NEWNS | CLONE_NEWPID) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
    printf("not ok 1 - cannot isolate the suite: %s\n", strerror(errno));
    return 1;
  }
  fflush(stdout);
  pid_t pid = fork(); /* our child is pid 1 there; this one waits */
  if (pid == 0)
    exit(run_suite());
  int st;
  if (pid < 0 || waitpid(pid, &st, 0) < 0)
    return 1;
  if (WIFSIGNALED(st))
    printf("not ok - the suite died of signal %d\n", WTERMSIG(st));
  return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (geteuid() != 0) {
    printf("ok 1 # SKIP needs root (mounts tmpfs)\n");
    return 0;
  }
  snprintf(base, sizeof base, "/tmp/husk-files-XXXXXX");
  if (!mkdtemp(base)) {
    printf("not ok 1 - mkdtemp: %s\n", strerror(errno));
    return 1;
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    /* _exit: after its pid 1 died, our pid namespace takes no new task, not
     * even LeakSanitizer's tracer (the suite itself is leak-checked). */
    int rc = run_isolated();
    fflush(stdout);
    _exit(rc);
  }
  int st = 0;
  bool waited = pid > 0 && waitpid(pid, &st, 0) == pid;
  /* The namespaces are gone, and their mounts with them: plain files left. */
  nftw(base, rm_cb, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
  return waited && WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
