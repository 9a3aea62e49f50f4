/* The request timeout's watchdog (front/conn_watch.h).
 *
 * The socket is shut down under `lock`, and libmicrohttpd notifies
 * MHD_CONNECTION_NOTIFY_CLOSED (which frees the entry under that lock)
 * before it closes the socket, so the watchdog never touches a descriptor
 * that was closed and reused. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "util/clock.h"
#include "front/conn_watch.h"

struct conn_entry {
  bool used;
  bool timing; /* waiting for a request to arrive */
  bool cut;    /* shut down by the watchdog */
  int fd;
  int64_t since_ms;
  /* A descriptor kept with the connection between its requests
   * (conn_watch_keep), -1 if none. */
  int kept_fd;
  char kept_tag[CONN_WATCH_TAG_MAX];
  void (*kept_close)(void *ctx, int fd);
  void *kept_ctx;
};

void conn_watch_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                       enum MHD_ConnectionNotificationCode toe) {
  struct conn_watch *w = cls;
  int kept_fd = -1;
  void (*kept_close)(void *ctx, int fd) = NULL;
  void *kept_ctx = NULL;
  pthread_mutex_lock(&w->lock);
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    *socket_context = NULL;
    for (size_t i = 0; i < w->cap; i++) {
      struct conn_entry *e = &w->entries[i];
      if (e->used)
        continue;
      const union MHD_ConnectionInfo *ci =
          MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
      *e = (struct conn_entry){.used = true,
                               .timing = true,
                               .fd = ci ? ci->connect_fd : -1,
                               .since_ms = mono_ms(),
                               .kept_fd = -1};
      *socket_context = e;
      break;
    }
  } else if (*socket_context) {
    struct conn_entry *e = *socket_context;
    e->used = false;
    *socket_context = NULL;
    kept_fd = e->kept_fd;
    kept_close = e->kept_close;
    kept_ctx = e->kept_ctx;
    e->kept_fd = -1;
  }
  pthread_mutex_unlock(&w->lock);
  if (kept_fd >= 0 && kept_close)
    kept_close(kept_ctx, kept_fd);
}

static struct conn_entry *entry_of(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

void conn_watch_request_in(struct conn_watch *w, struct MHD_Connection *conn) {
  struct conn_entry *e = entry_of(conn);
  if (!e)
    return;
  pthread_mutex_lock(&w->lock);
  e->timing = false;
  pthread_mutex_unlock(&w->lock);
}

void conn_watch_request_done(struct conn_watch *w, struct MHD_Connection *conn) {
  struct conn_entry *e = entry_of(conn);
  if (!e)
    return;
  pthread_mutex_lock(&w->lock);
  e->timing = true;
  e->since_ms = mono_ms();
  pthread_mutex_unlock(&w->lock);
}

void conn_watch_keep(struct conn_watch *w, struct MHD_Connection *conn, int fd, const char *tag,
                     void (*close_fn)(void *ctx, int fd), void *ctx) {
  struct conn_entry *e = entry_of(conn);
  int old_fd = -1;
  void (*old_close)(void *ctx, int fd) = NULL;
  void *old_ctx = NULL;
  pthread_mutex_lock(&w->lock);
  if (e && e->used) {
    old_fd = e->kept_fd;
    old_close = e->kept_close;
    old_ctx = e->kept_ctx;
    e->kept_fd = fd;
    snprintf(e->kept_tag, sizeof e->kept_tag, "%s", tag);
    e->kept_close = close_fn;
    e->kept_ctx = ctx;
    fd = -1;
  }
  pthread_mutex_unlock(&w->lock);
  if (old_fd >= 0 && old_close)
    old_close(old_ctx, old_fd);
  if (fd >= 0) /* no entry to keep it with */
    close_fn(ctx, fd);
}

int conn_watch_take(struct conn_watch *w, struct MHD_Connection *conn, const char *tag) {
  struct conn_entry *e = entry_of(conn);
  int fd = -1, other = -1;
  void (*close_fn)(void *ctx, int fd) = NULL;
  void *ctx = NULL;
  pthread_mutex_lock(&w->lock);
  if (e && e->used && e->kept_fd >= 0) {
    if (!strcmp(e->kept_tag, tag))
      fd = e->kept_fd;
    else
      other = e->kept_fd;
    close_fn = e->kept_close;
    ctx = e->kept_ctx;
    e->kept_fd = -1;
  }
  pthread_mutex_unlock(&w->lock);
  if (other >= 0 && close_fn)
    close_fn(ctx, other);
  return fd;
}

static void *watchdog(void *arg) {
  struct conn_watch *w = arg;
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
      if (w->on_cut)
        w->on_cut(w->ctx, cut, w->timeout_s);
      pthread_mutex_lock(&w->lock);
    }
    struct timespec ts = clock_after_ms(CLOCK_MONOTONIC, step);
    pthread_cond_timedwait(&w->cond, &w->lock, &ts);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

int conn_watch_start(struct conn_watch *w, size_t cap, unsigned timeout_s,
                     void (*on_cut)(void *ctx, unsigned cut, unsigned timeout_s), void *ctx) {
  pthread_mutex_init(&w->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&w->cond, &ca);
  pthread_condattr_destroy(&ca);
  w->initialized = true;
  w->timeout_s = timeout_s;
  w->on_cut = on_cut;
  w->ctx = ctx;
  w->cap = cap;
  w->entries = calloc(cap, sizeof *w->entries);
  if (!w->entries)
    return ENOMEM;
  int e = pthread_create(&w->thread, NULL, watchdog, w);
  if (e == 0)
    w->running = true;
  return e;
}

void conn_watch_stop(struct conn_watch *w) {
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

void conn_watch_free(struct conn_watch *w) {
  if (!w->initialized)
    return;
  conn_watch_stop(w);
  free(w->entries);
  w->entries = NULL;
  pthread_mutex_destroy(&w->lock);
  pthread_cond_destroy(&w->cond);
  w->initialized = false;
}
