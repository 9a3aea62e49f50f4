/* The tar reader (src/box/tar.c): an archive uploaded into a box, as
 * PUT /v1/sandboxes/{id}/tar hands it to husk_tar_read(), extracted for
 * real into a scratch tree on /dev/shm (a tmpfs, like a box's) through
 * the same fd-based file layer (src/box/files.c).  Each run extracts into
 * workspace/x and removes it again; the scratch tree is removed at exit.
 * Input: the archive (tar, or gzip-compressed tar), delivered in reads of
 * a size its first byte chooses. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box/files.h"
#include "box/tar.h"
#include "fuzz.h"

static char root[] = "/dev/shm/husk-fuzz-tar.XXXXXX";
static struct husk_fs B = {.fs = -1};

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
  return remove(p) < 0 ? 0 : 0;
}

static void cleanup(void) { nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static void setup(void) {
  if (!mkdtemp(root))
    abort();
  atexit(cleanup);
  B.fs = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (B.fs < 0 || mkdirat(B.fs, "workspace", 0755) < 0 || mkdirat(B.fs, "tmp", 01777) < 0 ||
      mkdirat(B.fs, "shm", 01777) < 0)
    abort();
  B.uid = getuid();
  B.gid = getgid();
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (B.fs < 0)
    setup();
  struct fz f = {data, size};
  size_t step = ((size_t)fz_byte(&f) + 1) * 64;
  size_t n;
  uint8_t *buf = fz_rest(&f, &n);
  struct src s = {buf, n, step};
  struct husk_err err;
  husk_tar_read(&B, "x", in, &s, &err);
  struct stat st;
  if (fstatat(B.fs, "workspace/x", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      husk_file_remove(&B, "x", true, &err) < 0)
    abort();
  /* Nothing may land outside the extraction directory. */
  int ws = openat(B.fs, "workspace", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (ws < 0)
    abort();
  int left = 0;
  DIR *d = fdopendir(ws);
  if (!d)
    abort();
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      left++;
  closedir(d);
  if (left || faccessat(B.fs, "tmp/x", F_OK, AT_SYMLINK_NOFOLLOW) == 0)
    abort();
  free(buf);
  return 0;
}
