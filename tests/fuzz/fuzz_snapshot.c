/* The snapshot restore (src/box/snapshot_archive.c): an archive read as a
 * box made from a snapshot reads it, restored for real into a scratch
 * box filesystem on /dev/shm (a tmpfs, as a box's is) with workspace/,
 * tmp/ and shm/ made fresh for each run.  Nothing may land outside the
 * four trees (workspace, tmp, shm, rootfs), and no symlink may be
 * followed out of the scratch tree (a canary next to it stays empty).
 * Input: the archive (pax/ustar tar, plain or zstd), delivered in reads of
 * a size its first byte chooses. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box/snapshot_archive.h"
#include "fuzz.h"

static char root[] = "/dev/shm/husk-fuzz-snap.XXXXXX";
static char box[PATH_MAX], canary[PATH_MAX];
static int fs = -1;

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(p) < 0 ? 0 : 0;
}

static void cleanup(void) { nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

/* A fresh box filesystem: the three parts make_fs makes, nothing else. */
static void fresh(void) {
  if (fs >= 0)
    close(fs);
  nftw(box, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  if (mkdir(box, 0700) < 0)
    abort();
  fs = open(box, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fs < 0 || mkdirat(fs, "workspace", 0755) < 0 || mkdirat(fs, "tmp", 01777) < 0 ||
      mkdirat(fs, "shm", 01777) < 0)
    abort();
}

static void setup(void) {
  if (!mkdtemp(root))
    abort();
  atexit(cleanup);
  snprintf(box, sizeof box, "%s/box", root);
  snprintf(canary, sizeof canary, "%s/canary", root);
  if (mkdir(canary, 0700) < 0)
    abort();
}

struct src {
  const uint8_t *p;
  size_t n, step;
};

static ssize_t in(void *ctx, void *buf, size_t cap) {
  struct src *s = ctx;
  size_t k = s->n < s->step ? s->n : s->step;
  if (k > cap)
    k = cap;
  if (!k)
    return 0;
  memcpy(buf, s->p, k);
  s->p += k;
  s->n -= k;
  return (ssize_t)k;
}

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    abort();
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      n++;
  closedir(d);
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!box[0])
    setup();
  fresh();
  struct fz f = {data, size};
  size_t step = ((size_t)fz_byte(&f) + 1) * 64;
  size_t n;
  uint8_t *buf = fz_rest(&f, &n);
  struct src s = {buf, n, step};
  struct husk_err err;
  struct snap_stats st;
  /* uid_base 0: owners are the archive's own ids, within 0..65535. */
  snap_archive_read(fs, 0, in, &s, 64 << 20, 4096, &st, &err);
  /* Only the four trees at the box filesystem's root, nothing beside it. */
  DIR *d = opendir(box);
  if (!d)
    abort();
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "workspace") &&
        strcmp(e->d_name, "tmp") && strcmp(e->d_name, "shm") && strcmp(e->d_name, "rootfs"))
      abort();
  closedir(d);
  if (count_entries(canary) != 0 || count_entries(root) != 2)
    abort();
  free(buf);
  return 0;
}
