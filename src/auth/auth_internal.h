/* What the files of src/auth/ share; not part of its interface (auth.h). */
#ifndef HUSK_AUTH_AUTH_INTERNAL_H
#define HUSK_AUTH_AUTH_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth/auth.h"
#include "state/auth_state.h"
#include "util/error.h"

/* Defaults of struct auth_config and the fixed policy of docs/oauth.md. */
#define AUTH_ACCESS_TTL_S 3600                /* an access token */
#define AUTH_REFRESH_TTL_S (30LL * 86400)     /* a refresh token, from its last rotation */
#define AUTH_CODE_TTL_S 60                    /* an authorization code */
#define AUTH_HASH_WAIT_MS 10000               /* a password hash waits this long for a slot */
#define AUTH_LOCK_FAILURES 5                  /* failed sign-ins of a user from an address ... */
#define AUTH_LOCK_USER_FAILURES 100           /* ... or from all addresses ... */
#define AUTH_LOCK_WINDOW_MS (15LL * 60000)    /* ... within this window ... */
#define AUTH_LOCK_MS (15LL * 60000)           /* ... lock it (there, or everywhere) this long */
#define AUTH_THROTTLE_SLOTS 4096              /* (user, address) counts remembered */
#define AUTH_CLIENTS_MAX 10000                /* registered OAuth clients */
#define AUTH_CLIENT_IDLE_MS (30LL * 86400000) /* unused this long, a client may go */
#define AUTH_CLIENT_UNUSED_MS (3600LL * 1000) /* never used, this old: it goes first */

/* Random secrets: a prefix and 32 random bytes as 64 lower-case hex. */
#define AUTH_SECRET_BYTES 32
#define AUTH_PREFIX_ACCESS "hat_"
#define AUTH_PREFIX_REFRESH "hrt_"
#define AUTH_PREFIX_CODE "hac_"
#define AUTH_PREFIX_CLIENT_SECRET "hcs_"

struct auth {
  struct state *st;
  int64_t access_ttl_ms, refresh_ttl_ms, code_ttl_ms;
  int64_t (*clock_ms)(void);
  /* The password-hash gate (password.c): a counting semaphore with a
   * deadline, on a monotonic condition variable. */
  pthread_mutex_t gate_lock;
  pthread_cond_t gate_cond;
  unsigned gate_free;
  int64_t gate_wait_ms;
  /* A hash of a random password nobody knows: what a sign-in of an unknown
   * user is checked against, so that it costs what a known one does. */
  char dummy_hash[STATE_PASSWORD_HASH_SIZE];
  /* Failed sign-ins per (user, address) and per user (throttle.c). */
  struct auth_throttle *throttle;
  /* Clients' metadata documents: the fetcher (not owned) and the cache
   * (cimd.c). */
  struct auth_fetcher *fetcher;
  struct auth_cimd *cimd;
};

/* ---- the sign-in throttle (throttle.c) ---- */
struct auth_throttle;
int throttle_init(struct auth *a, struct husk_err *err);
void throttle_destroy(struct auth *a);
/* An attempt of `who` (a user id, or the names typed when there is no
 * such user) from `source` is about to be checked: false when that pair,
 * or `who` from everywhere, is locked (counting the attempts pending). */
bool throttle_begin(struct auth *a, const char *who, const char *source, int64_t now);
/* Its outcome (after a true throttle_begin): a failure counts, a success
 * forgives the source's failures, a check that could not be made (an
 * internal error) only ends the pending attempt. */
enum throttle_outcome { THROTTLE_FAILED, THROTTLE_OK, THROTTLE_CANCEL };
void throttle_end(struct auth *a, const char *who, const char *source,
                  enum throttle_outcome outcome, int64_t now);
/* Every count and lock of `who` (an administrator set a new password). */
void throttle_forget(struct auth *a, const char *who);

/* The wall clock of every expiry and lockout. */
int64_t auth_now(const struct auth *a);

/* SHA-256 of n bytes. */
int auth_sha256(const void *data, size_t n, unsigned char out[STATE_OAUTH_HASH_SIZE],
                struct husk_err *err);
/* A fresh secret `prefix` + 64 hex into out, and its SHA-256 into hash. */
int auth_secret_new(const char *prefix, char out[AUTH_TOKEN_SIZE],
                    unsigned char hash[STATE_OAUTH_HASH_SIZE], struct husk_err *err);
/* Whether s is `prefix` + 64 lower-case hex, nothing more. */
bool auth_secret_well_formed(const char *prefix, const char *s);
/* Wipe a secret's text (OPENSSL_cleanse). */
void auth_wipe(void *p, size_t n);

/* Printable text a person chose (a display or client name): at most
 * `max` bytes of UTF-8 without control characters (C1 ones included). */
int auth_check_label(const char *what, const char *s, size_t max, struct husk_err *err);

/* ---- clients.c ---- */
/* The one rule of a redirect URI (registration's, and a metadata
 * document's): EINVAL saying what is wrong, never echoing it. */
int auth_redirect_check(const char *uri, struct husk_err *err);
/* The row of a metadata-document client (made, or updated to its
 * document), before a code is issued for it: codes and tokens refer to it. */
int auth_client_document_row(struct auth *a, const struct auth_client *c, int64_t now,
                             struct husk_err *err);
/* The characters RFC 3986 allows in a URI, less `'`. */
bool auth_uri_char(char c);

/* ---- cimd.c: clients' metadata documents ---- */
#define AUTH_CIMD_MAX 10000                /* documents cached */
#define AUTH_CIMD_TTL_MIN_MS (300LL * 1000) /* a document is cached at least ... */
#define AUTH_CIMD_TTL_MAX_MS (86400LL * 1000) /* ... at most ... */
#define AUTH_CIMD_TTL_DEFAULT_MS (3600LL * 1000) /* ... and without max-age */
#define AUTH_CIMD_BYTES (64 * 1024)        /* a document's size */
#define AUTH_CIMD_TIMEOUT_MS 5000          /* one fetch */
/* Documents fetched at once, of the whole daemon: fewer than the
 * fetcher's AUTH_FETCH_CONCURRENCY, so that documents anyone can point at
 * a slow server never take the slots the operator's own sign-in fetches
 * (an OpenID Connect provider's) need. */
#define AUTH_CIMD_FETCHING_MAX 6
int cimd_init(struct auth *a, struct husk_err *err);
void cimd_destroy(struct auth *a);
/* A client id URL's rules; its host into host (AUTH_HOST_MAX + 1 bytes). */
int auth_cimd_url_check(const char *url, char host[AUTH_HOST_MAX + 1], struct husk_err *err);
/* A fetched document of `url` (len bytes, not NUL-terminated) into *out. */
int auth_cimd_parse(const char *url, const char *body, size_t len, struct auth_client *out,
                    struct husk_err *err);
/* The cached document of `url` (ENOENT: none, or stale). */
int cimd_cached(struct auth *a, const char *url, struct auth_client *out, struct husk_err *err);
/* Cache `c` (a document just checked) until expires_ms (auth_now's
 * clock), in place of one of the same URL; past AUTH_CIMD_MAX the least
 * recently used goes. */
int cimd_store(struct auth *a, const struct auth_client *c, int64_t expires_ms,
               struct husk_err *err);

/* ---- password.c ---- */
int password_gate_init(struct auth *a, unsigned slots, int64_t wait_ms, struct husk_err *err);
void password_gate_destroy(struct auth *a);
/* 12..256 bytes. */
int password_check(const char *password, struct husk_err *err);
/* The Argon2id encoded string of `password` (a fresh salt), in a slot of
 * the gate: EBUSY if none frees within the wait. */
int password_hash(struct auth *a, const char *password, char out[STATE_PASSWORD_HASH_SIZE],
                  struct husk_err *err);
/* A slot of the gate: EBUSY if none frees within the wait.  Given back by
 * password_slot_give (cleanup_password_slot). */
struct password_slot {
  struct auth *a;
};
int password_slot_take(struct auth *a, struct password_slot *slot, struct husk_err *err);
void password_slot_give(struct password_slot *slot);
#define cleanup_password_slot __attribute__((cleanup(password_slot_give)))
/* Whether `password` matches `encoded` (NULL or "": the dummy, which
 * nothing matches).  The caller holds a slot. */
int password_verify(struct auth *a, const char *encoded, const char *password, bool *match,
                    struct husk_err *err);

#endif
