/* An image archive (any bytes) read as an OCI or Docker archive: its
 * manifest, index and config parsed, its blobs checked; refused or read,
 * never a crash, whatever the JSON and tar hold. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "template/image.h"

static char dir[] = "/dev/shm/husk-fuzz-image-XXXXXX";

/* Empties a directory between inputs without a shell (a fork per input
 * cost most of the run), and the scratch directory at exit. */
static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  remove(p);
  return 0;
}

static void rm_tree(const char *p) { nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static void cleanup(void) { rm_tree(dir); }

struct src {
  const uint8_t *p;
  size_t n;
};

static ssize_t in(void *ctx, void *buf, size_t cap) {
  struct src *s = ctx;
  size_t k = s->n < cap ? s->n : cap;
  memcpy(buf, s->p, k);
  s->p += k;
  s->n -= k;
  return (ssize_t)k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int ready;
  if (!ready) {
    if (!mkdtemp(dir))
      abort();
    atexit(cleanup);
    ready = 1;
  }
  char work[64];
  snprintf(work, sizeof work, "%s/w", dir);
  mkdir(work, 0700);
  int wfd = open(work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct src s = {data, size};
  struct image_limits lim = {.max_bytes = 4 << 20, .max_entries = 64};
  struct image im;
  struct husk_err err;
  if (image_read_archive(in, &s, wfd, &lim, &im, &err) == 0)
    image_free(&im);
  close(wfd);
  rm_tree(work);
  if (access(work, F_OK) == 0)
    abort(); /* something in it could not be removed */
  return 0;
}
