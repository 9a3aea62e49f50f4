/* apibench: load driver for `husk serve` (bench/serve.sh compiles it into a
 * temporary directory).  Plain sockets and hand-written HTTP/1.1 with
 * keep-alive: one connection per client thread, reused for every request,
 * TCP_NODELAY, Content-Length or chunked replies.
 *
 *   APIBENCH_KEY=hk_... apibench MODE --port P [OPTIONS]
 *
 * Modes:
 *   lifecycle  each client loops: POST /v1/sandboxes BODY, POST .../exec
 *              {"cmd":["true"]}, DELETE /v1/sandboxes/ID.  One sample per
 *              lifecycle (total, and each of the three requests).
 *   exec       one box is created first (BODY) and deleted at the end; each
 *              client loops POST .../exec {"cmd":["true"]}.
 *   create     create COUNT boxes (BODY) and write their ids to --ids FILE.
 *   delete     DELETE every id listed in --ids FILE.
 *   forkexec   no HTTP: fork() + execve("/usr/bin/true") + waitpid() per
 *              iteration, stdin/stdout/stderr on /dev/null (the bare peer of
 *              `exec`: what init does for each command, without a box).
 *   spawn      the same with posix_spawn() (vfork-like, cheaper than fork).
 *
 * Options:
 *   --host ADDR     IPv4 address of the daemon [127.0.0.1]
 *   --port P        its port (required but for forkexec/spawn)
 *   --clients C     concurrent clients, one thread and one connection each [1]
 *   --count N       timed iterations over all clients [1000]
 *   --seconds S     no new iteration starts after S seconds [30]
 *   --warmup W      untimed iterations per client before the timed ones [3]
 *   --gap-ms G      idle time before each iteration of a client [0]
 *   --body JSON     body of the creates [{}]
 *   --ids FILE      create: where to write the ids; delete: where to read them
 *   --label L       label copied into the output
 *
 * The key is taken from the environment (APIBENCH_KEY), not the command
 * line, so it does not show in `ps`.
 *
 * Output: one JSON object on stdout: mode, label, clients, n (timed
 * iterations that succeeded), errors, wall_s (first timed request to last
 * reply), rate (n / wall_s), and for each measured step ("total", and in
 * lifecycle mode also "create", "exec", "delete") the p50, p95, p99, min,
 * mean and max in milliseconds (nearest-rank percentiles).  Errors (non-2xx
 * replies, an exec that did not exit 0, broken connections) are counted and
 * the first few are printed on stderr; the exit status is 2 if any
 * occurred, 1 if the driver could not run at all. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum mode { M_LIFECYCLE, M_EXEC, M_CREATE, M_DELETE, M_FORKEXEC, M_SPAWN };
enum { S_TOTAL, S_CREATE, S_EXEC, S_DELETE, S_N };
static const char *step_name[S_N] = {"total", "create", "exec", "delete"};

static struct {
  enum mode mode;
  const char *host, *body, *ids_path, *label, *key;
  int port, clients, warmup, gap_ms;
  long count;
  double seconds;
} cfg = {.host = "127.0.0.1", .body = "{}", .label = "", .clients = 1, .warmup = 3, .count = 1000,
         .seconds = 30};

static atomic_long next_ticket, errors_total;
static long long deadline_ns;
static pthread_barrier_t start_barrier;
static char exec_box[64];      /* exec mode: the shared box */
static char **ids;             /* delete mode: ids to delete; create mode: ids made */
static long nids;
static pthread_mutex_t ids_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int errors_printed;
static _Thread_local bool warming_up; /* errors of warm-up iterations are shown, not counted */

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

static void report_error(const char *what, int status, const char *body) {
  if (!warming_up)
    atomic_fetch_add(&errors_total, 1);
  if (atomic_fetch_add(&errors_printed, 1) < 5)
    fprintf(stderr, "apibench: %s%s: status %d: %.300s\n", warming_up ? "warm-up " : "", what, status,
            body ? body : "");
}

/* ---- HTTP/1.1 client ------------------------------------------------------ */

struct conn {
  int fd;
  char *in;        /* received bytes not consumed yet */
  size_t in_len, in_cap;
  char *body;      /* the last reply's body, NUL-terminated */
  size_t body_len, body_cap;
  bool used;       /* at least one reply came on this connection */
};

static int conn_open(struct conn *c) {
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd < 0)
    return -1;
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct timeval tv = {120, 0}; /* a hung daemon must not hang the benchmark */
  setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)cfg.port)};
  if (inet_pton(AF_INET, cfg.host, &sa.sin_addr) != 1 ||
      connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
    close(c->fd);
    c->fd = -1;
    return -1;
  }
  c->in_len = 0;
  c->used = false;
  return 0;
}

static void conn_close(struct conn *c) {
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
  c->in_len = 0;
}

static int grow(char **buf, size_t *cap, size_t need) {
  if (need <= *cap)
    return 0;
  size_t n = *cap ? *cap : 4096;
  while (n < need)
    n *= 2;
  char *p = realloc(*buf, n);
  if (!p)
    return -1;
  *buf = p;
  *cap = n;
  return 0;
}

/* Read more bytes into c->in; 0 on EOF, -1 on error. */
static ssize_t fill(struct conn *c) {
  if (grow(&c->in, &c->in_cap, c->in_len + 16384) < 0)
    return -1;
  ssize_t n;
  do
    n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
  while (n < 0 && errno == EINTR);
  if (n > 0)
    c->in_len += (size_t)n;
  return n;
}

static void consume(struct conn *c, size_t n) {
  memmove(c->in, c->in + n, c->in_len - n);
  c->in_len -= n;
}

static int body_append(struct conn *c, const char *p, size_t n) {
  if (grow(&c->body, &c->body_cap, c->body_len + n + 1) < 0)
    return -1;
  memcpy(c->body + c->body_len, p, n);
  c->body_len += n;
  c->body[c->body_len] = '\0';
  return 0;
}

/* Value of header `name` in the header block [h, end), or NULL. */
static const char *header(const char *h, const char *end, const char *name, size_t *vlen) {
  size_t nl = strlen(name);
  for (const char *line = h; line < end;) {
    const char *eol = memmem(line, (size_t)(end - line), "\r\n", 2);
    if (!eol)
      eol = end;
    if ((size_t)(eol - line) > nl && line[nl] == ':' && !strncasecmp(line, name, nl)) {
      const char *v = line + nl + 1;
      while (v < eol && (*v == ' ' || *v == '\t'))
        v++;
      *vlen = (size_t)(eol - v);
      return v;
    }
    line = eol + 2;
  }
  return NULL;
}

/* Read one reply: status code, or -1 if the connection broke (errno set;
 * EPIPE for an EOF before the first byte). */
static int read_reply(struct conn *c) {
  c->body_len = 0;
  if (grow(&c->body, &c->body_cap, 1) < 0)
    return -1;
  c->body[0] = '\0';
  char *hend;
  while (!(hend = c->in_len ? memmem(c->in, c->in_len, "\r\n\r\n", 4) : NULL)) {
    ssize_t n = fill(c);
    if (n <= 0) {
      if (n == 0)
        errno = c->in_len ? EPROTO : EPIPE;
      return -1;
    }
  }
  int status = 0;
  if (sscanf(c->in, "HTTP/1.%*d %d", &status) != 1) {
    errno = EPROTO;
    return -1;
  }
  const char *hs = memchr(c->in, '\n', (size_t)(hend - c->in)) + 1;
  size_t vlen = 0;
  const char *v;
  bool chunked = (v = header(hs, hend, "Transfer-Encoding", &vlen)) && vlen >= 7 && !strncasecmp(v, "chunked", 7);
  bool close_after = (v = header(hs, hend, "Connection", &vlen)) && vlen >= 5 && !strncasecmp(v, "close", 5);
  long long clen = -1;
  if ((v = header(hs, hend, "Content-Length", &vlen)))
    clen = strtoll(v, NULL, 10);
  consume(c, (size_t)(hend + 4 - c->in));
  if (status == 204 || status == 304 || (status >= 100 && status < 200))
    clen = 0;
  if (chunked) {
    for (;;) {
      char *eol;
      while (!(eol = c->in_len ? memmem(c->in, c->in_len, "\r\n", 2) : NULL))
        if (fill(c) <= 0)
          return errno = EPROTO, -1;
      size_t size = (size_t)strtoull(c->in, NULL, 16);
      consume(c, (size_t)(eol + 2 - c->in));
      if (size == 0) { /* trailers, then an empty line */
        for (;;) {
          while (!(eol = c->in_len ? memmem(c->in, c->in_len, "\r\n", 2) : NULL))
            if (fill(c) <= 0)
              return errno = EPROTO, -1;
          size_t l = (size_t)(eol - c->in);
          consume(c, l + 2);
          if (l == 0)
            break;
        }
        break;
      }
      while (c->in_len < size + 2)
        if (fill(c) <= 0)
          return errno = EPROTO, -1;
      if (body_append(c, c->in, size) < 0)
        return -1;
      consume(c, size + 2);
    }
  } else if (clen >= 0) {
    while ((long long)c->in_len < clen)
      if (fill(c) <= 0)
        return errno = EPROTO, -1;
    if (body_append(c, c->in, (size_t)clen) < 0)
      return -1;
    consume(c, (size_t)clen);
  } else { /* until EOF */
    ssize_t n;
    while ((n = fill(c)) > 0) {
    }
    if (body_append(c, c->in, c->in_len) < 0)
      return -1;
    consume(c, c->in_len);
    close_after = true;
  }
  c->used = true;
  if (close_after)
    conn_close(c);
  return status;
}

static int send_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* One request; returns the status, the body in c->body.  A kept-alive
 * connection the daemon closed while idle is reopened and the request sent
 * again (only when not a byte of the reply came back). */
static int http(struct conn *c, const char *method, const char *path, const char *body) {
  size_t blen = body ? strlen(body) : 0;
  char req[8192];
  int n = snprintf(req, sizeof req,
                   "%s %s HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s\r\n"
                   "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                   method, path, cfg.host, cfg.port, cfg.key, blen, body ? body : "");
  if (n < 0 || (size_t)n >= sizeof req) {
    errno = E2BIG;
    return -1;
  }
  for (int attempt = 0; attempt < 2; attempt++) {
    if (c->fd < 0 && conn_open(c) < 0)
      return -1;
    bool reused = c->used;
    if (send_all(c->fd, req, (size_t)n) == 0) {
      int st = read_reply(c);
      if (st >= 0)
        return st;
    }
    int e = errno;
    conn_close(c);
    if (!(reused && (e == EPIPE || e == ECONNRESET)))
      return errno = e, -1;
  }
  return -1;
}

/* The string value of "key" in a flat JSON object (our replies). */
static int json_str(const char *body, const char *key, char *out, size_t len) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\"", key);
  const char *p = strstr(body, pat);
  if (!p)
    return -1;
  p += strlen(pat);
  while (*p == ' ')
    p++;
  if (*p++ != ':')
    return -1;
  while (*p == ' ')
    p++;
  if (*p++ != '"')
    return -1;
  const char *q = strchr(p, '"');
  if (!q || (size_t)(q - p) >= len)
    return -1;
  memcpy(out, p, (size_t)(q - p));
  out[q - p] = '\0';
  return 0;
}

static bool exec_ok(const char *body) {
  const char *p = strstr(body, "\"exit_code\"");
  if (!p)
    return false;
  p += 11;
  while (*p == ' ' || *p == ':')
    p++;
  return *p == '0' && (p[1] == ',' || p[1] == '}' || p[1] == ' ');
}

/* ---- operations ---------------------------------------------------------- */

static int op_create(struct conn *c, char *id, size_t len) {
  int st = http(c, "POST", "/v1/sandboxes", cfg.body);
  if (st != 201 || json_str(c->body, "id", id, len) < 0) {
    report_error("create", st, st < 0 ? strerror(errno) : c->body);
    return -1;
  }
  return 0;
}

static int op_exec(struct conn *c, const char *id) {
  char path[128];
  snprintf(path, sizeof path, "/v1/sandboxes/%s/exec", id);
  int st = http(c, "POST", path, "{\"cmd\":[\"true\"]}");
  if (st != 200 || !exec_ok(c->body)) {
    report_error("exec", st, st < 0 ? strerror(errno) : c->body);
    return -1;
  }
  return 0;
}

static int op_delete(struct conn *c, const char *id) {
  char path[128];
  snprintf(path, sizeof path, "/v1/sandboxes/%s", id);
  int st = http(c, "DELETE", path, NULL);
  if (st != 200) {
    report_error("delete", st, st < 0 ? strerror(errno) : c->body);
    return -1;
  }
  return 0;
}

static int devnull = -1;

static int op_forkexec(void) {
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
    char *argv[] = {"true", NULL};
    execve("/usr/bin/true", argv, environ);
    _exit(127);
  }
  int ws;
  while (waitpid(pid, &ws, 0) < 0)
    if (errno != EINTR)
      return -1;
  return WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? 0 : -1;
}

static int op_spawn(void) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, devnull, 0);
  posix_spawn_file_actions_adddup2(&fa, devnull, 1);
  posix_spawn_file_actions_adddup2(&fa, devnull, 2);
  char *argv[] = {"true", NULL};
  pid_t pid;
  int rc = posix_spawn(&pid, "/usr/bin/true", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    return -1;
  int ws;
  while (waitpid(pid, &ws, 0) < 0)
    if (errno != EINTR)
      return -1;
  return WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? 0 : -1;
}

/* One iteration; fills the step durations (ns).  `timed` false: warm-up. */
static int iteration(struct conn *c, long ticket, long long *d) {
  long long t0 = now_ns(), t1, t2;
  char id[64];
  switch (cfg.mode) {
  case M_LIFECYCLE:
    if (op_create(c, id, sizeof id) < 0)
      return -1;
    t1 = now_ns();
    int rc = op_exec(c, id);
    t2 = now_ns();
    if (op_delete(c, id) < 0 || rc < 0)
      return -1;
    d[S_CREATE] = t1 - t0;
    d[S_EXEC] = t2 - t1;
    d[S_DELETE] = now_ns() - t2;
    break;
  case M_EXEC:
    if (op_exec(c, exec_box) < 0)
      return -1;
    break;
  case M_CREATE:
    if (op_create(c, id, sizeof id) < 0)
      return -1;
    if (ticket >= 0) {
      pthread_mutex_lock(&ids_lock);
      ids[nids++] = strdup(id);
      pthread_mutex_unlock(&ids_lock);
    } else if (op_delete(c, id) < 0) { /* warm-up boxes don't stay */
      return -1;
    }
    break;
  case M_DELETE:
    if (ticket < 0 || op_delete(c, ids[ticket]) < 0)
      return -1;
    break;
  case M_FORKEXEC:
    if (op_forkexec() < 0)
      return report_error("fork+exec", -1, "true failed"), -1;
    break;
  case M_SPAWN:
    if (op_spawn() < 0)
      return report_error("posix_spawn", -1, "true failed"), -1;
    break;
  }
  d[S_TOTAL] = now_ns() - t0;
  return 0;
}

struct worker {
  pthread_t th;
  long long *samples[S_N]; /* ns */
  long n;
  long long end_ns;
};

static void *worker_main(void *arg) {
  struct worker *w = arg;
  struct conn c = {.fd = -1};
  long long d[S_N];
  int warm = (cfg.mode == M_DELETE) ? 0 : cfg.warmup;
  warming_up = true;
  for (int i = 0; i < warm; i++) {
    if (cfg.gap_ms)
      sleep_ms(cfg.gap_ms);
    iteration(&c, -1, d);
  }
  warming_up = false;
  pthread_barrier_wait(&start_barrier); /* all warmed up */
  pthread_barrier_wait(&start_barrier); /* deadline set: go */
  for (;;) {
    if (cfg.gap_ms)
      sleep_ms(cfg.gap_ms);
    if (now_ns() > deadline_ns)
      break;
    long t = atomic_fetch_add(&next_ticket, 1);
    if (t >= cfg.count)
      break;
    if (iteration(&c, t, d) == 0) {
      for (int s = 0; s < S_N; s++)
        w->samples[s][w->n] = d[s];
      w->n++;
    }
  }
  w->end_ns = now_ns();
  conn_close(&c);
  free(c.in);
  free(c.body);
  return NULL;
}

static int cmp_ll(const void *a, const void *b) {
  long long x = *(const long long *)a, y = *(const long long *)b;
  return (x > y) - (x < y);
}

static double pct(const long long *s, long n, double p) {
  long k = (long)((p / 100.0) * (double)n + 0.999999999) - 1; /* nearest rank */
  if (k < 0)
    k = 0;
  if (k >= n)
    k = n - 1;
  return (double)s[k] / 1e6;
}

static void usage(void) {
  fprintf(stderr, "usage: APIBENCH_KEY=KEY apibench lifecycle|exec|create|delete|forkexec|spawn --port P "
                  "[--host A] [--clients C] [--count N] [--seconds S] [--warmup W] [--gap-ms G] "
                  "[--body JSON] [--ids FILE] [--label L]\n");
  exit(1);
}

int main(int argc, char **argv) {
  if (argc < 2)
    usage();
  const char *m = argv[1];
  if (!strcmp(m, "lifecycle")) cfg.mode = M_LIFECYCLE;
  else if (!strcmp(m, "exec")) cfg.mode = M_EXEC;
  else if (!strcmp(m, "create")) cfg.mode = M_CREATE;
  else if (!strcmp(m, "delete")) cfg.mode = M_DELETE;
  else if (!strcmp(m, "forkexec")) cfg.mode = M_FORKEXEC;
  else if (!strcmp(m, "spawn")) cfg.mode = M_SPAWN;
  else usage();
  for (int i = 2; i < argc; i++) {
    const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v)
      usage();
    i++;
    if (!strcmp(o, "--host")) cfg.host = v;
    else if (!strcmp(o, "--port")) cfg.port = atoi(v);
    else if (!strcmp(o, "--clients")) cfg.clients = atoi(v);
    else if (!strcmp(o, "--count")) cfg.count = atol(v);
    else if (!strcmp(o, "--seconds")) cfg.seconds = atof(v);
    else if (!strcmp(o, "--warmup")) cfg.warmup = atoi(v);
    else if (!strcmp(o, "--gap-ms")) cfg.gap_ms = atoi(v);
    else if (!strcmp(o, "--body")) cfg.body = v;
    else if (!strcmp(o, "--ids")) cfg.ids_path = v;
    else if (!strcmp(o, "--label")) cfg.label = v;
    else usage();
  }
  bool uses_http = cfg.mode != M_FORKEXEC && cfg.mode != M_SPAWN;
  cfg.key = getenv("APIBENCH_KEY");
  if (uses_http && (cfg.port <= 0 || !cfg.key || strlen(cfg.key) > 512)) {
    fprintf(stderr, "apibench: --port and APIBENCH_KEY are required\n");
    return 1;
  }
  if (cfg.clients < 1 || cfg.clients > 1024 || cfg.count < 1 || cfg.seconds <= 0 || cfg.warmup < 0 ||
      cfg.gap_ms < 0 || strlen(cfg.body) > 4096)
    usage();
  if ((cfg.mode == M_CREATE || cfg.mode == M_DELETE) && !cfg.ids_path)
    usage();
  devnull = open("/dev/null", O_RDWR | O_CLOEXEC);

  if (cfg.mode == M_DELETE) {
    FILE *f = fopen(cfg.ids_path, "r");
    if (!f)
      return perror(cfg.ids_path), 1;
    ids = calloc((size_t)cfg.count, sizeof *ids);
    char line[128];
    while (ids && nids < cfg.count && fgets(line, sizeof line, f)) {
      line[strcspn(line, "\r\n")] = '\0';
      if (line[0])
        ids[nids++] = strdup(line);
    }
    fclose(f);
    cfg.count = nids;
    if (nids == 0) {
      printf("{\"mode\":\"delete\",\"label\":\"%s\",\"n\":0,\"errors\":0}\n", cfg.label);
      return 0;
    }
  } else if (cfg.mode == M_CREATE) {
    ids = calloc((size_t)cfg.count, sizeof *ids);
  }
  struct conn setup = {.fd = -1};
  if (cfg.mode == M_EXEC && op_create(&setup, exec_box, sizeof exec_box) < 0)
    return 1;

  struct worker *ws = calloc((size_t)cfg.clients, sizeof *ws);
  if (!ws)
    return 1;
  for (int i = 0; i < cfg.clients; i++)
    for (int s = 0; s < S_N; s++)
      if (!(ws[i].samples[s] = calloc((size_t)cfg.count, sizeof(long long))))
        return fprintf(stderr, "apibench: out of memory\n"), 1;
  pthread_barrier_init(&start_barrier, NULL, (unsigned)cfg.clients + 1);
  for (int i = 0; i < cfg.clients; i++)
    if (pthread_create(&ws[i].th, NULL, worker_main, &ws[i]) != 0)
      return fprintf(stderr, "apibench: cannot start threads\n"), 1;
  /* The deadline counts from the end of the warm-up; the second barrier
   * orders its store before the workers' loads. */
  pthread_barrier_wait(&start_barrier);
  long long t0 = now_ns();
  deadline_ns = t0 + (long long)(cfg.seconds * 1e9);
  pthread_barrier_wait(&start_barrier);
  long long t_end = t0;
  for (int i = 0; i < cfg.clients; i++) {
    pthread_join(ws[i].th, NULL);
    if (ws[i].end_ns > t_end)
      t_end = ws[i].end_ns;
  }
  double wall = (double)(t_end - t0) / 1e9;

  if (cfg.mode == M_EXEC && op_delete(&setup, exec_box) < 0)
    fprintf(stderr, "apibench: could not delete the exec box %s\n", exec_box);
  conn_close(&setup);
  if (cfg.mode == M_CREATE) {
    FILE *f = fopen(cfg.ids_path, "w");
    if (!f)
      return perror(cfg.ids_path), 1;
    for (long i = 0; i < nids; i++)
      fprintf(f, "%s\n", ids[i]);
    fclose(f);
  }

  long n = 0;
  for (int i = 0; i < cfg.clients; i++)
    n += ws[i].n;
  long errs = atomic_load(&errors_total);
  printf("{\"mode\":\"%s\",\"label\":\"%s\",\"clients\":%d,\"n\":%ld,\"errors\":%ld,\"wall_s\":%.4f,"
         "\"rate\":%.2f,\"gap_ms\":%d",
         m, cfg.label, cfg.clients, n, errs, wall, wall > 0 ? (double)n / wall : 0.0, cfg.gap_ms);
  int nsteps = cfg.mode == M_LIFECYCLE ? S_N : 1;
  for (int s = 0; s < nsteps && n > 0; s++) {
    long long *all = malloc((size_t)n * sizeof *all);
    long k = 0;
    for (int i = 0; i < cfg.clients; i++)
      for (long j = 0; j < ws[i].n; j++)
        all[k++] = ws[i].samples[s][j];
    qsort(all, (size_t)n, sizeof *all, cmp_ll);
    double sum = 0;
    for (long j = 0; j < n; j++)
      sum += (double)all[j];
    printf(",\"%s\":{\"p50\":%.3f,\"p95\":%.3f,\"p99\":%.3f,\"min\":%.3f,\"mean\":%.3f,\"max\":%.3f}",
           step_name[s], pct(all, n, 50), pct(all, n, 95), pct(all, n, 99), (double)all[0] / 1e6,
           sum / (double)n / 1e6, (double)all[n - 1] / 1e6);
    free(all);
  }
  printf("}\n");
  return errs ? 2 : (n ? 0 : 1);
}
