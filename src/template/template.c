/* The template store (see template.h for its layout and crash story). */
#define _GNU_SOURCE
#include "template/template.h"

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

#define DEFAULT_MAX_BYTES (16ULL << 30)
#define DEFAULT_MAX_ENTRIES 2000000ULL
#define HEX_OFF 7 /* "sha256:" */

struct template_store {
  struct template_store_config cfg;
  struct state *state;
  int root;             /* DATA/templates */
  int layers;           /* .../layers */
  int blobs;            /* .../blobs/sha256 */
  int tmp;              /* .../tmp */
  int gc;               /* .../gc.lock */
  pthread_mutex_t lock; /* one import's layer placement at a time in this process */
};

static void ts_log(struct template_store *ts, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void ts_log(struct template_store *ts, const char *fmt, ...) {
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
static int rmtree_at(int dirfd, const char *name) {
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

static int subdir(int at, const char *name, struct husk_err *err) {
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
  ts->root = ts->layers = ts->blobs = ts->tmp = ts->gc = -1;
  pthread_mutex_init(&ts->lock, NULL);
  cleanup_close int data = open(cfg->data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  cleanup_close int blobs = -1;
  if (data < 0) {
    husk_error(err, errno, "cannot open the data directory `%s`", cfg->data_dir);
    goto fail;
  }
  if ((ts->root = subdir(data, "templates", err)) < 0 ||
      (ts->layers = subdir(ts->root, "layers", err)) < 0 ||
      (blobs = subdir(ts->root, "blobs", err)) < 0 ||
      (ts->blobs = subdir(blobs, "sha256", err)) < 0 ||
      (ts->tmp = subdir(ts->root, "tmp", err)) < 0)
    goto fail;
  ts->gc = openat(ts->root, "gc.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (ts->gc < 0) {
    husk_error(err, errno, "cannot open the template store's lock");
    goto fail;
  }
  /* What a crashed import left: its work directory, and layers no row
   * names.  Another process's import in progress holds gc.lock. */
  if (flock(ts->gc, LOCK_EX | LOCK_NB) == 0) {
    empty_dir(ts->tmp);
    flock(ts->gc, LOCK_UN);
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
  close_quiet(ts->gc);
  pthread_mutex_destroy(&ts->lock);
  free(ts);
}

/* ---- import ---------------------------------------------------------------- */

/* The data disk keeps its reserve: an import stops before eating it. */
static int check_space(struct template_store *ts, struct husk_err *err) {
  if (!ts->cfg.data_reserve)
    return 0;
  struct statvfs sv;
  if (fstatvfs(ts->root, &sv) < 0)
    return husk_error(err, errno, "cannot read the data disk's free space");
  uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
  if (avail < ts->cfg.data_reserve)
    return husk_fail(err, ENOSPC,
                     "the data disk is down to its reserve (%llu bytes free, %llu kept): the "
                     "template cannot be stored",
                     (unsigned long long)avail, (unsigned long long)ts->cfg.data_reserve);
  return 0;
}

/* One import: its work directory under tmp/ and its hold on gc.lock. */
struct import {
  struct template_store *ts;
  char work[40];
  int wfd;
  bool held;
};

static int import_begin(struct template_store *ts, struct import *im, struct husk_err *err) {
  im->ts = ts;
  im->wfd = -1;
  if (check_space(ts, err) < 0)
    return -1;
  if (flock(ts->gc, LOCK_SH) < 0)
    return husk_error(err, errno, "cannot lock the template store");
  im->held = true;
  char id[32];
  if (id_new("imp-", 12, id, sizeof id, err) < 0)
    return -1;
  snprintf(im->work, sizeof im->work, "%s", id);
  if ((im->wfd = subdir(ts->tmp, im->work, err)) < 0)
    return -1;
  return 0;
}

static void import_end(struct import *im) {
  if (im->wfd >= 0) {
    close(im->wfd);
    rmtree_at(im->ts->tmp, im->work);
  }
  if (im->held)
    flock(im->ts->gc, LOCK_UN);
}

/* Unpack layer `l` (its blob in `srcdir`) into layers/<hex> unless it is
 * there; add its unpacked size to *size. */
static int place_layer(struct import *im, int srcdir, const struct image_layer *l, size_t i,
                       uint64_t *size, struct husk_err *err) {
  struct template_store *ts = im->ts;
  const char *hex = l->diff_id + HEX_OFF;
  char meta[64];
  struct stat st;
  if (fstatat(ts->layers, hex, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    /* Stored already: its size is in its meta file. */
    char path[128], buf[32];
    snprintf(path, sizeof path, "%s/size", hex);
    if (read_file_at(ts->layers, path, buf, sizeof buf) > 0)
      *size += strtoull(buf, NULL, 10);
    return 0;
  }
  if (check_space(ts, err) < 0)
    return -1;
  char lname[32];
  snprintf(lname, sizeof lname, "L%zu", i);
  cleanup_close int ldir = subdir(im->wfd, lname, err);
  if (ldir < 0)
    return -1;
  cleanup_close int rootfd = subdir(ldir, "root", err);
  if (rootfd < 0 || fchmod(rootfd, 0755) < 0)
    return rootfd < 0 ? -1 : husk_error(err, errno, "layer %zu", i + 1);
  cleanup_close int blob = sys_openat2(srcdir, l->blob, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0,
                                       RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
  if (blob < 0)
    return husk_error(err, errno, "cannot open layer %zu's blob", i + 1);
  struct layer_limits lim = {.max_bytes = ts->cfg.max_image_bytes,
                             .max_entries = ts->cfg.max_layer_entries};
  struct layer_result res;
  if (layer_extract(blob, rootfd, &lim, &res, err) < 0)
    return husk_error_wrap(err, "layer %zu (%s)", i + 1, l->digest);
  if (strcmp(res.diff_id, l->diff_id))
    return husk_fail(err, EINVAL,
                     "layer %zu unpacks to %s, but the image config says %s: the image is "
                     "damaged or forged",
                     i + 1, res.diff_id, l->diff_id);
  snprintf(meta, sizeof meta, "%llu\n", (unsigned long long)res.file_bytes);
  cleanup_close int mf = openat(ldir, "size", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  cleanup_close int lk = openat(ldir, "lock", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (mf < 0 || lk < 0 || write_all(mf, meta, strlen(meta)) < 0 || fsync(mf) < 0)
    return husk_error(err, errno, "layer %zu", i + 1);
  if (syncfs(rootfd) < 0)
    return husk_error(err, errno, "cannot sync layer %zu", i + 1);
  /* Into place at once: a concurrent import of the same layer may have
   * won (then ours goes with the work directory). */
  if (renameat(im->wfd, lname, ts->layers, hex) < 0 && errno != EEXIST && errno != ENOTEMPTY)
    return husk_error(err, errno, "cannot store layer %zu", i + 1);
  *size += res.file_bytes;
  return 0;
}

/* The blobs as imported, for export: moved (or copied) into blobs/. */
static void keep_blob(struct import *im, int srcdir, bool move, const char *digest,
                      const char *path) {
  struct template_store *ts = im->ts;
  const char *hex = digest + HEX_OFF;
  if (faccessat(ts->blobs, hex, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
    return;
  if (move && renameat(srcdir, path, ts->blobs, hex) == 0)
    return;
  /* From a layout directory: copied (the host's directory stays whole). */
  cleanup_close int in = sys_openat2(srcdir, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0,
                                     RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
  char tmpname[80];
  snprintf(tmpname, sizeof tmpname, "blob-%s", hex);
  cleanup_close int outf =
      openat(im->wfd, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (in < 0 || outf < 0)
    return;
  char buf[65536];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0)
    if (write_all(outf, buf, (size_t)n) < 0)
      return;
  if (n == 0 && fsync(outf) == 0)
    renameat(im->wfd, tmpname, ts->blobs, hex);
}

static char *layers_json(const struct image *img) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < img->nlayers; i++)
    json_array_append_new(a, json_pack("{s:s, s:s, s:I}", "digest", img->layers[i].digest,
                                       "diff_id", img->layers[i].diff_id, "size",
                                       (json_int_t)img->layers[i].size));
  char *s = a ? json_dumps(a, JSON_COMPACT) : NULL;
  json_decref(a);
  return s;
}

/* Layers placed, blobs kept, the row recorded. */
static int commit_image(struct import *im, int srcdir, bool move, const char *tenant,
                        const char *name, const char *source, struct image *img,
                        struct state_template *out, struct husk_err *err) {
  struct template_store *ts = im->ts;
  uint64_t size = 0;
  for (size_t i = 0; i < img->nlayers; i++)
    if (place_layer(im, srcdir, &img->layers[i], i, &size, err) < 0)
      return -1;
  for (size_t i = 0; i < img->nlayers; i++)
    keep_blob(im, srcdir, move, img->layers[i].digest, img->layers[i].blob);
  struct state_template t = {0};
  snprintf(t.tenant_id, sizeof t.tenant_id, "%s", tenant);
  snprintf(t.name, sizeof t.name, "%s", name);
  snprintf(t.source, sizeof t.source, "%s", source);
  snprintf(t.config_digest, sizeof t.config_digest, "%s", img->config_digest);
  t.size = (int64_t)size;
  t.created_ms = state_now_ms();
  if (state_new_id("tpl_", t.id, sizeof t.id, err) < 0)
    return -1;
  cleanup_free char *lj = layers_json(img);
  if (!lj)
    return husk_error(err, ENOMEM, "template");
  t.config_json = img->config_json;
  t.layers_json = lj;
  if (fsync(ts->layers) < 0 || fsync(ts->blobs) < 0)
    return husk_error(err, errno, "cannot sync the template store");
  if (state_template_insert(ts->state, &t, *tenant ? ts->cfg.tenant_quota : 0, err) < 0)
    return -1;
  ts_log(ts, "template %s (%s) imported for %s: %zu layer(s), %llu bytes", t.name, t.id,
         *tenant ? tenant : "every tenant", img->nlayers, (unsigned long long)size);
  if (out) {
    *out = t;
    out->config_json = strdup(img->config_json);
    out->layers_json = take_ptr(&lj);
  }
  return 0;
}

static int check_new(struct template_store *ts, const char *tenant, const char *name,
                     struct husk_err *err) {
  if (!template_name_ok(name))
    return husk_fail(err, EINVAL,
                     "a template name is 1 to 63 of a-z, 0-9, '.', '_', '-', starting with a "
                     "letter or digit, and not `default`");
  struct state_template t;
  if (state_template_get(ts->state, tenant, name, false, &t, err) == 0) {
    state_template_free(&t);
    return husk_fail(err, EEXIST, "a template named `%s` exists", name);
  }
  return err->code == ENOENT ? 0 : -1;
}

int template_import_archive(struct template_store *ts, const char *tenant, const char *name,
                            ssize_t (*in)(void *ctx, void *buf, size_t cap), void *ctx,
                            struct state_template *out, struct husk_err *err) {
  if (check_new(ts, tenant, name, err) < 0)
    return -1;
  struct import im = {0};
  struct image img = {0};
  int rc = -1;
  if (import_begin(ts, &im, err) < 0)
    goto out;
  struct image_limits lim = {.max_bytes = ts->cfg.max_image_bytes, .max_entries = 100000};
  if (image_read_archive(in, ctx, im.wfd, &lim, &img, err) < 0)
    goto out;
  rc = commit_image(&im, im.wfd, true, tenant, name, "oci", &img, out, err);
out:
  image_free(&img);
  import_end(&im);
  return rc;
}

int template_import_layout(struct template_store *ts, const char *tenant, const char *name,
                           const char *dir, struct state_template *out, struct husk_err *err) {
  if (check_new(ts, tenant, name, err) < 0)
    return -1;
  cleanup_close int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return husk_error(err, errno, "cannot open the image directory `%s`", dir);
  struct import im = {0};
  struct image img = {0};
  int rc = -1;
  if (import_begin(ts, &im, err) < 0)
    goto out;
  struct image_limits lim = {.max_bytes = ts->cfg.max_image_bytes, .max_entries = 100000};
  if (image_read_layout(dfd, &lim, &img, err) < 0)
    goto out;
  rc = commit_image(&im, dfd, false, tenant, name, "oci", &img, out, err);
out:
  image_free(&img);
  import_end(&im);
  return rc;
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

static bool digest_ok(const char *d) {
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

int template_collect(struct template_store *ts, struct husk_err *err) {
  /* Never while an import places layers it has not recorded yet. */
  if (flock(ts->gc, LOCK_EX | LOCK_NB) < 0)
    return 0;
  struct collect_ctx c = {0};
  int rc = state_template_list(ts->state, NULL, collect_cb, &c, err);
  if (rc == 0 && c.failed)
    rc = husk_error(err, ENOMEM, "collecting template layers");
  if (rc == 0)
    rc = sweep_dir(ts->layers, &c.layers, true) + sweep_dir(ts->blobs, &c.blobs, false);
  flock(ts->gc, LOCK_UN);
  for (size_t i = 0; i < c.layers.n; i++)
    free(c.layers.v[i]);
  for (size_t i = 0; i < c.blobs.n; i++)
    free(c.blobs.v[i]);
  free(c.layers.v);
  free(c.blobs.v);
  return rc;
}
