/* A template written back as an OCI image archive (template.h:
 * template_export): the config as it was imported (its digest holds), the
 * layer blobs byte for byte from the store, a manifest and an index made
 * for them.  `podman load`, `skopeo copy oci-archive:...` and husk's own
 * import read it. */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "template/template_internal.h"
#include "util/cleanup.h"

#define CHUNK ((size_t)256 * 1024)

struct ex {
  struct archive *a;
  int (*out)(void *ctx, const void *buf, size_t len);
  void *ctx;
  bool out_failed;
  int out_errno;
  struct husk_err *err;
  int64_t mtime;
};

static la_ssize_t ex_write(struct archive *a, void *cd, const void *buf, size_t len) {
  struct ex *x = cd;
  errno = 0;
  if (x->out(x->ctx, buf, len) < 0) {
    x->out_failed = true;
    x->out_errno = errno ? errno : EIO;
    archive_set_error(a, x->out_errno, "the consumer refused the archive");
    return -1;
  }
  return (la_ssize_t)len;
}

static int ex_fail(struct ex *x, const char *what) {
  if (x->out_failed)
    return husk_error(x->err, x->out_errno, "cannot write the archive (%s)", what);
  const char *m = archive_error_string(x->a);
  return husk_fail(x->err, EIO, "cannot write the archive (%s): %s", what, m ? m : "?");
}

static int put_header(struct ex *x, const char *name, int64_t size) {
  struct archive_entry *e = archive_entry_new();
  if (!e)
    return husk_error(x->err, ENOMEM, "archive entry");
  archive_entry_set_pathname(e, name);
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 0644);
  archive_entry_set_size(e, size);
  archive_entry_set_mtime(e, x->mtime, 0);
  int r = archive_write_header(x->a, e);
  archive_entry_free(e);
  return r < ARCHIVE_WARN ? ex_fail(x, name) : 0;
}

static int put_bytes(struct ex *x, const char *name, const char *data, size_t len) {
  if (put_header(x, name, (int64_t)len) < 0)
    return -1;
  if (len && archive_write_data(x->a, data, len) < 0)
    return ex_fail(x, name);
  return 0;
}

static void digest_of(const char *s, size_t len, char out[LAYER_DIGEST_SIZE]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned l = 0;
  EVP_Digest(s, len, md, &l, EVP_sha256(), NULL);
  char *p = out + snprintf(out, LAYER_DIGEST_SIZE, "sha256:");
  for (unsigned i = 0; i < l && i < 32; i++)
    p += snprintf(p, 3, "%02x", md[i]);
}

/* A blob's media type, from its first bytes. */
static const char *layer_type(int fd) {
  unsigned char m[4] = {0};
  ssize_t n = pread(fd, m, sizeof m, 0);
  if (n >= 2 && m[0] == 0x1f && m[1] == 0x8b)
    return "application/vnd.oci.image.layer.v1.tar+gzip";
  if (n == 4 && m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd)
    return "application/vnd.oci.image.layer.v1.tar+zstd";
  return "application/vnd.oci.image.layer.v1.tar";
}

static int put_blob(struct ex *x, int fd, const char *hex, uint64_t size) {
  char name[96];
  snprintf(name, sizeof name, "blobs/sha256/%s", hex);
  if (put_header(x, name, (int64_t)size) < 0)
    return -1;
  cleanup_free char *buf = malloc(CHUNK);
  if (!buf)
    return husk_error(x->err, ENOMEM, "export");
  uint64_t left = size;
  off_t off = 0;
  while (left > 0) {
    ssize_t n = pread(fd, buf, left < CHUNK ? (size_t)left : CHUNK, off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return husk_error(x->err, n < 0 ? errno : EIO, "cannot read blob %s", hex);
    if (archive_write_data(x->a, buf, (size_t)n) < 0)
      return ex_fail(x, name);
    left -= (uint64_t)n;
    off += n;
  }
  return 0;
}

int template_export(struct template_store *ts, const char *tenant, const char *name_or_id,
                    int (*out)(void *ctx, const void *buf, size_t len), void *ctx,
                    struct husk_err *err) {
  struct state_template t;
  if (state_template_get(ts->state, tenant, name_or_id, true, &t, err) < 0)
    return -1;
  struct ex x = {.out = out, .ctx = ctx, .err = err, .mtime = t.created_ms / 1000};
  json_t *layers = json_loads(t.layers_json, 0, NULL);
  json_t *descs = json_array();
  size_t n = json_array_size(layers);
  int fds[IMAGE_MAX_LAYERS];
  size_t nfds = 0;
  int rc = -1;
  char *manifest = NULL, *index = NULL;
  if (!json_is_array(layers) || !descs || n > IMAGE_MAX_LAYERS) {
    husk_fail(err, EUCLEAN, "template %s: its layer list is damaged", t.id);
    goto out;
  }
  /* Every blob opened first: a missing one fails before anything is sent. */
  for (size_t i = 0; i < n; i++) {
    json_t *l = json_array_get(layers, i);
    const char *d = json_string_value(json_object_get(l, "digest"));
    if (!digest_ok(d)) {
      husk_fail(err, EUCLEAN, "template %s: its layer list is damaged", t.id);
      goto out;
    }
    int fd = openat(ts->blobs, d + HEX_OFF, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
      husk_error(err, errno, "template %s: its layer blob %s is not in the store", t.name, d);
      close_quiet(fd);
      goto out;
    }
    fds[nfds++] = fd;
    json_array_append_new(descs, json_pack("{s:s, s:s, s:I}", "mediaType", layer_type(fd), "digest",
                                           d, "size", (json_int_t)st.st_size));
  }
  char config_digest[LAYER_DIGEST_SIZE];
  digest_of(t.config_json, strlen(t.config_json), config_digest);
  json_t *m = json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:O}", "schemaVersion", 2, "mediaType",
                        "application/vnd.oci.image.manifest.v1+json", "config", "mediaType",
                        "application/vnd.oci.image.config.v1+json", "digest", config_digest, "size",
                        (json_int_t)strlen(t.config_json), "layers", descs);
  manifest = m ? json_dumps(m, JSON_COMPACT) : NULL;
  json_decref(m);
  if (!manifest) {
    husk_error(err, ENOMEM, "export");
    goto out;
  }
  char manifest_digest[LAYER_DIGEST_SIZE];
  digest_of(manifest, strlen(manifest), manifest_digest);
  struct utsname u;
  json_t *ix = json_pack("{s:i, s:[{s:s, s:s, s:I, s:{s:s}, s:{s:s, s:s}}]}", "schemaVersion", 2,
                         "manifests", "mediaType", "application/vnd.oci.image.manifest.v1+json",
                         "digest", manifest_digest, "size", (json_int_t)strlen(manifest),
                         "annotations", "org.opencontainers.image.ref.name", t.name, "platform",
                         "os", "linux", "architecture",
                         uname(&u) == 0 && !strcmp(u.machine, "aarch64") ? "arm64" : "amd64");
  index = ix ? json_dumps(ix, JSON_COMPACT) : NULL;
  json_decref(ix);
  if (!index || !(x.a = archive_write_new())) {
    husk_error(err, ENOMEM, "export");
    goto out;
  }
  archive_write_set_format_pax_restricted(x.a);
  archive_write_set_bytes_in_last_block(x.a, 1);
  if (archive_write_open(x.a, &x, NULL, ex_write, NULL) != ARCHIVE_OK) {
    ex_fail(&x, "start");
    goto out;
  }
  static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
  if (put_bytes(&x, "oci-layout", layout, strlen(layout)) < 0 ||
      put_bytes(&x, "index.json", index, strlen(index)) < 0)
    goto out;
  char name[96];
  snprintf(name, sizeof name, "blobs/sha256/%s", manifest_digest + HEX_OFF);
  if (put_bytes(&x, name, manifest, strlen(manifest)) < 0)
    goto out;
  snprintf(name, sizeof name, "blobs/sha256/%s", config_digest + HEX_OFF);
  if (put_bytes(&x, name, t.config_json, strlen(t.config_json)) < 0)
    goto out;
  for (size_t i = 0; i < nfds; i++) {
    json_t *d = json_array_get(descs, i);
    const char *dg = json_string_value(json_object_get(d, "digest"));
    if (put_blob(&x, fds[i], dg + HEX_OFF,
                 (uint64_t)json_integer_value(json_object_get(d, "size"))) < 0)
      goto out;
  }
  if (archive_write_close(x.a) != ARCHIVE_OK) {
    ex_fail(&x, "end");
    goto out;
  }
  rc = 0;
out:
  if (x.a)
    archive_write_free(x.a);
  for (size_t i = 0; i < nfds; i++)
    close(fds[i]);
  free(manifest);
  free(index);
  json_decref(descs);
  json_decref(layers);
  state_template_free(&t);
  return rc;
}
