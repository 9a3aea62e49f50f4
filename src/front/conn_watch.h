/* The request timeout of a libmicrohttpd front (the HTTP API, S3): a
 * connection must deliver each request -- its line, headers and, unless
 * the front exempts it (an upload), its body -- within `timeout_s` of the
 * connection's start or of the previous reply.
 *
 * libmicrohttpd's own timeout is an idle one: a client sending one byte
 * every minute keeps a connection, and its thread, forever.  Here every
 * connection has an entry (its socket context) with the time its current
 * wait began; a watchdog thread shuts down the socket of one that is over
 * its time.  The connection's own thread then sees the end of the stream
 * and closes it as for any client that went away. */
#ifndef HUSK_FRONT_CONN_WATCH_H
#define HUSK_FRONT_CONN_WATCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <microhttpd.h>

struct conn_entry;
struct conn_watch {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct conn_entry *entries; /* one per connection slot */
  size_t cap;
  unsigned timeout_s;
  pthread_t thread;
  bool initialized, running, stop;
  /* Told how many connections a pass cut (called without `lock`). */
  void (*on_cut)(void *ctx, unsigned cut, unsigned timeout_s);
  void *ctx;
};

/* Start the watchdog over `cap` connection slots; 0 or an errno.  After
 * a failure conn_watch_free still has to be called. */
int conn_watch_start(struct conn_watch *w, size_t cap, unsigned timeout_s,
                     void (*on_cut)(void *ctx, unsigned cut, unsigned timeout_s), void *ctx);
/* Joins the watchdog; the entries stay valid (connections may live on). */
void conn_watch_stop(struct conn_watch *w);
void conn_watch_free(struct conn_watch *w);

/* MHD_OPTION_NOTIFY_CONNECTION with the conn_watch as its closure: track
 * each connection from its start. */
void conn_watch_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                       enum MHD_ConnectionNotificationCode toe);
/* The request the connection was waiting for is in (or is an upload,
 * whose body may take as long as it needs): stop its clock. */
void conn_watch_request_in(struct conn_watch *w, struct MHD_Connection *conn);
/* Its reply is done: the wait for the next request starts now. */
void conn_watch_request_done(struct conn_watch *w, struct MHD_Connection *conn);

/* A descriptor the front keeps with a connection between its requests
 * (the API: a preview's connection to a box, for the same client's next
 * request through the same preview), named by `tag`.  close_fn(ctx, fd)
 * closes it when the connection closes, when another is kept in its
 * place, or at once if the connection has no entry. */
#define CONN_WATCH_TAG_MAX 40
void conn_watch_keep(struct conn_watch *w, struct MHD_Connection *conn, int fd, const char *tag,
                     void (*close_fn)(void *ctx, int fd), void *ctx);
/* The descriptor kept with the connection under `tag`, now the caller's,
 * or -1; one kept under another tag is closed. */
int conn_watch_take(struct conn_watch *w, struct MHD_Connection *conn, const char *tag);

#endif
