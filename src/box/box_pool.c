/* The warm pool and the reaper.
 *
 * Pool: a thread keeps `pool_size` boxes of the default shape ready
 * (namespaces, root, cgroup and init up, through the spawner).  A create
 * whose template and limits match claims one: it gets its tenant, env,
 * TTL and database row at that moment, so TTL and quota count from the
 * claim, and a pool box never serves two tenants (after use it is
 * destroyed like any other).  Pool boxes have no database row: after a
 * crash the start-up sweep removes them like any cgroup no row accounts
 * for.
 *
 * Reaper: a box's teardown (reaping init, removing the cgroup) happens in a
 * thread of its own once its last reference goes, so DELETE answers as soon
 * as the box is unreachable.  The row already says it ended: a crash before
 * the teardown finishes leaves work for the start-up sweep, never a box. */
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

int box_make_jail(struct box_mgr *m, struct live_box *b, const struct husk_limits *lim,
                  bool for_pool, struct husk_err *err) {
  char cg[96];
  box_cgroup_name(m, b->id, cg, sizeof cg);
  if (box_ctl_path(m, b->id, b->ctl_path, sizeof b->ctl_path, err) < 0) {
    b->ctl_path[0] = '\0';
    return -1;
  }
  struct jail_config jc = {
      .limits = {.memory_bytes = lim->memory_bytes, .pids = lim->pids, .cpu_milli = lim->cpu_milli},
      .disk_bytes = lim->disk_bytes, .name = cg, .die_with_parent = false, .ctl_path = b->ctl_path};
  struct spawner *sp = for_pool && m->pool_spawner ? m->pool_spawner : m->spawner;
  if (spawner_create(sp, &jc, &b->j, err) < 0)
    return -1;
  /* The connection it was created with becomes the watch connection: it
   * receives exits nobody else is listening for. */
  return jail_watch(b->j.ctl, err);
}

static bool same_shape(const struct husk_limits *a, const struct husk_limits *b) {
  return a->memory_bytes == b->memory_bytes && a->pids == b->pids && a->cpu_milli == b->cpu_milli &&
         a->disk_bytes == b->disk_bytes;
}

struct live_box *box_pool_claim(struct box_mgr *m, const struct husk_limits *lim) {
  if (!m->pool_running || !same_shape(lim, &m->pool_shape))
    return NULL;
  pthread_mutex_lock(&m->pool_lock);
  struct live_box *b = m->pool;
  if (b) {
    m->pool = b->next;
    b->next = NULL;
    m->pool_count--;
    pthread_cond_signal(&m->pool_cond); /* refill */
  }
  pthread_mutex_unlock(&m->pool_lock);
  return b;
}

void box_pool_return(struct box_mgr *m, struct live_box *b) {
  pthread_mutex_lock(&m->pool_lock);
  b->next = m->pool;
  m->pool = b;
  m->pool_count++;
  pthread_mutex_unlock(&m->pool_lock);
}

static void *pool_main(void *arg) {
  struct box_mgr *m = arg;
  unsigned failures = 0;
  pthread_mutex_lock(&m->pool_lock);
  while (!m->stop) {
    if (m->pool_count >= m->cfg.pool_size) {
      pthread_cond_wait(&m->pool_cond, &m->pool_lock);
      continue;
    }
    pthread_mutex_unlock(&m->pool_lock);
    struct husk_err err;
    struct live_box *b = lb_new();
    int rc = -1;
    if (b && state_new_id("b_", b->id, sizeof b->id, &err) == 0)
      rc = box_make_jail(m, b, &m->pool_shape, true, &err);
    else if (!b)
      husk_fail(&err, ENOMEM, "out of memory");
    if (rc < 0) {
      if (b)
        lb_free(m, b);
      if (failures++ % 60 == 0)
        box_log(m, "pool: cannot prepare a box: %s", err.msg);
      /* Back off, but wake for stop. */
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_sec += 1;
      pthread_mutex_lock(&m->pool_lock);
      if (!m->stop)
        pthread_cond_timedwait(&m->pool_cond, &m->pool_lock, &ts);
      continue;
    }
    failures = 0;
    pthread_mutex_lock(&m->pool_lock);
    b->next = m->pool;
    m->pool = b;
    m->pool_count++;
  }
  pthread_mutex_unlock(&m->pool_lock);
  return NULL;
}

void box_reap_later(struct box_mgr *m, struct live_box *b) {
  pthread_mutex_lock(&m->pool_lock);
  if (!m->reaper_running) {
    pthread_mutex_unlock(&m->pool_lock);
    lb_free(m, b);
    return;
  }
  b->next = m->reap;
  m->reap = b;
  pthread_cond_broadcast(&m->pool_cond);
  pthread_mutex_unlock(&m->pool_lock);
}

static void *reaper_main(void *arg) {
  struct box_mgr *m = arg;
  pthread_mutex_lock(&m->pool_lock);
  for (;;) {
    while (m->reap) {
      struct live_box *b = m->reap;
      m->reap = b->next;
      pthread_mutex_unlock(&m->pool_lock);
      lb_free(m, b);
      pthread_mutex_lock(&m->pool_lock);
    }
    if (m->stop)
      break;
    pthread_cond_wait(&m->pool_cond, &m->pool_lock);
  }
  m->reaper_running = false;
  pthread_mutex_unlock(&m->pool_lock);
  return NULL;
}

int box_pool_start(struct box_mgr *m, struct husk_err *err) {
  char msg[256];
  m->pool_shape = (struct husk_limits){0};
  husk_limits_resolve(&m->pool_shape, msg, sizeof msg); /* all defaults */
  m->reaper_running = true;
  if ((errno = pthread_create(&m->reaper_thread, NULL, reaper_main, m)) != 0) {
    m->reaper_running = false;
    return husk_error(err, errno, "cannot start the reaper thread");
  }
  m->reaper_started = true;
  if (m->cfg.pool_size == 0)
    return 0;
  m->pool_running = true;
  if ((errno = pthread_create(&m->pool_thread, NULL, pool_main, m)) != 0) {
    m->pool_running = false;
    return husk_error(err, errno, "cannot start the pool thread");
  }
  return 0;
}

void box_pool_stop(struct box_mgr *m) {
  pthread_mutex_lock(&m->pool_lock);
  m->stop = true;
  pthread_cond_broadcast(&m->pool_cond);
  pthread_mutex_unlock(&m->pool_lock);
  if (m->pool_running) {
    pthread_join(m->pool_thread, NULL);
    m->pool_running = false;
  }
  /* Unclaimed boxes belong to nobody: destroy them. */
  for (struct live_box *b = m->pool, *n; b; b = n) {
    n = b->next;
    lb_free(m, b);
  }
  m->pool = NULL;
  m->pool_count = 0;
  /* reaper_running is the reaper's to clear (under the lock) when it
   * stops taking work; whether to join is only ours to know. */
  if (m->reaper_started) {
    pthread_join(m->reaper_thread, NULL); /* it drains the queue first */
    m->reaper_started = false;
  }
}
