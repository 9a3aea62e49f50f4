#define _GNU_SOURCE
#include "util/disk_reserve.h"

#include <errno.h>
#include <string.h>
#include <sys/statvfs.h>

#include "util/parse.h"

int disk_reserve_parse(const char *text, struct disk_reserve *out, struct husk_err *err) {
  *out = (struct disk_reserve){0};
  if (!text) {
    out->dflt = true;
    return 0;
  }
  size_t len = strlen(text);
  if (len > 1 && text[len - 1] == '%') {
    char pct[8] = "";
    uint64_t v = 0;
    struct husk_err pe;
    if (len - 1 < sizeof pct)
      memcpy(pct, text, len - 1);
    if (!pct[0] || parse_u64_range(pct, 0, 90, &v, &pe) < 0)
      return husk_fail(err, EINVAL, "the data reserve must be SIZE or N%% with N 0..90");
    out->pct = (unsigned)v;
    return 0;
  }
  return parse_size(text, &out->bytes, err);
}

int disk_reserve_check(int dirfd, const struct disk_reserve *r, uint64_t add,
                       struct husk_err *err) {
  struct statvfs sv;
  if (fstatvfs(dirfd, &sv) < 0)
    return husk_error(err, errno, "cannot read the data disk's free space");
  uint64_t total = (uint64_t)sv.f_blocks * sv.f_frsize;
  uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
  uint64_t reserve = r->bytes;
  if (r->pct)
    reserve = total / 100 * r->pct;
  else if (r->dflt)
    reserve = total / 100 * DISK_RESERVE_DEFAULT_PCT < DISK_RESERVE_DEFAULT
                  ? total / 100 * DISK_RESERVE_DEFAULT_PCT
                  : DISK_RESERVE_DEFAULT;
  if (avail < reserve || avail - reserve < add)
    return husk_fail(err, ENOSPC,
                     "the server's data disk is full: %llu bytes free, %llu of them kept in "
                     "reserve (--data-reserve), %llu asked for",
                     (unsigned long long)avail, (unsigned long long)reserve,
                     (unsigned long long)add);
  return 0;
}
