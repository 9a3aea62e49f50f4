/* Streaming responses fed by a queue: Server-Sent Events or NDJSON.
 *
 * A producer (the worker thread running an exec) pushes events; the
 * connection's thread, inside MHD's content-reader callback, pops them and
 * writes them to the socket as they come, so `curl -N` shows output live.
 * While the queue is empty the reader waits on an eventfd and on the
 * socket's hang-up (POLLRDHUP), so a client that goes away is noticed at
 * once, not at the next write.  When the response is released by MHD
 * (request done, or the client went away) the stream is marked gone: the
 * producer's next push fails, and api_stream_gone_fd() becomes readable,
 * which the exec uses as its cancel fd.
 *
 * Backpressure: push blocks while more than STREAM_QUEUE_MAX bytes wait,
 * so a client that reads slowly slows the producer instead of growing the
 * daemon's memory.  A stream holds at most STREAM_RESERVE bytes (the queue
 * bound plus the event that passes it), reserved from the daemon's reply
 * budget while it lives. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "api/internal.h"
#include "util/cleanup.h"

#define STREAM_QUEUE_MAX (1024 * 1024)
/* The largest event: a 64 KiB relay chunk of NULs escaped ("\u0000"),
 * or a raw chunk of 256 KiB; plus the queue. */
#define STREAM_RESERVE (STREAM_QUEUE_MAX + 512 * 1024)
#define SSE_HEARTBEAT_MS 15000

struct chunk {
  struct chunk *next;
  size_t len, off;
  char data[];
};

struct api_stream {
  struct api_server *srv;
  char tenant[STATE_TENANT_ID_SIZE]; /* whose reply-budget share holds STREAM_RESERVE */
  enum api_stream_fmt fmt;
  pthread_mutex_t mu;
  pthread_cond_t room;
  int refs;
  struct chunk *head, *tail;
  size_t queued;
  bool closed; /* producer done */
  bool failed; /* ... and the stream is incomplete: end with an error */
  bool gone;   /* consumer done (response released) */
  int data_fd; /* eventfd: something was queued or the stream closed */
  int gone_fd; /* eventfd: the consumer went away */
  int sock;    /* the connection's socket, for hang-up detection */
};

struct api_stream *api_stream_new(struct req *r, enum api_stream_fmt fmt) {
  if (!api_budget_take(r->srv, r->tenant, STREAM_RESERVE)) {
    errno = EAGAIN;
    return NULL;
  }
  struct api_stream *s = calloc(1, sizeof *s);
  if (!s) {
    api_budget_give(r->srv, r->tenant, STREAM_RESERVE);
    errno = ENOMEM;
    return NULL;
  }
  s->srv = r->srv;
  snprintf(s->tenant, sizeof s->tenant, "%s", r->tenant);
  s->fmt = fmt;
  s->refs = 1;
  s->sock = api_conn_fd(r);
  s->data_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  s->gone_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->data_fd < 0 || s->gone_fd < 0) {
    close_quiet(s->data_fd);
    close_quiet(s->gone_fd);
    free(s);
    api_budget_give(r->srv, r->tenant, STREAM_RESERVE);
    errno = ENOMEM;
    return NULL;
  }
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->room, NULL);
  return s;
}

void api_stream_ref(struct api_stream *s) {
  pthread_mutex_lock(&s->mu);
  s->refs++;
  pthread_mutex_unlock(&s->mu);
}

void api_stream_unref(struct api_stream *s) {
  if (!s)
    return;
  pthread_mutex_lock(&s->mu);
  bool last = --s->refs == 0;
  pthread_mutex_unlock(&s->mu);
  if (!last)
    return;
  for (struct chunk *c = s->head, *n; c; c = n) {
    n = c->next;
    free(c);
  }
  close_quiet(s->data_fd);
  close_quiet(s->gone_fd);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->room);
  api_budget_give(s->srv, s->tenant, STREAM_RESERVE);
  free(s);
}

static void kick(int fd) {
  uint64_t one = 1;
  if (write(fd, &one, sizeof one) < 0) {
    /* cannot fail short of counter overflow */
  }
}

static void drain(int fd) {
  uint64_t v;
  if (read(fd, &v, sizeof v) < 0) {
    /* EAGAIN: nothing pending */
  }
}

char *sse_format(const char *event, const char *id, json_t *data, size_t *len) {
  char *d = json_dumps(data, JSON_COMPACT); /* one line: JSON escapes newlines */
  if (!d)
    return NULL;
  char *out = NULL;
  int n = id ? asprintf(&out, "id: %s\nevent: %s\ndata: %s\n\n", id, event, d)
             : asprintf(&out, "event: %s\ndata: %s\n\n", event, d);
  free(d);
  if (n < 0)
    return NULL;
  *len = (size_t)n;
  return out;
}

char *ndjson_format(const char *event, json_t *data, size_t *len) {
  json_t *o = json_object();
  if (!o)
    return NULL;
  json_object_set_new(o, "type", json_string(event));
  if (json_is_object(data))
    json_object_update(o, data);
  char *d = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  if (!d)
    return NULL;
  size_t n = strlen(d);
  char *out = realloc(d, n + 2);
  if (!out) {
    free(d);
    return NULL;
  }
  out[n] = '\n';
  out[n + 1] = '\0';
  *len = n + 1;
  return out;
}

static int enqueue(struct api_stream *s, const char *text, size_t len) {
  struct chunk *c = malloc(sizeof *c + len);
  if (!c)
    return -1;
  c->next = NULL;
  c->len = len;
  c->off = 0;
  memcpy(c->data, text, len);
  pthread_mutex_lock(&s->mu);
  while (!s->gone && s->queued > STREAM_QUEUE_MAX)
    pthread_cond_wait(&s->room, &s->mu);
  if (s->gone) {
    pthread_mutex_unlock(&s->mu);
    free(c);
    return -1;
  }
  if (s->tail)
    s->tail->next = c;
  else
    s->head = c;
  s->tail = c;
  s->queued += len;
  pthread_mutex_unlock(&s->mu);
  kick(s->data_fd);
  return 0;
}

int api_stream_push_raw(struct api_stream *s, const void *buf, size_t len) {
  /* Big writes are split so the queue bound stays meaningful. */
  const char *p = buf;
  while (len > 0) {
    size_t n = len < 256 * 1024 ? len : 256 * 1024;
    if (enqueue(s, p, n) < 0)
      return -1;
    p += n;
    len -= n;
  }
  return 0;
}

void api_stream_fail(struct api_stream *s) {
  pthread_mutex_lock(&s->mu);
  s->failed = true;
  s->closed = true;
  pthread_mutex_unlock(&s->mu);
  kick(s->data_fd);
}

int api_stream_push(struct api_stream *s, const char *event, json_t *data) {
  size_t len = 0;
  char *text = data ? (s->fmt == STREAM_SSE ? sse_format(event, NULL, data, &len)
                                            : ndjson_format(event, data, &len))
                    : NULL;
  json_decref(data);
  if (!text)
    return -1;
  int rc = enqueue(s, text, len);
  free(text);
  return rc;
}

void api_stream_close(struct api_stream *s) {
  pthread_mutex_lock(&s->mu);
  s->closed = true;
  pthread_mutex_unlock(&s->mu);
  kick(s->data_fd);
}

bool api_stream_gone(const struct api_stream *s) {
  struct api_stream *m = (struct api_stream *)s;
  pthread_mutex_lock(&m->mu);
  bool g = m->gone;
  pthread_mutex_unlock(&m->mu);
  return g;
}

int api_stream_gone_fd(const struct api_stream *s) { return s->gone_fd; }

/* MHD's content reader: copy what is queued; wait when nothing is. */
static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max) {
  struct api_stream *s = cls;
  (void)pos;
  int idle_ms = 0;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    if (s->head) {
      size_t n = 0;
      while (s->head && n < max) {
        struct chunk *c = s->head;
        size_t take = c->len - c->off;
        if (take > max - n)
          take = max - n;
        memcpy(buf + n, c->data + c->off, take);
        n += take;
        c->off += take;
        if (c->off == c->len) {
          s->head = c->next;
          if (!s->head)
            s->tail = NULL;
          s->queued -= c->len;
          free(c);
        }
      }
      pthread_cond_broadcast(&s->room);
      pthread_mutex_unlock(&s->mu);
      return (ssize_t)n;
    }
    bool closed = s->closed, failed = s->failed;
    pthread_mutex_unlock(&s->mu);
    if (closed)
      return failed ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
    /* Nothing queued: wait for data or a hang-up.  The stop fd is not
     * watched: at a stop the producer is cancelled and closes the stream
     * with its final event. */
    enum api_wait_result w = api_wait_srv(s->srv, s->sock, s->data_fd, 1000, false);
    if (w == API_WAIT_GONE)
      return MHD_CONTENT_READER_END_WITH_ERROR; /* the client went away */
    if (w == API_WAIT_READY) {
      drain(s->data_fd);
      idle_ms = 0;
      continue;
    }
    idle_ms += 1000;
    if (s->fmt == STREAM_SSE && idle_ms >= SSE_HEARTBEAT_MS) {
      idle_ms = 0;
      /* An SSE comment keeps proxies from timing the stream out. */
      static const char hb[] = ":\n\n";
      if (max < sizeof hb - 1)
        continue;
      memcpy(buf, hb, sizeof hb - 1);
      return (ssize_t)(sizeof hb - 1);
    }
  }
}

static void reader_free(void *cls) {
  struct api_stream *s = cls;
  pthread_mutex_lock(&s->mu);
  s->gone = true;
  pthread_cond_broadcast(&s->room);
  pthread_mutex_unlock(&s->mu);
  kick(s->gone_fd);
  api_stream_unref(s);
}

struct MHD_Response *api_stream_response(struct api_stream *s) {
  api_stream_ref(s);
  struct MHD_Response *resp =
      MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, reader, s, reader_free);
  if (!resp) {
    api_stream_unref(s);
    return NULL;
  }
  if (s->fmt == STREAM_SSE) {
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
  } else if (s->fmt == STREAM_NDJSON) {
    MHD_add_response_header(resp, "Content-Type", "application/x-ndjson");
  }
  return resp;
}

/* ---- a raw body produced by a worker thread ------------------------- */

struct produced {
  struct api_server *srv;
  struct api_stream *st;
  api_producer produce;
  void *ctx;
  void (*ctx_free)(void *ctx);
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int refs;
  bool started, finished;
  int rc;
  struct husk_err err;
};

static void produced_unref(struct produced *p) {
  pthread_mutex_lock(&p->mu);
  bool last = --p->refs == 0;
  pthread_mutex_unlock(&p->mu);
  if (!last)
    return;
  api_stream_unref(p->st);
  if (p->ctx_free)
    p->ctx_free(p->ctx);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  free(p);
}

static int produced_out(void *oc, const void *buf, size_t len) {
  struct produced *p = oc;
  pthread_mutex_lock(&p->mu);
  if (!p->started) {
    p->started = true;
    pthread_cond_broadcast(&p->cv);
  }
  pthread_mutex_unlock(&p->mu);
  if (api_stream_push_raw(p->st, buf, len) < 0) {
    errno = ECONNRESET; /* the client went away */
    return -1;
  }
  return 0;
}

static void *produced_worker(void *arg) {
  struct produced *p = arg;
  struct husk_err err = {0};
  int rc = p->produce(p->ctx, produced_out, p, &err);
  pthread_mutex_lock(&p->mu);
  p->finished = true;
  p->rc = rc;
  p->err = err;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  if (rc < 0)
    api_stream_fail(p->st);
  else
    api_stream_close(p->st);
  struct api_server *srv = p->srv;
  produced_unref(p);
  api_worker_leave(srv);
  return NULL;
}

enum MHD_Result api_reply_produced(struct req *r, const char *content_type, api_producer produce,
                                   void *ctx, void (*ctx_free)(void *ctx)) {
  struct produced *p = calloc(1, sizeof *p);
  if (!p) {
    if (ctx_free)
      ctx_free(ctx);
    return api_reply_error(r, 500, "internal_error", "out of memory");
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  p->refs = 1;
  p->srv = r->srv;
  p->produce = produce;
  p->ctx = ctx;
  p->ctx_free = ctx_free;
  p->st = api_stream_new(r, STREAM_RAW);
  if (!p->st) {
    bool busy = errno == EAGAIN;
    produced_unref(p);
    return busy ? api_reply_busy(r) : api_reply_error(r, 500, "internal_error", "out of memory");
  }
  p->refs = 2; /* this handler and the worker */
  if (api_worker_start(r->srv, produced_worker, p) != 0) {
    p->refs = 1;
    produced_unref(p);
    return api_reply_error(r, 503, "unavailable", "cannot start a worker thread");
  }
  /* Errors before the first byte are ordinary HTTP errors. */
  pthread_mutex_lock(&p->mu);
  while (!p->started && !p->finished)
    pthread_cond_wait(&p->cv, &p->mu);
  bool failed = !p->started && p->rc < 0;
  struct husk_err err = p->err;
  pthread_mutex_unlock(&p->mu);
  enum MHD_Result ret;
  if (failed) {
    ret = api_reply_err(r, &err);
  } else {
    struct MHD_Response *resp = api_stream_response(p->st);
    if (resp) {
      MHD_add_response_header(resp, "Content-Type", content_type);
      ret = api_queue(r, 200, resp);
    } else {
      ret = MHD_NO;
    }
  }
  produced_unref(p);
  return ret;
}
