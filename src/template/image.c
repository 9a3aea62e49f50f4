/* Reading an image (see image.h).
 *
 * Both readers end in the same resolution: find the manifest (OCI:
 * index.json, one level of nested index allowed; Docker: manifest.json),
 * then the config and the layers it names, each a "blob" looked up by
 * name in the source.  An archive is read once, front to back: every file
 * becomes a file of the work directory with its sha256 computed on the
 * way, so a blob named by its digest is checked without a second read. */
#define _GNU_SOURCE
#include "template/image.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "jail/syscalls.h"
#include "util/cleanup.h"

#define CHUNK ((size_t)256 * 1024)
#define JSON_MAX ((size_t)4 << 20) /* a manifest, index or config */
#define ALIAS_HOPS 8

/* One file of the source: a name in the archive (or layout directory) and
 * where its bytes are. */
struct sfile {
  char *name;
  char *path;  /* relative to the source's directory fd */
  char *alias; /* a symlink of the archive: the name it points to */
  char digest[LAYER_DIGEST_SIZE];
  uint64_t size;
};

struct src {
  int dir; /* work directory (archive) or layout directory */
  bool layout;
  struct sfile *files;
  size_t n, cap;
  const struct image_limits *lim;
  struct husk_err *err;
};

static void src_free(struct src *s) {
  for (size_t i = 0; i < s->n; i++) {
    free(s->files[i].name);
    free(s->files[i].path);
    free(s->files[i].alias);
  }
  free(s->files);
}

static int open_beneath(int dirfd, const char *path, int flags) {
  return sys_openat2(dirfd, path, (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC), 0,
                     RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                         RESOLVE_NO_XDEV);
}

static void hex_digest(EVP_MD_CTX *md, char out[LAYER_DIGEST_SIZE]) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned l = 0;
  EVP_DigestFinal_ex(md, d, &l);
  char *p = out + snprintf(out, LAYER_DIGEST_SIZE, "sha256:");
  for (unsigned i = 0; i < l && i < 32; i++)
    p += snprintf(p, 3, "%02x", d[i]);
}


static struct sfile *src_add(struct src *s, const char *name) {
  if (s->n == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 32;
    struct sfile *f = realloc(s->files, nc * sizeof *f);
    if (!f)
      return NULL;
    s->files = f;
    s->cap = nc;
  }
  struct sfile *f = &s->files[s->n];
  memset(f, 0, sizeof *f);
  if (!(f->name = strdup(name)))
    return NULL;
  s->n++;
  return f;
}

/* The file named `name` in the source; archive symlinks are followed
 * (within the archive, a few hops).  NULL if there is none. */
static struct sfile *src_find(struct src *s, const char *name) {
  char cur[PATH_MAX];
  snprintf(cur, sizeof cur, "%s", name);
  for (int hop = 0; hop < ALIAS_HOPS; hop++) {
    struct sfile *f = NULL;
    for (size_t i = 0; i < s->n; i++)
      if (!strcmp(s->files[i].name, cur)) {
        f = &s->files[i];
        break;
      }
    if (!f || !f->alias)
      return f;
    /* Relative to the link's directory, as the archive's own. */
    char joined[PATH_MAX * 2], clean[PATH_MAX];
    const char *slash = strrchr(cur, '/');
    snprintf(joined, sizeof joined, "%.*s%s%s", slash ? (int)(slash - cur) : 0, cur,
             slash ? "/" : "", f->alias);
    /* Resolve ".." lexically; a target leaving the archive is not found. */
    char *parts[PATH_MAX / 2];
    size_t np = 0;
    for (char *tok = strtok(joined, "/"); tok; tok = strtok(NULL, "/")) {
      if (!strcmp(tok, "."))
        continue;
      if (!strcmp(tok, "..")) {
        if (!np)
          return NULL;
        np--;
        continue;
      }
      if (np == sizeof parts / sizeof *parts)
        return NULL;
      parts[np++] = tok;
    }
    size_t o = 0;
    for (size_t i = 0; i < np; i++) {
      size_t l = strlen(parts[i]);
      if (o + l + 2 > sizeof clean)
        return NULL;
      if (o)
        clean[o++] = '/';
      memcpy(clean + o, parts[i], l);
      o += l;
    }
    clean[o] = '\0';
    snprintf(cur, sizeof cur, "%s", clean);
  }
  return NULL;
}

/* A layout directory's file `name`, hashed now (the layout is not
 * trusted to be what its names say). */
static struct sfile *layout_file(struct src *s, const char *name) {
  struct sfile *f = src_find(s, name);
  if (f)
    return f;
  cleanup_close int fd = open_beneath(s->dir, name, O_RDONLY);
  if (fd < 0)
    return NULL;
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
    return NULL;
  if ((uint64_t)st.st_size > s->lim->max_bytes) {
    husk_fail(s->err, EFBIG, "`%s` is larger than %llu bytes", name,
              (unsigned long long)s->lim->max_bytes);
    return NULL;
  }
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  cleanup_free char *buf = malloc(CHUNK);
  if (!md || !buf || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
    EVP_MD_CTX_free(md);
    husk_error(s->err, ENOMEM, "hashing `%s`", name);
    return NULL;
  }
  ssize_t n;
  uint64_t total = 0;
  while ((n = read(fd, buf, CHUNK)) > 0) {
    EVP_DigestUpdate(md, buf, (size_t)n);
    total += (uint64_t)n;
  }
  if (n < 0) {
    EVP_MD_CTX_free(md);
    husk_error(s->err, errno, "cannot read `%s`", name);
    return NULL;
  }
  f = src_add(s, name);
  if (!f || !(f->path = strdup(name))) {
    EVP_MD_CTX_free(md);
    husk_error(s->err, ENOMEM, "image source");
    return NULL;
  }
  hex_digest(md, f->digest);
  EVP_MD_CTX_free(md);
  f->size = total;
  return f;
}

static struct sfile *get_file(struct src *s, const char *name) {
  return s->layout ? layout_file(s, name) : src_find(s, name);
}

/* The whole of a small file (JSON) of the source, NUL-terminated. */
static char *read_small(struct src *s, struct sfile *f, size_t *len) {
  if (f->size > JSON_MAX) {
    husk_fail(s->err, EFBIG, "`%s` is larger than %zu bytes", f->name, JSON_MAX);
    return NULL;
  }
  cleanup_close int fd = open_beneath(s->dir, f->path, O_RDONLY);
  if (fd < 0) {
    husk_error(s->err, errno, "cannot open `%s`", f->name);
    return NULL;
  }
  char *buf = malloc(f->size + 1);
  if (!buf) {
    husk_error(s->err, ENOMEM, "reading `%s`", f->name);
    return NULL;
  }
  size_t got = 0;
  while (got < f->size) {
    ssize_t n = read(fd, buf + got, f->size - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      free(buf);
      husk_error(s->err, n < 0 ? errno : EIO, "cannot read `%s`", f->name);
      return NULL;
    }
    got += (size_t)n;
  }
  buf[got] = '\0';
  *len = got;
  return buf;
}

static json_t *read_json(struct src *s, const char *name, bool required) {
  struct sfile *f = get_file(s, name);
  if (!f) {
    if (required && !s->err->msg[0])
      husk_fail(s->err, EINVAL, "the image has no `%s`", name);
    return NULL;
  }
  size_t len;
  cleanup_free char *text = read_small(s, f, &len);
  if (!text)
    return NULL;
  json_error_t je;
  json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!j)
    husk_fail(s->err, EINVAL, "`%s` is not valid JSON: %s (line %d)", name, je.text, je.line);
  return j;
}

/* A descriptor's digest: "sha256:" + 64 lowercase hex digits. */
static const char *desc_digest(struct src *s, json_t *desc, const char *what) {
  const char *d = json_string_value(json_object_get(desc, "digest"));
  bool ok = d && strlen(d) == 71 && !strncmp(d, "sha256:", 7);
  for (size_t i = 7; ok && i < 71; i++)
    ok = (d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'f');
  if (!ok) {
    husk_fail(s->err, EINVAL, "the %s's digest is not a sha256 digest", what);
    return NULL;
  }
  return d;
}

/* The blob a descriptor names, checked against its digest. */
static struct sfile *blob_of(struct src *s, json_t *desc, const char *what) {
  const char *d = desc_digest(s, desc, what);
  if (!d)
    return NULL;
  char name[96];
  snprintf(name, sizeof name, "blobs/sha256/%s", d + 7);
  struct sfile *f = get_file(s, name);
  if (!f) {
    if (!s->err->msg[0])
      husk_fail(s->err, EINVAL, "the image lacks the %s blob %s", what, d);
    return NULL;
  }
  if (strcmp(f->digest, d)) {
    husk_fail(s->err, EINVAL, "the %s blob %s does not match its digest (it hashes to %s)", what, d,
              f->digest);
    return NULL;
  }
  return f;
}

static json_t *blob_json(struct src *s, json_t *desc, const char *what) {
  struct sfile *f = blob_of(s, desc, what);
  if (!f)
    return NULL;
  return read_json(s, f->name, true);
}

static const char *host_arch(void) {
  struct utsname u;
  if (uname(&u) < 0)
    return "amd64";
  if (!strcmp(u.machine, "x86_64"))
    return "amd64";
  if (!strcmp(u.machine, "aarch64"))
    return "arm64";
  return "unknown";
}

static bool is_index_type(const char *mt) {
  return mt && (!strcmp(mt, "application/vnd.oci.image.index.v1+json") ||
                !strcmp(mt, "application/vnd.docker.distribution.manifest.list.v2+json"));
}

/* From an index's manifests: the one for linux/<this arch>, else the only
 * one without a platform, else the first. */
static json_t *pick_manifest(json_t *index) {
  json_t *list = json_object_get(index, "manifests");
  if (!json_is_array(list) || !json_array_size(list))
    return NULL;
  const char *arch = host_arch();
  size_t i;
  json_t *m, *plain = NULL;
  json_array_foreach(list, i, m) {
    json_t *p = json_object_get(m, "platform");
    if (!p) {
      if (!plain)
        plain = m;
      continue;
    }
    const char *os = json_string_value(json_object_get(p, "os"));
    const char *a = json_string_value(json_object_get(p, "architecture"));
    if (os && a && !strcmp(os, "linux") && !strcmp(a, arch))
      return m;
  }
  return plain ? plain : json_array_get(list, 0);
}

static bool layer_type_ok(const char *mt) {
  static const char *const ok[] = {
      "application/vnd.oci.image.layer.v1.tar",
      "application/vnd.oci.image.layer.v1.tar+gzip",
      "application/vnd.oci.image.layer.v1.tar+zstd",
      "application/vnd.oci.image.layer.nondistributable.v1.tar",
      "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
      "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
      "application/vnd.docker.image.rootfs.diff.tar.gzip",
      "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
  };
  if (!mt)
    return true; /* older writers leave it out */
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
    if (!strcmp(mt, ok[i]))
      return true;
  return false;
}

static char **str_array(json_t *a, bool *bad) {
  if (!a || json_is_null(a))
    return NULL;
  if (!json_is_array(a)) {
    *bad = true;
    return NULL;
  }
  size_t n = json_array_size(a);
  char **v = calloc(n + 1, sizeof *v);
  if (!v) {
    *bad = true;
    return NULL;
  }
  for (size_t i = 0; i < n; i++) {
    const char *s = json_string_value(json_array_get(a, i));
    if (!s || !(v[i] = strdup(s))) {
      *bad = true;
      break;
    }
  }
  return v;
}

static void strv_free(char **v) {
  for (size_t i = 0; v && v[i]; i++)
    free(v[i]);
  free(v);
}

void image_config_free(struct image_config *c) {
  strv_free(c->env);
  strv_free(c->entrypoint);
  strv_free(c->cmd);
  free(c->workdir);
  free(c->user);
  free(c->labels_json);
  free(c->os);
  free(c->arch);
  memset(c, 0, sizeof *c);
}

void image_free(struct image *im) {
  image_config_free(&im->config);
  for (size_t i = 0; i < im->nlayers; i++)
    free(im->layers[i].blob);
  free(im->layers);
  free(im->config_json);
  memset(im, 0, sizeof *im);
}

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

int image_config_parse(const char *json, size_t len, struct image_config *out, char ***diff_ids,
                       size_t *ndiff, struct husk_err *err) {
  memset(out, 0, sizeof *out);
  *diff_ids = NULL;
  *ndiff = 0;
  json_error_t je;
  json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
  if (!json_is_object(root)) {
    json_decref(root);
    return husk_fail(err, EINVAL, "the image config is not a JSON object");
  }
  json_t *c = json_object_get(root, "config");
  if (c && !json_is_null(c) && !json_is_object(c)) {
    json_decref(root);
    return husk_fail(err, EINVAL, "the image config's `config` is not an object");
  }
  bool bad = false;
  out->env = str_array(json_object_get(c, "Env"), &bad);
  if (!out->env && !bad)
    out->env = calloc(1, sizeof *out->env);
  out->entrypoint = str_array(json_object_get(c, "Entrypoint"), &bad);
  out->cmd = str_array(json_object_get(c, "Cmd"), &bad);
  out->workdir = dup_or_empty(json_string_value(json_object_get(c, "WorkingDir")));
  out->user = dup_or_empty(json_string_value(json_object_get(c, "User")));
  out->os = dup_or_empty(json_string_value(json_object_get(root, "os")));
  out->arch = dup_or_empty(json_string_value(json_object_get(root, "architecture")));
  json_t *labels = json_object_get(c, "Labels");
  json_t *clean = json_object();
  const char *k;
  json_t *v;
  if (json_is_object(labels))
    json_object_foreach(labels, k, v) if (json_is_string(v)) json_object_set(clean, k, v);
  out->labels_json = json_dumps(clean, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(clean);
  for (size_t i = 0; out->env && out->env[i]; i++)
    if (!strchr(out->env[i], '=') || out->env[i][0] == '=')
      bad = true;
  json_t *ids = json_object_get(json_object_get(root, "rootfs"), "diff_ids");
  size_t n = json_array_size(ids);
  if (!bad && out->env && out->workdir && out->user && out->os && out->arch && out->labels_json) {
    *diff_ids = calloc(n + 1, sizeof **diff_ids);
    for (size_t i = 0; *diff_ids && i < n; i++) {
      const char *d = json_string_value(json_array_get(ids, i));
      if (!d || strlen(d) != 71 || strncmp(d, "sha256:", 7) || !((*diff_ids)[i] = strdup(d))) {
        bad = true;
        break;
      }
    }
    if (!*diff_ids)
      bad = true;
  } else {
    bad = true;
  }
  json_decref(root);
  if (bad) {
    image_config_free(out);
    strv_free(*diff_ids);
    *diff_ids = NULL;
    return husk_fail(err, EINVAL,
                     "the image config is malformed (Env, Entrypoint, Cmd or "
                     "rootfs.diff_ids)");
  }
  *ndiff = n;
  return 0;
}

/* Config and layers, given the config's file and the layers' files with
 * their media types (NULL: unknown). */
static int finish(struct src *s, struct sfile *config, struct sfile **layers,
                  const char *const *types, size_t nlayers, struct image *im) {
  if (nlayers > IMAGE_MAX_LAYERS)
    return husk_fail(s->err, EFBIG, "the image has %zu layers (at most %d)", nlayers,
                     IMAGE_MAX_LAYERS);
  size_t len;
  if (!(im->config_json = read_small(s, config, &len)))
    return -1;
  snprintf(im->config_digest, sizeof im->config_digest, "%s", config->digest);
  char **ids;
  size_t nids;
  if (image_config_parse(im->config_json, len, &im->config, &ids, &nids, s->err) < 0)
    return -1;
  int rc = -1;
  if (nids != nlayers) {
    husk_fail(s->err, EINVAL, "the image config lists %zu layers, its manifest %zu", nids, nlayers);
    goto out;
  }
  if (strcmp(im->config.os, "linux")) {
    husk_fail(s->err, EINVAL, "the image is for `%s`, not linux", im->config.os);
    goto out;
  }
  if (!(im->layers = calloc(nlayers ? nlayers : 1, sizeof *im->layers))) {
    husk_error(s->err, ENOMEM, "image");
    goto out;
  }
  for (size_t i = 0; i < nlayers; i++) {
    if (!layer_type_ok(types ? types[i] : NULL)) {
      husk_fail(s->err, EINVAL, "layer %zu has media type `%s`, which husk cannot unpack", i + 1,
                types[i]);
      goto out;
    }
    struct image_layer *l = &im->layers[i];
    snprintf(l->digest, sizeof l->digest, "%s", layers[i]->digest);
    snprintf(l->diff_id, sizeof l->diff_id, "%s", ids[i]);
    l->size = layers[i]->size;
    if (!(l->blob = strdup(layers[i]->path))) {
      husk_error(s->err, ENOMEM, "image");
      goto out;
    }
    im->nlayers = i + 1;
  }
  rc = 0;
out:
  strv_free(ids);
  return rc;
}

static int resolve_oci(struct src *s, struct image *im) {
  json_t *index = read_json(s, "index.json", true);
  if (!index)
    return -1;
  int rc = -1;
  json_t *manifest = NULL;
  json_t *desc = pick_manifest(index);
  json_t *nested = NULL;
  if (desc && is_index_type(json_string_value(json_object_get(desc, "mediaType")))) {
    if (!(nested = blob_json(s, desc, "index")))
      goto out;
    desc = pick_manifest(nested);
  }
  if (!desc) {
    husk_fail(s->err, EINVAL, "index.json lists no image");
    goto out;
  }
  if (!(manifest = blob_json(s, desc, "manifest")))
    goto out;
  struct sfile *config = blob_of(s, json_object_get(manifest, "config"), "config");
  if (!config)
    goto out;
  json_t *layers = json_object_get(manifest, "layers");
  if (!json_is_array(layers)) {
    husk_fail(s->err, EINVAL, "the manifest has no layer list");
    goto out;
  }
  size_t n = json_array_size(layers);
  if (n > IMAGE_MAX_LAYERS) {
    husk_fail(s->err, EFBIG, "the image has %zu layers (at most %d)", n, IMAGE_MAX_LAYERS);
    goto out;
  }
  struct sfile *lf[IMAGE_MAX_LAYERS];
  const char *types[IMAGE_MAX_LAYERS];
  for (size_t i = 0; i < n; i++) {
    json_t *d = json_array_get(layers, i);
    types[i] = json_string_value(json_object_get(d, "mediaType"));
    if (!(lf[i] = blob_of(s, d, "layer")))
      goto out;
  }
  rc = finish(s, config, lf, types, n, im);
out:
  json_decref(manifest);
  json_decref(nested);
  json_decref(index);
  return rc;
}

static int resolve_docker(struct src *s, struct image *im) {
  json_t *list = read_json(s, "manifest.json", true);
  if (!list)
    return -1;
  int rc = -1;
  json_t *m = json_array_get(list, 0);
  const char *cname = json_string_value(json_object_get(m, "Config"));
  json_t *layers = json_object_get(m, "Layers");
  if (!cname || !json_is_array(layers)) {
    husk_fail(s->err, EINVAL, "manifest.json names no config or no layers");
    goto out;
  }
  size_t n = json_array_size(layers);
  if (n > IMAGE_MAX_LAYERS) {
    husk_fail(s->err, EFBIG, "the image has %zu layers (at most %d)", n, IMAGE_MAX_LAYERS);
    goto out;
  }
  char clean[PATH_MAX];
  struct sfile *config = NULL;
  if (layer_clean_name(cname, clean, sizeof clean) == 0)
    config = get_file(s, clean);
  if (!config) {
    husk_fail(s->err, EINVAL, "manifest.json names a config `%.200s` the archive lacks", cname);
    goto out;
  }
  struct sfile *lf[IMAGE_MAX_LAYERS];
  for (size_t i = 0; i < n; i++) {
    const char *ln = json_string_value(json_array_get(layers, i));
    lf[i] = ln && layer_clean_name(ln, clean, sizeof clean) == 0 ? get_file(s, clean) : NULL;
    if (!lf[i]) {
      husk_fail(s->err, EINVAL, "manifest.json names a layer `%.200s` the archive lacks",
                ln ? ln : "?");
      goto out;
    }
  }
  rc = finish(s, config, lf, NULL, n, im);
out:
  json_decref(list);
  return rc;
}

static int resolve(struct src *s, struct image *im) {
  if (get_file(s, "index.json"))
    return resolve_oci(s, im);
  if (s->err->msg[0])
    return -1;
  if (get_file(s, "manifest.json"))
    return resolve_docker(s, im);
  if (s->err->msg[0])
    return -1;
  return husk_fail(s->err, EINVAL,
                   "not an image: no index.json (OCI) and no manifest.json "
                   "(docker save)");
}

/* ---- an archive, read once ------------------------------------------------- */

struct ar {
  ssize_t (*in)(void *ctx, void *buf, size_t cap);
  void *ctx;
  char *buf;  /* what in() hands libarchive */
  char *data; /* what libarchive hands back: another buffer (it may still read buf) */
  bool in_failed;
  int in_errno;
};

static la_ssize_t ar_read(struct archive *a, void *cd, const void **buf) {
  struct ar *r = cd;
  for (;;) {
    errno = 0;
    ssize_t n = r->in(r->ctx, r->buf, CHUNK);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 || (size_t)n > CHUNK) {
      r->in_failed = true;
      r->in_errno = errno ? errno : EIO;
      archive_set_error(a, r->in_errno, "reading the image failed");
      return -1;
    }
    *buf = r->buf;
    return n;
  }
}

static int ar_fail(struct src *s, struct archive *a, struct ar *r, const char *what) {
  if (r->in_failed)
    return husk_error(s->err, r->in_errno, "cannot read the image");
  const char *m = archive_error_string(a);
  return husk_fail(s->err, EINVAL, "damaged image archive (%s): %s", what, m ? m : "unknown");
}

/* Copy the entry's data into work file `path`, hashing it. */
static int ar_file(struct src *s, struct archive *a, struct ar *r, struct sfile *f,
                   uint64_t *total) {
  cleanup_close int fd =
      openat(s->dir, f->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return husk_error(s->err, errno, "cannot store `%s`", f->name);
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
    EVP_MD_CTX_free(md);
    return husk_error(s->err, ENOMEM, "hashing `%s`", f->name);
  }
  int rc = 0;
  for (;;) {
    la_ssize_t n = archive_read_data(a, r->data, CHUNK);
    if (n == 0)
      break;
    if (n < 0) {
      rc = ar_fail(s, a, r, f->name);
      break;
    }
    f->size += (uint64_t)n;
    *total += (uint64_t)n;
    if (f->size > s->lim->max_bytes || *total > s->lim->max_bytes) {
      rc = husk_fail(s->err, EFBIG, "the image is larger than %llu bytes",
                     (unsigned long long)s->lim->max_bytes);
      break;
    }
    EVP_DigestUpdate(md, r->data, (size_t)n);
    for (la_ssize_t done = 0; done < n;) {
      ssize_t w = write(fd, r->data + done, (size_t)(n - done));
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0) {
        rc = husk_error(s->err, errno, "cannot store `%s`", f->name);
        break;
      }
      done += w;
    }
    if (rc < 0)
      break;
  }
  if (rc == 0)
    hex_digest(md, f->digest);
  EVP_MD_CTX_free(md);
  return rc;
}

int image_read_archive(ssize_t (*in)(void *ctx, void *buf, size_t cap), void *ctx, int workdir,
                       const struct image_limits *lim, struct image *im, struct husk_err *err) {
  memset(im, 0, sizeof *im);
  husk_err_clear(err); /* the readers tell "not found" from a failure by it */
  struct src s = {.dir = workdir, .lim = lim, .err = err};
  struct ar r = {.in = in, .ctx = ctx};
  struct archive *a = archive_read_new();
  int rc = -1;
  if (!a || !(r.buf = malloc(CHUNK)) || !(r.data = malloc(CHUNK))) {
    husk_error(err, ENOMEM, "image reader");
    goto out;
  }
  archive_read_support_format_tar(a);
  if (archive_zlib_version())
    archive_read_support_filter_gzip(a);
  if (archive_libzstd_version())
    archive_read_support_filter_zstd(a);
  if (archive_read_open(a, &r, NULL, ar_read, NULL) != ARCHIVE_OK) {
    ar_fail(&s, a, &r, "start");
    goto out;
  }
  uint64_t total = 0, entries = 0;
  for (;;) {
    struct archive_entry *e;
    int h = archive_read_next_header(a, &e);
    if (h == ARCHIVE_EOF)
      break;
    if (h < ARCHIVE_WARN) {
      ar_fail(&s, a, &r, "header");
      goto out;
    }
    if (++entries > lim->max_entries) {
      husk_fail(err, EFBIG, "the image archive has more than %llu entries",
                (unsigned long long)lim->max_entries);
      goto out;
    }
    const char *raw = archive_entry_pathname(e);
    char name[PATH_MAX];
    if (!raw || layer_clean_name(raw, name, sizeof name) < 0) {
      husk_fail(err, EINVAL, "image archive entry `%.200s`: an absolute name or `..` is refused",
                raw ? raw : "?");
      goto out;
    }
    mode_t type = archive_entry_filetype(e);
    if (!*name || type == AE_IFDIR)
      continue;
    if (type != AE_IFREG && type != AE_IFLNK)
      continue; /* nothing an image needs */
    struct sfile *f = src_add(&s, name);
    if (!f) {
      husk_error(err, ENOMEM, "image reader");
      goto out;
    }
    if (type == AE_IFLNK) {
      const char *t = archive_entry_symlink(e);
      if (!t || !(f->alias = strdup(t))) {
        husk_fail(err, EINVAL, "image archive entry `%s`: a symlink to nothing", name);
        goto out;
      }
      continue;
    }
    char path[32];
    snprintf(path, sizeof path, "f%zu", s.n);
    if (!(f->path = strdup(path))) {
      husk_error(err, ENOMEM, "image reader");
      goto out;
    }
    if (ar_file(&s, a, &r, f, &total) < 0)
      goto out;
  }
  rc = resolve(&s, im);
out:
  if (rc < 0)
    image_free(im);
  archive_read_free(a);
  free(r.buf);
  free(r.data);
  src_free(&s);
  return rc;
}

int image_read_layout(int dir_fd, const struct image_limits *lim, struct image *im,
                      struct husk_err *err) {
  memset(im, 0, sizeof *im);
  husk_err_clear(err);
  struct src s = {.dir = dir_fd, .layout = true, .lim = lim, .err = err};
  int rc = -1;
  struct sfile *marker = layout_file(&s, "oci-layout");
  if (!marker) {
    if (!err->msg[0])
      husk_fail(err, EINVAL, "not an OCI image layout: no `oci-layout` file");
    goto out;
  }
  rc = resolve(&s, im);
out:
  if (rc < 0)
    image_free(im);
  src_free(&s);
  return rc;
}
