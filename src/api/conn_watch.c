/* The request timeout: a connection must deliver each request -- its line,
 * headers and, unless it is an upload (BODY_STREAM), its body -- within
 * `request_timeout_s` of the connection's start or of the previous reply.
 *
 * libmicrohttpd's own timeout is an idle one: a client sending one byte
 * every minute keeps a connection, and its thread, forever.  Here every
 * connection has an entry (its socket context) with the time its current
 * wait began; a watchdog thread shuts down the socket of one that is over
 * its time.  The connection's own thread then sees the end of the stream
 * and closes it as for any client that went away.
 *
 * The socket is shut down under `lock`, and libmicrohttpd notifies
 * MHD_CONNECTION_NOTIFY_CLOSED (which frees the entry under that lock)
 * before it closes the socket, so the watchdog never touches a descriptor
 * that was closed and reused. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "api/internal.h"
#include "util/clock.h"

struct conn_entry {
  bool used;
  bool timing; /* waiting for a request to arrive */
  bool cut;    /* shut down by the watchdog */
  int fd;
  int64_t since_ms;
};

void api_conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                     enum MHD_ConnectionNotificationCode toe) {
  struct api_server *s = cls;
  struct conn_watch *w = &s->watch;
  pthread_mutex_lock(&w->lock);
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    *socket_context = NULL;
    for (size_t i = 0; i < w->cap; i++) {
      struct conn_entry *e = &w->entries[i];
      if (e->used)
        continue;
      const union MHD_ConnectionInfo *ci =
          MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
      *e = (struct conn_entry){
          .used = true, .timing = true, .fd = ci ? ci->connect_fd : -1, .since_ms = mono_ms()};
      *socket_context = e;
      break;
    }
  } else if (*socket_context) {
    struct conn_entry *e = *socket_context;
    e->used = false;
    *socket_context = NULL;
  }
  pthread_mutex_unlock(&w->lock);
}

static struct conn_entry *entry_of(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

void api_conn_request_in(struct api_server *s, struct MHD_Connection *conn) {
  struct conn_entry *e = entry_of(conn);
  if (!e)
    return;
  pthread_mutex_lock(&s->watch.lock);
  e->timing = false;
  pthread_mutex_unlock(&s->watch.lock);
}

void api_conn_request_done(struct api_server *s, struct MHD_Connection *conn) {
  struct conn_entry *e = entry_of(conn);
  if (!e)
    return;
  pthread_mutex_lock(&s->watch.lock);
  e->timing = true;
  e->since_ms = mono_ms();
  pthread_mutex_unlock(&s->watch.lock);
}

static void *watchdog(void *arg) {
  struct api_server *s = arg;
  struct conn_watch *w = &s->watch;
  int64_t limit = (int64_t)w->timeout_s * 1000;
  /* Checked a few times per timeout: a connection is cut at most a
   * quarter of its timeout late. */
  int64_t step = limit / 4 < 1000 ? limit / 4 : 1000;
  if (step < 50)
    step = 50;
  pthread_mutex_lock(&w->lock);
  while (!w->stop) {
    int64_t now = mono_ms();
    unsigned cut = 0;
    for (size_t i = 0; i < w->cap; i++) {
      struct conn_entry *e = &w->entries[i];
      if (e->used && e->timing && !e->cut && e->fd >= 0 && now - e->since_ms > limit) {
        /* ENOTCONN: the client is gone already; its thread closes it. */
        if (shutdown(e->fd, SHUT_RDWR) == 0 || errno == ENOTCONN)
          e->cut = true;
        cut++;
      }
    }
    if (cut) {
      pthread_mutex_unlock(&w->lock);
      api_log(s, "closed %u connection(s) that did not send a request within %us", cut,
              w->timeout_s);
      pthread_mutex_lock(&w->lock);
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long)(step % 1000) * 1000000;
    ts.tv_sec += step / 1000 + ts.tv_nsec / 1000000000;
    ts.tv_nsec %= 1000000000;
    pthread_cond_timedwait(&w->cond, &w->lock, &ts);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

int api_conn_watch_start(struct api_server *s, size_t cap, unsigned timeout_s) {
  struct conn_watch *w = &s->watch;
  pthread_mutex_init(&w->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&w->cond, &ca);
  pthread_condattr_destroy(&ca);
  w->initialized = true;
  w->timeout_s = timeout_s;
  w->cap = cap;
  w->entries = calloc(cap, sizeof *w->entries);
  if (!w->entries)
    return ENOMEM;
  int e = pthread_create(&w->thread, NULL, watchdog, s);
  if (e == 0)
    w->running = true;
  return e;
}

void api_conn_watch_stop(struct api_server *s) {
  struct conn_watch *w = &s->watch;
  if (!w->initialized)
    return;
  if (w->running) {
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    w->running = false;
  }
}

void api_conn_watch_free(struct api_server *s) {
  struct conn_watch *w = &s->watch;
  if (!w->initialized)
    return;
  api_conn_watch_stop(s);
  free(w->entries);
  w->entries = NULL;
  pthread_mutex_destroy(&w->lock);
  pthread_cond_destroy(&w->cond);
  w->initialized = false;
}
