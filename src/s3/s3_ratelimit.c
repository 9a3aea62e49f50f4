/* The budget of refused link fetches per source address: a token bucket
 * per source in a table of fixed size, plus one shared by all sources.
 *
 * A refused fetch (forged signature, expired or revoked link) costs the
 * daemon a commit (its counter); past the budget it costs nothing but a
 * 429.  The table never grows: when a source's probe run is full, the
 * slot used least recently is taken over (that source then starts again
 * with a full bucket, which the shared bucket still bounds). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "s3/s3_internal.h"

#define PROBE 8

struct slot {
  char key[S3_RATE_KEY_MAX];
  double tokens;
  int64_t last_ms; /* 0: free */
};

const struct s3_rate_limits s3_link_deny_limits = {
    .burst = S3_LINK_DENY_BURST,
    .per_s = S3_LINK_DENY_PER_S,
    .shared_burst = S3_LINK_DENY_SHARED_BURST,
    .shared_per_s = S3_LINK_DENY_SHARED_PER_S,
};

struct s3_rate {
  pthread_mutex_t lock;
  struct s3_rate_limits lim;
  struct slot slots[S3_RATE_SLOTS];
  struct slot shared;
};

int s3_rate_init(struct s3_rate **out, const struct s3_rate_limits *lim) {
  struct s3_rate *rl = calloc(1, sizeof *rl);
  if (!rl)
    return -1;
  if (pthread_mutex_init(&rl->lock, NULL) != 0) {
    free(rl);
    return -1;
  }
  rl->lim = *lim;
  *out = rl;
  return 0;
}

void s3_rate_free(struct s3_rate *rl) {
  if (!rl)
    return;
  pthread_mutex_destroy(&rl->lock);
  free(rl);
}

static uint64_t fnv1a(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 1099511628211ULL;
  }
  return h;
}

static void refill(struct slot *sl, double burst, double per_s, int64_t now) {
  if (sl->last_ms == 0) {
    sl->tokens = burst;
  } else if (now > sl->last_ms) {
    sl->tokens += (double)(now - sl->last_ms) * per_s / 1000.0;
    if (sl->tokens > burst)
      sl->tokens = burst;
  }
  sl->last_ms = now > 0 ? now : 1;
}

/* The source's slot, refilled to `now`. */
static struct slot *find(struct s3_rate *rl, const char *key, int64_t now) {
  size_t base = (size_t)(fnv1a(key) % S3_RATE_SLOTS), victim = base;
  struct slot *sl = NULL;
  for (size_t i = 0; i < PROBE; i++) {
    struct slot *c = &rl->slots[(base + i) % S3_RATE_SLOTS];
    if (c->last_ms && !strcmp(c->key, key)) {
      sl = c;
      break;
    }
    if (!c->last_ms) {
      if (rl->slots[victim].last_ms)
        victim = (base + i) % S3_RATE_SLOTS;
    } else if (rl->slots[victim].last_ms &&
               c->last_ms < rl->slots[victim].last_ms) {
      victim = (base + i) % S3_RATE_SLOTS;
    }
  }
  if (!sl) {
    sl = &rl->slots[victim];
    memset(sl, 0, sizeof *sl);
    size_t n = strlen(key);
    if (n >= sizeof sl->key)
      n = sizeof sl->key - 1;
    memcpy(sl->key, key, n);
  }
  refill(sl, rl->lim.burst, rl->lim.per_s, now);
  refill(&rl->shared, rl->lim.shared_burst, rl->lim.shared_per_s, now);
  return sl;
}

bool s3_rate_take(struct s3_rate *rl, const char *key, int64_t now_ms) {
  pthread_mutex_lock(&rl->lock);
  struct slot *sl = find(rl, key, now_ms);
  bool ok = sl->tokens >= 1.0 && rl->shared.tokens >= 1.0;
  if (ok) {
    sl->tokens -= 1.0;
    rl->shared.tokens -= 1.0;
  }
  pthread_mutex_unlock(&rl->lock);
  return ok;
}

void s3_rate_give(struct s3_rate *rl, const char *key, int64_t now_ms) {
  pthread_mutex_lock(&rl->lock);
  struct slot *sl = find(rl, key, now_ms);
  sl->tokens = sl->tokens + 1.0 > rl->lim.burst ? rl->lim.burst : sl->tokens + 1.0;
  rl->shared.tokens = rl->shared.tokens + 1.0 > rl->lim.shared_burst ? rl->lim.shared_burst
                                                                     : rl->shared.tokens + 1.0;
  pthread_mutex_unlock(&rl->lock);
}

void s3_rate_source(const struct sockaddr *sa, char *out, size_t size) {
  s3_rate_source_prefix(sa, 64, out, size);
}

void s3_rate_source_prefix(const struct sockaddr *sa, unsigned v6_bits, char *out, size_t size) {
  snprintf(out, size, "-");
  if (!sa)
    return;
  if (sa->sa_family == AF_INET) {
    if (!inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)size))
      snprintf(out, size, "-");
  } else if (sa->sa_family == AF_INET6) {
    struct in6_addr a = ((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (!IN6_IS_ADDR_V4MAPPED(&a)) {
      if (v6_bits > 128)
        v6_bits = 128;
      for (unsigned bit = v6_bits; bit < 128; bit++)
        a.s6_addr[bit / 8] &= (unsigned char)~(0x80u >> (bit % 8));
    }
    if (!inet_ntop(AF_INET6, &a, out, (socklen_t)size))
      snprintf(out, size, "-");
  }
}
