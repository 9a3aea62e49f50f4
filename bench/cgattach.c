/* cgattach: what moving a new process into a cgroup-v1 hierarchy costs.
 * A by-hand experiment behind docs/performance.md; not part of `make bench`.
 *
 *   cc -O2 -o /tmp/cgattach bench/cgattach.c && /tmp/cgattach [ROUNDS [GAP_MS]]
 *
 * Needs root and v1 `pids`, `memory` and `cpu` hierarchies under
 * /sys/fs/cgroup.  Creates <hierarchy>/husk-cgattach-<pid> in each, and for
 * each round, after GAP_MS [100] of idle time, forks a child and moves it
 * there in two ways:
 *
 *   procs: the parent writes the child's pid to cgroup.procs in each
 *          hierarchy (what husk does today, spawn.c -> cgroup_attach());
 *   self:  the parent opens `tasks` in each hierarchy before the fork, and
 *          the single-threaded child writes "0" (itself) to those fds.
 *
 * A cgroup.procs write takes the global cgroup_threadgroup_rwsem for
 * writing; unless a hierarchy is mounted with favordynmods, that waits for
 * an RCU grace period whenever no other writer did so just before, which
 * is the case after a moment of idle time.  Moving the current thread alone
 * through `tasks` does not take that lock.  Permission is checked against
 * the credentials of whoever opened the file, so fds opened by root work
 * from the child, even in a new user namespace.  Everything it created is
 * removed at the end. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *const hier[] = {"pids", "memory", "cpu"};
#define NH 3

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void sleep_ms(long ms) {
  struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) < 0 && errno == EINTR)
    ;
}

static char dirs[NH][256];

static void cleanup(void) {
  for (int i = 0; i < NH; i++)
    if (dirs[i][0] && rmdir(dirs[i]) < 0 && errno != ENOENT)
      fprintf(stderr, "cgattach: rmdir %s: %s\n", dirs[i], strerror(errno));
}

/* One round; returns the ms the attach took (measured where it happens). */
static double round_once(int self) {
  int fds[NH], sync[2], res[2];
  char path[300];
  for (int i = 0; i < NH; i++) {
    snprintf(path, sizeof path, "%s/%s", dirs[i], self ? "tasks" : "cgroup.procs");
    if ((fds[i] = open(path, O_WRONLY | O_CLOEXEC)) < 0) {
      perror(path);
      exit(1);
    }
  }
  if (pipe2(sync, O_CLOEXEC) < 0 || pipe2(res, O_CLOEXEC) < 0) {
    perror("pipe");
    exit(1);
  }
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    exit(1);
  }
  if (pid == 0) {
    char go;
    if (read(sync[0], &go, 1) != 1)
      _exit(1);
    double ms = 0;
    if (self) {
      double t0 = now_ms();
      for (int i = 0; i < NH; i++)
        if (write(fds[i], "0", 1) != 1)
          _exit(2);
      ms = now_ms() - t0;
    }
    _exit(write(res[1], &ms, sizeof ms) == sizeof ms ? 0 : 3);
  }
  double ms = 0;
  if (!self) {
    char v[32];
    int n = snprintf(v, sizeof v, "%d", (int)pid);
    double t0 = now_ms();
    for (int i = 0; i < NH; i++)
      if (write(fds[i], v, (size_t)n) != n) {
        perror("write cgroup.procs");
        exit(1);
      }
    ms = now_ms() - t0;
  }
  if (write(sync[1], "1", 1) != 1) {
    perror("write");
    exit(1);
  }
  double child_ms = 0;
  if (read(res[0], &child_ms, sizeof child_ms) != sizeof child_ms) {
    fprintf(stderr, "cgattach: the child could not move itself\n");
    exit(1);
  }
  int st;
  waitpid(pid, &st, 0);
  for (int i = 0; i < NH; i++)
    close(fds[i]);
  close(sync[0]);
  close(sync[1]);
  close(res[0]);
  close(res[1]);
  return self ? child_ms : ms;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 20;
  long gap = argc > 2 ? atol(argv[2]) : 100;
  if (rounds <= 0 || gap < 0) {
    fprintf(stderr, "usage: cgattach [ROUNDS [GAP_MS]]\n");
    return 2;
  }
  atexit(cleanup);
  for (int i = 0; i < NH; i++) {
    snprintf(dirs[i], sizeof dirs[i], "/sys/fs/cgroup/%s/husk-cgattach-%d", hier[i], (int)getpid());
    if (mkdir(dirs[i], 0755) < 0) {
      fprintf(stderr, "cgattach: mkdir %s: %s (root and cgroup v1 needed)\n", dirs[i], strerror(errno));
      dirs[i][0] = '\0';
      return 1;
    }
  }
  double *t = calloc((size_t)rounds, sizeof *t);
  if (!t)
    return 1;
  printf("moving a new process into %d v1 hierarchies, %d rounds, %ld ms idle before each\n", NH,
         rounds, gap);
  for (int self = 0; self < 2; self++) {
    for (int r = 0; r < rounds; r++) {
      sleep_ms(gap);
      t[r] = round_once(self);
    }
    qsort(t, (size_t)rounds, sizeof *t, cmp);
    printf("%-48s median %7.3f ms  min %7.3f  max %7.3f\n",
           self ? "child writes 0 to tasks (fds opened by parent)"
                : "parent writes pid to cgroup.procs",
           t[rounds / 2], t[0], t[rounds - 1]);
  }
  free(t);
  return 0;
}
