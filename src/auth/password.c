/* Passwords: Argon2id (RFC 9106) from libargon2 with OWASP's minimum cost
 * (19 MiB, 2 passes, 1 lane), a 16-byte salt from getrandom, stored as the
 * encoded string ("$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>"), which
 * carries its own parameters: a later change of cost still verifies old
 * hashes.
 *
 * A hash takes ~50 ms of one CPU and 19 MiB.  The gate bounds how many run
 * at once (the host's CPUs by default), so a flood of sign-ins queues
 * instead of taking every core and a multiple of 19 MiB; a request that
 * waits past the deadline gets EBUSY (the front's 503) rather than hanging.
 *
 * Nothing here logs, and no message holds a password. */
#define _GNU_SOURCE
#include <argon2.h>
#include <errno.h>
#include <string.h>

#include "auth/auth_internal.h"
#include "util/clock.h"
#include "util/id.h"

#define ARGON2_T_COST 2
#define ARGON2_M_COST_KIB 19456
#define ARGON2_LANES 1
#define ARGON2_SALT_BYTES 16
#define ARGON2_HASH_BYTES 32

/* ---- the gate ---- */

int password_gate_init(struct auth *a, unsigned slots, int64_t wait_ms, struct husk_err *err) {
  pthread_condattr_t ca;
  int rc = pthread_condattr_init(&ca);
  if (rc)
    return husk_error(err, rc, "cannot set up the password-hash gate");
  rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  if (!rc)
    rc = pthread_cond_init(&a->gate_cond, &ca);
  pthread_condattr_destroy(&ca);
  if (rc)
    return husk_error(err, rc, "cannot set up the password-hash gate");
  rc = pthread_mutex_init(&a->gate_lock, NULL);
  if (rc) {
    pthread_cond_destroy(&a->gate_cond);
    return husk_error(err, rc, "cannot set up the password-hash gate");
  }
  a->gate_free = slots ? slots : 1;
  a->gate_wait_ms = wait_ms;
  return 0;
}

void password_gate_destroy(struct auth *a) {
  pthread_cond_destroy(&a->gate_cond);
  pthread_mutex_destroy(&a->gate_lock);
}

void password_slot_give(struct password_slot *s) {
  if (!s->a)
    return;
  pthread_mutex_lock(&s->a->gate_lock);
  s->a->gate_free++;
  pthread_cond_signal(&s->a->gate_cond);
  pthread_mutex_unlock(&s->a->gate_lock);
  s->a = NULL;
}

int password_slot_take(struct auth *a, struct password_slot *slot, struct husk_err *err) {
  struct timespec deadline = clock_after_ms(CLOCK_MONOTONIC, a->gate_wait_ms);
  pthread_mutex_lock(&a->gate_lock);
  while (a->gate_free == 0) {
    int rc = pthread_cond_timedwait(&a->gate_cond, &a->gate_lock, &deadline);
    if (rc == ETIMEDOUT && a->gate_free == 0) {
      pthread_mutex_unlock(&a->gate_lock);
      return husk_fail(err, EBUSY,
                       "too many passwords are being checked at once: try again shortly");
    }
  }
  a->gate_free--;
  pthread_mutex_unlock(&a->gate_lock);
  slot->a = a;
  return 0;
}

/* ---- hashing ---- */

int password_check(const char *password, struct husk_err *err) {
  if (!password)
    return husk_fail(err, EINVAL, "password is missing");
  size_t n = strnlen(password, AUTH_PASSWORD_MAX + 1);
  if (n < AUTH_PASSWORD_MIN || n > AUTH_PASSWORD_MAX)
    return husk_fail(err, EINVAL, "a password is %d to %d bytes", AUTH_PASSWORD_MIN,
                     AUTH_PASSWORD_MAX);
  return 0;
}

int password_hash(struct auth *a, const char *password, char out[STATE_PASSWORD_HASH_SIZE],
                  struct husk_err *err) {
  size_t need = argon2_encodedlen(ARGON2_T_COST, ARGON2_M_COST_KIB, ARGON2_LANES, ARGON2_SALT_BYTES,
                                  ARGON2_HASH_BYTES, Argon2_id);
  if (need > STATE_PASSWORD_HASH_SIZE)
    return husk_fail(err, EOVERFLOW, "an Argon2id hash needs %zu bytes", need);
  unsigned char salt[ARGON2_SALT_BYTES];
  if (id_random_bytes(salt, sizeof salt, err) < 0)
    return -1;
  cleanup_password_slot struct password_slot slot = {0};
  if (password_slot_take(a, &slot, err) < 0)
    return -1;
  int rc = argon2id_hash_encoded(ARGON2_T_COST, ARGON2_M_COST_KIB, ARGON2_LANES, password,
                                 strlen(password), salt, sizeof salt, ARGON2_HASH_BYTES, out,
                                 STATE_PASSWORD_HASH_SIZE);
  if (rc != ARGON2_OK)
    return husk_fail(err, rc == ARGON2_MEMORY_ALLOCATION_ERROR ? ENOMEM : EIO,
                     "cannot hash the password: %s", argon2_error_message(rc));
  return 0;
}

int password_verify(struct auth *a, const char *encoded, const char *password, bool *match,
                    struct husk_err *err) {
  *match = false;
  bool dummy = !encoded || !*encoded;
  /* Longer than any password that can be set: it cannot match, but costs
   * the same as one that could (the first AUTH_PASSWORD_MAX bytes). */
  size_t n = strnlen(password ? password : "", AUTH_PASSWORD_MAX + 1);
  if (n > AUTH_PASSWORD_MAX) {
    n = AUTH_PASSWORD_MAX;
    dummy = true;
  }
  int rc = argon2id_verify(dummy ? a->dummy_hash : encoded, password ? password : "", n);
  if (rc == ARGON2_OK) {
    *match = !dummy;
    return 0;
  }
  if (rc == ARGON2_VERIFY_MISMATCH)
    return 0;
  if (rc == ARGON2_MEMORY_ALLOCATION_ERROR)
    return husk_fail(err, ENOMEM, "cannot verify the password: out of memory");
  /* A stored string that does not decode: nothing can match it. */
  return dummy ? husk_fail(err, EIO, "cannot verify the password: %s", argon2_error_message(rc))
               : 0;
}
