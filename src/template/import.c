/* Imports into the template store: an archive or a layout directory read
 * (image.c), its layers unpacked once each, its blobs kept, its row
 * recorded last (template.h has the crash story). */
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

/* ---- import ---------------------------------------------------------------- */

/* The data disk keeps its reserve: an import stops before eating it (an
 * archive's layers are checked one by one as they are unpacked). */
static int check_space(struct template_store *ts, struct husk_err *err) {
  if (disk_reserve_check(ts->root, &ts->reserve, 0, err) < 0)
    return husk_error_wrap(err, "the template cannot be stored");
  return 0;
}

int import_begin(struct template_store *ts, const char *tenant, struct import *im,
                 struct husk_err *err) {
  im->ts = ts;
  im->wfd = im->gc = -1;
  im->max_bytes = ts->cfg.max_image_bytes;
  if (check_space(ts, err) < 0)
    return -1;
  if (*tenant && ts->cfg.tenant_quota) {
    uint64_t used;
    if (state_template_usage(ts->state, tenant, &used, err) < 0)
      return -1;
    if (used >= ts->cfg.tenant_quota)
      return husk_fail(err, EDQUOT,
                       "the tenant's templates use %llu of their %llu bytes of template storage",
                       (unsigned long long)used, (unsigned long long)ts->cfg.tenant_quota);
    if (ts->cfg.tenant_quota - used < im->max_bytes) {
      im->max_bytes = ts->cfg.tenant_quota - used;
      im->quota_bound = true;
    }
  }
  if ((im->gc = ts_gc_hold(ts, LOCK_SH)) < 0)
    return husk_error(err, errno, "cannot lock the template store");
  char id[32];
  if (id_new("imp-", 12, id, sizeof id, err) < 0)
    return -1;
  snprintf(im->work, sizeof im->work, "%s", id);
  if ((im->wfd = ts_subdir(ts->tmp, im->work, err)) < 0)
    return -1;
  return 0;
}

void import_end(struct import *im) {
  if (im->wfd >= 0) {
    close(im->wfd);
    rmtree_at(im->ts->tmp, im->work);
  }
  /* A failed import's layers and blobs: gone now, not at the next delete
   * (repeated failures must not fill the disk). */
  ts_gc_release(im->ts, im->gc, im->placed && !im->committed);
  im->gc = -1;
}

/* Unpack layer `l` (its blob in `srcdir`) into layers/<hex> unless it is
 * there; add its unpacked size to *size. */
int import_place_layer(struct import *im, int srcdir, const struct image_layer *l, size_t i,
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
  cleanup_close int ldir = ts_subdir(im->wfd, lname, err);
  if (ldir < 0)
    return -1;
  cleanup_close int rootfd = ts_subdir(ldir, "root", err);
  if (rootfd < 0 || fchmod(rootfd, 0755) < 0)
    return rootfd < 0 ? -1 : husk_error(err, errno, "layer %zu", i + 1);
  cleanup_close int blob = sys_openat2(srcdir, l->blob, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0,
                                       RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
  if (blob < 0)
    return husk_error(err, errno, "cannot open layer %zu's blob", i + 1);
  /* Within the tenant's room, less the layers unpacked before this one. */
  uint64_t room = im->max_bytes;
  if (im->quota_bound)
    room = *size < room ? room - *size : 1;
  struct layer_limits lim = {.max_bytes = room,
                             .max_entries = ts->cfg.max_layer_entries,
                             .blob_digest = l->digest};
  struct layer_result res;
  if (layer_extract(blob, rootfd, &lim, &res, err) < 0) {
    if (err->code == EFBIG && im->quota_bound)
      return husk_fail(err, EDQUOT,
                       "layer %zu unpacks to more than the %llu bytes of template storage the "
                       "tenant has left",
                       i + 1, (unsigned long long)room);
    return husk_error_wrap(err, "layer %zu (%s)", i + 1, l->digest);
  }
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
  if (renameat(im->wfd, lname, ts->layers, hex) == 0)
    im->placed = true;
  else if (errno != EEXIST && errno != ENOTEMPTY)
    return husk_error(err, errno, "cannot store layer %zu", i + 1);
  *size += res.file_bytes;
  return 0;
}

/* The blobs as imported, for export: moved (or copied) into blobs/.  A
 * blob the store cannot keep fails the import: export needs every one. */
int import_keep_blob(struct import *im, int srcdir, bool move, const char *digest, const char *path,
                     struct husk_err *err) {
  struct template_store *ts = im->ts;
  const char *hex = digest + HEX_OFF;
  if (faccessat(ts->blobs, hex, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
    return 0;
  if (!path)
    return husk_fail(err, ENOENT, "blob %s is not in the store", digest);
  if (move && renameat(srcdir, path, ts->blobs, hex) == 0) {
    im->placed = true;
    return 0;
  }
  /* From a layout directory: copied (the host's directory stays whole). */
  cleanup_close int in = sys_openat2(srcdir, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0,
                                     RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
  char tmpname[80];
  snprintf(tmpname, sizeof tmpname, "blob-%s", hex);
  cleanup_close int outf =
      openat(im->wfd, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (in < 0 || outf < 0)
    return husk_error(err, errno, "cannot keep blob %s", digest);
  char buf[65536];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0)
    if (write_all(outf, buf, (size_t)n) < 0)
      return husk_error(err, errno, "cannot keep blob %s", digest);
  if (n < 0 || fsync(outf) < 0 || renameat(im->wfd, tmpname, ts->blobs, hex) < 0)
    return husk_error(err, errno, "cannot keep blob %s", digest);
  im->placed = true;
  return 0;
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
int import_commit(struct import *im, int srcdir, bool move, const char *tenant, const char *name,
                  const char *source, struct image *img, struct state_template *out,
                  struct husk_err *err) {
  struct template_store *ts = im->ts;
  uint64_t size = 0;
  for (size_t i = 0; i < img->nlayers; i++)
    if (import_place_layer(im, srcdir, &img->layers[i], i, &size, err) < 0)
      return -1;
  for (size_t i = 0; i < img->nlayers; i++)
    if (import_keep_blob(im, srcdir, move, img->layers[i].digest, img->layers[i].blob, err) < 0)
      return -1;
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
  im->committed = true;
  ts_log(ts, "template %s (%s) imported for %s: %zu layer(s), %llu bytes", t.name, t.id,
         *tenant ? tenant : "every tenant", img->nlayers, (unsigned long long)size);
  if (out) {
    *out = t;
    out->config_json = strdup(img->config_json);
    out->layers_json = take_ptr(&lj);
  }
  return 0;
}

int import_check_new(struct template_store *ts, const char *tenant, const char *name,
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
  if (import_check_new(ts, tenant, name, err) < 0)
    return -1;
  struct import im = {0};
  struct image img = {0};
  int rc = -1;
  if (import_begin(ts, tenant, &im, err) < 0)
    goto out;
  struct image_limits lim = {.max_bytes = im.max_bytes, .max_entries = 100000};
  if (image_read_archive(in, ctx, im.wfd, &lim, &img, err) < 0) {
    if (err->code == EFBIG && im.quota_bound)
      husk_fail(err, EDQUOT, "the archive is larger than the %llu bytes of template storage the "
                "tenant has left", (unsigned long long)im.max_bytes);
    goto out;
  }
  rc = import_commit(&im, im.wfd, true, tenant, name, "oci", &img, out, err);
out:
  image_free(&img);
  import_end(&im);
  return rc;
}

int template_import_layout(struct template_store *ts, const char *tenant, const char *name,
                           const char *dir, struct state_template *out, struct husk_err *err) {
  if (import_check_new(ts, tenant, name, err) < 0)
    return -1;
  cleanup_close int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return husk_error(err, errno, "cannot open the image directory `%s`", dir);
  struct import im = {0};
  struct image img = {0};
  int rc = -1;
  if (import_begin(ts, tenant, &im, err) < 0)
    goto out;
  struct image_limits lim = {.max_bytes = im.max_bytes, .max_entries = 100000};
  if (image_read_layout(dfd, &lim, &img, err) < 0)
    goto out;
  rc = import_commit(&im, dfd, false, tenant, name, "oci", &img, out, err);
out:
  image_free(&img);
  import_end(&im);
  return rc;
}
