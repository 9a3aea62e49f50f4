/* The S3 front's XML request bodies (src/s3/s3_xml.c, expat):
 * CompleteMultipartUpload, Delete and CreateBucketConfiguration.  Input:
 * a selector byte, then the document. */
#include <stdbool.h>

#include "fuzz.h"
#include "s3/s3_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fz f = {data, size};
  uint8_t sel = fz_byte(&f);
  size_t n;
  char *xml = (char *)fz_rest(&f, &n);
  struct husk_err err;
  switch (sel % 3) {
  case 0: {
    struct store_part *parts = NULL;
    size_t np = 0;
    if (s3_parse_complete(xml, n, &parts, &np, &err) == 0) {
      if (np == 0)
        abort();
      for (size_t i = 0; i < np; i++)
        if (!memchr(parts[i].etag, '\0', sizeof parts[i].etag))
          abort();
      free(parts);
    }
    break;
  }
  case 1: {
    char **keys = NULL;
    size_t nk = 0;
    bool quiet = false;
    if (s3_parse_delete(xml, n, &keys, &nk, &quiet, &err) == 0) {
      for (size_t i = 0; i < nk; i++)
        free(keys[i]);
      free(keys);
    }
    break;
  }
  default: s3_parse_check(xml, n, "CreateBucketConfiguration", &err); break;
  }
  free(xml);
  return 0;
}
