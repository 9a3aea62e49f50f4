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

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "box/box_internal.h"
#include "egress/egress.h"
#include "husk/box.h"
#include "jail/limits.h"
#include "state/egress_state.h"
#include "state/snapshot_state.h"
#include "state/state.h"

static int resume_from_disk(struct husk_mgr *m, const char *tenant, const char *id,
                            struct husk_err *err);

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
  if (expires && expires <= state_now_ms()) {
    /* Its lifetime is over: the monitor ends it (it waits for this lock). */
    husk_fail(err, EBUSY, "sandbox %s is ending: its lifetime is over", id);
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
    pthread_mutex_lock(&m->disk_resume_lock);
    int rc = resume_from_disk(m, tenant, id, err);
    pthread_mutex_unlock(&m->disk_resume_lock);
    if (rc == 0 && out)
      return husk_box_get(m, tenant, id, out, err);
    return rc;
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

/* ---- to disk ------------------------------------------------------------------- */

void box_paused_on_disk(struct husk_mgr *m, int delta) {
  atomic_fetch_add(&m->paused_on_disk, delta);
  if (delta > 0)
    box_wake_monitor(m);
}

/* Wait until only the caller holds b, then tear it down here, so that
 * nothing of it (its cgroup, its control socket's path) is left for the
 * box that a resume makes under the same id.  Past the wait it is left to
 * the reaper. */
static void teardown_now(struct husk_mgr *m, struct live_box *b) {
  for (int i = 0; i < 2000; i++) {
    pthread_mutex_lock(&m->lock);
    bool alone = b->refs == 1;
    if (alone)
      b->refs = 0;
    pthread_mutex_unlock(&m->lock);
    if (alone) {
      lb_free(m, b);
      return;
    }
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  box_log(m, "box %s: still in use 10 s after its pause to disk; torn down later", b->id);
  lb_unref(m, b);
}

int husk_box_pause_to_disk(struct husk_mgr *m, const char *tenant, const char *id,
                           struct husk_box_info *out, struct husk_err *err) {
  struct live_box *b = box_live(m, tenant, id, err);
  if (!b)
    return -1;
  pthread_mutex_lock(&b->pause_lock);
  pthread_mutex_lock(&m->lock);
  bool paused = b->paused;
  pthread_mutex_unlock(&m->lock);
  char snap[32];
  if (b->ending) {
    husk_fail(err, EBUSY, "sandbox %s is ending", id);
    goto fail;
  }
  /* Frozen from the snapshot to the end: nothing it writes is lost. */
  if (!paused && cgroup_freeze(&b->j.cg, true, BOX_FREEZE_TIMEOUT_MS, err) < 0) {
    husk_error_wrap(err, "cannot pause sandbox %s", id);
    goto fail;
  }
  if (box_snapshot_take(m, b, true, NULL, snap, err) < 0)
    goto thaw;
  if (state_box_pause_to_disk(m->cfg.state, b->id, state_now_ms(), snap, err) < 0) {
    box_snapshot_drop(m, tenant, snap);
    goto thaw;
  }
  box_paused_on_disk(m, +1);
  box_retire(m, b);
  pthread_mutex_unlock(&b->pause_lock);
  box_log(m, "box %s paused to disk (snapshot %s)", id, snap);
  teardown_now(m, b);
  return out ? husk_box_get(m, tenant, id, out, err) : 0;
thaw:
  if (!paused) {
    struct husk_err e2;
    if (cgroup_freeze(&b->j.cg, false, BOX_FREEZE_TIMEOUT_MS, &e2) < 0)
      box_log(m, "box %s: cannot thaw it after a failed pause: %s", b->id, e2.msg);
  }
fail:
  pthread_mutex_unlock(&b->pause_lock);
  lb_unref(m, b);
  return -1;
}

/* husk_box_resume of a box paused to disk: built again under its id. */
static int resume_from_disk(struct husk_mgr *m, const char *tenant, const char *id,
                            struct husk_err *err) {
  struct state_box sb;
  if (state_box_get(m->cfg.state, tenant, id, &sb, err) < 0)
    return -1;
  int rc = -1;
  struct state_snapshot p = {0};
  struct box_image *img = NULL;
  struct live_box *b = NULL;
  int fd = -1;
  if (strcmp(sb.state, STATE_BOX_PAUSED) != 0 || !sb.paused_snapshot[0]) {
    husk_fail(err, EBUSY, "sandbox %s is %s, not paused", id, sb.state);
    goto out;
  }
  if (!m->store) {
    husk_fail(err, ENOTSUP, "resuming a sandbox paused to disk needs the object store");
    goto out;
  }
  if (state_snapshot_get(m->cfg.state, tenant, sb.paused_snapshot, &p, err) < 0) {
    husk_error_wrap(err, "the state of sandbox %s", id);
    goto out;
  }
  if (!(b = lb_new())) {
    husk_fail(err, ENOMEM, "out of memory");
    goto out;
  }
  snprintf(b->id, sizeof b->id, "%s", sb.id);
  snprintf(b->tenant, sizeof b->tenant, "%s", sb.tenant_id);
  snprintf(b->workdir, sizeof b->workdir, "%s", sb.workdir);
  b->limits = (struct husk_limits){.memory_bytes = (uint64_t)sb.memory, .pids = (uint64_t)sb.pids,
                                   .cpu_milli = (uint64_t)sb.cpu_milli,
                                   .disk_bytes = (uint64_t)sb.disk,
                                   .timeout_ms = (uint64_t)sb.timeout_ms};
  if (!(b->env = box_env_from_json(sb.env_json))) {
    husk_fail(err, ENOMEM, "out of memory");
    goto out;
  }
  if (sb.template_id[0]) {
    if (!(img = calloc(1, sizeof *img))) {
      husk_fail(err, ENOMEM, "out of memory");
      goto out;
    }
    if (box_image_resolve(m, tenant, sb.template_name, b->env, img, err) < 0) {
      free(img);
      img = NULL;
      goto out;
    }
    if (strcmp(img->t.id, sb.template_id) != 0) {
      husk_fail(err, ESTALE, "the template of sandbox %s was replaced while it was paused", id);
      goto out;
    }
  }
  if ((fd = box_snapshot_open(m, tenant, p.id, err)) < 0)
    goto out;
  int64_t now = state_now_ms();
  b->expires_ms = sb.expires_ms ? now + (sb.expires_ms > sb.paused_ms ? sb.expires_ms - sb.paused_ms : 0)
                                : 0;
  uint64_t inodes = b->limits.disk_bytes / HUSK_DISK_BYTES_PER_INODE;
  struct spawn_restore rs = {.fd = fd,
                             .sha256 = p.sha256,
                             .max_bytes = b->limits.disk_bytes,
                             .max_entries = inodes < HUSK_MIN_INODES ? HUSK_MIN_INODES : inodes};
  if (box_make_jail(m, b, &b->limits, false, img, &rs, err) < 0) {
    husk_error_wrap(err, "cannot resume sandbox %s", id);
    goto out;
  }
  {
    char net[16];
    char *pol = NULL;
    struct husk_err e2;
    if (m->egress && state_box_egress_get(m->cfg.state, b->id, net, sizeof net, &pol, &e2) == 0 &&
        !strcmp(net, "egress") && box_egress_attach(m, b, pol, true, err) < 0) {
      free(pol);
      goto out;
    }
    free(pol);
  }
  if (state_box_resume_from_disk(m->cfg.state, b->id, p.id, b->expires_ms, b->j.pid,
                                 box_proc_start_time(b->j.pid), b->j.uid_base, b->j.slot,
                                 err) < 0)
    goto out;
  lb_list_add(m, b);
  lb_unref(m, b);
  b = NULL;
  box_paused_on_disk(m, -1);
  box_snapshot_drop(m, tenant, p.id);
  box_log(m, "box %s resumed from disk", id);
  rc = 0;
out:
  if (b)
    lb_free(m, b); /* its jail, if made, goes: the row stays paused */
  if (fd >= 0)
    close(fd);
  if (img) {
    box_image_free(img);
    free(img);
  }
  state_snapshot_free(&p);
  state_box_free(&sb);
  return rc;
}

struct expire_ctx {
  struct husk_mgr *m;
  int64_t now;
};

static int expire_one(void *ctx, const struct state_box *sb) {
  struct expire_ctx *x = ctx;
  struct husk_mgr *m = x->m;
  if (!sb->paused_snapshot[0] || sb->paused_ms + (int64_t)m->cfg.max_paused_ms > x->now)
    return 0;
  struct husk_err e;
  if (state_box_set_state(m->cfg.state, sb->id, STATE_BOX_PAUSED, STATE_BOX_STOPPED,
                          "paused_too_long", 0, &e) < 0) {
    if (e.code != ESTALE)
      box_log(m, "box %s: %s", sb->id, e.msg);
    return 0;
  }
  box_snapshot_drop(m, sb->tenant_id, sb->paused_snapshot);
  box_paused_on_disk(m, -1);
  box_log(m, "box %s ended: stopped (paused_too_long)", sb->id);
  return 0;
}

void box_paused_expire(struct husk_mgr *m, int64_t now) {
  struct expire_ctx x = {.m = m, .now = now};
  char cursor[STATE_CURSOR_SIZE] = "";
  for (;;) {
    char next[STATE_CURSOR_SIZE] = "";
    struct state_box_filter f = {.state = STATE_BOX_PAUSED, .cursor = cursor,
                                 .limit = STATE_LIST_MAX};
    struct husk_err err;
    if (state_box_list(m->cfg.state, &f, expire_one, &x, next, sizeof next, &err) < 0) {
      box_log(m, "paused boxes: %s", err.msg);
      return;
    }
    if (!next[0])
      return;
    snprintf(cursor, sizeof cursor, "%s", next);
  }
}
