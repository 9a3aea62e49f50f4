/* A snapshot's archive file restored into a fresh box filesystem, its
 * digest checked as it is read (snapshot_archive.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "box/snapshot_archive.h"

struct digest_in {
  int fd;
  EVP_MD_CTX *md;
};

static ssize_t digest_read(void *ctx, void *buf, size_t cap) {
  struct digest_in *r = ctx;
  ssize_t n;
  do
    n = read(r->fd, buf, cap);
  while (n < 0 && errno == EINTR);
  if (n > 0 && EVP_DigestUpdate(r->md, buf, (size_t)n) != 1) {
    errno = EIO;
    return -1;
  }
  return n;
}

int snap_restore_fd(int fs, uint32_t uid_base, int fd, const char *sha256, uint64_t max_bytes,
                    uint64_t max_entries, struct husk_err *err) {
  if (!sha256 || strlen(sha256) != 64)
    return husk_fail(err, EINVAL, "a snapshot digest is malformed");
  if (lseek(fd, 0, SEEK_SET) < 0)
    return husk_error(err, errno, "cannot read the snapshot's archive");
  struct digest_in r = {.fd = fd, .md = EVP_MD_CTX_new()};
  if (!r.md || EVP_DigestInit_ex(r.md, EVP_sha256(), NULL) != 1) {
    EVP_MD_CTX_free(r.md);
    return husk_fail(err, ENOMEM, "cannot check the snapshot's digest");
  }
  struct snap_stats st;
  int rc = snap_archive_read(fs, uid_base, digest_read, &r, max_bytes, max_entries, &st, err);
  if (rc == 0) {
    /* The rest of the file counts too: nothing may follow the archive. */
    char buf[4096];
    ssize_t n;
    while ((n = digest_read(&r, buf, sizeof buf)) > 0)
      ;
    unsigned char d[32];
    unsigned dl = 0;
    char hex[65];
    if (n < 0 || EVP_DigestFinal_ex(r.md, d, &dl) != 1 || dl != 32) {
      rc = husk_error(err, n < 0 ? errno : EIO, "cannot read the snapshot's archive");
    } else {
      for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
      if (strcmp(hex, sha256) != 0)
        rc = husk_fail(err, EBADMSG,
                       "the snapshot's archive is not the one recorded (its digest differs)");
    }
  } else {
    husk_error_wrap(err, "cannot restore the snapshot");
  }
  EVP_MD_CTX_free(r.md);
  return rc;
}
