/* Unit tests for src/jail/seccomp.{h,c}: the compiled policy, and its
 * effect in a forked child (no_new_privs + seccomp_policy_apply): what is
 * denied with EPERM, what fails with ENOSYS, what still works, and what
 * kills the process (x32 numbers, the i386 entry point).
 *
 * Every probe uses arguments that are harmless should the filter fail to
 * stop the call (invalid magic numbers, bad fds, a private mount namespace,
 * a pty of our own), so a broken filter shows up as a failed check, never
 * as damage to the host. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "jail/seccomp.h"
#include "jail/syscalls.h"
#include "unit.h"

#ifndef TIOCSTI
#define TIOCSTI 0x5412
#endif

/* ---- the compiled policy ---------------------------------------------------- */

static const struct seccomp_policy *thread_results[8];
static int thread_rcs[8];

static void *get_in_thread(void *arg) {
  intptr_t i = (intptr_t)arg;
  struct husk_err err;
  thread_rcs[i] = seccomp_policy_get(&thread_results[i], &err);
  return NULL;
}

/* First use from several threads at once: one compilation, one result. */
TEST(policy_get_concurrent_first_use) {
  pthread_t t[8];
  for (intptr_t i = 0; i < 8; i++)
    CHECK(pthread_create(&t[i], NULL, get_in_thread, (void *)i) == 0);
  for (int i = 0; i < 8; i++)
    pthread_join(t[i], NULL);
  for (int i = 0; i < 8; i++) {
    CHECK(thread_rcs[i] == 0);
    CHECK(thread_results[i] != NULL && thread_results[i] == thread_results[0]);
  }
}

TEST(policy_shape) {
  const struct seccomp_policy *p = NULL, *q = NULL;
  struct husk_err err = {0};
  CHECK(seccomp_policy_get(&p, &err) == 0);
  CHECK(p != NULL);
  if (!p) {
    printf("#   %s\n", err.msg);
    return;
  }
  CHECK(HUSK_SECCOMP_FILTERS == 3);
  for (int i = 0; i < HUSK_SECCOMP_FILTERS; i++) {
    CHECK(p->prog[i].filter != NULL);
    CHECK(p->prog[i].len > 0);
    CHECK(p->prog[i].len <= BPF_MAXINSNS);
    /* Every program ends in a return. */
    if (p->prog[i].filter && p->prog[i].len)
      CHECK(BPF_CLASS(p->prog[i].filter[p->prog[i].len - 1].code) == BPF_RET);
  }
  /* The guard loads the architecture first. */
  CHECK(p->prog[0].filter[0].code == (BPF_LD | BPF_W | BPF_ABS));
  CHECK(p->prog[0].filter[0].k == offsetof(struct seccomp_data, arch));
  CHECK(seccomp_policy_get(&q, &err) == 0);
  CHECK(q == p);
  CHECK(seccomp_policy_get(&q, NULL) == 0 && q == p);
}

/* The policy linked in at build time is what the library compiles now
 * (a stale generated file would silently ship an old policy). */
TEST(precompiled_matches_runtime_compile) {
  struct seccomp_policy c;
  struct husk_err err = {0};
  memset(&c, 0, sizeof c);
  CHECK(seccomp_policy_compile(&c, &err) == 0);
  const struct seccomp_policy *p = NULL;
  CHECK(seccomp_policy_get(&p, &err) == 0);
  if (husk_seccomp_precompiled.prog[1].len == 0)
    printf("#   note: no precompiled policy linked in\n");
  for (int i = 0; p && i < HUSK_SECCOMP_FILTERS; i++) {
    CHECK(c.prog[i].len == p->prog[i].len);
    if (c.prog[i].len == p->prog[i].len && c.prog[i].filter && p->prog[i].filter)
      CHECK(memcmp(c.prog[i].filter, p->prog[i].filter,
                   c.prog[i].len * sizeof(struct sock_filter)) == 0);
  }
  /* prog[0] is the static guard; the others are heap-allocated. */
  free(c.prog[1].filter);
  free(c.prog[2].filter);
}

/* ---- the filter in a child ---------------------------------------------------- */

/* In the child: a call must fail with exactly this errno. */
#define DENIED(e, call)                                                                    \
  do {                                                                                     \
    errno = 0;                                                                             \
    long r_ = (long)(call);                                                                \
    int e_ = errno;                                                                        \
    if (r_ == 0 && getpid() != self)                                                       \
      _exit(0); /* a clone that should not have happened: leave quietly */                  \
    if (!(r_ == -1 && e_ == (e))) {                                                        \
      printf("#   %s:%d: %s = %ld (%s), expected %s\n", __FILE__, __LINE__, #call, r_,     \
             r_ == -1 ? strerror(e_) : "success", #e);                                     \
      unit_cur_failed = 1;                                                                 \
    }                                                                                      \
    if (r_ > 0 && e_ == 0)                                                                 \
      reap_or_close(r_);                                                                   \
  } while (0)

/* In the child: a call must succeed (a non-negative result). */
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

static pid_t self;

/* A probe that unexpectedly succeeded returned an fd or a pid. */
static void reap_or_close(long r) {
  if (waitpid((pid_t)r, NULL, WNOHANG) < 0)
    close((int)r);
}

static int open_pty(void) {
  int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0)
    return -1;
  const char *name = ptsname(m);
  int s = name ? open(name, O_RDWR | O_NOCTTY | O_CLOEXEC) : -1;
  /* keep the master open for the child's lifetime (leaked on purpose) */
  return s;
}

/* Enter a private mount namespace so that a mount the filter failed to
 * stop could not affect the host. */
static bool private_mounts(void) {
  if (unshare(CLONE_NEWNS) < 0)
    return false;
  return mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
}

static int enter_filter(void) {
  const struct seccomp_policy *p;
  struct husk_err err;
  if (seccomp_policy_get(&p, &err) < 0) {
    printf("#   seccomp_policy_get: %s\n", err.msg);
    return -1;
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
    printf("#   PR_SET_NO_NEW_PRIVS: %s\n", strerror(errno));
    return -1;
  }
  if (seccomp_policy_apply(p, &err) < 0) {
    printf("#   seccomp_policy_apply: %s\n", err.msg);
    return -1;
  }
  return 0;
}

/* Run fn in a forked child; returns its wait status. */
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

static void child_denials(void) {
  bool root = geteuid() == 0;
  setsid(); /* no controlling terminal: vhangup and tty probes stay local */
  if (root && !private_mounts())
    printf("#   note: no private mount namespace\n");
  int tty = open_pty();
  if (tty < 0)
    tty = open("/dev/null", O_RDWR | O_CLOEXEC);
  char scratch[] = "/tmp/husk-test-seccomp-XXXXXX";
  bool have_scratch = mkdtemp(scratch) != NULL;
  self = getpid();
  if (enter_filter() < 0) {
    unit_cur_failed = 1;
    return;
  }
  /* Still alive and basic calls work. */
  CHECK(syscall(SYS_getpid) == self);
  CHECK(getppid() > 0);
  struct timespec ts;
  CHECK(clock_gettime(CLOCK_MONOTONIC, &ts) == 0);

  /* Terminal injection, on fd 0 (a pty of our own) and with high garbage
   * bits that the kernel discards (CVE-2019-10063).  First, while this
   * process still has all its capabilities should an unshare below get
   * through: without the filter these calls succeed for root. */
  if (dup2(tty, 0) < 0)
    printf("#   note: dup2 pty: %s\n", strerror(errno));
  char c = 'x';
  DENIED(EPERM, ioctl(0, TIOCSTI, &c));
  DENIED(EPERM, syscall(SYS_ioctl, 0, 0xffffffff00005412UL, &c));
  DENIED(EPERM, syscall(SYS_ioctl, 0, 0x1234567800005412UL, &c));
  DENIED(EPERM, syscall(SYS_ioctl, tty, (unsigned long)TIOCSTI, &c));
  int ldisc = 0;
  DENIED(EPERM, ioctl(0, TIOCSETD, &ldisc));
  DENIED(EPERM, syscall(SYS_ioctl, 0, 0xffffffff00000000UL | TIOCSETD, &ldisc));
  char sub = 0;
  DENIED(EPERM, ioctl(0, TIOCLINUX, &sub));
  /* Ordinary ioctls still work. */
  struct winsize ws;
  if (isatty(0))
    ALLOWED(ioctl(0, TIOCGWINSZ, &ws));
  int pfd[2];
  CHECK(pipe(pfd) == 0);
  int avail = -1;
  ALLOWED(ioctl(pfd[0], FIONREAD, &avail));
  CHECK(avail == 0);

  /* Process inspection. */
  DENIED(EPERM, syscall(SYS_ptrace, PTRACE_PEEKDATA, self, 0, 0));
  DENIED(EPERM, syscall(SYS_ptrace, PTRACE_ATTACH, -1, 0, 0));
  DENIED(EPERM, syscall(SYS_process_vm_readv, self, NULL, 0, NULL, 0, 0));
  DENIED(EPERM, syscall(SYS_kcmp, self, self, 0, 0, 0));
#ifdef SYS_pidfd_getfd
  DENIED(EPERM, syscall(SYS_pidfd_getfd, -1, 0, 0));
#endif

  /* Namespaces and mounts. */
  DENIED(EPERM, unshare(CLONE_NEWUSER));
  DENIED(EPERM, unshare(CLONE_NEWNS));
  DENIED(EPERM, unshare(CLONE_NEWNET));
  DENIED(EPERM, setns(-1, 0));
  DENIED(EPERM, mount("husk-test", have_scratch ? scratch : "/tmp", "tmpfs", 0, ""));
  DENIED(EPERM, umount2("/nonexistent-husk-test", 0));
  DENIED(EPERM, syscall(SYS_pivot_root, "/nonexistent-a", "/nonexistent-b"));
  DENIED(EPERM, chroot("/nonexistent-husk-test"));
#ifdef SYS_fsopen
  DENIED(EPERM, syscall(SYS_fsopen, "tmpfs", 0));
#endif
#ifdef SYS_open_tree
  DENIED(EPERM, syscall(SYS_open_tree, AT_FDCWD, "/nonexistent-husk-test", 0));
#endif
#ifdef SYS_move_mount
  DENIED(EPERM, syscall(SYS_move_mount, -1, "", -1, "", 0));
#endif

  /* clone with namespace flags (the raw syscall: flags, stack, ...). */
  const unsigned long ns[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWNET,   CLONE_NEWPID,
                              CLONE_NEWUTS,  CLONE_NEWIPC, CLONE_NEWCGROUP};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    DENIED(EPERM, syscall(SYS_clone, ns[i] | SIGCHLD, NULL, NULL, NULL, 0));
  DENIED(EPERM, syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS | SIGCHLD, NULL,
                        NULL, NULL, 0));

  /* clone3 and io_uring: ENOSYS, so that libc falls back. */
  struct clone_args ca;
  memset(&ca, 0, sizeof ca);
  ca.exit_signal = SIGCHLD;
  DENIED(ENOSYS, sys_clone3(&ca));
  ca.flags = CLONE_NEWUSER;
  DENIED(ENOSYS, sys_clone3(&ca));
  unsigned char params[256] = {0};
  DENIED(ENOSYS, syscall(SYS_io_uring_setup, 1, params));
  DENIED(ENOSYS, syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0));
  DENIED(ENOSYS, syscall(SYS_io_uring_register, -1, 0, NULL, 0));

  /* Keyrings. */
  DENIED(EPERM, syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
  DENIED(EPERM, syscall(SYS_add_key, "user", "husk-test", "x", 1, KEY_SPEC_PROCESS_KEYRING));
  DENIED(EPERM, syscall(SYS_request_key, "user", "husk-test", NULL, 0));

  /* Kernel-wide state, with arguments the kernel would reject anyway. */
  DENIED(EPERM, syscall(SYS_bpf, -1, NULL, 0));
  DENIED(EPERM, syscall(SYS_perf_event_open, NULL, -1, -1, -1, 0));
  DENIED(EPERM, syscall(SYS_userfaultfd, 0xffffffff));
  DENIED(EPERM, syscall(SYS_open_by_handle_at, -1, NULL, 0));
  DENIED(EPERM, syscall(SYS_name_to_handle_at, -1, "", NULL, NULL, 0));
  DENIED(EPERM, syscall(SYS_init_module, NULL, 0, ""));
  DENIED(EPERM, syscall(SYS_finit_module, -1, "", 0));
  DENIED(EPERM, syscall(SYS_delete_module, "husk_test_no_such_module", O_NONBLOCK));
  DENIED(EPERM, syscall(SYS_kexec_load, 0, 0, NULL, 0xffffffffUL));
  DENIED(EPERM, syscall(SYS_reboot, 0, 0, 0, NULL)); /* bad magic */
  DENIED(EPERM, syscall(SYS_clock_settime, 12345, NULL));
  DENIED(EPERM, syscall(SYS_settimeofday, NULL, NULL));
  DENIED(EPERM, syscall(SYS_adjtimex, NULL));
  DENIED(EPERM, syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0));
  DENIED(EPERM, syscall(SYS_swapon, NULL, 0));
  DENIED(EPERM, syscall(SYS_iopl, 0));
  DENIED(EPERM, syscall(SYS_ioperm, 0, 0, 0));
  DENIED(EPERM, syscall(SYS_fanotify_init, 0xffffffff, 0));
  DENIED(EPERM, syscall(SYS_quotactl, 0, NULL, 0, NULL));
  DENIED(EPERM, syscall(SYS_vhangup));
  DENIED(EPERM, syscall(1000));

  /* personality: only the Docker set. */
  DENIED(EPERM, personality(PER_LINUX | ADDR_NO_RANDOMIZE));
  DENIED(EPERM, personality(PER_BSD));
  ALLOWED(personality(0xffffffff));
  ALLOWED(personality(PER_LINUX));

  /* Sockets. */
  DENIED(EPERM, socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL)));
  DENIED(EPERM, socket(AF_PACKET, SOCK_DGRAM, 0));
  DENIED(EPERM, socket(AF_INET, SOCK_RAW, IPPROTO_ICMP));
  DENIED(EPERM, socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW));
  DENIED(EPERM, socket(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6));
  DENIED(EPERM, socket(AF_INET, SOCK_SEQPACKET, 0));
  DENIED(EPERM, socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT));
  DENIED(EPERM, socket(AF_NETLINK, SOCK_RAW, NETLINK_KOBJECT_UEVENT));
  DENIED(EPERM, socket(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER));
  DENIED(EPERM, socket(AF_ALG, SOCK_SEQPACKET, 0));
  DENIED(EPERM, socket(AF_VSOCK, SOCK_STREAM, 0));
  DENIED(EPERM, socket(AF_BLUETOOTH, SOCK_RAW, 0));
  int sp[2];
  DENIED(EPERM, socketpair(AF_INET, SOCK_STREAM, 0, sp));
  ALLOWED(socket(AF_INET, SOCK_STREAM, 0));
  ALLOWED(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  ALLOWED(socket(AF_INET, SOCK_DGRAM, 0));
  ALLOWED(socket(AF_INET6, SOCK_STREAM, 0));
  ALLOWED(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP));
  ALLOWED(socket(AF_UNIX, SOCK_STREAM, 0));
  ALLOWED(socket(AF_UNIX, SOCK_SEQPACKET, 0));
  ALLOWED(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0) {
    close(sp[0]);
    close(sp[1]);
  } else {
    CHECK(!"socketpair(AF_UNIX) is allowed");
  }

  /* Things a normal program needs. */
  ALLOWED(syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION));
  ALLOWED(open("/dev/null", O_RDONLY | O_CLOEXEC));
  ALLOWED(memfd_create("husk-test", MFD_CLOEXEC));
  pid_t kid = fork(); /* plain clone without namespace flags */
  if (kid == 0)
    _exit(7);
  CHECK(kid > 0);
  int st = 0;
  CHECK(waitpid(kid, &st, 0) == kid && WIFEXITED(st) && WEXITSTATUS(st) == 7);
  if (have_scratch)
    rmdir(scratch);
}

TEST(filter_denials_in_child) {
  int st = in_child(child_denials);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  if (WIFSIGNALED(st))
    printf("#   child killed by signal %d\n", WTERMSIG(st));
}

/* In a grandchild: run `fn` after the filter, report how it ended. */
static int filtered_grandchild(void (*fn)(void)) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    if (enter_filter() < 0)
      _exit(100);
    fn();
    _exit(101); /* should have been killed */
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid)
    return -1;
  return st;
}

static void x32_getpid(void) { syscall(39 | 0x40000000); }
static void x32_write(void) { syscall(1 | 0x40000000, 1, "x32 write got through\n", 22); }
static void high_nr(void) { syscall(0x7fffffff); }

#if defined(__x86_64__)
static long int80(long nr) {
  long r;
  __asm__ volatile("int $0x80" : "=a"(r) : "a"(nr) : "memory");
  return r;
}
static void i386_getpid(void) { int80(20); }
#endif

static void child_kills(void) {
  /* The grandchildren are the ones that die. */
  int st = filtered_grandchild(x32_getpid);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
  if (!WIFSIGNALED(st))
    printf("#   x32 getpid: status %#x\n", st);
  st = filtered_grandchild(x32_write);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
  st = filtered_grandchild(high_nr);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
#if defined(__x86_64__)
  /* The i386 entry point (wrong architecture in seccomp_data), if this
   * kernel has IA-32 emulation: probe it without the filter first. */
  fflush(stdout);
  pid_t probe = fork();
  if (probe == 0)
    _exit(int80(20) == getpid() ? 0 : 1);
  int pst = 0;
  waitpid(probe, &pst, 0);
  if (WIFEXITED(pst) && WEXITSTATUS(pst) == 0) {
    st = filtered_grandchild(i386_getpid);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
    if (!WIFSIGNALED(st))
      printf("#   i386 getpid: status %#x\n", st);
  } else {
    printf("#   note: no IA-32 emulation, i386 entry not tested\n");
  }
#endif
}

TEST(filter_kills_foreign_abis) {
  int st = in_child(child_kills);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void child_exec_works(void) {
  if (enter_filter() < 0) {
    unit_cur_failed = 1;
    return;
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0)
      dup2(null, 1);
    char *argv[] = {"/bin/sh", "-c",
                    "x=$(echo hi | cat) && test \"$x\" = hi && ls / >/dev/null && "
                    "cat /proc/self/status | grep -q '^Seccomp:.*2' && exit 42",
                    NULL};
    char *envp[] = {"PATH=/usr/bin:/bin", NULL};
    execve(argv[0], argv, envp);
    _exit(127);
  }
  int st = 0;
  CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 42);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 42)
    printf("#   shell under the filter: status %#x\n", st);
}

TEST(filter_allows_ordinary_programs) {
  int st = in_child(child_exec_works);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(void) {
  RUN(policy_get_concurrent_first_use);
  RUN(policy_shape);
  RUN(precompiled_matches_runtime_compile);
  RUN(filter_denials_in_child);
  RUN(filter_kills_foreign_abis);
  RUN(filter_allows_ordinary_programs);
  return unit_done();
}
