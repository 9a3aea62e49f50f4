/* Users and OAuth in the core (src/auth/, state/users.c, state/oauth_state.c):
 * roles and scopes; users and every refusal; sign-in that answers the same
 * for every failure, and its lockout; client registration and redirect
 * matching; codes with PKCE, used once; refresh rotation and reuse;
 * revocation; audiences; a user's change ending its tokens; the audit's
 * user fields; a tenant's deletion taking its users along.  A fake clock
 * (auth_config.clock_ms) drives every expiry. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth/auth.h"
#include "auth/auth_internal.h"
#include "state/state.h"
#include "unit.h"

#define CHECK_OK(expr)                                                                             \
  do {                                                                                             \
    husk_err_clear(&err);                                                                          \
    if ((expr) != 0) {                                                                             \
      printf("#   %s:%d: %s: %s\n", __FILE__, __LINE__, #expr, err.msg);                           \
      unit_cur_failed = 1;                                                                         \
    }                                                                                              \
  } while (0)
#define CHECK_ERR(expr, want)                                                                      \
  do {                                                                                             \
    husk_err_clear(&err);                                                                          \
    int r_ = (expr);                                                                               \
    if (r_ != -1 || err.code != (want)) {                                                          \
      printf("#   %s:%d: %s: got %d code %d (%s), want %d\n", __FILE__, __LINE__, #expr, r_,       \
             err.code, err.msg, (want));                                                           \
      unit_cur_failed = 1;                                                                         \
    }                                                                                              \
  } while (0)

#define PW "correct horse battery"
/* Two client addresses, as the front names them. */
#define SRC_A "192.0.2.1"
#define SRC_B "192.0.2.2"
#define MCP "https://husk.example/mcp"
#define V1 "https://husk.example/v1"
#define CB "https://claude.ai/api/mcp/auth_callback"
#define LOOP "http://127.0.0.1:33418/callback"
/* A PKCE pair: CHALLENGE is base64url(SHA-256(VERIFIER)) without padding
 * (python3: base64.urlsafe_b64encode(hashlib.sha256(v).digest())). */
#define VERIFIER "dBjftJeZ4CVP-mJ92K1uOYtrzcM9kqXvpOoMm2KOcHM"
#define CHALLENGE "3clj5LhMl7kb12BFcC2Cy4G0xcMUxM7qRrlJD0tcBtk"

static char dir[64];
static struct state *st;
static struct auth *au;
static struct state_tenant t1, t2;
static int64_t fake_now;
static int64_t clock_fake(void) { return __atomic_load_n(&fake_now, __ATOMIC_SEQ_CST); }
static void clock_add(int64_t ms) { __atomic_add_fetch(&fake_now, ms, __ATOMIC_SEQ_CST); }

static bool prefixed(const char *s, const char *p) {
  return strlen(s) == AUTH_TOKEN_SIZE - 1 && !strncmp(s, p, strlen(p));
}

/* ---- roles and scopes ---- */

TEST(roles_and_scopes) {
  struct husk_err err;
  enum auth_role r;
  CHECK(auth_role_parse("viewer", &r) == 0 && r == AUTH_ROLE_VIEWER);
  CHECK(auth_role_parse("member", &r) == 0 && r == AUTH_ROLE_MEMBER);
  CHECK(auth_role_parse("admin", &r) == 0 && r == AUTH_ROLE_ADMIN);
  CHECK(auth_role_parse("Admin", &r) == -1 && auth_role_parse("", &r) == -1 &&
        auth_role_parse(NULL, &r) == -1);
  CHECK_STR(auth_role_name(AUTH_ROLE_MEMBER), "member");
  CHECK(auth_role_scopes(AUTH_ROLE_VIEWER) == (AUTH_SCOPE_SANDBOX_READ | AUTH_SCOPE_STORAGE_READ));
  CHECK(auth_role_scopes(AUTH_ROLE_MEMBER) == (AUTH_SCOPE_ALL & ~AUTH_SCOPE_USERS));
  CHECK(auth_role_scopes(AUTH_ROLE_ADMIN) == AUTH_SCOPE_ALL);

  unsigned s = 99;
  CHECK_OK(auth_scopes_parse("", &s, &err));
  CHECK(s == 0);
  CHECK_OK(auth_scopes_parse("sandbox  storage:read ", &s, &err));
  CHECK(s == (AUTH_SCOPE_SANDBOX | AUTH_SCOPE_STORAGE_READ));
  CHECK_OK(
      auth_scopes_parse("users runs sandbox:read storage:write sandbox storage:read", &s, &err));
  CHECK(s == AUTH_SCOPE_ALL);
  CHECK_ERR(auth_scopes_parse("sandbox bogus", &s, &err), EINVAL);
  CHECK(strstr(err.msg, "`bogus`") != NULL);
  CHECK_ERR(auth_scopes_parse("sandbox:", &s, &err), EINVAL);
  CHECK_ERR(auth_scopes_parse("sand\x1b[0m", &s, &err), EINVAL); /* not echoed */
  CHECK(strchr(err.msg, 0x1b) == NULL);

  char buf[256];
  auth_scopes_format(AUTH_SCOPE_ALL, buf, sizeof buf);
  CHECK_STR(buf, "sandbox sandbox:read storage:read storage:write runs users");
  auth_scopes_format(AUTH_SCOPE_DEFAULT, buf, sizeof buf);
  CHECK_STR(buf, "sandbox sandbox:read storage:read storage:write");
  auth_scopes_format(0, buf, sizeof buf);
  CHECK_STR(buf, "");
  auth_scopes_format(AUTH_SCOPE_ALL, buf, 12); /* no name cut in half */
  CHECK_STR(buf, "sandbox");
  CHECK_OK(auth_scopes_parse(buf, &s, &err));
}

/* ---- users ---- */

static char alice[AUTH_USER_ID_SIZE], carol_admin[AUTH_USER_ID_SIZE];

struct names {
  char v[8][AUTH_NAME_MAX + 1];
  int n;
};
static int collect_name(void *ctx, const struct auth_user *u) {
  struct names *n = ctx;
  if (n->n < 8)
    snprintf(n->v[n->n++], sizeof n->v[0], "%s", u->name);
  return 0;
}

TEST(users) {
  struct husk_err err;
  struct auth_user u, g;
  CHECK_OK(
      auth_user_create(au, t1.id, "Alice@Example.com", "Alice A.", AUTH_ROLE_MEMBER, PW, &u, &err));
  CHECK_STR(u.name, "alice@example.com");
  CHECK(!strncmp(u.id, "u_", 2) && strlen(u.id) == 26);
  CHECK(u.has_password && !u.disabled && u.role == AUTH_ROLE_MEMBER && u.created_ms == fake_now);
  CHECK_STR(u.tenant_id, t1.id);
  snprintf(alice, sizeof alice, "%s", u.id);
  CHECK_OK(auth_user_create(au, t1.id, "carol", NULL, AUTH_ROLE_ADMIN, PW, &u, &err));
  snprintf(carol_admin, sizeof carol_admin, "%s", u.id);
  CHECK_STR(u.display_name, "");

  /* Refusals. */
  CHECK_ERR(auth_user_create(au, t1.id, "ALICE@example.com", "", AUTH_ROLE_VIEWER, NULL, &u, &err),
            EEXIST);
  const char *bad_names[] = {"",
                             "a b",
                             "é",
                             "a/b",
                             "a:b",
                             "tab\t",
                             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
  for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++)
    CHECK_ERR(auth_user_create(au, t1.id, bad_names[i], "", AUTH_ROLE_VIEWER, NULL, &u, &err),
              EINVAL);
  CHECK_OK(auth_user_create(au, t1.id,
                            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "",
                            AUTH_ROLE_VIEWER, NULL, &u, &err)); /* 64 */
  CHECK_OK(auth_user_delete(au, t1.id, u.id, &err));
  char long_display[130];
  memset(long_display, 'd', 129);
  long_display[129] = '\0';
  /* Control characters, and those that change how a name shows without
   * showing: bidi overrides and isolates (U+202E, U+2066), marks (U+200F,
   * U+061C), zero-width ones (U+200B, U+2060), the BOM, a line separator. */
  const char *bad_display[] = {"new\nline", "esc\x1b", "c1 \xc2\x85", "\xff\xfe", long_display,
                               "evil\xe2\x80\xaegpj.exe", "a\xe2\x81\xa6" "b", "rtl\xe2\x80\x8f",
                               "ar\xd8\x9c", "zw\xe2\x80\x8bsp", "wj\xe2\x81\xa0", "\xef\xbb\xbf" "bom",
                               "ls\xe2\x80\xa8"};
  for (size_t i = 0; i < sizeof bad_display / sizeof bad_display[0]; i++)
    CHECK_ERR(auth_user_create(au, t1.id, "dave", bad_display[i], AUTH_ROLE_VIEWER, NULL, &u, &err),
              EINVAL);
  long_display[128] = '\0';
  CHECK_ERR(auth_user_create(au, t1.id, "dave", "ok", AUTH_ROLE_VIEWER, "short", &u, &err), EINVAL);
  char long_pw[258];
  memset(long_pw, 'p', 257);
  long_pw[257] = '\0';
  CHECK_ERR(auth_user_create(au, t1.id, "dave", "ok", AUTH_ROLE_VIEWER, long_pw, &u, &err), EINVAL);
  CHECK_ERR(auth_user_create(au, t1.id, "dave", "ok", (enum auth_role)7, NULL, &u, &err), EINVAL);
  CHECK_ERR(auth_user_create(au, "t_000000000000000000000000", "dave", "", AUTH_ROLE_VIEWER, NULL,
                             &u, &err),
            ENOENT);
  CHECK_OK(auth_user_create(au, t1.id, "dave", "Dävé ✓", AUTH_ROLE_VIEWER, NULL, &u, &err));
  CHECK(!u.has_password);
  char dave[AUTH_USER_ID_SIZE];
  snprintf(dave, sizeof dave, "%s", u.id);
  CHECK_OK(auth_user_create(au, t2.id, "alice@example.com", long_display, AUTH_ROLE_MEMBER, NULL,
                            &u, &err)); /* names are per tenant; 128 bytes of display */
  char t2_alice[AUTH_USER_ID_SIZE];
  snprintf(t2_alice, sizeof t2_alice, "%s", u.id);

  /* Another tenant's user is nobody's business. */
  CHECK_OK(auth_user_get(au, t1.id, alice, &g, &err));
  CHECK_STR(g.display_name, "Alice A.");
  CHECK_ERR(auth_user_get(au, t2.id, alice, &g, &err), ENOENT);
  CHECK_ERR(auth_user_get(au, t1.id, "u_nope", &g, &err), ENOENT);
  CHECK_ERR(auth_user_get(au, t1.id, "../etc", &g, &err), ENOENT);
  enum auth_role viewer = AUTH_ROLE_VIEWER;
  struct auth_user_change ch = {.role = &viewer};
  CHECK_ERR(auth_user_update(au, t2.id, alice, &ch, &g, &err), ENOENT);
  CHECK_ERR(auth_user_delete(au, t2.id, alice, &err), ENOENT);

  struct names n = {0};
  CHECK_OK(auth_user_list(au, t1.id, collect_name, &n, &err));
  CHECK(n.n == 3);
  CHECK_STR(n.v[0], "alice@example.com");
  CHECK_STR(n.v[1], "carol");
  CHECK_STR(n.v[2], "dave");

  /* Update: each field given changes, the others stay. */
  ch = (struct auth_user_change){.display_name = "Dave D."};
  CHECK_ERR(auth_user_update(au, t1.id, t2_alice, &ch, &g, &err), ENOENT);
  CHECK_OK(auth_user_update(au, t1.id, dave, &ch, &g, &err));
  CHECK_STR(g.display_name, "Dave D.");
  CHECK(g.role == AUTH_ROLE_VIEWER && !g.has_password);
  ch = (struct auth_user_change){.role = &viewer, .password = PW};
  CHECK_OK(auth_user_update(au, t1.id, dave, &ch, &g, &err));
  CHECK(g.has_password && g.role == AUTH_ROLE_VIEWER);
  CHECK_STR(g.display_name, "Dave D.");
  ch = (struct auth_user_change){.display_name = "bad\x7f"};
  CHECK_ERR(auth_user_update(au, t1.id, alice, &ch, &g, &err), EINVAL);
  ch = (struct auth_user_change){.password = "too short"};
  CHECK_ERR(auth_user_update(au, t1.id, alice, &ch, &g, &err), EINVAL);

  /* Delete: gone from get and list, kept for the audit, name free again. */
  CHECK_OK(auth_user_create(au, t1.id, "erin", "", AUTH_ROLE_VIEWER, NULL, &u, &err));
  CHECK_OK(auth_user_delete(au, t1.id, u.id, &err));
  CHECK_ERR(auth_user_delete(au, t1.id, u.id, &err), ENOENT);
  CHECK_ERR(auth_user_get(au, t1.id, u.id, &g, &err), ENOENT);
  CHECK_OK(auth_user_get_any(au, NULL, u.id, &g, &err));
  CHECK(g.deleted_ms != 0);
  CHECK_STR(g.name, "erin");
  CHECK_ERR(auth_user_get_any(au, t2.id, u.id, &g, &err), ENOENT);
  CHECK_OK(auth_user_create(au, t1.id, "erin", "", AUTH_ROLE_VIEWER, NULL, &g, &err));
  CHECK(strcmp(g.id, u.id) != 0);
  n.n = 0;
  CHECK_OK(auth_user_list(au, t1.id, collect_name, &n, &err));
  CHECK(n.n == 4);
}

/* A tenant has at most AUTH_USERS_MAX users not deleted. */
TEST(user_bounds) {
  struct husk_err err;
  struct state_tenant t;
  CHECK_OK(state_tenant_create(st, "crowd", -1, -1, &t, &err));
  struct auth_user u;
  state_defer_begin(st); /* one sync for the thousand */
  int made = 0;
  for (int i = 0; i < AUTH_USERS_MAX; i++) {
    char name[16];
    snprintf(name, sizeof name, "u%d", i);
    if (auth_user_create(au, t.id, name, "", AUTH_ROLE_VIEWER, NULL, &u, &err) == 0)
      made++;
  }
  CHECK_OK(state_defer_end(st, &err));
  CHECK(made == AUTH_USERS_MAX);
  CHECK_ERR(auth_user_create(au, t.id, "one-more", "", AUTH_ROLE_VIEWER, NULL, &u, &err), EDQUOT);
  /* A deleted user does not count. */
  CHECK_OK(auth_user_delete(au, t.id, u.id, &err));
  CHECK_OK(auth_user_create(au, t.id, "one-more", "", AUTH_ROLE_VIEWER, NULL, &u, &err));
}

/* ---- sign-in ---- */

TEST(sign_in) {
  struct husk_err err;
  struct auth_user u;
  char tid[STATE_TENANT_ID_SIZE];
  CHECK_OK(auth_sign_in(au, "one", "ALICE@example.com", PW, SRC_A, &u, tid, &err));
  CHECK_STR(u.id, alice);
  CHECK_STR(tid, t1.id);
  /* Every failure is EACCES, with one message. */
  char msg[sizeof err.msg];
  CHECK_ERR(auth_sign_in(au, "one", "alice@example.com", "wrong password!", SRC_A, &u, tid, &err), EACCES);
  snprintf(msg, sizeof msg, "%s", err.msg);
  CHECK_STR(tid, t1.id); /* a known user's tenant, for the audit */
  CHECK_ERR(auth_sign_in(au, "one", "nobody", PW, SRC_A, &u, tid, &err), EACCES);
  CHECK_STR(err.msg, msg);
  CHECK_STR(tid, "");
  CHECK_ERR(auth_sign_in(au, "no such org", "alice@example.com", PW, SRC_A, &u, tid, &err), EACCES);
  CHECK_STR(err.msg, msg);
  CHECK_STR(tid, "");
  CHECK_ERR(auth_sign_in(au, "two", "alice@example.com", PW, SRC_A, &u, tid, &err),
            EACCES); /* no password */
  CHECK_ERR(auth_sign_in(au, "one", "bad name!", PW, SRC_A, &u, tid, &err), EACCES);
  CHECK_ERR(auth_sign_in(au, NULL, NULL, NULL, SRC_A, &u, tid, &err), EACCES);
  char huge[1024];
  memset(huge, 'x', sizeof huge - 1);
  huge[sizeof huge - 1] = '\0';
  CHECK_ERR(auth_sign_in(au, "one", "alice@example.com", huge, SRC_A, &u, tid, &err), EACCES);
  /* Disabled: the right password does not help, and its tokens are gone
   * (checked in `user_changes_end_tokens`). */
  bool yes = true, no = false;
  struct auth_user_change ch = {.disabled = &yes};
  CHECK_OK(auth_user_update(au, t1.id, carol_admin, &ch, &u, &err));
  CHECK(u.disabled);
  CHECK_ERR(auth_sign_in(au, "one", "carol", PW, SRC_A, &u, tid, &err), EACCES);
  CHECK_STR(err.msg, msg);
  ch.disabled = &no;
  CHECK_OK(auth_user_update(au, t1.id, carol_admin, &ch, &u, &err));
  CHECK_OK(auth_sign_in(au, "one", "carol", PW, SRC_A, &u, tid, &err));
  CHECK(u.role == AUTH_ROLE_ADMIN);
}

TEST(lockout) {
  struct husk_err err;
  struct auth_user u, bob;
  struct state_user row;
  char tid[STATE_TENANT_ID_SIZE];
  CHECK_OK(auth_user_create(au, t1.id, "bob", "", AUTH_ROLE_VIEWER, PW, &bob, &err));
  /* Four failures, then a success: the count starts again. */
  for (int i = 0; i < 4; i++)
    CHECK_ERR(auth_sign_in(au, "one", "bob", "not the password", SRC_A, &u, tid, &err), EACCES);
  CHECK_OK(auth_sign_in(au, "one", "bob", PW, SRC_A, &u, tid, &err));
  for (int i = 0; i < 4; i++)
    CHECK_ERR(auth_sign_in(au, "one", "bob", "not the password", SRC_A, &u, tid, &err), EACCES);
  /* A failure writes nothing: a known user's costs what an unknown one's
   * does (the counts are in memory). */
  CHECK_OK(state_user_get(st, t1.id, bob.id, false, &row, &err));
  CHECK(row.failed_count == 0 && row.failed_since_ms == 0 && row.locked_until_ms == 0);
  /* Failures older than the window do not add up. */
  clock_add(16 * 60000);
  CHECK_ERR(auth_sign_in(au, "one", "bob", "not the password", SRC_A, &u, tid, &err), EACCES);
  CHECK_OK(auth_sign_in(au, "one", "bob", PW, SRC_A, &u, tid, &err));
  /* Five in the window lock it from that address, even for the right
   * password ... */
  for (int i = 0; i < 5; i++)
    CHECK_ERR(auth_sign_in(au, "one", "bob", "not the password", SRC_A, &u, tid, &err), EACCES);
  CHECK_ERR(auth_sign_in(au, "one", "bob", PW, SRC_A, &u, tid, &err), EAGAIN);
  CHECK_STR(tid, t1.id);
  /* ... but not from another: a guesser cannot lock the person out. */
  CHECK_OK(auth_sign_in(au, "one", "bob", PW, SRC_B, &u, tid, &err));
  CHECK_STR(u.id, bob.id);
  CHECK_ERR(auth_sign_in(au, "one", "bob", PW, SRC_A, &u, tid, &err), EAGAIN);
  clock_add(14 * 60000);
  CHECK_ERR(auth_sign_in(au, "one", "bob", PW, SRC_A, &u, tid, &err), EAGAIN);
  clock_add(60001);
  CHECK_OK(auth_sign_in(au, "one", "bob", PW, SRC_A, &u, tid, &err));
  /* An unknown name locks the same way (nothing tells the two apart). */
  for (int i = 0; i < 5; i++)
    CHECK_ERR(auth_sign_in(au, "one", "nobody-at-all", PW, SRC_A, &u, tid, &err), EACCES);
  CHECK_ERR(auth_sign_in(au, "one", "nobody-at-all", PW, SRC_A, &u, tid, &err), EAGAIN);
  /* An administrator's new password unlocks. */
  for (int i = 0; i < 5; i++)
    CHECK_ERR(auth_sign_in(au, "one", "bob", "not the password", SRC_A, &u, tid, &err), EACCES);
  CHECK_ERR(auth_sign_in(au, "one", "bob", PW, SRC_A, &u, tid, &err), EAGAIN);
  struct auth_user_change ch = {.password = "a brand new password"};
  CHECK_OK(auth_user_update(au, t1.id, bob.id, &ch, &u, &err));
  CHECK_ERR(auth_sign_in(au, "one", "bob", PW, SRC_A, &u, tid, &err), EACCES);
  CHECK_OK(auth_sign_in(au, "one", "bob", "a brand new password", SRC_A, &u, tid, &err));
}

/* Guessing spread over many addresses: 100 failures in the window lock
 * the user for every address, a fresh one too. */
TEST(lockout_distributed) {
  struct husk_err err;
  struct auth_user u, dan;
  char tid[STATE_TENANT_ID_SIZE], src[32];
  CHECK_OK(auth_user_create(au, t1.id, "dan", "", AUTH_ROLE_VIEWER, PW, &dan, &err));
  for (int i = 0; i < 100; i++) {
    snprintf(src, sizeof src, "198.51.100.%d", i / 4); /* 4 from each: none locked alone */
    CHECK_ERR(auth_sign_in(au, "one", "dan", "not the password", src, &u, tid, &err), EACCES);
  }
  CHECK_ERR(auth_sign_in(au, "one", "dan", PW, "203.0.113.1", &u, tid, &err), EAGAIN);
  clock_add(15 * 60000 + 1);
  CHECK_OK(auth_sign_in(au, "one", "dan", PW, "203.0.113.1", &u, tid, &err));
}

/* A hash waits for a slot, and gives up with EBUSY. */
TEST(hash_gate) {
  struct husk_err err;
  struct auth *a1;
  struct auth_config cfg = {
      .st = st, .hash_concurrency = 1, .hash_wait_ms = 50, .clock_ms = clock_fake};
  CHECK_OK(auth_open(&a1, &cfg, &err));
  if (!a1)
    return;
  struct password_slot slot = {0};
  CHECK_OK(password_slot_take(a1, &slot, &err));
  struct auth_user u;
  char tid[STATE_TENANT_ID_SIZE];
  CHECK_ERR(auth_sign_in(a1, "one", "alice@example.com", PW, SRC_A, &u, tid, &err), EBUSY);
  CHECK_ERR(auth_user_create(a1, t1.id, "frank", "", AUTH_ROLE_VIEWER, PW, &u, &err), EBUSY);
  password_slot_give(&slot);
  CHECK_OK(auth_sign_in(a1, "one", "alice@example.com", PW, SRC_A, &u, tid, &err));
  auth_close(a1);
  struct auth_config bad = {.st = st, .access_ttl_s = -1};
  CHECK_ERR(auth_open(&a1, &bad, &err), EINVAL);
  CHECK(a1 == NULL);
}

/* ---- clients ---- */

static char pub_client[AUTH_CLIENT_ID_SIZE], conf_client[AUTH_CLIENT_ID_SIZE];

TEST(clients) {
  struct husk_err err;
  struct auth_client c, g;
  char secret[AUTH_TOKEN_SIZE] = "untouched";
  const char *uris[] = {CB, LOOP, "http://localhost/cb?x=1", "https://[2001:db8::1]:8443/cb"};
  CHECK_OK(auth_client_register(au, "Claude", uris, 4, NULL, &c, secret, &err));
  CHECK(!strncmp(c.id, "oc_", 3) && strlen(c.id) == 27);
  CHECK(!c.confidential && c.n_redirects == 4);
  CHECK_STR(c.auth_method, "none");
  CHECK_STR(secret, "");
  snprintf(pub_client, sizeof pub_client, "%s", c.id);
  CHECK_OK(auth_client_get(au, c.id, &g, &err));
  CHECK_STR(g.name, "Claude");
  CHECK(g.n_redirects == 4);
  CHECK_STR(g.redirect_uris[1], LOOP);
  CHECK_STR(g.redirect_uris[3], "https://[2001:db8::1]:8443/cb");
  CHECK_ERR(auth_client_get(au, "oc_000000000000000000000000", &g, &err), ENOENT);
  CHECK_ERR(auth_client_get(au, "no such thing!", &g, &err), ENOENT);

  CHECK_OK(auth_client_register(au, NULL, uris, 1, "client_secret_basic", &c, secret, &err));
  CHECK(c.confidential && prefixed(secret, "hcs_"));
  snprintf(conf_client, sizeof conf_client, "%s", c.id);
  CHECK_OK(auth_client_check_secret(au, &c, secret, &err));
  char wrong[AUTH_TOKEN_SIZE];
  snprintf(wrong, sizeof wrong, "%s", secret);
  wrong[10] = wrong[10] == 'a' ? 'b' : 'a';
  CHECK_ERR(auth_client_check_secret(au, &c, wrong, &err), EACCES);
  CHECK_ERR(auth_client_check_secret(au, &c, "", &err), EACCES);
  CHECK_ERR(auth_client_check_secret(au, &c, NULL, &err), EACCES);
  CHECK_OK(auth_client_get(au, pub_client, &g, &err));
  CHECK_ERR(auth_client_check_secret(au, &g, secret, &err), EACCES); /* a public client */

  /* Refusals. */
  char long_uri[AUTH_REDIRECT_MAX + 2];
  snprintf(long_uri, sizeof long_uri, "https://a.example/%0*d", AUTH_REDIRECT_MAX + 1 - 18, 0);
  CHECK(strlen(long_uri) == AUTH_REDIRECT_MAX + 1);
  const char *bad[] = {
      "http://example.com/cb",
      "http://127.0.0.2/cb",
      "http://localhost.evil.com/",
      "https://a.example/cb#frag",
      "https://user@a.example/cb",
      "https://user:pw@a.example/",
      "https://a.example/c b",
      "https://a.example/\x01",
      "https://a.example/é",
      "ftp://a.example/cb",
      "javascript:alert(1)",
      "https:///nohost",
      "https://a.example:0/cb",
      "https://a.example:99999/",
      "https://a.exa_mple/",
      "https://a.example/\"",
      "https://a.example/<x>",
      "https://a.example\\@b/",
      "https://a.example/it's", /* what /oauth/authorize would refuse, registration refuses */
      "HTTPS://a.example/cb",
      "https://[::1/cb",
      long_uri,
      "",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *one[] = {bad[i]};
    CHECK_ERR(auth_client_register(au, "x", one, 1, NULL, &c, secret, &err), EINVAL);
    if (err.code != EINVAL)
      printf("#   bad[%zu]\n", i);
  }
  long_uri[AUTH_REDIRECT_MAX] = '\0';
  const char *just_right[] = {long_uri};
  CHECK_OK(auth_client_register(au, "x", just_right, 1, NULL, &c, secret, &err));
  const char *nine[9] = {CB, CB, CB, CB, CB, CB, CB, CB, CB};
  CHECK_ERR(auth_client_register(au, "x", nine, 9, NULL, &c, secret, &err), EINVAL);
  CHECK_OK(auth_client_register(au, "x", nine, 8, NULL, &c, secret, &err));
  CHECK_ERR(auth_client_register(au, "x", nine, 0, NULL, &c, secret, &err), EINVAL);
  CHECK_ERR(auth_client_register(au, "x", uris, 1, "private_key_jwt", &c, secret, &err), EINVAL);
  CHECK_ERR(auth_client_register(au, "bad\nname", uris, 1, NULL, &c, secret, &err), EINVAL);
  CHECK_ERR(auth_client_register(au, "Good App\xe2\x80\xae", uris, 1, NULL, &c, secret, &err),
            EINVAL); /* a bidi override in the name the consent page shows */
  char long_name[AUTH_CLIENT_NAME_MAX + 2];
  memset(long_name, 'n', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  CHECK_ERR(auth_client_register(au, long_name, uris, 1, NULL, &c, secret, &err), EINVAL);
  CHECK_ERR(auth_client_register(au, "x", uris, 1, "client_secret_post", &c, NULL, &err), EINVAL);

  /* Redirect matching: exact, except a loopback http URI's port. */
  CHECK_OK(auth_client_get(au, pub_client, &g, &err));
  CHECK(auth_client_redirect_ok(&g, CB));
  CHECK(!auth_client_redirect_ok(&g, CB "/"));
  CHECK(!auth_client_redirect_ok(&g, "https://claude.ai:444/api/mcp/auth_callback"));
  CHECK(!auth_client_redirect_ok(&g, "https://CLAUDE.ai/api/mcp/auth_callback"));
  CHECK(!auth_client_redirect_ok(&g, CB "?x=1"));
  CHECK(auth_client_redirect_ok(&g, LOOP));
  CHECK(auth_client_redirect_ok(&g, "http://127.0.0.1:5555/callback"));
  CHECK(auth_client_redirect_ok(&g, "http://127.0.0.1/callback"));
  CHECK(!auth_client_redirect_ok(&g, "http://127.0.0.1:5555/callback/"));
  CHECK(!auth_client_redirect_ok(&g, "http://[::1]:5555/callback"));
  CHECK(!auth_client_redirect_ok(&g, "http://localhost:5555/callback"));
  CHECK(auth_client_redirect_ok(&g, "http://localhost:8080/cb?x=1"));
  CHECK(!auth_client_redirect_ok(&g, "http://localhost:8080/cb?x=2"));
  CHECK(!auth_client_redirect_ok(&g, "http://127.0.0.1:5555/callback#f"));
  CHECK(!auth_client_redirect_ok(&g, "http://user@127.0.0.1:5555/callback"));
  CHECK(!auth_client_redirect_ok(&g, NULL));
}

/* ---- codes and tokens ---- */

static struct auth_user member(void) {
  struct husk_err err;
  struct auth_user u = {0};
  if (auth_user_get(au, t1.id, alice, &u, &err) < 0)
    printf("# member: %s\n", err.msg);
  return u;
}

static int issue(const struct auth_user *u, const char *client, const char *redirect,
                 const char *resource, unsigned scopes, char code[AUTH_TOKEN_SIZE],
                 struct husk_err *err) {
  struct auth_code_request rq = {.client_id = client,
                                 .redirect_uri = redirect,
                                 .code_challenge = CHALLENGE,
                                 .resource = resource,
                                 .scopes = scopes,
                                 .user = u};
  return auth_code_issue(au, &rq, code, err);
}

/* A fresh pair for `u` through the public client, for MCP. */
static int sign_in_tokens(const struct auth_user *u, struct auth_tokens *t) {
  struct husk_err err;
  char code[AUTH_TOKEN_SIZE];
  if (issue(u, pub_client, CB, MCP, AUTH_SCOPE_SANDBOX | AUTH_SCOPE_STORAGE_READ, code, &err) < 0 ||
      auth_code_exchange(au, code, pub_client, CB, VERIFIER, NULL, t, &err) < 0) {
    printf("# sign_in_tokens: %s\n", err.msg);
    return -1;
  }
  return 0;
}

TEST(codes) {
  struct husk_err err;
  struct auth_user u = member();
  char code[AUTH_TOKEN_SIZE];
  struct auth_tokens t;
  struct auth_grant gr;

  /* What may not become a code. */
  CHECK_ERR(issue(&u, pub_client, "https://evil.example/cb", MCP, AUTH_SCOPE_SANDBOX, code, &err),
            EINVAL);
  CHECK_ERR(issue(&u, "oc_000000000000000000000000", CB, MCP, AUTH_SCOPE_SANDBOX, code, &err),
            ENOENT);
  CHECK_ERR(issue(&u, pub_client, CB, MCP, AUTH_SCOPE_USERS, code, &err), EINVAL); /* a member */
  CHECK_ERR(issue(&u, pub_client, CB, MCP, 0, code, &err), EINVAL);
  CHECK_ERR(issue(&u, pub_client, CB, "", AUTH_SCOPE_SANDBOX, code, &err), EINVAL);
  struct auth_code_request rq = {.client_id = pub_client,
                                 .redirect_uri = CB,
                                 .code_challenge = "plain",
                                 .resource = MCP,
                                 .scopes = AUTH_SCOPE_SANDBOX,
                                 .user = &u};
  CHECK_ERR(auth_code_issue(au, &rq, code, &err), EINVAL);

  /* The exchange, and everything that must match. */
  CHECK_OK(
      issue(&u, pub_client, CB, MCP, AUTH_SCOPE_DEFAULT & auth_role_scopes(u.role), code, &err));
  CHECK(prefixed(code, "hac_"));
  CHECK_ERR(auth_code_exchange(au, code, pub_client, CB,
                               "dBjftJeZ4CVP-mJ92K1uOYtrzcM9kqXvpOoMm2KOcHN", NULL, &t, &err),
            EACCES);
  CHECK_ERR(auth_code_exchange(au, code, pub_client, CB, "short", NULL, &t, &err), EACCES);
  CHECK_ERR(auth_code_exchange(au, code, pub_client, LOOP, VERIFIER, NULL, &t, &err), EACCES);
  CHECK_ERR(auth_code_exchange(au, code, conf_client, CB, VERIFIER, NULL, &t, &err), EACCES);
  /* Another resource than the code's: ENOTSUP (invalid_target). */
  CHECK_ERR(auth_code_exchange(au, code, pub_client, CB, VERIFIER, V1, &t, &err), ENOTSUP);
  char other[AUTH_TOKEN_SIZE];
  snprintf(other, sizeof other, "%s", code);
  other[20] = other[20] == 'a' ? 'b' : 'a';
  CHECK_ERR(auth_code_exchange(au, other, pub_client, CB, VERIFIER, NULL, &t, &err), EACCES);
  CHECK_ERR(auth_code_exchange(au, "hac_short", pub_client, CB, VERIFIER, NULL, &t, &err), EACCES);
  CHECK_OK(auth_code_exchange(au, code, pub_client, CB, VERIFIER, MCP, &t, &err));
  CHECK(prefixed(t.access, "hat_") && prefixed(t.refresh, "hrt_"));
  CHECK(t.expires_in_s == 3600);
  CHECK(t.scopes == AUTH_SCOPE_DEFAULT);
  CHECK_STR(t.user_id, alice);
  CHECK_STR(t.tenant_id, t1.id);
  CHECK_OK(auth_token_check(au, t.access, MCP, &gr, &err));
  CHECK_STR(gr.user_id, alice);
  CHECK_STR(gr.tenant_id, t1.id);
  CHECK_STR(gr.user_name, "alice@example.com");
  CHECK_STR(gr.display_name, "Alice A.");
  CHECK_STR(gr.client_id, pub_client);
  CHECK_STR(gr.client_name, "Claude");
  CHECK(gr.role == AUTH_ROLE_MEMBER && gr.scopes == AUTH_SCOPE_DEFAULT);
  CHECK(gr.expires_ms == fake_now + 3600 * 1000);
  /* Audience: an MCP token is not an API token. */
  CHECK_ERR(auth_token_check(au, t.access, V1, &gr, &err), EACCES);
  CHECK_ERR(auth_token_check(au, t.refresh, MCP, &gr, &err), ENOENT);
  CHECK_ERR(auth_token_check(au, "hat_0000", MCP, &gr, &err), ENOENT);
  CHECK_ERR(auth_token_check(au, NULL, MCP, &gr, &err), ENOENT);

  /* A second use fails and revokes what the first issued. */
  CHECK_ERR(auth_code_exchange(au, code, pub_client, CB, VERIFIER, NULL, &t, &err), EACCES);
  CHECK_ERR(auth_token_check(au, t.access, MCP, &gr, &err), EKEYREVOKED);
  struct auth_tokens later;
  CHECK_ERR(auth_refresh(au, t.refresh, pub_client, 0, NULL, &later, &err), EACCES);

  /* A loopback redirect with another port: the exchange names the same
   * URI the request did. */
  CHECK_OK(issue(&u, pub_client, "http://127.0.0.1:4242/callback", V1, AUTH_SCOPE_SANDBOX_READ,
                 code, &err));
  CHECK_ERR(auth_code_exchange(au, code, pub_client, LOOP, VERIFIER, NULL, &t, &err), EACCES);
  CHECK_OK(auth_code_exchange(au, code, pub_client, "http://127.0.0.1:4242/callback", VERIFIER,
                              NULL, &t, &err));
  CHECK_OK(auth_token_check(au, t.access, V1, &gr, &err));
  CHECK(gr.scopes == AUTH_SCOPE_SANDBOX_READ);

  /* Expiry: a code lives 60 s, an access token an hour. */
  CHECK_OK(issue(&u, pub_client, CB, MCP, AUTH_SCOPE_SANDBOX, code, &err));
  clock_add(61 * 1000);
  CHECK_ERR(auth_code_exchange(au, code, pub_client, CB, VERIFIER, NULL, &later, &err), EACCES);
  clock_add(3600 * 1000);
  CHECK_ERR(auth_token_check(au, t.access, V1, &gr, &err), EKEYEXPIRED);
}

TEST(refresh_rotation_and_reuse) {
  struct husk_err err;
  struct auth_user u = member();
  struct auth_tokens a, b, c, d;
  struct auth_grant gr;
  if (sign_in_tokens(&u, &a) < 0) {
    unit_cur_failed = 1;
    return;
  }
  unsigned grant = AUTH_SCOPE_SANDBOX | AUTH_SCOPE_STORAGE_READ;
  /* Refusals that leave the token alive. */
  CHECK_ERR(auth_refresh(au, a.refresh, conf_client, 0, NULL, &b, &err), EACCES);
  CHECK_ERR(auth_refresh(au, a.refresh, pub_client, AUTH_SCOPE_USERS, NULL, &b, &err), EINVAL);
  CHECK_ERR(
      auth_refresh(au, a.refresh, pub_client, grant | AUTH_SCOPE_STORAGE_WRITE, NULL, &b, &err),
      EINVAL);
  CHECK_ERR(auth_refresh(au, a.refresh, pub_client, 0, V1, &b, &err), ENOTSUP);
  CHECK_ERR(auth_refresh(au, a.access, pub_client, 0, NULL, &b, &err), EACCES);
  /* Rotation: a new pair; the old refresh token dies, the access token it
   * went with lives out its hour. */
  clock_add(1000);
  CHECK_OK(auth_refresh(au, a.refresh, pub_client, 0, MCP, &b, &err));
  CHECK(b.scopes == grant && strcmp(a.refresh, b.refresh) && strcmp(a.access, b.access));
  CHECK_OK(auth_token_check(au, b.access, MCP, &gr, &err));
  CHECK_OK(auth_token_check(au, a.access, MCP, &gr, &err));
  /* Narrower scopes for the access token; the grant stays whole. */
  CHECK_OK(auth_refresh(au, b.refresh, pub_client, AUTH_SCOPE_STORAGE_READ, NULL, &c, &err));
  CHECK(c.scopes == AUTH_SCOPE_STORAGE_READ);
  CHECK_OK(auth_token_check(au, c.access, MCP, &gr, &err));
  CHECK(gr.scopes == AUTH_SCOPE_STORAGE_READ);
  CHECK_OK(auth_refresh(au, c.refresh, pub_client, 0, NULL, &d, &err));
  CHECK(d.scopes == grant);
  /* Reuse of a rotated token: the whole family dies, newest included. */
  CHECK_ERR(auth_refresh(au, b.refresh, pub_client, 0, NULL, &c, &err), EKEYREVOKED);
  CHECK_ERR(auth_token_check(au, d.access, MCP, &gr, &err), EKEYREVOKED);
  CHECK_ERR(auth_token_check(au, a.access, MCP, &gr, &err), EKEYREVOKED);
  CHECK_ERR(auth_refresh(au, d.refresh, pub_client, 0, NULL, &c, &err), EACCES);
  CHECK_ERR(auth_refresh(au, a.refresh, pub_client, 0, NULL, &c, &err), EKEYREVOKED);
  CHECK_ERR(auth_refresh(au, "hrt_nope", pub_client, 0, NULL, &c, &err), EACCES);
  /* Another sign-in of the same user is another family: untouched. */
  struct auth_tokens e, f;
  if (sign_in_tokens(&u, &e) == 0) {
    CHECK_OK(auth_refresh(au, e.refresh, pub_client, 0, NULL, &f, &err));
    /* A refresh token expires refresh_ttl after its rotation. */
    clock_add(30LL * 86400 * 1000 + 1);
    CHECK_ERR(auth_refresh(au, f.refresh, pub_client, 0, NULL, &c, &err), EACCES);
  }
}

TEST(revoke) {
  struct husk_err err;
  struct auth_user u = member();
  struct auth_tokens a, b, c;
  struct auth_grant gr;
  if (sign_in_tokens(&u, &a) < 0 || sign_in_tokens(&u, &b) < 0) {
    unit_cur_failed = 1;
    return;
  }
  /* Garbage and another client's token: nothing, no error. */
  CHECK_OK(auth_revoke(au, "nonsense", pub_client, &err));
  CHECK_OK(auth_revoke(au, NULL, pub_client, &err));
  CHECK_OK(auth_revoke(au, a.access, conf_client, &err));
  CHECK_OK(auth_token_check(au, a.access, MCP, &gr, &err));
  /* An access token: only it dies. */
  CHECK_OK(auth_revoke(au, a.access, pub_client, &err));
  CHECK_ERR(auth_token_check(au, a.access, MCP, &gr, &err), EKEYREVOKED);
  CHECK_OK(auth_revoke(au, a.access, pub_client, &err)); /* twice: fine */
  CHECK_OK(auth_refresh(au, a.refresh, pub_client, 0, NULL, &c, &err));
  /* A refresh token: its family dies. */
  CHECK_OK(auth_revoke(au, c.refresh, pub_client, &err));
  CHECK_ERR(auth_token_check(au, c.access, MCP, &gr, &err), EKEYREVOKED);
  CHECK_ERR(auth_refresh(au, c.refresh, pub_client, 0, NULL, &a, &err), EACCES);
  CHECK_OK(auth_token_check(au, b.access, MCP, &gr, &err)); /* another family */
}

TEST(user_changes_end_tokens) {
  struct husk_err err;
  struct auth_user u, got;
  struct auth_tokens a, b;
  struct auth_grant gr;
  CHECK_OK(auth_user_create(au, t1.id, "gina", "Gina", AUTH_ROLE_MEMBER, PW, &u, &err));
  /* Disabled: the token stops at once, and stays dead when re-enabled. */
  if (sign_in_tokens(&u, &a) < 0) {
    unit_cur_failed = 1;
    return;
  }
  bool yes = true, no = false;
  struct auth_user_change ch = {.disabled = &yes};
  CHECK_OK(auth_user_update(au, t1.id, u.id, &ch, &got, &err));
  CHECK_ERR(auth_token_check(au, a.access, MCP, &gr, &err), EKEYREVOKED);
  CHECK_ERR(auth_refresh(au, a.refresh, pub_client, 0, NULL, &b, &err), EACCES);
  char code[AUTH_TOKEN_SIZE];
  CHECK_ERR(issue(&u, pub_client, CB, MCP, AUTH_SCOPE_SANDBOX, code, &err), EACCES);
  ch.disabled = &no;
  CHECK_OK(auth_user_update(au, t1.id, u.id, &ch, &got, &err));
  CHECK_ERR(auth_token_check(au, a.access, MCP, &gr, &err), EKEYREVOKED);
  /* A code issued before the user was disabled is not exchanged after. */
  CHECK_OK(issue(&u, pub_client, CB, MCP, AUTH_SCOPE_SANDBOX, code, &err));
  ch.disabled = &yes;
  CHECK_OK(auth_user_update(au, t1.id, u.id, &ch, &got, &err));
  CHECK_ERR(auth_code_exchange(au, code, pub_client, CB, VERIFIER, NULL, &b, &err), EACCES);
  ch.disabled = &no;
  CHECK_OK(auth_user_update(au, t1.id, u.id, &ch, &got, &err));
  /* A display name change leaves tokens alone; a role change does not. */
  if (sign_in_tokens(&u, &a) < 0) {
    unit_cur_failed = 1;
    return;
  }
  ch = (struct auth_user_change){.display_name = "Gina G."};
  CHECK_OK(auth_user_update(au, t1.id, u.id, &ch, &got, &err));
  CHECK_OK(auth_token_check(au, a.access, MCP, &gr, &err));
  CHECK_STR(gr.display_name, "Gina G.");
  enum auth_role member_role = AUTH_ROLE_MEMBER, admin = AUTH_ROLE_ADMIN;
  ch = (struct auth_user_change){.role = &member_role}; /* the same role: no change */
  CHECK_OK(auth_user_update(au, t1.id, u.id, &ch, &got, &err));
  CHECK_OK(auth_token_check(au, a.access, MCP, &gr, &err));
  ch = (struct auth_user_change){.role = &admin};
  CHECK_OK(auth_user_update(au, t1.id, u.id, &ch, &got, &err));
  CHECK(got.role == AUTH_ROLE_ADMIN);
  CHECK_ERR(auth_token_check(au, a.access, MCP, &gr, &err), EKEYREVOKED);
  /* A new password, and deletion, too. */
  if (sign_in_tokens(&u, &a) < 0) {
    unit_cur_failed = 1;
    return;
  }
  ch = (struct auth_user_change){.password = "another good password"};
  CHECK_OK(auth_user_update(au, t1.id, u.id, &ch, &got, &err));
  CHECK_ERR(auth_token_check(au, a.access, MCP, &gr, &err), EKEYREVOKED);
  if (sign_in_tokens(&u, &a) < 0) {
    unit_cur_failed = 1;
    return;
  }
  CHECK_OK(auth_user_delete(au, t1.id, u.id, &err));
  CHECK_ERR(auth_token_check(au, a.access, MCP, &gr, &err), EKEYREVOKED);
}

/* Two exchanges of one code at once: one wins, and the loser's reuse
 * revokes the winner's tokens. */
struct race {
  const char *code;
  struct auth_tokens t;
  int rc;
};
static void *race_exchange(void *p) {
  struct race *r = p;
  struct husk_err err;
  r->rc = auth_code_exchange(au, r->code, pub_client, CB, VERIFIER, NULL, &r->t, &err);
  return NULL;
}

TEST(code_race) {
  struct husk_err err;
  struct auth_user u = member();
  char code[AUTH_TOKEN_SIZE];
  CHECK_OK(issue(&u, pub_client, CB, MCP, AUTH_SCOPE_SANDBOX, code, &err));
  struct race r[2] = {{.code = code}, {.code = code}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&th[i], NULL, race_exchange, &r[i]);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  CHECK((r[0].rc == 0) + (r[1].rc == 0) == 1);
  struct auth_grant gr;
  CHECK_ERR(auth_token_check(au, r[r[0].rc == 0 ? 0 : 1].t.access, MCP, &gr, &err), EKEYREVOKED);
}

/* Bounded growth: expired tokens are swept as new ones are issued, a
 * family keeps its newest tokens only, clients are capped. */
TEST(bounded_rows) {
  struct husk_err err;
  struct auth_user u = member();
  struct auth_tokens a, b, c;
  struct auth_grant gr;
  if (sign_in_tokens(&u, &a) < 0) {
    unit_cur_failed = 1;
    return;
  }
  clock_add(2 * 3600 * 1000);
  CHECK_ERR(auth_token_check(au, a.access, MCP, &gr, &err), EKEYEXPIRED);
  if (sign_in_tokens(&u, &b) < 0) /* sweeps */
    unit_cur_failed = 1;
  CHECK_ERR(auth_token_check(au, a.access, MCP, &gr, &err), ENOENT);

  /* A client refreshing in a loop: the first rotated token falls out of
   * its family (presenting it is then just unknown), the newest works. */
  char first[AUTH_TOKEN_SIZE];
  snprintf(first, sizeof first, "%s", b.refresh);
  state_defer_begin(st);
  for (int i = 0; i < 40; i++) {
    clock_add(1); /* the family is trimmed by age */
    CHECK_OK(auth_refresh(au, b.refresh, pub_client, 0, NULL, &c, &err));
    b = c;
  }
  CHECK_OK(state_defer_end(st, &err));
  CHECK_ERR(auth_refresh(au, first, pub_client, 0, NULL, &c, &err), EACCES);
  CHECK_OK(auth_token_check(au, b.access, MCP, &gr, &err));
  CHECK_OK(auth_refresh(au, b.refresh, pub_client, 0, NULL, &c, &err));

  /* Clients: at the cap, those idle long enough go, oldest first, their
   * tokens with them; none idle enough: EDQUOT.  The state's cap is a
   * parameter: 1 here stands for 10000. */
  struct state_oauth_client row = {.created_ms = fake_now};
  snprintf(row.redirect_uris, sizeof row.redirect_uris, "[\"%s\"]", CB);
  snprintf(row.auth_method, sizeof row.auth_method, "none");
  CHECK_OK(state_new_id("oc_", row.id, sizeof row.id, &err));
  CHECK_ERR(state_oauth_client_insert(st, &row, 1, 0, 0, &err), EDQUOT);
  CHECK_OK(state_oauth_client_insert(st, &row, 1, fake_now + 1, 0, &err));
  CHECK_OK(state_new_id("oc_", row.id, sizeof row.id, &err));
  CHECK_ERR(state_oauth_client_insert(st, &row, 1, fake_now, 0, &err), EDQUOT); /* not idle */
  struct auth_client g;
  CHECK_ERR(auth_client_get(au, pub_client, &g, &err), ENOENT);
  CHECK_ERR(auth_token_check(au, c.access, MCP, &gr, &err), ENOENT);
}

/* A table filled by registrations nobody signs in with: each of those goes
 * an hour after it came, before any client that was used, however idle --
 * a flood does not block registration for 30 days. */
TEST(unused_clients_go_first) {
  struct husk_err err;
  /* A database of its own: the cap counts every client. */
  char db[128];
  snprintf(db, sizeof db, "%s/clients.db", dir);
  struct state *s2 = NULL;
  struct auth *a2 = NULL;
  struct state_tenant t;
  struct auth_user u;
  struct auth_config cfg = {.clock_ms = clock_fake};
  CHECK_OK(state_open(&s2, db, &err));
  if (!s2)
    return;
  cfg.st = s2;
  CHECK_OK(auth_open(&a2, &cfg, &err));
  CHECK_OK(state_tenant_create(s2, "one", -1, -1, &t, &err));
  CHECK_OK(auth_user_create(a2, t.id, "ann", "", AUTH_ROLE_MEMBER, PW, &u, &err));
  if (!a2 || !u.id[0]) {
    auth_close(a2);
    state_close(s2);
    return;
  }
  /* A cap of 3 (standing for 10000): one client used (a code issued for
   * it), then two never used. */
  const char *uris[] = {CB};
  struct auth_client c;
  char used[AUTH_CLIENT_ID_SIZE], unused1[AUTH_CLIENT_ID_SIZE];
  CHECK_OK(auth_client_register(a2, "used", uris, 1, NULL, &c, NULL, &err));
  snprintf(used, sizeof used, "%s", c.id);
  char code[AUTH_TOKEN_SIZE];
  struct auth_code_request cr = {.client_id = used, .redirect_uri = CB, .code_challenge = CHALLENGE,
                                 .resource = MCP, .scopes = AUTH_SCOPE_SANDBOX, .user = &u};
  CHECK_OK(auth_code_issue(a2, &cr, code, &err));
  clock_add(1000);
  CHECK_OK(auth_client_register(a2, "unused 1", uris, 1, NULL, &c, NULL, &err));
  snprintf(unused1, sizeof unused1, "%s", c.id);
  clock_add(1000);
  CHECK_OK(auth_client_register(a2, "unused 2", uris, 1, NULL, &c, NULL, &err));
  struct state_oauth_client row = {0};
  snprintf(row.redirect_uris, sizeof row.redirect_uris, "[\"%s\"]", CB);
  snprintf(row.auth_method, sizeof row.auth_method, "none");
  CHECK_OK(state_new_id("oc_", row.id, sizeof row.id, &err));
  /* Full, and the never-used ones are younger than an hour: refused. */
  row.created_ms = fake_now;
  CHECK_ERR(state_oauth_client_insert(s2, &row, 3, fake_now - AUTH_CLIENT_IDLE_MS,
                                      fake_now - AUTH_CLIENT_UNUSED_MS, &err),
            EDQUOT);
  /* An hour on: the oldest never-used one goes, not the used one (older,
   * and idle longer). */
  clock_add(AUTH_CLIENT_UNUSED_MS);
  row.created_ms = fake_now;
  CHECK_OK(state_oauth_client_insert(s2, &row, 3, fake_now - AUTH_CLIENT_IDLE_MS,
                                     fake_now - AUTH_CLIENT_UNUSED_MS, &err));
  CHECK_ERR(auth_client_get(a2, unused1, &c, &err), ENOENT);
  CHECK_OK(auth_client_get(a2, used, &c, &err));
  auth_close(a2);
  state_close(s2);
}

/* ---- the audit's user fields ---- */

struct audits {
  struct state_audit v[8];
  int n;
};
static int collect_audit(void *ctx, const struct state_audit *a) {
  struct audits *o = ctx;
  if (o->n < 8)
    o->v[o->n++] = *a;
  return 0;
}

TEST(audit_user_fields) {
  struct husk_err err;
  struct state_audit rec = {.status = 200};
  snprintf(rec.tenant_id, sizeof rec.tenant_id, "%s", t1.id);
  snprintf(rec.action, sizeof rec.action, "box.create");
  snprintf(rec.outcome, sizeof rec.outcome, "ok");
  snprintf(rec.user_id, sizeof rec.user_id, "%s", alice);
  snprintf(rec.user_name, sizeof rec.user_name, "Alice\x1b[31m A.");
  snprintf(rec.client_id, sizeof rec.client_id, "%s", pub_client);
  snprintf(rec.client_name, sizeof rec.client_name, "Claude\n");
  CHECK_OK(state_audit_add(st, &rec, NULL, &err));
  struct state_audit other = rec;
  snprintf(other.user_id, sizeof other.user_id, "%s", carol_admin);
  CHECK_OK(state_audit_add(st, &other, NULL, &err));
  struct state_audit keyed = {.status = 201};
  snprintf(keyed.action, sizeof keyed.action, "box.create");
  snprintf(keyed.outcome, sizeof keyed.outcome, "ok");
  snprintf(keyed.key_id, sizeof keyed.key_id, "k_1");
  CHECK_OK(state_audit_add(st, &keyed, NULL, &err));

  struct audits o = {0};
  struct state_audit_filter f = {.user_id = alice};
  CHECK_OK(state_audit_list(st, &f, collect_audit, &o, &err));
  CHECK(o.n == 1);
  CHECK_STR(o.v[0].user_id, alice);
  CHECK_STR(o.v[0].user_name, "Alice?[31m A.");
  CHECK_STR(o.v[0].client_id, pub_client);
  CHECK_STR(o.v[0].client_name, "Claude?");
  o.n = 0;
  f = (struct state_audit_filter){.action = "box.create", .newest_first = 1};
  CHECK_OK(state_audit_list(st, &f, collect_audit, &o, &err));
  CHECK(o.n == 3 && !strcmp(o.v[0].user_id, "") && !strcmp(o.v[0].key_id, "k_1"));
  f = (struct state_audit_filter){.user_id = "u_bad id"};
  CHECK_ERR(state_audit_list(st, &f, collect_audit, &o, &err), EINVAL);
  snprintf(rec.user_id, sizeof rec.user_id, "u bad");
  CHECK_ERR(state_audit_add(st, &rec, NULL, &err), EINVAL);
  snprintf(rec.user_id, sizeof rec.user_id, "%s", alice);
  snprintf(rec.client_id, sizeof rec.client_id, "oc/1");
  CHECK_ERR(state_audit_add(st, &rec, NULL, &err), EINVAL);
}

/* ---- single sign-on rows (state/oidc_state.c) ---- */

static struct state_oidc_config oidc_row(const char *tenant_id) {
  struct state_oidc_config c;
  memset(&c, 0, sizeof c);
  snprintf(c.tenant_id, sizeof c.tenant_id, "%s", tenant_id);
  snprintf(c.issuer, sizeof c.issuer, "https://idp.example");
  snprintf(c.client_id, sizeof c.client_id, "husk");
  c.has_secret = true;
  snprintf(c.display_name, sizeof c.display_name, "Example IdP");
  snprintf(c.claim, sizeof c.claim, "email");
  snprintf(c.scopes, sizeof c.scopes, "openid email");
  snprintf(c.authorization_endpoint, sizeof c.authorization_endpoint, "https://idp.example/a");
  snprintf(c.token_endpoint, sizeof c.token_endpoint, "https://idp.example/t");
  snprintf(c.jwks_uri, sizeof c.jwks_uri, "https://idp.example/k");
  snprintf(c.token_auth, sizeof c.token_auth, "client_secret_basic");
  return c;
}

static struct state_sso sso_row(const char *tenant_id, unsigned char tag, int64_t expires) {
  struct state_sso p;
  memset(&p, 0, sizeof p);
  memset(p.hash, tag, sizeof p.hash);
  memset(p.binding_hash, 0xbb, sizeof p.binding_hash);
  snprintf(p.phase, sizeof p.phase, "provider");
  snprintf(p.tenant_id, sizeof p.tenant_id, "%s", tenant_id);
  snprintf(p.nonce, sizeof p.nonce, "nonce");
  snprintf(p.verifier, sizeof p.verifier, "verifier");
  snprintf(p.params, sizeof p.params, "{\"client_id\":\"oc_x\"}");
  p.created_ms = fake_now;
  p.expires_ms = expires;
  return p;
}

TEST(oidc_state) {
  struct husk_err err;
  struct state_oidc_config c = oidc_row(t1.id), got;
  CHECK_ERR(state_oidc_get(st, t1.id, &got, &err), ENOENT);
  CHECK_OK(state_oidc_put(st, &c, 1000, &got, &err));
  CHECK(got.has_secret && got.created_ms == 1000 && got.updated_ms == 1000);
  snprintf(c.claim, sizeof c.claim, "sub");
  CHECK_OK(state_oidc_put(st, &c, 2000, &got, &err));
  CHECK(got.created_ms == 1000 && got.updated_ms == 2000);
  CHECK_STR(got.claim, "sub");
  snprintf(c.claim, sizeof c.claim, "phone");
  CHECK_ERR(state_oidc_put(st, &c, 3000, &got, &err), EINVAL); /* the schema's CHECK */
  CHECK_OK(state_oidc_find_tenant(st, "one", &got, &err));
  CHECK_STR(got.tenant_id, t1.id);
  CHECK_ERR(state_oidc_find_tenant(st, "two", &got, &err), ENOENT);
  CHECK_ERR(state_oidc_find_tenant(st, "nobody", &got, &err), ENOENT);
  struct state_oidc_config ghost = oidc_row("t_000000000000000000000000");
  CHECK_ERR(state_oidc_put(st, &ghost, 1000, &got, &err), ENOENT);

  /* Links: one subject per user, one user per subject. */
  struct auth_user a, b, seen;
  CHECK_OK(auth_user_create(au, t1.id, "sso-a@example.com", "", AUTH_ROLE_MEMBER, NULL, &a, &err));
  CHECK_OK(auth_user_create(au, t1.id, "sso-b", "", AUTH_ROLE_VIEWER, NULL, &b, &err));
  struct state_user row;
  CHECK_OK(state_user_by_name(st, t1.id, "sso-a@example.com", &row, &err));
  CHECK_STR(row.id, a.id);
  CHECK_ERR(state_user_by_name(st, t2.id, "sso-a@example.com", &row, &err), ENOENT);
  CHECK_ERR(state_user_idp_find(st, t1.id, "https://idp.example", "sub-a", &row, &err), ENOENT);
  CHECK_OK(state_user_idp_link(st, t1.id, a.id, "https://idp.example", "sub-a", &err));
  CHECK_ERR(state_user_idp_link(st, t1.id, a.id, "https://idp.example", "sub-x", &err), EEXIST);
  CHECK_ERR(state_user_idp_link(st, t1.id, b.id, "https://idp.example", "sub-a", &err), EEXIST);
  CHECK_ERR(state_user_idp_link(st, t2.id, b.id, "https://idp.example", "sub-b", &err), EEXIST);
  char long_sub[300];
  memset(long_sub, 'x', 256);
  long_sub[256] = 0;
  CHECK_ERR(state_user_idp_link(st, t1.id, b.id, "https://idp.example", long_sub, &err), EINVAL);
  CHECK_ERR(state_user_idp_link(st, t1.id, b.id, "https://idp.example", "", &err), EINVAL);
  CHECK_OK(state_user_idp_find(st, t1.id, "https://idp.example", "sub-a", &row, &err));
  CHECK_STR(row.id, a.id);
  CHECK_STR(row.idp_subject, "sub-a");
  CHECK_ERR(state_user_idp_find(st, t1.id, "https://other.example", "sub-a", &row, &err), ENOENT);
  CHECK_OK(auth_user_get(au, t1.id, a.id, &seen, &err));
  CHECK_STR(seen.idp_subject, "sub-a");
  /* Unlinking frees the subject (and the user may be linked again). */
  struct auth_user_change ch = {.unlink_idp = true};
  CHECK_OK(auth_user_update(au, t1.id, a.id, &ch, &seen, &err));
  CHECK_STR(seen.idp_subject, "");
  CHECK_ERR(state_user_idp_find(st, t1.id, "https://idp.example", "sub-a", &row, &err), ENOENT);
  CHECK_OK(state_user_idp_link(st, t1.id, b.id, "https://idp.example", "sub-a", &err));
  /* A deleted user's link is no more. */
  CHECK_OK(auth_user_delete(au, t1.id, b.id, &err));
  CHECK_ERR(state_user_idp_find(st, t1.id, "https://idp.example", "sub-a", &row, &err), ENOENT);
  CHECK_OK(state_user_idp_link(st, t1.id, a.id, "https://idp.example", "sub-a", &err));

  /* Pending sign-ins: read, taken once, expired, bounded. */
  struct state_sso p = sso_row(t1.id, 1, fake_now + 600000), q;
  CHECK_OK(state_sso_insert(st, &p, fake_now, &err));
  CHECK_ERR(state_sso_insert(st, &p, fake_now, &err), EEXIST);
  CHECK_OK(state_sso_get(st, p.hash, "provider", false, fake_now, &q, &err));
  CHECK_STR(q.nonce, "nonce");
  CHECK(!memcmp(q.binding_hash, p.binding_hash, sizeof q.binding_hash));
  CHECK_ERR(state_sso_get(st, p.hash, "consent", false, fake_now, &q, &err), ENOENT);
  CHECK_OK(state_sso_get(st, p.hash, "provider", true, fake_now, &q, &err));
  CHECK_ERR(state_sso_get(st, p.hash, "provider", true, fake_now, &q, &err), ENOENT);
  struct state_sso old = sso_row(t1.id, 2, fake_now + 10);
  CHECK_OK(state_sso_insert(st, &old, fake_now, &err));
  CHECK_ERR(state_sso_get(st, old.hash, "provider", false, fake_now + 10, &q, &err), ENOENT);
  struct state_sso bad = sso_row(t1.id, 3, fake_now + 600000);
  snprintf(bad.phase, sizeof bad.phase, "other");
  CHECK_ERR(state_sso_insert(st, &bad, fake_now, &err), EINVAL);
  bad = sso_row(t1.id, 3, fake_now + 600000);
  snprintf(bad.params, sizeof bad.params, "{not json");
  CHECK_ERR(state_sso_insert(st, &bad, fake_now, &err), EINVAL);
  bad = sso_row("t_000000000000000000000000", 3, fake_now + 600000);
  CHECK_ERR(state_sso_insert(st, &bad, fake_now, &err), ENOENT);
  int made = 0;
  for (int i = 0; i < STATE_SSO_PENDING_MAX + 5; i++) {
    struct state_sso r = sso_row(t1.id, 0, fake_now + 600000);
    memcpy(r.hash, &i, sizeof i);
    r.hash[31] = 0x77;
    if (state_sso_insert(st, &r, fake_now, &err) < 0)
      break;
    made++;
  }
  /* `old` (not yet expired at fake_now) holds one place. */
  CHECK(made == STATE_SSO_PENDING_MAX - 1 && err.code == EDQUOT);
  /* Once they expire they are swept and room is made. */
  struct state_sso late = sso_row(t1.id, 4, fake_now + 1200000);
  CHECK_OK(state_sso_insert(st, &late, fake_now + 700000, &err));
  /* Deleting the configuration ends its sign-ins. */
  CHECK_OK(state_oidc_delete(st, t1.id, &err));
  CHECK_ERR(state_oidc_delete(st, t1.id, &err), ENOENT);
  CHECK_ERR(state_oidc_get(st, t1.id, &got, &err), ENOENT);
  CHECK_ERR(state_sso_get(st, late.hash, "provider", false, fake_now, &q, &err), ENOENT);

  /* The audit keeps a record's subject. */
  struct state_audit rec;
  memset(&rec, 0, sizeof rec);
  snprintf(rec.action, sizeof rec.action, "oidc.test");
  snprintf(rec.outcome, sizeof rec.outcome, "ok");
  snprintf(rec.user_id, sizeof rec.user_id, "%s", a.id);
  snprintf(rec.idp_subject, sizeof rec.idp_subject, "sub-a\nforged");
  int64_t id = 0;
  CHECK_OK(state_audit_add(st, &rec, &id, &err));
}

/* ---- a tenant's deletion ---- */

TEST(tenant_deletion) {
  struct husk_err err;
  struct state_tenant t;
  CHECK_OK(state_tenant_create(st, "leaving", -1, -1, &t, &err));
  struct auth_user u, got;
  CHECK_OK(auth_user_create(au, t.id, "hal", "", AUTH_ROLE_ADMIN, PW, &u, &err));
  struct auth_tokens a;
  char code[AUTH_TOKEN_SIZE];
  if (sign_in_tokens(&u, &a) < 0) {
    unit_cur_failed = 1;
    return;
  }
  CHECK_OK(issue(&u, pub_client, CB, MCP, AUTH_SCOPE_USERS, code, &err));
  CHECK_OK(state_tenant_mark_deleted(st, t.id, &err));
  struct auth_grant gr;
  CHECK_ERR(auth_token_check(au, a.access, MCP, &gr, &err), EKEYREVOKED);
  struct auth_tokens b;
  CHECK_ERR(auth_code_exchange(au, code, pub_client, CB, VERIFIER, NULL, &b, &err), EACCES);
  char tid[STATE_TENANT_ID_SIZE];
  CHECK_ERR(auth_sign_in(au, "leaving", "hal", PW, SRC_A, &got, tid, &err), EACCES);
  CHECK_ERR(auth_user_create(au, t.id, "ida", "", AUTH_ROLE_VIEWER, NULL, &got, &err), ENOENT);
  /* The purge removes its users and their tokens: no foreign key dangles. */
  CHECK_OK(state_tenant_purge(st, t.id, &err));
  CHECK_ERR(auth_user_get_any(au, NULL, u.id, &got, &err), ENOENT);
  CHECK_ERR(auth_token_check(au, a.access, MCP, &gr, &err), ENOENT);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/husk-auth-XXXXXX");
  if (!mkdtemp(dir))
    return 2;
  chmod(dir, 0700);
  struct husk_err err;
  char db[128];
  snprintf(db, sizeof db, "%s/husk.db", dir);
  fake_now = state_now_ms();
  struct auth_config cfg = {.clock_ms = clock_fake};
  if (state_open(&st, db, &err) < 0 || (cfg.st = st, auth_open(&au, &cfg, &err) < 0) ||
      state_tenant_create(st, "one", -1, -1, &t1, &err) < 0 ||
      state_tenant_create(st, "two", -1, -1, &t2, &err) < 0) {
    printf("# setup: %s\n", err.msg);
    return 2;
  }
  RUN(roles_and_scopes);
  RUN(users);
  RUN(user_bounds);
  RUN(sign_in);
  RUN(lockout);
  RUN(lockout_distributed);
  RUN(hash_gate);
  RUN(clients);
  RUN(codes);
  RUN(refresh_rotation_and_reuse);
  RUN(revoke);
  RUN(user_changes_end_tokens);
  RUN(code_race);
  RUN(audit_user_fields);
  RUN(tenant_deletion);
  RUN(oidc_state);
  RUN(bounded_rows); /* last: it removes the clients of the others */
  RUN(unused_clients_go_first);
  auth_close(au);
  state_close(st);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    printf("# could not remove %s\n", dir);
  return unit_done();
}
