/* The monitor thread (TTL expiry, init deaths, background exits and
 * limits) and the reconciliation of the database with the kernel when the
 * daemon starts (box_mgr_open in manager.c runs it, then starts the
 * thread). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "box/box_internal.h"
#include "egress/egress.h"
#include "jail/limits.h"
#include "jail/syscalls.h"
#include "state/egress_state.h"
#include "util/cleanup.h"
#include "util/clock.h"
#include "util/fileio.h"

#define MONITOR_MAX_MS 1000 /* the monitor looks at expiries at least this often */

/* ---- the monitor ------------------------------------------------------------------ */

/* Commit an exit, then acknowledge it: until init has the ack it keeps the
 * exit and gives it to every new watch connection, so a daemon that dies in
 * between gets it again after its restart.  The same exit may therefore
 * come more than once: a process already ended (or an exec that is no
 * background process) is ENOENT, and acknowledged all the same.  The exec
 * id keeps a stale exit off a newer process that got the same pid. */
static void record_exit(struct husk_mgr *m, struct live_box *b,
                        const struct ctl_exited *e) {
  struct husk_err err;
  int64_t code = WIFEXITED(e->status) ? WEXITSTATUS(e->status) : -1;
  int64_t sig = WIFSIGNALED(e->status) ? WTERMSIG(e->status) : 0;
  if (e->pid <= 0 || e->id > INT64_MAX)
    return; /* from inside the box: nothing of ours */
  proc_limits_exit(m, b, e->pid, e->id);
  if (state_proc_set_exit_of(m->cfg.state, b->id, e->pid, (int64_t)e->id, code,
                             sig, 0, &err) < 0 &&
      err.code != ENOENT) {
    /* Not acknowledged: init keeps it for the next daemon's watch. */
    box_log(m, "box %s: cannot record exit of pid %lld: %s", b->id,
            (long long)e->pid, err.msg);
    return;
  }
  if (b->init_acks && jail_ack_exit(b->j.ctl, e->id, e->pid, &err) < 0)
    box_log(m, "box %s: %s", b->id, err.msg);
}

enum watch_kind { W_WAKE, W_PIDFD, W_WATCH, W_PROC };
struct watch_item {
  enum watch_kind kind;
  struct live_box *b;
  struct bgproc *p;
};

/* Whether the box's lifetime, or its time paused, is over (a quick look:
 * box_expire decides). */
static bool box_lifetime_over(struct husk_mgr *m, struct live_box *b, int64_t now) {
  pthread_mutex_lock(&m->lock);
  bool paused = b->paused;
  int64_t exp = b->expires_ms, paused_ms = b->paused_ms;
  pthread_mutex_unlock(&m->lock);
  if (b->ending)
    return false;
  return paused ? paused_ms + (int64_t)m->cfg.max_paused_ms <= now : exp && exp <= now;
}

/* End a box whose lifetime (or time paused) is over.  Decided again
 * under the box's pause lock, which a pause or resume holds from its
 * check to its new state: a box paused just as its time ran out is
 * either ended here first (the pause then finds it ending) or paused
 * first (and then its clock has stopped): never ended "expired" while
 * its row says paused.  True when it was ended. */
static bool box_expire(struct husk_mgr *m, struct live_box *b, int64_t now) {
  pthread_mutex_lock(&b->pause_lock);
  pthread_mutex_lock(&m->lock);
  bool paused = b->paused;
  int64_t exp = b->expires_ms, paused_ms = b->paused_ms;
  pthread_mutex_unlock(&m->lock);
  const char *reason = NULL;
  if (b->ending)
    reason = NULL;
  else if (paused && paused_ms + (int64_t)m->cfg.max_paused_ms <= now)
    reason = "paused_too_long";
  else if (!paused && exp && exp <= now)
    reason = "expired";
  struct husk_err err;
  bool ended = reason && box_end(m, b, STATE_BOX_STOPPED, reason, &err) == 0;
  pthread_mutex_unlock(&b->pause_lock);
  return ended;
}

void *box_monitor_main(void *arg) {
  struct husk_mgr *m = arg;
  struct pollfd *pf = NULL;
  struct watch_item *wi = NULL;
  size_t cap = 0;
  while (!m->stop) {
    /* Snapshot what to watch, holding a reference on every box in it. */
    size_t n = 0;
    int64_t now = state_now_ms(), next = now + MONITOR_MAX_MS;
    pthread_mutex_lock(&m->lock);
    size_t need = 1;
    for (struct live_box *b = m->boxes; b; b = b->next) {
      need += 2;
      for (struct bgproc *p = b->procs; p; p = p->next)
        need++;
    }
    if (need > cap) {
      size_t nc = need * 2;
      struct pollfd *npf = realloc(pf, nc * sizeof *npf);
      if (npf)
        pf = npf;
      struct watch_item *nwi = realloc(wi, nc * sizeof *nwi);
      if (nwi)
        wi = nwi;
      if (npf && nwi)
        cap = nc;
    }
    if (need > cap) {
      pthread_mutex_unlock(&m->lock);
      sleep(1); /* out of memory: try again later */
      continue;
    }
    pf[n] = (struct pollfd){.fd = m->wake[0], .events = POLLIN};
    wi[n++] = (struct watch_item){.kind = W_WAKE};
    for (struct live_box *b = m->boxes; b; b = b->next) {
      b->refs++;
      if (b->need_watch) {
        /* A re-adopted box: its init now re-sends the exits it holds, and
         * this thread reads them from here on. */
        struct husk_err err;
        b->need_watch = false;
        if (jail_watch(b->j.ctl, &err) < 0)
          box_log(m, "box %s: %s", b->id, err.msg);
        b->limits_from_ms = now + BOX_ADOPT_LIMITS_GRACE_MS;
      }
      /* A paused box's lifetime waits; its time paused is what ends it. */
      int64_t end = b->paused ? b->paused_ms + (int64_t)m->cfg.max_paused_ms : b->expires_ms;
      if (end && end < next)
        next = end;
      int64_t shift = b->limits_shift_ms;
      b->limits_shift_ms = 0;
      if (shift)
        proc_limits_shift(b, shift);
      pf[n] = (struct pollfd){.fd = b->j.pidfd, .events = POLLIN};
      wi[n++] = (struct watch_item){.kind = W_PIDFD, .b = b};
      pf[n] = (struct pollfd){.fd = b->j.ctl, .events = POLLIN};
      wi[n++] = (struct watch_item){.kind = W_WATCH, .b = b};
      pthread_mutex_lock(&b->lock);
      for (struct bgproc *p = b->procs; p; p = p->next)
        if (p->conn >= 0) {
          pf[n] = (struct pollfd){.fd = p->conn, .events = POLLIN};
          wi[n++] = (struct watch_item){.kind = W_PROC, .b = b, .p = p};
        }
      int64_t due = b->paused ? INT64_MAX : proc_limits_next(b, now);
      if (due < next)
        next = due;
      pthread_mutex_unlock(&b->lock);
    }
    pthread_mutex_unlock(&m->lock);
    /* Boxes paused to disk have no process to watch: the state is looked
     * at once a second while there are any. */
    bool on_disk = atomic_load(&m->paused_on_disk) > 0;
    if (on_disk && m->paused_checked_ms + 1000 < next)
      next = m->paused_checked_ms + 1000;

    int timeout = next > now ? (int)(next - now) : 0;
    int r = poll(pf, n, timeout);
    if (r < 0 && errno != EINTR)
      box_log(m, "monitor: poll: %s", strerror(errno));
    for (size_t i = 0; r > 0 && i < n; i++) {
      if (!pf[i].revents)
        continue;
      struct live_box *b = wi[i].b;
      struct husk_err err;
      switch (wi[i].kind) {
      case W_WAKE: {
        char buf[64];
        while (read(m->wake[0], buf, sizeof buf) > 0)
          ;
        break;
      }
      case W_PIDFD:
        if (!b->ending) {
          enum cgroup_trip t = cgroup_tripped(&b->j.cg);
          box_end(m, b, STATE_BOX_FAILED, t == CGROUP_TRIP_MEMORY ? "memory" : "init_exited", &err);
        }
        break;
      case W_WATCH:
      case W_PROC: {
        int fd = wi[i].kind == W_WATCH ? b->j.ctl : wi[i].p->conn;
        union jail_event ev;
        int rc = jail_recv_fd(fd, &ev, &err);
        if (rc > 0 && ev.h.type == CTL_EXITED)
          record_exit(m, b, &ev.exited);
        if (wi[i].kind == W_PROC && (rc <= 0 || ev.h.type == CTL_EXITED)) {
          /* Ended (or its connection is): the fds it held go, and with
           * them its place in the tenant's bound.  A write to its stdin
           * is refused from now on anyway (the row says it ended). */
          pthread_mutex_lock(&b->lock);
          close_quiet(wi[i].p->conn);
          wi[i].p->conn = -1;
          close_quiet(wi[i].p->stdin_w);
          wi[i].p->stdin_w = -1;
          if (wi[i].p->counted) {
            wi[i].p->counted = false;
            atomic_fetch_sub(&b->nprocs, 1);
          }
          pthread_mutex_unlock(&b->lock);
        }
        /* The watch connection closing means init is gone: the pidfd says
         * so too, and that path ends the box. */
        break;
      }
      }
    }
    /* Expiries, then the limits of background processes. */
    now = state_now_ms();
    if (on_disk && now >= m->paused_checked_ms + 1000) {
      m->paused_checked_ms = now;
      box_paused_expire(m, now);
    }
    for (size_t i = 0; i < n; i++) {
      struct live_box *b = wi[i].b;
      if (wi[i].kind != W_PIDFD)
        continue;
      if (box_lifetime_over(m, b, now) && box_expire(m, b, now))
        continue;
      pthread_mutex_lock(&m->lock);
      bool paused = b->paused;
      pthread_mutex_unlock(&m->lock);
      if (!paused)
        proc_limits_check(m, b, now);
    }
    for (size_t i = 0; i < n; i++)
      if (wi[i].kind == W_PIDFD)
        lb_unref(m, wi[i].b);
  }
  free(pf);
  free(wi);
  return NULL;
}

/* ---- reconciliation ------------------------------------------------------------------ */

struct row_list {
  struct state_box *rows;
  size_t n, cap;
};

static int collect_row(void *ctx, const struct state_box *sb) {
  struct row_list *rl = ctx;
  if (rl->n == rl->cap) {
    size_t nc = rl->cap ? rl->cap * 2 : 64;
    struct state_box *nr = realloc(rl->rows, nc * sizeof *nr);
    if (!nr)
      return -1;
    rl->rows = nr;
    rl->cap = nc;
  }
  struct state_box *c = &rl->rows[rl->n++];
  *c = *sb;
  c->env_json = sb->env_json ? strdup(sb->env_json) : NULL;
  c->metadata_json = sb->metadata_json ? strdup(sb->metadata_json) : NULL;
  return 0;
}

/* Kill and remove whatever a box row points at, if it is still there. */
static void cleanup_row(struct husk_mgr *m, const struct state_box *sb) {
  if (sb->init_pid > 0 && sb->init_start_time &&
      box_proc_start_time((pid_t)sb->init_pid) == sb->init_start_time) {
    int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)sb->init_pid, 0);
    if (pidfd >= 0) {
      sys_pidfd_send_signal(pidfd, SIGKILL);
      struct pollfd p = {.fd = pidfd, .events = POLLIN};
      while (poll(&p, 1, 10000) < 0 && errno == EINTR)
        ;
      close(pidfd);
    }
  }
  if (sb->cgroup[0]) {
    struct cgroup cg;
    struct husk_err err;
    if (cgroup_open(&cg, sb->cgroup, &err) == 0) {
      cgroup_kill(&cg, &err);
      if (cgroup_destroy(&cg, &err) < 0)
        box_log(m, "box %s: %s", sb->id, err.msg);
    }
  }
  char path[PATH_MAX];
  struct husk_err err;
  if (box_ctl_path(m, sb->id, path, sizeof path, &err) == 0)
    unlink(path);
}

static int adopt(struct husk_mgr *m, const struct state_box *sb, struct husk_err *err) {
  if (!box_init_alive((pid_t)sb->init_pid, sb->init_start_time))
    return husk_fail(err, ESRCH, "its init process is gone");
  struct live_box *b = lb_new();
  if (!b)
    return husk_fail(err, ENOMEM, "out of memory");
  snprintf(b->id, sizeof b->id, "%s", sb->id);
  snprintf(b->tenant, sizeof b->tenant, "%s", sb->tenant_id);
  b->limits = (struct husk_limits){.memory_bytes = (uint64_t)sb->memory, .pids = (uint64_t)sb->pids,
                                   .cpu_milli = (uint64_t)sb->cpu_milli, .disk_bytes = (uint64_t)sb->disk,
                                   .timeout_ms = (uint64_t)sb->timeout_ms};
  b->expires_ms = sb->expires_ms;
  b->env = box_env_from_json(sb->env_json);
  snprintf(b->workdir, sizeof b->workdir, "%s", sb->workdir);
  b->j.pid = (pid_t)sb->init_pid;
  b->j.uid_base = (uint32_t)sb->uid_base;
  b->j.slot = (unsigned)sb->slot;
  int rc = -1;
  if (!b->env) {
    husk_fail(err, ENOMEM, "out of memory");
    goto fail;
  }
  if (box_ctl_path(m, b->id, b->ctl_path, sizeof b->ctl_path, err) < 0)
    goto fail;
  b->j.pidfd = (int)syscall(SYS_pidfd_open, b->j.pid, 0);
  if (b->j.pidfd < 0) {
    husk_error(err, errno, "pidfd_open");
    goto fail;
  }
  if (cgroup_open(&b->j.cg, sb->cgroup, err) < 0)
    goto fail;
  {
    /* A paused box (or one a crash left frozen) runs for the handshake
     * with its init; box_pause_adopt below freezes it again. */
    bool frozen = false;
    if (cgroup_frozen(&b->j.cg, &frozen, err) < 0 ||
        (frozen && cgroup_freeze(&b->j.cg, false, BOX_FREEZE_TIMEOUT_MS, err) < 0))
      goto fail;
  }
  if ((b->j.ctl = jail_connect(b->ctl_path, err)) < 0)
    goto fail;
  uint32_t version = 0;
  if ((b->j.fs = jail_get_fs(b->j.ctl, &version, err)) < 0)
    goto fail;
  /* An init started by an older daemon delivers each exit once and knows
   * no acks; it gets none. */
  b->init_acks = version >= 1;
  b->init_version = version;
  /* CTL_WATCH makes init flush the exits it holds: the monitor sends it,
   * once it reads this connection. */
  b->need_watch = true;
  {
    /* Its background processes' limits hold across the restart. */
    struct husk_err e2;
    if (proc_limits_adopt(m, b, &e2) < 0)
      box_log(m, "box %s: the limits of its background processes are not enforced: %s", b->id,
              e2.msg);
  }
  {
    /* An egress box gets its listeners back on the link that survived
     * with it; if that fails it keeps running with no network (closed). */
    char net[16];
    cleanup_free char *pol = NULL;
    struct husk_err e2;
    if (m->egress && state_box_egress_get(m->cfg.state, b->id, net, sizeof net, &pol, &e2) == 0 &&
        !strcmp(net, "egress") && box_egress_attach(m, b, pol, false, &e2) < 0)
      box_log(m, "box %s: egress not restored, the box has no network: %s", b->id, e2.msg);
  }
  box_ctx_adopt(m, b);
  if (box_pause_adopt(m, b, !strcmp(sb->state, STATE_BOX_PAUSED), sb->paused_ms, err) < 0)
    goto fail;
  lb_list_add(m, b);
  lb_unref(m, b);
  return 0;
fail:
  b->ctl_path[0] = '\0'; /* cleanup_row removes it */
  b->j.pid = -1;         /* not ours to kill here: cleanup_row checks it first */
  lb_free(m, b);
  return rc;
}

static struct husk_mgr *sweeping; /* for the cgroup sweep callback (open is single-threaded) */

static bool stale_box_cgroup(const char *name) {
  const char *id = name + strlen(sweeping->cg_prefix);
  struct live_box *b = lb_get(sweeping, NULL, id);
  if (b) {
    lb_unref(sweeping, b);
    return false;
  }
  struct cgroup cg;
  struct husk_err err;
  if (cgroup_open(&cg, name, &err) == 0) {
    cgroup_kill(&cg, &err);
    for (int i = 0; i < 2000 && cgroup_populated(&cg); i++)
      usleep(1000);
    cgroup_close(&cg);
  }
  return true;
}

/* A box a build ran one of its steps in (metadata husk.build, which only
 * the build sets: box.c refuses husk.* keys from callers). */
static bool build_step(const struct state_box *sb) {
  if (!sb->metadata_json || !strstr(sb->metadata_json, "\"husk.build\""))
    return false;
  json_t *o = json_loads(sb->metadata_json, 0, NULL);
  bool is = json_is_string(json_object_get(o, "husk.build"));
  json_decref(o);
  return is;
}

void box_reconcile(struct husk_mgr *m) {
  struct row_list rl = {0};
  char cursor[STATE_CURSOR_SIZE] = "";
  struct husk_err err;
  for (;;) {
    char next[STATE_CURSOR_SIZE] = "";
    struct state_box_filter f = {.state = STATE_BOX_LIVE, .cursor = cursor, .limit = STATE_LIST_MAX};
    if (state_box_list(m->cfg.state, &f, collect_row, &rl, next, sizeof next, &err) < 0) {
      box_log(m, "reconcile: %s", err.msg);
      break;
    }
    if (!next[0])
      break;
    snprintf(cursor, sizeof cursor, "%s", next);
  }
  int64_t now = state_now_ms();
  /* Re-adoption is announced and its end logged, so an operator (and the
   * chaos run, which kills the daemon between the two lines) can tell a
   * restart that stopped in the middle of it. */
  size_t adopted = 0, lost = 0;
  int64_t t0 = mono_ms();
  box_log(m, "re-adoption: %zu live box(es) to reconcile", rl.n);
  for (size_t i = 0; i < rl.n; i++) {
    struct state_box *sb = &rl.rows[i];
    const char *state = NULL, *reason = NULL;
    char why[HUSK_ERR_MSG_MAX + 64];
    if (!strcmp(sb->state, STATE_BOX_RUNNING) && build_step(sb)) {
      /* The build it served died with the previous daemon. */
      state = STATE_BOX_STOPPED;
      reason = "killed";
    } else if (!strcmp(sb->state, STATE_BOX_PAUSED) &&
               sb->paused_ms + (int64_t)m->cfg.max_paused_ms <= now) {
      state = STATE_BOX_STOPPED;
      reason = "paused_too_long"; /* a snapshot it was paused into goes with the sweep */
    } else if (!strcmp(sb->state, STATE_BOX_PAUSED) && sb->paused_snapshot[0]) {
      /* Paused to disk: nothing of it runs (a crash may have come before
       * its jail was torn down: that goes now); its row stays. */
      cleanup_row(m, sb);
      box_paused_on_disk(m, +1);
      box_log(m, "box %s stays paused to disk", sb->id);
      adopted++;
      continue;
    } else if ((!strcmp(sb->state, STATE_BOX_RUNNING) && (!sb->expires_ms || sb->expires_ms > now)) ||
               !strcmp(sb->state, STATE_BOX_PAUSED)) {
      if (adopt(m, sb, &err) == 0) {
        box_log(m, "box %s re-adopted", sb->id);
        adopted++;
        continue;
      }
      lost++;
      snprintf(why, sizeof why, "lost in a daemon restart: %s", err.msg);
      husk_sanitize_line(why);
      state = STATE_BOX_FAILED;
      reason = why;
    } else if (!strcmp(sb->state, STATE_BOX_RUNNING)) {
      state = STATE_BOX_STOPPED;
      reason = "expired";
    } else if (!strcmp(sb->state, STATE_BOX_CREATING)) {
      state = STATE_BOX_FAILED;
      reason = "daemon restarted during creation";
    } else {
      state = STATE_BOX_STOPPED; /* stopping: finish what was started */
      reason = sb->reason[0] ? sb->reason : "deleted";
    }
    cleanup_row(m, sb);
    if (state_box_set_state(m->cfg.state, sb->id, NULL, state, reason, 0, &err) < 0)
      box_log(m, "box %s: %s", sb->id, err.msg);
    else
      box_log(m, "box %s: %s (%s)", sb->id, state, reason);
  }
  for (size_t i = 0; i < rl.n; i++)
    state_box_free(&rl.rows[i]);
  free(rl.rows);

  /* Leftovers no row accounts for: cgroups and sockets of boxes that are
   * not live.  Boxes of `husk run` (run-*) are not ours. */
  sweeping = m;
  cgroup_sweep(m->cg_prefix, stale_box_cgroup);
  sweeping = NULL;
  if (m->egress)
    egress_sweep(m->egress); /* links and firewall state of boxes that are gone */
  char dir[PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s/boxes", m->data_dir);
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      size_t len = strlen(e->d_name);
      if (len < 6 || strcmp(e->d_name + len - 5, ".sock"))
        continue;
      char id[STATE_BOX_ID_SIZE];
      if (len - 5 >= sizeof id)
        continue;
      memcpy(id, e->d_name, len - 5);
      id[len - 5] = '\0';
      struct live_box *b = lb_get(m, NULL, id);
      if (b)
        lb_unref(m, b);
      else
        unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
  }
  box_log(m, "re-adoption done: %zu adopted, %zu lost, %zu ended, in %lld ms", adopted, lost,
          rl.n - adopted - lost, (long long)(mono_ms() - t0));
}
