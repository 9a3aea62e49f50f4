/* Bearer keys: the admin key (compared in constant time) or a tenant key
 * (state_key_authenticate: only its SHA-256 is stored). */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "api/internal.h"

/* Constant time in the length of `a` (the presented key); equal lengths
 * and bytes required.  `b` (the secret) must not be empty. */
bool api_key_equal(const char *a, size_t alen, const char *b, size_t blen) {
  volatile unsigned char diff = (unsigned char)(alen != blen);
  if (blen == 0)
    return false;
  for (size_t i = 0; i < alen; i++)
    diff |= (unsigned char)(a[i] ^ b[i % blen]);
  return diff == 0;
}

enum MHD_Result api_authenticate(struct req *r) {
  const struct route *rt = r->route;
  if (rt->auth == AUTH_NONE)
    return MHD_YES;
  const char *h = api_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
  if (!h)
    return api_reply_error(r, 401, "unauthorized", "missing `Authorization: Bearer <key>` header");
  if (strncasecmp(h, "Bearer ", 7) != 0)
    return api_reply_error(r, 401, "unauthorized", "the Authorization header must be `Bearer <key>`");
  const char *key = h + 7;
  while (*key == ' ')
    key++;
  size_t klen = strlen(key);
  while (klen > 0 && key[klen - 1] == ' ')
    klen--;
  if (klen == 0)
    return api_reply_error(r, 401, "unauthorized", "empty API key");

  if (api_key_equal(key, klen, r->srv->admin_key, r->srv->admin_key_len)) {
    r->admin = true;
  } else {
    char buf[STATE_KEY_SIZE + 1];
    struct state_key k;
    struct husk_err err;
    if (klen >= sizeof buf)
      return api_reply_error(r, 401, "unauthorized", "invalid API key");
    memcpy(buf, key, klen);
    buf[klen] = '\0';
    if (state_key_authenticate(r->srv->cfg.state, buf, &k, &err) < 0) {
      memset(buf, 0, sizeof buf);
      if (err.code == EACCES || err.code == EINVAL || err.code == ENOENT)
        return api_reply_error(r, 401, "unauthorized", "invalid API key");
      return api_reply_err(r, &err);
    }
    memset(buf, 0, sizeof buf);
    snprintf(r->tenant, sizeof r->tenant, "%s", k.tenant_id);
    snprintf(r->key_id, sizeof r->key_id, "%s", k.id);
  }

  if (rt->auth == AUTH_ADMIN && !r->admin)
    return api_reply_error(r, 403, "forbidden", "this route needs the admin key");
  if (rt->auth == AUTH_TENANT && r->admin)
    return api_reply_error(r, 403, "forbidden",
                           "this route needs a tenant key (create one with POST /v1/tenants/{id}/keys)");
  return MHD_YES;
}

void api_audit(struct req *r, const char *outcome) {
  if (r->audited || !r->route || !r->route->action)
    return;
  r->audited = true;
  struct state_audit rec;
  memset(&rec, 0, sizeof rec);
  if (!r->admin)
    snprintf(rec.tenant_id, sizeof rec.tenant_id, "%s", r->tenant);
  snprintf(rec.key_id, sizeof rec.key_id, "%s", r->key_id);
  snprintf(rec.action, sizeof rec.action, "%s", r->route->action);
  snprintf(rec.box_id, sizeof rec.box_id, "%s", r->audit_box);
  snprintf(rec.detail, sizeof rec.detail, "%s", r->audit_detail);
  /* The detail must be valid UTF-8 without control characters (state
   * refuses anything else): sanitize, then drop a cut sequence. */
  husk_sanitize_line(rec.detail);
  size_t n = strlen(rec.detail);
  if (!utf8_valid(rec.detail, n)) {
    for (size_t i = 0; i < n; i++)
      if ((unsigned char)rec.detail[i] >= 0x80)
        rec.detail[i] = '?';
  }
  snprintf(rec.outcome, sizeof rec.outcome, "%s", outcome);
  rec.status = r->status;
  struct husk_err err;
  if (state_audit_add(r->srv->cfg.state, &rec, NULL, &err) < 0) {
    husk_sanitize_line(err.msg);
    api_log(r->srv, "audit record for %s failed: %s", rec.action, err.msg);
  }
}
