/* The in-library figures of code contexts (bench/contexts.sh): the same
 * operations as the HTTP client (bench/contexts.py) but called on libhusk
 * directly, so that the HTTP front's share of each can be told apart.
 *
 *   ctxbench DATA_DIR N WARMUP     (as root; HUSK_BINARY names the `husk`
 *                                   boxes are started from)
 *
 * In one box of the default template it times, N times each after WARMUP:
 *   create   husk_ctx_create (python) + husk_ctx_delete
 *   execute  husk_ctx_execute of `1+1` in one warm context (the result
 *            "2" checked)
 *   exec     husk_box_exec of `python3 -c 'print(1+1)'` (its "2\n" checked)
 * and prints one JSON line per operation: {"op", "n", "errors", "ms": [...]}
 * (every sample, in milliseconds: the caller computes the percentiles).
 * The box and the manager's data directory are removed at the end. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <husk/husk.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The main result's text/plain, kept to check it. */
struct seen {
  char text[64];
  char out[64];
  size_t outlen;
};

static int on_output(void *ctx, const struct husk_ctx_output *o) {
  struct seen *s = ctx;
  if (!o->is_main_result)
    return 0;
  for (size_t i = 0; i < o->nreprs; i++)
    if (strcmp(o->reprs[i].mime, "text/plain") == 0)
      snprintf(s->text, sizeof s->text, "%.*s", (int)o->reprs[i].len, o->reprs[i].data);
  return 0;
}

static int on_stdout(void *ctx, int stream, const char *buf, size_t len) {
  struct seen *s = ctx;
  if (stream != HUSK_STDOUT)
    return 0;
  size_t room = sizeof s->out - 1 - s->outlen;
  if (len > room)
    len = room;
  memcpy(s->out + s->outlen, buf, len);
  s->outlen += len;
  s->out[s->outlen] = 0;
  return 0;
}

static void print_op(const char *op, const double *ms, int n, int errors, const char *first_err) {
  printf("{\"op\":\"%s\",\"n\":%d,\"errors\":%d,\"ms\":[", op, n, errors);
  for (int i = 0; i < n; i++)
    printf("%s%.4f", i ? "," : "", ms[i]);
  printf("]");
  if (first_err && first_err[0]) {
    printf(",\"first_error\":\"");
    for (const char *p = first_err; *p; p++)
      if (*p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
        putchar(*p);
    printf("\"");
  }
  printf("}\n");
  fflush(stdout);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: ctxbench DATA_DIR N WARMUP\n");
    return 2;
  }
  int n = atoi(argv[2]), warm = atoi(argv[3]);
  if (n <= 0 || warm < 0) {
    fprintf(stderr, "ctxbench: N must be > 0 and WARMUP >= 0\n");
    return 2;
  }
  struct husk_err err = {0};
  struct husk_mgr_config cfg = {.data_dir = argv[1], .husk_binary = getenv("HUSK_BINARY")};
  struct husk_mgr *m;
  if (husk_mgr_open(&m, &cfg, &err) < 0) {
    fprintf(stderr, "ctxbench: open the manager: %s\n", err.msg);
    return 1;
  }
  char tenant[HUSK_TENANT_ID_MAX];
  if (husk_tenant_create(m, "ctxbench", tenant, &err) < 0) {
    fprintf(stderr, "ctxbench: tenant: %s\n", err.msg);
    husk_mgr_close(m, true);
    return 1;
  }
  struct husk_box_spec spec = {.limits = {.memory_bytes = 512 << 20, .timeout_ms = 1800000}};
  struct husk_box_info box;
  if (husk_box_create(m, tenant, &spec, &box, &err) < 0) {
    fprintf(stderr, "ctxbench: create a box: %s\n", err.msg);
    husk_mgr_close(m, true);
    return 1;
  }
  double *ms = calloc((size_t)n, sizeof *ms);
  int rc = ms ? 0 : 1;
  char first[sizeof err.msg];

  /* create + delete */
  int errors = 0, k = 0;
  first[0] = 0;
  for (int i = 0; ms && i < warm + n; i++) {
    struct husk_ctx_req req = {.language = "python"};
    struct husk_ctx_info info;
    double t0 = now_ms();
    int ok = husk_ctx_create(m, tenant, box.id, &req, &info, &err) == 0 &&
             husk_ctx_delete(m, tenant, box.id, info.id, &err) == 0;
    double t1 = now_ms();
    if (!ok && !errors++)
      snprintf(first, sizeof first, "%s", err.msg);
    if (ok && i >= warm)
      ms[k++] = t1 - t0;
  }
  if (ms)
    print_op("create", ms, k, errors, first);

  /* execute 1+1 in one warm context */
  struct husk_ctx_req creq = {.language = "python"};
  struct husk_ctx_info ctx;
  errors = k = 0;
  first[0] = 0;
  if (ms && husk_ctx_create(m, tenant, box.id, &creq, &ctx, &err) == 0) {
    for (int i = 0; i < warm + n; i++) {
      struct seen s = {0};
      struct husk_ctx_exec_req xr = {
          .code = "1+1", .code_len = 3, .output = on_output, .sink_ctx = &s, .cancel_fd = -1};
      struct husk_ctx_exec_result xo;
      double t0 = now_ms();
      int r = husk_ctx_execute(m, tenant, box.id, ctx.id, &xr, &xo, &err);
      double t1 = now_ms();
      int ok = r == 0 && xo.status == HUSK_CTX_OK && strcmp(s.text, "2") == 0;
      if (!ok && !errors++)
        snprintf(first, sizeof first, "%s", r ? err.msg : "not status ok with the result 2");
      if (ok && i >= warm)
        ms[k++] = t1 - t0;
    }
    husk_ctx_delete(m, tenant, box.id, ctx.id, &err);
    print_op("execute", ms, k, errors, first);
  } else if (ms) {
    print_op("execute", ms, 0, 1, err.msg);
  }

  /* python3 -c 'print(1+1)' */
  char *cmd[] = {"python3", "-c", "print(1+1)", NULL};
  errors = k = 0;
  first[0] = 0;
  for (int i = 0; ms && i < warm + n; i++) {
    struct seen s = {0};
    struct husk_exec_req er = {.argv = cmd, .sink = on_stdout, .sink_ctx = &s, .cancel_fd = -1};
    struct husk_exec_result eo;
    double t0 = now_ms();
    int r = husk_box_exec(m, tenant, box.id, &er, &eo, &err);
    double t1 = now_ms();
    int ok = r == 0 && eo.exit_code == 0 && strcmp(s.out, "2\n") == 0;
    if (!ok && !errors++)
      snprintf(first, sizeof first, "%s", r ? err.msg : "not exit 0 with 2");
    if (ok && i >= warm)
      ms[k++] = t1 - t0;
  }
  if (ms)
    print_op("exec", ms, k, errors, first);

  free(ms);
  if (husk_box_destroy(m, tenant, box.id, "stopped", &err) < 0) {
    fprintf(stderr, "ctxbench: delete the box: %s\n", err.msg);
    rc = 1;
  }
  husk_box_info_free(&box);
  husk_mgr_close(m, true);
  return rc;
}
