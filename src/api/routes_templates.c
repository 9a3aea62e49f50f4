/* Template routes (docs/templates.md): import an image archive, list,
 * inspect, export and delete templates, and Dockerfile builds.
 *
 * A tenant's key works on the tenant's own templates and sees the
 * operator's shared ones; the admin key works on the shared ones (and
 * lists every template).  Imports and build contexts are request bodies
 * that the core reads as they arrive, through a pipe (as PUT /files/tar);
 * a build's output is an NDJSON stream. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "api/internal.h"
#include "box/box.h"
#include "jail/limits.h"
#include "state/template_state.h"
#include "template/template.h"
#include "util/cleanup.h"
#include "util/fileio.h"
#include "util/json_text.h"
#include "util/parse.h"

/* Whose templates a request works on: the tenant's, or (admin) the shared. */
static const char *owner_of(const struct req *r) { return r->admin ? "" : r->tenant; }

static struct template_store *store_of(struct req *r) {
  return box_mgr_templates(r->srv->cfg.mgr);
}

static enum MHD_Result no_templates(struct req *r) {
  return api_reply_error(r, 503, "unavailable", "this server keeps no templates");
}

/* A core error; the data disk's reserve is named (the generic 507 speaks
 * of a box's disk). */
static enum MHD_Result template_err(struct req *r, const struct husk_err *err) {
  if (err->code == ENOSPC)
    return api_reply_error(r, 507, "insufficient_storage",
                           "the server's data disk is down to its reserve: the template cannot "
                           "be stored");
  return api_reply_err(r, err);
}

/* ?name=NAME of a new template: present and well-formed, else 400. */
static const char *new_name(struct req *r) {
  const char *name = api_query(r, "name");
  if (!name) {
    husk_fail(&r->err, EINVAL, "`name` (the new template's name) is required");
    return NULL;
  }
  if (!template_name_ok(name)) {
    husk_fail(&r->err, EINVAL,
              "a template name is 1 to 63 of a-z, 0-9, '.', '_', '-', starting with a letter or "
              "digit, and not `default`");
    return NULL;
  }
  snprintf(r->audit_detail, sizeof r->audit_detail, "name=%s", name);
  return name;
}

/* The write end of a body pipe: what the core has not read when the body
 * ended early makes it fail (a truncated body never becomes a template). */
struct body_pipe {
  int r, w;
  atomic_bool complete; /* the whole body went in */
};

static ssize_t body_pipe_read(void *ctx, void *buf, size_t cap) {
  struct body_pipe *p = ctx;
  for (;;) {
    ssize_t n = read(p->r, buf, cap);
    if (n < 0 && errno == EINTR)
      continue;
    if (n == 0 && !atomic_load(&p->complete)) {
      errno = ECONNABORTED;
      return -1;
    }
    return n;
  }
}

/* ---- POST /v1/templates?name=NAME: import an image archive ------------------------------ */

struct timport {
  struct template_store *ts;
  char owner[STATE_TENANT_ID_SIZE];
  char name[STATE_TEMPLATE_NAME_SIZE];
  struct body_pipe pipe;
  pthread_t th;
  bool running;
  bool discard; /* the importer stopped reading after a whole archive */
  int rc;
  struct husk_err err;
  struct state_template t;
};

static void *import_worker(void *arg) {
  struct timport *t = arg;
  t->rc = template_import_archive(t->ts, t->owner, t->name, body_pipe_read, &t->pipe, &t->t,
                                  &t->err);
  /* Done reading: a writer still sending gets EPIPE instead of blocking. */
  close_quiet(t->pipe.r);
  t->pipe.r = -1;
  return NULL;
}

static void import_join(struct timport *t) {
  close_quiet(t->pipe.w);
  t->pipe.w = -1;
  if (t->running) {
    pthread_join(t->th, NULL);
    t->running = false;
  }
}

enum MHD_Result h_template_import_begin(struct req *r) {
  struct template_store *ts = store_of(r);
  if (!ts)
    return no_templates(r);
  struct timport *t = calloc(1, sizeof *t);
  if (!t)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  t->pipe.r = t->pipe.w = -1;
  t->rc = -1;
  r->up = t;
  const char *name = new_name(r);
  if (!name)
    return api_reply_bad(r);
  t->ts = ts;
  snprintf(t->owner, sizeof t->owner, "%s", owner_of(r));
  snprintf(t->name, sizeof t->name, "%s", name);
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return api_reply_error(r, 503, "unavailable", "cannot create a pipe");
  t->pipe.r = p[0];
  t->pipe.w = p[1];
  if (pthread_create(&t->th, NULL, import_worker, t) != 0)
    return api_reply_error(r, 503, "unavailable", "cannot start a worker thread");
  t->running = true;
  return MHD_YES;
}

int h_template_import_upload(struct req *r, const char *data, size_t len) {
  struct timport *t = r->up;
  if (t->discard)
    return 0;
  if (write_all(t->pipe.w, data, len) < 0) {
    if (errno != EPIPE)
      return husk_error(&r->err, errno, "cannot pass the archive on");
    /* The import stopped: its error is the reply; after a whole archive,
     * what follows (padding) is dropped. */
    import_join(t);
    if (t->rc < 0) {
      r->err = t->err;
      return -1;
    }
    t->discard = true;
  }
  return 0;
}

enum MHD_Result h_template_import(struct req *r) {
  struct timport *t = r->up;
  atomic_store(&t->pipe.complete, true);
  import_join(t);
  if (t->rc < 0)
    return template_err(r, &t->err);
  r->stream_ok = true;
  return api_reply_json(r, 201, template_json(&t->t, false));
}

void h_template_import_cleanup(struct req *r) {
  struct timport *t = r->up;
  if (!t)
    return;
  import_join(t); /* a client that went away: the import fails, keeping nothing */
  close_quiet(t->pipe.r);
  if (t->rc == 0)
    state_template_free(&t->t);
  free(t);
  r->up = NULL;
}

/* ---- GET /v1/templates, GET and DELETE /v1/templates/{name} ----------------------------- */

struct list_ctx {
  json_t *arr;
  bool with_owner; /* the admin's listing names each template's tenant */
};

static int list_cb(void *ctx, const struct state_template *t) {
  struct list_ctx *lc = ctx;
  json_t *j = template_json(t, false);
  if (j && lc->with_owner && json_object_set_new(j, "tenant_id", json_string(t->tenant_id)) < 0) {
    json_decref(j);
    j = NULL;
  }
  if (!j || json_array_append_new(lc->arr, j) < 0)
    return API_LIST_NOMEM;
  return 0;
}

enum MHD_Result h_template_list(struct req *r) {
  struct list_ctx lc = {.arr = json_array(), .with_owner = r->admin};
  if (!lc.arr)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  struct husk_err err = {0};
  int rc = state_template_list(r->srv->cfg.state, r->admin ? NULL : r->tenant, list_cb, &lc, &err);
  if (rc < 0) {
    json_decref(lc.arr);
    return api_reply_list_err(r, rc, &err);
  }
  return api_reply_json(r, 200, json_pack("{s:o}", "templates", lc.arr));
}

enum MHD_Result h_template_get(struct req *r) {
  struct state_template t;
  struct husk_err err = {0};
  if (state_template_get(r->srv->cfg.state, owner_of(r), r->params[0], true, &t, &err) < 0)
    return api_reply_err(r, &err);
  json_t *j = template_json(&t, true);
  state_template_free(&t);
  return api_reply_json(r, 200, j);
}

enum MHD_Result h_template_delete(struct req *r) {
  snprintf(r->audit_detail, sizeof r->audit_detail, "name=%s", r->params[0]);
  struct husk_err err = {0};
  if (box_template_delete(r->srv->cfg.mgr, owner_of(r), r->params[0], &err) < 0) {
    if (err.code == ENOENT && !r->admin) {
      /* A shared template is the operator's to delete: say so. */
      struct state_template t;
      struct husk_err e2;
      if (state_template_get(r->srv->cfg.state, r->tenant, r->params[0], true, &t, &e2) == 0) {
        state_template_free(&t);
        return api_reply_error(r, 403, "forbidden",
                               "template `%s` is the operator's (shared): only the admin key "
                               "deletes it",
                               r->params[0]);
      }
    }
    return api_reply_err(r, &err);
  }
  return api_reply_empty(r, 204);
}

/* ---- GET /v1/templates/{name}/export: an OCI archive ------------------------------------ */

struct texport {
  struct template_store *ts;
  char owner[STATE_TENANT_ID_SIZE];
  char name[STATE_TEMPLATE_NAME_SIZE];
};

static int export_produce(void *ctx, int (*out)(void *, const void *, size_t), void *oc,
                          struct husk_err *err) {
  struct texport *x = ctx;
  return template_export(x->ts, x->owner, x->name, out, oc, err);
}

enum MHD_Result h_template_export(struct req *r) {
  struct template_store *ts = store_of(r);
  if (!ts)
    return no_templates(r);
  struct texport *x = calloc(1, sizeof *x);
  if (!x)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  x->ts = ts;
  snprintf(x->owner, sizeof x->owner, "%s", owner_of(r));
  snprintf(x->name, sizeof x->name, "%s", r->params[0]);
  return api_reply_produced(r, "application/x-tar", export_produce, x, free);
}

/* ---- POST /v1/builds?name=NAME: a Dockerfile build ------------------------------------- */

/* The body is the build context as a tar (plain, gzip or zstd) with the
 * Dockerfile in it; the reply, once the build has started, is an NDJSON
 * stream: {"type":"log","text":...} lines as the steps print, then
 * {"type":"done","template":{...}} or {"type":"error",...}.  Errors before
 * the first step (a bad Dockerfile, a taken name, a missing base) are
 * ordinary HTTP errors. */
struct tbuild {
  struct api_server *srv;
  struct api_stream *st;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int refs;
  bool started, finished;
  int rc;
  struct husk_err err;
  struct body_pipe pipe;
  int abort_fd;  /* eventfd: the body did not arrive whole */
  int cancel_fd; /* epoll: the client hung up, the stream is gone, the server stops, abort */
  bool discard;
  char tenant[HUSK_TENANT_ID_MAX];
  char owner[STATE_TENANT_ID_SIZE];
  char name[STATE_TEMPLATE_NAME_SIZE];
  char *dockerfile_path;
  char **build_args;
  char *egress;
  struct husk_limits limits;
  bool no_cache;
};

static void build_unref(struct tbuild *b) {
  pthread_mutex_lock(&b->mu);
  bool last = --b->refs == 0;
  pthread_mutex_unlock(&b->mu);
  if (!last)
    return;
  api_stream_unref(b->st);
  close_quiet(b->pipe.r);
  close_quiet(b->pipe.w);
  close_quiet(b->abort_fd);
  close_quiet(b->cancel_fd);
  free(b->dockerfile_path);
  free(b->build_args);
  free(b->egress);
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->cv);
  free(b);
}

static void build_log(void *ctx, const char *buf, size_t len) {
  struct tbuild *b = ctx;
  pthread_mutex_lock(&b->mu);
  if (!b->started) {
    b->started = true;
    pthread_cond_broadcast(&b->cv);
  }
  pthread_mutex_unlock(&b->mu);
  bool lossy;
  api_stream_push(b->st, "log", json_pack("{s:o}", "text", json_text(buf, len, false, &lossy)));
}

static void *build_worker(void *arg) {
  struct tbuild *b = arg;
  struct box_build_req rq = {.tenant = b->tenant,
                             .owner = b->owner,
                             .name = b->name,
                             .dockerfile_path = b->dockerfile_path,
                             .build_args = b->build_args,
                             .context = -1,
                             .context_tar = b->pipe.r,
                             .egress_json = b->egress,
                             .limits = b->limits,
                             .no_cache = b->no_cache,
                             .log = build_log,
                             .log_ctx = b,
                             .cancel_fd = b->cancel_fd};
  struct state_template t;
  struct husk_err err = {0};
  int rc = box_build(b->srv->cfg.mgr, &rq, &t, &err);
  /* Done reading: an upload still sending gets EPIPE instead of blocking. */
  pthread_mutex_lock(&b->mu);
  close_quiet(b->pipe.r);
  b->pipe.r = -1;
  b->finished = true;
  b->rc = rc;
  b->err = err;
  bool streaming = b->started;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
  if (streaming) {
    if (rc == 0) {
      api_stream_push(b->st, "done", json_pack("{s:o}", "template", template_json(&t, false)));
    } else {
      unsigned status;
      const char *code;
      api_err_status(err.code, &status, &code);
      if (err.code == ENOSPC)
        snprintf(err.msg, sizeof err.msg, "the server's data disk is down to its reserve");
      else if (status >= 500 && err.code != ECANCELED)
        api_log(b->srv, "build of %s: %s", b->name, err.msg);
      api_stream_push(b->st, "error",
                      json_pack("{s:s, s:s}", "code", code, "message",
                                status >= 500 && err.code != ENOSPC && err.code != ECANCELED
                                    ? "internal error (logged by the server)"
                                    : err.msg));
    }
  }
  if (rc == 0)
    state_template_free(&t);
  api_stream_close(b->st);
  struct api_server *srv = b->srv;
  build_unref(b);
  api_worker_leave(srv);
  return NULL;
}

/* The build's query: ?name, dockerfile, buildargs (a JSON object),
 * nocache, egress (hosts, comma-separated), and each step box's memory,
 * cpus, pids, disk, timeout.  0, or -1 with r->err. */
static int build_query(struct req *r, struct tbuild *b) {
  const char *name = new_name(r);
  if (!name)
    return -1;
  snprintf(b->name, sizeof b->name, "%s", name);
  const char *df = api_query(r, "dockerfile");
  if (df && (!*df || !(b->dockerfile_path = strdup(df))))
    return husk_fail(&r->err, *df ? ENOMEM : EINVAL, "`dockerfile` is a path in the context");
  const char *args = api_query(r, "buildargs");
  if (args) {
    json_error_t je;
    json_t *w = json_pack("{s:o}", "buildargs", json_loads(args, JSON_REJECT_DUPLICATES, &je));
    int rc = w ? jget_env(w, "buildargs", &b->build_args, &r->err)
               : husk_fail(&r->err, EINVAL, "`buildargs` must be a JSON object of strings");
    json_decref(w);
    if (rc < 0)
      return -1;
  }
  if (api_query_bool(r, "nocache", &b->no_cache) < 0)
    return -1;
  const char *eg = api_query(r, "egress");
  if (eg && *eg) {
    cleanup_free char *list = strdup(eg);
    const char *hosts[64];
    size_t n = 0;
    char *save = NULL;
    if (!list)
      return husk_error(&r->err, ENOMEM, "egress");
    for (char *h = strtok_r(list, ",", &save); h; h = strtok_r(NULL, ",", &save)) {
      if (n == sizeof hosts / sizeof hosts[0])
        return husk_fail(&r->err, EINVAL, "`egress`: at most 64 hosts");
      hosts[n++] = h;
    }
    if (n && !(b->egress = box_build_egress_policy(hosts, n)))
      return husk_error(&r->err, ENOMEM, "egress");
  }
  const char *v;
  if ((v = api_query(r, "memory")) && parse_size(v, &b->limits.memory_bytes, &r->err) < 0)
    return husk_error_wrap(&r->err, "memory");
  if ((v = api_query(r, "disk")) && parse_size(v, &b->limits.disk_bytes, &r->err) < 0)
    return husk_error_wrap(&r->err, "disk");
  if ((v = api_query(r, "cpus")) &&
      parse_milli(v, HUSK_MIN_CPU_MILLI, HUSK_MAX_CPU_MILLI, &b->limits.cpu_milli, &r->err) < 0)
    return husk_error_wrap(&r->err, "cpus");
  if ((v = api_query(r, "timeout")) &&
      parse_milli(v, 1, HUSK_MAX_TIMEOUT_MS, &b->limits.timeout_ms, &r->err) < 0)
    return husk_error_wrap(&r->err, "timeout (seconds, of each RUN step)");
  uint64_t pids = 0;
  bool has_pids = false;
  if (api_query_u64(r, "pids", HUSK_MAX_PIDS, &pids, &has_pids) < 0)
    return -1;
  b->limits.pids = pids;
  return 0;
}

enum MHD_Result h_build_begin(struct req *r) {
  if (!store_of(r))
    return no_templates(r);
  struct tbuild *b = calloc(1, sizeof *b);
  if (!b)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  b->refs = 1;
  b->srv = r->srv;
  b->pipe.r = b->pipe.w = b->abort_fd = b->cancel_fd = -1;
  r->up = b;
  if (build_query(r, b) < 0)
    return r->err.code == ENOMEM ? api_reply_error(r, 500, "internal_error", "out of memory")
                                 : api_reply_bad(r);
  snprintf(b->owner, sizeof b->owner, "%s", owner_of(r));
  struct husk_err err = {0};
  if (!r->admin)
    snprintf(b->tenant, sizeof b->tenant, "%s", r->tenant);
  else if (box_build_tenant(r->srv->cfg.mgr, b->tenant, &err) < 0)
    return api_reply_err(r, &err);
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return api_reply_error(r, 503, "unavailable", "cannot create a pipe");
  b->pipe.r = p[0];
  b->pipe.w = p[1];
  b->st = api_stream_new(r, STREAM_NDJSON);
  if (!b->st)
    return errno == EAGAIN ? api_reply_busy(r)
                           : api_reply_error(r, 500, "internal_error", "out of memory");
  /* Cancelled when the client hangs up, the stream is released, the
   * server stops, or the body is cut short. */
  b->abort_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  b->cancel_fd = api_cancel_fd(r);
  struct epoll_event e1 = {.events = EPOLLIN}, e2 = {.events = EPOLLIN};
  if (b->abort_fd < 0 || b->cancel_fd < 0 ||
      epoll_ctl(b->cancel_fd, EPOLL_CTL_ADD, api_stream_gone_fd(b->st), &e1) < 0 ||
      epoll_ctl(b->cancel_fd, EPOLL_CTL_ADD, b->abort_fd, &e2) < 0)
    return api_reply_error(r, 500, "internal_error", "cannot set up the build");
  b->refs = 2; /* the request and the worker */
  if (api_worker_start(r->srv, build_worker, b) != 0) {
    b->refs = 1;
    return api_reply_error(r, 503, "unavailable", "cannot start a worker thread");
  }
  return MHD_YES;
}

/* The worker's result once it has finished (it closes its read end first). */
static void build_wait(struct tbuild *b, bool until_started) {
  pthread_mutex_lock(&b->mu);
  while (!b->finished && !(until_started && b->started))
    pthread_cond_wait(&b->cv, &b->mu);
  pthread_mutex_unlock(&b->mu);
}

int h_build_upload(struct req *r, const char *data, size_t len) {
  struct tbuild *b = r->up;
  if (b->discard)
    return 0;
  if (write_all(b->pipe.w, data, len) < 0) {
    if (errno != EPIPE)
      return husk_error(&r->err, errno, "cannot pass the build context on");
    /* The build stopped reading: it failed (its error is the reply). */
    build_wait(b, false);
    if (b->rc < 0 && !b->started) {
      r->err = b->err;
      return -1;
    }
    b->discard = true;
  }
  return 0;
}

enum MHD_Result h_build(struct req *r) {
  struct tbuild *b = r->up;
  r->stream_ok = true;
  atomic_store(&b->pipe.complete, true);
  close_quiet(b->pipe.w);
  b->pipe.w = -1;
  build_wait(b, true);
  pthread_mutex_lock(&b->mu);
  bool failed = !b->started && b->rc < 0;
  struct husk_err err = b->err;
  pthread_mutex_unlock(&b->mu);
  if (failed)
    return template_err(r, &err);
  struct MHD_Response *resp = api_stream_response(b->st);
  return resp ? api_queue(r, 200, resp) : MHD_NO;
}

void h_build_cleanup(struct req *r) {
  struct tbuild *b = r->up;
  if (!b)
    return;
  if (!r->stream_ok && b->abort_fd >= 0) {
    uint64_t one = 1;
    if (write(b->abort_fd, &one, sizeof one) < 0) {
      /* an eventfd at its maximum is signalled already */
    }
  }
  close_quiet(b->pipe.w); /* the context ends: a cut one fails the build */
  b->pipe.w = -1;
  build_unref(b);
  r->up = NULL;
}
