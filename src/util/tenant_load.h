/* Per-tenant counts of requests in progress, shared by the fronts that
 * hold a connection thread per request (the HTTP API, S3): one tenant's
 * slow requests must leave connection threads for the others.
 *
 * One entry per tenant with a request in progress.  Every connection holds
 * at most one request, so a table sized by the front's connection limit
 * always has room; a full one refuses, which is the safe answer anyway. */
#ifndef HUSK_UTIL_TENANT_LOAD_H
#define HUSK_UTIL_TENANT_LOAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest tenant id kept (longer ones are refused as TL_FULL). */
#define TENANT_LOAD_ID_SIZE 64

struct tenant_load_entry;
struct tenant_loads {
  pthread_mutex_t lock;
  struct tenant_load_entry *e;
  size_t n, cap;
};

enum tenant_admit {
  TL_OK,        /* counted: release it once the reply is done */
  TL_OVER_REQ,  /* the tenant has max_requests in progress */
  TL_OVER_EXEC, /* the tenant has max_execs command requests in progress */
  TL_FULL,      /* no entry left */
};

/* The tenant's own bound, or `dflt` where the tenant has none (any value
 * below 1: the store's "default"). */
static inline unsigned tenant_load_bound(int64_t own, unsigned dflt) {
  return own < 1 || own > UINT32_MAX ? dflt : (unsigned)own;
}

/* 0 or ENOMEM. */
int tenant_loads_init(struct tenant_loads *t, size_t cap);
void tenant_loads_free(struct tenant_loads *t);
/* Count one request of `tenant` (a command one if `exec`) unless it has
 * `max_req` requests (or, for `exec`, `max_exec` command ones) in
 * progress already.  `*reqs` / `*execs` get the counts found before. */
enum tenant_admit tenant_load_acquire(struct tenant_loads *t, const char *tenant, unsigned max_req,
                                      bool exec, unsigned max_exec, unsigned *reqs,
                                      unsigned *execs);
/* Undo one TL_OK of tenant_load_acquire with the same `tenant` and `exec`. */
void tenant_load_release(struct tenant_loads *t, const char *tenant, bool exec);
/* Reply bytes held by the tenant's requests (the API's reply budget, per
 * tenant): count n more unless that would pass `max`.  An entry lives
 * while the tenant has requests or bytes (a reply may be freed after its
 * request is complete).  false: over its share, or no entry left. */
bool tenant_load_take_bytes(struct tenant_loads *t, const char *tenant, uint64_t n, uint64_t max);
void tenant_load_give_bytes(struct tenant_loads *t, const char *tenant, uint64_t n);

#endif
