/* Pausing a box in memory: its cgroup frozen, its lifetime stopped.
 *
 * The freezer and the row are kept in step so that a crash between the
 * two is harmless: a pause freezes first and records after (a crash in
 * between leaves a frozen box recorded running, which re-adoption thaws:
 * the pause was never acknowledged); a resume thaws first and records
 * after (a crash in between leaves a running box recorded paused, which
 * re-adoption freezes again).  The caller hears "paused" or "running"
 * only after the commit. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "box/box_internal.h"
#include "husk/box.h"
#include "state/state.h"

int husk_box_pause(struct husk_mgr *m, const char *tenant, const char *id,
                   struct husk_box_info *out, struct husk_err *err) {
  struct live_box *b = box_running(m, tenant, id, err);
  if (!b)
    return -1;
  pthread_mutex_lock(&b->pause_lock);
  int rc = -1;
  if (b->ending) {
    husk_fail(err, EBUSY, "sandbox %s is ending", id);
    goto out;
  }
  pthread_mutex_lock(&m->lock);
  bool paused = b->paused;
  int64_t expires = b->expires_ms;
  pthread_mutex_unlock(&m->lock);
  if (paused) {
    husk_fail(err, EBUSY, "sandbox %s is paused", id);
    goto out;
  }
  if (cgroup_freeze(&b->j.cg, true, BOX_FREEZE_TIMEOUT_MS, err) < 0) {
    husk_error_wrap(err, "cannot pause sandbox %s", id);
    goto out;
  }
  int64_t now = state_now_ms();
  if (state_box_set_paused(m->cfg.state, b->id, true, now, expires, err) < 0) {
    struct husk_err e2;
    if (cgroup_freeze(&b->j.cg, false, BOX_FREEZE_TIMEOUT_MS, &e2) < 0)
      box_log(m, "box %s: cannot thaw it after a failed pause: %s", b->id, e2.msg);
    goto out;
  }
  pthread_mutex_lock(&m->lock);
  b->paused = true;
  b->paused_ms = now;
  pthread_mutex_unlock(&m->lock);
  box_wake_monitor(m);
  box_log(m, "box %s paused", b->id);
  rc = 0;
out:
  pthread_mutex_unlock(&b->pause_lock);
  lb_unref(m, b);
  if (rc == 0 && out)
    return husk_box_get(m, tenant, id, out, err);
  return rc;
}

int husk_box_resume(struct husk_mgr *m, const char *tenant, const char *id,
                    struct husk_box_info *out, struct husk_err *err) {
  if (!box_valid_id(id))
    return husk_fail(err, ENOENT, "no such sandbox");
  struct live_box *b = lb_get(m, tenant, id);
  if (!b) {
    struct state_box sb;
    if (state_box_get(m->cfg.state, tenant, id, &sb, err) < 0)
      return -1;
    husk_fail(err, EBUSY, "sandbox %s is %s, not paused", id, sb.state);
    state_box_free(&sb);
    return -1;
  }
  pthread_mutex_lock(&b->pause_lock);
  int rc = -1;
  pthread_mutex_lock(&m->lock);
  bool paused = b->paused;
  int64_t since = b->paused_ms, expires = b->expires_ms;
  pthread_mutex_unlock(&m->lock);
  if (b->ending || !paused) {
    husk_fail(err, EBUSY, "sandbox %s is %s, not paused", id, b->ending ? "ending" : "running");
    goto out;
  }
  if (cgroup_freeze(&b->j.cg, false, BOX_FREEZE_TIMEOUT_MS, err) < 0) {
    husk_error_wrap(err, "cannot resume sandbox %s", id);
    goto out;
  }
  int64_t now = state_now_ms();
  int64_t spent = now > since ? now - since : 0;
  /* What was left of its lifetime when it paused, from now on. */
  int64_t new_exp = expires ? expires + spent : 0;
  if (state_box_set_paused(m->cfg.state, b->id, false, now, new_exp, err) < 0) {
    struct husk_err e2;
    if (cgroup_freeze(&b->j.cg, true, BOX_FREEZE_TIMEOUT_MS, &e2) < 0)
      box_log(m, "box %s: cannot freeze it again after a failed resume: %s", b->id, e2.msg);
    goto out;
  }
  pthread_mutex_lock(&m->lock);
  b->paused = false;
  b->paused_ms = 0;
  b->expires_ms = new_exp;
  b->limits_shift_ms += spent;
  pthread_mutex_unlock(&m->lock);
  box_wake_monitor(m);
  box_log(m, "box %s resumed after %lld ms", b->id, (long long)spent);
  rc = 0;
out:
  pthread_mutex_unlock(&b->pause_lock);
  lb_unref(m, b);
  if (rc == 0 && out)
    return husk_box_get(m, tenant, id, out, err);
  return rc;
}

int box_pause_adopt(struct husk_mgr *m, struct live_box *b, bool paused, int64_t paused_ms,
                    struct husk_err *err) {
  if (cgroup_freeze(&b->j.cg, paused, BOX_FREEZE_TIMEOUT_MS, err) < 0)
    return -1;
  pthread_mutex_lock(&m->lock);
  b->paused = paused;
  b->paused_ms = paused ? paused_ms : 0;
  pthread_mutex_unlock(&m->lock);
  return 0;
}
