/* The template store (see template.h for its layout and crash story). */
#define _GNU_SOURCE
#include "template/template_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "jail/syscalls.h"
#include "util/cleanup.h"
#include "util/fileio.h"
#include "util/id.h"
#include "util/json_text.h"

#define DEFAULT_MAX_BYTES (16ULL << 30)
#define DEFAULT_MAX_ENTRIES 2000000ULL

void ts_log(struct template_store *ts, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  husk_vlog(ts->cfg.log, ts->cfg.log_ctx, fmt, ap);
  va_end(ap);
}

bool template_name_ok(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n >= STATE_TEMPLATE_NAME_SIZE || !strcmp(name, TEMPLATE_DEFAULT))
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
      return false;
  }
  return true;
}

/* ---- trees of our own (fd-relative, never following a symlink) ---------- */

/* Remove `name` in dirfd and everything below it. */
int rmtree_at(int dirfd, const char *name) {
  if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
    return 0;
  if (errno != EISDIR && errno != EPERM)
    return -1;
  int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? 0 : -1;
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return -1;
  }
  int rc = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    if (rmtree_at(fd, e->d_name) < 0)
      rc = -1;
  }
  closedir(d);
  if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
    rc = -1;
  return rc;
}

int ts_subdir(int at, const char *name, struct husk_err *err) {
  if (mkdirat(at, name, 0700) < 0 && errno != EEXIST)
    return husk_error(err, errno, "cannot create the template store's `%s`", name);
  int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return husk_error(err, errno, "cannot open the template store's `%s`", name);
  return fd;
}

static void empty_dir(int dirfd) {
  int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    close_quiet(fd);
    return;
  }
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      rmtree_at(dirfd, e->d_name);
  closedir(d);
}

int ts_gc_hold(struct template_store *ts, int how) {
  int fd = openat(ts->root, "gc.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return -1;
  while (flock(fd, how) < 0) {
    if (errno == EINTR)
      continue;
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

int template_store_open(struct template_store **out, const struct template_store_config *cfg,
                        struct husk_err *err) {
  *out = NULL;
  struct template_store *ts = calloc(1, sizeof *ts);
  if (!ts)
    return husk_error(err, ENOMEM, "template store");
  ts->cfg = *cfg;
  ts->state = cfg->state;
  if (!ts->cfg.max_image_bytes)
    ts->cfg.max_image_bytes = DEFAULT_MAX_BYTES;
  if (!ts->cfg.max_layer_entries)
    ts->cfg.max_layer_entries = DEFAULT_MAX_ENTRIES;
  ts->root = ts->layers = ts->blobs = ts->tmp = -1;
  pthread_mutex_init(&ts->lock, NULL);
  atomic_init(&ts->collect_pending, false);
  if (disk_reserve_parse(cfg->data_reserve, &ts->reserve, err) < 0) {
    husk_error_wrap(err, "the data reserve");
    free(ts);
    return -1;
  }
  cleanup_close int data = open(cfg->data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  cleanup_close int blobs = -1;
  if (data < 0) {
    husk_error(err, errno, "cannot open the data directory `%s`", cfg->data_dir);
    goto fail;
  }
  if ((ts->root = ts_subdir(data, "templates", err)) < 0 ||
      (ts->layers = ts_subdir(ts->root, "layers", err)) < 0 ||
      (blobs = ts_subdir(ts->root, "blobs", err)) < 0 ||
      (ts->blobs = ts_subdir(blobs, "sha256", err)) < 0 ||
      (ts->tmp = ts_subdir(ts->root, "tmp", err)) < 0)
    goto fail;
  /* What a crashed import left: its work directory, and layers no row
   * names.  Another process's import, build or context holds gc.lock. */
  int gc = ts_gc_hold(ts, LOCK_EX | LOCK_NB);
  if (gc < 0 && errno != EWOULDBLOCK) {
    husk_error(err, errno, "cannot open the template store's lock");
    goto fail;
  }
  if (gc >= 0) {
    empty_dir(ts->tmp);
    close(gc);
  }
  struct husk_err e2;
  if (template_collect(ts, &e2) < 0)
    ts_log(ts, "templates: cannot collect unused layers: %s", e2.msg);
  *out = ts;
  return 0;
fail:
  template_store_close(ts);
  return -1;
}

void template_store_close(struct template_store *ts) {
  if (!ts)
    return;
  close_quiet(ts->root);
  close_quiet(ts->layers);
  close_quiet(ts->blobs);
  close_quiet(ts->tmp);
  pthread_mutex_destroy(&ts->lock);
  free(ts);
}

int template_delete(struct template_store *ts, const char *tenant, const char *name_or_id,
                    struct husk_err *err) {
  struct state_template t;
  if (state_template_get(ts->state, tenant, name_or_id, false, &t, err) < 0)
    return -1;
  int rc = state_template_delete(ts->state, tenant, t.id, err);
  if (rc == 0) {
    ts_log(ts, "template %s (%s) deleted", t.name, t.id);
    struct husk_err e2;
    if (template_collect(ts, &e2) < 0)
      ts_log(ts, "templates: cannot collect unused layers: %s", e2.msg);
  }
  state_template_free(&t);
  return rc;
}

/* ---- layers for a box -------------------------------------------------------- */

bool digest_ok(const char *d) {
  if (!d || strlen(d) != 71 || strncmp(d, "sha256:", 7))
    return false;
  for (size_t i = 7; i < 71; i++)
    if (!((d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'f')))
      return false;
  return true;
}

void template_layers_release(struct template_layers *l) {
  for (size_t i = 0; i < l->n; i++) {
    close_quiet(l->dirs[i]);
    close_quiet(l->locks[i]); /* drops the flock */
  }
  l->n = 0;
}

int template_layers_open(struct template_store *ts, const struct state_template *t,
                         struct template_layers *out, struct husk_err *err) {
  memset(out, 0, sizeof *out);
  json_error_t je;
  json_t *a = json_loads(t->layers_json, 0, &je);
  size_t n = json_array_size(a);
  if (!json_is_array(a) || n > IMAGE_MAX_LAYERS) {
    json_decref(a);
    return husk_fail(err, EUCLEAN, "template %s: its layer list is damaged", t->id);
  }
  int rc = 0;
  /* Top first: overlay's lowerdir order. */
  for (size_t k = 0; k < n && rc == 0; k++) {
    const char *d = json_string_value(json_object_get(json_array_get(a, n - 1 - k), "diff_id"));
    if (!digest_ok(d)) {
      rc = husk_fail(err, EUCLEAN, "template %s: its layer list is damaged", t->id);
      break;
    }
    char path[96];
    snprintf(path, sizeof path, "%s/lock", d + HEX_OFF);
    int lk = openat(ts->layers, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (lk < 0 || flock(lk, LOCK_SH) < 0) {
      close_quiet(lk);
      rc = husk_error(err, errno, "template %s: layer %s is missing", t->id, d);
      break;
    }
    snprintf(path, sizeof path, "%s/root", d + HEX_OFF);
    int dir = openat(ts->layers, path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0) {
      close(lk);
      rc = husk_error(err, errno, "template %s: layer %s is missing", t->id, d);
      break;
    }
    out->dirs[out->n] = dir;
    out->locks[out->n] = lk;
    out->n++;
  }
  json_decref(a);
  if (rc < 0)
    template_layers_release(out);
  return rc;
}

json_t *template_json(const struct state_template *t, bool full) {
  json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:s, s:o, s:b}", "id", t->id, "name", t->name,
                        "source", t->source, "size", (json_int_t)t->size, "digest",
                        t->config_digest, "created_at", json_time(t->created_ms), "shared",
                        !t->tenant_id[0]);
  if (j && full) {
    /* set_new takes its value even when it fails (or is given NULL). */
    if (json_object_set_new(j, "layers", json_loads(t->layers_json, 0, NULL)) < 0 ||
        json_object_set_new(j, "config", json_loads(t->config_json, 0, NULL)) < 0) {
      json_decref(j);
      return NULL;
    }
  }
  return j;
}
