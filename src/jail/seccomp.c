#define _GNU_SOURCE
#include "jail/seccomp.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/netlink.h>

#include "util/cleanup.h"

/* libseccomp's SCMP_An() macros leave datum_b implicit, which clang warns
 * about; spell every comparison out. */
#define CMP(n, cmp, a) ((struct scmp_arg_cmp){.arg = (n), .op = (cmp), .datum_a = (a), .datum_b = 0})
#define CMP_MASKED(n, mask, v) \
  ((struct scmp_arg_cmp){.arg = (n), .op = SCMP_CMP_MASKED_EQ, .datum_a = (mask), .datum_b = (v)})

/* What a box may call: Docker's default allowlist (moby/profiles
 * seccomp/default.json) with everything capability-gated or risky removed:
 * no ptrace/process_vm_*, no mount or namespace calls, no keyrings, no bpf,
 * perf_event_open, userfaultfd, io_uring, no clock setters, no module or
 * reboot calls, no open_by_handle_at/name_to_handle_at, no kcmp/pidfd_getfd.
 * Names libseccomp does not know on this platform are skipped. */
static const char *const allowed[] = {
    "accept", "accept4", "access", "alarm", "arch_prctl", "bind", "brk", "cachestat", "capget",
    "capset", "chdir", "chmod", "chown", "clock_getres", "clock_gettime", "clock_nanosleep",
    "close", "close_range", "connect", "copy_file_range", "creat", "dup", "dup2", "dup3",
    "epoll_create", "epoll_create1", "epoll_ctl", "epoll_pwait", "epoll_pwait2", "epoll_wait",
    "eventfd", "eventfd2", "execve", "execveat", "exit", "exit_group", "faccessat",
    "faccessat2", "fadvise64", "fallocate", "fchdir", "fchmod", "fchmodat", "fchmodat2",
    "fchown", "fchownat", "fcntl", "fdatasync", "fgetxattr", "flistxattr", "flock", "fork",
    "fremovexattr", "fsetxattr", "fstat", "fstatfs", "fsync", "ftruncate", "futex",
    "futex_requeue", "futex_wait", "futex_waitv", "futex_wake", "futimesat", "getcpu",
    "getcwd", "getdents", "getdents64", "getegid", "geteuid", "getgid", "getgroups",
    "getitimer", "getpeername", "getpgid", "getpgrp", "getpid", "getppid", "getpriority",
    "getrandom", "getresgid", "getresuid", "getrlimit", "get_robust_list", "getrusage",
    "getsid", "getsockname", "getsockopt", "gettid", "gettimeofday", "getuid", "getxattr",
    "inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch", "io_cancel",
    "ioctl", "io_destroy", "io_getevents", "io_pgetevents", "ioprio_get", "ioprio_set",
    "io_setup", "io_submit", "kill", "landlock_add_rule", "landlock_create_ruleset",
    "landlock_restrict_self", "lchown", "lgetxattr", "link", "linkat", "listen", "listxattr",
    "llistxattr", "lremovexattr", "lseek", "lsetxattr", "lstat", "madvise", "map_shadow_stack",
    "membarrier", "memfd_create", "mincore", "mkdir", "mkdirat", "mknod", "mknodat", "mlock",
    "mlock2", "mlockall", "mmap", "mprotect", "mq_getsetattr", "mq_notify", "mq_open",
    "mq_timedreceive", "mq_timedsend", "mq_unlink", "mremap", "mseal", "msgctl", "msgget",
    "msgrcv", "msgsnd", "msync", "munlock", "munlockall", "munmap", "nanosleep", "newfstatat",
    "open", "openat", "openat2", "pause", "pidfd_open", "pidfd_send_signal", "pipe", "pipe2",
    "pkey_alloc", "pkey_free", "pkey_mprotect", "poll", "ppoll", "prctl", "pread64", "preadv",
    "preadv2", "prlimit64", "process_mrelease", "pselect6", "pwrite64", "pwritev", "pwritev2",
    "read", "readahead", "readlink", "readlinkat", "readv", "recvfrom", "recvmmsg", "recvmsg",
    "remap_file_pages", "removexattr", "rename", "renameat", "renameat2", "restart_syscall",
    "rmdir", "rseq", "rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo",
    "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "rt_tgsigqueueinfo",
    "sched_getaffinity", "sched_getattr", "sched_getparam", "sched_get_priority_max",
    "sched_get_priority_min", "sched_getscheduler", "sched_rr_get_interval",
    "sched_setaffinity", "sched_setattr", "sched_setparam", "sched_setscheduler",
    "sched_yield", "seccomp", "select", "semctl", "semget", "semop", "semtimedop", "sendfile",
    "sendmmsg", "sendmsg", "sendto", "setfsgid", "setfsuid", "setgid", "setgroups",
    "setitimer", "setpgid", "setpriority", "setregid", "setresgid", "setresuid", "setreuid",
    "setrlimit", "set_robust_list", "setsid", "setsockopt", "set_tid_address", "setuid",
    "setxattr", "shmat", "shmctl", "shmdt", "shmget", "shutdown", "sigaltstack", "signalfd",
    "signalfd4", "splice", "stat", "statfs", "statx", "symlink", "symlinkat", "sync",
    "sync_file_range", "syncfs", "sysinfo", "tee", "tgkill", "time", "timer_create",
    "timer_delete", "timer_getoverrun", "timer_gettime", "timer_settime", "timerfd_create",
    "timerfd_gettime", "timerfd_settime", "times", "tkill", "truncate", "umask", "uname",
    "unlink", "unlinkat", "utime", "utimensat", "utimes", "vfork", "vmsplice", "wait4",
    "waitid", "write", "writev",
    /* allowed below with argument checks: clone, socket, socketpair, personality */
};

/* Fail with ENOSYS rather than EPERM so that libc and runtimes fall back. */
static const char *const enosys[] = {"clone3", "io_uring_setup", "io_uring_enter",
                                     "io_uring_register"};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct seccomp_policy policy;
static int policy_rc;
static struct husk_err policy_err;

/* Guard: native arch only, no x32 numbers (bit 30), else kill. */
static struct sock_filter guard_insns[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

/* A libseccomp context released when it goes out of scope. */
static void cleanup_seccomp_releasep(scmp_filter_ctx *ctx) {
  if (*ctx)
    seccomp_release(*ctx);
}
#define cleanup_seccomp __attribute__((cleanup(cleanup_seccomp_releasep)))

static int export_ctx(scmp_filter_ctx ctx, struct sock_fprog *out, struct husk_err *err) {
  cleanup_close int fd = memfd_create("husk-seccomp", MFD_CLOEXEC);
  if (fd < 0)
    return husk_error(err, errno, "cannot create a memfd to export the seccomp filter to");
  int rc = seccomp_export_bpf(ctx, fd);
  if (rc < 0)
    return husk_error(err, -rc, "cannot export the seccomp filter (seccomp_export_bpf)");
  off_t size = lseek(fd, 0, SEEK_END);
  if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0)
    return husk_fail(err, EINVAL, "cannot use the exported seccomp filter: %lld bytes",
                     (long long)size);
  cleanup_free struct sock_filter *insns = malloc((size_t)size);
  if (!insns)
    return husk_error(err, ENOMEM, "cannot allocate the seccomp filter");
  if (pread(fd, insns, (size_t)size, 0) != size)
    return husk_error(err, errno ? errno : EIO, "cannot read the exported seccomp filter");
  out->filter = steal_pointer(&insns);
  out->len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
  return 0;
}

static int add(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n,
               const struct scmp_arg_cmp *args, struct husk_err *err) {
  int nr = seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR)
    return 0; /* unknown to this libseccomp/arch: nothing to allow */
  int rc = seccomp_rule_add_array(ctx, action, nr, n, args);
  if (rc < 0)
    return husk_error(err, -rc, "cannot add the seccomp rule for `%s`", name);
  return 0;
}

static int build_allowlist(struct sock_fprog *out, struct husk_err *err) {
  cleanup_seccomp scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
  if (!ctx)
    return husk_fail(err, ENOMEM, "cannot create a seccomp filter (seccomp_init)");
  /* A non-native arch never reaches here (guard filter); be strict anyway. */
  if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0 ||
      seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0) < 0)
    return husk_fail(err, EINVAL,
                     "cannot set the attributes of a seccomp filter (seccomp_attr_set)");
  /* A binary tree of syscall numbers instead of a linear list: fewer
   * instructions per syscall (~9 instead of up to ~300).  Best effort:
   * older libseccomp lacks it. */
  seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
  for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
    if (add(ctx, SCMP_ACT_ALLOW, allowed[i], 0, NULL, err) < 0)
      return -1;
  for (size_t i = 0; i < sizeof enosys / sizeof enosys[0]; i++)
    if (add(ctx, SCMP_ACT_ERRNO(ENOSYS), enosys[i], 0, NULL, err) < 0)
      return -1;
  /* clone: namespace flags are refused by the argument filter below. */
  if (add(ctx, SCMP_ACT_ALLOW, "clone", 0, NULL, err) < 0)
    return -1;
  /* socket: unix, IPv4/6 stream and datagram, and route netlink only. */
  {
    struct scmp_arg_cmp unix_any[] = {CMP(0, SCMP_CMP_EQ, AF_UNIX)};
    struct scmp_arg_cmp nl_route[] = {CMP(0, SCMP_CMP_EQ, AF_NETLINK),
                                      CMP(2, SCMP_CMP_EQ, NETLINK_ROUTE)};
    if (add(ctx, SCMP_ACT_ALLOW, "socket", 1, unix_any, err) < 0 ||
        add(ctx, SCMP_ACT_ALLOW, "socketpair", 1, unix_any, err) < 0 ||
        add(ctx, SCMP_ACT_ALLOW, "socket", 2, nl_route, err) < 0)
      return -1;
    int fams[] = {AF_INET, AF_INET6};
    int types[] = {SOCK_STREAM, SOCK_DGRAM};
    for (int f = 0; f < 2; f++)
      for (int t = 0; t < 2; t++) {
        struct scmp_arg_cmp a[] = {CMP(0, SCMP_CMP_EQ, (scmp_datum_t)fams[f]),
                                   CMP_MASKED(1, 0xf, (scmp_datum_t)types[t])};
        if (add(ctx, SCMP_ACT_ALLOW, "socket", 2, a, err) < 0)
          return -1;
      }
  }
  /* personality: Linux and the query value only (as Docker). */
  {
    const scmp_datum_t ok[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
      struct scmp_arg_cmp a[] = {CMP(0, SCMP_CMP_EQ, ok[i])};
      if (add(ctx, SCMP_ACT_ALLOW, "personality", 1, a, err) < 0)
        return -1;
    }
  }
  return export_ctx(ctx, out, err);
}

static int build_argfilter(struct sock_fprog *out, struct husk_err *err) {
  cleanup_seccomp scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx)
    return husk_fail(err, ENOMEM, "cannot create a seccomp filter (seccomp_init)");
  if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0 ||
      seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0) < 0)
    return husk_fail(err, EINVAL,
                     "cannot set the attributes of a seccomp filter (seccomp_attr_set)");
  /* Terminal injection and line-discipline ioctls.  The kernel takes the
   * command as 32 bits; compare only those so that high garbage bits cannot
   * slip past (CVE-2019-10063). */
  {
    const scmp_datum_t bad[] = {TIOCSTI, TIOCLINUX, TIOCSETD, TIOCCONS};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      struct scmp_arg_cmp a[] = {CMP_MASKED(1, 0xffffffffULL, bad[i])};
      if (add(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, a, err) < 0)
        return -1;
    }
  }
  /* No new namespaces from inside the box: each flag on its own. */
  {
    const scmp_datum_t ns[] = {CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                               CLONE_NEWUSER, CLONE_NEWPID,   CLONE_NEWNET, 0x00000080 /* CLONE_NEWTIME */};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
      struct scmp_arg_cmp a[] = {CMP_MASKED(0, ns[i], ns[i])};
      if (add(ctx, SCMP_ACT_ERRNO(EPERM), "clone", 1, a, err) < 0)
        return -1;
    }
  }
  return export_ctx(ctx, out, err);
}

int seccomp_policy_compile(struct seccomp_policy *out, struct husk_err *err) {
  out->prog[0].filter = guard_insns;
  out->prog[0].len = sizeof guard_insns / sizeof guard_insns[0];
  if (build_allowlist(&out->prog[1], err) < 0)
    return -1;
  if (build_argfilter(&out->prog[2], err) < 0) {
    free(out->prog[1].filter);
    out->prog[1].filter = NULL;
    return -1;
  }
  return 0;
}

static void compile(void) {
  policy_rc = seccomp_policy_compile(&policy, &policy_err);
}

int seccomp_policy_get(const struct seccomp_policy **out, struct husk_err *err) {
  if (husk_seccomp_precompiled.prog[1].len != 0) {
    *out = &husk_seccomp_precompiled;
    return 0;
  }
  pthread_once(&once, compile);
  if (policy_rc < 0) {
    if (err)
      *err = policy_err;
    return -1;
  }
  *out = &policy;
  return 0;
}

int seccomp_policy_apply(const struct seccomp_policy *p, struct husk_err *err) {
  static const char *const names[HUSK_SECCOMP_FILTERS] = {"the architecture guard", "the allowlist",
                                                          "argument denials"};
  /* Apply in reverse so the guard (the first to run) is installed last:
   * the kernel runs the most recently installed filter first. */
  for (int i = HUSK_SECCOMP_FILTERS - 1; i >= 0; i--)
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p->prog[i]) < 0)
      return husk_error(err, errno, "cannot install the seccomp filter (%s)", names[i]);
  return 0;
}
