/* An image assembled layer by layer (template.h: template_asm_*), and the
 * build cache.  It is an import whose layers come one at a time: each is
 * placed in the store as soon as it is made (the next build step's box
 * stacks it), the row is recorded at the commit, and the import's hold on
 * the store keeps collection away until then. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/template_state.h"
#include "template/template_internal.h"
#include "util/cleanup.h"
#include "util/fileio.h"

struct template_asm {
  struct template_store *ts;
  struct import im;
  char tenant[STATE_TENANT_ID_SIZE];
  char name[STATE_TEMPLATE_NAME_SIZE];
  struct image_layer layers[IMAGE_MAX_LAYERS]; /* base first; blob NULL: in the store */
  size_t n;
  unsigned blobs; /* blob files made in the work directory */
};

static int push(struct template_asm *a, const char *diff_id, const char *digest, uint64_t size,
                const char *blob, struct husk_err *err) {
  if (a->n == IMAGE_MAX_LAYERS)
    return husk_fail(err, EFBIG, "the image would have more than %d layers", IMAGE_MAX_LAYERS);
  struct image_layer *l = &a->layers[a->n];
  memset(l, 0, sizeof *l);
  snprintf(l->diff_id, sizeof l->diff_id, "%s", diff_id);
  snprintf(l->digest, sizeof l->digest, "%s", digest);
  l->size = size;
  if (blob && !(l->blob = strdup(blob)))
    return husk_error(err, ENOMEM, "image assembly");
  a->n++;
  return 0;
}

int template_asm_begin(struct template_store *ts, const char *tenant, const char *name,
                       const struct state_template *base, struct template_asm **out,
                       struct husk_err *err) {
  *out = NULL;
  if (import_check_new(ts, tenant, name, err) < 0)
    return -1;
  struct template_asm *a = calloc(1, sizeof *a);
  if (!a)
    return husk_error(err, ENOMEM, "image assembly");
  a->ts = ts;
  snprintf(a->tenant, sizeof a->tenant, "%s", tenant);
  snprintf(a->name, sizeof a->name, "%s", name);
  if (import_begin(ts, tenant, &a->im, err) < 0) {
    template_asm_end(a);
    return -1;
  }
  json_t *l = json_loads(base->layers_json, 0, NULL);
  size_t i;
  json_t *e;
  int rc = json_is_array(l)
               ? 0
               : husk_fail(err, EUCLEAN, "template %s: its layer list is damaged", base->id);
  json_array_foreach(l, i, e) {
    if (rc < 0)
      break;
    const char *d = json_string_value(json_object_get(e, "diff_id"));
    const char *g = json_string_value(json_object_get(e, "digest"));
    if (!digest_ok(d) || !digest_ok(g)) {
      rc = husk_fail(err, EUCLEAN, "template %s: its layer list is damaged", base->id);
      break;
    }
    rc = push(a, d, g, (uint64_t)json_integer_value(json_object_get(e, "size")), NULL, err);
  }
  json_decref(l);
  if (rc < 0) {
    template_asm_end(a);
    return -1;
  }
  *out = a;
  return 0;
}

int template_asm_workdir(struct template_asm *a) { return a->im.wfd; }

int template_asm_add_tree(struct template_asm *a, int tree_fd, uint32_t id_base,
                          const char *const *exclude, char diff_id_out[LAYER_DIGEST_SIZE],
                          struct husk_err *err) {
  char blob[32];
  snprintf(blob, sizeof blob, "b%u.tar", a->blobs++);
  cleanup_close int fd =
      openat(a->im.wfd, blob, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return husk_error(err, errno, "cannot write a layer");
  struct layer_written w;
  if (layer_write_tree(tree_fd, id_base, exclude, fd, &w, err) < 0)
    return -1;
  if (fsync(fd) < 0)
    return husk_error(err, errno, "cannot write a layer");
  struct image_layer l = {.size = w.size};
  snprintf(l.diff_id, sizeof l.diff_id, "%s", w.diff_id);
  snprintf(l.digest, sizeof l.digest, "%s", w.diff_id); /* uncompressed: the same */
  l.blob = blob;
  /* Within the tenant's room less what the assembly's layers took so far. */
  if (import_place_layer(&a->im, a->im.wfd, &l, a->n, &a->im.unpacked, err) < 0 ||
      import_keep_blob(&a->im, a->im.wfd, true, l.digest, blob, err) < 0)
    return -1;
  snprintf(diff_id_out, LAYER_DIGEST_SIZE, "%s", w.diff_id);
  return push(a, w.diff_id, w.diff_id, w.size, NULL, err);
}

int template_asm_add_layer(struct template_asm *a, const char *diff_id, struct husk_err *err) {
  if (!digest_ok(diff_id))
    return husk_fail(err, EINVAL, "a malformed layer id");
  const char *hex = diff_id + HEX_OFF;
  struct stat st;
  /* Made by a build: its blob is its tar, named by the same digest. */
  if (fstatat(a->ts->layers, hex, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
      fstatat(a->ts->blobs, hex, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return husk_fail(err, ENOENT, "layer %s is no longer in the store", diff_id);
  return push(a, diff_id, diff_id, (uint64_t)st.st_size, NULL, err);
}

size_t template_asm_layers(const struct template_asm *a, const char *ids[IMAGE_MAX_LAYERS]) {
  for (size_t i = 0; i < a->n; i++)
    ids[i] = a->layers[a->n - 1 - i].diff_id + HEX_OFF;
  return a->n;
}

static void digest_of(const char *s, char out[LAYER_DIGEST_SIZE]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned l = 0;
  EVP_Digest(s, strlen(s), md, &l, EVP_sha256(), NULL);
  char *p = out + snprintf(out, LAYER_DIGEST_SIZE, "sha256:");
  for (unsigned i = 0; i < l && i < 32; i++)
    p += snprintf(p, 3, "%02x", md[i]);
}

int template_asm_commit(struct template_asm *a, const char *config_json, struct state_template *out,
                        struct husk_err *err) {
  json_t *c = json_loads(config_json, 0, NULL);
  json_t *ids = json_array();
  for (size_t i = 0; ids && i < a->n; i++)
    json_array_append_new(ids, json_string(a->layers[i].diff_id));
  if (!json_is_object(c) || !ids) {
    json_decref(c);
    json_decref(ids);
    return husk_fail(err, EINVAL, "the built image's config is not a JSON object");
  }
  json_object_set_new(c, "rootfs", json_pack("{s:s, s:o}", "type", "layers", "diff_ids", ids));
  char *text = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(c);
  if (!text)
    return husk_error(err, ENOMEM, "image assembly");
  struct image img = {.config_json = text, .layers = a->layers, .nlayers = a->n};
  digest_of(text, img.config_digest);
  char **diff;
  size_t nd;
  int rc = image_config_parse(text, strlen(text), &img.config, &diff, &nd, err);
  if (rc == 0) {
    for (size_t i = 0; i < nd; i++)
      free(diff[i]);
    free(diff);
    rc = import_commit(&a->im, a->im.wfd, true, a->tenant, a->name, "build", &img, out, err);
  }
  image_config_free(&img.config);
  free(text);
  return rc;
}

void template_asm_end(struct template_asm *a) {
  if (!a)
    return;
  import_end(&a->im);
  for (size_t i = 0; i < a->n; i++)
    free(a->layers[i].blob);
  free(a);
}

int template_cache_get(struct template_store *ts, const char *tenant, const char *key,
                       char diff_id[LAYER_DIGEST_SIZE], struct husk_err *err) {
  return state_build_cache_get(ts->state, tenant, key, diff_id, err);
}

int template_cache_put(struct template_store *ts, const char *tenant, const char *key,
                       const char *diff_id, struct husk_err *err) {
  if (!digest_ok(diff_id))
    return husk_fail(err, EINVAL, "a malformed layer id");
  /* Its unpacked bytes, as the layer's meta file has them: counted in the
   * tenant's template storage while the entry keeps the layer. */
  char path[96], buf[32];
  snprintf(path, sizeof path, "%s/size", diff_id + HEX_OFF);
  ssize_t n = read_file_at(ts->layers, path, buf, sizeof buf);
  if (n <= 0)
    return husk_fail(err, ENOENT, "layer %s is no longer in the store", diff_id);
  char *end;
  errno = 0;
  unsigned long long size = strtoull(buf, &end, 10);
  if (errno || end == buf || size > INT64_MAX)
    return husk_fail(err, EUCLEAN, "layer %s: its size file is damaged", diff_id);
  return state_build_cache_put(ts->state, tenant, key, diff_id, (int64_t)size,
                               *tenant ? ts->cfg.tenant_quota : 0, err);
}
