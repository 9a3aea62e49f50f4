/* The reaper: a box's teardown (reaping init, removing the cgroup) happens
 * in a thread of its own once its last reference goes, so DELETE answers as
 * soon as the box is unreachable.  The row already says it ended: a crash
 * before the teardown finishes leaves work for the start-up sweep, never a
 * box. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>

#include "box/box_internal.h"

void box_reap_later(struct husk_mgr *m, struct live_box *b) {
  pthread_mutex_lock(&m->reap_lock);
  if (!m->reaper_running) {
    pthread_mutex_unlock(&m->reap_lock);
    lb_free(m, b);
    return;
  }
  b->next = m->reap;
  m->reap = b;
  pthread_cond_signal(&m->reap_cond);
  pthread_mutex_unlock(&m->reap_lock);
}

static void *reaper_main(void *arg) {
  struct husk_mgr *m = arg;
  pthread_mutex_lock(&m->reap_lock);
  for (;;) {
    while (m->reap) {
      struct live_box *b = m->reap;
      m->reap = b->next;
      pthread_mutex_unlock(&m->reap_lock);
      lb_free(m, b);
      pthread_mutex_lock(&m->reap_lock);
    }
    if (m->reaper_stop)
      break;
    pthread_cond_wait(&m->reap_cond, &m->reap_lock);
  }
  m->reaper_running = false;
  pthread_mutex_unlock(&m->reap_lock);
  return NULL;
}

int box_reaper_start(struct husk_mgr *m, struct husk_err *err) {
  m->reaper_running = true;
  if ((errno = pthread_create(&m->reaper_thread, NULL, reaper_main, m)) != 0) {
    m->reaper_running = false;
    return husk_error(err, errno, "cannot start the reaper thread");
  }
  m->reaper_started = true;
  return 0;
}

void box_reaper_stop(struct husk_mgr *m) {
  pthread_mutex_lock(&m->reap_lock);
  m->reaper_stop = true;
  pthread_cond_signal(&m->reap_cond);
  pthread_mutex_unlock(&m->reap_lock);
  /* reaper_running is the reaper's to clear (under the lock) when it
   * stops taking work; whether to join is only ours to know. */
  if (m->reaper_started) {
    pthread_join(m->reaper_thread, NULL); /* it drains the queue first */
    m->reaper_started = false;
  }
}
