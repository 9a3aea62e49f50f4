/* An image layer (any bytes: tar, gzip, zstd or junk) unpacked into a
 * fresh directory: refused or unpacked, never a write outside it, never a
 * crash.  The directory is emptied after each input. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "template/layer.h"

static char dir[] = "/dev/shm/husk-fuzz-layer-XXXXXX";

/* Empties a directory between inputs without a shell (a fork per input
 * cost most of the run), and the scratch directory at exit. */
static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  remove(p);
  return 0;
}

static void rm_tree(const char *p) { nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static void cleanup(void) { rm_tree(dir); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int ready;
  if (!ready) {
    if (!mkdtemp(dir))
      abort();
    atexit(cleanup);
    ready = 1;
  }
  int mem = memfd_create("layer", MFD_CLOEXEC);
  if (mem < 0 || write(mem, data, size) != (ssize_t)size || lseek(mem, 0, SEEK_SET) < 0)
    abort();
  char out[64];
  snprintf(out, sizeof out, "%s/out", dir);
  mkdir(out, 0700);
  int dfd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct layer_limits lim = {.max_bytes = 1 << 20, .max_entries = 256};
  struct layer_result r;
  struct husk_err err;
  layer_extract(mem, dfd, &lim, &r, &err);
  close(dfd);
  close(mem);
  rm_tree(out);
  if (access(out, F_OK) == 0)
    abort(); /* something in it could not be removed */
  return 0;
}
