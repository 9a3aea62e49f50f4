/* The stdio transport: newline-delimited JSON-RPC on a pair of fds.
 *
 * The reader (the calling thread) splits stdin into lines; each request
 * runs in a detached thread of its own, so notifications/cancelled and
 * ping are read while a tool call waits.  Every line written holds exactly
 * one message and is written with one write() under a lock: stdout carries
 * nothing else (the binary moved fd 1 to stderr before anything ran). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "mcp/internal.h"
#include "util/cleanup.h"
#include "util/clock.h"
#include "util/fileio.h"

/* Calls in flight at once; more are refused with an error. */
#define STDIO_MAX_CALLS 64
/* At EOF, how long calls in flight get to finish, and then to stop. */
#define STDIO_DRAIN_MS 5000
#define STDIO_STOP_MS 2000

struct stdio_srv {
  int out_fd;
  pthread_mutex_t out_lock;
  mcp_stdio_handler handle;
  void *hctx;
  struct mcp_caller caller; /* notify and cancel_fd set here */
  int stop_fd;              /* readable at EOF: calls stop waiting */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  unsigned running;
  char *ids[STDIO_MAX_CALLS]; /* the ids of the calls in flight, as JSON text */
};

static void emit(struct stdio_srv *s, json_t *msg) {
  char *text = msg ? mcp_dump(msg) : NULL;
  json_decref(msg);
  if (!text)
    return;
  size_t n = strlen(text);
  char *line = realloc(text, n + 2);
  if (!line) {
    free(text);
    return;
  }
  line[n] = '\n';
  line[n + 1] = '\0';
  pthread_mutex_lock(&s->out_lock);
  /* A closed stdout (client gone) is not an error worth more than this. */
  if (write_all(s->out_fd, line, n + 1) < 0) {
  }
  pthread_mutex_unlock(&s->out_lock);
  free(line);
}

static void notify(void *ctx, json_t *msg) { emit(ctx, msg); }

struct job {
  struct stdio_srv *s;
  struct mcp_msg msg;
  int slot; /* in s->ids */
};

static void *run_request(void *arg) {
  struct job *j = arg;
  struct stdio_srv *s = j->s;
  json_t *reply = s->handle(s->hctx, &j->msg, &s->caller);
  /* The id is free again before its reply is out: a client may reuse it as
   * soon as it has the answer. */
  pthread_mutex_lock(&s->lock);
  free(s->ids[j->slot]);
  s->ids[j->slot] = NULL;
  pthread_mutex_unlock(&s->lock);
  emit(s, reply);
  mcp_msg_free(&j->msg);
  free(j);
  pthread_mutex_lock(&s->lock);
  s->running--;
  pthread_cond_broadcast(&s->cond);
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

static void dispatch(struct stdio_srv *s, const char *line, size_t len) {
  struct mcp_msg msg;
  json_t *bad = NULL;
  if (mcp_parse(line, len, &msg, &bad) < 0) {
    emit(s, bad);
    return;
  }
  if (msg.kind != MCP_REQUEST) {
    /* Notifications (cancellation) act at once and are never answered. */
    emit(s, s->handle(s->hctx, &msg, &s->caller));
    mcp_msg_free(&msg);
    return;
  }
  struct job *j = calloc(1, sizeof *j);
  char *id = mcp_dump(msg.id);
  /* JSON-RPC: an id is never reused while its request is in flight.  A
   * second one would make its replies and a cancellation ambiguous, so it
   * is refused, and the first goes on. */
  bool dup = false, room = false;
  pthread_mutex_lock(&s->lock);
  for (int i = 0; id && i < STDIO_MAX_CALLS; i++)
    if (s->ids[i] && !strcmp(s->ids[i], id))
      dup = true;
  if (!dup && j && id && s->running < STDIO_MAX_CALLS)
    for (int i = 0; i < STDIO_MAX_CALLS; i++)
      if (!s->ids[i]) {
        s->ids[i] = id;
        j->slot = i;
        room = true;
        s->running++;
        break;
      }
  pthread_mutex_unlock(&s->lock);
  if (!room) {
    emit(s, dup ? mcp_error(msg.id, MCP_INVALID_REQUEST,
                            "Invalid Request: this id is already used by a request in flight", NULL)
                : mcp_error(msg.id, MCP_INTERNAL_ERROR, "Internal error: too many calls in flight",
                            NULL));
    mcp_msg_free(&msg);
    free(id);
    free(j);
    return;
  }
  j->s = s;
  j->msg = msg;
  pthread_t t;
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&t, &at, run_request, j);
  pthread_attr_destroy(&at);
  if (rc != 0) {
    /* No thread: answer inline rather than not at all. */
    run_request(j);
  }
}

static void wait_idle(struct stdio_srv *s, int ms) {
  struct timespec ts = clock_after_ms(CLOCK_REALTIME, ms);
  pthread_mutex_lock(&s->lock);
  while (s->running > 0)
    if (pthread_cond_timedwait(&s->cond, &s->lock, &ts) == ETIMEDOUT)
      break;
  pthread_mutex_unlock(&s->lock);
}

int mcp_stdio_serve(int in_fd, int out_fd, mcp_stdio_handler h, void *hctx,
                    const struct mcp_caller *caller, struct husk_err *err) {
  /* On the heap: at a stop, calls that do not finish in time keep using it
   * while the process exits. */
  struct stdio_srv *s = calloc(1, sizeof *s);
  if (!s)
    return husk_error(err, ENOMEM, "stdio");
  s->out_fd = out_fd;
  s->handle = h;
  s->hctx = hctx;
  s->caller = *caller;
  s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->stop_fd < 0) {
    free(s);
    return husk_error(err, errno, "eventfd");
  }
  pthread_mutex_init(&s->out_lock, NULL);
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->cond, NULL);
  s->caller.notify = notify;
  s->caller.notify_ctx = s;
  s->caller.cancel_fd = s->stop_fd;
  s->caller.gone_cancels = false; /* a client restarting must not kill its jobs */
  s->caller.lasting = true;       /* stdout stays ours until EOF */

  size_t cap = 65536, len = 0;
  char *buf = malloc(cap);
  bool skipping = false; /* inside a line over MCP_MESSAGE_MAX */
  int rc = 0;
  if (!buf)
    rc = husk_error(err, ENOMEM, "stdio buffer");
  while (buf) {
    if (len == cap) {
      size_t ncap = cap * 2 > MCP_MESSAGE_MAX + 1 ? MCP_MESSAGE_MAX + 1 : cap * 2;
      char *nb = ncap > cap ? realloc(buf, ncap) : NULL;
      if (!nb) {
        /* The line is too long: refuse it, drop it up to its newline. */
        emit(s, mcp_error(NULL, MCP_INVALID_REQUEST, "Invalid Request: message too large", NULL));
        skipping = true;
        len = 0;
      } else {
        buf = nb;
        cap = ncap;
      }
    }
    ssize_t n = read(in_fd, buf + len, cap - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      rc = husk_error(err, errno, "cannot read stdin");
      break;
    }
    if (n == 0)
      break; /* EOF: the client is done */
    size_t start = 0, end = len + (size_t)n;
    for (size_t i = len; i < end; i++) {
      if (buf[i] != '\n')
        continue;
      if (skipping) {
        skipping = false;
      } else {
        size_t l = i - start;
        if (l > 0 && buf[start + l - 1] == '\r')
          l--;
        if (l > 0)
          dispatch(s, buf + start, l);
      }
      start = i + 1;
    }
    if (skipping) {
      len = 0;
    } else {
      memmove(buf, buf + start, end - start);
      len = end - start;
    }
  }
  if (buf && len > 0 && !skipping)
    dispatch(s, buf, len); /* a last line without its newline */
  free(buf);
  /* Calls in flight get a few seconds to finish and answer; then they are
   * told to stop waiting (their commands go on as jobs), and get a moment
   * to wind down. */
  wait_idle(s, STDIO_DRAIN_MS);
  uint64_t one = 1;
  if (write(s->stop_fd, &one, sizeof one) < 0) {
  }
  wait_idle(s, STDIO_STOP_MS);
  pthread_mutex_lock(&s->lock);
  bool idle = s->running == 0;
  pthread_mutex_unlock(&s->lock);
  /* Nothing is notified once the client has left (subscriptions end);
   * unless a notification is stuck writing to a client that stopped
   * reading, which then still uses `s`. */
  if (s->caller.gone && !s->caller.gone(s->caller.gone_ctx, &s->caller))
    idle = false;
  if (idle) {
    close(s->stop_fd);
    pthread_mutex_destroy(&s->out_lock);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s);
  }
  /* else: threads still use `s`; the process exits right after. */
  return rc < 0 ? rc : idle ? 0 : 1;
}
