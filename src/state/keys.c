/* API keys: bearer secrets that name a tenant.
 *
 * A key is 32 random bytes (256 bits), so a plain SHA-256 of it is as good
 * as a slow password hash: there is no dictionary to try.  Only the hash is
 * stored; a copy of the database does not let anyone call the API.
 *
 * Lookup is by the hash (its UNIQUE index).  The B-tree search compares
 * hashes in variable time, which reveals at most something about the hash
 * of a guess, never about a valid key's preimage.  The final comparison is
 * CRYPTO_memcmp anyway, so the decision itself never depends on timing. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "state/db.h"
#include "util/base64.h"
#include "util/cleanup.h"
#include "util/id.h"

#define KEY_RAW_BYTES 32
#define KEY_HASH_BYTES 32
#define KEY_PREFIX_LEN (sizeof STATE_KEY_PREFIX - 1)

_Static_assert(KEY_PREFIX_LEN + (KEY_RAW_BYTES * 4 + 2) / 3 == STATE_KEY_LEN,
               "STATE_KEY_LEN is the prefix plus unpadded base64 of the raw bytes");

static int key_hash(const char *key, size_t n, unsigned char hash[KEY_HASH_BYTES],
                    struct husk_err *err) {
  unsigned int len = 0;
  if (EVP_Digest(key, n, hash, &len, EVP_sha256(), NULL) != 1 || len != KEY_HASH_BYTES)
    return husk_fail(err, EIO, "SHA-256 failed");
  return 0;
}

/* The shape of a key, checked before hashing: anything else cannot be one. */
static bool key_well_formed(const char *k, size_t n) {
  if (n != STATE_KEY_LEN || memcmp(k, STATE_KEY_PREFIX, KEY_PREFIX_LEN) != 0)
    return false;
  for (size_t i = KEY_PREFIX_LEN; i < n; i++)
    if (!b64_char_ok(k[i], B64_URL))
      return false;
  return true;
}

/* A row of api_keys (id, tenant_id, created_ms, revoked_ms) into a
 * struct state_key. */
static int read_key(sqlite3_stmt *s, void *row, struct husk_err *err) {
  struct state_key *k = row;
  bool ok = db_col_text(s, 0, k->id, sizeof k->id);
  ok &= db_col_text(s, 1, k->tenant_id, sizeof k->tenant_id);
  k->created_ms = sqlite3_column_int64(s, 2);
  k->revoked_ms = sqlite3_column_int64(s, 3);
  if (!ok)
    return husk_fail(err, EUCLEAN, "key row has an oversized value");
  return 0;
}

/* The plaintext while it exists on our side, wiped at scope exit however
 * the function leaves. */
struct key_secret {
  unsigned char raw[KEY_RAW_BYTES];
  char text[STATE_KEY_SIZE];
};
static void key_secret_wipe(struct key_secret *ks) { OPENSSL_cleanse(ks, sizeof *ks); }
#define cleanup_secret __attribute__((cleanup(key_secret_wipe)))

int state_key_create(struct state *st, const char *tenant_id, char *plaintext,
                     size_t plaintext_size, struct state_key *out, struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  if (!plaintext || plaintext_size < STATE_KEY_SIZE)
    return husk_fail(err, EINVAL, "key buffer too small (need %d bytes)", STATE_KEY_SIZE);

  struct state_key k = {.created_ms = state_now_ms()};
  snprintf(k.tenant_id, sizeof k.tenant_id, "%s", tenant_id);
  cleanup_secret struct key_secret ks;
  unsigned char hash[KEY_HASH_BYTES];
  if (state_new_id("k_", k.id, sizeof k.id, err) < 0 ||
      id_random_bytes(ks.raw, sizeof ks.raw, err) < 0)
    return -1;
  memcpy(ks.text, STATE_KEY_PREFIX, KEY_PREFIX_LEN);
  b64_encode_to(ks.text + KEY_PREFIX_LEN, ks.raw, sizeof ks.raw, B64_URL);
  if (key_hash(ks.text, STATE_KEY_LEN, hash, err) < 0)
    return -1;

  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "INSERT INTO api_keys (id, tenant_id, hash, created_ms) VALUES (?1, ?2, ?3, ?4)",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, k.id)) || (rc = db_text(s, 2, k.tenant_id)) ||
      (rc = db_blob(s, 3, hash, sizeof hash)) || (rc = db_int(s, 4, k.created_ms)))
    return db_fail(st, err, rc, "cannot bind key");
  if (db_step_done(st, s, "cannot create key", err) < 0) {
    if (err && err->code == ENOENT)
      husk_fail(err, ENOENT, "tenant `%s` not found", tenant_id);
    return -1;
  }
  /* Committed: only now does the caller learn the key. */
  memcpy(plaintext, ks.text, STATE_KEY_SIZE);
  if (out)
    *out = k;
  return 0;
}

int state_key_authenticate(struct state *st, const char *presented, struct state_key *out,
                           struct husk_err *err) {
  /* One message for every refusal: a caller probing keys learns nothing
   * about why a guess failed. */
  static const char denied[] = "invalid or revoked API key";
  size_t n = presented ? strnlen(presented, STATE_KEY_LEN + 1) : 0;
  if (!presented || !key_well_formed(presented, n))
    return husk_fail(err, EACCES, "%s", denied);
  unsigned char hash[KEY_HASH_BYTES];
  if (key_hash(presented, n, hash, err) < 0)
    return -1;

  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "SELECT id, tenant_id, created_ms, revoked_ms, hash FROM api_keys WHERE hash = ?1",
                 err) < 0)
    return -1;
  int rc = db_blob(s, 1, hash, sizeof hash);
  if (rc)
    return db_fail(st, err, rc, "cannot bind key hash");
  int r = db_step_row(st, s, "cannot look up key", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, EACCES, "%s", denied);
  const void *stored = sqlite3_column_blob(s, 4);
  if (!stored || sqlite3_column_bytes(s, 4) != KEY_HASH_BYTES ||
      CRYPTO_memcmp(stored, hash, KEY_HASH_BYTES) != 0)
    return husk_fail(err, EACCES, "%s", denied);
  struct state_key k;
  if (read_key(s, &k, err) < 0)
    return -1;
  if (k.revoked_ms != 0)
    return husk_fail(err, EACCES, "%s", denied);
  if (out)
    *out = k;
  return 0;
}

int state_key_revoke(struct state *st, const char *tenant_id, const char *key_id,
                     struct husk_err *err) {
  if ((tenant_id && check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0) ||
      check_id("key id", key_id, STATE_KEY_ID_SIZE, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *s = NULL;
  /* A second revocation matches the row (so it succeeds) but keeps the
   * first time: the audit trail says when the key stopped working. */
  if (db_prepare(st, &s,
                 "UPDATE api_keys SET revoked_ms = CASE WHEN revoked_ms = 0 THEN ?3 "
                 "ELSE revoked_ms END WHERE id = ?1 AND (?2 IS NULL OR tenant_id = ?2)",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, key_id)) || (rc = db_text(s, 2, tenant_id)) ||
      (rc = db_int(s, 3, state_now_ms())))
    return db_fail(st, err, rc, "cannot bind key");
  int n = db_step_done(st, s, "cannot revoke key", err);
  if (n < 0)
    return -1;
  if (n == 0)
    return husk_fail(err, ENOENT, "key `%s` not found", key_id);
  /* What the key minted ends with it, in the same transaction: a caller
   * holding a leaked API key cannot keep S3 access through keys it made. */
  cleanup_stmt sqlite3_stmt *m = NULL;
  if (db_prepare(st, &m,
                 "UPDATE s3_keys SET revoked_ms = ?2 WHERE api_key_id = ?1 AND revoked_ms = 0",
                 err) < 0)
    return -1;
  if ((rc = db_text(m, 1, key_id)) || (rc = db_int(m, 2, state_now_ms())))
    return db_fail(st, err, rc, "cannot bind key");
  if (db_step_done(st, m, "cannot revoke the key's S3 keys", err) < 0)
    return -1;
  db_fault_point("key_revoke");
  return db_commit(&txn, err);
}

int state_key_list(struct state *st, const char *tenant_id,
                   int (*cb)(void *ctx, const struct state_key *k), void *ctx,
                   struct husk_err *err) {
  if (tenant_id && check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_key)};
  const struct db_arg tenant = DB_TEXT(tenant_id);
  if (db_rows_select(st, &rows,
                     tenant_id ? "SELECT id, tenant_id, created_ms, revoked_ms FROM api_keys "
                                 "WHERE tenant_id = ?1 ORDER BY created_ms, id"
                               : "SELECT id, tenant_id, created_ms, revoked_ms FROM api_keys "
                                 "ORDER BY created_ms, id",
                     &tenant, tenant_id ? 1 : 0, read_key, "cannot list keys", err) < 0)
    return -1;
  return db_rows_each(&rows, rows.n, cb, ctx);
}
