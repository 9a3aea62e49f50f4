/* An OCI or Docker image, read from what a user hands in: its manifest,
 * config and layer blobs.
 *
 * Three forms are read:
 *   - an OCI image layout (`oci-layout`, `index.json`, `blobs/sha256/...`),
 *     as a directory or as a tar of one (`oci-archive`, what `podman save
 *     --format oci-archive` and `docker save` of Docker 25 and later write);
 *   - a Docker archive (`manifest.json` naming a config and layer tars:
 *     `docker save`, `podman save`).
 * Everything in it is untrusted: every blob named by a digest is checked
 * against that digest, the config's diff_ids are what the layers must
 * unpack to (template.c checks), and every size and count is bounded.
 * An index with several images picks the one for this machine's
 * architecture on Linux. */
#ifndef HUSK_TEMPLATE_IMAGE_H
#define HUSK_TEMPLATE_IMAGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "template/layer.h"
#include "util/error.h"

#define IMAGE_MAX_LAYERS 127 /* lower layers of one overlay */

struct image_limits {
  uint64_t max_bytes;   /* the whole archive, and each blob */
  uint64_t max_entries; /* entries of the archive */
};

/* What the image config says a box of it runs as and with. */
struct image_config {
  char **env;        /* NAME=VALUE, NULL-terminated (never NULL) */
  char *workdir;     /* "" when unset */
  char *user;        /* "" when unset: "NAME", "UID", "UID:GID", "NAME:GROUP" */
  char **entrypoint; /* NULL-terminated, or NULL when unset */
  char **cmd;        /* NULL-terminated, or NULL when unset */
  char *labels_json; /* a JSON object of strings, "{}" at least */
  char *os, *arch;
};

struct image_layer {
  char digest[LAYER_DIGEST_SIZE];  /* of the blob as stored (maybe compressed) */
  char diff_id[LAYER_DIGEST_SIZE]; /* of its uncompressed tar, from the config */
  uint64_t size;                   /* blob bytes */
  char *blob;                      /* where the blob is (image_read_*'s directory), malloc'd */
};

struct image {
  char config_digest[LAYER_DIGEST_SIZE];
  char *config_json; /* the config blob as it was (kept for export) */
  struct image_config config;
  size_t nlayers;
  struct image_layer *layers; /* base first */
};

void image_free(struct image *im);

/* Read an image from a tar stream: in(ctx, buf, cap) returns bytes read,
 * 0 at the end, -1 with errno.  Every file of the archive that may be a
 * blob is written to a file of its own in `workdir` (a directory fd the
 * caller removes afterwards); the image's blobs are named in im->layers.
 * Errors: EINVAL (not an image, a blob that does not match its digest, a
 * config or manifest that does not parse: the message says which), EFBIG
 * (over a limit), others (I/O, space). */
int image_read_archive(ssize_t (*in)(void *ctx, void *buf, size_t cap), void *ctx, int workdir,
                       const struct image_limits *lim, struct image *im, struct husk_err *err);

/* Read an OCI image layout directory `dir` (its blobs stay where they are:
 * im->layers[i].blob are paths relative to dir_fd).  Symlinks in it are
 * never followed.  Errors as image_read_archive. */
int image_read_layout(int dir_fd, const struct image_limits *lim, struct image *im,
                      struct husk_err *err);

/* Parse an image config (JSON) into *out and the diff_ids it lists.  Used
 * by the readers and by builds, which write configs of their own. */
int image_config_parse(const char *json, size_t len, struct image_config *out, char ***diff_ids,
                       size_t *ndiff, struct husk_err *err);
void image_config_free(struct image_config *c);

#endif
