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
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "storage/store_internal.h"
#include "util/cleanup.h"
#include "util/id.h"

#define NONCE 12
#define TAG 16
#define SECRET_RAW 30 /* 40 base64 characters, as AWS's */
#define SECRET_LEN 40

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

int store_key_mint(struct store *s, const char *tenant_id, const char *api_key_id,
                   char key_id[STORE_ACCESS_KEY_SIZE], char secret[STORE_SECRET_SIZE],
                   struct husk_err *err) {
  bool internal = api_key_id == NULL;
  if (!api_key_id)
    api_key_id = "";
  if (api_key_id[0] && check_id("API key id", api_key_id, STATE_KEY_ID_SIZE, err) < 0)
    return -1;
  static const char b32[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  unsigned char raw[SECRET_RAW];
  /* "HK" + 18 base32 characters (90 bits): AWS's shape, 20 characters. */
  if (id_random_bytes(raw, 18, err) < 0)
    return -1;
  memcpy(key_id, "HK", 2);
  for (int i = 0; i < 18; i++)
    key_id[2 + i] = b32[raw[i] & 31];
  key_id[20] = 0;
  if (id_random_bytes(raw, sizeof raw, err) < 0)
    return -1;
  /* Base64 with "+/" as AWS's secrets: every client accepts those. */
  store_b64(raw, sizeof raw, secret);
  OPENSSL_cleanse(raw, sizeof raw);
  unsigned char sealed[NONCE + SECRET_LEN + TAG + 16];
  size_t sl = 0;
  if (seal(s, key_id, secret, sealed, &sl, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(s->st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(s->st, &txn, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(s->st, &q,
                 "INSERT INTO s3_keys (id, tenant_id, sealed, internal, created_ms, api_key_id) "
                 "VALUES (?, ?, ?, ?, ?, ?)",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, key_id) || db_text(q, 2, tenant_id) || db_blob(q, 3, sealed, sl) ||
           db_int(q, 4, internal) || db_int(q, 5, state_now_ms()) || db_text(q, 6, api_key_id);
  if (rc != SQLITE_OK)
    return db_fail(s->st, err, rc, "S3 key");
  if (db_step_done(s->st, q, "cannot store the S3 key", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int store_key_lookup(struct store *s, const char *key_id, char tenant_id[32],
                     char secret[STORE_SECRET_SIZE], bool *internal, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(s->st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(s->st, &q,
                 "SELECT tenant_id, sealed, internal FROM s3_keys WHERE id = ? AND revoked_ms = 0",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, key_id);
  if (rc != SQLITE_OK)
    return db_fail(s->st, err, rc, "S3 key");
  int r = db_step_row(s->st, q, "S3 key", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, STORE_ENOACCESSKEY,
                     "The AWS Access Key Id you provided does not exist in our records.");
  if (!db_col_text(q, 0, tenant_id, 32))
    return husk_fail(err, EUCLEAN, "S3 key row has an oversized value");
  if (internal)
    *internal = sqlite3_column_int(q, 2) != 0;
  return unseal(s, key_id, sqlite3_column_blob(q, 1), (size_t)sqlite3_column_bytes(q, 1), secret,
                STORE_SECRET_SIZE, err);
}

/* The tenant's link-signing key, created on first use. */
int store_internal_key(struct store *s, const char *tenant_id, char key_id[STORE_ACCESS_KEY_SIZE],
                       char secret[STORE_SECRET_SIZE], struct husk_err *err);
int store_internal_key(struct store *s, const char *tenant_id, char key_id[STORE_ACCESS_KEY_SIZE],
                       char secret[STORE_SECRET_SIZE], struct husk_err *err) {
  {
    cleanup_unlock struct state *locked = db_lock(s->st);
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(s->st, &q,
                   "SELECT id FROM s3_keys WHERE tenant_id = ? AND internal = 1 AND revoked_ms = 0 "
                   "ORDER BY created_ms LIMIT 1",
                   err) < 0)
      return -1;
    int rc = db_text(q, 1, tenant_id);
    if (rc != SQLITE_OK)
      return db_fail(s->st, err, rc, "S3 key");
    int r = db_step_row(s->st, q, "S3 key", err);
    if (r < 0)
      return -1;
    if (r == 1)
      db_col_text(q, 0, key_id, STORE_ACCESS_KEY_SIZE);
    else
      key_id[0] = 0;
  }
  if (key_id[0]) {
    char t[32];
    return store_key_lookup(s, key_id, t, secret, NULL, err);
  }
  return store_key_create(s, tenant_id, true, key_id, secret, err);
}

int store_key_list(struct store *s, const char *tenant_id,
                   int (*cb)(void *ctx, const struct store_key_info *k), void *ctx,
                   struct husk_err *err) {
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct store_key_info)};
  {
    cleanup_unlock struct state *locked = db_lock(s->st);
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(
            s->st, &q,
            "SELECT id, created_ms, revoked_ms, api_key_id FROM s3_keys WHERE tenant_id = ? AND "
            "internal = 0 ORDER BY created_ms, id LIMIT 1000",
            err) < 0)
      return -1;
    int rc = db_text(q, 1, tenant_id);
    if (rc != SQLITE_OK)
      return db_fail(s->st, err, rc, "S3 keys");
    int r;
    while ((r = db_step_row(s->st, q, "S3 keys", err)) == 1) {
      struct store_key_info *k = db_rows_push(&rows);
      if (!k)
        return husk_error(err, ENOMEM, "S3 keys");
      db_col_text(q, 0, k->id, sizeof k->id);
      k->created_ms = sqlite3_column_int64(q, 1);
      k->revoked_ms = sqlite3_column_int64(q, 2);
      db_col_text(q, 3, k->api_key_id, sizeof k->api_key_id);
    }
    if (r < 0)
      return -1;
  }
  for (size_t i = 0; i < rows.n; i++) {
    int v = cb(ctx, db_rows_at(&rows, i));
    if (v)
      return db_cb_verdict(v);
  }
  return 0;
}

int store_key_revoke(struct store *s, const char *tenant_id, const char *key_id,
                     struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(s->st);
  cleanup_txn struct db_txn txn = {0};
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_begin(s->st, &txn, err) < 0 ||
      db_prepare(
          s->st, &q,
          "UPDATE s3_keys SET revoked_ms = CASE revoked_ms WHEN 0 THEN ? ELSE revoked_ms END "
          "WHERE id = ? AND tenant_id = ? AND internal = 0",
          err) < 0)
    return -1;
  int rc = db_int(q, 1, state_now_ms()) || db_text(q, 2, key_id) || db_text(q, 3, tenant_id);
  if (rc != SQLITE_OK)
    return db_fail(s->st, err, rc, "S3 key");
  int n = db_step_done(s->st, q, "cannot revoke the S3 key", err);
  if (n < 0)
    return -1;
  if (n == 0)
    return husk_fail(err, STORE_ENOACCESSKEY, "no such S3 key");
  return db_commit(&txn, err);
}
