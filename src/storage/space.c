/* How much an object write may use: the data disk's reserve (the database
 * lives on the same disk), the tenant's storage quota (its usage is the
 * state plane's to sum), and what a box file may push into the store. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>

#include "state/store_state.h"
#include "storage/store_internal.h"
#include "util/disk_reserve.h"

int store_space_check(struct store *s, uint64_t add, struct husk_err *err) {
  return disk_reserve_check(s->dirfd, &s->reserve, add, err);
}

int store_fd_bound(int fd, uint64_t *size, uint64_t *bound, struct husk_err *err) {
  struct stat sb;
  if (fstat(fd, &sb) < 0)
    return husk_error(err, errno, "cannot stat the file");
  if (!S_ISREG(sb.st_mode))
    return husk_fail(err, EINVAL, "not a regular file");
  uint64_t alloc = (uint64_t)sb.st_blocks * 512;
  uint64_t sz = sb.st_size > 0 ? (uint64_t)sb.st_size : 0;
  if (sz > alloc + STORE_SPARSE_SLACK)
    return husk_fail(err, STORE_ESPARSE,
                     "the file is sparse (%llu bytes long, %llu bytes on disk): its holes are not "
                     "stored; write it out in full or archive it first",
                     (unsigned long long)sz, (unsigned long long)alloc);
  *size = sz;
  *bound = alloc + STORE_SPARSE_SLACK;
  return 0;
}

/* ---- usage and quota ---- */

int store_usage(struct store *s, const char *tenant_id, uint64_t *bytes, struct husk_err *err) {
  return state_store_usage(s->st, tenant_id, bytes, err);
}

int store_quota_room(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                     uint64_t *room, struct husk_err *err) {
  return state_store_quota_room(s->st, tenant_id, bucket, key, s->quota, room, err);
}

int store_quota_check(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                      uint64_t add, struct husk_err *err) {
  return state_store_quota_check(s->st, tenant_id, bucket, key, s->quota, add, err);
}
