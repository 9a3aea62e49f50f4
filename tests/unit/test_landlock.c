/* Unit tests for src/jail/landlock.{h,c}: the ABI probe, and the box
 * ruleset applied on the host in a forked child (after no_new_privs).
 * The box's writable places that exist on a host (/tmp, /dev/shm, devices,
 * /proc) must stay usable; everything else under / is read+execute only;
 * on ABI 6+ signals and abstract unix sockets cannot leave the domain.
 * /workspace does not exist on the host, which also covers the "missing
 * path is skipped" branch. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/landlock.h"
#include "jail/syscalls.h"
#include "unit.h"

static int abi;
static char tmp_dir[64] = "/tmp/husk-test-landlock-XXXXXX";         /* writable in a box */
static char ro_dir[64] = "/var/tmp/husk-test-landlock-XXXXXX";      /* read-only in a box */
static char shm_dir[64] = "/dev/shm/husk-test-landlock-XXXXXX";     /* writable in a box */
static bool have_tmp, have_ro, have_shm;
static int abstract_listener = -1;
static struct sockaddr_un abstract_addr;
static socklen_t abstract_len;

/* In the child: a call must fail with exactly this errno. */
#define DENIED(e, call)                                                                    \
  do {                                                                                     \
    errno = 0;                                                                             \
    long r_ = (long)(call);                                                                \
    int e_ = errno;                                                                        \
    if (!(r_ == -1 && e_ == (e))) {                                                        \
      printf("#   %s:%d: %s = %ld (%s), expected %s\n", __FILE__, __LINE__, #call, r_,     \
             r_ == -1 ? strerror(e_) : "success", #e);                                     \
      unit_cur_failed = 1;                                                                 \
    }                                                                                      \
    if (r_ > 2)                                                                            \
      close((int)r_);                                                                      \
  } while (0)

/* Cross-directory moves and links may be refused as EXDEV (Landlock's
 * answer when a rename or link would gain rights) or EACCES. */
#define DENIED_MOVE(call)                                                                  \
  do {                                                                                     \
    errno = 0;                                                                             \
    long r_ = (long)(call);                                                                \
    int e_ = errno;                                                                        \
    if (!(r_ == -1 && (e_ == EXDEV || e_ == EACCES))) {                                    \
      printf("#   %s:%d: %s = %ld (%s), expected EXDEV or EACCES\n", __FILE__, __LINE__,  \
             #call, r_, r_ == -1 ? strerror(e_) : "success");                              \
      unit_cur_failed = 1;                                                                 \
    }                                                                                      \
  } while (0)

#define ALLOWED(call)                                                                      \
  do {                                                                                     \
    errno = 0;                                                                             \
    long r_ = (long)(call);                                                                \
    if (r_ < 0) {                                                                          \
      printf("#   %s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, strerror(errno));    \
      unit_cur_failed = 1;                                                                 \
    } else if (r_ > 2) {                                                                   \
      close((int)r_);                                                                      \
    }                                                                                      \
  } while (0)

static char *in(const char *dir, const char *name) {
  static char buf[4][256];
  static int slot;
  char *b = buf[slot++ & 3];
  snprintf(b, sizeof buf[0], "%s/%s", dir, name);
  return b;
}

static int in_child(void (*fn)(void)) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    unit_cur_failed = 0;
    fn();
    fflush(stdout);
    _exit(unit_cur_failed ? 1 : 0);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR)
      return -1;
  return st;
}

TEST(abi_probe) {
  errno = 0;
  long raw = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  int e = errno;
  abi = landlock_abi();
  printf("#   Landlock ABI %d\n", abi);
  if (raw < 0) {
    CHECK(abi == 0);
    printf("#   note: Landlock unavailable here (%s)\n", strerror(e));
    return;
  }
  CHECK(abi == raw);
  CHECK(abi > 0);
  CHECK(landlock_abi() == abi); /* stable */
}

static void child_noop_when_unavailable(void) {
  CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
  struct husk_err err;
  CHECK(landlock_apply_box(0, false, &err) == 0);
  CHECK(landlock_apply_box(-1, false, &err) == 0);
  /* Nothing was restricted. */
  if (have_ro) {
    int fd = open(in(ro_dir, "free"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    if (fd >= 0)
      close(fd);
    unlink(in(ro_dir, "free"));
  }
}

TEST(abi_zero_is_a_no_op) {
  int st = in_child(child_noop_when_unavailable);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void child_box_rules(void) {
  CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
  struct husk_err err;
  int rc = landlock_apply_box(abi, false, &err);
  CHECK(rc == 0);
  if (rc != 0) {
    printf("#   landlock_apply_box: %s\n", err.msg);
    return;
  }

  /* Read and execute everywhere. */
  ALLOWED(open("/etc/passwd", O_RDONLY | O_CLOEXEC));
  ALLOWED(open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ALLOWED(open("/proc/self/status", O_RDONLY | O_CLOEXEC));
  ALLOWED(access("/bin/sh", X_OK));

  /* Write nowhere else: existing files, new files, directories, links. */
  DENIED(EACCES, open("/etc/passwd", O_WRONLY | O_CLOEXEC)); /* no O_TRUNC: harmless */
  DENIED(EACCES, open("/etc/passwd", O_RDWR | O_CLOEXEC));
  struct stat pw;
  if (stat("/etc/passwd", &pw) == 0) /* same size: a no-op were it allowed */
    DENIED(EACCES, truncate("/etc/passwd", pw.st_size));
  if (have_ro) {
    DENIED(EACCES, open(in(ro_dir, "new"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    DENIED(EACCES, mkdir(in(ro_dir, "dir"), 0700));
    DENIED(EACCES, symlink("/etc/passwd", in(ro_dir, "link")));
    DENIED(EACCES, mknod(in(ro_dir, "fifo"), S_IFIFO | 0600, 0));
    DENIED(EACCES, open(in(ro_dir, "existing"), O_WRONLY | O_CLOEXEC));
    DENIED(EACCES, unlink(in(ro_dir, "existing")));
    DENIED(EACCES, rename(in(ro_dir, "existing"), in(ro_dir, "renamed")));
    /* Moving a file out of a read-only place into a writable one. */
    if (have_tmp)
      DENIED_MOVE(rename(in(ro_dir, "existing"), in(tmp_dir, "stolen")));
    /* A hard link from a writable place to a read-only file. */
    if (have_tmp)
      DENIED_MOVE(link(in(ro_dir, "existing"), in(tmp_dir, "hl")));
  }

  /* The writable places work. */
  if (have_tmp) {
    int fd = open(in(tmp_dir, "f"), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    if (fd >= 0) {
      CHECK(write(fd, "data", 4) == 4);
      CHECK(ftruncate(fd, 2) == 0);
      close(fd);
    }
    ALLOWED(truncate(in(tmp_dir, "f"), 0));
    ALLOWED(mkdir(in(tmp_dir, "d"), 0700));
    ALLOWED(rename(in(tmp_dir, "f"), in(tmp_dir, "d/f")));
    ALLOWED(symlink("f", in(tmp_dir, "d/l")));
    ALLOWED(mknod(in(tmp_dir, "fifo"), S_IFIFO | 0600, 0));
    ALLOWED(unlink(in(tmp_dir, "fifo")));
    ALLOWED(unlink(in(tmp_dir, "d/l")));
    ALLOWED(unlink(in(tmp_dir, "d/f")));
    ALLOWED(rmdir(in(tmp_dir, "d")));
  }
  if (have_shm) {
    ALLOWED(open(in(shm_dir, "s"), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    ALLOWED(unlink(in(shm_dir, "s")));
  }
  /* Devices. */
  int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  CHECK(null >= 0);
  if (null >= 0) {
    CHECK(write(null, "x", 1) == 1);
    close(null);
  }
  ALLOWED(open("/dev/zero", O_RDWR | O_CLOEXEC));
  ALLOWED(open("/dev/urandom", O_RDONLY | O_CLOEXEC));
  DENIED(EACCES, mknod("/dev/husk-test-node", S_IFIFO | 0600, 0));
  /* /proc: read and write, e.g. a process's own name. */
  ALLOWED(open("/proc/self/comm", O_WRONLY | O_CLOEXEC));

  /* A program still runs (execute on /), and inherits the domain. */
  fflush(stdout);
  pid_t kid = fork();
  if (kid == 0) {
    char *argv[] = {"/bin/sh", "-c", "echo x > /etc/husk-test-landlock && exit 1; exit 42",
                    NULL};
    char *envp[] = {"PATH=/usr/bin:/bin", NULL};
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0)
      dup2(devnull, 2);
    execve(argv[0], argv, envp);
    _exit(127);
  }
  int st = 0;
  CHECK(kid > 0 && waitpid(kid, &st, 0) == kid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 42);
  CHECK(access("/etc/husk-test-landlock", F_OK) < 0);

  /* A second restriction stacks (cannot loosen anything). */
  CHECK(landlock_apply_box(abi, false, &err) == 0);
  DENIED(EACCES, open("/etc/passwd", O_WRONLY | O_CLOEXEC));

  if (abi >= 6) {
    /* Scoped: no signals to processes outside the domain... */
    DENIED(EPERM, kill(getppid(), 0));
    DENIED(EPERM, kill(1, 0));
    /* ...but within it, yes (ourselves, our own children). */
    ALLOWED(kill(getpid(), 0));
    pid_t k = fork();
    if (k == 0) {
      pause();
      _exit(0);
    }
    ALLOWED(kill(k, SIGKILL));
    waitpid(k, NULL, 0);
    /* No connecting to an abstract socket created outside. */
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(s >= 0);
    if (abstract_listener >= 0)
      DENIED(EPERM, connect(s, (struct sockaddr *)&abstract_addr, abstract_len));
    close(s);
  } else {
    printf("#   note: ABI %d < 6, scoping not tested\n", abi);
  }
}

TEST(box_ruleset_in_child) {
  if (abi <= 0) {
    printf("#   skipped: no Landlock\n");
    return;
  }
  int st = in_child(child_box_rules);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  if (WIFSIGNALED(st))
    printf("#   child killed by signal %d\n", WTERMSIG(st));
  /* The parent is not restricted. */
  if (have_ro) {
    int fd = open(in(ro_dir, "after"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    if (fd >= 0)
      close(fd);
    unlink(in(ro_dir, "after"));
  }
}

static void setup(void) {
  have_tmp = mkdtemp(tmp_dir) != NULL;
  have_ro = mkdtemp(ro_dir) != NULL;
  have_shm = mkdtemp(shm_dir) != NULL;
  if (have_ro) {
    int fd = open(in(ro_dir, "existing"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0)
      close(fd);
  }
  abstract_listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  memset(&abstract_addr, 0, sizeof abstract_addr);
  abstract_addr.sun_family = AF_UNIX;
  int n = snprintf(abstract_addr.sun_path + 1, sizeof abstract_addr.sun_path - 1,
                   "husk-test-landlock-%d", (int)getpid());
  abstract_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
  if (abstract_listener >= 0 &&
      (bind(abstract_listener, (struct sockaddr *)&abstract_addr, abstract_len) < 0 ||
       listen(abstract_listener, 4) < 0)) {
    close(abstract_listener);
    abstract_listener = -1;
  }
}

static void teardown(void) {
  const char *names[] = {"existing", "new", "dir", "link", "fifo", "renamed", "stolen",
                         "hl", "f", "d/f", "d/l", "free", "after", "s"};
  const char *dirs[] = {have_tmp ? tmp_dir : NULL, have_ro ? ro_dir : NULL,
                        have_shm ? shm_dir : NULL};
  for (size_t d = 0; d < 3; d++) {
    if (!dirs[d])
      continue;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
      unlink(in(dirs[d], names[i]));
    rmdir(in(dirs[d], "d"));
    rmdir(in(dirs[d], "dir"));
    if (rmdir(dirs[d]) < 0)
      printf("#   note: could not remove %s: %s\n", dirs[d], strerror(errno));
  }
  unlink("/etc/husk-test-landlock");
  unlink("/dev/husk-test-node");
  if (abstract_listener >= 0)
    close(abstract_listener);
}

int main(void) {
  setup();
  RUN(abi_probe);
  RUN(abi_zero_is_a_no_op);
  RUN(box_ruleset_in_child);
  teardown();
  return unit_done();
}
