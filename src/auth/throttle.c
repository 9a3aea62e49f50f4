/* The sign-in throttle (docs/oauth.md "Limits and defences"), in memory.
 *
 * Two counts of failed sign-ins, each in a window that begins with its
 * first failure:
 *
 *   - of one name from one source address: AUTH_LOCK_FAILURES in
 *     AUTH_LOCK_WINDOW_MS lock that name *for that source* for
 *     AUTH_LOCK_MS.  A guesser locks itself out, not the person: the right
 *     password from an address without failures still works.
 *   - of one name from all sources: AUTH_LOCK_USER_FAILURES in the window
 *     lock it for everyone, which stops guessing spread over many
 *     addresses (each of which the front also limits).
 *
 * "One name" is the user's id when the user exists, else the organization
 * and user name typed: both take the same path at the same cost (a keyed
 * hash and a table entry, no write to disk), so the throttle tells nobody
 * which names exist.  An attempt is counted as pending before its password
 * is checked, and pending attempts count against the limits, so guesses
 * sent at once cannot all pass the check before any of them has failed.
 *
 * The table is fixed (AUTH_THROTTLE_SLOTS); each entry is found by a
 * keyed hash (a per-process random key: nobody can aim entries at one
 * slot), and when a probe run is full the least recently used entry
 * without a lock or a pending attempt gives way.  A restart forgets every
 * count and lock. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "auth/auth_internal.h"
#include "util/id.h"

#define PROBE 8
#define KEY_BYTES 16

struct throttle_entry {
  unsigned char key[KEY_BYTES]; /* of (who, source), or of who for the user-wide count */
  unsigned char who[KEY_BYTES]; /* of who alone: what a password reset clears */
  int64_t last_ms;              /* 0: free */
  int64_t since_ms;             /* the window's first failure; 0: none */
  int64_t locked_until_ms;
  unsigned count;   /* failures in the window */
  unsigned pending; /* attempts being checked */
};

struct auth_throttle {
  pthread_mutex_t lock;
  unsigned char seed[32];
  struct throttle_entry e[AUTH_THROTTLE_SLOTS];
};

int throttle_init(struct auth *a, struct husk_err *err) {
  struct auth_throttle *t = calloc(1, sizeof *t);
  if (!t)
    return husk_error(err, ENOMEM, "cannot allocate the sign-in throttle");
  if (pthread_mutex_init(&t->lock, NULL) != 0) {
    free(t);
    return husk_error(err, ENOMEM, "cannot set up the sign-in throttle");
  }
  if (id_random_bytes(t->seed, sizeof t->seed, err) < 0) {
    pthread_mutex_destroy(&t->lock);
    free(t);
    return -1;
  }
  a->throttle = t;
  return 0;
}

void throttle_destroy(struct auth *a) {
  if (!a->throttle)
    return;
  pthread_mutex_destroy(&a->throttle->lock);
  OPENSSL_cleanse(a->throttle, sizeof *a->throttle);
  free(a->throttle);
  a->throttle = NULL;
}

/* The keyed hash of a kind (KEY_*), who, a NUL, and the source (NULL:
 * none): the kind keeps the three keys of one `who` apart whatever the
 * source is. */
enum { KEY_WHO = 'w', KEY_SOURCE = 's', KEY_USER = 'u' };
static void keyed(const struct auth_throttle *t, char kind, const char *who, const char *source,
                  unsigned char out[KEY_BYTES]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_MD_CTX *c = EVP_MD_CTX_new();
  bool ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1 &&
            EVP_DigestUpdate(c, t->seed, sizeof t->seed) == 1 &&
            EVP_DigestUpdate(c, &kind, 1) == 1 && EVP_DigestUpdate(c, who, strlen(who) + 1) == 1 &&
            (!source || EVP_DigestUpdate(c, source, strlen(source) + 1) == 1) &&
            EVP_DigestFinal_ex(c, md, &n) == 1 && n >= KEY_BYTES;
  EVP_MD_CTX_free(c);
  if (!ok) /* out of memory: one entry for everything, which only throttles more */
    memset(md, 0, sizeof md);
  memcpy(out, md, KEY_BYTES);
}

/* The entry of `key`, made (in the place of the least useful one of its
 * probe run) when there is none. */
static struct throttle_entry *entry(struct auth_throttle *t, const unsigned char key[KEY_BYTES],
                                    const unsigned char who[KEY_BYTES], int64_t now) {
  size_t base;
  memcpy(&base, key, sizeof base);
  base %= AUTH_THROTTLE_SLOTS;
  struct throttle_entry *victim = NULL;
  int victim_rank = 0;
  for (size_t i = 0; i < PROBE; i++) {
    struct throttle_entry *e = &t->e[(base + i) % AUTH_THROTTLE_SLOTS];
    if (e->last_ms && !memcmp(e->key, key, KEY_BYTES)) {
      e->last_ms = now > 0 ? now : 1;
      return e;
    }
    /* Rank: a free slot first, then one with neither a lock nor a pending
     * attempt, then one without a pending attempt; the least recent of a
     * rank. */
    int rank = !e->last_ms ? 4 : (!e->pending && e->locked_until_ms <= now) ? 3 : !e->pending ? 2 : 1;
    if (!victim || rank > victim_rank || (rank == victim_rank && e->last_ms < victim->last_ms)) {
      victim = e;
      victim_rank = rank;
    }
  }
  memset(victim, 0, sizeof *victim);
  memcpy(victim->key, key, KEY_BYTES);
  memcpy(victim->who, who, KEY_BYTES);
  victim->last_ms = now > 0 ? now : 1;
  return victim;
}

/* A window over: its count starts again. */
static void age(struct throttle_entry *e, int64_t now) {
  if (e->since_ms && (now - e->since_ms >= AUTH_LOCK_WINDOW_MS || now < e->since_ms)) {
    e->count = 0;
    e->since_ms = 0;
  }
}

static void release(struct throttle_entry *e, int64_t now) {
  if (!e->pending && !e->count && e->locked_until_ms <= now)
    e->last_ms = 0; /* nothing to remember: the slot is free again */
}

bool throttle_begin(struct auth *a, const char *who, const char *source, int64_t now) {
  struct auth_throttle *t = a->throttle;
  unsigned char kw[KEY_BYTES], ks[KEY_BYTES], ku[KEY_BYTES];
  keyed(t, KEY_WHO, who, NULL, kw);
  keyed(t, KEY_SOURCE, who, source ? source : "-", ks);
  keyed(t, KEY_USER, who, NULL, ku);
  pthread_mutex_lock(&t->lock);
  /* s pending while u is found: u's probe run may be s's, and s must not
   * give way to u. */
  struct throttle_entry *s = entry(t, ks, kw, now);
  s->pending++;
  struct throttle_entry *u = entry(t, ku, kw, now);
  age(s, now);
  age(u, now);
  bool ok = s->locked_until_ms <= now && u->locked_until_ms <= now &&
            s->count + s->pending - 1 < AUTH_LOCK_FAILURES &&
            u->count + u->pending < AUTH_LOCK_USER_FAILURES;
  if (ok) {
    u->pending++;
  } else {
    s->pending--;
    release(s, now);
    release(u, now);
  }
  pthread_mutex_unlock(&t->lock);
  return ok;
}

/* One more failure in e's window; `max` of them lock it. */
static void failed(struct throttle_entry *e, unsigned max, int64_t now) {
  age(e, now);
  if (!e->since_ms)
    e->since_ms = now ? now : 1;
  if (++e->count >= max) {
    e->locked_until_ms = now + AUTH_LOCK_MS;
    e->count = 0;
    e->since_ms = 0;
  }
}

void throttle_end(struct auth *a, const char *who, const char *source,
                  enum throttle_outcome outcome, int64_t now) {
  struct auth_throttle *t = a->throttle;
  unsigned char kw[KEY_BYTES], ks[KEY_BYTES], ku[KEY_BYTES];
  keyed(t, KEY_WHO, who, NULL, kw);
  keyed(t, KEY_SOURCE, who, source ? source : "-", ks);
  keyed(t, KEY_USER, who, NULL, ku);
  pthread_mutex_lock(&t->lock);
  struct throttle_entry *s = entry(t, ks, kw, now), *u = entry(t, ku, kw, now);
  if (s->pending)
    s->pending--;
  if (u->pending)
    u->pending--;
  if (outcome == THROTTLE_OK) {
    /* The person, from there: that address's failures are forgiven.  Not
     * the user-wide count, which others' guesses make. */
    s->count = 0;
    s->since_ms = 0;
  } else if (outcome == THROTTLE_FAILED) {
    failed(s, AUTH_LOCK_FAILURES, now);
    failed(u, AUTH_LOCK_USER_FAILURES, now);
  }
  release(s, now);
  release(u, now);
  pthread_mutex_unlock(&t->lock);
}

void throttle_forget(struct auth *a, const char *who) {
  struct auth_throttle *t = a->throttle;
  unsigned char kw[KEY_BYTES];
  keyed(t, KEY_WHO, who, NULL, kw);
  pthread_mutex_lock(&t->lock);
  for (size_t i = 0; i < AUTH_THROTTLE_SLOTS; i++) {
    struct throttle_entry *e = &t->e[i];
    if (e->last_ms && !memcmp(e->who, kw, KEY_BYTES)) {
      e->count = 0;
      e->since_ms = 0;
      e->locked_until_ms = 0;
      if (!e->pending)
        e->last_ms = 0;
    }
  }
  pthread_mutex_unlock(&t->lock);
}
