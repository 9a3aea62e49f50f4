/* The daemon: libmicrohttpd setup, the routing table, the life of one
 * request (route → authenticate → body → handler → audit), graceful stop. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "api/internal.h"
#include "api/e2b.h"
#include "api/routes_egress.h"
#include "front/listen.h"
#include "husk/husk.h"
#include "util/cleanup.h"
#include "util/clock.h"

/* At a stop, how long cancelled requests get to send their last words. */
#define API_CANCEL_WAIT_MS 3000
/* After refusing a body, how much more of it is read (and dropped) so
 * that the client gets the reply. */
#define API_DRAIN_MAX (64ULL * 1024 * 1024)

/* ---- the routing table ---------------------------------------------- */

#define SB "/v1/sandboxes/{}"
const struct route api_routes[] = {
    {"GET", "/v1/health", AUTH_NONE, BODY_NONE, NULL, h_health, NULL, NULL, NULL, 0},

    {"POST", "/v1/tenants", AUTH_ADMIN, BODY_JSON, "tenant.create", h_tenant_create, NULL, NULL, NULL, 0},
    {"GET", "/v1/tenants", AUTH_ADMIN, BODY_NONE, NULL, h_tenant_list, NULL, NULL, NULL, 0},
    {"GET", "/v1/tenants/{}", AUTH_ADMIN, BODY_NONE, NULL, h_tenant_get, NULL, NULL, NULL, 0},
    {"PUT", "/v1/tenants/{}/quota", AUTH_ADMIN, BODY_JSON, "tenant.quota", h_tenant_quota, NULL, NULL, NULL, 0},
    {"POST", "/v1/tenants/{}/keys", AUTH_ADMIN, BODY_JSON, "key.create", h_key_create, NULL, NULL, NULL, 0},
    {"GET", "/v1/tenants/{}/keys", AUTH_ADMIN, BODY_NONE, NULL, h_key_list, NULL, NULL, NULL, 0},
    {"DELETE", "/v1/tenants/{}/keys/{}", AUTH_ADMIN, BODY_NONE, "key.revoke", h_key_revoke, NULL, NULL, NULL, 0},
    {"DELETE", "/v1/tenants/{}", AUTH_ADMIN, BODY_NONE, "tenant.delete", h_tenant_delete, NULL, NULL, NULL, 0},
    {"GET", "/v1/tenants/{}/s3-keys", AUTH_ADMIN, BODY_NONE, NULL, h_admin_s3_key_list, NULL, NULL, NULL, 0},
    {"DELETE", "/v1/tenants/{}/s3-keys/{}", AUTH_ADMIN, BODY_NONE, "s3_key.revoke", h_admin_s3_key_revoke,
     NULL, NULL, NULL, 0},

    /* Users of a tenant (routes_users.c): the tenant's key or a token with
     * `users`; the admin key for any tenant. */
    {"POST", "/v1/users", AUTH_TENANT, BODY_JSON, "user.create", h_user_create, NULL, NULL, NULL,
     AUTH_SCOPE_USERS},
    {"GET", "/v1/users", AUTH_TENANT, BODY_NONE, NULL, h_user_list, NULL, NULL, NULL, AUTH_SCOPE_USERS},
    {"GET", "/v1/users/{}", AUTH_TENANT, BODY_NONE, NULL, h_user_get, NULL, NULL, NULL, AUTH_SCOPE_USERS},
    {"PATCH", "/v1/users/{}", AUTH_TENANT, BODY_JSON, "user.update", h_user_update, NULL, NULL, NULL,
     AUTH_SCOPE_USERS},
    {"DELETE", "/v1/users/{}", AUTH_TENANT, BODY_NONE, "user.delete", h_user_delete, NULL, NULL, NULL,
     AUTH_SCOPE_USERS},
    {"POST", "/v1/tenants/{}/users", AUTH_ADMIN, BODY_JSON, "user.create", h_user_create, NULL, NULL,
     NULL, 0},
    {"GET", "/v1/tenants/{}/users", AUTH_ADMIN, BODY_NONE, NULL, h_user_list, NULL, NULL, NULL, 0},
    {"GET", "/v1/tenants/{}/users/{}", AUTH_ADMIN, BODY_NONE, NULL, h_user_get, NULL, NULL, NULL, 0},
    {"PATCH", "/v1/tenants/{}/users/{}", AUTH_ADMIN, BODY_JSON, "user.update", h_user_update, NULL,
     NULL, NULL, 0},
    {"DELETE", "/v1/tenants/{}/users/{}", AUTH_ADMIN, BODY_NONE, "user.delete", h_user_delete, NULL,
     NULL, NULL, 0},
    /* A tenant's single sign-on provider (routes_oidc.c, docs/oauth.md). */
    {"PUT", "/v1/tenants/{}/oidc", AUTH_ADMIN, BODY_JSON, "oidc.configure", h_oidc_put, NULL, NULL,
     NULL, 0},
    {"GET", "/v1/tenants/{}/oidc", AUTH_ADMIN, BODY_NONE, NULL, h_oidc_get, NULL, NULL, NULL, 0},
    {"DELETE", "/v1/tenants/{}/oidc", AUTH_ADMIN, BODY_NONE, "oidc.delete", h_oidc_delete, NULL,
     NULL, NULL, 0},
    /* The OAuth 2.1 authorization server (routes_oauth.c, docs/oauth.md):
     * public; each endpoint authenticates what it needs itself. */
    {"GET", "/.well-known/oauth-authorization-server", AUTH_NONE, BODY_NONE, NULL, h_oauth_as_meta,
     NULL, NULL, NULL, 0},
    {"GET", "/.well-known/oauth-protected-resource/mcp", AUTH_NONE, BODY_NONE, NULL,
     h_oauth_pr_meta_mcp, NULL, NULL, NULL, 0},
    {"GET", "/.well-known/oauth-protected-resource", AUTH_NONE, BODY_NONE, NULL, h_oauth_pr_meta_v1,
     NULL, NULL, NULL, 0},
    {"GET", "/.well-known/oauth-protected-resource/v1", AUTH_NONE, BODY_NONE, NULL,
     h_oauth_pr_meta_v1, NULL, NULL, NULL, 0},
    {"POST", "/oauth/register", AUTH_NONE, BODY_JSON, NULL, h_oauth_register, NULL, NULL, NULL, 0},
    {"GET", "/oauth/authorize", AUTH_NONE, BODY_NONE, NULL, h_oauth_authorize_get, NULL, NULL, NULL, 0},
    {"POST", "/oauth/authorize", AUTH_NONE, BODY_FORM, NULL, h_oauth_authorize_post, NULL, NULL, NULL,
     0},
    {"POST", "/oauth/token", AUTH_NONE, BODY_FORM, NULL, h_oauth_token, NULL, NULL, NULL, 0},
    {"POST", "/oauth/revoke", AUTH_NONE, BODY_FORM, NULL, h_oauth_revoke, NULL, NULL, NULL, 0},
    /* The provider's redirect back, and the consent page's form
     * (routes_oidc.c). */
    {"GET", "/oauth/callback/{}", AUTH_NONE, BODY_NONE, NULL, h_oauth_callback_get, NULL, NULL,
     NULL, 0},
    {"POST", "/oauth/callback", AUTH_NONE, BODY_FORM, NULL, h_oauth_callback_post, NULL, NULL, NULL,
     0},
    {"GET", "/oauth/style.css", AUTH_NONE, BODY_NONE, NULL, h_oauth_style, NULL, NULL, NULL, 0},

    {"GET", "/v1/pool", AUTH_ADMIN, BODY_NONE, NULL, h_pool, NULL, NULL, NULL, 0},
    {"GET", "/v1/audit", AUTH_ANY, BODY_NONE, NULL, h_audit_list, NULL, NULL, NULL, 0},

    {"POST", "/v1/sandboxes", AUTH_TENANT, BODY_JSON, "sandbox.create", h_box_create, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"GET", "/v1/sandboxes", AUTH_TENANT, BODY_NONE, NULL, h_box_list, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"GET", SB, AUTH_TENANT, BODY_NONE, NULL, h_box_get, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"DELETE", SB, AUTH_TENANT, BODY_NONE, "sandbox.delete", h_box_delete, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"POST", SB "/timeout", AUTH_TENANT, BODY_JSON, "sandbox.timeout", h_box_timeout, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"GET", SB "/metrics", AUTH_TENANT, BODY_NONE, NULL, h_box_metrics, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"POST", SB "/pause", AUTH_TENANT, BODY_JSON, "sandbox.pause", h_box_pause, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"POST", SB "/resume", AUTH_TENANT, BODY_NONE, "sandbox.resume", h_box_resume, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"POST", SB "/fetch", AUTH_TENANT, BODY_JSON, "sandbox.fetch", h_box_fetch, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    /* Preview URLs: routes_previews.c (the proxy: preview_proxy.c) */
    {"POST", SB "/ports/{}/previews", AUTH_TENANT, BODY_JSON, "preview.create", h_preview_create,
     NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"GET", SB "/previews", AUTH_TENANT, BODY_NONE, NULL, h_preview_list, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"GET", SB "/previews/{}", AUTH_TENANT, BODY_NONE, NULL, h_preview_get, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"DELETE", SB "/previews/{}", AUTH_TENANT, BODY_NONE, "preview.revoke", h_preview_revoke, NULL,
     NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"GET", SB "/previews/{}/access", AUTH_TENANT, BODY_NONE, NULL, h_preview_access, NULL, NULL,
     NULL, AUTH_SCOPE_SANDBOX_READ},
    /* Volumes: routes_volumes.c */
    {"POST", "/v1/volumes", AUTH_TENANT, BODY_JSON, "volume.create", h_volume_create, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"GET", "/v1/volumes", AUTH_TENANT, BODY_NONE, NULL, h_volume_list, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"GET", "/v1/volumes/{}", AUTH_TENANT, BODY_NONE, NULL, h_volume_get, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"DELETE", "/v1/volumes/{}", AUTH_TENANT, BODY_NONE, "volume.delete", h_volume_delete, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    /* Snapshots: routes_snapshots.c */
    {"POST", SB "/snapshots", AUTH_TENANT, BODY_JSON, "snapshot.create", h_snapshot_create, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"GET", "/v1/snapshots", AUTH_TENANT, BODY_NONE, NULL, h_snapshot_list, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"GET", "/v1/snapshots/{}", AUTH_TENANT, BODY_NONE, NULL, h_snapshot_get, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"DELETE", "/v1/snapshots/{}", AUTH_TENANT, BODY_NONE, "snapshot.delete", h_snapshot_delete, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},

    {"POST", SB "/exec", AUTH_TENANT, BODY_JSON, "sandbox.exec", h_exec, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"GET", SB "/processes", AUTH_TENANT, BODY_NONE, NULL, h_proc_list, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"GET", SB "/processes/{}", AUTH_TENANT, BODY_NONE, NULL, h_proc_get, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"DELETE", SB "/processes/{}", AUTH_TENANT, BODY_NONE, "process.kill", h_proc_kill, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"POST", SB "/processes/{}/signal", AUTH_TENANT, BODY_JSON, "process.signal", h_proc_signal, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"POST", SB "/processes/{}/stdin", AUTH_TENANT, BODY_STREAM, "process.stdin", h_proc_stdin,
     h_proc_stdin_begin, h_proc_stdin_upload, h_proc_stdin_cleanup, AUTH_SCOPE_SANDBOX},
    {"GET", SB "/processes/{}/output", AUTH_TENANT, BODY_NONE, NULL, h_proc_output, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    /* Code contexts: routes_contexts.c */
    {"POST", SB "/contexts", AUTH_TENANT, BODY_JSON, "context.create", h_ctx_create, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"GET", SB "/contexts", AUTH_TENANT, BODY_NONE, NULL, h_ctx_list, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"GET", SB "/contexts/{}", AUTH_TENANT, BODY_NONE, NULL, h_ctx_get, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"DELETE", SB "/contexts/{}", AUTH_TENANT, BODY_NONE, "context.delete", h_ctx_delete, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"POST", SB "/contexts/{}/restart", AUTH_TENANT, BODY_NONE, "context.restart", h_ctx_restart, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"POST", SB "/contexts/{}/interrupt", AUTH_TENANT, BODY_NONE, "context.interrupt", h_ctx_interrupt, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"POST", SB "/contexts/{}/execute", AUTH_TENANT, BODY_JSON, "context.execute", h_ctx_execute, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},

    {"GET", SB "/files", AUTH_TENANT, BODY_NONE, NULL, h_file_get, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"PUT", SB "/files", AUTH_TENANT, BODY_STREAM, "files.write", h_file_put, h_file_put_begin,
     h_file_put_upload, h_file_put_cleanup, AUTH_SCOPE_SANDBOX},
    {"DELETE", SB "/files", AUTH_TENANT, BODY_NONE, "files.remove", h_file_delete, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"GET", SB "/files/list", AUTH_TENANT, BODY_NONE, NULL, h_file_list, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"GET", SB "/files/stat", AUTH_TENANT, BODY_NONE, NULL, h_file_stat, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"POST", SB "/files/mkdir", AUTH_TENANT, BODY_JSON, "files.mkdir", h_file_mkdir, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"POST", SB "/files/move", AUTH_TENANT, BODY_JSON, "files.move", h_file_move, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"GET", SB "/files/tar", AUTH_TENANT, BODY_NONE, NULL, h_tar_get, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"PUT", SB "/files/tar", AUTH_TENANT, BODY_STREAM, "files.tar_upload", h_tar_put, h_tar_put_begin,
     h_tar_put_upload, h_tar_put_cleanup, AUTH_SCOPE_SANDBOX},

    /* MCP, Streamable HTTP; GET/DELETE answer 405.  Tool calls are
     * audited one by one inside (action "mcp.<tool>"). */
    {"POST", "/mcp", AUTH_TENANT, BODY_STREAM, NULL, h_mcp, h_mcp_begin, h_mcp_upload, h_mcp_cleanup, SCOPE_TOKEN},
    /* The network and secrets plane */
    {"PUT", SB "/network", AUTH_TENANT, BODY_JSON, "sandbox.network", h_box_network, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"GET", "/v1/secrets", AUTH_TENANT, BODY_NONE, NULL, h_secret_list, NULL, NULL, NULL, 0},
    {"PUT", "/v1/secrets/{}", AUTH_TENANT, BODY_JSON, "secret.put", h_secret_put, NULL, NULL, NULL, 0},
    {"DELETE", "/v1/secrets/{}", AUTH_TENANT, BODY_NONE, "secret.delete", h_secret_delete, NULL, NULL, NULL, 0},
    {"GET", "/v1/tenants/{}/secrets", AUTH_ADMIN, BODY_NONE, NULL, h_admin_secret_list, NULL, NULL, NULL, 0},
    {"PUT", "/v1/tenants/{}/secrets/{}", AUTH_ADMIN, BODY_JSON, "secret.put", h_admin_secret_put, NULL, NULL, NULL, 0},
    {"DELETE", "/v1/tenants/{}/secrets/{}", AUTH_ADMIN, BODY_NONE, "secret.delete", h_admin_secret_delete,
     NULL, NULL, NULL, 0},
    /* The storage plane: routes_storage.c */
    {"POST", "/v1/s3-keys", AUTH_TENANT, BODY_NONE, "s3_key.create", h_s3_key_create, NULL, NULL, NULL, 0},
    {"GET", "/v1/s3-keys", AUTH_TENANT, BODY_NONE, NULL, h_s3_key_list, NULL, NULL, NULL, 0},
    {"DELETE", "/v1/s3-keys/{}", AUTH_TENANT, BODY_NONE, "s3_key.revoke", h_s3_key_revoke, NULL, NULL, NULL, 0},
    {"POST", "/v1/links", AUTH_TENANT, BODY_JSON, "link.create", h_link_create, NULL, NULL, NULL, AUTH_SCOPE_STORAGE_READ},
    {"GET", "/v1/links", AUTH_TENANT, BODY_NONE, NULL, h_link_list, NULL, NULL, NULL, AUTH_SCOPE_STORAGE_READ},
    {"GET", "/v1/links/{}", AUTH_TENANT, BODY_NONE, NULL, h_link_get, NULL, NULL, NULL, AUTH_SCOPE_STORAGE_READ},
    {"DELETE", "/v1/links/{}", AUTH_TENANT, BODY_NONE, "link.revoke", h_link_revoke, NULL, NULL, NULL, AUTH_SCOPE_STORAGE_WRITE},
    {"GET", "/v1/links/{}/access", AUTH_TENANT, BODY_NONE, NULL, h_link_access, NULL, NULL, NULL, AUTH_SCOPE_STORAGE_READ},
    {"GET", "/v1/objects", AUTH_TENANT, BODY_NONE, NULL, h_object_list, NULL, NULL, NULL, AUTH_SCOPE_STORAGE_READ},
    {"GET", "/v1/objects/head", AUTH_TENANT, BODY_NONE, NULL, h_object_head, NULL, NULL, NULL, AUTH_SCOPE_STORAGE_READ},
    /* Upload links: routes_upload.c (/u/<token> is the page people use) */
    {"POST", "/v1/upload-links", AUTH_TENANT, BODY_JSON, "upload_link.create", h_ulink_create, NULL,
     NULL, NULL, AUTH_SCOPE_STORAGE_WRITE},
    {"GET", "/v1/upload-links", AUTH_TENANT, BODY_NONE, NULL, h_ulink_list, NULL, NULL, NULL, AUTH_SCOPE_STORAGE_READ},
    {"DELETE", "/v1/upload-links/{}", AUTH_TENANT, BODY_NONE, "upload_link.revoke", h_ulink_revoke,
     NULL, NULL, NULL, AUTH_SCOPE_STORAGE_WRITE},
    {"GET", "/u/{}", AUTH_NONE, BODY_NONE, NULL, h_upage, NULL, NULL, NULL, 0},
    {"POST", "/u/{}", AUTH_NONE, BODY_STREAM, "upload_link.upload", h_upost, h_upost_begin,
     h_upost_upload, h_upost_cleanup, 0},
    {"POST", SB "/store", AUTH_TENANT, BODY_JSON, "sandbox.store", h_box_export, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ | AUTH_SCOPE_STORAGE_WRITE},
    {"POST", SB "/load", AUTH_TENANT, BODY_JSON, "sandbox.load", h_box_import, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX | AUTH_SCOPE_STORAGE_READ},
    /* Templates (a tenant's own; the admin key: the shared): routes_templates.c */
    {"POST", "/v1/templates", AUTH_ANY, BODY_STREAM, "template.import", h_template_import,
     h_template_import_begin, h_template_import_upload, h_template_import_cleanup, AUTH_SCOPE_SANDBOX},
    {"GET", "/v1/templates", AUTH_ANY, BODY_NONE, NULL, h_template_list, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"GET", "/v1/templates/{}", AUTH_ANY, BODY_NONE, NULL, h_template_get, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"DELETE", "/v1/templates/{}", AUTH_ANY, BODY_NONE, "template.delete", h_template_delete, NULL,
     NULL, NULL, AUTH_SCOPE_SANDBOX},
    {"GET", "/v1/templates/{}/export", AUTH_ANY, BODY_NONE, NULL, h_template_export, NULL, NULL, NULL, AUTH_SCOPE_SANDBOX_READ},
    {"POST", "/v1/builds", AUTH_ANY, BODY_STREAM, "template.build", h_build, h_build_begin,
     h_build_upload, h_build_cleanup, AUTH_SCOPE_SANDBOX},
};
const size_t api_nroutes = sizeof api_routes / sizeof api_routes[0];

enum MHD_Result h_health(struct req *r) {
  return api_reply_json(r, 200, json_pack("{s:s, s:s}", "status", "ok", "version", HUSK_VERSION));
}

/* Match `path` (no query) against `pattern`; fills r->params. */
static bool match(const char *pattern, const char *path, struct req *r, bool *bad_param) {
  int np = 0;
  const char *p = pattern, *u = path;
  while (*p && *u) {
    if (*p != '/' || *u != '/')
      return false;
    p++;
    u++;
    const char *pe = strchrnul(p, '/'), *ue = strchrnul(u, '/');
    size_t pl = (size_t)(pe - p), ul = (size_t)(ue - u);
    if (pl == 2 && p[0] == '{' && p[1] == '}') {
      if (ul == 0)
        return false;
      if (np >= API_MAX_PARAMS)
        return false;
      if (ul >= API_PARAM_MAX) {
        *bad_param = true;
        ul = API_PARAM_MAX - 1;
      }
      memcpy(r->params[np], u, ul);
      r->params[np][ul] = '\0';
      np++;
    } else if (pl != ul || memcmp(p, u, pl) != 0) {
      return false;
    }
    p = pe;
    u = ue;
  }
  if (*p || *u)
    return false;
  r->nparams = np;
  return true;
}

/* Ids (boxes, tenants, keys) are [A-Za-z0-9_-]+; pids are decimal. */
bool api_param_ok(const char *s) {
  if (!*s)
    return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '_' || *s == '-'))
      return false;
  return true;
}

/* ---- logging and small helpers ------------------------------------- */

void api_log(struct api_server *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  husk_vlog(s->cfg.log, s->cfg.log_ctx, fmt, ap);
  va_end(ap);
}

/* Workers count under the daemon's lock: a stop waits for them too. */
void api_worker_enter(struct api_server *s) {
  pthread_mutex_lock(&s->front.lock);
  s->workers++;
  pthread_mutex_unlock(&s->front.lock);
}

void api_worker_leave(struct api_server *s) {
  pthread_mutex_lock(&s->front.lock);
  s->workers--;
  pthread_cond_broadcast(&s->front.cond);
  pthread_mutex_unlock(&s->front.lock);
}

int api_worker_start(struct api_server *s, void *(*fn)(void *), void *arg) {
  api_worker_enter(s);
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  pthread_t th;
  int e = pthread_create(&th, &at, fn, arg);
  pthread_attr_destroy(&at);
  if (e != 0)
    api_worker_leave(s);
  return e;
}

int api_conn_fd(struct req *r) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  return ci ? ci->connect_fd : -1;
}

int api_cancel_fd(struct req *r) {
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0)
    return -1;
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = r->srv->stop_fd};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, r->srv->stop_fd, &ev) < 0) {
    close(ep);
    return -1;
  }
  int sock = api_conn_fd(r);
  if (sock >= 0) {
    /* Hang-up only: bytes a client pipelines are not a cancellation. */
    struct epoll_event sev = {.events = EPOLLRDHUP, .data.fd = sock};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, sock, &sev) < 0) {
      close(ep);
      return -1;
    }
  }
  return ep;
}

enum api_wait_result api_wait_srv(struct api_server *s, int sock, int fd, int timeout_ms,
                                  bool watch_stop) {
  struct pollfd p[3];
  int n = 0, ifd = -1, isock = -1, istop = -1;
  if (fd >= 0) { ifd = n; p[n++] = (struct pollfd){.fd = fd, .events = POLLIN}; }
  if (sock >= 0) { isock = n; p[n++] = (struct pollfd){.fd = sock, .events = POLLRDHUP}; }
  if (watch_stop) { istop = n; p[n++] = (struct pollfd){.fd = s->stop_fd, .events = POLLIN}; }
  int rc;
  do
    rc = poll(p, (nfds_t)n, timeout_ms);
  while (rc < 0 && errno == EINTR);
  if (rc < 0)
    return API_WAIT_GONE;
  if (isock >= 0 && (p[isock].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
    return API_WAIT_GONE;
  if (ifd >= 0 && p[ifd].revents)
    return API_WAIT_READY;
  if (istop >= 0 && p[istop].revents)
    return API_WAIT_STOPPING;
  return API_WAIT_TIMEOUT;
}

const char *api_header(struct req *r, const char *name) {
  return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *api_query(struct req *r, const char *name) {
  const char *v = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
  if (v)
    return v;
  /* "?eof" without "=": present, empty. */
  return MHD_lookup_connection_value_n(r->conn, MHD_GET_ARGUMENT_KIND, name, strlen(name), NULL,
                                       NULL) == MHD_YES
             ? ""
             : NULL;
}

int api_query_u64(struct req *r, const char *name, uint64_t max, uint64_t *out, bool *present) {
  const char *v = api_query(r, name);
  if (present)
    *present = v != NULL;
  if (!v)
    return 0;
  if (!*v || strspn(v, "0123456789") != strlen(v) || strlen(v) > 19)
    return husk_fail(&r->err, EINVAL, "query argument `%s` must be a non-negative integer", name);
  uint64_t x = strtoull(v, NULL, 10);
  if (x > max)
    return husk_fail(&r->err, EINVAL, "query argument `%s` is too large (at most %llu)", name,
                     (unsigned long long)max);
  *out = x;
  return 0;
}

int api_query_bool(struct req *r, const char *name, bool *out) {
  const char *v = api_query(r, name);
  if (!v)
    return 0;
  if (!*v || !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes"))
    *out = true;
  else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "no"))
    *out = false;
  else
    return husk_fail(&r->err, EINVAL, "query argument `%s` must be 1/true or 0/false", name);
  return 0;
}

/* ---- per-tenant concurrency ------------------------------------------ */

/* Routes whose request lasts as long as a command runs or streams. */
static bool route_runs_command(const struct route *rt) {
  return rt->handle == h_exec || rt->handle == h_ctx_execute || rt->handle == h_proc_output || rt->handle == h_proc_stdin ||
         rt->handle == h_mcp || rt->handle == h_build;
}

/* Count an authenticated tenant request in its tenant's load, or refuse it
 * (429) past the tenant's bounds: one tenant's slow streams must leave
 * connection threads for the others. */
static enum MHD_Result admit_in(struct req *r, bool preview) {
  struct api_server *s = r->srv;
  if (r->admin || !r->tenant[0])
    return MHD_YES;
  struct state_tenant t = {0};
  struct husk_err err = {0};
  if (state_tenant_get(s->cfg.state, r->tenant, &t, &err) < 0 || t.deleted_ms) {
    if (t.deleted_ms || err.code == ENOENT)
      return api_reply_error(r, 401, "unauthorized", "invalid API key");
    return api_reply_err(r, &err);
  }
  unsigned max_req = tenant_load_bound(t.max_requests, s->tenant_max_requests);
  unsigned max_exec = tenant_load_bound(t.max_execs, s->tenant_max_execs);
  bool exec = r->route && route_runs_command(r->route); /* a preview has no route */
  unsigned reqs, execs;
  enum tenant_admit res = tenant_load_acquire(preview ? &s->preview_loads : &s->front.loads,
                                              r->tenant, max_req, exec, max_exec, &reqs, &execs);
  if (res == TL_OK) {
    r->load_counted = true;
    r->load_exec = exec;
    r->load_preview = preview;
  }
  if (r->load_counted)
    return MHD_YES;
  /* Refused at once, body or not, and the connection closed: holding the
   * reply until a slow body is in would keep the very slot the refusal
   * is there to free. */
  r->in_body = false;
  snprintf(r->xhdr_name, sizeof r->xhdr_name, "Connection");
  snprintf(r->xhdr_value, sizeof r->xhdr_value, "close");
  if (res == TL_OVER_EXEC)
    return api_reply_error(r, 429, "too_many_requests",
                           "this tenant already runs %u command request(s) at once (at most %u): "
                           "wait for one to end",
                           execs, max_exec);
  if (res == TL_OVER_REQ && preview)
    return api_reply_error(r, 429, "too_many_requests",
                           "this preview's owner already has %u request(s) through its previews "
                           "in progress (at most %u): try again later",
                           reqs, max_req);
  if (res == TL_OVER_REQ)
    return api_reply_error(r, 429, "too_many_requests",
                           "this tenant already has %u request(s) in progress (at most %u): wait "
                           "for one to end",
                           reqs, max_req);
  return api_reply_error(r, 503, "unavailable", "the server is at its connection limit");
}

enum MHD_Result api_admit(struct req *r) { return admit_in(r, false); }
enum MHD_Result api_admit_preview(struct req *r) { return admit_in(r, true); }

void api_release(struct req *r) {
  struct api_server *s = r->srv;
  if (!r->load_counted)
    return;
  r->load_counted = false;
  tenant_load_release(r->load_preview ? &s->preview_loads : &s->front.loads, r->tenant,
                      r->load_exec);
}

/* ---- the life of a request ------------------------------------------ */

enum MHD_Result api_route_in(struct req *r, const char *url, const char *method,
                             const struct route_table *tables) {
  /* HEAD is GET without the body (MHD drops it). */
  const char *m = strcmp(method, "HEAD") == 0 ? "GET" : method;
  size_t ulen = strlen(url);
  char path[1024];
  if (ulen >= sizeof path)
    return api_reply_error(r, 404, "not_found", "no such route");
  memcpy(path, url, ulen + 1);
  if (ulen > 1 && path[ulen - 1] == '/')
    path[--ulen] = '\0';
  char allow[128] = "";
  bool bad_param = false, path_matched = false;
  for (const struct route_table *t = tables; t->routes && !r->route; t++) {
    for (size_t i = 0; i < t->n; i++) {
    const struct route *rt = &t->routes[i];
    bool bad = false;
    if (!match(rt->pattern, path, r, &bad))
      continue;
    path_matched = true;
    if (strcmp(rt->method, m) != 0) {
      if (strlen(allow) + strlen(rt->method) + sizeof ", , HEAD" < sizeof allow) {
        if (allow[0])
          strcat(allow, ", ");
        strcat(allow, rt->method);
        if (!strcmp(rt->method, "GET"))
          strcat(allow, ", HEAD");
      }
      continue;
    }
    if (bad)
      bad_param = true;
    for (int k = 0; k < r->nparams; k++)
      if (!api_param_ok(r->params[k]))
        bad_param = true;
    r->route = rt;
    r->dialect = t->dialect;
    break;
    }
  }
  if (!r->route) {
    if (path_matched) {
      snprintf(r->xhdr_name, sizeof r->xhdr_name, "Allow");
      snprintf(r->xhdr_value, sizeof r->xhdr_value, "%s", allow);
      return api_reply_error(r, 405, "method_not_allowed", "%s is not allowed here (allowed: %s)", m,
                             allow);
    }
    return api_reply_error(r, 404, "not_found", "no such route");
  }
  if (front_has_nul(r->conn))
    return api_reply_error(r, 400, "bad_request", "NUL bytes are not allowed in the query or headers");
  if (strncmp(r->route->pattern, "/v1/sandboxes/{}", 16) == 0 && r->nparams > 0 &&
      api_param_ok(r->params[0]) && strlen(r->params[0]) < sizeof r->audit_box)
    snprintf(r->audit_box, sizeof r->audit_box, "%s", r->params[0]);
  enum MHD_Result ret = api_authenticate(r);
  if (r->responded || ret != MHD_YES)
    return ret;
  ret = api_admit(r);
  if (r->responded || ret != MHD_YES)
    return ret;
  if (bad_param) {
    /* Not an id: it cannot name anything. */
    r->audit_box[0] = '\0';
    return api_reply_error(r, 404, "not_found", "no such resource");
  }
  if (r->route->body == BODY_FORM) {
    const char *cl = api_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > API_FORM_BODY_MAX)
      return api_reply_error(r, 413, "payload_too_large", "form bodies are limited to %d bytes",
                             API_FORM_BODY_MAX);
  }
  if (r->route->body == BODY_JSON) {
    const char *cl = api_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    unsigned long long n = cl ? strtoull(cl, NULL, 10) : 0;
    bool code = r->route->handle == h_ctx_execute;
    if (n > API_JSON_BODY_MAX && code && n <= API_CODE_BODY_MAX) {
      if (!api_budget_take(r->srv, r->tenant, 2 * (uint64_t)n))
        return api_reply_busy(r);
      r->body_budget = 2 * (uint64_t)n;
    } else if (n > API_JSON_BODY_MAX) {
      return code ? api_reply_error(r, 413, "payload_too_large",
                                    "an execute body is limited to %d bytes", API_CODE_BODY_MAX)
                  : api_reply_error(r, 413, "payload_too_large",
                                    "JSON bodies are limited to %d bytes", API_JSON_BODY_MAX);
    }
  }
  /* An upload takes as long as it needs -- once its sender is known: a
   * route without a key (an upload link) lifts the time limit in its
   * begin, after the link checked out, never for anyone's first bytes. */
  if (r->route->body == BODY_STREAM && r->route->auth != AUTH_NONE)
    conn_watch_request_in(&r->srv->front.watch, r->conn);
  if (r->route->body == BODY_STREAM && r->route->begin) {
    ret = r->route->begin(r);
    if (r->responded || ret != MHD_YES)
      return ret;
  }
  return MHD_YES;
}

/* Whether the request has a body the client sends without waiting for
 * "100 Continue". */
static bool body_unasked(struct req *r) {
  const char *cl = api_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
  const char *te = api_header(r, MHD_HTTP_HEADER_TRANSFER_ENCODING);
  const char *ex = api_header(r, MHD_HTTP_HEADER_EXPECT);
  bool body = (cl && strtoull(cl, NULL, 10) > 0) || te;
  return body && !(ex && strcasestr(ex, "100-continue"));
}

/* Send the reply held back while the body arrived. */
static enum MHD_Result flush_pending(struct req *r) {
  struct MHD_Response *resp = r->pending;
  r->pending = NULL;
  r->in_body = false;
  if (!resp)
    return MHD_YES;
  enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)r->status, resp);
  MHD_destroy_response(resp);
  return ret;
}

static enum MHD_Result on_request_deferred(struct api_server *s, struct req *r,
                                           struct MHD_Connection *conn, const char *url,
                                           const char *method, const char *upload_data,
                                           size_t *upload_data_size, void **con_cls);

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
  struct api_server *s = cls;
  struct req *r = *con_cls;
  (void)version;
  /* The changes this call commits are synced once, before its reply is
   * queued (api_queue), not one by one; whatever is committed after that
   * is synced here before MHD sends anything. */
  state_defer_begin(s->cfg.state);
  enum MHD_Result ret = on_request_deferred(s, r, conn, url, method, upload_data, upload_data_size,
                                            con_cls);
  struct husk_err err;
  if (state_defer_end(s->cfg.state, &err) < 0) {
    husk_sanitize_line(err.msg);
    api_log(s, "%s %s: %s", method, r ? r->path : "-", err.msg); /* never a preview's token */
    return MHD_NO; /* the reply must not acknowledge what is not on disk */
  }
  return ret;
}

/* The first sight of a request: its raw target (a preview's is passed on
 * as sent, not as libmicrohttpd decodes it). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
  struct api_server *s = cls;
  (void)conn;
  struct req *r = calloc(1, sizeof *r);
  if (!r)
    return NULL;
  r->srv = s;
  r->t0_ms = mono_ms();
  r->raw_uri = strdup(uri ? uri : "/");
  front_request_start(&s->front);
  return r;
}

static enum MHD_Result on_request_deferred(struct api_server *s, struct req *r,
                                           struct MHD_Connection *conn, const char *url,
                                           const char *method, const char *upload_data,
                                           size_t *upload_data_size, void **con_cls) {
  if (!r)
    return MHD_NO; /* out of memory at the first sight */
  if (!r->conn) {
    r->conn = conn;
    snprintf(r->method, sizeof r->method, "%s", method);
    snprintf(r->path, sizeof r->path, "%s", url);
    if (!strncmp(r->path, "/u/", 3)) /* an upload link's token: never in a log */
      snprintf(r->path, sizeof r->path, "/u/*");
    /* A refusal of a request whose body is already on its way is held
     * back until the body is read: a socket closed with unread data is
     * reset, and the client would never see the reply.  (With "Expect:
     * 100-continue" the refusal goes at once, instead of the 100.) */
    r->in_body = body_unasked(r);
    if (api_preview_wanted(s, conn, r->raw_uri))
      return api_preview_begin(r);
    if (api_e2b_wanted(r, url))
      return api_e2b_route(r, url, method);
    static const struct route_table husk_routes[] = {
        {api_routes, sizeof api_routes / sizeof api_routes[0], DIALECT_HUSK}, {NULL, 0, DIALECT_HUSK}};
    return api_route_in(r, url, method, husk_routes);
  }
  if (*upload_data_size > 0) {
    size_t n = *upload_data_size;
    *upload_data_size = 0;
    r->up_bytes += n;
    if (r->responded) {
      /* Decided: drop the rest of the body, but not forever. */
      r->drained += n;
      return r->pending && r->drained > API_DRAIN_MAX ? flush_pending(r) : MHD_YES;
    }
    r->in_body = true;
    if (r->pv)
      return api_preview_body(r, upload_data, n);
    switch (r->route->body) {
    case BODY_STREAM:
      if (r->route->upload(r, upload_data, n) < 0)
        return api_reply_err(r, &r->err);
      return MHD_YES;
    case BODY_FORM:
      if (r->body_len + n > API_FORM_BODY_MAX) {
        free(r->body);
        r->body = NULL;
        r->body_len = r->body_cap = 0;
        return api_reply_error(r, 413, "payload_too_large", "form bodies are limited to %d bytes",
                               API_FORM_BODY_MAX);
      }
      __attribute__((fallthrough)); /* buffered like JSON */
    case BODY_JSON:
      if (r->body_len + n > (r->body_budget ? r->body_budget / 2 : API_JSON_BODY_MAX)) {
        free(r->body);
        r->body = NULL;
        r->body_len = r->body_cap = 0;
        if (r->body_budget)
          return api_reply_error(r, 400, "bad_request", "the body is longer than its Content-Length");
        return api_reply_error(r, 413, "payload_too_large",
                               "JSON bodies are limited to %d bytes%s", API_JSON_BODY_MAX,
                               r->route->handle == h_ctx_execute
                                   ? " (an execute's up to 32 MiB, with a Content-Length)"
                                   : "");
      }
      if (r->body_len + n > r->body_cap) {
        size_t cap = r->body_cap ? r->body_cap : 4096;
        while (cap < r->body_len + n)
          cap *= 2;
        char *b = realloc(r->body, cap);
        if (!b)
          return api_reply_error(r, 500, "internal_error", "out of memory");
        r->body = b;
        r->body_cap = cap;
      }
      memcpy(r->body + r->body_len, upload_data, n);
      r->body_len += n;
      return MHD_YES;
    case BODY_NONE:
      return MHD_YES; /* ignored */
    }
    return MHD_YES;
  }
  /* The whole request is in. */
  r->in_body = false;
  conn_watch_request_in(&s->front.watch, conn);
  if (r->pending)
    return flush_pending(r);
  if (r->responded)
    return MHD_YES;
  if (r->pv)
    return api_preview_end(r);
  enum MHD_Result ret = r->route->handle(r);
  if (!r->responded && ret == MHD_YES) {
    /* A handler that forgot to reply: never leave the client hanging. */
    return api_reply_error(r, 500, "internal_error", "no reply");
  }
  return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  struct api_server *s = cls;
  struct req *r = *con_cls;
  if (!r)
    return;
  *con_cls = NULL;
  if (r->pending)
    MHD_destroy_response(r->pending);
  if (r->route && r->route->cleanup)
    r->route->cleanup(r);
  api_preview_cleanup(r, toe);
  api_release(r);
  if (!r->audited && r->route && r->route->action && (r->admin || r->tenant[0]))
    api_audit(r, "aborted"); /* the client went away before a reply */
  const char *who = r->admin ? "admin" : r->tenant[0] ? r->tenant : "-";
  front_log_request(&s->front, r->method, r->path, r->status, r->t0_ms, who, toe);
  free(r->body);
  free(r->raw_uri);
  if (r->body_budget)
    api_budget_give(s, r->tenant, r->body_budget);
  free(r);
  front_request_done(&s->front, conn);
}

/* ---- start and stop ------------------------------------------------- */

static void api_free(struct api_server *s) {
  if (!s)
    return;
  front_free(&s->front);
  api_oauth_free(s);
  tenant_loads_free(&s->preview_loads);
  close_quiet(s->stop_fd);
  free(s->admin_key);
  explicit_bzero(s->e2b_secret, sizeof s->e2b_secret);
  free(s);
}

static void api_freep(struct api_server **s) { api_free(*s); }

int api_start(struct api_server **out, const struct api_config *cfg, struct husk_err *err) {
  __attribute__((cleanup(api_freep))) struct api_server *s = calloc(1, sizeof *s);
  if (!s)
    return husk_error(err, ENOMEM, "server");
  s->cfg = *cfg;
  s->stop_fd = -1;
  struct front_config fc = {.listen = cfg->listen,
                            .max_connections = cfg->max_connections,
                            .max_per_ip = cfg->max_per_ip,
                            .idle_timeout_s = cfg->idle_timeout_s,
                            .request_timeout_s = cfg->request_timeout_s,
                            .strict = true,
                            .log_requests = cfg->log_requests,
                            .on_request = on_request,
                            .on_completed = on_completed,
                            .on_uri = on_uri,
                            .allow_upgrade = true,
                            .cls = s,
                            .log = cfg->log,
                            .log_ctx = cfg->log_ctx,
                            .setup_what = "server setup",
                            .conn_what = "connection(s)"};
  if (front_init(&s->front, &fc, err) < 0)
    return -1;
  if (!cfg->admin_key || !*cfg->admin_key)
    return husk_fail(err, EINVAL, "no admin key");
  if (api_preview_setup(s, err) < 0 || api_oauth_init(s, err) < 0)
    return -1;
  if (cfg->e2b_secret_path) {
    if (e2b_secret_load(cfg->e2b_secret_path, s->e2b_secret, err) < 0)
      return -1;
    s->e2b_on = true;
  }
  if (tenant_loads_init(&s->preview_loads, s->front.cfg.max_connections) != 0)
    return husk_error(err, ENOMEM, "server setup");
  s->admin_key = strdup(cfg->admin_key);
  s->admin_key_len = s->admin_key ? strlen(s->admin_key) : 0;
  s->cfg.admin_key = NULL;
  s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (!s->admin_key || s->stop_fd < 0)
    return husk_error(err, s->admin_key ? errno : ENOMEM, "server setup");
  /* The default shares of the connection threads, at least one each. */
  s->tenant_max_requests =
      front_tenant_share(&s->front, cfg->tenant_max_requests, FRONT_TENANT_REQUESTS_DIVISOR);
  s->tenant_max_execs =
      front_tenant_share(&s->front, cfg->tenant_max_execs, API_TENANT_EXECS_DIVISOR);
  /* Deletions a previous run left midway end before anyone can call. */
  struct box_tenant_purge purge = api_tenant_purge(&s->cfg);
  box_tenant_resume(s->cfg.mgr, &purge);
  if (front_listen(&s->front, err) < 0)
    return -1;
  *out = take_ptr(&s);
  return 0;
}

unsigned api_port(const struct api_server *s) { return s->front.port; }

void api_stop(struct api_server *s, unsigned grace_ms) {
  if (!s)
    return;
  /* 1. Stop accepting; 2. let the requests in flight finish, for a bounded
   * time. */
  unsigned left_req = front_quiesce(&s->front, grace_ms, &s->workers);
  /* 3. Cancel the rest: execs get their cancel fd and end (their streams
   * with the final event), follows end; give them a moment to say so. */
  uint64_t one = 1;
  if (write(s->stop_fd, &one, sizeof one) < 0) {
    /* an eventfd write cannot fail short of overflow */
  }
  if (left_req) {
    api_log(s, "stopping: cancelled %u request(s) still running", left_req);
    front_wait_idle(&s->front, API_CANCEL_WAIT_MS, &s->workers);
  }
  /* 4. Close the connections (MHD joins their threads). */
  front_close(&s->front);
  /* 5. Wait for the streaming workers: they use the core, which the
   * caller closes next. */
  pthread_mutex_lock(&s->front.lock);
  while (s->workers > 0)
    pthread_cond_wait(&s->front.cond, &s->front.lock);
  pthread_mutex_unlock(&s->front.lock);
  api_free(s);
}
