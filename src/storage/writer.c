/* The write path's steps 1-3 (store.h): a body streams into a temporary
 * file under tmp/ while its MD5 (the ETag) and the checksums asked for are
 * computed, with the data disk's reserve checked as it grows; finishing
 * compares the digests and fsyncs; publishing renames the file into
 * objects/ or parts/ and fsyncs the directory. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "storage/store_internal.h"
#include "util/base64.h"
#include "util/cleanup.h"
#include "util/fileio.h"
#include "util/id.h"

int (*store_fsync)(int fd) = fsync;

struct store_writer {
  struct store *s;
  int fd;
  char tmp[STORE_ID_SIZE];
  bool published; /* the temporary name is gone (renamed) */
  EVP_MD_CTX *md5, *sha256, *ck_md;
  enum store_checksum ck;
  uint32_t crc;
  uint64_t crc64;
  uint64_t size, limit;
  bool finished;
  char etag[STORE_ETAG_SIZE];
};

int store_writer_open(struct store *s, enum store_checksum ck, bool sha256, uint64_t limit,
                      struct store_writer **out, struct husk_err *err) {
  struct store_writer *w = calloc(1, sizeof *w);
  if (!w)
    return husk_error(err, ENOMEM, "writer");
  w->s = s;
  w->fd = -1;
  w->ck = ck;
  w->limit = limit ? limit : STORE_PUT_MAX;
  if (id_new("t", STORE_ID_BYTES, w->tmp, STORE_ID_SIZE, err) < 0)
    goto fail;
  w->md5 = EVP_MD_CTX_new();
  if (!w->md5 || EVP_DigestInit_ex(w->md5, EVP_md5(), NULL) != 1) {
    husk_fail(err, ENOMEM, "MD5");
    goto fail;
  }
  if (sha256 &&
      (!(w->sha256 = EVP_MD_CTX_new()) || EVP_DigestInit_ex(w->sha256, EVP_sha256(), NULL) != 1)) {
    husk_fail(err, ENOMEM, "SHA-256");
    goto fail;
  }
  if (ck == CK_SHA1 || ck == CK_SHA256) {
    if (!(w->ck_md = EVP_MD_CTX_new()) ||
        EVP_DigestInit_ex(w->ck_md, ck == CK_SHA1 ? EVP_sha1() : EVP_sha256(), NULL) != 1) {
      husk_fail(err, ENOMEM, "checksum");
      goto fail;
    }
  }
  if (store_space_check(s, 0, err) < 0)
    goto fail;
  w->fd = openat(s->tmpfd, w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (w->fd < 0) {
    husk_error(err, errno, "cannot create a temporary file in `%s/tmp`", s->dir);
    goto fail;
  }
  *out = w;
  return 0;
fail:
  store_writer_abort(w);
  return -1;
}

int store_writer_write(struct store_writer *w, const void *buf, size_t n, struct husk_err *err) {
  if (n == 0)
    return 0;
  if (w->size + n > w->limit)
    return husk_fail(err, STORE_ETOOLARGE,
                     "Your proposed upload exceeds the maximum allowed size (%llu bytes)",
                     (unsigned long long)w->limit);
  if (EVP_DigestUpdate(w->md5, buf, n) != 1 ||
      (w->sha256 && EVP_DigestUpdate(w->sha256, buf, n) != 1) ||
      (w->ck_md && EVP_DigestUpdate(w->ck_md, buf, n) != 1))
    return husk_fail(err, ENOMEM, "digest");
  /* The reserve is looked at again every MiB: a body of unknown length
   * stops at most that far past it. */
  if ((w->size + n) >> 20 != w->size >> 20 && store_space_check(w->s, n, err) < 0)
    return -1;
  if (w->ck == CK_CRC32)
    w->crc = store_crc32_update(w->crc, buf, n);
  else if (w->ck == CK_CRC32C)
    w->crc = store_crc32c_update(w->crc, buf, n);
  else if (w->ck == CK_CRC64NVME)
    w->crc64 = store_crc64nvme_update(w->crc64, buf, n);
  if (write_all(w->fd, buf, n) < 0)
    return husk_error(err, errno, "cannot write the object");
  w->size += n;
  return 0;
}

uint64_t store_writer_size(const struct store_writer *w) { return w->size; }
const char *store_writer_etag(const struct store_writer *w) { return w->etag; }
bool store_writer_finished(const struct store_writer *w) { return w->finished; }
struct store *store_writer_store(const struct store_writer *w) {
  return w->s;
}

int store_writer_finish(struct store_writer *w, const struct store_expect *e,
                        char etag[STORE_ETAG_SIZE], char *ck_b64, struct husk_err *err) {
  unsigned char md[64];
  unsigned int l = 0;
  if (e && e->length >= 0 && (uint64_t)e->length != w->size)
    return husk_fail(err, STORE_EINCOMPLETE,
                     "The request body is %llu bytes, not the %lld announced",
                     (unsigned long long)w->size, (long long)e->length);
  if (EVP_DigestFinal_ex(w->md5, md, &l) != 1)
    return husk_fail(err, ENOMEM, "MD5");
  if (e && e->has_md5 && CRYPTO_memcmp(md, e->md5, 16) != 0)
    return husk_fail(err, STORE_EBADDIGEST,
                     "The Content-MD5 you specified did not match what we received");
  static const char hx[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    etag[2 * i] = hx[md[i] >> 4];
    etag[2 * i + 1] = hx[md[i] & 15];
  }
  etag[32] = 0;
  if (w->sha256) {
    if (EVP_DigestFinal_ex(w->sha256, md, &l) != 1)
      return husk_fail(err, ENOMEM, "SHA-256");
    char hex[65];
    for (int i = 0; i < 32; i++) {
      hex[2 * i] = hx[md[i] >> 4];
      hex[2 * i + 1] = hx[md[i] & 15];
    }
    hex[64] = 0;
    if (e && e->sha256_hex && strcasecmp(hex, e->sha256_hex) != 0)
      return husk_fail(
          err, STORE_ESHA256,
          "The provided 'x-amz-content-sha256' header does not match what was computed");
  }
  char b64[96] = "";
  if (w->ck == CK_CRC32 || w->ck == CK_CRC32C) {
    unsigned char be[4] = {(unsigned char)(w->crc >> 24), (unsigned char)(w->crc >> 16),
                           (unsigned char)(w->crc >> 8), (unsigned char)w->crc};
    b64_encode_to(b64, be, 4, B64_STD);
  } else if (w->ck == CK_CRC64NVME) {
    unsigned char be[8];
    for (int i = 0; i < 8; i++)
      be[i] = (unsigned char)(w->crc64 >> (56 - 8 * i));
    b64_encode_to(b64, be, 8, B64_STD);
  } else if (w->ck_md) {
    if (EVP_DigestFinal_ex(w->ck_md, md, &l) != 1)
      return husk_fail(err, ENOMEM, "checksum");
    b64_encode_to(b64, md, l, B64_STD);
  }
  if (e && e->ck != CK_NONE && e->ck_b64 && strcmp(b64, e->ck_b64) != 0)
    return husk_fail(err, STORE_EBADDIGEST,
                     "The %s you specified did not match the calculated checksum",
                     store_checksum_name(e->ck));
  if (ck_b64)
    snprintf(ck_b64, 64, "%.63s", b64);
  if (store_fsync(w->fd) < 0)
    return husk_error(err, errno, "cannot fsync the object");
  memcpy(w->etag, etag, STORE_ETAG_SIZE);
  w->finished = true;
  return 0;
}

int store_writer_publish(struct store_writer *w, int dirfd, const char *name,
                         struct husk_err *err) {
  if (renameat(w->s->tmpfd, w->tmp, dirfd, name) < 0)
    return husk_error(err, errno, "cannot publish the object");
  w->published = true;
  if (store_fsync(dirfd) < 0) {
    int e = errno;
    unlinkat(dirfd, name, 0);
    return husk_error(err, e, "cannot fsync the object directory");
  }
  return 0;
}

void store_writer_abort(struct store_writer *w) {
  if (!w)
    return;
  close_quiet(w->fd);
  if (!w->published && w->tmp[0])
    unlinkat(w->s->tmpfd, w->tmp, 0);
  EVP_MD_CTX_free(w->md5);
  EVP_MD_CTX_free(w->sha256);
  EVP_MD_CTX_free(w->ck_md);
  free(w);
}
