/* probe: hostile probes for husk, one multi-call binary (like crun's tests/init.c).
 *
 *   probe NAME...   run each probe in a forked child; each prints one line
 *                   "PASS <name>: <detail>" or "FAIL <name>: <detail>".
 *                   Exit status 0 if every probe passed, 1 otherwise.
 *   probe --list    print the probe names, one a line, in suite order.
 *
 * Every probe is something a malicious program inside a box would try; the
 * comment above it says what it tries and what the box must answer.  The
 * probes are written to be harmless even if the sandbox were broken: nothing
 * is ever written to kernel knobs (we only try to open them for writing),
 * reboot/kexec/swapon/settimeofday get invalid or NULL arguments, signals to
 * processes outside our own children are only ever signal 0, except to a pid 1
 * that is verified to be husk's init, and nothing is ever sent to an
 * address outside the box (the way out is looked for in the routing tables).
 * The binary refuses to run at all as uid 0 or with any capability.
 *
 * Build: gcc -static -O1 -Wall -Wextra -o probe tests/hostile/probe.c
 * Host-side parameters (set by run.sh through --env): HOST_PORT (a TCP
 * listener on the host's 127.0.0.1), HOST_ABSTRACT (an abstract unix socket
 * name on the host), HOST_PID (a live host pid). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <linux/random.h>
#include <linux/seccomp.h>
#include <linux/userfaultfd.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/fsuid.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/klog.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/quota.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/swap.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_fsopen
#define SYS_fsopen 430
#endif
#ifndef SYS_fsconfig
#define SYS_fsconfig 431
#endif
#ifndef SYS_fsmount
#define SYS_fsmount 432
#endif
#ifndef SYS_fspick
#define SYS_fspick 433
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_memfd_secret
#define SYS_memfd_secret 447
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef AF_MCTP
#define AF_MCTP 45
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

#define BOX_UID 1000
#define WS "/workspace"

/* ---- reporting --------------------------------------------------------- */

static char okbuf[3072], badbuf[3072];
static int nbad;

static void vappend(char *buf, size_t cap, const char *fmt, va_list ap) {
  size_t len = strlen(buf);
  if (len + 8 >= cap)
    return;
  if (len) {
    memcpy(buf + len, "; ", 3);
    len += 2;
  }
  vsnprintf(buf + len, cap - len, fmt, ap);
}

__attribute__((format(printf, 1, 2))) static void good(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vappend(okbuf, sizeof okbuf, fmt, ap);
  va_end(ap);
}

__attribute__((format(printf, 1, 2))) static void bad(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vappend(badbuf, sizeof badbuf, fmt, ap);
  va_end(ap);
  nbad++;
}

static const char *en(int e) {
  static char ring[4][16];
  static int i;
  const char *n = e ? strerrorname_np(e) : "success";
  if (n)
    return n;
  i = (i + 1) % 4;
  snprintf(ring[i], sizeof ring[i], "errno %d", e);
  return ring[i];
}

/* The call returned rc with errno e; it must have failed with one of want[]. */
static bool check_fail(const char *what, long rc, int e, const int *want) {
  if (rc != -1) {
    bad("%s succeeded (=%ld)", what, rc);
    return false;
  }
  for (const int *w = want; *w; w++)
    if (*w == e) {
      good("%s: %s", what, en(e));
      return true;
    }
  bad("%s: %s, want %s", what, en(e), en(want[0]));
  return false;
}

/* EXPECT(label, call, errno...): the call must fail with one of the errnos. */
#define EXPECT(what, call, ...)                                                    \
  do {                                                                             \
    errno = 0;                                                                     \
    long r_ = (long)(call);                                                        \
    int e_ = errno;                                                                \
    check_fail(what, r_, e_, (const int[]){__VA_ARGS__, 0});                       \
  } while (0)

/* ---- helpers ----------------------------------------------------------- */

/* Read a whole (small) file; returns bytes read or -errno. */
static ssize_t read_file(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  size_t len = 0;
  while (len + 1 < cap) {
    ssize_t n = read(fd, buf + len, cap - 1 - len);
    if (n < 0) {
      int e = errno;
      close(fd);
      return -e;
    }
    if (n == 0)
      break;
    len += (size_t)n;
  }
  buf[len] = '\0';
  close(fd);
  return (ssize_t)len;
}

/* Value of "Key:" in /proc/<pid>/status, or NULL. */
static const char *status_field(const char *status, const char *key, char *out, size_t cap) {
  size_t kl = strlen(key);
  for (const char *l = status; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    if (!strncmp(l, key, kl) && l[kl] == ':') {
      const char *v = l + kl + 1;
      while (*v == ' ' || *v == '\t')
        v++;
      size_t n = strcspn(v, "\n");
      if (n >= cap)
        n = cap - 1;
      memcpy(out, v, n);
      out[n] = '\0';
      return out;
    }
  }
  return NULL;
}

/* A path must not exist at all (ENOENT, not merely EACCES). */
static void must_be_absent(const char *path) {
  struct stat st;
  errno = 0;
  if (lstat(path, &st) == 0)
    bad("%s exists", path);
  else if (errno != ENOENT)
    bad("%s: %s, want ENOENT", path, en(errno));
}

/* A path must not be openable for writing (it may be absent if absent_ok).
 * Nothing is ever written: the fd is closed at once if the open succeeds. */
static void must_not_open_for_write(const char *path, bool absent_ok) {
  errno = 0;
  int fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd >= 0) {
    close(fd);
    bad("%s opened for writing (nothing written)", path);
    return;
  }
  int e = errno;
  if (e == EACCES || e == EROFS || e == EPERM || (absent_ok && e == ENOENT))
    good("%s: %s", path, en(e));
  else
    bad("%s: %s, want EACCES/EROFS", path, en(e));
}

/* The creating variants below undo what they did if the call ever succeeds,
 * and only then (so nothing pre-existing is ever removed). */
static const int ro_errs[] = {EACCES, EROFS, EPERM, 0};

static void must_not_create(const char *path) {
  char w[96];
  snprintf(w, sizeof w, "create %s", path);
  errno = 0;
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  int e = errno;
  if (fd >= 0) {
    close(fd);
    unlink(path);
  }
  check_fail(w, fd, e, ro_errs);
}

static void must_not_mkdir(const char *path) {
  char w[96];
  snprintf(w, sizeof w, "mkdir %s", path);
  errno = 0;
  int r = mkdir(path, 0755);
  int e = errno;
  if (r == 0)
    rmdir(path);
  check_fail(w, r, e, ro_errs);
}

static void must_not_symlink(const char *target, const char *path) {
  char w[96];
  snprintf(w, sizeof w, "symlink %s", path);
  errno = 0;
  int r = symlink(target, path);
  int e = errno;
  if (r == 0)
    unlink(path);
  check_fail(w, r, e, ro_errs);
}

static void must_not_mknod(const char *path, mode_t mode, dev_t dev, const int *want) {
  char w[96];
  snprintf(w, sizeof w, "mknod %s %c %u:%u", path, S_ISBLK(mode) ? 'b' : S_ISCHR(mode) ? 'c' : 'p',
           major(dev), minor(dev));
  errno = 0;
  int r = mknod(path, mode, dev);
  int e = errno;
  if (r == 0)
    unlink(path);
  check_fail(w, r, e, want);
}

/* Operations on names that do not exist: on a read-only mount the kernel
 * refuses them (EROFS) before it even looks the name up, so they prove the
 * mount is read-only while being harmless if it were not (ENOENT). */
static void must_be_readonly_dir(const char *dir) {
  char a[128], b[128], w[160];
  snprintf(a, sizeof a, "%s/husk-no-such-file", dir);
  snprintf(b, sizeof b, "%s/husk-no-such-file2", dir);
  snprintf(w, sizeof w, "unlink in %s", dir);
  EXPECT(w, unlink(a), EROFS, EACCES, EPERM);
  snprintf(w, sizeof w, "rename in %s", dir);
  EXPECT(w, rename(a, b), EROFS, EACCES, EPERM);
  snprintf(w, sizeof w, "rmdir in %s", dir);
  EXPECT(w, rmdir(a), EROFS, EACCES, EPERM);
}

/* Metadata changes that change nothing (same mode, same owner, same times,
 * replacing an xattr that does not exist): refused on a read-only file. */
static void must_be_readonly_file(const char *path) {
  struct stat st;
  if (stat(path, &st) < 0) {
    good("%s: %s", path, en(errno));
    return;
  }
  char w[128];
  snprintf(w, sizeof w, "open %s O_RDWR", path);
  errno = 0;
  int fd = open(path, O_RDWR | O_CLOEXEC); /* never written */
  int e = errno;
  if (fd >= 0)
    close(fd);
  check_fail(w, fd, e, (const int[]){EACCES, EROFS, EPERM, ETXTBSY, 0});
  snprintf(w, sizeof w, "chmod %s (same mode)", path);
  EXPECT(w, chmod(path, st.st_mode & 07777), EPERM, EROFS, EACCES);
  snprintf(w, sizeof w, "chown %s (no change)", path);
  EXPECT(w, chown(path, (uid_t)-1, (gid_t)-1), EPERM, EROFS, EACCES);
  struct timespec ts[2] = {st.st_atim, st.st_mtim};
  snprintf(w, sizeof w, "utimes %s (same times)", path);
  EXPECT(w, utimensat(AT_FDCWD, path, ts, 0), EPERM, EROFS, EACCES);
  snprintf(w, sizeof w, "setxattr %s (replace missing)", path);
  EXPECT(w, setxattr(path, "user.husk-no-such", "x", 1, XATTR_REPLACE), EPERM, EROFS, EACCES, ENOTSUP);
}

static int landlock_abi(void) {
  long v = syscall(SYS_landlock_create_ruleset, NULL, 0, 1U /* VERSION */);
  return v < 0 ? 0 : (int)v;
}

/* A child that just waits to be killed. */
static pid_t idle_child(void) {
  pid_t c = fork();
  if (c == 0) {
    for (;;)
      pause();
  }
  return c;
}

static void kill_wait(pid_t c) {
  if (c > 0) {
    kill(c, SIGKILL);
    waitpid(c, NULL, __WALL);
  }
}

/* Run fn in a forked child; returns its wait status. */
static int in_child(void (*fn)(void)) {
  fflush(stdout);
  pid_t c = fork();
  if (c == 0) {
    fn();
    _exit(0);
  }
  int st = 0;
  waitpid(c, &st, 0);
  return st;
}

static bool only_loopback(void) {
  struct if_nameindex *ifs = if_nameindex();
  if (!ifs)
    return false;
  bool ok = true;
  int n = 0;
  for (struct if_nameindex *i = ifs; i->if_index; i++, n++)
    if (strcmp(i->if_name, "lo") != 0)
      ok = false;
  if_freenameindex(ifs);
  return ok && n == 1;
}

static int env_int(const char *name) {
  const char *v = getenv(name);
  return v ? atoi(v) : -1;
}

/* ======================================================================
 * Secrets
 * ====================================================================== */

static bool env_entry_ok(const char *entry, const char *where) {
  static const char *const allowed[] = {"PATH", "HOME", "LANG", "TERM", NULL};
  size_t n = strcspn(entry, "=");
  bool known = false;
  for (int i = 0; allowed[i]; i++)
    if (strlen(allowed[i]) == n && !strncmp(entry, allowed[i], n))
      known = true;
  if (!known) {
    bad("%s: unexpected variable %.*s", where, (int)(n > 40 ? 40 : n), entry);
    return false;
  }
  if (strstr(entry, "husk-canary")) {
    bad("%s: host secret leaked in %.*s", where, (int)n, entry);
    return false;
  }
  return true;
}

/* Attacker dumps its environment (env, /proc/self/environ) looking for host
 * tokens (AWS_*, *_TOKEN, SSH_AUTH_SOCK): only PATH, HOME, LANG, TERM exist. */
static void p_env_allowlist(void) {
  extern char **environ;
  int n = 0;
  for (char **e = environ; *e; e++, n++)
    env_entry_ok(*e, "environ");
  static char buf[65536];
  ssize_t len = read_file("/proc/self/environ", buf, sizeof buf);
  if (len < 0)
    bad("read /proc/self/environ: %s", en((int)-len));
  for (ssize_t off = 0; off < len; off += (ssize_t)strlen(buf + off) + 1)
    if (buf[off])
      env_entry_ok(buf + off, "/proc/self/environ");
  good("%d variables, all allowlisted, no host canary", n);
}

/* Attacker reads pid 1's (husk init, a clone of the host supervisor) environ,
 * memory, fds, root, exe, namespaces, or writes its oom_score_adj/comm:
 * every one is refused (EACCES), init is not dumpable. */
static void p_proc1_private(void) {
  char buf[256];
  EXPECT("open /proc/1/environ", open("/proc/1/environ", O_RDONLY), EACCES, EPERM);
  EXPECT("open /proc/1/mem", open("/proc/1/mem", O_RDONLY), EACCES, EPERM);
  EXPECT("open /proc/1/maps", open("/proc/1/maps", O_RDONLY), EACCES, EPERM);
  EXPECT("open /proc/1/fd", open("/proc/1/fd", O_RDONLY | O_DIRECTORY), EACCES, EPERM);
  EXPECT("open /proc/1/fd/4", open("/proc/1/fd/4", O_RDONLY), EACCES, EPERM);
  EXPECT("readlink /proc/1/root", readlink("/proc/1/root", buf, sizeof buf), EACCES, EPERM);
  EXPECT("readlink /proc/1/cwd", readlink("/proc/1/cwd", buf, sizeof buf), EACCES, EPERM);
  EXPECT("readlink /proc/1/exe", readlink("/proc/1/exe", buf, sizeof buf), EACCES, EPERM);
  EXPECT("open /proc/1/exe for write", open("/proc/1/exe", O_WRONLY), EACCES, EPERM);
  EXPECT("open /proc/1/root/etc/passwd", open("/proc/1/root/etc/passwd", O_RDONLY), EACCES, EPERM);
  EXPECT("open /proc/1/ns/mnt", open("/proc/1/ns/mnt", O_RDONLY), EACCES, EPERM);
  EXPECT("open /proc/1/ns/user", open("/proc/1/ns/user", O_RDONLY), EACCES, EPERM);
  must_not_open_for_write("/proc/1/oom_score_adj", false);
  must_not_open_for_write("/proc/1/comm", false);
  must_not_open_for_write("/proc/1/uid_map", false);
}

/* Attacker reads /proc/1/cmdline to learn how the host started the box
 * (host paths of --workspace/--export, --env values): pid 1 must not show
 * the host's husk command line. */
static void p_proc1_cmdline(void) {
  char buf[8192];
  ssize_t n = read_file("/proc/1/cmdline", buf, sizeof buf);
  if (n < 0) {
    good("unreadable: %s", en((int)-n));
    return;
  }
  for (ssize_t i = 0; i < n; i++)
    if (buf[i] == '\0')
      buf[i] = ' ';
  if (strstr(buf, "hostsecret") || strstr(buf, "--workspace") || strstr(buf, "--env") ||
      strstr(buf, "--export"))
    bad("pid 1 shows the host's husk invocation: \"%.300s\"", buf);
  else
    good("pid 1 cmdline \"%.100s\"", buf);
}

/* Attacker looks for host secrets and sockets by path (/etc/shadow, ~/.ssh,
 * ~/.aws, docker.sock, D-Bus, canaries planted by run.sh in the host's /root,
 * /tmp and /dev/shm): none exists (ENOENT, not merely EACCES). */
static void p_host_files_absent(void) {
  static const char *const paths[] = {
      "/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/sudoers.d", "/etc/ssh",
      "/etc/ssl/private", "/etc/machine-id", "/root/.husk-hostile-canary", "/root/.ssh",
      "/root/.aws", "/root/.bash_history", "/root/.pyenv", "/tmp/husk-hostile-canary",
      "/dev/shm/husk-hostile-canary", "/var/run/docker.sock", "/run/docker.sock",
      "/run/containerd/containerd.sock", "/run/dbus/system_bus_socket", "/run/systemd",
      "/run/user", "/tmp/.X11-unix", "/var/lib", "/var/log", "/var/run", "/boot", "/mnt",
      "/opt", "/srv", "/media", "/lost+found", "/sys", NULL};
  int n = 0;
  for (int i = 0; paths[i]; i++, n++)
    must_be_absent(paths[i]);
  static const char *const empty_dirs[] = {"/root", "/home", NULL};
  for (int i = 0; empty_dirs[i]; i++) {
    DIR *d = opendir(empty_dirs[i]);
    if (!d) {
      if (errno != ENOENT)
        bad("opendir %s: %s", empty_dirs[i], en(errno));
      continue;
    }
    struct dirent *e;
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
        bad("%s/%s visible", empty_dirs[i], e->d_name);
    closedir(d);
  }
  good("%d host paths absent, /root and /home empty", n);
}

/* Attacker connects to well-known host daemon sockets by path (D-Bus, Docker,
 * containerd, X11, journald, syslog): they are not in the box (ENOENT). */
static void p_host_sockets_absent(void) {
  static const char *const paths[] = {
      "/run/dbus/system_bus_socket", "/var/run/docker.sock", "/run/docker.sock",
      "/run/containerd/containerd.sock", "/tmp/.X11-unix/X0", "/run/systemd/private",
      "/run/systemd/journal/socket", "/dev/log", "/run/user/0/bus", NULL};
  for (int i = 0; paths[i]; i++) {
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", paths[i]);
    EXPECT(paths[i], connect(s, (struct sockaddr *)&a, sizeof a), ENOENT);
    close(s);
  }
}

/* Attacker uses file descriptors inherited from the host (run.sh leaks fd 8,
 * a host directory, and fd 9, a host canary file, into husk): only 0, 1, 2
 * exist in the box. */
static void p_inherited_fds(void) {
  int open_fds = 0;
  for (int fd = 3; fd < 65536; fd++) {
    if (fcntl(fd, F_GETFD) < 0)
      continue;
    char p[64], t[256] = "?";
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(p, t, sizeof t - 1);
    if (n >= 0)
      t[n] = '\0';
    bad("fd %d is open (-> %s)", fd, t);
    open_fds++;
  }
  for (int fd = 0; fd < 3; fd++) {
    char p[64], t[256] = "?";
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(p, t, sizeof t - 1);
    if (n >= 0)
      t[n] = '\0';
    if (strstr(t, "canary") || strstr(t, "hostsecret"))
      bad("fd %d points at a host file: %s", fd, t);
  }
  if (!open_fds)
    good("only fds 0, 1, 2 are open");
}

/* Attacker reads or creates kernel keyrings (@u, @s) to find host keys:
 * keyctl, add_key, request_key all fail with EPERM. */
static void p_keyctl(void) {
  EXPECT("keyctl get @u", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0), EPERM);
  EXPECT("keyctl get @s", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0), EPERM);
  EXPECT("keyctl read @u", syscall(SYS_keyctl, KEYCTL_READ, KEY_SPEC_USER_KEYRING, NULL, 0), EPERM);
  EXPECT("keyctl join session", syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL), EPERM);
  EXPECT("add_key", syscall(SYS_add_key, "user", "husk-probe", "x", 1, KEY_SPEC_PROCESS_KEYRING), EPERM);
  EXPECT("request_key", syscall(SYS_request_key, "user", "husk-probe", NULL, 0), EPERM);
}

/* ======================================================================
 * Filesystem escape
 * ====================================================================== */

/* Attacker tries the classic chroot escape (mkdir x; chroot x; cd ../..):
 * chroot is refused with EPERM and / stays the box root. */
static void p_chroot_escape(void) {
  struct stat before;
  if (stat("/", &before) < 0)
    bad("stat / failed");
  mkdir("/tmp/jail", 0755);
  EXPECT("chroot /tmp/jail", chroot("/tmp/jail"), EPERM);
  EXPECT("chroot /", chroot("/"), EPERM);
  for (int i = 0; i < 32; i++)
    if (chdir("..") < 0)
      break;
  struct stat root, here;
  if (stat("/", &root) == 0 && stat(".", &here) == 0 &&
      (root.st_ino != here.st_ino || root.st_dev != here.st_dev))
    bad("`cd ..` x32 did not end at /");
  if (access("/workspace", F_OK) < 0 || root.st_ino != before.st_ino ||
      root.st_dev != before.st_dev)
    bad("/ is not the box root after the attempt");
}

/* Attacker overwrites or replaces host binaries in /usr (trojan su, sh):
 * open for writing, create, mkdir, chmod, chown, unlink, rename, utimes and
 * setxattr all fail (EROFS/EACCES); /usr is read-only and nosuid.  Every
 * attempt is a no-op if it ever succeeded (same mode, missing names...). */
static void p_write_usr(void) {
  must_be_readonly_file("/usr/bin/env");
  must_be_readonly_file("/bin/sh");
  must_be_readonly_file("/usr/bin/su");
  must_be_readonly_dir("/usr/bin");
  must_be_readonly_dir("/usr/lib");
  must_not_create("/usr/bin/husk-pwn");
  must_not_create("/usr/lib/husk-pwn.so");
  must_not_mkdir("/usr/local/husk-pwn");
  struct statvfs sv;
  if (statvfs("/usr", &sv) == 0 && !(sv.f_flag & ST_RDONLY))
    bad("/usr is not mounted read-only");
  if (statvfs("/usr", &sv) == 0 && !(sv.f_flag & ST_NOSUID))
    bad("/usr is not mounted nosuid");
}

/* Attacker edits the box's root and /etc (passwd, hosts, ld.so.cache) or
 * plants files in /, /root, /home, /var: every write fails, / is read-only. */
static void p_write_root_etc(void) {
  must_not_open_for_write("/etc/passwd", false);
  must_not_open_for_write("/etc/hosts", false);
  must_not_open_for_write("/etc/ld.so.cache", true);
  must_not_open_for_write("/etc/ssl/certs/ca-certificates.crt", true);
  must_be_readonly_file("/etc/passwd");
  must_be_readonly_dir("/etc");
  must_be_readonly_dir("/");
  static const char *const creates[] = {"/husk-pwn", "/etc/husk-pwn", "/etc/ld.so.preload",
                                        "/root/.husk-pwn", "/home/husk-pwn", "/var/husk-pwn",
                                        "/run/husk-pwn", NULL};
  for (int i = 0; creates[i]; i++)
    must_not_create(creates[i]);
  must_not_symlink("/workspace/x", "/etc/husk-link");
  must_not_mkdir("/husk-pwn-dir");
  struct statvfs sv;
  if (statvfs("/", &sv) == 0 && !(sv.f_flag & ST_RDONLY))
    bad("/ is not mounted read-only");
}

/* Attacker remounts / or /usr read-write (mount -o remount,rw, or
 * mount_setattr clearing RDONLY): EPERM, and the mounts stay read-only. */
static void p_remount_rw(void) {
  EXPECT("remount / rw", mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND, NULL), EPERM);
  EXPECT("remount /usr rw", mount(NULL, "/usr", NULL, MS_REMOUNT | MS_BIND, NULL), EPERM);
  EXPECT("remount /proc/sys rw", mount(NULL, "/proc/sys", NULL, MS_REMOUNT | MS_BIND, NULL), EPERM);
  EXPECT("remount / plain", mount(NULL, "/", NULL, MS_REMOUNT, NULL), EPERM);
  struct {
    uint64_t attr_set, attr_clr, propagation, userns_fd;
  } ma = {.attr_clr = MOUNT_ATTR_RDONLY};
  EXPECT("mount_setattr / clear RDONLY", syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, &ma, sizeof ma), EPERM);
  EXPECT("mount_setattr /usr clear RDONLY",
         syscall(SYS_mount_setattr, AT_FDCWD, "/usr", 0x8000 /* AT_RECURSIVE */, &ma, sizeof ma), EPERM);
  const char *ro[] = {"/", "/usr", "/proc/sys", "/dev", NULL};
  for (int i = 0; ro[i]; i++) {
    struct statvfs sv;
    if (statvfs(ro[i], &sv) == 0 && !(sv.f_flag & ST_RDONLY))
      bad("%s is read-write", ro[i]);
  }
}

/* Attacker unmounts the masks over /proc files (kallsyms, timer_list, keys)
 * or the read-only /proc/sys bind to reach the real files: EPERM. */
static void p_umount_masks(void) {
  static const char *const m[] = {"/proc/kallsyms", "/proc/timer_list", "/proc/keys",
                                  "/proc/sys", "/proc/sysrq-trigger", "/usr", "/etc/ssl/certs",
                                  "/dev/null", "/workspace", "/", NULL};
  for (int i = 0; m[i]; i++) {
    char w[64];
    snprintf(w, sizeof w, "umount %s", m[i]);
    EXPECT(w, umount2(m[i], MNT_DETACH), EPERM);
  }
  char buf[64];
  ssize_t n = read_file("/proc/kallsyms", buf, sizeof buf);
  if (n > 0)
    bad("/proc/kallsyms readable after the attempt");
}

/* Attacker mounts new filesystems (tmpfs, proc, sysfs, a bind of /) to get
 * an unmasked view: mount(2) fails with EPERM. */
static void p_mount_new(void) {
  mkdir("/tmp/m", 0755);
  EXPECT("mount tmpfs", mount("tmpfs", "/tmp/m", "tmpfs", 0, NULL), EPERM);
  EXPECT("mount proc", mount("proc", "/tmp/m", "proc", 0, NULL), EPERM);
  EXPECT("mount sysfs", mount("sysfs", "/tmp/m", "sysfs", 0, NULL), EPERM);
  EXPECT("bind mount /", mount("/", "/tmp/m", NULL, MS_BIND | MS_REC, NULL), EPERM);
  EXPECT("mount devpts", mount("devpts", "/tmp/m", "devpts", 0, "newinstance"), EPERM);
  EXPECT("make / shared", mount(NULL, "/", NULL, MS_SHARED | MS_REC, NULL), EPERM);
}

/* Attacker uses the new mount API (fsopen, fspick, fsconfig, fsmount,
 * open_tree, move_mount) to build or move mounts: EPERM for each. */
static void p_newmount_api(void) {
  EXPECT("fsopen tmpfs", syscall(SYS_fsopen, "tmpfs", 0), EPERM);
  EXPECT("fsopen proc", syscall(SYS_fsopen, "proc", 0), EPERM);
  EXPECT("fspick /", syscall(SYS_fspick, AT_FDCWD, "/", 0), EPERM);
  EXPECT("fsconfig", syscall(SYS_fsconfig, -1, 6 /* FSCONFIG_CMD_CREATE */, NULL, NULL, 0), EPERM);
  EXPECT("fsmount", syscall(SYS_fsmount, -1, 0, 0), EPERM);
  EXPECT("open_tree / clone", syscall(SYS_open_tree, AT_FDCWD, "/", OPEN_TREE_CLONE), EPERM);
  EXPECT("move_mount", syscall(SYS_move_mount, AT_FDCWD, "/tmp", AT_FDCWD, "/workspace", 0), EPERM);
}

/* Attacker calls pivot_root to swap the root: EPERM. */
static void p_pivot_root(void) {
  mkdir("/tmp/old", 0755);
  EXPECT("pivot_root /tmp /tmp/old", syscall(SYS_pivot_root, "/tmp", "/tmp/old"), EPERM);
  EXPECT("pivot_root . .", syscall(SYS_pivot_root, ".", "."), EPERM);
}

/* Attacker unshares new namespaces (unshare -Urm and friends) to regain
 * capabilities in a nested user namespace: EPERM for every flag. */
static void p_unshare_ns(void) {
  static const struct {
    unsigned long f;
    const char *n;
  } fl[] = {{CLONE_NEWUSER, "NEWUSER"}, {CLONE_NEWUSER | CLONE_NEWNS, "NEWUSER|NEWNS"},
            {CLONE_NEWNS, "NEWNS"},     {CLONE_NEWPID, "NEWPID"},
            {CLONE_NEWNET, "NEWNET"},   {CLONE_NEWUTS, "NEWUTS"},
            {CLONE_NEWIPC, "NEWIPC"},   {CLONE_NEWCGROUP, "NEWCGROUP"},
            {CLONE_NEWTIME, "NEWTIME"}, {CLONE_FS | CLONE_FILES, "FS|FILES"}};
  for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++) {
    char w[48];
    snprintf(w, sizeof w, "unshare(%s)", fl[i].n);
    EXPECT(w, unshare((int)fl[i].f), EPERM);
  }
}

/* Attacker creates namespaces through clone(2) flags instead of unshare:
 * clone with any CLONE_NEW* flag fails with EPERM (no child is created). */
static void p_clone_newns(void) {
  static const struct {
    unsigned long f;
    const char *n;
  } fl[] = {{CLONE_NEWUSER, "NEWUSER"}, {CLONE_NEWNS, "NEWNS"},   {CLONE_NEWPID, "NEWPID"},
            {CLONE_NEWNET, "NEWNET"},   {CLONE_NEWUTS, "NEWUTS"}, {CLONE_NEWIPC, "NEWIPC"},
            {CLONE_NEWCGROUP, "NEWCGROUP"}, {CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS, "NEWUSER|NEWPID|NEWNS"}};
  for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++) {
    fflush(stdout);
    errno = 0;
    long r = syscall(SYS_clone, fl[i].f | SIGCHLD, NULL, NULL, NULL, 0UL);
    if (r == 0)
      _exit(0);
    char w[64];
    snprintf(w, sizeof w, "clone(%s)", fl[i].n);
    if (r > 0) {
      waitpid((pid_t)r, NULL, 0);
      bad("%s created a child", w);
      continue;
    }
    check_fail(w, r, errno, (const int[]){EPERM, 0});
  }
}

struct clone_args_v0 {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

/* Attacker uses clone3 (whose flags live in memory, out of seccomp's reach)
 * to create a user namespace: clone3 fails with ENOSYS, whatever the flags. */
static void p_clone3(void) {
  static const struct {
    uint64_t f;
    const char *n;
  } fl[] = {{CLONE_NEWUSER, "clone3(NEWUSER)"}, {CLONE_NEWNS | CLONE_NEWUSER, "clone3(NEWUSER|NEWNS)"},
            {0, "clone3(0)"}};
  for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++) {
    struct clone_args_v0 ca = {.flags = fl[i].f, .exit_signal = SIGCHLD};
    fflush(stdout);
    errno = 0;
    long r = syscall(SYS_clone3, &ca, sizeof ca);
    if (r == 0)
      _exit(0);
    if (r > 0) {
      waitpid((pid_t)r, NULL, 0);
      bad("%s created a child", fl[i].n);
      continue;
    }
    check_fail(fl[i].n, r, errno, (const int[]){ENOSYS, 0});
  }
}

/* Attacker joins other namespaces via /proc/PID/ns files or a pidfd (setns):
 * EPERM; pid 1's namespace files cannot even be opened. */
static void p_setns(void) {
  static const char *const ns[] = {"user", "mnt", "net", "pid", "ipc", "uts", "cgroup", NULL};
  for (int i = 0; ns[i]; i++) {
    char p[64], w[64];
    snprintf(p, sizeof p, "/proc/self/ns/%s", ns[i]);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      good("open %s: %s", p, en(errno));
      continue;
    }
    snprintf(w, sizeof w, "setns(%s)", ns[i]);
    EXPECT(w, setns(fd, 0), EPERM);
    close(fd);
  }
  int pfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
  if (pfd >= 0) {
    EXPECT("setns(pidfd, NEWUSER|NEWNS)", setns(pfd, CLONE_NEWUSER | CLONE_NEWNS), EPERM);
    close(pfd);
  }
  EXPECT("open /proc/1/ns/net", open("/proc/1/ns/net", O_RDONLY), EACCES, EPERM);
}

/* Attacker forges a file handle for the host filesystem's root inode
 * (CVE-2014 "shocker") via open_by_handle_at / name_to_handle_at: EPERM. */
static void p_open_by_handle(void) {
  struct file_handle *fh = calloc(1, sizeof *fh + MAX_HANDLE_SZ);
  int mnt = 0;
  fh->handle_bytes = MAX_HANDLE_SZ;
  EXPECT("name_to_handle_at /etc/passwd", name_to_handle_at(AT_FDCWD, "/etc/passwd", fh, &mnt, 0), EPERM);
  EXPECT("name_to_handle_at /usr", name_to_handle_at(AT_FDCWD, "/usr", fh, &mnt, 0), EPERM);
  int dir = open("/usr", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  fh->handle_bytes = 8;
  fh->handle_type = 1; /* FILEID_INO32_GEN: inode 2 = root of an ext4 fs */
  memset(fh->f_handle, 0, 8);
  uint32_t ino = 2;
  memcpy(fh->f_handle, &ino, sizeof ino);
  EXPECT("open_by_handle_at forged inode 2", open_by_handle_at(dir, fh, O_RDONLY), EPERM);
  close(dir);
  free(fh);
}

/* Attacker hard-links or renames host files (setuid su, /etc/passwd) into
 * the writable workspace, to keep or modify them: EXDEV (separate mounts). */
static void p_cross_fs_link(void) {
  static const struct {
    const char *from, *to;
  } links[] = {{"/usr/bin/su", WS "/husk-su"}, {"/usr/bin/env", "/tmp/husk-env"},
               {"/etc/passwd", WS "/husk-passwd"}};
  for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
    char w[96];
    snprintf(w, sizeof w, "link %s -> %s", links[i].from, links[i].to);
    errno = 0;
    int r = link(links[i].from, links[i].to);
    int e = errno;
    if (r == 0)
      unlink(links[i].to);
    check_fail(w, r, e, (const int[]){EXDEV, 0});
  }
  int fd = open("/usr/bin/env", O_RDONLY | O_CLOEXEC);
  char p[64];
  snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
  errno = 0;
  int r = linkat(AT_FDCWD, p, AT_FDCWD, WS "/husk-env", AT_SYMLINK_FOLLOW);
  int e = errno;
  if (r == 0)
    unlink(WS "/husk-env");
  check_fail("linkat /proc/self/fd (env) -> /workspace", r, e, (const int[]){EXDEV, 0});
  close(fd);
  /* The mount check comes before the source lookup: a missing source still
   * gives EXDEV, and would give a harmless ENOENT on a single filesystem. */
  EXPECT("rename /etc/x -> /workspace", rename("/etc/husk-no-such", WS "/husk-x"), EXDEV);
  int w = open(WS "/f", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  close(w);
  EXPECT("rename /workspace/f -> /tmp/f", rename(WS "/f", "/tmp/f"), EXDEV);
  unlink(WS "/f");
}

/* ======================================================================
 * Privileges
 * ====================================================================== */

/* Attacker checks what it holds: /proc/self/status must show uid 1000, every
 * capability set empty, NoNewPrivs 1 and Seccomp 2 (filter mode). */
static void p_self_status(void) {
  static char st[8192];
  char v[128];
  if (read_file("/proc/self/status", st, sizeof st) < 0) {
    bad("cannot read /proc/self/status");
    return;
  }
  static const char *const caps[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", NULL};
  for (int i = 0; caps[i]; i++) {
    if (!status_field(st, caps[i], v, sizeof v))
      bad("%s missing", caps[i]);
    else if (strspn(v, "0") != strlen(v))
      bad("%s = %s", caps[i], v);
  }
  if (!status_field(st, "NoNewPrivs", v, sizeof v) || strcmp(v, "1"))
    bad("NoNewPrivs = %s", status_field(st, "NoNewPrivs", v, sizeof v) ? v : "?");
  if (!status_field(st, "Seccomp", v, sizeof v) || strcmp(v, "2"))
    bad("Seccomp = %s", status_field(st, "Seccomp", v, sizeof v) ? v : "?");
  if (!status_field(st, "Uid", v, sizeof v) || strcmp(v, "1000\t1000\t1000\t1000"))
    bad("Uid = %s", v);
  if (!status_field(st, "Gid", v, sizeof v) || strcmp(v, "1000\t1000\t1000\t1000"))
    bad("Gid = %s", v);
  if (status_field(st, "Seccomp_filters", v, sizeof v))
    good("caps 0, NoNewPrivs 1, Seccomp 2, %s filters, uid/gid 1000", v);
}

/* Attacker runs setuid-root binaries (su, passwd, mount, chsh, ...) to become
 * root: the kernel grants nothing. Each is exec'd with stdout and stderr on a
 * pipe that is already full, so it blocks on its first write and we can read
 * its credentials in /proc/<pid>/status: uid stays 1000, no capabilities. */
static void p_setuid_binaries(void) {
  static const char *const bins[] = {"/usr/bin/su", "/usr/bin/passwd", "/usr/bin/mount",
                                     "/usr/bin/umount", "/usr/bin/chsh", "/usr/bin/chfn",
                                     "/usr/bin/gpasswd", NULL};
  int tried = 0;
  for (int i = 0; bins[i]; i++) {
    struct stat sb;
    if (stat(bins[i], &sb) < 0 || !(sb.st_mode & S_ISUID))
      continue;
    tried++;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
      bad("pipe: %s", en(errno));
      return;
    }
    fcntl(p[1], F_SETPIPE_SZ, 4096);
    fcntl(p[1], F_SETFL, O_NONBLOCK);
    char junk[512];
    memset(junk, 'x', sizeof junk);
    while (write(p[1], junk, sizeof junk) > 0)
      ;
    while (write(p[1], junk, 1) > 0)
      ;
    fcntl(p[1], F_SETFL, 0);
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
      int null = open("/dev/null", O_RDONLY);
      dup2(null, 0);
      dup2(p[1], 1);
      dup2(p[1], 2);
      execl(bins[i], bins[i], "--help", (char *)NULL);
      _exit(127);
    }
    const char *base = strrchr(bins[i], '/') + 1;
    char path[64], st[4096], name[64], state[64], uid[64], capeff[64], capprm[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)c);
    bool seen = false;
    for (int t = 0; t < 500 && !seen; t++) { /* up to ~5 s for the exec */
      if (read_file(path, st, sizeof st) > 0 && status_field(st, "Name", name, sizeof name) &&
          !strcmp(name, base) && status_field(st, "State", state, sizeof state) && state[0] == 'S') {
        seen = true;
        break;
      }
      if (waitpid(c, NULL, WNOHANG) == c) {
        c = -1;
        break;
      }
      usleep(10000);
    }
    if (!seen) {
      bad("%s: could not observe it blocked after exec", bins[i]);
    } else {
      status_field(st, "Uid", uid, sizeof uid);
      status_field(st, "CapEff", capeff, sizeof capeff);
      status_field(st, "CapPrm", capprm, sizeof capprm);
      if (strcmp(uid, "1000\t1000\t1000\t1000") || strspn(capeff, "0") != strlen(capeff) ||
          strspn(capprm, "0") != strlen(capprm))
        bad("%s runs with Uid %s CapEff %s CapPrm %s", bins[i], uid, capeff, capprm);
      else
        good("%s (setuid) runs as uid 1000, no caps", base);
    }
    kill_wait(c);
    close(p[0]);
    close(p[1]);
  }
  if (!tried)
    good("no setuid binary installed: nothing to try");
}

/* Attacker calls setuid(0)/setresuid/setgid/setgroups/setfsuid to become
 * root inside its user namespace: EPERM, ids unchanged. */
static void p_setuid_root(void) {
  gid_t g0 = 0;
  EXPECT("setuid(0)", setuid(0), EPERM);
  EXPECT("setresuid(0,0,0)", setresuid(0, 0, 0), EPERM);
  EXPECT("setreuid(0,0)", setreuid(0, 0), EPERM);
  EXPECT("setgid(0)", setgid(0), EPERM);
  EXPECT("setgroups([0])", setgroups(1, &g0), EPERM);
  setfsuid(0);
  int fsuid = setfsuid((uid_t)-1);
  if (fsuid != BOX_UID)
    bad("setfsuid(0) took effect (fsuid %d)", fsuid);
  if (getuid() != BOX_UID || geteuid() != BOX_UID || getegid() != BOX_UID)
    bad("ids changed");
}

/* Attacker raises capabilities: capset(all), ambient raise, clearing the
 * locked securebits, keep-caps, unsetting no_new_privs: all refused. */
static void p_caps_raise(void) {
  struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct d[2];
  memset(d, 0xff, sizeof d);
  EXPECT("capset(all)", syscall(SYS_capset, &h, d), EPERM);
  memset(d, 0, sizeof d);
  d[0].inheritable = 1U << CAP_NET_RAW;
  EXPECT("capset(inheritable NET_RAW)", syscall(SYS_capset, &h, d), EPERM);
  EXPECT("ambient raise NET_RAW", prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_RAW, 0, 0), EPERM);
  EXPECT("clear securebits", prctl(PR_SET_SECUREBITS, 0, 0, 0, 0), EPERM);
  EXPECT("set keepcaps", prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0), EPERM);
  EXPECT("unset no_new_privs", prctl(PR_SET_NO_NEW_PRIVS, 0, 0, 0, 0), EINVAL);
  if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
    bad("no_new_privs is off");
  memset(d, 0, sizeof d);
  if (syscall(SYS_capget, &h, d) == 0 && (d[0].effective || d[0].permitted || d[1].effective))
    bad("capabilities present after the attempt");
}

/* Attacker stacks its own allow-everything seccomp filter hoping to override
 * the box's: filters only ever add restrictions, ptrace/unshare/mount stay EPERM. */
static void p_seccomp_stack(void) {
  struct sock_filter f[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  struct sock_fprog prog = {.len = 1, .filter = f};
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0)
    good("allow-all filter installed");
  else
    good("allow-all filter refused: %s", en(errno));
  EXPECT("ptrace TRACEME", ptrace(PTRACE_TRACEME, 0, 0, 0), EPERM);
  EXPECT("unshare NEWUSER", unshare(CLONE_NEWUSER), EPERM);
  EXPECT("mount tmpfs", mount("tmpfs", "/tmp", "tmpfs", 0, NULL), EPERM);
  EXPECT("SECCOMP_MODE_STRICT off", prctl(PR_SET_SECCOMP, 0 /* disabled */, 0, 0, 0), EINVAL, EPERM);
}

/* ======================================================================
 * /proc and /sys
 * ====================================================================== */

/* Attacker opens /proc/sysrq-trigger for writing (to crash or reboot the
 * host): the open fails (EACCES/EROFS). Nothing is ever written. */
static void p_sysrq_trigger(void) {
  must_not_open_for_write("/proc/sysrq-trigger", true);
  must_not_open_for_write("/proc/sys/kernel/sysrq", true);
}

/* Attacker rewrites core_pattern/modprobe/uevent_helper/binfmt_misc to get a
 * host-root helper run, then crashes: none opens for writing, and
 * RLIMIT_CORE is 0 with no way to raise it. Nothing is ever written. */
static void p_core_pattern(void) {
  must_not_open_for_write("/proc/sys/kernel/core_pattern", false);
  must_not_open_for_write("/proc/sys/kernel/modprobe", true);
  must_not_open_for_write("/proc/sys/kernel/hotplug", true);
  must_not_open_for_write("/proc/sys/kernel/core_pipe_limit", true);
  must_not_open_for_write("/proc/sys/fs/suid_dumpable", false);
  must_not_open_for_write("/proc/sys/fs/binfmt_misc/register", true);
  must_not_open_for_write("/sys/kernel/uevent_helper", true);
  struct rlimit r;
  if (getrlimit(RLIMIT_CORE, &r) == 0 && (r.rlim_cur || r.rlim_max))
    bad("RLIMIT_CORE is %llu/%llu", (unsigned long long)r.rlim_cur, (unsigned long long)r.rlim_max);
  r.rlim_cur = r.rlim_max = RLIM_INFINITY;
  EXPECT("raise RLIMIT_CORE", setrlimit(RLIMIT_CORE, &r), EPERM);
}

static int sys_files, sys_writable;
static int sys_walk(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
  (void)ftw;
  if (type != FTW_F || !S_ISREG(sb->st_mode))
    return 0;
  sys_files++;
  int fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd >= 0) {
    close(fd); /* never written */
    if (sys_writable++ < 5)
      bad("%s opens for writing", path);
  }
  return 0;
}

/* Attacker looks for any writable kernel knob under /proc/sys (every file is
 * tried with open O_WRONLY, nothing written): none opens. */
static void p_proc_sys_readonly(void) {
  nftw("/proc/sys", sys_walk, 32, FTW_PHYS);
  if (sys_files < 50)
    bad("only %d files under /proc/sys", sys_files);
  if (!sys_writable)
    good("%d files under /proc/sys, none opens for writing", sys_files);
  else
    bad("%d of %d files writable", sys_writable, sys_files);
}

/* Attacker reads kernel addresses and host state from /proc (kcore, kallsyms,
 * timer_list, sched_debug, keys, kmsg, slabinfo, ...): each is absent,
 * unreadable or empty (masked by /dev/null). */
static void p_proc_kernel_info(void) {
  static const char *const files[] = {
      "/proc/kcore", "/proc/kallsyms", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
      "/proc/keys", "/proc/key-users", "/proc/kmsg", "/proc/slabinfo", "/proc/vmallocinfo",
      "/proc/kpagecount", "/proc/kpageflags", "/proc/kpagecgroup", "/proc/config.gz",
      "/proc/pagetypeinfo", "/proc/zoneinfo", "/proc/latency_stats", NULL};
  int masked = 0;
  for (int i = 0; files[i]; i++) {
    int fd = open(files[i], O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      if (errno != ENOENT && errno != EACCES && errno != EPERM)
        bad("%s: %s", files[i], en(errno));
      masked++;
      continue;
    }
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n > 0)
      bad("%s is readable (%zd bytes)", files[i], n);
    else
      masked++;
  }
  good("%d kernel-information files absent or empty", masked);
  /* Directories of hardware details are empty. */
  static const char *const dirs[] = {"/proc/acpi", "/proc/driver", "/proc/scsi", NULL};
  for (int i = 0; dirs[i]; i++) {
    DIR *d = opendir(dirs[i]);
    if (!d)
      continue;
    struct dirent *e;
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
        bad("%s/%s visible", dirs[i], e->d_name);
    closedir(d);
  }
}

/* Attacker rewrites its uid_map/gid_map/setgroups (to map host root): the
 * write fails with EPERM (maps are write-once) and the map is unchanged. */
static void p_uid_map_rewrite(void) {
  char before[256], after[256];
  read_file("/proc/self/uid_map", before, sizeof before);
  static const struct {
    const char *p, *v;
  } w[] = {{"/proc/self/uid_map", "0 0 1\n"},
           {"/proc/self/gid_map", "0 0 1\n"},
           {"/proc/self/setgroups", "allow\n"}};
  for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
    int fd = open(w[i].p, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      good("open %s: %s", w[i].p, en(errno));
      continue;
    }
    errno = 0;
    ssize_t n = write(fd, w[i].v, strlen(w[i].v));
    check_fail(w[i].p, (long)n, errno, (const int[]){EPERM, EACCES, EINVAL, 0});
    close(fd);
  }
  must_not_open_for_write("/proc/1/uid_map", false);
  read_file("/proc/self/uid_map", after, sizeof after);
  if (strcmp(before, after))
    bad("uid_map changed");
  unsigned inside, outside, count;
  if (sscanf(after, "%u %u %u", &inside, &outside, &count) == 3 && (outside < 0x40000000U || inside != 0))
    bad("uid_map maps onto host uid %u", outside);
}

/* Attacker makes itself unkillable by the OOM killer (oom_score_adj -1000,
 * oom_adj -17): EACCES, and its score stays >= 0. */
static void p_oom_score_adj(void) {
  int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    errno = 0;
    long n = (long)write(fd, "-1000", 5);
    check_fail("write -1000 to oom_score_adj", n, errno, (const int[]){EACCES, EPERM, 0});
    close(fd);
  } else {
    good("open oom_score_adj: %s", en(errno));
  }
  fd = open("/proc/self/oom_adj", O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    errno = 0;
    long n = (long)write(fd, "-17", 3);
    check_fail("write -17 to oom_adj", n, errno, (const int[]){EACCES, EPERM, 0});
    close(fd);
  }
  char buf[32];
  if (read_file("/proc/self/oom_score_adj", buf, sizeof buf) > 0) {
    int v = atoi(buf);
    if (v < 0)
      bad("oom_score_adj is %d: box processes are protected from the OOM killer", v);
    else
      good("oom_score_adj %d", v);
  }
}

/* Attacker reaches /sys (power/state, class, firmware, fs/cgroup) or any
 * pseudo filesystem mounted from the host: /sys is absent, and no sysfs,
 * cgroup, debugfs, tracefs, securityfs, bpf... appears in mountinfo. */
static void p_sys_absent(void) {
  static const char *const paths[] = {"/sys", "/sys/fs/cgroup", "/sys/power/state",
                                      "/sys/class/powercap", "/sys/firmware", "/sys/kernel/security",
                                      "/sys/kernel/debug", NULL};
  for (int i = 0; paths[i]; i++)
    must_be_absent(paths[i]);
  static char mi[65536];
  if (read_file("/proc/self/mountinfo", mi, sizeof mi) < 0) {
    bad("cannot read mountinfo");
    return;
  }
  static const char *const bad_fs[] = {"sysfs", "cgroup", "cgroup2", "debugfs", "tracefs",
                                       "securityfs", "bpf", "configfs", "fusectl", "binfmt_misc",
                                       "pstore", "efivarfs", "hugetlbfs", "autofs", "nsfs", NULL};
  int n = 0;
  for (char *l = mi; *l;) {
    char *nl = strchr(l, '\n');
    if (nl)
      *nl = '\0';
    char *sep = strstr(l, " - ");
    if (sep) {
      char fstype[64] = "";
      sscanf(sep + 3, "%63s", fstype);
      for (int i = 0; bad_fs[i]; i++)
        if (!strcmp(fstype, bad_fs[i]))
          bad("%s mounted: %.120s", fstype, l);
      n++;
    }
    if (!nl)
      break;
    l = nl + 1;
  }
  good("/sys absent, %d mounts, none of a host pseudo-fs", n);
}

/* Attacker mounts cgroup v1 to set a release_agent (CVE-2022-0492) or
 * cgroup2 to escape its limits: EPERM; /proc/self/cgroup shows only "/". */
static void p_cgroup_escape(void) {
  mkdir("/tmp/cg", 0755);
  EXPECT("mount cgroup v1 rdma", mount("cgroup", "/tmp/cg", "cgroup", 0, "rdma"), EPERM);
  EXPECT("mount cgroup v1 named", mount("cgroup", "/tmp/cg", "cgroup", 0, "none,name=huskprobe"), EPERM);
  EXPECT("mount cgroup2", mount("cgroup2", "/tmp/cg", "cgroup2", 0, NULL), EPERM);
  EXPECT("fsopen cgroup", syscall(SYS_fsopen, "cgroup", 0), EPERM);
  char buf[4096];
  if (read_file("/proc/self/cgroup", buf, sizeof buf) < 0) {
    bad("cannot read /proc/self/cgroup");
    return;
  }
  int lines = 0;
  for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n"), lines++) {
    char *p = strchr(l, ':');
    p = p ? strchr(p + 1, ':') : NULL;
    if (!p || strcmp(p + 1, "/"))
      bad("cgroup path visible: %s", l);
  }
  good("%d cgroup hierarchies, all at \"/\"", lines);
}

/* ======================================================================
 * Devices and TTY
 * ====================================================================== */

/* Attacker creates device nodes (/dev/mem, the host disk) in writable dirs
 * to read host memory or disk: mknod fails with EPERM; tmpfs is nodev. */
static void p_mknod_dev(void) {
  static const int eperm[] = {EPERM, 0};
  must_not_mknod(WS "/husk-mem", S_IFCHR | 0666, makedev(1, 1), eperm);
  must_not_mknod(WS "/husk-port", S_IFCHR | 0666, makedev(1, 4), eperm);
  must_not_mknod("/tmp/husk-vda", S_IFBLK | 0666, makedev(254, 0), eperm);
  must_not_mknod("/tmp/husk-sda", S_IFBLK | 0666, makedev(8, 0), eperm);
  must_not_mknod("/dev/shm/husk-kmsg", S_IFCHR | 0666, makedev(1, 11), eperm);
  struct statvfs sv;
  if (statvfs(WS, &sv) == 0 && !(sv.f_flag & ST_NODEV))
    bad("/workspace is not nodev");
  if (statvfs(WS, &sv) == 0 && !(sv.f_flag & ST_NOSUID))
    bad("/workspace is not nosuid");
}

/* Attacker opens host devices (/dev/mem, kmsg, kvm, fuse, net/tun, dri,
 * nvidia, disks, consoles, loop, uinput...): none exists (ENOENT). */
static void p_dev_nodes_absent(void) {
  static const char *const devs[] = {
      "/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg", "/dev/kvm", "/dev/fuse", "/dev/net/tun",
      "/dev/net", "/dev/dri", "/dev/nvidia0", "/dev/nvidiactl", "/dev/vda", "/dev/sda", "/dev/nvme0",
      "/dev/console", "/dev/tty0", "/dev/tty1", "/dev/ttyS0", "/dev/vcs", "/dev/loop0",
      "/dev/loop-control", "/dev/mapper", "/dev/vhost-net", "/dev/vhost-vsock", "/dev/vsock",
      "/dev/userfaultfd", "/dev/hpet", "/dev/rtc0", "/dev/snd", "/dev/input", "/dev/uinput",
      "/dev/cpu", "/dev/mqueue", "/dev/hugepages", "/dev/watchdog", "/dev/bpf", "/dev/btrfs-control",
      "/dev/autofs", "/dev/cuse", "/dev/uhid", "/dev/sg0", "/dev/disk", "/dev/block", NULL};
  int n = 0;
  for (int i = 0; devs[i]; i++, n++)
    must_be_absent(devs[i]);
  good("%d host devices absent", n);
}

/* Attacker adds or removes entries in /dev (a /dev/kcore link, a fifo, a
 * directory, unlink/rename): EROFS, /dev is a read-only tmpfs. */
static void p_dev_readonly(void) {
  must_not_create("/dev/husk");
  must_not_mkdir("/dev/husk-net");
  must_not_symlink("/proc/kcore", "/dev/husk-kcore");
  must_not_mknod("/dev/husk-fifo", S_IFIFO | 0666, 0, ro_errs);
  must_be_readonly_dir("/dev");
  struct statvfs sv;
  if (statvfs("/dev", &sv) == 0 && !(sv.f_flag & ST_RDONLY))
    bad("/dev is not mounted read-only");
}

/* Open a pty pair; with ctty, make the slave our controlling terminal. */
static int open_pty(int *slave, bool ctty) {
  int m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (m < 0)
    return -1;
  int unlock = 0, n = -1;
  if (ioctl(m, TIOCSPTLCK, &unlock) < 0 || ioctl(m, TIOCGPTN, &n) < 0) {
    close(m);
    return -1;
  }
  char p[64];
  snprintf(p, sizeof p, "/dev/pts/%d", n);
  *slave = open(p, O_RDWR | O_CLOEXEC | (ctty ? 0 : O_NOCTTY));
  if (*slave < 0) {
    close(m);
    return -1;
  }
  if (ctty)
    ioctl(*slave, TIOCSCTTY, 0);
  return m;
}

/* Attacker injects keystrokes with TIOCSTI into a terminal (here its own pty,
 * made its controlling tty so the kernel alone would allow it): EPERM. */
static void p_tiocsti(void) {
  if (setsid() < 0)
    good("setsid: %s", en(errno));
  int s = -1, m = open_pty(&s, true);
  if (m < 0) {
    bad("cannot open a pty: %s", en(errno));
    return;
  }
  char c = '#';
  EXPECT("TIOCSTI on own ctty", ioctl(s, TIOCSTI, &c), EPERM);
  EXPECT("TIOCSTI on pty master", ioctl(m, TIOCSTI, &c), EPERM);
  EXPECT("TIOCSTI on stdin", ioctl(0, TIOCSTI, &c), EPERM);
}

/* Attacker uses TIOCSTI with garbage in the high 32 bits of the request
 * (0xffffffff00005412, CVE-2019-10063 style) to slip past a 64-bit compare:
 * still EPERM (the kernel only looks at the low 32 bits, and so must seccomp). */
static void p_tiocsti_highbits(void) {
  if (setsid() < 0)
    good("setsid: %s", en(errno));
  int s = -1, m = open_pty(&s, true);
  if (m < 0) {
    bad("cannot open a pty: %s", en(errno));
    return;
  }
  char c = '#';
  EXPECT("ioctl 0xffffffff00005412", syscall(SYS_ioctl, s, 0xffffffff00005412UL, &c), EPERM);
  EXPECT("ioctl 0x0000000100005412", syscall(SYS_ioctl, s, 0x0000000100005412UL, &c), EPERM);
  EXPECT("ioctl 0x8000000000005412", syscall(SYS_ioctl, s, 0x8000000000005412UL, &c), EPERM);
}

/* Attacker uses TIOCLINUX (console selection paste) on a terminal: EPERM. */
static void p_tioclinux(void) {
  int s = -1, m = open_pty(&s, false);
  if (m < 0) {
    bad("cannot open a pty: %s", en(errno));
    return;
  }
  char sub = 6; /* TIOCL_GETSHIFTSTATE: read-only */
  EXPECT("TIOCLINUX", ioctl(s, TIOCLINUX, &sub), EPERM);
  EXPECT("TIOCLINUX high bits", syscall(SYS_ioctl, s, 0xffffffff00000000UL | TIOCLINUX, &sub), EPERM);
}

/* Attacker changes a terminal's line discipline (TIOCSETD, the gateway to
 * rarely used, bug-prone ldisc code) or redirects the console (TIOCCONS):
 * EPERM, even on its own pty. */
static void p_tiocsetd(void) {
  int s = -1, m = open_pty(&s, false);
  if (m < 0) {
    bad("cannot open a pty: %s", en(errno));
    return;
  }
  int ldisc = N_TTY;
  EXPECT("TIOCSETD N_TTY", ioctl(s, TIOCSETD, &ldisc), EPERM);
  EXPECT("TIOCSETD high bits", syscall(SYS_ioctl, s, 0xdeadbeef00000000UL | TIOCSETD, &ldisc), EPERM);
  EXPECT("TIOCCONS", ioctl(s, TIOCCONS, 0), EPERM);
}

/* Attacker opens /dev/tty to reach the terminal husk was started from: the
 * program has no controlling terminal (ENXIO). */
static void p_dev_tty(void) {
  EXPECT("open /dev/tty", open("/dev/tty", O_RDWR | O_CLOEXEC), ENXIO);
  for (int fd = 0; fd < 3; fd++)
    if (isatty(fd))
      bad("fd %d is a terminal", fd);
}

/* Attacker opens ptys until the pty namespace is exhausted (to starve the
 * host of ptys): the box's own devpts stops it at its max (<= 64). */
static void p_pty_limit(void) {
  int n = 0, e = 0;
  for (; n < 300; n++) {
    int fd = open("/dev/ptmx", O_RDWR | O_NOCTTY);
    if (fd < 0) {
      e = errno;
      break;
    }
  }
  if (n >= 300)
    bad("opened %d ptys without hitting a limit", n);
  else if (n > 64)
    bad("opened %d ptys (more than 64) before %s", n, en(e));
  else
    good("%d ptys, then %s", n, en(e));
}

/* ======================================================================
 * Processes and signals
 * ====================================================================== */

/* Attacker ptraces its own child, pid 1, or itself (PTRACE_TRACEME) to
 * inject code or steal memory: EPERM every time. */
static void p_ptrace(void) {
  pid_t c = idle_child();
  EXPECT("PTRACE_ATTACH child", ptrace(PTRACE_ATTACH, c, 0, 0), EPERM);
  EXPECT("PTRACE_SEIZE child", ptrace(PTRACE_SEIZE, c, 0, 0), EPERM);
  EXPECT("PTRACE_ATTACH pid 1", ptrace(PTRACE_ATTACH, 1, 0, 0), EPERM);
  EXPECT("PTRACE_TRACEME", ptrace(PTRACE_TRACEME, 0, 0, 0), EPERM);
  kill_wait(c);
}

/* Attacker reads another process's memory with process_vm_readv (its
 * child, pid 1) or writes it with process_vm_writev: EPERM. */
static void p_process_vm(void) {
  static char secret[16] = "husk-secret";
  char buf[16];
  pid_t c = idle_child();
  struct iovec l = {buf, sizeof buf}, r = {secret, sizeof secret};
  EXPECT("process_vm_readv child", process_vm_readv(c, &l, 1, &r, 1, 0), EPERM);
  EXPECT("process_vm_writev child", process_vm_writev(c, &l, 1, &r, 1, 0), EPERM);
  EXPECT("process_vm_readv pid 1", process_vm_readv(1, &l, 1, &r, 1, 0), EPERM);
  kill_wait(c);
}

/* Attacker steals fds of another process with pidfd_getfd (e.g. init's
 * control socket) or compares kernel objects with kcmp: EPERM. */
static void p_pidfd_getfd(void) {
  pid_t c = idle_child();
  int pfd = (int)syscall(SYS_pidfd_open, c, 0);
  if (pfd < 0)
    good("pidfd_open child: %s", en(errno));
  else
    EXPECT("pidfd_getfd child fd 1", syscall(SYS_pidfd_getfd, pfd, 1, 0), EPERM);
  int p1 = (int)syscall(SYS_pidfd_open, 1, 0);
  if (p1 < 0)
    good("pidfd_open 1: %s", en(errno));
  else
    for (int fd = 3; fd <= 6; fd++) {
      char w[48];
      snprintf(w, sizeof w, "pidfd_getfd init fd %d", fd);
      EXPECT(w, syscall(SYS_pidfd_getfd, p1, fd, 0), EPERM);
    }
  EXPECT("kcmp", syscall(SYS_kcmp, getpid(), c, 0 /* KCMP_FILE */, 0, 0), EPERM);
  kill_wait(c);
}

static char proc_state(pid_t pid) {
  char p[64], buf[512];
  snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
  if (read_file(p, buf, sizeof buf) <= 0)
    return '?';
  char *rp = strrchr(buf, ')');
  return rp && rp[1] == ' ' ? rp[2] : '?';
}

/* Attacker kills or stops pid 1 (husk's init) with kill() and
 * pidfd_send_signal (SIGKILL, SIGSTOP, SIGTERM): refused (EPERM with a
 * Landlock signal scope) or ignored; init keeps running, not stopped. */
static void p_kill_init(void) {
  char comm[64] = "";
  read_file("/proc/1/comm", comm, sizeof comm);
  comm[strcspn(comm, "\n")] = '\0';
  if (strncmp(comm, "husk", 4) != 0) {
    bad("pid 1 is `%s`, not husk's init: not signalling it", comm);
    return;
  }
  bool scoped = landlock_abi() >= 6;
  static const int sigs[] = {SIGKILL, SIGSTOP, SIGTERM, SIGINT, SIGHUP};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    errno = 0;
    int r = kill(1, sigs[i]);
    int e = errno;
    char w[48];
    snprintf(w, sizeof w, "kill(1, %s)", sigabbrev_np(sigs[i]));
    if (scoped)
      check_fail(w, r, e, (const int[]){EPERM, 0});
    else
      good("%s: %s", w, r ? en(e) : "ignored");
  }
  int p1 = (int)syscall(SYS_pidfd_open, 1, 0);
  if (p1 >= 0) {
    errno = 0;
    long r = syscall(SYS_pidfd_send_signal, p1, SIGKILL, NULL, 0);
    if (scoped)
      check_fail("pidfd_send_signal(1, KILL)", r, errno, (const int[]){EPERM, 0});
    close(p1);
  }
  char st = '?';
  for (int t = 0; t < 10; t++) {
    usleep(10000);
    st = proc_state(1);
    if (st == 'T' || st == 't' || st == 'Z' || st == 'X' || st == '?')
      break;
  }
  if (st == 'T' || st == 't' || st == 'Z' || st == 'X' || st == '?')
    bad("pid 1 state is %c after the attempt", st);
  else
    good("init alive (state %c)", st);
}

/* Attacker tampers with pid 1 (husk's init runs as the same uid 1000 as
 * the program) through uid-checked calls that neither init's
 * non-dumpability nor the Landlock signal scope cover: prlimit (e.g. an
 * RLIMIT_NOFILE of 0 would break init's control channel), setpriority,
 * sched_setaffinity, sched_setscheduler, ioprio_set. Each call re-sets
 * init's current value, so nothing would change even if allowed; each must
 * fail with EPERM. */
static void p_init_tamper(void) {
  char comm[64] = "";
  read_file("/proc/1/comm", comm, sizeof comm);
  if (strncmp(comm, "husk", 4) != 0) {
    bad("pid 1 is `%s`, not husk's init: not touching it", comm);
    return;
  }
  static const struct {
    int res;
    const char *n;
  } lims[] = {{RLIMIT_NOFILE, "prlimit(1, NOFILE, same)"}, {RLIMIT_CPU, "prlimit(1, CPU, same)"},
              {RLIMIT_NPROC, "prlimit(1, NPROC, same)"}};
  for (size_t i = 0; i < sizeof lims / sizeof lims[0]; i++) {
    struct rlimit cur;
    if (prlimit(1, lims[i].res, NULL, &cur) < 0) {
      good("read init's rlimit: %s", en(errno));
      continue;
    }
    EXPECT(lims[i].n, prlimit(1, lims[i].res, &cur, NULL), EPERM);
  }
  errno = 0;
  int prio = getpriority(PRIO_PROCESS, 1);
  if (errno == 0)
    EXPECT("setpriority(1, same)", setpriority(PRIO_PROCESS, 1, prio), EPERM, EACCES);
  cpu_set_t set;
  if (sched_getaffinity(1, sizeof set, &set) == 0)
    EXPECT("sched_setaffinity(1, same)", sched_setaffinity(1, sizeof set, &set), EPERM);
  struct sched_param sp;
  int pol = sched_getscheduler(1);
  if (pol >= 0 && sched_getparam(1, &sp) == 0)
    EXPECT("sched_setscheduler(1, same)", sched_setscheduler(1, pol, &sp), EPERM);
  long io = syscall(SYS_ioprio_get, 1 /* IOPRIO_WHO_PROCESS */, 1);
  if (io >= 0) {
    if ((io >> 13) == 0) /* IOPRIO_CLASS_NONE: the effective value is best-effort 4 */
      io = (2L << 13) | 4;
    EXPECT("ioprio_set(1, same)", syscall(SYS_ioprio_set, 1, 1, io), EPERM);
  }
}

/* Attacker enumerates and signals host pids (kill 0, pidfd_open on guessed
 * pids, including a live host pid from run.sh): only the box's few processes
 * exist; the host pid gives ESRCH. Only signal 0 is sent. */
static void p_pid_visibility(void) {
  int host = env_int("HOST_PID");
  if (host <= 0) {
    bad("HOST_PID not set (run through run.sh)");
    return;
  }
  EXPECT("kill(host pid, 0)", kill(host, 0), ESRCH);
  EXPECT("pidfd_open(host pid)", syscall(SYS_pidfd_open, host, 0), ESRCH);
  int visible = 0;
  for (int p = 1; p <= 65536; p++)
    if (kill(p, 0) == 0 || errno != ESRCH)
      visible++;
  int procdirs = 0;
  DIR *d = opendir("/proc");
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (e->d_name[0] >= '1' && e->d_name[0] <= '9')
      procdirs++;
  if (d)
    closedir(d);
  if (visible > 16 || procdirs > 16)
    bad("%d pids answer kill(0), %d in /proc", visible, procdirs);
  else
    good("%d pids visible (box only)", visible);
}

/* Attacker opens perf events (side channels, historic kernel bugs): EPERM. */
static void p_perf_event_open(void) {
  struct perf_event_attr a = {.type = PERF_TYPE_SOFTWARE, .size = sizeof a,
                              .config = PERF_COUNT_SW_TASK_CLOCK, .disabled = 1,
                              .exclude_kernel = 1, .exclude_hv = 1};
  EXPECT("perf_event_open self", syscall(SYS_perf_event_open, &a, 0, -1, -1, 0), EPERM);
  EXPECT("perf_event_open pid 1", syscall(SYS_perf_event_open, &a, 1, -1, -1, 0), EPERM);
  a.type = PERF_TYPE_HARDWARE;
  a.config = PERF_COUNT_HW_CPU_CYCLES;
  EXPECT("perf_event_open cpu-wide", syscall(SYS_perf_event_open, &a, -1, 0, -1, 0), EPERM);
}

/* ======================================================================
 * Kernel interfaces
 * ====================================================================== */

/* Attacker uses io_uring (a large, bug-rich attack surface that bypasses
 * seccomp for the operations it performs): ENOSYS for all three calls. */
static void p_io_uring(void) {
  struct io_uring_params p;
  memset(&p, 0, sizeof p);
  EXPECT("io_uring_setup", syscall(SYS_io_uring_setup, 4, &p), ENOSYS);
  EXPECT("io_uring_enter", syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0), ENOSYS);
  EXPECT("io_uring_register", syscall(SYS_io_uring_register, -1, 0, NULL, 0), ENOSYS);
}

/* Attacker creates a userfaultfd (used to win kernel races): EPERM, and
 * /dev/userfaultfd does not exist. */
static void p_userfaultfd(void) {
  EXPECT("userfaultfd(USER_MODE_ONLY)", syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY), EPERM);
  EXPECT("userfaultfd(0)", syscall(SYS_userfaultfd, O_CLOEXEC), EPERM);
  must_be_absent("/dev/userfaultfd");
}

/* Attacker loads eBPF programs or maps (verifier bugs, side channels): EPERM. */
static void p_bpf(void) {
  struct bpf_insn insns[] = {{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 0},
                             {.code = BPF_JMP | BPF_EXIT}};
  union bpf_attr a;
  memset(&a, 0, sizeof a);
  a.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
  a.insn_cnt = 2;
  a.insns = (uint64_t)(uintptr_t)insns;
  a.license = (uint64_t)(uintptr_t) "GPL";
  EXPECT("bpf PROG_LOAD", syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof a), EPERM);
  memset(&a, 0, sizeof a);
  a.map_type = BPF_MAP_TYPE_ARRAY;
  a.key_size = 4;
  a.value_size = 4;
  a.max_entries = 1;
  EXPECT("bpf MAP_CREATE", syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof a), EPERM);
}

/* Attacker loads or removes kernel modules (init_module, finit_module,
 * delete_module; invalid images/names only): EPERM. */
static void p_modules(void) {
  static const char img[16] = "\177ELF-not-a-mod";
  EXPECT("init_module", syscall(SYS_init_module, img, sizeof img, ""), EPERM);
  int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  EXPECT("finit_module", syscall(SYS_finit_module, fd, "", 0), EPERM);
  close(fd);
  EXPECT("delete_module", syscall(SYS_delete_module, "husk_probe_no_such_module", O_NONBLOCK), EPERM);
}

/* Attacker loads a new kernel with kexec (invalid flags and no segments,
 * so even if allowed it could not act): EPERM. */
static void p_kexec(void) {
  EXPECT("kexec_load", syscall(SYS_kexec_load, 0UL, 0UL, NULL, 0xffff0000UL), EPERM);
  EXPECT("kexec_file_load", syscall(SYS_kexec_file_load, -1, -1, 0UL, NULL, 0xfffffff0UL), EPERM);
}

/* Attacker reboots the machine (invalid magic, so even if allowed it would
 * fail with EINVAL; EPERM proves seccomp stopped it): EPERM. */
static void p_reboot(void) {
  EXPECT("reboot(bad magic)", syscall(SYS_reboot, 0, 0, 0, NULL), EPERM);
}

/* Attacker enables or disables swap (a nonexistent path): EPERM. */
static void p_swapon(void) {
  EXPECT("swapon", swapon("/tmp/husk-no-such-swap", 0), EPERM);
  EXPECT("swapoff", swapoff("/tmp/husk-no-such-swap"), EPERM);
}

/* Attacker changes the host clock (NULL / invalid values only): EPERM. */
static void p_clock_set(void) {
  EXPECT("settimeofday(NULL, NULL)", syscall(SYS_settimeofday, NULL, NULL), EPERM);
  struct timespec ts = {.tv_sec = 0, .tv_nsec = 2000000000L}; /* invalid */
  EXPECT("clock_settime(bad ts)", syscall(SYS_clock_settime, CLOCK_REALTIME, &ts), EPERM);
  struct timeval tv = {.tv_sec = 0, .tv_usec = 2000000}; /* invalid */
  EXPECT("settimeofday(bad tv)", syscall(SYS_settimeofday, &tv, NULL), EPERM);
}

/* Attacker reads the kernel log (syslog/klogctl, addresses and host events):
 * EPERM; /dev/kmsg absent and /proc/kmsg masked. */
static void p_syslog(void) {
  char buf[64];
  EXPECT("syslog SIZE_BUFFER", klogctl(10, NULL, 0), EPERM);
  EXPECT("syslog READ_ALL", klogctl(3, buf, sizeof buf), EPERM);
  must_be_absent("/dev/kmsg");
  ssize_t n = read_file("/proc/kmsg", buf, sizeof buf);
  if (n > 0)
    bad("/proc/kmsg readable");
}

static void x32_child(void) {
  syscall(0x40000000L | SYS_getpid);
  _exit(0);
}

/* Attacker makes syscalls through the x32 ABI (number | 0x40000000) to dodge
 * a filter written for x86_64 numbers: the process is killed (SIGSYS). */
static void p_x32_syscall(void) {
  int st = in_child(x32_child);
  if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS)
    good("x32 getpid: killed by SIGSYS");
  else if (WIFSIGNALED(st))
    bad("x32 getpid: killed by signal %d, want SIGSYS", WTERMSIG(st));
  else
    bad("x32 getpid returned (exit %d)", WEXITSTATUS(st));
}

static void int80_child(void) {
  long ret;
  __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) /* i386 getpid */ : "memory");
  (void)ret;
  _exit(0);
}

/* Attacker makes i386 syscalls via `int 0x80` (a different syscall table
 * and audit arch): the process is killed (SIGSYS; SIGSEGV on kernels
 * without IA32 emulation), the syscall never returns. */
static void p_int80(void) {
  int st = in_child(int80_child);
  if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS)
    good("int 0x80 getpid: killed by SIGSYS");
  else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV)
    good("int 0x80 getpid: SIGSEGV (no IA32 emulation)");
  else if (WIFSIGNALED(st))
    bad("int 0x80: killed by signal %d", WTERMSIG(st));
  else
    bad("int 0x80 getpid returned (exit %d)", WEXITSTATUS(st));
}

/* Attacker changes its personality (READ_IMPLIES_EXEC makes all memory
 * executable, ADDR_NO_RANDOMIZE disables ASLR): EPERM; the query works. */
static void p_personality(void) {
  EXPECT("personality(READ_IMPLIES_EXEC)", personality(READ_IMPLIES_EXEC), EPERM);
  EXPECT("personality(ADDR_NO_RANDOMIZE)", personality(ADDR_NO_RANDOMIZE), EPERM);
  EXPECT("personality(MMAP_PAGE_ZERO)", personality(MMAP_PAGE_ZERO), EPERM);
  int cur = personality(0xffffffff);
  if (cur != PER_LINUX)
    bad("personality is 0x%x", cur);
}

/* Attacker opens a packet socket (sniff or forge link-level frames): EPERM. */
static void p_af_packet(void) {
  EXPECT("AF_PACKET SOCK_RAW", socket(AF_PACKET, SOCK_RAW, htons(0x0003)), EPERM);
  EXPECT("AF_PACKET SOCK_DGRAM", socket(AF_PACKET, SOCK_DGRAM, htons(0x0800)), EPERM);
  EXPECT("AF_INET SOCK_PACKET", socket(AF_INET, 10 /* SOCK_PACKET */, htons(0x0003)), EPERM);
}

/* Attacker opens AF_ALG crypto sockets (a frequent source of kernel
 * bugs, e.g. CVE-2021-3609 class): EPERM. */
static void p_af_alg(void) {
  EXPECT("AF_ALG SOCK_SEQPACKET", socket(AF_ALG, SOCK_SEQPACKET, 0), EPERM);
  EXPECT("AF_ALG SOCK_STREAM", socket(AF_ALG, SOCK_STREAM, 0), EPERM);
}

/* Attacker opens AF_VSOCK sockets to talk to the hypervisor or host
 * agents (this VM runs Firecracker vsock services): EPERM. */
static void p_af_vsock(void) {
  EXPECT("AF_VSOCK SOCK_STREAM", socket(AF_VSOCK, SOCK_STREAM, 0), EPERM);
  EXPECT("AF_VSOCK SOCK_DGRAM", socket(AF_VSOCK, SOCK_DGRAM, 0), EPERM);
  EXPECT("AF_VSOCK SOCK_SEQPACKET", socket(AF_VSOCK, SOCK_SEQPACKET, 0), EPERM);
}

/* Attacker opens raw IP sockets (forge packets, ICMP tricks) or other IP
 * socket types (SCTP seqpacket, DCCP): EPERM. */
static void p_sock_raw(void) {
  EXPECT("AF_INET SOCK_RAW ICMP", socket(AF_INET, SOCK_RAW, IPPROTO_ICMP), EPERM);
  EXPECT("AF_INET SOCK_RAW RAW", socket(AF_INET, SOCK_RAW, IPPROTO_RAW), EPERM);
  EXPECT("AF_INET6 SOCK_RAW", socket(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6), EPERM);
  EXPECT("AF_INET SOCK_RAW|NONBLOCK", socket(AF_INET, SOCK_RAW | SOCK_NONBLOCK, IPPROTO_UDP), EPERM);
  EXPECT("AF_INET SOCK_SEQPACKET", socket(AF_INET, SOCK_SEQPACKET, 0), EPERM);
  EXPECT("AF_INET SOCK_DCCP", socket(AF_INET, SOCK_DCCP, 0), EPERM);
  EXPECT("AF_INET SOCK_RDM", socket(AF_INET, SOCK_RDM, 0), EPERM);
  int sv[2];
  EXPECT("socketpair AF_INET", socketpair(AF_INET, SOCK_STREAM, 0, sv), EPERM);
}

/* Attacker opens netlink families other than ROUTE (audit, uevent,
 * netfilter, generic, xfrm, sock_diag, connector): EPERM. */
static void p_netlink_nonroute(void) {
  static const struct {
    int p;
    const char *n;
  } fams[] = {{NETLINK_AUDIT, "AUDIT"},     {NETLINK_KOBJECT_UEVENT, "KOBJECT_UEVENT"},
              {NETLINK_NETFILTER, "NETFILTER"}, {NETLINK_GENERIC, "GENERIC"},
              {NETLINK_XFRM, "XFRM"},       {NETLINK_SOCK_DIAG, "SOCK_DIAG"},
              {NETLINK_CONNECTOR, "CONNECTOR"}, {NETLINK_SELINUX, "SELINUX"},
              {NETLINK_FIB_LOOKUP, "FIB_LOOKUP"}, {NETLINK_SCSITRANSPORT, "SCSITRANSPORT"},
              {NETLINK_RDMA, "RDMA"},       {NETLINK_CRYPTO, "CRYPTO"}};
  for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
    char w[48];
    snprintf(w, sizeof w, "NETLINK_%s", fams[i].n);
    EXPECT(w, socket(AF_NETLINK, SOCK_RAW, fams[i].p), EPERM);
  }
  int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (s < 0)
    good("(NETLINK_ROUTE refused too: %s)", en(errno));
  else
    close(s);
}

/* Attacker opens sockets of rarely used families (AF_KEY, Bluetooth, XDP,
 * RDS, TIPC, CAN, X.25, AX.25, AppleTalk, NFC, SMC, MCTP, ...): EPERM. */
static void p_socket_families(void) {
  static const struct {
    int f, t;
    const char *n;
  } fams[] = {{AF_KEY, SOCK_RAW, "AF_KEY"},           {AF_BLUETOOTH, SOCK_RAW, "AF_BLUETOOTH"},
              {AF_XDP, SOCK_RAW, "AF_XDP"},           {AF_RDS, SOCK_SEQPACKET, "AF_RDS"},
              {AF_TIPC, SOCK_RDM, "AF_TIPC"},         {AF_CAN, SOCK_RAW, "AF_CAN"},
              {AF_X25, SOCK_SEQPACKET, "AF_X25"},     {AF_AX25, SOCK_DGRAM, "AF_AX25"},
              {AF_APPLETALK, SOCK_DGRAM, "AF_APPLETALK"}, {AF_IPX, SOCK_DGRAM, "AF_IPX"},
              {AF_NFC, SOCK_SEQPACKET, "AF_NFC"},     {AF_SMC, SOCK_STREAM, "AF_SMC"},
              {AF_MCTP, SOCK_DGRAM, "AF_MCTP"},       {AF_PPPOX, SOCK_STREAM, "AF_PPPOX"},
              {AF_LLC, SOCK_DGRAM, "AF_LLC"},         {AF_IEEE802154, SOCK_RAW, "AF_IEEE802154"},
              {AF_QIPCRTR, SOCK_DGRAM, "AF_QIPCRTR"}, {AF_PHONET, SOCK_DGRAM, "AF_PHONET"},
              {AF_KCM, SOCK_DGRAM, "AF_KCM"},         {AF_ATMPVC, SOCK_DGRAM, "AF_ATMPVC"},
              {AF_NETROM, SOCK_SEQPACKET, "AF_NETROM"}, {AF_ROSE, SOCK_SEQPACKET, "AF_ROSE"},
              {AF_DECnet, SOCK_SEQPACKET, "AF_DECnet"}, {AF_IUCV, SOCK_STREAM, "AF_IUCV"}};
  for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++)
    EXPECT(fams[i].n, socket(fams[i].f, fams[i].t, 0), EPERM);
}

/* Attacker uses the new fs-mount API, LDT, raw I/O ports, accounting,
 * quotas, fanotify, memfd_secret and other system-administration calls:
 * each is refused with EPERM (harmless arguments only). */
static void p_misc_blocked(void) {
  char buf[64];
  EXPECT("acct", acct("/tmp/husk-no-such-file"), EPERM);
  EXPECT("ioperm(off)", syscall(SYS_ioperm, 0x80UL, 1UL, 0), EPERM);
  EXPECT("iopl(0)", syscall(SYS_iopl, 0), EPERM);
  EXPECT("modify_ldt(read)", syscall(SYS_modify_ldt, 0, buf, sizeof buf), EPERM);
  EXPECT("quotactl", quotactl(QCMD(Q_GETFMT, USRQUOTA), "/tmp/husk-no-such-dev", 0, buf), EPERM);
  EXPECT("fanotify_init", fanotify_init(FAN_CLASS_NOTIF, O_RDONLY), EPERM);
  EXPECT("fanotify_mark", fanotify_mark(0, FAN_MARK_ADD, FAN_OPEN, AT_FDCWD, "/usr/bin"), EPERM, EBADF);
  EXPECT("memfd_secret", syscall(SYS_memfd_secret, 0), EPERM);
  EXPECT("vhangup", syscall(SYS_vhangup), EPERM);
  EXPECT("lookup_dcookie", syscall(SYS_lookup_dcookie, 0ULL, buf, sizeof buf), EPERM);
  EXPECT("sysfs(3)", syscall(SYS_sysfs, 3), EPERM);
  EXPECT("uselib", syscall(SYS_uselib, "/tmp/husk-no-such-lib"), EPERM);
}

/* Attacker renames the machine (sethostname, setdomainname, to confuse
 * host logs; the current names are re-set, so nothing would change even if
 * allowed): EPERM; the box's hostname is "husk". */
static void p_uts_hostname(void) {
  struct utsname u;
  uname(&u);
  if (strcmp(u.nodename, "husk"))
    bad("hostname is %s", u.nodename);
  /* Re-set the current names: nothing would change even if allowed. */
  EXPECT("sethostname (same)", sethostname(u.nodename, strlen(u.nodename)), EPERM);
  EXPECT("setdomainname (same)", setdomainname(u.domainname, strlen(u.domainname)), EPERM);
}

/* Attacker reconfigures network interfaces (SIOCSIFFLAGS/SIOCSIFMTU on lo,
 * re-setting the current values so nothing would change even if allowed):
 * EPERM, the box holds no CAP_NET_ADMIN. */
static void p_net_admin(void) {
  if (!only_loopback()) {
    bad("interfaces other than lo exist: not trying");
    return;
  }
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq ifr = {0};
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
  if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) {
    bad("SIOCGIFFLAGS: %s", en(errno));
    return;
  }
  EXPECT("SIOCSIFFLAGS lo (unchanged)", ioctl(s, SIOCSIFFLAGS, &ifr), EPERM);
  if (ioctl(s, SIOCGIFMTU, &ifr) == 0)
    EXPECT("SIOCSIFMTU lo (unchanged)", ioctl(s, SIOCSIFMTU, &ifr), EPERM);
  close(s);
}

/* ======================================================================
 * Network
 * ====================================================================== */

/* Attacker lists network interfaces looking for a way out: only `lo`. */
static void p_net_only_lo(void) {
  struct if_nameindex *ifs = if_nameindex();
  if (!ifs) {
    bad("if_nameindex: %s", en(errno));
    return;
  }
  for (struct if_nameindex *i = ifs; i->if_index; i++)
    if (strcmp(i->if_name, "lo"))
      bad("interface %s present", i->if_name);
    else
      good("lo only");
  if_freenameindex(ifs);
}

/* Attacker looks for a route out of the box: the routing tables hold
 * nothing but loopback (IPv4's main table is empty, IPv6's names only
 * `lo`), so no address outside the box can be reached.  Read, never
 * tried: a probe sends nothing to an address it did not make. */
static void p_net_internet(void) {
  FILE *f = fopen("/proc/net/route", "re");
  if (!f) {
    bad("/proc/net/route: %s", en(errno));
    return;
  }
  char line[512];
  int n = 0;
  while (fgets(line, sizeof line, f))
    if (n++ > 0)
      bad("an IPv4 route: %.80s", line);
  fclose(f);
  if (n <= 1)
    good("no IPv4 route");
  f = fopen("/proc/net/ipv6_route", "re");
  if (!f) {
    if (errno == ENOENT)
      good("no IPv6 (no ipv6_route)");
    else
      bad("/proc/net/ipv6_route: %s", en(errno));
    return;
  }
  bool other = false;
  while (fgets(line, sizeof line, f)) {
    size_t len = strcspn(line, "\n");
    line[len] = 0;
    const char *dev = strrchr(line, ' ');
    dev = dev ? dev + 1 : line;
    if (strcmp(dev, "lo")) {
      bad("an IPv6 route through %.32s", dev);
      other = true;
    }
  }
  fclose(f);
  if (!other)
    good("IPv6 routes only through lo");
}

/* Attacker connects to a service on the host's 127.0.0.1 (run.sh runs a
 * listener at HOST_PORT): ECONNREFUSED, the box's loopback is its own. */
static void p_net_host_loopback(void) {
  int port = env_int("HOST_PORT");
  if (port <= 0) {
    bad("HOST_PORT not set (run through run.sh)");
    return;
  }
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT("connect 127.0.0.1:HOST_PORT", connect(s, (struct sockaddr *)&a, sizeof a), ECONNREFUSED);
  close(s);
  struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
                            .sin6_addr = IN6ADDR_LOOPBACK_INIT};
  s = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT("connect [::1]:HOST_PORT", connect(s, (struct sockaddr *)&a6, sizeof a6), ECONNREFUSED,
         EADDRNOTAVAIL, ENETUNREACH);
  close(s);
}

/* Attacker binds the host listener's port on 127.0.0.1 to hijack its
 * clients: the bind succeeds only inside the box's own namespace (no
 * EADDRINUSE: the host's port is not in this namespace). */
static void p_net_bind_host_port(void) {
  int port = env_int("HOST_PORT");
  if (port <= 0) {
    bad("HOST_PORT not set (run through run.sh)");
    return;
  }
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (bind(s, (struct sockaddr *)&a, sizeof a) < 0)
    bad("bind 127.0.0.1:HOST_PORT: %s (the host's port is visible)", en(errno));
  else
    good("bound 127.0.0.1:%d in the box's own namespace", port);
  close(s);
}

/* Attacker connects to an abstract unix socket of the host (run.sh listens
 * on @HOST_ABSTRACT; X11, containerd-shim, D-Bus use these): ECONNREFUSED
 * (other network namespace) or EPERM (Landlock scope). */
static void p_net_host_abstract(void) {
  const char *name = getenv("HOST_ABSTRACT");
  if (!name) {
    bad("HOST_ABSTRACT not set (run through run.sh)");
    return;
  }
  static const char *const extra[] = {"/tmp/.X11-unix/X0", "/org/freedesktop/systemd1/notify", NULL};
  for (int i = -1; i < 0 || extra[i]; i++) {
    const char *n = i < 0 ? name : extra[i];
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t len = strlen(n);
    memcpy(a.sun_path + 1, n, len);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    char w[160];
    snprintf(w, sizeof w, "connect @%s", n);
    EXPECT(w, connect(s, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len)),
           ECONNREFUSED, EPERM);
    close(s);
  }
}

/* Attacker reads /proc/net (tcp, unix) to map host services: the host's
 * listener port and abstract socket do not appear. */
static void p_proc_net_isolated(void) {
  int port = env_int("HOST_PORT");
  const char *name = getenv("HOST_ABSTRACT");
  if (port <= 0 || !name) {
    bad("HOST_PORT/HOST_ABSTRACT not set (run through run.sh)");
    return;
  }
  static char buf[1 << 16];
  char hex[16];
  snprintf(hex, sizeof hex, ":%04X ", port);
  if (read_file("/proc/net/tcp", buf, sizeof buf) >= 0 && strstr(buf, hex))
    bad("host port %d listed in /proc/net/tcp", port);
  if (read_file("/proc/net/unix", buf, sizeof buf) >= 0 && strstr(buf, name))
    bad("host abstract socket listed in /proc/net/unix");
  if (read_file("/proc/net/unix", buf, sizeof buf) >= 0 && strstr(buf, "husk/uid-slot"))
    bad("husk's uid-slot locks listed in /proc/net/unix");
  good("host sockets not listed");
}

/* Attacker looks for SysV IPC objects of the host or of other boxes (run.sh
 * creates a host shm segment and message queue): none is visible. */
static void p_sysv_ipc(void) {
  static const char *const f[] = {"/proc/sysvipc/shm", "/proc/sysvipc/msg", "/proc/sysvipc/sem", NULL};
  for (int i = 0; f[i]; i++) {
    static char buf[1 << 16];
    ssize_t n = read_file(f[i], buf, sizeof buf);
    if (n < 0)
      continue;
    int lines = 0;
    for (char *p = buf; *p; p++)
      lines += *p == '\n';
    if (lines > 1)
      bad("%s lists %d objects", f[i], lines - 1);
  }
  EXPECT("shmget(host key)", shmget((key_t)env_int("HOST_SHM_KEY"), 0, 0), ENOENT);
  good("no foreign SysV IPC objects");
}

/* ======================================================================
 * Resource exhaustion
 * ====================================================================== */

/* Attacker fork-bombs (run with --pids 16): fork fails with EAGAIN at the
 * cgroup's pids.max, after fewer than 16 processes. */
static void p_fork_bomb(void) {
  int p[2];
  if (pipe(p) < 0) {
    bad("pipe");
    return;
  }
  int n = 0, e = 0;
  for (; n < 500; n++) {
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
      close(p[1]);
      char ch;
      while (read(p[0], &ch, 1) < 0 && errno == EINTR)
        ;
      _exit(0);
    }
    if (c < 0) {
      e = errno;
      break;
    }
  }
  close(p[1]);
  while (wait(NULL) > 0)
    ;
  if (n >= 500)
    bad("forked %d processes without a limit", n);
  else if (e != EAGAIN)
    bad("fork failed after %d with %s, want EAGAIN", n, en(e));
  else if (n >= 16)
    bad("forked %d processes, above --pids 16", n);
  else
    good("%d forks, then EAGAIN", n);
}

/* Attacker exhausts file descriptors and raises RLIMIT_NOFILE: EMFILE at the
 * box's limit (<= 4096); raising the hard limit fails with EPERM. */
static void p_fd_exhaust(void) {
  int n = 0, e = 0;
  for (; n < 100000; n++)
    if (open("/dev/null", O_RDONLY) < 0) {
      e = errno;
      break;
    }
  if (e != EMFILE || n > 4096)
    bad("opened %d fds, then %s", n, en(e));
  else
    good("%d fds, then EMFILE", n);
  struct rlimit r = {1 << 20, 1 << 20};
  EXPECT("raise RLIMIT_NOFILE", setrlimit(RLIMIT_NOFILE, &r), EPERM);
}

/* Attacker locks memory (mlock, mlockall) to pin RAM outside reclaim, and
 * raises RLIMIT_MEMLOCK: limited to 64 KiB, raising fails with EPERM. */
static void p_memlock(void) {
  struct rlimit r;
  getrlimit(RLIMIT_MEMLOCK, &r);
  if (r.rlim_max > 64 * 1024)
    bad("RLIMIT_MEMLOCK hard limit %llu", (unsigned long long)r.rlim_max);
  struct rlimit big = {RLIM_INFINITY, RLIM_INFINITY};
  EXPECT("raise RLIMIT_MEMLOCK", setrlimit(RLIMIT_MEMLOCK, &big), EPERM);
  size_t len = 4 << 20;
  void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT("mlock 4 MiB", mlock(m, len), ENOMEM, EPERM, EAGAIN);
  EXPECT("mlockall", mlockall(MCL_CURRENT | MCL_FUTURE), ENOMEM, EPERM, EAGAIN);
  munmap(m, len);
}

/* Attacker fills the disk (run with --disk 4M): writes fail with ENOSPC
 * after at most 4 MiB; the host disk is untouched. */
static void p_disk_fill(void) {
  int fd = open(WS "/fill", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  static char blk[65536];
  memset(blk, 'x', sizeof blk);
  long long total = 0;
  int e = 0;
  for (;;) {
    ssize_t n = write(fd, blk, sizeof blk);
    if (n < 0) {
      e = errno;
      break;
    }
    total += n;
    if (total > (64LL << 20))
      break;
  }
  int fd2 = open("/tmp/fill2", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  errno = 0;
  long r2 = (long)write(fd2, blk, sizeof blk);
  int e2 = errno;
  close(fd2);
  close(fd);
  if (e != ENOSPC || total > 4LL * 1024 * 1024)
    bad("wrote %lld bytes, then %s", total, en(e));
  else
    good("%lld bytes, then ENOSPC", total);
  check_fail("write /tmp when full", r2, e2, (const int[]){ENOSPC, 0});
  unlink(WS "/fill");
}

/* Attacker creates files until the inode table is full (run with --disk
 * 1M: 4096 inodes): ENOSPC; host inodes untouched. */
static void p_inode_fill(void) {
  mkdir("/tmp/i", 0755);
  int n = 0, e = 0;
  for (; n < 20000; n++) {
    char p[64];
    snprintf(p, sizeof p, "/tmp/i/%d", n);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      e = errno;
      break;
    }
    close(fd);
  }
  if (e != ENOSPC || n > 4096)
    bad("created %d files, then %s", n, en(e));
  else
    good("%d files, then ENOSPC", n);
}

static void mem_child(void) {
  for (int i = 0; i < 1024; i++) {
    char *p = malloc(1 << 20);
    if (!p)
      _exit(3);
    memset(p, i & 0xff, 1 << 20);
  }
  _exit(2);
}

/* Attacker allocates memory until something gives (run with --memory 32M):
 * the box is OOM-killed inside its cgroup (the allocating child dies of
 * SIGKILL, or the whole box with memory.oom.group); the host is untouched. */
static void p_mem_bomb(void) {
  int st = in_child(mem_child);
  if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
    good("allocating child OOM-killed");
  else if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
    good("malloc failed (memory limit)");
  else
    bad("allocated 1 GiB (status 0x%x)", st);
}

/* Attacker takes realtime scheduling (SCHED_FIFO/RR, SCHED_DEADLINE), the
 * realtime I/O class or a negative nice value to starve the host beyond its
 * --cpus bandwidth:
 * refused (EPERM/EACCES). Reverted at once if it ever succeeded. */
static void p_rt_sched(void) {
  struct sched_param sp = {.sched_priority = 1};
  errno = 0;
  int r = sched_setscheduler(0, SCHED_FIFO, &sp);
  int e = errno;
  if (r == 0) {
    struct sched_param z = {0};
    sched_setscheduler(0, SCHED_OTHER, &z);
  }
  check_fail("SCHED_FIFO", r, e, (const int[]){EPERM, 0});
  errno = 0;
  r = sched_setscheduler(0, SCHED_RR, &sp);
  e = errno;
  if (r == 0) {
    struct sched_param z = {0};
    sched_setscheduler(0, SCHED_OTHER, &z);
  }
  check_fail("SCHED_RR", r, e, (const int[]){EPERM, 0});
  struct {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t prio;
    uint64_t runtime, deadline, period;
  } sa = {.size = 48, .policy = 6 /* SCHED_DEADLINE */, .runtime = 10000000,
          .deadline = 30000000, .period = 30000000};
  errno = 0;
  r = (int)syscall(SYS_sched_setattr, 0, &sa, 0);
  e = errno;
  if (r == 0) {
    struct sched_param z = {0};
    sched_setscheduler(0, SCHED_OTHER, &z);
  }
  check_fail("SCHED_DEADLINE", r, e, (const int[]){EPERM, 0});
  errno = 0;
  r = setpriority(PRIO_PROCESS, 0, -10);
  e = errno;
  if (r == 0)
    setpriority(PRIO_PROCESS, 0, 0);
  check_fail("nice -10", r, e, (const int[]){EACCES, EPERM, 0});
  errno = 0;
  long io = syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, 0, (1L << 13) | 0 /* RT, 0 */);
  e = errno;
  if (io == 0)
    syscall(SYS_ioprio_set, 1, 0, (2L << 13) | 4);
  check_fail("ioprio RT", io, e, (const int[]){EPERM, 0});
  struct rlimit rl;
  getrlimit(RLIMIT_RTPRIO, &rl);
  if (rl.rlim_cur || rl.rlim_max)
    bad("RLIMIT_RTPRIO is %llu/%llu", (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
}

/* Attacker leaves a daemon behind (double fork + setsid, ignoring SIGTERM
 * and SIGHUP, named hdaemon-$HOST_TAG): run.sh checks it is gone once husk
 * has returned. */
static void p_daemonize(void) {
  fflush(stdout);
  pid_t c = fork();
  if (c == 0) {
    setsid();
    if (fork() == 0) {
      signal(SIGTERM, SIG_IGN);
      signal(SIGHUP, SIG_IGN);
      signal(SIGINT, SIG_IGN);
      char name[16];
      const char *tag = getenv("HOST_TAG");
      snprintf(name, sizeof name, "hdaemon-%.7s", tag ? tag : "x");
      prctl(PR_SET_NAME, name, 0, 0, 0);
      int null = open("/dev/null", O_RDWR);
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
      for (;;)
        pause();
    }
    _exit(0);
  }
  waitpid(c, NULL, 0);
  good("daemon left running in the box");
}

/* Attacker leaves files and SysV objects for the next run to find (step 1:
 * plant in /workspace, /tmp, /dev/shm and a shm segment). */
static void p_prev_run_plant(void) {
  static const char *const f[] = {WS "/.husk-prev", "/tmp/.husk-prev", "/dev/shm/.husk-prev", NULL};
  for (int i = 0; f[i]; i++) {
    int fd = open(f[i], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
      bad("cannot plant %s: %s", f[i], en(errno));
    else
      close(fd);
  }
  if (shmget(0x48555348, 4096, IPC_CREAT | 0666) < 0)
    bad("cannot plant shm: %s", en(errno));
  good("planted");
}

/* Attacker looks for what a previous run left (step 2): nothing of it is
 * visible in a new box (files, shm, processes). */
static void p_prev_run_check(void) {
  static const char *const f[] = {WS "/.husk-prev", "/tmp/.husk-prev", "/dev/shm/.husk-prev", NULL};
  for (int i = 0; f[i]; i++)
    must_be_absent(f[i]);
  EXPECT("shmget(previous key)", shmget(0x48555348, 0, 0), ENOENT);
  good("nothing from the previous run");
}

/* Attacker sleeps forever, ignoring SIGTERM/SIGINT/SIGHUP (run with
 * --timeout 1): husk kills the box and exits 124. Prints nothing itself. */
static void p_sleep_forever(void) {
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  for (;;)
    pause();
}

/* Attacker plants traps for husk's --export copy (symlinks to /etc/shadow
 * and out of the tree, a FIFO, a socket, a 1 GiB sparse file, files under
 * names where run.sh pre-planted symlinks, a directory chain deeper than
 * the copy limit, a name with terminal escapes): run.sh checks the host side. */
static void p_export_plant(void) {
  if (symlink("/etc/shadow", WS "/shadow") < 0 || symlink("../../../../../../../..", WS "/escape") < 0)
    bad("symlink: %s", en(errno));
  if (mkfifo(WS "/fifo", 0644) < 0)
    bad("mkfifo: %s", en(errno));
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX, .sun_path = WS "/sock"};
  if (bind(s, (struct sockaddr *)&a, sizeof a) < 0)
    bad("bind socket: %s", en(errno));
  int fd = open(WS "/sparse", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ftruncate(fd, 1LL << 30) < 0 || pwrite(fd, "end", 3, (1LL << 30) - 3) != 3)
    bad("sparse file: %s", en(errno));
  close(fd);
  fd = open(WS "/victim", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "PWNED\n", 6) != 6)
    bad("victim: %s", en(errno));
  close(fd);
  mkdir(WS "/vdir", 0755);
  fd = open(WS "/vdir/x", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "PWNED\n", 6) != 6)
    bad("vdir/x: %s", en(errno));
  close(fd);
  /* A FIFO whose name carries terminal escapes and a newline: it is skipped,
   * so husk names it in a warning on the host's stderr. */
  if (mkfifo(WS "/esc\x1b]0;pwned\x07\x1b[2J\nFAKE husk: ok", 0644) < 0)
    bad("mkfifo escape name: %s", en(errno));
  int dir = open(WS, O_RDONLY | O_DIRECTORY);
  mkdirat(dir, "deep", 0755);
  int cur = openat(dir, "deep", O_RDONLY | O_DIRECTORY);
  close(dir);
  for (int i = 0; i < 300 && cur >= 0; i++) {
    mkdirat(cur, "d", 0755);
    int next = openat(cur, "d", O_RDONLY | O_DIRECTORY);
    close(cur);
    cur = next;
  }
  if (cur < 0)
    bad("deep directory chain: %s", en(errno));
  else
    close(cur);
  good("export traps planted");
}

/* ---- additions: crash dumps, device and fs ioctls, credential spoofing --- */

static void crash_child(void) {
  prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  kill(getpid(), SIGSEGV);
  _exit(0);
}

/* Attacker crashes (SIGSEGV, dumpable) hoping core_pattern runs a host
 * helper or writes a core file: no core is dumped (WCOREDUMP clear), no core
 * file appears; RLIMIT_CORE is 0. */
static void p_crash_no_core(void) {
  int st = in_child(crash_child);
  if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGSEGV)
    bad("child status 0x%x, want SIGSEGV", st);
  else if (WCOREDUMP(st))
    bad("a core was dumped (core_pattern helper or file ran for a box process)");
  else
    good("SIGSEGV, no core dumped");
  static const char *const dirs[] = {WS, "/tmp", NULL};
  for (int i = 0; dirs[i]; i++) {
    DIR *d = opendir(dirs[i]);
    struct dirent *e;
    while (d && (e = readdir(d)))
      if (!strncmp(e->d_name, "core", 4))
        bad("%s/%s exists", dirs[i], e->d_name);
    if (d)
      closedir(d);
  }
}

/* Attacker credits or reseeds the host's entropy pool through ioctls on
 * /dev/urandom (RNDADDENTROPY with zero bytes, RNDRESEEDCRNG): EPERM. */
static void p_random_ioctl(void) {
  int fd = open("/dev/urandom", O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    bad("open /dev/urandom: %s", en(errno));
    return;
  }
  struct {
    int entropy_count, buf_size;
    unsigned char buf[8];
  } e = {0, 0, {0}};
  EXPECT("RNDADDENTROPY (0 bytes)", ioctl(fd, RNDADDENTROPY, &e), EPERM);
  EXPECT("RNDRESEEDCRNG", ioctl(fd, RNDRESEEDCRNG, 0), EPERM);
  int cnt = 0;
  EXPECT("RNDADDTOENTCNT (0)", ioctl(fd, RNDADDTOENTCNT, &cnt), EPERM);
  close(fd);
}

#define HUSK_FITHAW _IOWR('X', 120, int)
#define HUSK_FS_IOC_SETFLAGS _IOW('f', 2, long)
#define HUSK_FS_IOC_GETFLAGS _IOR('f', 1, long)
#define HUSK_FS_IMMUTABLE_FL 0x00000010

/* Attacker uses filesystem ioctls: freezing/thawing /usr's filesystem
 * (FITHAW on a non-frozen fs, so nothing would change), setting inode flags
 * on a host binary (unchanged flags) or the immutable flag on its own file:
 * EPERM (EROFS on read-only /usr). */
static void p_fs_ioctls(void) {
  int usr = open("/usr", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  EXPECT("FITHAW /usr", ioctl(usr, HUSK_FITHAW, 0), EPERM);
  int ws = open(WS, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  EXPECT("FITHAW /workspace", ioctl(ws, HUSK_FITHAW, 0), EPERM);
  int bin = open("/usr/bin/env", O_RDONLY | O_CLOEXEC);
  int flags = 0;
  if (ioctl(bin, HUSK_FS_IOC_GETFLAGS, &flags) == 0) /* re-set unchanged flags */
    EXPECT("FS_IOC_SETFLAGS /usr/bin/env (same)", ioctl(bin, HUSK_FS_IOC_SETFLAGS, &flags), EPERM,
           EROFS, EACCES);
  int f = open(WS "/immutable", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  flags = 0;
  if (f >= 0 && ioctl(f, HUSK_FS_IOC_GETFLAGS, &flags) == 0) {
    flags |= HUSK_FS_IMMUTABLE_FL;
    EXPECT("FS_IOC_SETFLAGS immutable own file", ioctl(f, HUSK_FS_IOC_SETFLAGS, &flags), EPERM);
  }
  close(f);
  close(bin);
  close(ws);
  close(usr);
}

/* Attacker forges unix-socket credentials (SCM_CREDENTIALS claiming uid 0
 * or pid 1) to fool a peer that trusts them: sendmsg fails with EPERM. */
static void p_scm_creds_spoof(void) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0) {
    bad("socketpair: %s", en(errno));
    return;
  }
  int on = 1;
  setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
  static const struct {
    pid_t pid;
    uid_t uid;
    gid_t gid;
    const char *n;
  } forged[] = {{0, 0, 0, "uid 0"}, {1, BOX_UID, BOX_UID, "pid 1"}, {0, 65534, 65534, "uid 65534"}};
  for (size_t i = 0; i < sizeof forged / sizeof forged[0]; i++) {
    struct ucred uc = {.pid = forged[i].pid ? forged[i].pid : getpid(), .uid = forged[i].uid,
                       .gid = forged[i].gid};
    union {
      char buf[CMSG_SPACE(sizeof(struct ucred))];
      struct cmsghdr align;
    } u;
    char data = 'x';
    struct iovec iov = {&data, 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_CREDENTIALS;
    c->cmsg_len = CMSG_LEN(sizeof uc);
    memcpy(CMSG_DATA(c), &uc, sizeof uc);
    char w[48];
    snprintf(w, sizeof w, "SCM_CREDENTIALS %s", forged[i].n);
    EXPECT(w, sendmsg(sv[0], &m, 0), EPERM);
  }
  close(sv[0]);
  close(sv[1]);
}

/* ---- inotify on the shared root ------------------------------------------ */

/* Attacker watches the read-only root every box has in common (/usr/bin,
 * /usr/lib, /etc, /) and the devices every box has (/dev/null and the
 * others, and /proc/kcore, which a /dev/null covers) to see what other
 * tenants' boxes and the host run, read and write.  The host side (run.sh,
 * serve/root.sh) waits for the READY line, makes another box execute and
 * read programs there and write /dev/null, reads and creates files there
 * itself and writes /dev/null, then ends this probe's stdin.  Events are
 * queued when they happen, so anything leaked is in the queue before the
 * probe's own events that follow: the probe must find only its own.  Its
 * own accesses must reach its watches (the watches work), and watching its
 * own /workspace and /tmp must keep working (dev servers, tail -f). */
static const char *const inotify_shared[] = {"/usr/bin", "/usr/lib", "/etc", "/",
                                             "/etc/ssl/certs", "/dev/null", "/dev/zero",
                                             "/dev/full", "/dev/random", "/dev/urandom",
                                             "/dev/tty", "/proc/kcore"};
#define NSHARED (sizeof inotify_shared / sizeof inotify_shared[0])
#define FIRST_DEV 5 /* inotify_shared[FIRST_DEV...] are the devices */

/* Read what is queued; count events per watch; name the first foreign ones. */
static void inotify_drain(int fd, const int *wds, size_t nwds, int *counts, char *seen, size_t cap) {
  _Alignas(struct inotify_event) char buf[8192];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0)
    for (char *q = buf; q < buf + n;) {
      const struct inotify_event *e = (const void *)q;
      for (size_t i = 0; i < nwds; i++)
        if (wds[i] == e->wd) {
          counts[i]++;
          size_t len = strlen(seen);
          if (len + 64 < cap)
            snprintf(seen + len, cap - len, " %s/%s:%#x", i < NSHARED ? inotify_shared[i] : "own",
                     e->len ? e->name : "", e->mask);
        }
      q += sizeof *e + e->len;
    }
}

static void p_inotify_isolated(void) {
  int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) {
    bad("inotify_init1: %s", en(errno));
    return;
  }
  int wds[NSHARED + 2], counts[NSHARED + 2] = {0};
  for (size_t i = 0; i < NSHARED; i++)
    /* /etc/ssl/certs and /proc/kcore are there only when the host has them. */
    if ((wds[i] = inotify_add_watch(fd, inotify_shared[i], IN_ALL_EVENTS)) < 0 &&
        (errno != ENOENT || (i != 4 && i != NSHARED - 1))) {
      bad("inotify_add_watch %s: %s", inotify_shared[i], en(errno));
      return;
    }
  if ((wds[NSHARED] = inotify_add_watch(fd, WS, IN_CREATE)) < 0 ||
      (wds[NSHARED + 1] = inotify_add_watch(fd, "/tmp", IN_CREATE)) < 0) {
    bad("inotify_add_watch on the box's own /workspace or /tmp: %s", en(errno));
    return;
  }
  /* The box's own accesses reach its watches: a silent "no event" below
   * then means something. */
  static char seen[2048];
  const char *own[] = {"/usr/bin/env", "/etc/passwd", "/dev/null"};
  for (size_t i = 0; i < 3; i++) {
    int f = open(own[i], O_RDONLY | O_CLOEXEC);
    if (f < 0) {
      bad("open %s: %s", own[i], en(errno));
      return;
    }
    close(f);
  }
  inotify_drain(fd, wds, NSHARED + 2, counts, seen, sizeof seen);
  if (counts[0] == 0 || counts[2] == 0 || counts[FIRST_DEV] == 0) {
    bad("the box's own opens of /usr/bin/env, /etc/passwd and /dev/null reached no watch (%s)",
        seen);
    return;
  }
  memset(counts, 0, sizeof counts);
  seen[0] = '\0';
  printf("READY inotify\n");
  fflush(stdout);
  char c;
  ssize_t r;
  while ((r = read(0, &c, 1)) > 0 || (r < 0 && errno == EINTR))
    ;
  int f1 = open(WS "/.inotify-own", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  int f2 = open("/tmp/.inotify-own", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (f1 < 0 || f2 < 0) {
    bad("create own files: %s", en(errno));
    return;
  }
  close(f1);
  close(f2);
  inotify_drain(fd, wds, NSHARED + 2, counts, seen, sizeof seen);
  int foreign = 0;
  for (size_t i = 0; i < NSHARED; i++)
    foreign += counts[i];
  if (foreign)
    bad("%d events from other boxes or the host on the shared root:%.300s", foreign, seen);
  if (counts[NSHARED] == 0 || counts[NSHARED + 1] == 0)
    bad("the box's own creates in /workspace (%d) and /tmp (%d) were not seen", counts[NSHARED],
        counts[NSHARED + 1]);
  if (!nbad)
    good("watches on %zu shared dirs and %zu devices saw only the box's own accesses; own "
         "/workspace and /tmp events seen", (size_t)FIRST_DEV, NSHARED - FIRST_DEV);
}

/* ---- table and main ---------------------------------------------------- */

struct probe {
  const char *name;
  void (*fn)(void);
};

static const struct probe probes[] = {
    /* secrets */
    {"env_allowlist", p_env_allowlist},
    {"proc1_private", p_proc1_private},
    {"proc1_cmdline", p_proc1_cmdline},
    {"host_files_absent", p_host_files_absent},
    {"host_sockets_absent", p_host_sockets_absent},
    {"inherited_fds", p_inherited_fds},
    {"keyctl", p_keyctl},
    /* filesystem escape */
    {"chroot_escape", p_chroot_escape},
    {"write_usr", p_write_usr},
    {"write_root_etc", p_write_root_etc},
    {"remount_rw", p_remount_rw},
    {"umount_masks", p_umount_masks},
    {"mount_new", p_mount_new},
    {"newmount_api", p_newmount_api},
    {"pivot_root", p_pivot_root},
    {"unshare_ns", p_unshare_ns},
    {"clone_newns", p_clone_newns},
    {"clone3", p_clone3},
    {"setns", p_setns},
    {"open_by_handle", p_open_by_handle},
    {"cross_fs_link", p_cross_fs_link},
    /* privileges */
    {"self_status", p_self_status},
    {"setuid_binaries", p_setuid_binaries},
    {"setuid_root", p_setuid_root},
    {"caps_raise", p_caps_raise},
    {"seccomp_stack", p_seccomp_stack},
    /* /proc and /sys */
    {"sysrq_trigger", p_sysrq_trigger},
    {"core_pattern", p_core_pattern},
    {"proc_sys_readonly", p_proc_sys_readonly},
    {"proc_kernel_info", p_proc_kernel_info},
    {"uid_map_rewrite", p_uid_map_rewrite},
    {"oom_score_adj", p_oom_score_adj},
    {"sys_absent", p_sys_absent},
    {"cgroup_escape", p_cgroup_escape},
    {"crash_no_core", p_crash_no_core},
    /* devices and tty */
    {"mknod_dev", p_mknod_dev},
    {"dev_nodes_absent", p_dev_nodes_absent},
    {"dev_readonly", p_dev_readonly},
    {"tiocsti", p_tiocsti},
    {"tiocsti_highbits", p_tiocsti_highbits},
    {"tioclinux", p_tioclinux},
    {"tiocsetd", p_tiocsetd},
    {"dev_tty", p_dev_tty},
    {"pty_limit", p_pty_limit},
    {"random_ioctl", p_random_ioctl},
    {"fs_ioctls", p_fs_ioctls},
    /* processes */
    {"ptrace", p_ptrace},
    {"process_vm", p_process_vm},
    {"pidfd_getfd", p_pidfd_getfd},
    {"kill_init", p_kill_init},
    {"init_tamper", p_init_tamper},
    {"pid_visibility", p_pid_visibility},
    {"perf_event_open", p_perf_event_open},
    /* kernel interfaces */
    {"io_uring", p_io_uring},
    {"userfaultfd", p_userfaultfd},
    {"bpf", p_bpf},
    {"modules", p_modules},
    {"kexec", p_kexec},
    {"reboot", p_reboot},
    {"swapon", p_swapon},
    {"clock_set", p_clock_set},
    {"syslog", p_syslog},
    {"x32_syscall", p_x32_syscall},
    {"int80", p_int80},
    {"personality", p_personality},
    {"af_packet", p_af_packet},
    {"af_alg", p_af_alg},
    {"af_vsock", p_af_vsock},
    {"sock_raw", p_sock_raw},
    {"netlink_nonroute", p_netlink_nonroute},
    {"socket_families", p_socket_families},
    {"misc_blocked", p_misc_blocked},
    {"uts_hostname", p_uts_hostname},
    {"net_admin", p_net_admin},
    {"scm_creds_spoof", p_scm_creds_spoof},
    /* network */
    {"net_only_lo", p_net_only_lo},
    {"net_internet", p_net_internet},
    {"net_host_loopback", p_net_host_loopback},
    {"net_bind_host_port", p_net_bind_host_port},
    {"net_host_abstract", p_net_host_abstract},
    {"proc_net_isolated", p_proc_net_isolated},
    {"sysv_ipc", p_sysv_ipc},
    /* resources and lifecycle */
    {"fork_bomb", p_fork_bomb},
    {"fd_exhaust", p_fd_exhaust},
    {"memlock", p_memlock},
    {"disk_fill", p_disk_fill},
    {"inode_fill", p_inode_fill},
    {"mem_bomb", p_mem_bomb},
    {"rt_sched", p_rt_sched},
    {"daemonize", p_daemonize},
    {"prev_run_plant", p_prev_run_plant},
    {"prev_run_check", p_prev_run_check},
    {"sleep_forever", p_sleep_forever},
    {"export_plant", p_export_plant},
    /* needs the host side: run.sh, tests/serve/root.sh */
    {"inotify_isolated", p_inotify_isolated},
};

#define NPROBES (sizeof probes / sizeof probes[0])

static void print_line(const char *verdict, const char *name, const char *detail) {
  char clean[sizeof badbuf];
  size_t i = 0;
  for (; detail[i] && i + 1 < sizeof clean; i++) {
    unsigned char c = (unsigned char)detail[i];
    clean[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
  }
  clean[i] = '\0';
  printf("%s %s: %s\n", verdict, name, clean);
  fflush(stdout);
}

static int run_one(const struct probe *p) {
  fflush(stdout);
  pid_t c = fork();
  if (c < 0) {
    print_line("FAIL", p->name, "fork failed");
    return 1;
  }
  if (c == 0) {
    alarm(25);
    okbuf[0] = badbuf[0] = '\0';
    nbad = 0;
    p->fn();
    if (nbad)
      print_line("FAIL", p->name, badbuf);
    else
      print_line("PASS", p->name, okbuf[0] ? okbuf : "ok");
    _exit(nbad ? 1 : 0);
  }
  int st = 0;
  while (waitpid(c, &st, 0) < 0 && errno == EINTR)
    ;
  if (WIFEXITED(st))
    return WEXITSTATUS(st) ? 1 : 0;
  char d[96];
  snprintf(d, sizeof d, "probe died with signal %d (%s)", WTERMSIG(st), sigabbrev_np(WTERMSIG(st)));
  print_line("FAIL", p->name, d);
  return 1;
}

/* True if this process holds privileges a box program never has: then it is
 * not inside a husk box and must not poke at the machine. */
static bool privileged(void) {
  if (geteuid() == 0 || getuid() == 0)
    return true;
  struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct d[2] = {{0}};
  if (syscall(SYS_capget, &h, d) < 0)
    return true;
  return d[0].effective || d[0].permitted || d[1].effective || d[1].permitted;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s NAME... | --list\n", argv[0]);
    return 2;
  }
  if (!strcmp(argv[1], "--list")) {
    for (size_t i = 0; i < NPROBES; i++)
      puts(probes[i].name);
    return 0;
  }
  bool priv = privileged();
  int failed = 0;
  for (int a = 1; a < argc; a++) {
    const struct probe *p = NULL;
    for (size_t i = 0; i < NPROBES; i++)
      if (!strcmp(probes[i].name, argv[a]))
        p = &probes[i];
    if (!p) {
      print_line("FAIL", argv[a], "no such probe");
      failed = 1;
      continue;
    }
    if (priv) {
      print_line("FAIL", p->name, "refusing to run with uid 0 or capabilities (not inside a husk box?)");
      failed = 1;
      continue;
    }
    failed |= run_one(p);
  }
  return failed;
}
