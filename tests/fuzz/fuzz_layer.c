/* An image layer (any bytes: tar, gzip, zstd or junk) unpacked into a
 * fresh directory: refused or unpacked, never a write outside it, never a
 * crash.  The directory is emptied after each input. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "template/layer.h"

static char dir[] = "/tmp/husk-fuzz-layer-XXXXXX";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int ready;
  if (!ready) {
    if (!mkdtemp(dir))
      abort();
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
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", out);
  if (system(cmd) != 0)
    abort();
  return 0;
}
