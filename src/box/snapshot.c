/* Filesystem snapshots (husk/snapshot.h): a box's writable state archived
 * into the tenant's store, and boxes made from it.
 *
 * The write discipline, so that a snapshot is whole or absent:
 *   1. its row, 'creating', with what the box was made of;
 *   2. the archive streams (snapshot_archive.c) into a store writer (a
 *      temporary file, digests along) while the box is frozen;
 *   3. the writer is published as the object SNAP_BUCKET/<id> (the
 *      store's own write discipline: whole or absent);
 *   4. the row becomes 'ready' with the archive's size and digest.
 * A crash before 4 leaves a 'creating' row, which box_snapshot_sweep
 * removes with its object, if any, at the next start.  A delete removes
 * the row first, then the object.
 *
 * Restoring reads the object through a file descriptor in the spawner,
 * before the box's root is built (spawner.c restore_fill), checking the
 * digest the row recorded. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "box/box_internal.h"
#include "box/snapshot_archive.h"
#include "husk/snapshot.h"
#include "jail/limits.h"
#include "state/snapshot_state.h"
#include "storage/remote.h"
#include "storage/store.h"
#include "util/cleanup.h"
#include "util/cleanup_json.h"

#define SNAP_BUCKET STATE_SNAPSHOT_BUCKET
/* zstd level of the archives: tar | zstd -3's. */
#define SNAP_ZSTD_LEVEL 3

void box_mgr_set_store(struct husk_mgr *m, struct store *s) {
  m->store = s;
  box_snapshot_sweep(m);
}

void husk_snapshot_info_free(struct husk_snapshot_info *si) {
  if (!si)
    return;
  free(si->env_json);
  free(si->metadata_json);
  si->env_json = si->metadata_json = NULL;
}

static void fill_snapshot(struct husk_snapshot_info *si, const struct state_snapshot *p) {
  memset(si, 0, sizeof *si);
  snprintf(si->id, sizeof si->id, "%s", p->id);
  snprintf(si->tenant_id, sizeof si->tenant_id, "%s", p->tenant_id);
  snprintf(si->box_id, sizeof si->box_id, "%s", p->box_id);
  snprintf(si->template_name, sizeof si->template_name, "%s",
           p->template_name[0] ? p->template_name : "default");
  snprintf(si->template_id, sizeof si->template_id, "%s", p->template_id);
  snprintf(si->workdir, sizeof si->workdir, "%s", p->workdir[0] ? p->workdir : "/workspace");
  si->limits = (struct husk_limits){.memory_bytes = (uint64_t)p->memory,
                                    .pids = (uint64_t)p->pids,
                                    .cpu_milli = (uint64_t)p->cpu_milli,
                                    .disk_bytes = (uint64_t)p->disk,
                                    .timeout_ms = (uint64_t)p->timeout_ms};
  si->env_json = strdup(p->env_json ? p->env_json : "{}");
  si->metadata_json = strdup(p->metadata_json ? p->metadata_json : "{}");
  si->size = (uint64_t)p->size;
  si->data_bytes = (uint64_t)p->data_bytes;
  si->entries = (uint64_t)p->entries;
  snprintf(si->sha256, sizeof si->sha256, "%s", p->sha256);
  si->created_ms = p->created_ms;
  si->boxes = (uint64_t)p->refs;
}

static int need_store(struct husk_mgr *m, struct husk_err *err) {
  if (!m->store)
    return husk_fail(err, ENOTSUP, "snapshots need the object store (husk serve)");
  return 0;
}

/* ---- taking one ---------------------------------------------------------------- */

/* Where the archive goes while it is written: the embedded store's writer,
 * or (an external store) a temporary file uploaded at the end. */
struct snap_sink {
  struct store_writer *w;
  int tmp;
  uint64_t size, limit;
  EVP_MD_CTX *md;
  struct husk_err err;
  bool failed;
};

static int sink_out(void *ctx, const void *buf, size_t len) {
  struct snap_sink *k = ctx;
  if (k->limit && len > k->limit - k->size) {
    k->failed = true;
    husk_fail(&k->err, STORE_EQUOTA, "The tenant's storage quota would be exceeded");
    errno = EDQUOT;
    return -1;
  }
  if (EVP_DigestUpdate(k->md, buf, len) != 1) {
    k->failed = true;
    husk_fail(&k->err, EIO, "cannot compute the snapshot's digest");
    errno = EIO;
    return -1;
  }
  if (k->w) {
    if (store_writer_write(k->w, buf, len, &k->err) < 0) {
      k->failed = true;
      errno = k->err.code == STORE_ETOOLARGE ? EFBIG : EIO;
      return -1;
    }
  } else {
    const char *p = buf;
    size_t left = len;
    while (left) {
      ssize_t n = write(k->tmp, p, left);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0) {
        k->failed = true;
        husk_error(&k->err, errno, "cannot stage the snapshot");
        return -1;
      }
      p += n;
      left -= (size_t)n;
    }
  }
  k->size += len;
  return 0;
}

static void sink_free(struct snap_sink *k) {
  if (k->w)
    store_writer_abort(k->w);
  k->w = NULL;
  close_quiet(k->tmp);
  k->tmp = -1;
  EVP_MD_CTX_free(k->md);
  k->md = NULL;
}

/* The archive of b's files into the sink, with the box frozen (unless it
 * is paused already: then it stays so). */
static int archive_box(struct husk_mgr *m, struct live_box *b, bool for_pause, struct snap_sink *k,
                       struct snap_stats *st, struct husk_err *err) {
  if (for_pause) {
    /* The caller holds pause_lock and has frozen the box. */
    int rc = snap_archive_write(b->j.fs, b->j.uid_base, SNAP_ZSTD_LEVEL, sink_out, k, st, err);
    if (rc < 0 && k->failed)
      *err = k->err;
    return rc < 0 ? -1 : 0;
  }
  pthread_mutex_lock(&b->pause_lock);
  pthread_mutex_lock(&m->lock);
  bool paused = b->paused;
  pthread_mutex_unlock(&m->lock);
  int rc = -1;
  if (b->ending) {
    husk_fail(err, EBUSY, "sandbox %s is ending", b->id);
    goto out;
  }
  if (!paused && cgroup_freeze(&b->j.cg, true, BOX_FREEZE_TIMEOUT_MS, err) < 0) {
    husk_error_wrap(err, "cannot freeze sandbox %s for its snapshot", b->id);
    goto out;
  }
  rc = snap_archive_write(b->j.fs, b->j.uid_base, SNAP_ZSTD_LEVEL, sink_out, k, st, err);
  if (rc < 0 && k->failed)
    *err = k->err;
  if (!paused) {
    struct husk_err e2;
    if (cgroup_freeze(&b->j.cg, false, BOX_FREEZE_TIMEOUT_MS, &e2) < 0)
      box_log(m, "box %s: cannot thaw it after its snapshot: %s", b->id, e2.msg);
  }
out:
  pthread_mutex_unlock(&b->pause_lock);
  return rc;
}

static void hex32(const unsigned char d[32], char out[65]) {
  for (int i = 0; i < 32; i++)
    snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* The object name of a snapshot in the external store. */
static char *remote_snap_key(const char *tenant, const char *id) {
  return remote_key(tenant, SNAP_BUCKET, id);
}

/* Remove a snapshot's archive, wherever it is (missing is fine). */
static void drop_archive(struct husk_mgr *m, const char *tenant, const char *id) {
  struct husk_err e;
  if (store_remote(m->store)) {
    cleanup_free char *rk = remote_snap_key(tenant, id);
    if (rk && remote_delete(store_remote(m->store), rk, &e) < 0 && e.code != ENOENT)
      box_log(m, "snapshot %s: its archive could not be removed: %s", id, e.msg);
    return;
  }
  if (store_object_delete(m->store, tenant, SNAP_BUCKET, id, &e) < 0 && e.code != STORE_ENOBUCKET)
    box_log(m, "snapshot %s: its archive could not be removed: %s", id, e.msg);
}

int box_snapshot_take(struct husk_mgr *m, struct live_box *b, bool for_pause,
                      const char *metadata_json, char id_out[STATE_SNAPSHOT_ID_SIZE],
                      struct husk_err *err) {
  if (need_store(m, err) < 0)
    return -1;
  const char *tenant = b->tenant, *box_id = b->id;
  struct state_box sb;
  if (state_box_get(m->cfg.state, tenant, box_id, &sb, err) < 0)
    return -1;
  struct state_snapshot p = {.for_pause = for_pause};
  int rc = -1;
  struct snap_sink k = {.tmp = -1};
  if (state_new_id("s_", p.id, sizeof p.id, err) < 0)
    goto out;
  snprintf(p.tenant_id, sizeof p.tenant_id, "%s", tenant);
  snprintf(p.box_id, sizeof p.box_id, "%s", box_id);
  snprintf(p.template_name, sizeof p.template_name, "%s", sb.template_name);
  snprintf(p.template_id, sizeof p.template_id, "%s", sb.template_id);
  snprintf(p.workdir, sizeof p.workdir, "%s", sb.workdir);
  p.memory = sb.memory;
  p.pids = sb.pids;
  p.cpu_milli = sb.cpu_milli;
  p.disk = sb.disk;
  p.timeout_ms = sb.timeout_ms;
  p.env_json = sb.env_json;
  p.metadata_json = (char *)(metadata_json ? metadata_json : "{}");
  /* 1. */
  if (state_snapshot_insert(m->cfg.state, &p, m->cfg.tenant_max_snapshots, err) < 0)
    goto out;
  /* 2.  Bounded by the tenant's room and, an archive being no bigger than
   * what it holds plus its headers, by the box's disk. */
  uint64_t room = UINT64_MAX;
  if (!(k.md = EVP_MD_CTX_new()) || EVP_DigestInit_ex(k.md, EVP_sha256(), NULL) != 1) {
    husk_fail(err, ENOMEM, "cannot compute the snapshot's digest");
    goto undo;
  }
  if (store_remote(m->store)) {
    if ((k.tmp = store_tmpfile(m->store, err)) < 0)
      goto undo;
  } else {
    if (store_bucket_internal(m->store, tenant, SNAP_BUCKET, err) < 0 ||
        store_quota_room(m->store, tenant, SNAP_BUCKET, p.id, &room, err) < 0)
      goto undo;
    uint64_t limit = room < STORE_PUT_MAX ? room : STORE_PUT_MAX;
    if (store_writer_open(m->store, CK_NONE, false, limit ? limit : 1, &k.w, err) < 0)
      goto undo;
    k.limit = room == UINT64_MAX ? 0 : room;
  }
  struct snap_stats st = {0};
  if (archive_box(m, b, for_pause, &k, &st, err) < 0)
    goto undo;
  unsigned char d[32];
  unsigned dl = 0;
  if (EVP_DigestFinal_ex(k.md, d, &dl) != 1 || dl != 32) {
    husk_fail(err, EIO, "cannot compute the snapshot's digest");
    goto undo;
  }
  char sha[65];
  hex32(d, sha);
  /* 3. */
  if (k.w) {
    char etag[STORE_ETAG_SIZE];
    struct store_expect e = {.length = -1};
    struct store_object o;
    struct store_writer *w = k.w;
    k.w = NULL; /* store_put_commit frees it, failed or not */
    if (store_writer_finish(w, &e, etag, NULL, err) < 0) {
      store_writer_abort(w);
      goto undo;
    }
    /* husk's own object in a bucket no listing shows: no writer recorded
     * (the snapshot is what its maker asked for). */
    if (store_put_commit(w, tenant, SNAP_BUCKET, p.id, "application/zstd", NULL, NULL, &o, err) < 0)
      goto undo;
    store_object_free(&o);
  } else {
    cleanup_free char *rk = remote_snap_key(tenant, p.id);
    char etag[48];
    if (!rk) {
      husk_fail(err, ENOMEM, "out of memory");
      goto undo;
    }
    if (fsync(k.tmp) < 0) {
      husk_error(err, errno, "cannot stage the snapshot");
      goto undo;
    }
    if (remote_put_fd(store_remote(m->store), rk, k.tmp, k.size, "application/zstd", etag, err) < 0)
      goto undo;
  }
  /* 4. */
  if (state_snapshot_ready(m->cfg.state, p.id, (int64_t)k.size, (int64_t)st.bytes,
                           (int64_t)st.entries, sha, err) < 0)
    goto undo;
  box_log(m, "box %s: snapshot %s taken (%llu bytes, %llu entries%s)", box_id, p.id,
          (unsigned long long)k.size, (unsigned long long)st.entries,
          st.skipped ? ", some skipped" : "");
  snprintf(id_out, STATE_SNAPSHOT_ID_SIZE, "%s", p.id);
  rc = 0;
  goto out;
undo : {
  struct husk_err e2;
  drop_archive(m, tenant, p.id);
  if (state_snapshot_remove(m->cfg.state, p.id, &e2) < 0)
    box_log(m, "snapshot %s: %s", p.id, e2.msg);
  if (err->code == STORE_EQUOTA || err->code == STORE_ETOOLARGE)
    husk_fail(err, EDQUOT, "the snapshot would pass the tenant's storage quota");
}
out:
  sink_free(&k);
  state_box_free(&sb);
  return rc;
}

int husk_snapshot_create(struct husk_mgr *m, const char *tenant, const char *box_id,
                         const char *metadata_json, struct husk_snapshot_info *out,
                         struct husk_err *err) {
  if (out)
    memset(out, 0, sizeof *out);
  if (need_store(m, err) < 0)
    return -1;
  struct live_box *b = box_live(m, tenant, box_id, err);
  if (!b)
    return -1;
  char id[STATE_SNAPSHOT_ID_SIZE];
  int rc = box_snapshot_take(m, b, false, metadata_json, id, err);
  lb_unref(m, b);
  if (rc == 0 && out)
    return husk_snapshot_get(m, tenant, id, out, err);
  return rc;
}

void box_snapshot_drop(struct husk_mgr *m, const char *tenant, const char *id) {
  struct husk_err e;
  if (state_snapshot_remove(m->cfg.state, id, &e) < 0)
    box_log(m, "snapshot %s: %s", id, e.msg);
  else if (m->store)
    drop_archive(m, tenant, id);
}

/* ---- reading and deleting --------------------------------------------------------- */

int husk_snapshot_get(struct husk_mgr *m, const char *tenant, const char *id,
                      struct husk_snapshot_info *out, struct husk_err *err) {
  memset(out, 0, sizeof *out);
  struct state_snapshot p;
  if (state_snapshot_get(m->cfg.state, tenant, id, &p, err) < 0)
    return -1;
  if (strcmp(p.state, STATE_SNAPSHOT_READY) != 0 || p.for_pause) {
    state_snapshot_free(&p);
    return husk_fail(err, ENOENT, "no such snapshot");
  }
  fill_snapshot(out, &p);
  state_snapshot_free(&p);
  if (!out->env_json || !out->metadata_json) {
    husk_snapshot_info_free(out);
    return husk_fail(err, ENOMEM, "out of memory");
  }
  return 0;
}

struct list_ctx {
  int (*cb)(void *ctx, const struct husk_snapshot_info *si);
  void *ctx;
};

static int list_cb(void *ctx, const struct state_snapshot *p) {
  struct list_ctx *lc = ctx;
  struct husk_snapshot_info si;
  fill_snapshot(&si, p);
  int rc = lc->cb(lc->ctx, &si);
  husk_snapshot_info_free(&si);
  return rc;
}

int husk_snapshot_list(struct husk_mgr *m, const char *tenant, const char *box_id,
                       const char *cursor, int limit,
                       int (*cb)(void *ctx, const struct husk_snapshot_info *si), void *ctx,
                       char *next_cursor, size_t next_len, struct husk_err *err) {
  struct list_ctx lc = {.cb = cb, .ctx = ctx};
  return state_snapshot_list(m->cfg.state, tenant, box_id, cursor, limit, list_cb, &lc,
                             next_cursor, next_len, err);
}

int husk_snapshot_delete(struct husk_mgr *m, const char *tenant, const char *id,
                         struct husk_err *err) {
  if (state_snapshot_delete(m->cfg.state, tenant, id, err) < 0)
    return -1;
  if (m->store)
    drop_archive(m, tenant, id);
  box_log(m, "snapshot %s deleted", id);
  return 0;
}

static int sweep_one(void *ctx, const struct state_snapshot *p) {
  struct husk_mgr *m = ctx;
  struct husk_err e;
  drop_archive(m, p->tenant_id, p->id);
  if (state_snapshot_remove(m->cfg.state, p->id, &e) < 0)
    box_log(m, "snapshot %s: %s", p->id, e.msg);
  else
    box_log(m, "snapshot %s of box %s: removed, it was being made when the daemon stopped", p->id,
            p->box_id);
  return 0;
}

void box_snapshot_sweep(struct husk_mgr *m) {
  if (!m->store)
    return;
  struct husk_err err;
  if (state_snapshot_list_creating(m->cfg.state, STATE_LIST_MAX, sweep_one, m, &err) < 0)
    box_log(m, "snapshots: %s", err.msg);
}

/* ---- boxes made from one ------------------------------------------------------------ */

/* The snapshot's env (a JSON object) under the request's NAME=VALUE
 * entries, as NAME=VALUE strings (NULL-terminated, heap). */
static char **merge_env(const char *snap_env, char *const *req_env, struct husk_err *err) {
  json_error_t je;
  cleanup_json json_t *o = json_loads(snap_env ? snap_env : "{}", 0, &je);
  if (!json_is_object(o)) {
    husk_fail(err, EUCLEAN, "the snapshot's env is malformed");
    return NULL;
  }
  for (size_t i = 0; req_env && req_env[i]; i++) {
    const char *eq = strchr(req_env[i], '=');
    if (!eq || eq == req_env[i]) {
      husk_fail(err, EINVAL, "environment entry %zu is not NAME=VALUE", i);
      return NULL;
    }
    cleanup_free char *name = strndup(req_env[i], (size_t)(eq - req_env[i]));
    if (!name || json_object_set_new(o, name, json_string(eq + 1)) < 0) {
      husk_fail(err, ENOMEM, "out of memory");
      return NULL;
    }
  }
  size_t n = json_object_size(o), i = 0;
  char **env = calloc(n + 1, sizeof *env);
  if (!env) {
    husk_fail(err, ENOMEM, "out of memory");
    return NULL;
  }
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    if (!json_is_string(v) || asprintf(&env[i], "%s=%s", k, json_string_value(v)) < 0) {
      env[i] = NULL;
      box_env_free(env);
      husk_fail(err, json_is_string(v) ? ENOMEM : EUCLEAN, "the snapshot's env is malformed");
      return NULL;
    }
    i++;
  }
  return env;
}

/* The snapshot's archive as a readable file: the embedded store's object
 * file, or a download of the external one into a temporary file. */
static int sink_fd(void *ctx, const void *buf, size_t n) {
  int fd = *(int *)ctx;
  const char *p = buf;
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int box_snapshot_open(struct husk_mgr *m, const char *tenant, const char *id,
                      struct husk_err *err) {
  if (store_remote(m->store)) {
    cleanup_close int tmp = store_tmpfile(m->store, err);
    cleanup_free char *rk = remote_snap_key(tenant, id);
    if (tmp < 0)
      return -1;
    if (!rk)
      return husk_fail(err, ENOMEM, "out of memory");
    if (remote_get(store_remote(m->store), rk, sink_fd, &tmp, NULL, err) < 0)
      return husk_error_wrap(err, "the snapshot's archive cannot be read");
    return take_fd(&tmp);
  }
  struct store_object o;
  int fd = -1;
  if (store_object_get(m->store, tenant, SNAP_BUCKET, id, &o, &fd, err) < 0) {
    if (err->code == STORE_ENOKEY || err->code == STORE_ENOBUCKET)
      return husk_fail(err, EUCLEAN, "the snapshot's archive is missing from the store");
    return -1;
  }
  store_object_free(&o);
  return fd;
}

int box_create_from_snapshot(struct husk_mgr *m, const char *tenant,
                             const struct husk_box_spec *req, struct husk_box_info *out,
                             struct husk_err *err) {
  if (need_store(m, err) < 0)
    return -1;
  struct state_snapshot p;
  if (state_snapshot_get(m->cfg.state, tenant, req->snapshot, &p, err) < 0)
    return -1;
  int rc = -1;
  char **env = NULL;
  struct box_image *img = NULL;
  cleanup_close int fd = -1;
  if (strcmp(p.state, STATE_SNAPSHOT_READY) != 0 || p.for_pause) {
    husk_fail(err, ENOENT, "no such snapshot");
    goto out;
  }
  const char *tname = p.template_name[0] ? p.template_name : "default";
  if (req->template_name && req->template_name[0] && strcmp(req->template_name, tname) != 0) {
    husk_fail(err, EINVAL,
              "snapshot %s is of template `%s`: a box made from it is of that template", p.id,
              tname);
    goto out;
  }
  if (!(env = merge_env(p.env_json, req->env, err)))
    goto out;
  if (p.template_id[0]) {
    if (!(img = calloc(1, sizeof *img))) {
      husk_fail(err, ENOMEM, "out of memory");
      goto out;
    }
    if (box_image_resolve(m, tenant, tname, env, img, err) < 0) {
      free(img);
      img = NULL;
      husk_error_wrap(err, "the template of snapshot %s", p.id);
      goto out;
    }
    if (strcmp(img->t.id, p.template_id) != 0 && !req->rebase) {
      husk_fail(err, ESTALE,
                "template `%s` was replaced since snapshot %s was taken: ask for `rebase` to "
                "restore its files over the template as it is now",
                tname, p.id);
      goto out;
    }
  }
  struct husk_box_spec spec = *req;
  spec.template_name = tname;
  spec.env = env;
  if (!spec.limits.memory_bytes)
    spec.limits.memory_bytes = (uint64_t)p.memory;
  if (!spec.limits.pids)
    spec.limits.pids = (uint64_t)p.pids;
  if (!spec.limits.cpu_milli)
    spec.limits.cpu_milli = (uint64_t)p.cpu_milli;
  if (!spec.limits.disk_bytes)
    spec.limits.disk_bytes = (uint64_t)p.disk;
  if (!spec.limits.timeout_ms)
    spec.limits.timeout_ms = (uint64_t)p.timeout_ms;
  if (spec.limits.disk_bytes < (uint64_t)p.data_bytes) {
    husk_fail(err, EINVAL, "a disk of %llu bytes cannot hold snapshot %s (%lld bytes of files)",
              (unsigned long long)spec.limits.disk_bytes, p.id, (long long)p.data_bytes);
    goto out;
  }
  if ((fd = box_snapshot_open(m, tenant, p.id, err)) < 0)
    goto out;
  uint64_t inodes = spec.limits.disk_bytes / HUSK_DISK_BYTES_PER_INODE;
  struct box_restore from = {
      .snapshot_id = p.id,
      .restore = {.fd = fd,
                  .sha256 = p.sha256,
                  .max_bytes = spec.limits.disk_bytes,
                  .max_entries = inodes < HUSK_MIN_INODES ? HUSK_MIN_INODES : inodes}};
  rc = box_create(m, tenant, &spec, img, &from, out, err);
out:
  if (img) {
    box_image_free(img);
    free(img);
  }
  box_env_free(env);
  state_snapshot_free(&p);
  return rc;
}
