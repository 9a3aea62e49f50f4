/* Per-tenant counts of requests in progress (util/tenant_load.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/tenant_load.h"

struct tenant_load_entry {
  char tenant[TENANT_LOAD_ID_SIZE];
  unsigned requests, execs;
  uint64_t bytes;
};

int tenant_loads_init(struct tenant_loads *t, size_t cap) {
  memset(t, 0, sizeof *t);
  t->e = calloc(cap ? cap : 1, sizeof *t->e);
  if (!t->e)
    return ENOMEM;
  t->cap = cap ? cap : 1;
  pthread_mutex_init(&t->lock, NULL);
  return 0;
}

void tenant_loads_free(struct tenant_loads *t) {
  if (!t->e)
    return;
  free(t->e);
  t->e = NULL;
  pthread_mutex_destroy(&t->lock);
}

static struct tenant_load_entry *find(struct tenant_loads *t, const char *tenant) {
  for (size_t i = 0; i < t->n; i++)
    if (!strcmp(t->e[i].tenant, tenant))
      return &t->e[i];
  return NULL;
}

enum tenant_admit tenant_load_acquire(struct tenant_loads *t, const char *tenant, unsigned max_req,
                                      bool exec, unsigned max_exec, unsigned *reqs,
                                      unsigned *execs) {
  if (strlen(tenant) >= TENANT_LOAD_ID_SIZE) {
    *reqs = *execs = 0;
    return TL_FULL;
  }
  pthread_mutex_lock(&t->lock);
  struct tenant_load_entry *l = find(t, tenant);
  *reqs = l ? l->requests : 0;
  *execs = l ? l->execs : 0;
  enum tenant_admit res = TL_OK;
  if (*reqs >= max_req)
    res = TL_OVER_REQ;
  if (exec && *execs >= max_exec)
    res = TL_OVER_EXEC;
  if (res == TL_OK && !l && t->n >= t->cap)
    res = TL_FULL;
  if (res == TL_OK) {
    if (!l) {
      l = &t->e[t->n++];
      memset(l, 0, sizeof *l);
      snprintf(l->tenant, sizeof l->tenant, "%s", tenant);
    }
    l->requests++;
    if (exec)
      l->execs++;
  }
  pthread_mutex_unlock(&t->lock);
  return res;
}

void tenant_load_release(struct tenant_loads *t, const char *tenant, bool exec) {
  pthread_mutex_lock(&t->lock);
  struct tenant_load_entry *l = find(t, tenant);
  if (l) {
    l->requests--;
    if (exec)
      l->execs--;
    if (l->requests == 0 && l->bytes == 0)
      *l = t->e[--t->n]; /* unordered: move the last one here */
  }
  pthread_mutex_unlock(&t->lock);
}

bool tenant_load_take_bytes(struct tenant_loads *t, const char *tenant, uint64_t n, uint64_t max) {
  if (strlen(tenant) >= TENANT_LOAD_ID_SIZE)
    return false;
  pthread_mutex_lock(&t->lock);
  struct tenant_load_entry *l = find(t, tenant);
  bool ok = (l || t->n < t->cap) && n <= max && (l ? l->bytes : 0) <= max - n;
  if (ok) {
    if (!l) {
      l = &t->e[t->n++];
      memset(l, 0, sizeof *l);
      snprintf(l->tenant, sizeof l->tenant, "%s", tenant);
    }
    l->bytes += n;
  }
  pthread_mutex_unlock(&t->lock);
  return ok;
}

void tenant_load_give_bytes(struct tenant_loads *t, const char *tenant, uint64_t n) {
  pthread_mutex_lock(&t->lock);
  struct tenant_load_entry *l = find(t, tenant);
  if (l) {
    l->bytes -= n < l->bytes ? n : l->bytes;
    if (l->requests == 0 && l->bytes == 0)
      *l = t->e[--t->n];
  }
  pthread_mutex_unlock(&t->lock);
}
