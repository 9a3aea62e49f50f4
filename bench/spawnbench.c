/* spawnbench: time start-to-exit of commands, one posix_spawn + waitpid
 * per run, with CLOCK_MONOTONIC read just before the spawn and just after
 * the wait returns.  The same driver, file actions and environment are used
 * for every command, so its own cost (about that of a vfork) is the same
 * for all of them and is visible in the `bare` row.
 *
 *   spawnbench N WARMUP SPEC [GAP_MS]
 *
 * SPEC is a file with one command per line: a label, then the argv, all
 * separated by tabs.  argv[0] must be an absolute path (no PATH search).
 * The two characters `{}` in an argument are replaced by a counter that is
 * unique per run (for tools that need a fresh container id each time).
 *
 * For each command in turn: WARMUP untimed runs, then N timed runs, back to
 * back, or with GAP_MS > 0 after an idle pause of GAP_MS before each run
 * (not timed: it lets deferred kernel work such as RCU grace periods finish,
 * as between the commands of an agent).  stdin and stdout are /dev/null; stderr goes to `SPEC.LABEL.err`,
 * shown if a run fails.  A run fails if it does not exit with status 0; the
 * command is then reported as failed and skipped, and the others go on.
 *
 * Output on stdout, one line per timed run:  LABEL <tab> RUN <tab> NANOSECONDS
 * one line per failed command:               LABEL <tab> FAILED <tab> STATUS
 * and last the CPU time of all the runs:     #cpu <tab> - <tab> NANOSECONDS
 * (user + system of every process they waited for, from getrusage). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_CMDS 16
#define MAX_ARGS 128

struct cmd {
  char *label;
  char *argv[MAX_ARGS + 1];
  int argc;
  int err_fd;
  char err_path[4096];
};

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Copy of argv with `{}` replaced by `counter`; freed by the caller. */
static char **expand(const struct cmd *c, unsigned long counter) {
  char **out = calloc((size_t)c->argc + 1, sizeof *out);
  if (!out)
    return NULL;
  for (int i = 0; i < c->argc; i++) {
    const char *a = c->argv[i], *p = strstr(a, "{}");
    if (!p) {
      out[i] = strdup(a);
    } else {
      size_t n = strlen(a) + 32;
      out[i] = malloc(n);
      if (out[i])
        snprintf(out[i], n, "%.*s%lu%s", (int)(p - a), a, counter, p + 2);
    }
    if (!out[i])
      return NULL;
  }
  return out;
}

static void free_argv(char **v) {
  for (char **p = v; p && *p; p++)
    free(*p);
  free(v);
}

/* One run: returns the elapsed ns, or -1 and *status on failure. */
static long long run_once(const struct cmd *c, int null_fd, unsigned long counter, int *status) {
  char **argv = expand(c, counter);
  if (!argv) {
    perror("spawnbench: out of memory");
    exit(2);
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, null_fd, 0);
  posix_spawn_file_actions_adddup2(&fa, null_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, c->err_fd, 2);
  pid_t pid;
  long long t0 = now_ns();
  int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  if (rc != 0) {
    posix_spawn_file_actions_destroy(&fa);
    fprintf(stderr, "spawnbench: cannot start %s: %s\n", argv[0], strerror(rc));
    free_argv(argv);
    *status = -1;
    return -1;
  }
  int st;
  while (waitpid(pid, &st, 0) < 0) {
    if (errno != EINTR) {
      perror("spawnbench: waitpid");
      exit(2);
    }
  }
  long long t1 = now_ns();
  posix_spawn_file_actions_destroy(&fa);
  free_argv(argv);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    *status = st;
    return -1;
  }
  return t1 - t0;
}

static int parse_spec(const char *path, struct cmd *cmds) {
  FILE *f = fopen(path, "re");
  if (!f) {
    perror(path);
    exit(2);
  }
  int n = 0;
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, f)) > 0) {
    if (line[len - 1] == '\n')
      line[--len] = '\0';
    if (!len || line[0] == '#')
      continue;
    if (n == MAX_CMDS) {
      fprintf(stderr, "spawnbench: more than %d commands\n", MAX_CMDS);
      exit(2);
    }
    struct cmd *c = &cmds[n];
    memset(c, 0, sizeof *c);
    char *save = NULL, *copy = strdup(line);
    c->label = strtok_r(copy, "\t", &save);
    for (char *t; (t = strtok_r(NULL, "\t", &save));) {
      if (c->argc == MAX_ARGS) {
        fprintf(stderr, "spawnbench: too many arguments for %s\n", c->label);
        exit(2);
      }
      c->argv[c->argc++] = t;
    }
    if (!c->label || c->argc == 0 || c->argv[0][0] != '/') {
      fprintf(stderr, "spawnbench: bad spec line (label, then an absolute program path): %s\n", line);
      exit(2);
    }
    snprintf(c->err_path, sizeof c->err_path, "%s.%s.err", path, c->label);
    c->err_fd = open(c->err_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (c->err_fd < 0) {
      perror(c->err_path);
      exit(2);
    }
    n++;
  }
  free(line);
  fclose(f);
  return n;
}

static void show_failure(const struct cmd *c, int status) {
  if (status == -1)
    fprintf(stderr, "spawnbench: %s: could not be started\n", c->label);
  else if (WIFEXITED(status))
    fprintf(stderr, "spawnbench: %s: exited with status %d\n", c->label, WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    fprintf(stderr, "spawnbench: %s: killed by signal %d\n", c->label, WTERMSIG(status));
  FILE *f = fopen(c->err_path, "re");
  if (!f)
    return;
  char buf[512];
  int lines = 0;
  while (fgets(buf, sizeof buf, f) && lines++ < 20)
    fprintf(stderr, "  | %s", buf);
  fclose(f);
}

int main(int argc, char **argv) {
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: spawnbench N WARMUP SPEC [GAP_MS]\n");
    return 2;
  }
  long n = strtol(argv[1], NULL, 10), warm = strtol(argv[2], NULL, 10);
  long gap_ms = argc == 5 ? strtol(argv[4], NULL, 10) : 0;
  if (n <= 0 || warm < 0 || gap_ms < 0) {
    fprintf(stderr, "spawnbench: N must be > 0, WARMUP and GAP_MS >= 0\n");
    return 2;
  }
  static struct cmd cmds[MAX_CMDS];
  int ncmd = parse_spec(argv[3], cmds);
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0) {
    perror("/dev/null");
    return 2;
  }
  unsigned long counter = 0;
  long long *t = calloc((size_t)n, sizeof *t);
  if (!t)
    return 2;
  for (int i = 0; i < ncmd; i++) {
    const struct cmd *c = &cmds[i];
    int status = 0;
    long r = 0;
    for (; r < warm + n; r++) {
      if (gap_ms > 0) {
        struct timespec gap = {.tv_sec = gap_ms / 1000, .tv_nsec = (gap_ms % 1000) * 1000000L};
        while (nanosleep(&gap, &gap) < 0 && errno == EINTR)
          ;
      }
      long long ns = run_once(c, null_fd, counter++, &status);
      if (ns < 0)
        break;
      if (r >= warm)
        t[r - warm] = ns;
    }
    if (r < warm + n) {
      show_failure(c, status);
      printf("%s\tFAILED\t%d\n", c->label, status);
    } else {
      for (long k = 0; k < n; k++)
        printf("%s\t%ld\t%lld\n", c->label, k, t[k]);
    }
    fflush(stdout);
    fprintf(stderr, "spawnbench: %s done\n", c->label);
  }
  free(t);
  struct rusage ru;
  if (getrusage(RUSAGE_CHILDREN, &ru) == 0)
    printf("#cpu\t-\t%lld\n",
           ((long long)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
               ((long long)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL);
  return 0;
}
