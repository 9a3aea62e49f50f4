/* Code contexts through the library (husk/context.h), in real boxes: state,
 * isolation, the bounds on what a context sends back (a hostile program
 * writes to the runner's event fd), output caps, large code, one execution
 * at a time, interrupts, restarts and deletes during an execution, a
 * caller that goes away, bad requests.  Needs root (it creates boxes) and
 * the `husk` binary beside the tests' directory. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "husk/husk.h"
#include "unit.h"

static struct husk_mgr *mgr;
static char tenant[HUSK_TENANT_ID_MAX], other[HUSK_TENANT_ID_MAX];
static struct husk_box_info box;

/* What one execution sent back. */
struct got {
  char out[4096], err[4096];
  size_t out_len, err_len, out_total;
  char main_text[256];
  int nresults, nerrors;
  char mimes[512];
  char err_name[64], err_value[256], traceback[2048];
  int stop_after; /* the stream sink says stop after this many calls (0: never) */
  int calls;
};

static int on_stream(void *ctx, int stream, const char *buf, size_t n) {
  struct got *g = ctx;
  char *dst = stream == 1 ? g->out : g->err;
  size_t *len = stream == 1 ? &g->out_len : &g->err_len;
  if (stream == 1)
    g->out_total += n;
  size_t k = n < sizeof g->out - 1 - *len ? n : sizeof g->out - 1 - *len;
  memcpy(dst + *len, buf, k);
  *len += k;
  dst[*len] = '\0';
  g->calls++;
  return g->stop_after && g->calls >= g->stop_after ? -1 : 0;
}

static int on_output(void *ctx, const struct husk_ctx_output *o) {
  struct got *g = ctx;
  if (o->is_error) {
    g->nerrors++;
    snprintf(g->err_name, sizeof g->err_name, "%s", o->name);
    snprintf(g->err_value, sizeof g->err_value, "%s", o->value);
    snprintf(g->traceback, sizeof g->traceback, "%s", o->traceback);
    return 0;
  }
  g->nresults++;
  for (size_t i = 0; i < o->nreprs; i++) {
    size_t l = strlen(g->mimes);
    snprintf(g->mimes + l, sizeof g->mimes - l, "%s ", o->reprs[i].mime);
    if (o->is_main_result && !strcmp(o->reprs[i].mime, "text/plain"))
      snprintf(g->main_text, sizeof g->main_text, "%.*s", (int)o->reprs[i].len, o->reprs[i].data);
  }
  return 0;
}

static int exec_in(const char *ctx, const char *code, size_t len, uint64_t timeout_ms,
                   uint64_t output_limit, struct got *g, struct husk_ctx_exec_result *res,
                   struct husk_err *err) {
  struct husk_ctx_exec_req r = {.code = code, .code_len = len, .timeout_ms = timeout_ms,
                                .output_limit = output_limit, .stream = on_stream,
                                .output = on_output, .sink_ctx = g, .cancel_fd = -1};
  memset(g, 0, sizeof *g - 2 * sizeof(int));
  return husk_ctx_execute(mgr, tenant, box.id, ctx, &r, res, err);
}

/* Run code, expect success; the status. */
static enum husk_ctx_status run(const char *ctx, const char *code, struct got *g) {
  struct husk_ctx_exec_result res;
  struct husk_err err;
  memset(g, 0, sizeof *g);
  if (exec_in(ctx, code, strlen(code), 20000, 0, g, &res, &err) < 0) {
    printf("#   execute in %s failed: %s\n", ctx, err.msg);
    return (enum husk_ctx_status)-1;
  }
  return res.status;
}

static char *make_ctx(const char *language, char *id, size_t size) {
  struct husk_ctx_req req = {.language = language};
  struct husk_ctx_info info;
  struct husk_err err;
  if (husk_ctx_create(mgr, tenant, box.id, &req, &info, &err) < 0) {
    printf("#   create %s: %s\n", language, err.msg);
    return NULL;
  }
  snprintf(id, size, "%s", info.id);
  return id;
}

TEST(state_is_kept_and_contexts_are_apart) {
  char a[HUSK_CTX_ID_MAX], b[HUSK_CTX_ID_MAX];
  struct got g;
  CHECK(make_ctx("python", a, sizeof a) && make_ctx("python", b, sizeof b));
  CHECK(run(a, "x = 41", &g) == HUSK_CTX_OK);
  CHECK(run(a, "x + 1", &g) == HUSK_CTX_OK);
  CHECK_STR(g.main_text, "42");
  CHECK(run(b, "x", &g) == HUSK_CTX_ERROR);
  CHECK_STR(g.err_name, "NameError");
  struct husk_ctx_info info;
  struct husk_err err;
  CHECK(husk_ctx_get(mgr, tenant, box.id, a, &info, &err) == 0);
  CHECK(info.execution_count == 2);
  CHECK_STR(info.state, "idle");
  CHECK_STR(info.language, "python");
  /* Another tenant sees neither the box nor its contexts. */
  CHECK(husk_ctx_get(mgr, other, box.id, a, &info, &err) < 0 && err.code == ENOENT);
  struct husk_ctx_exec_req r = {.code = "1", .code_len = 1, .cancel_fd = -1};
  struct husk_ctx_exec_result res;
  CHECK(husk_ctx_execute(mgr, other, box.id, a, &r, &res, &err) < 0 && err.code == ENOENT);
  CHECK(husk_ctx_delete(mgr, tenant, box.id, b, &err) == 0);
  CHECK(husk_ctx_get(mgr, tenant, box.id, b, &info, &err) < 0 && err.code == ENOENT);
  CHECK(husk_ctx_delete(mgr, tenant, box.id, b, &err) < 0 && err.code == ENOENT);
}

/* The program owns the runner's process: what it writes to the event fd
 * is the box's, and the context must survive it. */
TEST(hostile_events_do_not_break_the_context) {
  struct got g;
  CHECK(run("default-python",
            "import os\n"
            "os.write(4, b'{\"type\":\"end\",\"id\":\"forged\",\"execution_count\":99}\\n')\n"
            "os.write(4, b'{not json\\n\\x00\\xff\\n[1,2]\\n\"s\"\\n')\n"
            "os.write(4, b'{\"type\":\"result\",\"id\":5,\"data\":7}\\n')\n"
            "chunk = b'y' * (1 << 20)\n"
            "for _ in range(30): os.write(4, chunk)\n"
            "os.write(4, b'\\n')\n"
            "print('still here')",
            &g) == HUSK_CTX_OK);
  CHECK(strstr(g.out, "still here") != NULL);
  CHECK(run("default-python", "6 * 7", &g) == HUSK_CTX_OK);
  CHECK_STR(g.main_text, "42");
}

TEST(output_past_the_limit_is_dropped) {
  struct got g;
  struct husk_ctx_exec_result res;
  struct husk_err err;
  const char *code = "import sys\nfor _ in range(100): sys.stdout.write('x' * 10000)\n'done'";
  CHECK(exec_in("default-python", code, strlen(code), 20000, 1000, &g, &res, &err) == 0);
  CHECK(res.status == HUSK_CTX_OK);
  CHECK(res.truncated);
  CHECK(g.out_total == 1000);
  CHECK(res.output_bytes >= 1000000);
  CHECK_STR(g.main_text, "'done'");
}

TEST(large_code_and_env_of_one_execution) {
  size_t n = 4u << 20;
  char *code = malloc(n + 64);
  CHECK(code != NULL);
  if (!code)
    return;
  int k = snprintf(code, 64, "s = '");
  memset(code + k, 'a', n);
  strcpy(code + k + n, "'\nlen(s)");
  struct got g;
  struct husk_ctx_exec_result res;
  struct husk_err err;
  CHECK(exec_in("default-python", code, strlen(code), 60000, 0, &g, &res, &err) == 0);
  CHECK_STR(g.main_text, "4194304");
  free(code);
  char *env[] = {"ONLY_NOW=yes", NULL};
  struct husk_ctx_exec_req r = {.code = "import os; os.environ.get('ONLY_NOW')",
                                .code_len = strlen("import os; os.environ.get('ONLY_NOW')"),
                                .env = env, .output = on_output, .sink_ctx = &g, .cancel_fd = -1};
  memset(&g, 0, sizeof g);
  CHECK(husk_ctx_execute(mgr, tenant, box.id, "default-python", &r, &res, &err) == 0);
  CHECK_STR(g.main_text, "'yes'");
  r.env = NULL;
  memset(&g, 0, sizeof g);
  CHECK(husk_ctx_execute(mgr, tenant, box.id, "default-python", &r, &res, &err) == 0);
  CHECK(g.main_text[0] == '\0'); /* None: no result */
  char *bad[] = {"1X=a", NULL};
  r.env = bad;
  CHECK(husk_ctx_execute(mgr, tenant, box.id, "default-python", &r, &res, &err) < 0 &&
        err.code == EINVAL);
  /* Bash takes any bytes, and keeps its cwd and variables. */
  CHECK(run("default-bash", "cd /tmp; V=7", &g) == HUSK_CTX_OK);
  const char bin[] = "printf '%s' \"$PWD $V\"; echo '\xff\x01'>/dev/null";
  memset(&g, 0, sizeof g);
  CHECK(exec_in("default-bash", bin, sizeof bin - 1, 20000, 0, &g, &res, &err) == 0);
  CHECK_STR(g.out, "/tmp 7");
  CHECK(run("default-bash", "false", &g) == HUSK_CTX_ERROR);
}

struct bg {
  const char *ctx;
  const char *code;
  int rc;
  struct husk_ctx_exec_result res;
  struct got g;
};

static void *bg_main(void *arg) {
  struct bg *b = arg;
  struct husk_err err;
  b->rc = exec_in(b->ctx, b->code, strlen(b->code), 60000, 0, &b->g, &b->res, &err);
  return NULL;
}

/* Wait until the context is running an execution. */
static void wait_busy(const char *ctx) {
  for (int i = 0; i < 2000; i++) {
    struct husk_ctx_info info;
    struct husk_err err;
    if (husk_ctx_get(mgr, tenant, box.id, ctx, &info, &err) == 0 && !strcmp(info.state, "busy"))
      break;
    usleep(5000);
  }
  usleep(100000); /* and has started the code */
}

TEST(one_execution_at_a_time_and_interrupt) {
  char c[HUSK_CTX_ID_MAX];
  CHECK(make_ctx("python", c, sizeof c));
  struct got g;
  CHECK(run(c, "y = 5", &g) == HUSK_CTX_OK);
  struct bg b = {.ctx = c, .code = "while True: pass"};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, bg_main, &b) == 0);
  wait_busy(c);
  struct husk_ctx_exec_result res;
  struct husk_err err;
  CHECK(exec_in(c, "1", 1, 1000, 0, &g, &res, &err) < 0 && err.code == EALREADY);
  CHECK(husk_ctx_interrupt(mgr, tenant, box.id, c, &err) == 0);
  pthread_join(t, NULL);
  CHECK(b.rc == 0 && b.res.status == HUSK_CTX_INTERRUPTED);
  CHECK_STR(b.g.err_name, "KeyboardInterrupt");
  CHECK(run(c, "y", &g) == HUSK_CTX_OK);
  CHECK_STR(g.main_text, "5");
}

TEST(restart_and_delete_during_an_execution) {
  char c[HUSK_CTX_ID_MAX];
  CHECK(make_ctx("python", c, sizeof c));
  struct got g;
  CHECK(run(c, "z = 1", &g) == HUSK_CTX_OK);
  struct bg b = {.ctx = c, .code = "import signal, time\n"
                                   "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                   "time.sleep(60)"};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, bg_main, &b) == 0);
  wait_busy(c);
  struct husk_ctx_info info;
  struct husk_err err;
  CHECK(husk_ctx_restart(mgr, tenant, box.id, c, &info, &err) == 0);
  pthread_join(t, NULL);
  CHECK(b.rc == 0 && b.res.status == HUSK_CTX_RESTARTED);
  CHECK(info.execution_count == 0);
  CHECK(run(c, "z", &g) == HUSK_CTX_ERROR);
  CHECK_STR(g.err_name, "NameError");
  b = (struct bg){.ctx = c, .code = "import time\ntime.sleep(60)"};
  CHECK(pthread_create(&t, NULL, bg_main, &b) == 0);
  wait_busy(c);
  CHECK(husk_ctx_delete(mgr, tenant, box.id, c, &err) == 0);
  pthread_join(t, NULL);
  CHECK(b.rc == 0 && b.res.status == HUSK_CTX_RESTARTED);
  CHECK(husk_ctx_get(mgr, tenant, box.id, c, &info, &err) < 0 && err.code == ENOENT);
}

/* A caller that goes away: the execution is interrupted, and one that
 * ignores the interrupt is restarted after the grace. */
TEST(caller_going_away_stops_the_execution) {
  char c[HUSK_CTX_ID_MAX];
  CHECK(make_ctx("python", c, sizeof c));
  struct got g;
  struct husk_ctx_exec_result res;
  struct husk_err err;
  memset(&g, 0, sizeof g);
  g.stop_after = 1;
  const char *code = "import time\nwhile True:\n    print('tick', flush=True)\n    time.sleep(0.05)";
  struct husk_ctx_exec_req r = {.code = code, .code_len = strlen(code), .stream = on_stream,
                                .output = on_output, .sink_ctx = &g, .cancel_fd = -1};
  CHECK(husk_ctx_execute(mgr, tenant, box.id, c, &r, &res, &err) == 0);
  CHECK(res.status == HUSK_CTX_INTERRUPTED && !res.restarted);
  int p[2];
  CHECK(pipe(p) == 0);
  CHECK(write(p[1], "x", 1) == 1);
  const char *stubborn = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                         "time.sleep(60)";
  struct husk_ctx_exec_req r2 = {.code = stubborn, .code_len = strlen(stubborn), .cancel_fd = p[0]};
  CHECK(husk_ctx_execute(mgr, tenant, box.id, c, &r2, &res, &err) == 0);
  CHECK(res.status == HUSK_CTX_INTERRUPTED && res.restarted);
  close(p[0]);
  close(p[1]);
  CHECK(run(c, "2 + 2", &g) == HUSK_CTX_OK);
  CHECK_STR(g.main_text, "4");
}

TEST(bad_requests) {
  struct husk_ctx_req req = {.language = "cobol"};
  struct husk_ctx_info info;
  struct husk_err err;
  CHECK(husk_ctx_create(mgr, tenant, box.id, &req, &info, &err) < 0 && err.code == EINVAL);
  req = (struct husk_ctx_req){.language = "python", .cwd = "relative"};
  CHECK(husk_ctx_create(mgr, tenant, box.id, &req, &info, &err) < 0 && err.code == EINVAL);
  req = (struct husk_ctx_req){.language = "python", .cwd = "/proc/no/such"};
  CHECK(husk_ctx_create(mgr, tenant, box.id, &req, &info, &err) < 0 && err.code == EINVAL);
  CHECK(husk_ctx_create(mgr, tenant, "b_nosuchbox", &req, &info, &err) < 0 && err.code == ENOENT);
  struct husk_ctx_exec_req r = {.code = "1", .code_len = 1, .cancel_fd = -1};
  struct husk_ctx_exec_result res;
  CHECK(husk_ctx_execute(mgr, tenant, box.id, "default-cobol", &r, &res, &err) < 0 &&
        err.code == ENOENT);
  CHECK(husk_ctx_execute(mgr, tenant, box.id, "../x", &r, &res, &err) < 0 && err.code == ENOENT);
  CHECK(husk_ctx_execute(mgr, tenant, box.id, "ctx_nosuch", &r, &res, &err) < 0 &&
        err.code == ENOENT);
  const char bad_utf8[] = "'\xff'";
  r = (struct husk_ctx_exec_req){.code = bad_utf8, .code_len = sizeof bad_utf8 - 1,
                                 .cancel_fd = -1};
  CHECK(husk_ctx_execute(mgr, tenant, box.id, "default-python", &r, &res, &err) < 0 &&
        err.code == EINVAL);
}

static int count_cb(void *ctx, const struct husk_ctx_info *c) {
  (*(int *)ctx)++;
  return 0;
}

TEST(at_most_so_many_contexts_a_box) {
  struct husk_err err;
  int n = 0;
  CHECK(husk_ctx_list(mgr, tenant, box.id, count_cb, &n, &err) == 0);
  char id[HUSK_CTX_ID_MAX];
  for (; n < HUSK_CTX_MAX; n++)
    if (!make_ctx("bash", id, sizeof id))
      break;
  CHECK(n == HUSK_CTX_MAX);
  struct husk_ctx_req req = {.language = "bash"};
  struct husk_ctx_info info;
  CHECK(husk_ctx_create(mgr, tenant, box.id, &req, &info, &err) < 0 && err.code == EUSERS);
  n = 0;
  CHECK(husk_ctx_list(mgr, tenant, box.id, count_cb, &n, &err) == 0 && n == HUSK_CTX_MAX);
}

static int husk_binary(char *out, size_t size) {
  const char *env = getenv("HUSK_BINARY");
  if (env) {
    snprintf(out, size, "%s", env);
    return 0;
  }
  char self[PATH_MAX - 16];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return -1;
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  if (!slash)
    return -1;
  *slash = '\0'; /* build/tests */
  snprintf(out, size, "%s/../husk", self);
  return access(out, X_OK);
}

int main(void) {
  if (geteuid() != 0) {
    printf("1..0 # SKIP needs root (it creates boxes)\n");
    return 0;
  }
  char bin[PATH_MAX], dir[] = "/tmp/husk-test-context-XXXXXX";
  if (husk_binary(bin, sizeof bin) < 0 || !mkdtemp(dir)) {
    printf("not ok 1 - setup: no husk binary beside the tests, or no temporary directory\n");
    return 1;
  }
  struct husk_err err;
  struct husk_mgr_config cfg = {.data_dir = dir, .husk_binary = bin};
  if (husk_mgr_open(&mgr, &cfg, &err) < 0 || husk_tenant_create(mgr, "ctx-a", tenant, &err) < 0 ||
      husk_tenant_create(mgr, "ctx-b", other, &err) < 0) {
    printf("not ok 1 - setup: %s\n", err.msg);
    return 1;
  }
  struct husk_box_spec spec = {.limits = {.memory_bytes = 1024u << 20, .timeout_ms = 600000}};
  if (husk_box_create(mgr, tenant, &spec, &box, &err) < 0) {
    printf("not ok 1 - setup: %s\n", err.msg);
    return 1;
  }
  RUN(state_is_kept_and_contexts_are_apart);
  RUN(hostile_events_do_not_break_the_context);
  RUN(output_past_the_limit_is_dropped);
  RUN(large_code_and_env_of_one_execution);
  RUN(one_execution_at_a_time_and_interrupt);
  RUN(restart_and_delete_during_an_execution);
  RUN(caller_going_away_stops_the_execution);
  RUN(bad_requests);
  RUN(at_most_so_many_contexts_a_box);
  husk_box_destroy(mgr, tenant, box.id, "stopped", &err);
  husk_mgr_close(mgr, true);
  unit_rm_tree(dir);
  return unit_done();
}
