/* Buckets: S3's naming rules here, their rows in the state plane
 * (state/buckets.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "state/store_state.h"
#include "storage/store_internal.h"

bool store_bucket_name_ok(const char *n) {
  size_t l = strlen(n);
  if (l < STORE_BUCKET_MIN || l > STORE_BUCKET_MAX)
    return false;
  bool digits_dots = true;
  for (size_t i = 0; i < l; i++) {
    char c = n[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-'))
      return false;
    if (c != '.' && !(c >= '0' && c <= '9'))
      digits_dots = false;
  }
  char f = n[0], e = n[l - 1];
  if (!((f >= 'a' && f <= 'z') || (f >= '0' && f <= '9')) ||
      !((e >= 'a' && e <= 'z') || (e >= '0' && e <= '9')))
    return false;
  if (strstr(n, "..") || strstr(n, ".-") || strstr(n, "-."))
    return false;
  return !digits_dots; /* "192.168.5.4" is not a bucket name */
}

int store_bucket_create(struct store *s, const char *tenant_id, const char *name,
                        struct husk_err *err) {
  if (!store_bucket_name_ok(name))
    return husk_fail(err, STORE_EBADNAME, "The specified bucket is not valid");
  return state_bucket_create(s->st, tenant_id, name, err);
}

int store_bucket_exists(struct store *s, const char *tenant_id, const char *name,
                        struct husk_err *err) {
  return state_bucket_check(s->st, tenant_id, name, err);
}

int store_bucket_delete(struct store *s, const char *tenant_id, const char *name,
                        struct husk_err *err) {
  return state_bucket_delete(s->st, tenant_id, name, err);
}

int store_bucket_list(struct store *s, const char *tenant_id,
                      int (*cb)(void *ctx, const char *name, int64_t created_ms), void *ctx,
                      struct husk_err *err) {
  return state_bucket_list(s->st, tenant_id, cb, ctx, err);
}

int store_bucket_internal(struct store *s, const char *tenant_id, const char *name,
                          struct husk_err *err) {
  if (name[0] != '_')
    return husk_fail(err, EINVAL, "internal: husk's own buckets start with `_`");
  if (state_bucket_create(s->st, tenant_id, name, err) == 0 || err->code == STORE_EOWNED)
    return 0;
  return -1;
}
