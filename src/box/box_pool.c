/* The warm pools: a thread keeps, per configured shape (memory, cpus,
 * pids, disk), that many boxes ready (namespaces, root, cgroup and init
 * up, through the pool's spawner), refilling the emptiest pool first.  A
 * create whose template and limits match a pool's shape claims one of its
 * boxes: it gets its tenant, env, TTL and database row at that moment, so
 * TTL and quota count from the claim, and a pool box never serves two
 * tenants (after use it is destroyed like any other).  Pool boxes have no
 * database row: after a crash the start-up sweep removes them like any
 * cgroup no row accounts for. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "box/box_internal.h"
#include "box/spawner.h"
#include "jail/limits.h"
#include "util/clock.h"

/* The fields a pool keeps apart; timeout and output count from the claim. */
static bool same_shape(const struct husk_limits *a, const struct husk_limits *b) {
  return a->memory_bytes == b->memory_bytes && a->pids == b->pids && a->cpu_milli == b->cpu_milli &&
         a->disk_bytes == b->disk_bytes;
}

static const char *pool_template(const struct pool_class *c) {
  return c->img ? c->img->t.id : "";
}

int box_pool_init(struct husk_mgr *m, struct husk_err *err) {
  size_t n = m->cfg.npools;
  if (n > BOX_POOL_MAX_SHAPES)
    return husk_fail(err, EINVAL, "at most %d pool shapes", BOX_POOL_MAX_SHAPES);
  if (n && !(m->pools = calloc(n, sizeof *m->pools)))
    return husk_fail(err, ENOMEM, "out of memory");
  unsigned long total = 0;
  for (size_t i = 0; i < n; i++) {
    struct pool_class *c = &m->pools[i];
    c->shape = m->cfg.pools[i].shape;
    c->shape.timeout_ms = c->shape.output_bytes = 0;
    if (husk_limits_resolve(&c->shape, err) < 0)
      return husk_error_wrap(err, "pool %zu", i + 1);
    c->size = m->cfg.pools[i].size;
    if (c->size == 0)
      return husk_fail(err, EINVAL, "pool %zu: a pool keeps at least 1 box", i + 1);
    /* A template pool: the operator's shared template, resolved once (its
     * layers, user); a tenant's own template of the same name never
     * claims from it (the ids differ). */
    const char *tn = m->cfg.pools[i].template_name;
    if (tn && *tn && strcmp(tn, "default")) {
      if (!(c->img = calloc(1, sizeof *c->img)))
        return husk_fail(err, ENOMEM, "out of memory");
      if (box_image_resolve(m, "", tn, NULL, c->img, err) < 0) {
        free(c->img);
        c->img = NULL;
        return husk_error_wrap(err, "pool %zu", i + 1);
      }
    }
    for (size_t j = 0; j < i; j++)
      if (same_shape(&c->shape, &m->pools[j].shape) &&
          !strcmp(pool_template(c), pool_template(&m->pools[j])))
        return husk_fail(err, EINVAL, "pools %zu and %zu have the same shape (sizes add up in one pool)",
                         j + 1, i + 1);
    total += c->size;
  }
  if (total > BOX_POOL_MAX_BOXES)
    return husk_fail(err, EINVAL, "the pools hold %lu boxes together; at most %d", total,
                     BOX_POOL_MAX_BOXES);
  return 0;
}

struct live_box *box_pool_claim(struct husk_mgr *m, const struct husk_limits *lim,
                                const char *template_id) {
  if (!m->pool_running)
    return NULL;
  struct live_box *b = NULL;
  pthread_mutex_lock(&m->pool_lock);
  struct pool_class *c = NULL;
  for (size_t i = 0; i < m->cfg.npools && !c; i++)
    if (same_shape(lim, &m->pools[i].shape) && !strcmp(template_id, pool_template(&m->pools[i])))
      c = &m->pools[i];
  if (!c) {
    m->pool_unmatched++;
  } else if ((b = c->boxes)) {
    c->boxes = b->next;
    b->next = NULL;
    b->pool = c;
    c->count--;
    c->claims++;
    pthread_cond_broadcast(&m->pool_cond); /* the pool thread refills */
  } else {
    c->empty++;
  }
  pthread_mutex_unlock(&m->pool_lock);
  return b;
}

void box_pool_return(struct husk_mgr *m, struct live_box *b) {
  struct pool_class *c = b->pool;
  pthread_mutex_lock(&m->pool_lock);
  b->next = c->boxes;
  c->boxes = b;
  c->count++;
  c->claims--;
  pthread_mutex_unlock(&m->pool_lock);
}

size_t box_pool_stats(struct husk_mgr *m, struct box_pool_stat *out, size_t max, uint64_t *unmatched) {
  size_t n = 0;
  pthread_mutex_lock(&m->pool_lock);
  for (; n < m->cfg.npools && n < max; n++) {
    const struct pool_class *c = &m->pools[n];
    out[n] = (struct box_pool_stat){.shape = c->shape, .size = c->size, .ready = c->count,
                                    .claims = c->claims, .empty = c->empty};
    snprintf(out[n].template_name, sizeof out[n].template_name, "%s",
             c->img ? c->img->t.name : "default");
  }
  if (unmatched)
    *unmatched = m->pool_unmatched;
  pthread_mutex_unlock(&m->pool_lock);
  return n;
}

/* The pool furthest from full, as a fraction of its size (the first on a
 * tie), so that a burst on one shape does not starve the others' refill;
 * pools backing off after a failed build are skipped (*retry: the earliest
 * moment one may be tried again, or 0).  NULL when none is to be built
 * now.  Under pool_lock. */
static struct pool_class *neediest(struct husk_mgr *m, int64_t now, int64_t *retry) {
  struct pool_class *best = NULL;
  *retry = 0;
  for (size_t i = 0; i < m->cfg.npools; i++) {
    struct pool_class *c = &m->pools[i];
    if (c->count >= c->size)
      continue;
    if (c->retry_ms > now) {
      if (!*retry || c->retry_ms < *retry)
        *retry = c->retry_ms;
      continue;
    }
    /* count/size < best->count/best->size, without division */
    if (!best || (uint64_t)c->count * best->size < (uint64_t)best->count * c->size)
      best = c;
  }
  return best;
}

static void *pool_main(void *arg) {
  struct husk_mgr *m = arg;
  pthread_mutex_lock(&m->pool_lock);
  while (!m->stop) {
    int64_t retry;
    struct pool_class *c = neediest(m, mono_ms(), &retry);
    if (!c && !retry) {
      pthread_cond_wait(&m->pool_cond, &m->pool_lock);
      continue;
    }
    if (!c) { /* only pools that failed remain: wait for the first retry, or stop */
      /* pool_cond runs on CLOCK_MONOTONIC (box_mgr_open), as retry does */
      struct timespec ts = {.tv_sec = retry / 1000, .tv_nsec = (retry % 1000) * 1000000};
      pthread_cond_timedwait(&m->pool_cond, &m->pool_lock, &ts);
      continue;
    }
    struct husk_limits shape = c->shape;
    pthread_mutex_unlock(&m->pool_lock);
    struct husk_err err;
    struct live_box *b = lb_new();
    int rc = -1;
    if (b && state_new_id("b_", b->id, sizeof b->id, &err) == 0)
      rc = box_make_jail(m, b, &shape, true, c->img, NULL, &err);
    else if (!b)
      husk_fail(&err, ENOMEM, "out of memory");
    if (rc < 0) {
      if (b)
        lb_free(m, b);
      /* failures and retry_ms are this thread's alone */
      if (c->failures++ % 60 == 0)
        box_log(m, "pool %zu: cannot prepare a box: %s", (size_t)(c - m->pools) + 1, err.msg);
      /* This pool backs off for a second; the others keep filling. */
      c->retry_ms = mono_ms() + 1000;
      pthread_mutex_lock(&m->pool_lock);
      continue;
    }
    c->failures = 0;
    pthread_mutex_lock(&m->pool_lock);
    b->next = c->boxes;
    c->boxes = b;
    c->count++;
  }
  pthread_mutex_unlock(&m->pool_lock);
  return NULL;
}

int box_pool_start(struct husk_mgr *m, struct husk_err *err) {
  if (m->cfg.npools == 0)
    return 0;
  m->pool_running = true;
  if ((errno = pthread_create(&m->pool_thread, NULL, pool_main, m)) != 0) {
    m->pool_running = false;
    return husk_error(err, errno, "cannot start the pool thread");
  }
  return 0;
}

void box_pool_stop(struct husk_mgr *m) {
  pthread_mutex_lock(&m->pool_lock);
  m->stop = true;
  pthread_cond_broadcast(&m->pool_cond);
  pthread_mutex_unlock(&m->pool_lock);
  if (m->pool_running) {
    pthread_join(m->pool_thread, NULL);
    m->pool_running = false;
  }
  /* Unclaimed boxes belong to nobody: destroy them. */
  for (size_t i = 0; i < m->cfg.npools && m->pools; i++) {
    struct pool_class *c = &m->pools[i];
    for (struct live_box *b = c->boxes, *n; b; b = n) {
      n = b->next;
      lb_free(m, b);
    }
    c->boxes = NULL;
    c->count = 0;
    if (c->img) {
      box_image_free(c->img);
      free(c->img);
      c->img = NULL;
    }
  }
}

int box_template_delete(struct husk_mgr *m, const char *tenant, const char *name_or_id,
                        struct husk_err *err) {
  if (!m->cfg.templates)
    return husk_fail(err, ENOENT, "no template `%s`", name_or_id);
  for (size_t i = 0; i < m->cfg.npools && m->pools; i++) {
    const struct box_image *img = m->pools[i].img;
    if (img && !*tenant && (!strcmp(img->t.name, name_or_id) || !strcmp(img->t.id, name_or_id)))
      return husk_fail(err, EBUSY, "template `%s` is kept ready by the daemon's warm pool %zu",
                       name_or_id, i + 1);
  }
  return template_delete(m->cfg.templates, tenant, name_or_id, err);
}
