/* The authorization core's setup, its roles and scopes (docs/oauth.md's
 * table), and the small helpers its files share: the clock, SHA-256, random
 * secrets, and the check of text a person chose. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "auth/auth_internal.h"
#include "util/cleanup.h"
#include "util/id.h"
#include "util/utf8.h"

/* ---- roles and scopes ---- */

const char *const auth_scope_names[AUTH_SCOPE_COUNT] = {
    "sandbox", "sandbox:read", "storage:read", "storage:write", "runs", "users",
};

static const char *const role_names[] = {
    [AUTH_ROLE_VIEWER] = "viewer",
    [AUTH_ROLE_MEMBER] = "member",
    [AUTH_ROLE_ADMIN] = "admin",
};
#define ROLE_COUNT (sizeof role_names / sizeof role_names[0])

const char *auth_role_name(enum auth_role r) {
  return (unsigned)r < ROLE_COUNT ? role_names[r] : "unknown";
}

int auth_role_parse(const char *s, enum auth_role *out) {
  for (unsigned i = 0; s && i < ROLE_COUNT; i++)
    if (!strcmp(s, role_names[i])) {
      if (out)
        *out = (enum auth_role)i;
      return 0;
    }
  return -1;
}

unsigned auth_role_scopes(enum auth_role r) {
  static const unsigned viewer = AUTH_SCOPE_SANDBOX_READ | AUTH_SCOPE_STORAGE_READ;
  static const unsigned member =
      viewer | AUTH_SCOPE_SANDBOX | AUTH_SCOPE_STORAGE_WRITE | AUTH_SCOPE_RUNS;
  switch (r) {
  case AUTH_ROLE_VIEWER: return viewer;
  case AUTH_ROLE_MEMBER: return member;
  case AUTH_ROLE_ADMIN: return member | AUTH_SCOPE_USERS;
  }
  return 0;
}

int auth_scopes_parse(const char *s, unsigned *out, struct husk_err *err) {
  unsigned scopes = 0;
  if (!s)
    return husk_fail(err, EINVAL, "scope is missing");
  /* RFC 6749 3.3: names separated by spaces (runs of them are forgiven). */
  for (const char *p = s; *p;) {
    if (*p == ' ') {
      p++;
      continue;
    }
    size_t n = strcspn(p, " ");
    unsigned i = 0;
    while (i < AUTH_SCOPE_COUNT &&
           (strlen(auth_scope_names[i]) != n || memcmp(p, auth_scope_names[i], n) != 0))
      i++;
    if (i == AUTH_SCOPE_COUNT) {
      /* Named only when it is short printable ASCII: the message may be
       * shown, and the text came from a client. */
      bool printable = n <= 64;
      for (size_t k = 0; printable && k < n; k++)
        printable = p[k] > 0x20 && p[k] < 0x7f;
      if (printable)
        return husk_fail(err, EINVAL, "unknown scope `%.*s`", (int)n, p);
      return husk_fail(err, EINVAL, "unknown scope");
    }
    scopes |= 1u << i;
    p += n;
  }
  if (out)
    *out = scopes;
  return 0;
}

void auth_scopes_format(unsigned scopes, char *buf, size_t size) {
  if (!buf || size == 0)
    return;
  size_t len = 0;
  buf[0] = '\0';
  for (unsigned i = 0; i < AUTH_SCOPE_COUNT; i++) {
    if (!(scopes & (1u << i)))
      continue;
    int w = snprintf(buf + len, size - len, "%s%s", len ? " " : "", auth_scope_names[i]);
    if (w < 0 || (size_t)w >= size - len) {
      buf[len] = '\0'; /* no name cut in half: the list stops before it */
      return;
    }
    len += (size_t)w;
  }
}

/* ---- shared helpers ---- */

int64_t auth_now(const struct auth *a) { return a->clock_ms ? a->clock_ms() : state_now_ms(); }

int auth_sha256(const void *data, size_t n, unsigned char out[STATE_OAUTH_HASH_SIZE],
                struct husk_err *err) {
  unsigned int len = 0;
  if (EVP_Digest(data, n, out, &len, EVP_sha256(), NULL) != 1 || len != STATE_OAUTH_HASH_SIZE)
    return husk_fail(err, EIO, "SHA-256 failed");
  return 0;
}

void auth_wipe(void *p, size_t n) { OPENSSL_cleanse(p, n); }

int auth_secret_new(const char *prefix, char out[AUTH_TOKEN_SIZE],
                    unsigned char hash[STATE_OAUTH_HASH_SIZE], struct husk_err *err) {
  _Static_assert(4 + 2 * AUTH_SECRET_BYTES + 1 == AUTH_TOKEN_SIZE,
                 "AUTH_TOKEN_SIZE is a 4-byte prefix, the hex of the secret and the NUL");
  if (strlen(prefix) != 4)
    return husk_fail(err, EINVAL, "a secret's prefix is 4 bytes");
  if (id_new(prefix, AUTH_SECRET_BYTES, out, AUTH_TOKEN_SIZE, err) < 0)
    return -1;
  if (auth_sha256(out, AUTH_TOKEN_SIZE - 1, hash, err) < 0) {
    auth_wipe(out, AUTH_TOKEN_SIZE);
    return -1;
  }
  return 0;
}

bool auth_secret_well_formed(const char *prefix, const char *s) {
  if (!s || strncmp(s, prefix, 4) != 0 || strnlen(s, AUTH_TOKEN_SIZE) != AUTH_TOKEN_SIZE - 1)
    return false;
  for (size_t i = 4; i < AUTH_TOKEN_SIZE - 1; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return true;
}

int auth_check_label(const char *what, const char *s, size_t max, struct husk_err *err) {
  if (!s)
    return husk_fail(err, EINVAL, "%s is missing", what);
  size_t n = strnlen(s, max + 1);
  if (n > max)
    return husk_fail(err, EINVAL, "%s is too long (at most %zu bytes)", what, max);
  if (!utf8_valid(s, n))
    return husk_fail(err, EINVAL, "%s is not valid UTF-8", what);
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    /* Valid UTF-8 (checked above): decode one code point. */
    unsigned cp = u[i];
    size_t len = cp < 0x80 ? 1 : cp < 0xe0 ? 2 : cp < 0xf0 ? 3 : 4;
    if (len > 1) {
      cp &= 0x3fu >> (len - 1);
      for (size_t k = 1; k < len && i + k < n; k++)
        cp = cp << 6 | (u[i + k] & 0x3fu);
    }
    i += len;
    if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
      return husk_fail(err, EINVAL, "%s contains a control character", what);
    /* Characters that change how the text around them shows without
     * showing themselves (shown on the consent page, where a name must
     * read as what it is): bidirectional controls, zero-width ones, line
     * and paragraph separators, the byte-order mark, and the rest of
     * Unicode's default-ignorable code points, which fonts draw as
     * nothing or as a blank (the soft hyphen, the combining grapheme
     * joiner, Hangul fillers, Khmer and Mongolian invisible vowels and
     * selectors, variation selectors, interlinear annotation marks,
     * shorthand format controls, musical symbol formatting, tags). */
    if (cp == 0x00ad || cp == 0x034f || cp == 0x061c || cp == 0x115f || cp == 0x1160 ||
        cp == 0x17b4 || cp == 0x17b5 || (cp >= 0x180b && cp <= 0x180f) ||
        (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
        (cp >= 0x2060 && cp <= 0x206f) || cp == 0x3164 || (cp >= 0xfe00 && cp <= 0xfe0f) ||
        cp == 0xfeff || cp == 0xffa0 || (cp >= 0xfff0 && cp <= 0xfffb) ||
        (cp >= 0x1bca0 && cp <= 0x1bca3) || (cp >= 0x1d173 && cp <= 0x1d17a) ||
        (cp >= 0xe0000 && cp <= 0xe0fff))
      return husk_fail(err, EINVAL, "%s contains an invisible formatting character", what);
  }
  return 0;
}

/* ---- open and close ---- */

int auth_open(struct auth **out, const struct auth_config *cfg, struct husk_err *err) {
  *out = NULL;
  if (!cfg || !cfg->st)
    return husk_fail(err, EINVAL, "auth needs an open state");
  if (cfg->access_ttl_s < 0 || cfg->refresh_ttl_s < 0 || cfg->code_ttl_s < 0 ||
      cfg->hash_wait_ms < 0)
    return husk_fail(err, EINVAL, "auth lifetimes must be >= 0 (0: the default)");
  /* Bounds that keep every expiry far from overflow: a year at most. */
  const int64_t year_s = 366LL * 86400;
  if (cfg->access_ttl_s > year_s || cfg->refresh_ttl_s > year_s || cfg->code_ttl_s > year_s)
    return husk_fail(err, EINVAL, "auth lifetimes must be at most a year");
  cleanup_free struct auth *a = calloc(1, sizeof *a);
  if (!a)
    return husk_error(err, ENOMEM, "cannot allocate auth");
  a->st = cfg->st;
  a->access_ttl_ms = (cfg->access_ttl_s ? cfg->access_ttl_s : AUTH_ACCESS_TTL_S) * 1000;
  a->refresh_ttl_ms = (cfg->refresh_ttl_s ? cfg->refresh_ttl_s : AUTH_REFRESH_TTL_S) * 1000;
  a->code_ttl_ms = (cfg->code_ttl_s ? cfg->code_ttl_s : AUTH_CODE_TTL_S) * 1000;
  a->clock_ms = cfg->clock_ms;
  a->fetcher = cfg->fetcher;
  unsigned slots = cfg->hash_concurrency;
  if (slots == 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    slots = cpus > 0 ? (unsigned)cpus : 1;
  }
  if (password_gate_init(a, slots, cfg->hash_wait_ms ? cfg->hash_wait_ms : AUTH_HASH_WAIT_MS, err) <
      0)
    return -1;
  /* The dummy: a password of 32 random bytes, forgotten at once. */
  char pw[AUTH_TOKEN_SIZE];
  unsigned char unused[STATE_OAUTH_HASH_SIZE];
  int r = auth_secret_new("dmy_", pw, unused, err);
  if (r == 0)
    r = password_hash(a, pw, a->dummy_hash, err);
  auth_wipe(pw, sizeof pw);
  if (r == 0)
    r = throttle_init(a, err);
  if (r == 0 && cimd_init(a, err) < 0) {
    throttle_destroy(a);
    r = -1;
  }
  if (r < 0) {
    password_gate_destroy(a);
    return -1;
  }
  *out = steal_pointer(&a);
  return 0;
}

void auth_close(struct auth *a) {
  if (!a)
    return;
  password_gate_destroy(a);
  throttle_destroy(a);
  cimd_destroy(a);
  free(a);
}
