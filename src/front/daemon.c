/* The libmicrohttpd daemon of an HTTP front (front/daemon.h). */
#define _GNU_SOURCE
#include "front/daemon.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "front/listen.h"
#include "util/clock.h"

static void front_log(struct front_daemon *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void front_log(struct front_daemon *f, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  husk_vlog(f->cfg.log, f->cfg.log_ctx, fmt, ap);
  va_end(ap);
}

/* libmicrohttpd's own messages, one line each. */
static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void mhd_log(void *cls, const char *fmt, va_list ap) {
  char line[1024];
  vsnprintf(line, sizeof line, fmt, ap);
  size_t n = strlen(line);
  while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
    line[--n] = '\0';
  front_log(cls, "http: %s", line);
}

static void log_cut(void *ctx, unsigned cut, unsigned timeout_s) {
  struct front_daemon *f = ctx;
  front_log(f, "closed %u %s that did not send a request within %us", cut, f->cfg.conn_what,
            timeout_s);
}

int front_init(struct front_daemon *f, const struct front_config *cfg, struct husk_err *err) {
  *f = (struct front_daemon){.cfg = *cfg, .lsock = MHD_INVALID_SOCKET};
  socklen_t len;
  if (front_parse_listen(cfg->listen, &f->addr, &len, err) < 0)
    return -1;
  if (!f->cfg.max_connections)
    f->cfg.max_connections = FRONT_MAX_CONNECTIONS;
  if (!f->cfg.idle_timeout_s)
    f->cfg.idle_timeout_s = FRONT_IDLE_TIMEOUT_S;
  if (!f->cfg.request_timeout_s)
    f->cfg.request_timeout_s = FRONT_REQUEST_TIMEOUT_S;
  pthread_mutex_init(&f->lock, NULL);
  pthread_cond_init(&f->cond, NULL);
  f->initialized = true;
  int e = tenant_loads_init(&f->loads, f->cfg.max_connections);
  if (e == 0)
    e = conn_watch_start(&f->watch, f->cfg.max_connections, f->cfg.request_timeout_s, log_cut, f);
  if (e != 0)
    return husk_error(err, e, "%s", f->cfg.setup_what);
  return 0;
}

int front_listen(struct front_daemon *f, struct husk_err *err) {
  const struct front_config *c = &f->cfg;
  /* poll(), not select(): every box holds a few fds in the daemon, and with
   * select() a connection whose fd is >= FD_SETSIZE (1024) is refused, so
   * past ~145 live boxes no new client could reach the front. */
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
                   MHD_USE_ERROR_LOG | MHD_USE_ITC;
  if (c->allow_upgrade)
    flags |= MHD_ALLOW_UPGRADE;
  if (f->addr.ss_family == AF_INET6)
    flags |= MHD_USE_IPv6;
  /* Options that take a callback and its closure carry the callback as an
   * integer (MHD_OPTION_ARRAY's convention). */
  struct MHD_OptionItem opts[16] = {
      {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, f},
      {MHD_OPTION_SOCK_ADDR, 0, &f->addr},
      {MHD_OPTION_CONNECTION_LIMIT, c->max_connections, NULL},
      {MHD_OPTION_PER_IP_CONNECTION_LIMIT, c->max_per_ip, NULL},
      {MHD_OPTION_CONNECTION_MEMORY_LIMIT, FRONT_CONN_MEMORY, NULL},
      {MHD_OPTION_CONNECTION_TIMEOUT, c->idle_timeout_s, NULL},
      {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)c->on_completed, c->cls},
      {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)conn_watch_notify, &f->watch},
      {MHD_OPTION_LISTEN_BACKLOG_SIZE, FRONT_LISTEN_BACKLOG, NULL},
  };
  size_t n = 9;
  if (c->on_uri)
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)c->on_uri, c->cls};
  if (c->strict)
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_STRICT_FOR_CLIENT, 1, NULL};
  opts[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
  f->daemon = MHD_start_daemon(flags, 0, NULL, NULL, c->on_request, c->cls, MHD_OPTION_ARRAY, opts,
                               MHD_OPTION_END);
  if (!f->daemon)
    return husk_error(err, errno ? errno : EADDRINUSE, "cannot listen on `%s`", c->listen);
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(f->daemon, MHD_DAEMON_INFO_BIND_PORT);
  f->port = di ? di->port : 0;
  return 0;
}

unsigned front_tenant_share(const struct front_daemon *f, unsigned configured, unsigned divisor) {
  if (configured)
    return configured;
  unsigned share = f->cfg.max_connections / divisor;
  return share ? share : 1;
}

void front_request_start(struct front_daemon *f) {
  pthread_mutex_lock(&f->lock);
  f->inflight++;
  pthread_mutex_unlock(&f->lock);
}

void front_request_done(struct front_daemon *f, struct MHD_Connection *conn) {
  conn_watch_request_done(&f->watch, conn);
  pthread_mutex_lock(&f->lock);
  f->inflight--;
  pthread_cond_broadcast(&f->cond);
  pthread_mutex_unlock(&f->lock);
}

void front_log_request(struct front_daemon *f, const char *method, const char *path, int status,
                       int64_t t0_ms, const char *who, enum MHD_RequestTerminationCode toe) {
  if (f->cfg.log_requests)
    front_log(f, "%s %s %d %lldms %s%s", method, path, status, (long long)(mono_ms() - t0_ms), who,
              toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection ended early)");
}

static enum MHD_Result nul_check(void *cls, enum MHD_ValueKind kind, const char *key,
                                 size_t key_size, const char *value, size_t value_size) {
  bool *bad = cls;
  (void)kind;
  if (strlen(key) != key_size || (value && strlen(value) != value_size)) {
    *bad = true;
    return MHD_NO;
  }
  return MHD_YES;
}

bool front_has_nul(struct MHD_Connection *conn) {
  bool bad = false;
  MHD_get_connection_values_n(conn, MHD_GET_ARGUMENT_KIND | MHD_HEADER_KIND, nul_check, &bad);
  return bad;
}

unsigned front_wait_idle(struct front_daemon *f, unsigned ms, const unsigned *also) {
  int64_t deadline = mono_ms() + ms;
  pthread_mutex_lock(&f->lock);
  while (f->inflight > 0 || (also && *also > 0)) {
    int64_t left = deadline - mono_ms();
    if (left <= 0)
      break;
    struct timespec ts = clock_after_ms(CLOCK_REALTIME, left < 100 ? left : 100);
    pthread_cond_timedwait(&f->cond, &f->lock, &ts);
  }
  unsigned n = f->inflight;
  pthread_mutex_unlock(&f->lock);
  return n;
}

unsigned front_quiesce(struct front_daemon *f, unsigned grace_ms, const unsigned *also) {
  /* The listening socket is closed after the daemon stops, as
   * MHD_quiesce_daemon asks. */
  f->lsock = MHD_quiesce_daemon(f->daemon);
  return front_wait_idle(f, grace_ms, also);
}

void front_close(struct front_daemon *f) {
  conn_watch_stop(&f->watch);
  if (f->daemon)
    MHD_stop_daemon(f->daemon);
  f->daemon = NULL;
  if (f->lsock != MHD_INVALID_SOCKET)
    close(f->lsock);
  f->lsock = MHD_INVALID_SOCKET;
}

void front_free(struct front_daemon *f) {
  if (f->daemon)
    front_close(f);
  conn_watch_free(&f->watch);
  tenant_loads_free(&f->loads);
  if (f->initialized) {
    pthread_mutex_destroy(&f->lock);
    pthread_cond_destroy(&f->cond);
    f->initialized = false;
  }
}
