/* CompleteMultipartUpload end to end below HTTP: the XML body
 * (src/s3/s3_xml.c) and its part list matched against a real upload in a
 * real store (src/storage/multipart.c: part order, numbers, ETags with or
 * without quotes, sizes), in a scratch data directory on /dev/shm removed
 * at exit.  The upload has parts 1 and 2 of STORE_PART_MIN bytes ('x' and
 * 'y') and part 3 of one byte ('c'); it is made again after a completion
 * consumed it.  Input: the XML document. */
#define _GNU_SOURCE
#include <ftw.h>
#include <stdio.h>
#include <unistd.h>

#include "fuzz.h"
#include "s3/s3_internal.h"
#include "state/state.h"
#include "storage/store.h"

static char dir[] = "/dev/shm/husk-fuzz-mp.XXXXXX";
static struct state *st;
static struct store *s;
static char tenant[STATE_TENANT_ID_SIZE];
static char upload[STORE_ID_SIZE];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  remove(p);
  return 0;
}

static void cleanup(void) {
  store_close(s);
  state_close(st);
  nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void part(int num, char c, size_t n) {
  static char buf[STORE_PART_MIN];
  memset(buf, c, n);
  struct store_writer *w = NULL;
  struct husk_err err;
  char etag[STORE_ETAG_SIZE];
  if (store_writer_open(s, CK_NONE, false, 0, &w, &err) < 0 ||
      store_writer_write(w, buf, n, &err) < 0 || store_writer_finish(w, NULL, etag, NULL, &err) < 0 ||
      store_part_commit(w, tenant, "bkt", "obj", upload, num, &err) < 0)
    abort();
}

static void new_upload(void) {
  struct husk_err err;
  if (store_upload_create(s, tenant, "bkt", "obj", "application/octet-stream", NULL, upload,
                          &err) < 0)
    abort();
  part(1, 'x', STORE_PART_MIN);
  part(2, 'y', STORE_PART_MIN);
  part(3, 'c', 1);
}

static void setup(void) {
  struct husk_err err;
  char db[64];
  if (!mkdtemp(dir))
    abort();
  snprintf(db, sizeof db, "%s/husk.db", dir);
  struct state_tenant t;
  if (state_open(&st, db, &err) < 0 ||
      state_tenant_create(st, "fuzz", STATE_UNLIMITED, STATE_UNLIMITED, &t, &err) < 0)
    abort();
  snprintf(tenant, sizeof tenant, "%s", t.id);
  struct store_config c = {.data_dir = dir, .state = st};
  if (store_open(&s, &c, &err) < 0 || store_bucket_create(s, tenant, "bkt", &err) < 0)
    abort();
  atexit(cleanup);
  new_upload();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!s)
    setup();
  struct fz f = {data, size};
  size_t n;
  char *xml = (char *)fz_rest(&f, &n);
  struct store_part *parts = NULL;
  size_t np = 0;
  struct husk_err err;
  if (s3_parse_complete(xml, n, &parts, &np, &err) == 0) {
    struct store_object o;
    memset(&o, 0, sizeof o);
    if (store_upload_complete(s, tenant, "bkt", "obj", upload, parts, np, "", &o, &err) == 0) {
      store_object_free(&o);
      new_upload();
    } else if (err.code == STORE_ENOUPLOAD) {
      abort(); /* a refused list leaves the upload as it was */
    }
    free(parts);
  }
  free(xml);
  return 0;
}
