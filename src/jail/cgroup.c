/* cgroups for boxes on v2, hybrid and v1 hosts.
 *
 * The host's layout is read from /proc/self/mountinfo: a cgroup2 mount gives
 * the v2 hierarchy (which may carry no controllers at all, as on hybrid
 * hosts, where it still gives us membership tracking, cgroup.kill and CPU
 * time), and each v1 `cgroup` mount lists its controllers in its super
 * options.  Each controller husk needs (memory, pids, cpu) is taken from v2
 * when v2 offers it and from v1 otherwise.  A controller offered by neither
 * is an error: husk fails closed rather than run a box without its limits. */
#define _GNU_SOURCE
#include "jail/cgroup.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/clock.h"
#include "util/fileio.h"

enum { C_MEMORY = 1u << 0, C_PIDS = 1u << 1, C_CPU = 1u << 2, C_CPUACCT = 1u << 3, C_FREEZER = 1u << 4 };

#define MAX_HIER 8

struct hier {
  char *mount;   /* mount point of the hierarchy */
  unsigned ctrl; /* controllers husk uses from it (v1), or offers (v2) */
  int parent;    /* dirfd of <mount>/<parent> */
};

static struct {
  pthread_once_t once;
  int rc;
  struct husk_err err;
  enum cgroup_layout layout;
  bool have_v2;
  struct hier v2;
  struct hier v1[MAX_HIER];
  int nv1;
} host = {.once = PTHREAD_ONCE_INIT};

const char *cgroup_layout_name(enum cgroup_layout l) {
  switch (l) {
  case CGROUP_V2: return "v2";
  case CGROUP_HYBRID: return "hybrid";
  case CGROUP_V1: return "v1";
  }
  return "?";
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape_octal(char *s) {
  char *w = s;
  for (char *r = s; *r; r++) {
    if (r[0] == '\\' && r[1] >= '0' && r[1] <= '7' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' &&
        r[3] <= '7') {
      *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
      r += 3;
    } else {
      *w++ = *r;
    }
  }
  *w = '\0';
}

static unsigned v1_controllers(const char *opts) {
  unsigned c = 0;
  char buf[1024]; /* superopts are read into 1024 bytes, see detect() */
  snprintf(buf, sizeof buf, "%s", opts);
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (!strcmp(t, "memory")) c |= C_MEMORY;
    else if (!strcmp(t, "pids")) c |= C_PIDS;
    else if (!strcmp(t, "cpu")) c |= C_CPU;
    else if (!strcmp(t, "cpuacct")) c |= C_CPUACCT;
    else if (!strcmp(t, "freezer")) c |= C_FREEZER;
  }
  return c;
}

static const char *parent_name(void) {
  const char *p = getenv("HUSK_CGROUP_PARENT");
  if (!p || !*p)
    return "husk";
  while (*p == '/')
    p++;
  return *p ? p : "husk";
}

/* mkdir -p of a relative path under dirfd; returns an fd of the result. */
static int mkdir_p_at(int dirfd, const char *rel, struct husk_err *err) {
  char buf[PATH_MAX];
  if (snprintf(buf, sizeof buf, "%s", rel) >= (int)sizeof buf)
    return husk_fail(err, ENAMETOOLONG, "cgroup parent `%s` is too long", rel);
  cleanup_close int cur = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
  if (cur < 0)
    return husk_error(err, errno, "dup");
  char *save = NULL;
  for (char *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
    if (!strcmp(t, "..") || !strcmp(t, "."))
      return husk_fail(err, EINVAL, "cgroup parent `%s` must not contain `.` or `..`", rel);
    if (mkdirat(cur, t, 0755) < 0 && errno != EEXIST)
      return husk_error(err, errno, "cannot create cgroup directory `%s`", t);
    int next = openat(cur, t, O_DIRECTORY | O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (next < 0)
      return husk_error(err, errno, "cannot open cgroup directory `%s`", t);
    close(cur);
    cur = next;
  }
  return take_fd(&cur);
}

static bool has_word(const char *list, const char *word) {
  size_t n = strlen(word);
  for (const char *p = list; (p = strstr(p, word)); p += n)
    if ((p == list || isspace((unsigned char)p[-1])) && (!p[n] || isspace((unsigned char)p[n])))
      return true;
  return false;
}

/* Enable the controllers we need for children of every directory along
 * the parent path on a v2 host.  Writes are idempotent. */
static int v2_enable(const char *mount, const char *rel, unsigned need, struct husk_err *err) {
  char ctl[256] = "";
  if (need & C_MEMORY) strcat(ctl, "+memory ");
  if (need & C_PIDS) strcat(ctl, "+pids ");
  if (need & C_CPU) strcat(ctl, "+cpu ");
  if (!ctl[0])
    return 0;
  cleanup_close int cur = open(mount, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
  if (cur < 0)
    return husk_error(err, errno, "cannot open `%s`", mount);
  char buf[PATH_MAX];
  snprintf(buf, sizeof buf, "%s", rel);
  char *save = NULL;
  for (char *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
    if (write_file_at(cur, "cgroup.subtree_control", ctl) < 0)
      return husk_error(err, errno,
                        "cannot enable controllers (%s) under `%s` (on a v2 host whose cgroup "
                        "holds processes, set HUSK_CGROUP_PARENT to a delegated, empty subtree)",
                        ctl, mount);
    int next = openat(cur, t, O_DIRECTORY | O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (next < 0)
      return husk_error(err, errno, "cannot open cgroup `%s`", t);
    close(cur);
    cur = next;
  }
  if (write_file_at(cur, "cgroup.subtree_control", ctl) < 0)
    return husk_error(err, errno, "cannot enable controllers (%s) in `%s/%s`", ctl, mount, rel);
  return 0;
}

static void detect(void) {
  struct husk_err *err = &host.err;
  host.rc = -1;
  cleanup_fclose FILE *f = fopen("/proc/self/mountinfo", "re");
  if (!f) {
    husk_error(err, errno, "cannot read /proc/self/mountinfo");
    return;
  }
  cleanup_free char *line = NULL;
  size_t cap = 0;
  unsigned v1_have = 0;
  while (getline(&line, &cap, f) > 0) {
    /* id parent maj:min root mountpoint opts [optional...] - fstype source superopts */
    char *sep = strstr(line, " - ");
    if (!sep)
      continue;
    char mp[PATH_MAX], fstype[64], source[256], superopts[1024];
    if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1)
      continue;
    superopts[0] = '\0';
    if (sscanf(sep + 3, "%63s %255s %1023s", fstype, source, superopts) < 2)
      continue;
    unescape_octal(mp);
    if (!strcmp(fstype, "cgroup2") && !host.have_v2) {
      host.have_v2 = true;
      host.v2.mount = strdup(mp);
      host.v2.parent = -1;
    } else if (!strcmp(fstype, "cgroup") && host.nv1 < MAX_HIER) {
      unsigned c = v1_controllers(superopts) & ~v1_have;
      if (!c)
        continue;
      v1_have |= c;
      host.v1[host.nv1++] = (struct hier){.mount = strdup(mp), .ctrl = c, .parent = -1};
    }
  }
  if (host.have_v2) {
    char ctrls[512] = "";
    cleanup_close int fd = open(host.v2.mount, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && read_file_at(fd, "cgroup.controllers", ctrls, sizeof ctrls) >= 0) {
      if (has_word(ctrls, "memory")) host.v2.ctrl |= C_MEMORY;
      if (has_word(ctrls, "pids")) host.v2.ctrl |= C_PIDS;
      if (has_word(ctrls, "cpu")) host.v2.ctrl |= C_CPU;
    }
  }
  unsigned need = C_MEMORY | C_PIDS | C_CPU;
  unsigned from_v2 = host.have_v2 ? (host.v2.ctrl & need) : 0;
  /* v1 hierarchies only for what v2 does not provide (plus cpuacct/freezer
   * when there is no v2 at all). */
  int kept = 0;
  for (int i = 0; i < host.nv1; i++) {
    unsigned use = host.v1[i].ctrl & ~from_v2;
    if (host.have_v2)
      use &= ~(unsigned)(C_CPUACCT | C_FREEZER);
    if (!use) {
      free(host.v1[i].mount);
      continue;
    }
    host.v1[i].ctrl = use;
    host.v1[kept++] = host.v1[i];
  }
  host.nv1 = kept;
  unsigned have = from_v2;
  for (int i = 0; i < host.nv1; i++)
    have |= host.v1[i].ctrl;
  if ((have & need) != need) {
    husk_fail(err, ENOTSUP,
              "cgroup controllers missing on this host:%s%s%s (husk refuses to run boxes it "
              "cannot limit)",
              (have & C_MEMORY) ? "" : " memory", (have & C_PIDS) ? "" : " pids",
              (have & C_CPU) ? "" : " cpu");
    return;
  }
  if (host.have_v2 && host.nv1 == 0)
    host.layout = CGROUP_V2;
  else if (host.have_v2)
    host.layout = CGROUP_HYBRID;
  else
    host.layout = CGROUP_V1;

  const char *rel = parent_name();
  if (host.have_v2) {
    if (from_v2 && v2_enable(host.v2.mount, rel, from_v2, err) < 0)
      return;
    cleanup_close int m = open(host.v2.mount, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
    if (m < 0) {
      husk_error(err, errno, "cannot open `%s`", host.v2.mount);
      return;
    }
    host.v2.parent = mkdir_p_at(m, rel, err);
    if (host.v2.parent < 0)
      return;
    host.v2.ctrl = from_v2;
  }
  for (int i = 0; i < host.nv1; i++) {
    cleanup_close int m = open(host.v1[i].mount, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
    if (m < 0) {
      husk_error(err, errno, "cannot open `%s`", host.v1[i].mount);
      return;
    }
    host.v1[i].parent = mkdir_p_at(m, rel, err);
    if (host.v1[i].parent < 0)
      return;
  }
  host.rc = 0;
}

static int ensure_host(struct husk_err *err) {
  pthread_once(&host.once, detect);
  if (host.rc < 0 && err)
    *err = host.err;
  return host.rc;
}

int cgroup_layout(enum cgroup_layout *out, struct husk_err *err) {
  if (ensure_host(err) < 0)
    return -1;
  *out = host.layout;
  return 0;
}

static int *v1_slot(struct cgroup *cg, unsigned c) {
  switch (c) {
  case C_MEMORY: return &cg->memory;
  case C_PIDS: return &cg->pids;
  case C_CPU: return &cg->cpu;
  case C_CPUACCT: return &cg->cpuacct;
  case C_FREEZER: return &cg->freezer;
  }
  return NULL;
}

void cgroup_close(struct cgroup *cg) {
  int *fds[] = {&cg->v2, &cg->memory, &cg->pids, &cg->cpu, &cg->cpuacct, &cg->freezer};
  for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
    close_quiet(*fds[i]);
    *fds[i] = -1;
  }
}

/* Open (and with `create`, make) the box directory in every hierarchy. */
static int open_all(struct cgroup *cg, const char *name, bool create, struct husk_err *err) {
  if (strlen(name) >= sizeof cg->name || !*name || strchr(name, '/') || name[0] == '.')
    return husk_fail(err, EINVAL, "invalid cgroup name `%s`", name);
  *cg = (struct cgroup)CGROUP_INIT;
  snprintf(cg->name, sizeof cg->name, "%s", name);
  if (host.have_v2) {
    if (create && mkdirat(host.v2.parent, name, 0755) < 0)
      return husk_error(err, errno, "cannot create cgroup `%s` in `%s`", name, host.v2.mount);
    cg->v2 = openat(host.v2.parent, name, O_DIRECTORY | O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (cg->v2 < 0)
      return husk_error(err, errno, "cannot open cgroup `%s` in `%s`", name, host.v2.mount);
    cg->memory_in_v2 = host.v2.ctrl & C_MEMORY;
    cg->pids_in_v2 = host.v2.ctrl & C_PIDS;
    cg->cpu_in_v2 = host.v2.ctrl & C_CPU;
  }
  for (int i = 0; i < host.nv1; i++) {
    if (create && mkdirat(host.v1[i].parent, name, 0755) < 0)
      return husk_error(err, errno, "cannot create cgroup `%s` in `%s`", name, host.v1[i].mount);
    for (unsigned c = 1; c <= C_FREEZER; c <<= 1) {
      if (!(host.v1[i].ctrl & c))
        continue;
      int fd = openat(host.v1[i].parent, name, O_DIRECTORY | O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      if (fd < 0)
        return husk_error(err, errno, "cannot open cgroup `%s` in `%s`", name, host.v1[i].mount);
      *v1_slot(cg, c) = fd;
    }
  }
  return 0;
}

static int set_limits(struct cgroup *cg, const struct cgroup_limits *lim, struct husk_err *err) {
  char v[64];
  if (cg->memory_in_v2) {
    snprintf(v, sizeof v, "%llu", (unsigned long long)lim->memory_bytes);
    if (write_file_at(cg->v2, "memory.max", v) < 0)
      return husk_error(err, errno, "cannot set memory.max");
    if (write_file_at(cg->v2, "memory.swap.max", "0") < 0 && errno != ENOENT)
      return husk_error(err, errno, "cannot set memory.swap.max");
    /* One OOM kill takes the whole box down, not a random process in it. */
    if (write_file_at(cg->v2, "memory.oom.group", "1") < 0 && errno != ENOENT)
      return husk_error(err, errno, "cannot set memory.oom.group");
  } else {
    snprintf(v, sizeof v, "%llu", (unsigned long long)lim->memory_bytes);
    if (write_file_at(cg->memory, "memory.limit_in_bytes", v) < 0)
      return husk_error(err, errno, "cannot set memory.limit_in_bytes");
    /* memsw = memory + swap: equal means no swap.  Absent without swap
     * accounting, which is fine: then there is nothing to limit. */
    if (write_file_at(cg->memory, "memory.memsw.limit_in_bytes", v) < 0 && errno != ENOENT)
      return husk_error(err, errno, "cannot set memory.memsw.limit_in_bytes");
  }
  snprintf(v, sizeof v, "%llu", (unsigned long long)lim->pids);
  if (write_file_at(cg->pids_in_v2 ? cg->v2 : cg->pids, "pids.max", v) < 0)
    return husk_error(err, errno, "cannot set pids.max");
  unsigned long long quota = (unsigned long long)lim->cpu_milli * 100; /* per 100 ms */
  if (cg->cpu_in_v2) {
    snprintf(v, sizeof v, "%llu 100000", quota);
    if (write_file_at(cg->v2, "cpu.max", v) < 0)
      return husk_error(err, errno, "cannot set cpu.max");
  } else {
    if (write_file_at(cg->cpu, "cpu.cfs_period_us", "100000") < 0)
      return husk_error(err, errno, "cannot set cpu.cfs_period_us");
    snprintf(v, sizeof v, "%llu", quota);
    if (write_file_at(cg->cpu, "cpu.cfs_quota_us", v) < 0)
      return husk_error(err, errno, "cannot set cpu.cfs_quota_us");
  }
  return 0;
}

int cgroup_create(struct cgroup *cg, const char *name, const struct cgroup_limits *lim,
                  struct husk_err *err) {
  if (ensure_host(err) < 0)
    return -1;
  if (open_all(cg, name, true, err) < 0 || set_limits(cg, lim, err) < 0) {
    struct husk_err ignored;
    cgroup_destroy(cg, &ignored);
    return -1;
  }
  return 0;
}

int cgroup_open(struct cgroup *cg, const char *name, struct husk_err *err) {
  if (ensure_host(err) < 0)
    return -1;
  if (open_all(cg, name, false, err) < 0) {
    cgroup_close(cg);
    return -1;
  }
  return 0;
}

/* Append the fd of `file` in the cgroup directory `dir` to `fds` (`*n`
 * of them, a -1 after the last); like openat(), -1 with errno. */
static int add_attach_fd(int dir, const char *file, int *fds, size_t *n) {
  int fd = dir < 0 ? -1 : openat(dir, file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return -1;
  fds[(*n)++] = fd;
  fds[*n] = -1;
  return 0;
}

static int open_attach_fds(const struct cgroup *cg, int *fds, int *v2_index, struct husk_err *err) {
  size_t n = 0;
  for (int i = 0; i < host.nv1 && n < CGROUP_MAX_ATTACH - 1; i++) {
    cleanup_close int d =
        openat(host.v1[i].parent, cg->name, O_DIRECTORY | O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (add_attach_fd(d, "tasks", fds, &n) < 0)
      return husk_error(err, errno, "cannot open the cgroup `%s` in `%s` for attaching", cg->name,
                        host.v1[i].mount);
  }
  if (cg->v2 >= 0) {
    *v2_index = (int)n;
    if (add_attach_fd(cg->v2, "cgroup.procs", fds, &n) < 0)
      return husk_error(err, errno, "cannot open the cgroup `%s` in `%s` for attaching", cg->name,
                        host.v2.mount);
  }
  return 0;
}

int cgroup_self_attach_fds(const struct cgroup *cg, int fds[CGROUP_MAX_ATTACH + 1], int *v2_index,
                           struct husk_err *err) {
  fds[0] = -1;
  *v2_index = -1;
  if (open_attach_fds(cg, fds, v2_index, err) < 0) {
    cleanup_close_vecp(fds);
    *v2_index = -1;
    return -1;
  }
  return 0;
}

/* Value of `key` in a flat keyed file ("key value\n" lines). */
static uint64_t keyed_value(int dirfd, const char *file, const char *key) {
  char buf[4096];
  if (dirfd < 0 || read_file_at(dirfd, file, buf, sizeof buf) < 0)
    return 0;
  size_t n = strlen(key);
  for (char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (!strncmp(p, key, n) && p[n] == ' ')
      return strtoull(p + n + 1, NULL, 10);
  return 0;
}

static uint64_t single_value(int dirfd, const char *file) {
  char buf[64];
  if (dirfd < 0 || read_file_at(dirfd, file, buf, sizeof buf) < 0)
    return 0;
  return strtoull(buf, NULL, 10);
}

enum cgroup_trip cgroup_tripped(const struct cgroup *cg) {
  uint64_t oom = cg->memory_in_v2 ? keyed_value(cg->v2, "memory.events", "oom_kill")
                                  : keyed_value(cg->memory, "memory.oom_control", "oom_kill");
  if (oom)
    return CGROUP_TRIP_MEMORY;
  if (keyed_value(cg->pids_in_v2 ? cg->v2 : cg->pids, "pids.events", "max"))
    return CGROUP_TRIP_PIDS;
  return CGROUP_TRIP_NONE;
}

void cgroup_stats(const struct cgroup *cg, struct cgroup_stats *st) {
  *st = (struct cgroup_stats){0};
  if (cg->v2 >= 0)
    st->cpu_usec = keyed_value(cg->v2, "cpu.stat", "usage_usec");
  else
    st->cpu_usec = single_value(cg->cpuacct, "cpuacct.usage") / 1000;
  if (cg->memory_in_v2) {
    st->memory_current = single_value(cg->v2, "memory.current");
    st->memory_peak = single_value(cg->v2, "memory.peak");
  } else {
    st->memory_current = single_value(cg->memory, "memory.usage_in_bytes");
    st->memory_peak = single_value(cg->memory, "memory.max_usage_in_bytes");
  }
  if (st->memory_peak < st->memory_current)
    st->memory_peak = st->memory_current;
  st->pids_current = single_value(cg->pids_in_v2 ? cg->v2 : cg->pids, "pids.current");
}

static int procs_fd(const struct cgroup *cg) {
  if (cg->v2 >= 0) return cg->v2;
  if (cg->pids >= 0) return cg->pids;
  if (cg->memory >= 0) return cg->memory;
  return cg->freezer;
}

bool cgroup_populated(const struct cgroup *cg) {
  char buf[64];
  if (cg->v2 >= 0 && read_file_at(cg->v2, "cgroup.events", buf, sizeof buf) >= 0)
    return keyed_value(cg->v2, "cgroup.events", "populated") != 0;
  int fd = procs_fd(cg);
  if (fd < 0)
    return false;
  char procs[16];
  return read_file_at(fd, "cgroup.procs", procs, sizeof procs) > 0 && procs[0] != '\0';
}

static void sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
    ;
}

static void kill_listed(int dirfd) {
  cleanup_close int fd = openat(dirfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  cleanup_fclose FILE *f = fdopen(fd, "r");
  if (!f)
    return;
  fd = -1;
  int pid;
  while (fscanf(f, "%d", &pid) == 1)
    if (pid > 0)
      kill(pid, SIGKILL);
}

int cgroup_kill(const struct cgroup *cg, struct husk_err *err) {
  if (cg->v2 >= 0 && write_file_at(cg->v2, "cgroup.kill", "1") == 0)
    return 0;
  /* No cgroup.kill (kernel < 5.14 or pure v1): freeze so nothing can fork
   * while we kill, kill every listed task, thaw so SIGKILL is delivered. */
  if (cg->freezer >= 0 && write_file_at(cg->freezer, "freezer.state", "FROZEN") == 0) {
    char st[32] = "";
    for (int i = 0; i < 1000; i++) {
      if (read_file_at(cg->freezer, "freezer.state", st, sizeof st) < 0 || !strncmp(st, "FROZEN", 6))
        break;
      sleep_ms(1);
    }
    kill_listed(cg->freezer);
    write_file_at(cg->freezer, "freezer.state", "THAWED");
    return 0;
  }
  int fd = procs_fd(cg);
  if (fd < 0)
    return husk_fail(err, ENOENT, "cgroup `%s` has no hierarchy to kill through", cg->name);
  for (int round = 0; round < 100 && cgroup_populated(cg); round++)
    kill_listed(fd);
  return 0;
}

/* ---- the freezer ---- */

/* v2: cgroup.events says "frozen 1" once every task is stopped; the file
 * is pollable (POLLPRI) for changes. */
static int freeze_v2(const struct cgroup *cg, bool frozen, int timeout_ms, struct husk_err *err) {
  if (write_file_at(cg->v2, "cgroup.freeze", frozen ? "1" : "0") < 0)
    return husk_error(err, errno, "cannot %s cgroup `%s` (cgroup.freeze)",
                      frozen ? "freeze" : "thaw", cg->name);
  cleanup_close int ev = openat(cg->v2, "cgroup.events", O_RDONLY | O_CLOEXEC);
  if (ev < 0)
    return husk_error(err, errno, "cannot read cgroup `%s` (cgroup.events)", cg->name);
  int64_t end = mono_ms() + timeout_ms;
  for (;;) {
    char buf[256];
    ssize_t n = pread(ev, buf, sizeof buf - 1, 0);
    if (n < 0)
      return husk_error(err, errno, "cannot read cgroup `%s` (cgroup.events)", cg->name);
    buf[n] = '\0';
    const char *f = strstr(buf, "frozen ");
    if (!f)
      return 0; /* a kernel without the key: the write is all it offers */
    if ((f[7] == '1') == frozen)
      return 0;
    int64_t left = end - mono_ms();
    if (left <= 0)
      return husk_fail(err, ETIMEDOUT, "cgroup `%s` did not %s within %d ms", cg->name,
                       frozen ? "freeze" : "thaw", timeout_ms);
    /* The kernel rate-limits cgroup.events notifications (a change right
     * after another is announced only ~10 ms later), so the file is read
     * again every millisecond too. */
    struct pollfd p = {.fd = ev, .events = POLLPRI};
    if (poll(&p, 1, (int)(left < 1 ? left : 1)) < 0 && errno != EINTR)
      return husk_error(err, errno, "cannot wait for cgroup `%s`", cg->name);
  }
}

/* v1: freezer.state reads FREEZING until every task is stopped. */
static int freeze_v1(const struct cgroup *cg, bool frozen, int timeout_ms, struct husk_err *err) {
  const char *want = frozen ? "FROZEN" : "THAWED";
  int64_t end = mono_ms() + timeout_ms;
  for (;;) {
    /* Writing FROZEN again makes the kernel retry tasks it could not stop. */
    if (write_file_at(cg->freezer, "freezer.state", want) < 0)
      return husk_error(err, errno, "cannot %s cgroup `%s` (freezer.state)",
                        frozen ? "freeze" : "thaw", cg->name);
    char st[32] = "";
    if (read_file_at(cg->freezer, "freezer.state", st, sizeof st) < 0)
      return husk_error(err, errno, "cannot read cgroup `%s` (freezer.state)", cg->name);
    if (!strncmp(st, want, strlen(want)))
      return 0;
    if (mono_ms() >= end)
      return husk_fail(err, ETIMEDOUT, "cgroup `%s` did not %s within %d ms", cg->name,
                       frozen ? "freeze" : "thaw", timeout_ms);
    sleep_ms(1);
  }
}

int cgroup_freeze(const struct cgroup *cg, bool frozen, int timeout_ms, struct husk_err *err) {
  int rc;
  if (cg->v2 >= 0)
    rc = freeze_v2(cg, frozen, timeout_ms, err);
  else if (cg->freezer >= 0)
    rc = freeze_v1(cg, frozen, timeout_ms, err);
  else
    return husk_fail(err, ENOTSUP, "cgroup `%s` has no freezer on this host", cg->name);
  if (rc < 0 && frozen) {
    /* Half frozen is no state to leave a box in. */
    struct husk_err ignored;
    cg->v2 >= 0 ? freeze_v2(cg, false, timeout_ms, &ignored)
                : freeze_v1(cg, false, timeout_ms, &ignored);
  }
  return rc;
}

int cgroup_frozen(const struct cgroup *cg, bool *frozen, struct husk_err *err) {
  char st[32] = "";
  if (cg->v2 >= 0) {
    if (read_file_at(cg->v2, "cgroup.freeze", st, sizeof st) < 0)
      return husk_error(err, errno, "cannot read cgroup `%s` (cgroup.freeze)", cg->name);
    *frozen = st[0] == '1';
    return 0;
  }
  if (cg->freezer >= 0) {
    if (read_file_at(cg->freezer, "freezer.state", st, sizeof st) < 0)
      return husk_error(err, errno, "cannot read cgroup `%s` (freezer.state)", cg->name);
    *frozen = strncmp(st, "THAWED", 6) != 0;
    return 0;
  }
  *frozen = false;
  return 0;
}

/* Remove the cgroup `name` of the hierarchy `h` (nothing to do when it is
 * not there). */
static int rmdir_wait(const struct hier *h, const char *name, struct husk_err *err) {
  if (h->parent < 0)
    return 0;
  /* The last tasks may still be exiting; give the kernel a moment. */
  for (int i = 0; i < 2000; i++) {
    if (unlinkat(h->parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
      return 0;
    if (errno != EBUSY)
      break;
    sleep_ms(1);
  }
  return husk_error(err, errno, "cannot remove cgroup `%s` in `%s`", name, h->mount);
}

int cgroup_destroy(struct cgroup *cg, struct husk_err *err) {
  int rc = 0;
  if (!cg->name[0])
    return 0;
  cgroup_close(cg);
  if (host.have_v2 && rmdir_wait(&host.v2, cg->name, err) < 0)
    rc = -1;
  for (int i = 0; i < host.nv1; i++)
    if (rmdir_wait(&host.v1[i], cg->name, err) < 0)
      rc = -1;
  cg->name[0] = '\0';
  return rc;
}

static int sweep_dir(int parent, const char *prefix, bool (*is_stale)(const char *)) {
  int dup = fcntl(parent, F_DUPFD_CLOEXEC, 3);
  if (dup < 0)
    return 0;
  cleanup_closedir DIR *d = fdopendir(dup);
  if (!d) {
    close(dup);
    return 0;
  }
  int n = 0;
  size_t plen = strlen(prefix);
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_type != DT_DIR || strncmp(e->d_name, prefix, plen) || !is_stale(e->d_name))
      continue;
    /* rmdir refuses a populated cgroup, so a live box is never removed. */
    if (unlinkat(parent, e->d_name, AT_REMOVEDIR) == 0)
      n++;
  }
  return n;
}

int cgroup_sweep(const char *prefix, bool (*is_stale)(const char *name)) {
  if (ensure_host(NULL) < 0)
    return 0;
  int n = 0;
  if (host.have_v2)
    n += sweep_dir(host.v2.parent, prefix, is_stale);
  for (int i = 0; i < host.nv1; i++)
    n += sweep_dir(host.v1[i].parent, prefix, is_stale);
  return n;
}
