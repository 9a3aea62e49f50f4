/* The secrets vault (see vault.h). */
#define _GNU_SOURCE
#include "egress/vault.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/egress_state.h"
#include "util/cleanup.h"

#define KEY_LEN 32
#define NONCE_LEN 12
#define TAG_LEN 16
#define SEAL_VERSION 1

struct egress_vault {
  struct state *st;
  unsigned char *key; /* KEY_LEN, locked in memory */
};

static int load_key(const char *path, unsigned char *key, struct husk_err *err) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    /* First use: a new key, written once, readable by the daemon only. */
    unsigned char k[KEY_LEN];
    if (RAND_bytes(k, sizeof k) != 1)
      return husk_fail(err, EIO, "cannot make the vault key");
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    unlink(tmp);
    int w = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (w < 0)
      return husk_error(err, errno, "cannot create `%s`", tmp);
    bool ok = write(w, k, sizeof k) == (ssize_t)sizeof k && fsync(w) == 0;
    close(w);
    OPENSSL_cleanse(k, sizeof k);
    /* link() fails if another start won the race: then use theirs. */
    if (!ok || (link(tmp, path) < 0 && errno != EEXIST)) {
      int e = errno;
      unlink(tmp);
      return husk_error(err, e, "cannot create the vault key `%s`", path);
    }
    unlink(tmp);
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  }
  if (fd < 0)
    return husk_error(err, errno, "cannot open the vault key `%s`", path);
  struct stat sb;
  ssize_t r = -1;
  if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == KEY_LEN &&
      !(sb.st_mode & 077))
    r = read(fd, key, KEY_LEN);
  close(fd);
  if (r != KEY_LEN)
    return husk_fail(err, EPERM,
                     "the vault key `%s` must be a %d-byte regular file with mode 0600", path, KEY_LEN);
  return 0;
}

int egress_vault_open(struct egress_vault **out, struct state *st, const char *data_dir,
                      struct husk_err *err) {
  struct egress_vault *v = calloc(1, sizeof *v);
  if (!v)
    return husk_fail(err, ENOMEM, "out of memory");
  v->st = st;
  v->key = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (v->key == MAP_FAILED) {
    free(v);
    return husk_error(err, errno, "mmap");
  }
  /* Locked (never swapped) and left out of core dumps. */
  mlock(v->key, 4096);
  madvise(v->key, 4096, MADV_DONTDUMP);
  char path[4096];
  snprintf(path, sizeof path, "%s/vault.key", data_dir);
  if (load_key(path, v->key, err) < 0) {
    egress_vault_close(v);
    return -1;
  }
  *out = v;
  return 0;
}

void egress_vault_close(struct egress_vault *v) {
  if (!v)
    return;
  OPENSSL_cleanse(v->key, KEY_LEN);
  munmap(v->key, 4096);
  free(v);
}

static bool name_ok(const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n > 64 || (s[0] >= '0' && s[0] <= '9'))
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
          s[i] == '_'))
      return false;
  return true;
}

/* AAD: tenant, NUL, name -- the row the value belongs to. */
static int aad(EVP_CIPHER_CTX *c, const char *tenant, const char *name) {
  int l;
  return EVP_EncryptUpdate(c, NULL, &l, (const unsigned char *)tenant, (int)strlen(tenant) + 1) &&
         EVP_EncryptUpdate(c, NULL, &l, (const unsigned char *)name, (int)strlen(name));
}

static int aad_dec(EVP_CIPHER_CTX *c, const char *tenant, const char *name) {
  int l;
  return EVP_DecryptUpdate(c, NULL, &l, (const unsigned char *)tenant, (int)strlen(tenant) + 1) &&
         EVP_DecryptUpdate(c, NULL, &l, (const unsigned char *)name, (int)strlen(name));
}

bool egress_vault_name_reserved(const char *name) {
  return name && !strncmp(name, EGRESS_VAULT_RESERVED_PREFIX, strlen(EGRESS_VAULT_RESERVED_PREFIX));
}

static int seal_put(struct egress_vault *v, const char *tenant, const char *name,
                    const void *value, size_t len, struct husk_err *err);
static int open_get(struct egress_vault *v, const char *tenant, const char *name, char **value,
                    size_t *len, struct husk_err *err);

/* The daemon's own secrets (reserved names) are reached only through the
 * _reserved functions; the others, which routes, policies and the proxy
 * use, act as if they did not exist. */
int egress_vault_put(struct egress_vault *v, const char *tenant, const char *name,
                     const void *value, size_t len, struct husk_err *err) {
  if (egress_vault_name_reserved(name))
    return husk_fail(err, EINVAL, "secret names starting with `%s` are reserved for husk",
                     EGRESS_VAULT_RESERVED_PREFIX);
  return seal_put(v, tenant, name, value, len, err);
}

int egress_vault_put_reserved(struct egress_vault *v, const char *tenant, const char *name,
                              const void *value, size_t len, struct husk_err *err) {
  if (!egress_vault_name_reserved(name))
    return husk_fail(err, EINVAL, "not a reserved secret name");
  return seal_put(v, tenant, name, value, len, err);
}

int egress_vault_get_reserved(struct egress_vault *v, const char *tenant, const char *name,
                              char **value, size_t *len, struct husk_err *err) {
  if (!egress_vault_name_reserved(name))
    return husk_fail(err, EINVAL, "not a reserved secret name");
  return open_get(v, tenant, name, value, len, err);
}

int egress_vault_delete_reserved(struct egress_vault *v, const char *tenant, const char *name,
                                 struct husk_err *err) {
  if (!egress_vault_name_reserved(name) || !name_ok(name))
    return husk_fail(err, EINVAL, "not a reserved secret name");
  return state_secret_delete(v->st, tenant, name, err);
}

static int seal_put(struct egress_vault *v, const char *tenant, const char *name,
                    const void *value, size_t len, struct husk_err *err) {
  if (!name_ok(name))
    return husk_fail(err, EINVAL, "a secret name is 1-64 of [A-Za-z0-9_], not starting with a digit");
  if (len == 0 || len > EGRESS_SECRET_MAX)
    return husk_fail(err, EINVAL, "a secret value is 1 to %d bytes", EGRESS_SECRET_MAX);
  const unsigned char *p = value;
  for (size_t i = 0; i < len; i++)
    if (p[i] < 0x20 || p[i] > 0x7e)
      return husk_fail(err, EINVAL, "a secret value must be printable ASCII (it is sent in HTTP headers)");
  size_t sl = 1 + NONCE_LEN + len + TAG_LEN;
  cleanup_free unsigned char *sealed = malloc(sl);
  EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
  int outl = 0, fl = 0;
  bool ok = sealed && c;
  if (ok) {
    sealed[0] = SEAL_VERSION;
    ok = RAND_bytes(sealed + 1, NONCE_LEN) == 1 &&
         EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, v->key, sealed + 1) && aad(c, tenant, name) &&
         EVP_EncryptUpdate(c, sealed + 1 + NONCE_LEN, &outl, p, (int)len) &&
         EVP_EncryptFinal_ex(c, sealed + 1 + NONCE_LEN + outl, &fl) &&
         EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, TAG_LEN, sealed + 1 + NONCE_LEN + len);
  }
  EVP_CIPHER_CTX_free(c);
  if (!ok)
    return husk_fail(err, EIO, "cannot seal the secret");
  return state_secret_put(v->st, tenant, name, sealed, sl, err);
}

int egress_vault_get(struct egress_vault *v, const char *tenant, const char *name, char **value,
                     size_t *len, struct husk_err *err) {
  if (egress_vault_name_reserved(name))
    return husk_fail(err, ENOENT, "no secret `%.64s`", name);
  return open_get(v, tenant, name, value, len, err);
}

static int open_get(struct egress_vault *v, const char *tenant, const char *name, char **value,
                    size_t *len, struct husk_err *err) {
  cleanup_free uint8_t *sealed = NULL;
  size_t sl;
  if (state_secret_get(v->st, tenant, name, &sealed, &sl, err) < 0)
    return -1;
  if (sl < 1 + NONCE_LEN + TAG_LEN + 1 || sealed[0] != SEAL_VERSION)
    return husk_fail(err, EUCLEAN, "secret `%s` is not sealed by this vault", name);
  size_t n = sl - 1 - NONCE_LEN - TAG_LEN;
  char *out = malloc(n + 1);
  EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
  int outl = 0, fl = 0;
  bool ok = out && c && EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, v->key, sealed + 1) &&
            aad_dec(c, tenant, name) &&
            EVP_DecryptUpdate(c, (unsigned char *)out, &outl, sealed + 1 + NONCE_LEN, (int)n) &&
            EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, TAG_LEN, sealed + 1 + NONCE_LEN + n) &&
            EVP_DecryptFinal_ex(c, (unsigned char *)out + outl, &fl) > 0;
  EVP_CIPHER_CTX_free(c);
  if (!ok) {
    if (out)
      egress_vault_wipe(out, n);
    return husk_fail(err, EUCLEAN, "secret `%s` does not open with this vault's key", name);
  }
  out[n] = '\0';
  *value = out;
  *len = n;
  return 0;
}

void egress_vault_wipe(char *value, size_t len) {
  if (!value)
    return;
  OPENSSL_cleanse(value, len);
  free(value);
}

int egress_vault_delete(struct egress_vault *v, const char *tenant, const char *name,
                        struct husk_err *err) {
  if (!name_ok(name) || egress_vault_name_reserved(name))
    return husk_fail(err, ENOENT, "no secret `%.64s`", name ? name : "");
  return state_secret_delete(v->st, tenant, name, err);
}

struct list_filter {
  int (*cb)(void *ctx, const char *name, int64_t created_ms, int64_t updated_ms);
  void *ctx;
};
static int list_unreserved(void *ctx, const char *name, int64_t created_ms, int64_t updated_ms) {
  struct list_filter *f = ctx;
  return egress_vault_name_reserved(name) ? 0 : f->cb(f->ctx, name, created_ms, updated_ms);
}

int egress_vault_list(struct egress_vault *v, const char *tenant,
                      int (*cb)(void *ctx, const char *name, int64_t created_ms, int64_t updated_ms),
                      void *ctx, struct husk_err *err) {
  struct list_filter f = {cb, ctx};
  return state_secret_list(v->st, tenant, list_unreserved, &f, err);
}

int egress_vault_exists(struct egress_vault *v, const char *tenant, const char *name,
                        struct husk_err *err) {
  if (egress_vault_name_reserved(name))
    return husk_fail(err, ENOENT, "no secret `%.64s`", name);
  cleanup_free uint8_t *sealed = NULL;
  size_t sl;
  if (state_secret_get(v->st, tenant, name, &sealed, &sl, err) < 0)
    return -1;
  return 0;
}
