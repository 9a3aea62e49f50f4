/* Unit tests for the secrets vault (src/egress/vault.c): values round-trip,
 * are sealed at rest (no plaintext in the database files), bound to their
 * tenant and name, validated, and the key file is created 0600 and
 * refused when loose. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egress/vault.h"
#include "state/egress_state.h"
#include "state/state.h"
#include "unit.h"

static char dir[64];
static struct state *st;
static char tenant[STATE_TENANT_ID_SIZE], tenant2[STATE_TENANT_ID_SIZE];

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/husk-vault-XXXXXX");
  if (!mkdtemp(dir))
    abort();
  char db[128];
  snprintf(db, sizeof db, "%s/husk.db", dir);
  struct husk_err err;
  struct state_tenant t;
  if (state_open(&st, db, &err) < 0 || state_tenant_create(st, "acme", -1, -1, &t, &err) < 0)
    abort();
  snprintf(tenant, sizeof tenant, "%s", t.id);
  if (state_tenant_create(st, "other", -1, -1, &t, &err) < 0)
    abort();
  snprintf(tenant2, sizeof tenant2, "%s", t.id);
}

static bool file_has(const char *path, const char *needle) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return false;
  size_t cap = 1 << 22, n = 0;
  char *buf = malloc(cap);
  n = fread(buf, 1, cap, f);
  fclose(f);
  bool found = memmem(buf, n, needle, strlen(needle)) != NULL;
  free(buf);
  return found;
}

TEST(round_trip_and_at_rest) {
  struct egress_vault *v;
  struct husk_err err;
  CHECK(egress_vault_open(&v, st, dir, &err) == 0);
  const char *secret = "ghp_unit_test_secret_value_0123456789";
  CHECK(egress_vault_put(v, tenant, "GH", secret, strlen(secret), &err) == 0);
  char *out;
  size_t len;
  CHECK(egress_vault_get(v, tenant, "GH", &out, &len, &err) == 0);
  CHECK(len == strlen(secret) && !memcmp(out, secret, len));
  egress_vault_wipe(out, len);
  /* Another tenant, or another name, does not see it. */
  CHECK(egress_vault_get(v, tenant2, "GH", &out, &len, &err) < 0 && err.code == ENOENT);
  CHECK(egress_vault_exists(v, tenant, "GH", &err) == 0);
  CHECK(egress_vault_exists(v, tenant, "NOPE", &err) < 0 && err.code == ENOENT);
  /* No plaintext in the database or its WAL. */
  char p[160];
  snprintf(p, sizeof p, "%s/husk.db", dir);
  CHECK(!file_has(p, secret));
  snprintf(p, sizeof p, "%s/husk.db-wal", dir);
  CHECK(!file_has(p, secret));
  /* A sealed value moved to another tenant's row does not open. */
  uint8_t *sealed;
  size_t sl;
  CHECK(state_secret_get(st, tenant, "GH", &sealed, &sl, &err) == 0);
  CHECK(state_secret_put(st, tenant2, "GH", sealed, sl, &err) == 0);
  CHECK(egress_vault_get(v, tenant2, "GH", &out, &len, &err) < 0 && err.code == EUCLEAN);
  CHECK(state_secret_put(st, tenant, "GH2", sealed, sl, &err) == 0);
  CHECK(egress_vault_get(v, tenant, "GH2", &out, &len, &err) < 0 && err.code == EUCLEAN);
  /* Tampering is detected. */
  sealed[sl - 1] ^= 1;
  CHECK(state_secret_put(st, tenant, "GH3", sealed, sl, &err) == 0);
  CHECK(egress_vault_get(v, tenant, "GH3", &out, &len, &err) < 0);
  free(sealed);
  /* Replace, list, delete. */
  CHECK(egress_vault_put(v, tenant, "GH", "new-value", 9, &err) == 0);
  CHECK(egress_vault_get(v, tenant, "GH", &out, &len, &err) == 0 && len == 9 && !memcmp(out, "new-value", 9));
  egress_vault_wipe(out, len);
  CHECK(egress_vault_delete(v, tenant, "GH", &err) == 0);
  CHECK(egress_vault_delete(v, tenant, "GH", &err) < 0 && err.code == ENOENT);
  egress_vault_close(v);
  /* The same key file opens the remaining values after a restart. */
  CHECK(egress_vault_open(&v, st, dir, &err) == 0);
  CHECK(egress_vault_put(v, tenant, "K", "v1", 2, &err) == 0);
  egress_vault_close(v);
  CHECK(egress_vault_open(&v, st, dir, &err) == 0);
  CHECK(egress_vault_get(v, tenant, "K", &out, &len, &err) == 0 && len == 2);
  egress_vault_wipe(out, len);
  egress_vault_close(v);
}

TEST(bad_input) {
  struct egress_vault *v;
  struct husk_err err;
  CHECK(egress_vault_open(&v, st, dir, &err) == 0);
  CHECK(egress_vault_put(v, tenant, "", "x", 1, &err) < 0 && err.code == EINVAL);
  CHECK(egress_vault_put(v, tenant, "1ABC", "x", 1, &err) < 0);
  CHECK(egress_vault_put(v, tenant, "A-B", "x", 1, &err) < 0);
  CHECK(egress_vault_put(v, tenant, "OK", "", 0, &err) < 0);
  CHECK(egress_vault_put(v, tenant, "OK", "a\r\nb", 4, &err) < 0);
  CHECK(egress_vault_put(v, tenant, "OK", "a\0b", 3, &err) < 0);
  char *big = malloc(EGRESS_SECRET_MAX + 1);
  memset(big, 'a', EGRESS_SECRET_MAX + 1);
  CHECK(egress_vault_put(v, tenant, "OK", big, EGRESS_SECRET_MAX + 1, &err) < 0);
  CHECK(egress_vault_put(v, tenant, "OK", big, EGRESS_SECRET_MAX, &err) == 0);
  free(big);
  CHECK(egress_vault_put(v, "t_nosuchtenant", "OK", "x", 1, &err) < 0 && err.code == ENOENT);
  /* The message never quotes the value. */
  CHECK(egress_vault_put(v, tenant, "OK", "zq9v\x01alue", 10, &err) < 0 && !strstr(err.msg, "zq9v"));
  egress_vault_close(v);
}

static int count_names(void *ctx, const char *name, int64_t c, int64_t u) {
  (void)c, (void)u;
  if (!strncmp(name, "__husk_", 7))
    ((int *)ctx)[1]++;
  ((int *)ctx)[0]++;
  return 0;
}

/* The daemon's own secrets: reached only by the _reserved functions. */
TEST(reserved_names) {
  struct egress_vault *v;
  struct husk_err err;
  CHECK(egress_vault_open(&v, st, dir, &err) == 0);
  const char *name = "__husk_oidc_client_secret";
  CHECK(egress_vault_put(v, tenant, name, "s3cret", 6, &err) < 0 && err.code == EINVAL);
  CHECK(egress_vault_put_reserved(v, tenant, "PLAIN", "x", 1, &err) < 0 && err.code == EINVAL);
  CHECK(egress_vault_put_reserved(v, tenant, name, "s3cret", 6, &err) == 0);
  char *out = NULL;
  size_t len = 0;
  CHECK(egress_vault_get(v, tenant, name, &out, &len, &err) < 0 && err.code == ENOENT);
  CHECK(egress_vault_exists(v, tenant, name, &err) < 0 && err.code == ENOENT);
  CHECK(egress_vault_delete(v, tenant, name, &err) < 0 && err.code == ENOENT);
  int counts[2] = {0, 0};
  CHECK(egress_vault_list(v, tenant, count_names, counts, &err) == 0 && counts[1] == 0);
  CHECK(egress_vault_get_reserved(v, tenant, name, &out, &len, &err) == 0 && len == 6 &&
        !memcmp(out, "s3cret", 6));
  egress_vault_wipe(out, len);
  CHECK(egress_vault_delete_reserved(v, tenant, name, &err) == 0);
  CHECK(egress_vault_delete_reserved(v, tenant, name, &err) < 0 && err.code == ENOENT);
  egress_vault_close(v);
}

TEST(key_file) {
  char p[128];
  snprintf(p, sizeof p, "%s/vault.key", dir);
  struct stat sb;
  CHECK(stat(p, &sb) == 0 && (sb.st_mode & 0777) == 0600 && sb.st_size == 32);
  chmod(p, 0644);
  struct egress_vault *v;
  struct husk_err err;
  CHECK(egress_vault_open(&v, st, dir, &err) < 0 && err.code == EPERM);
  chmod(p, 0600);
  CHECK(egress_vault_open(&v, st, dir, &err) == 0);
  egress_vault_close(v);
}

int main(void) {
  setup();
  RUN(round_trip_and_at_rest);
  RUN(bad_input);
  RUN(reserved_names);
  RUN(key_file);
  state_close(st);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    printf("# could not remove %s\n", dir);
  return unit_done();
}
