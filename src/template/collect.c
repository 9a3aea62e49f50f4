/* Collection: layers and blobs no template row names are removed (not
 * while an import is placing its own, nor while a box holds a layer). */
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

/* ---- collection ------------------------------------------------------------- */

struct named {
  char **v;
  size_t n, cap;
};

static int add_named(struct named *s, const char *hex) {
  if (s->n == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 64;
    char **v = realloc(s->v, nc * sizeof *v);
    if (!v)
      return -1;
    s->v = v;
    s->cap = nc;
  }
  if (!(s->v[s->n] = strdup(hex)))
    return -1;
  s->n++;
  return 0;
}

static bool has_named(const struct named *s, const char *hex) {
  for (size_t i = 0; i < s->n; i++)
    if (!strcmp(s->v[i], hex))
      return true;
  return false;
}

struct collect_ctx {
  struct named layers, blobs;
  bool failed;
};

static int collect_cb(void *ctx, const struct state_template *t) {
  struct collect_ctx *c = ctx;
  json_t *a = json_loads(t->layers_json, 0, NULL);
  size_t i;
  json_t *l;
  json_array_foreach(a, i, l) {
    const char *d = json_string_value(json_object_get(l, "diff_id"));
    const char *b = json_string_value(json_object_get(l, "digest"));
    if ((digest_ok(d) && add_named(&c->layers, d + HEX_OFF) < 0) ||
        (digest_ok(b) && add_named(&c->blobs, b + HEX_OFF) < 0))
      c->failed = true;
  }
  json_decref(a);
  return 0;
}

static int sweep_dir(int dirfd, const struct named *keep, bool layers) {
  int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    close_quiet(fd);
    return 0;
  }
  int removed = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || has_named(keep, e->d_name))
      continue;
    if (layers) {
      /* A box still holding it (a row deleted under a running one-shot
       * box) keeps it until the next collection. */
      char path[NAME_MAX + 8];
      snprintf(path, sizeof path, "%s/lock", e->d_name);
      int lk = openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (lk >= 0 && flock(lk, LOCK_EX | LOCK_NB) < 0) {
        close(lk);
        continue;
      }
      if (rmtree_at(dirfd, e->d_name) == 0)
        removed++;
      close_quiet(lk);
    } else if (unlinkat(dirfd, e->d_name, 0) == 0) {
      removed++;
    }
  }
  closedir(d);
  return removed;
}

void ts_gc_release(struct template_store *ts, int fd, bool collect) {
  if (fd < 0)
    return;
  close(fd);
  if (atomic_exchange(&ts->collect_pending, false))
    collect = true;
  struct husk_err err;
  if (collect && template_collect(ts, &err) < 0)
    ts_log(ts, "templates: cannot collect unused layers: %s", err.msg);
}

/* A layer a build made is its own blob (uncompressed): both are kept. */
static int cache_cb(void *ctx, const char *diff_id) {
  struct collect_ctx *c = ctx;
  if (digest_ok(diff_id) &&
      (add_named(&c->layers, diff_id + HEX_OFF) < 0 || add_named(&c->blobs, diff_id + HEX_OFF) < 0))
    c->failed = true;
  return 0;
}

int template_collect(struct template_store *ts, struct husk_err *err) {
  /* Never while an import places layers it has not recorded yet. */
  cleanup_close int gc = ts_gc_hold(ts, LOCK_EX | LOCK_NB);
  if (gc < 0 && errno == EWOULDBLOCK) {
    atomic_store(&ts->collect_pending, true);
    return 0;
  }
  if (gc < 0)
    return husk_error(err, errno, "cannot lock the template store");
  struct collect_ctx c = {0};
  int rc = state_build_cache_prune(ts->state, state_now_ms() - TEMPLATE_CACHE_KEEP_MS, err);
  if (rc == 0)
    rc = state_template_list(ts->state, NULL, collect_cb, &c, err);
  if (rc == 0)
    rc = state_build_cache_layers(ts->state, cache_cb, &c, err);
  if (rc == 0 && c.failed)
    rc = husk_error(err, ENOMEM, "collecting template layers");
  if (rc == 0)
    rc = sweep_dir(ts->layers, &c.layers, true) + sweep_dir(ts->blobs, &c.blobs, false);
  for (size_t i = 0; i < c.layers.n; i++)
    free(c.layers.v[i]);
  for (size_t i = 0; i < c.blobs.n; i++)
    free(c.blobs.v[i]);
  free(c.layers.v);
  free(c.blobs.v);
  return rc;
}
