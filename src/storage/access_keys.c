/* S3 access keys: an id the client sends in the clear and a secret it
 * signs with.
 *
 * Unlike the API's bearer keys, the secret cannot be stored as a hash:
 * checking a SigV4 signature means recomputing it with the secret.  So it
 * is kept sealed with AES-256-GCM under DATA/storage/master.key (mode
 * 0600, beside the database but a separate file): a copy of the database,
 * a backup or an SQL injection elsewhere reveals no secret.  The key id is
 * the GCM associated data, so a sealed secret moved to another row does
 * not open.  Secrets are returned once, at creation, and never logged. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "state/store_state.h"
#include "storage/store_internal.h"
#include "util/base64.h"
#include "util/cleanup.h"
#include "util/fileio.h"
#include "util/id.h"

#define NONCE 12
#define TAG 16
#define SECRET_RAW 30 /* 40 base64 characters, as AWS's */
#define SECRET_LEN 40

_Static_assert(NONCE + STORE_SECRET_SIZE - 1 + TAG <= STATE_S3_SEALED_MAX,
               "a sealed secret fits the state's buffer");

/* ---- the master key ---- */

/* DATA/storage/master.key: 32 random bytes, 0600, created once (link()
 * publishes it whole, as the admin key). */
int store_master_key_load(struct store *s, struct husk_err *err) {
  for (int attempt = 0; attempt < 2; attempt++) {
    cleanup_close int fd = openat(s->dirfd, "master.key", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      struct stat st;
      if (fstat(fd, &st) < 0)
        return husk_error(err, errno, "storage master key");
      if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
        return husk_fail(err, EPERM,
                         "`%s/master.key` must be a regular file of ours with mode 0600", s->dir);
      ssize_t n = read(fd, s->master, sizeof s->master);
      if (n != (ssize_t)sizeof s->master)
        return husk_fail(err, EUCLEAN, "`%s/master.key` is not 32 bytes", s->dir);
      return 0;
    }
    if (errno != ENOENT)
      return husk_error(err, errno, "cannot open `%s/master.key`", s->dir);
    unsigned char k[32];
    if (id_random_bytes(k, sizeof k, err) < 0)
      return -1;
    char tmp[64];
    snprintf(tmp, sizeof tmp, ".master.key.%d", (int)getpid());
    unlinkat(s->dirfd, tmp, 0);
    cleanup_close int w =
        openat(s->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (w < 0)
      return husk_error(err, errno, "cannot create the storage master key");
    if (write_all(w, k, sizeof k) < 0 || fsync(w) < 0) {
      int e = errno;
      unlinkat(s->dirfd, tmp, 0);
      return husk_error(err, e, "cannot write the storage master key");
    }
    OPENSSL_cleanse(k, sizeof k);
    int rc = linkat(s->dirfd, tmp, s->dirfd, "master.key", 0);
    int e = errno;
    unlinkat(s->dirfd, tmp, 0);
    if (rc < 0 && e != EEXIST)
      return husk_error(err, e, "cannot create the storage master key");
    fsync(s->dirfd);
  }
  return husk_fail(err, EIO, "cannot read the storage master key");
}

/* ---- sealing ---- */

static int seal(struct store *s, const char *id, const char *secret, unsigned char *out,
                size_t *outlen, struct husk_err *err) {
  size_t n = strlen(secret);
  if (id_random_bytes(out, NONCE, err) < 0)
    return -1;
  EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
  int l = 0, l2 = 0;
  bool ok = c && EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, s->master, out) == 1 &&
            EVP_EncryptUpdate(c, NULL, &l, (const unsigned char *)id, (int)strlen(id)) == 1 &&
            EVP_EncryptUpdate(c, out + NONCE, &l, (const unsigned char *)secret, (int)n) == 1 &&
            EVP_EncryptFinal_ex(c, out + NONCE + l, &l2) == 1 &&
            EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, TAG, out + NONCE + l + l2) == 1;
  EVP_CIPHER_CTX_free(c);
  if (!ok)
    return husk_fail(err, EIO, "cannot seal the secret");
  *outlen = NONCE + (size_t)(l + l2) + TAG;
  return 0;
}

static int unseal(struct store *s, const char *id, const unsigned char *in, size_t n, char *secret,
                  size_t size, struct husk_err *err) {
  if (n < NONCE + TAG || n - NONCE - TAG >= size)
    return husk_fail(err, EUCLEAN, "a sealed S3 secret has a bad size");
  size_t cl = n - NONCE - TAG;
  EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
  int l = 0, l2 = 0;
  bool ok = c && EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, s->master, in) == 1 &&
            EVP_DecryptUpdate(c, NULL, &l, (const unsigned char *)id, (int)strlen(id)) == 1 &&
            EVP_DecryptUpdate(c, (unsigned char *)secret, &l, in + NONCE, (int)cl) == 1 &&
            EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, TAG, (void *)(in + NONCE + cl)) == 1 &&
            EVP_DecryptFinal_ex(c, (unsigned char *)secret + l, &l2) == 1;
  EVP_CIPHER_CTX_free(c);
  if (!ok) {
    OPENSSL_cleanse(secret, size);
    return husk_fail(err, EUCLEAN,
                     "a sealed S3 secret does not open: the storage master key changed?");
  }
  secret[l + l2] = 0;
  return 0;
}

int store_key_create(struct store *s, const char *tenant_id, bool internal,
                     char key_id[STORE_ACCESS_KEY_SIZE], char secret[STORE_SECRET_SIZE],
                     struct husk_err *err) {
  return store_key_mint(s, tenant_id, internal ? NULL : "", key_id, secret, err);
}

/* A new key pair while only this file has it, wiped at scope exit however
 * the function leaves: the caller gets it once it is stored. */
struct key_pair {
  char id[STORE_ACCESS_KEY_SIZE];
  char secret[STORE_SECRET_SIZE];
  unsigned char raw[SECRET_RAW];
};
static void key_pair_wipe(struct key_pair *p) { OPENSSL_cleanse(p, sizeof *p); }
#define cleanup_key_pair __attribute__((cleanup(key_pair_wipe)))

int store_key_mint(struct store *s, const char *tenant_id, const char *api_key_id,
                   char key_id[STORE_ACCESS_KEY_SIZE], char secret[STORE_SECRET_SIZE],
                   struct husk_err *err) {
  bool internal = api_key_id == NULL;
  if (!api_key_id)
    api_key_id = "";
  static const char b32[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  cleanup_key_pair struct key_pair k;
  /* "HK" + 18 base32 characters (90 bits): AWS's shape, 20 characters. */
  if (id_random_bytes(k.raw, 18, err) < 0)
    return -1;
  memcpy(k.id, "HK", 2);
  for (int i = 0; i < 18; i++)
    k.id[2 + i] = b32[k.raw[i] & 31];
  k.id[20] = 0;
  if (id_random_bytes(k.raw, sizeof k.raw, err) < 0)
    return -1;
  /* Base64 with "+/" as AWS's secrets: every client accepts those. */
  b64_encode_to(k.secret, k.raw, sizeof k.raw, B64_STD);
  unsigned char sealed[NONCE + SECRET_LEN + TAG + 16];
  size_t sl = 0;
  /* The API key id is checked there (an id or ""). */
  if (seal(s, k.id, k.secret, sealed, &sl, err) < 0 ||
      state_s3_key_insert(s->st, k.id, tenant_id, sealed, sl, internal, api_key_id, err) < 0)
    return -1;
  memcpy(key_id, k.id, sizeof k.id);
  memcpy(secret, k.secret, sizeof k.secret);
  return 0;
}

int store_key_lookup(struct store *s, const char *key_id, char tenant_id[32],
                     char secret[STORE_SECRET_SIZE], bool *internal, struct husk_err *err) {
  unsigned char sealed[STATE_S3_SEALED_MAX];
  size_t sl = 0;
  if (state_s3_key_get(s->st, key_id, tenant_id, sealed, &sl, internal, err) < 0)
    return -1;
  return unseal(s, key_id, sealed, sl, secret, STORE_SECRET_SIZE, err);
}

int store_internal_key(struct store *s, const char *tenant_id, char key_id[STORE_ACCESS_KEY_SIZE],
                       char secret[STORE_SECRET_SIZE], struct husk_err *err) {
  if (state_s3_key_internal(s->st, tenant_id, key_id, err) < 0)
    return -1;
  if (key_id[0]) {
    char t[STATE_TENANT_ID_SIZE];
    return store_key_lookup(s, key_id, t, secret, NULL, err);
  }
  return store_key_create(s, tenant_id, true, key_id, secret, err);
}

int store_key_list(struct store *s, const char *tenant_id,
                   int (*cb)(void *ctx, const struct store_key_info *k), void *ctx,
                   struct husk_err *err) {
  return state_s3_key_list(s->st, tenant_id, cb, ctx, err);
}

int store_key_revoke(struct store *s, const char *tenant_id, const char *key_id,
                     struct husk_err *err) {
  return state_s3_key_revoke(s->st, tenant_id, key_id, err);
}
