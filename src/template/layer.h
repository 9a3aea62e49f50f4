/* One layer of an image, unpacked into a directory that an overlay mount
 * stacks with the others (template.h).
 *
 * A layer is a tar stream (plain, gzip or zstd) from outside: every name,
 * type, owner and size in it is hostile until checked.  Extraction creates
 * every entry itself, relative to the layer's own directory fd, resolving
 * parents with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, so nothing in a layer
 * can write outside it or through a symlink it planted.  What a layer may
 * not hold is refused with an error naming the entry (the caller then
 * removes the directory: no layer is ever half there):
 *   - a name with a ".." component, an absolute name, a name too long;
 *   - an entry below a symlink of the same layer ("link -> /etc", then
 *     "link/passwd");
 *   - a hardlink to a name the layer does not hold (or to a directory);
 *   - more bytes or entries than the limits allow.
 * What is dropped, and counted: device nodes, FIFOs and sockets (no box
 * needs them from an image; /dev is made by husk), setuid and setgid bits,
 * every extended attribute (file capabilities, and above all
 * trusted.overlay.* which would let a layer forge overlay metadata).
 * Owners are kept (the box sees them through an idmapped mount); owners
 * beyond the box's 65536 ids become 65534 ("nobody").
 *
 * OCI whiteouts become overlay's: ".wh.NAME" a character device 0/0 named
 * NAME, ".wh..wh..opq" the attribute trusted.overlay.opaque=y on its
 * directory.  Other ".wh..wh." names (aufs bookkeeping) are skipped. */
#ifndef HUSK_TEMPLATE_LAYER_H
#define HUSK_TEMPLATE_LAYER_H

#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"

#define LAYER_DIGEST_SIZE 72 /* "sha256:" + 64 hex + NUL */

struct layer_limits {
  uint64_t max_bytes;   /* uncompressed tar stream */
  uint64_t max_entries; /* tar entries */
  /* The blob's own sha256 ("sha256:<hex>"), already verified, or NULL.
   * When the blob turns out to be uncompressed, that digest is its
   * diff_id and the stream is not hashed a second time. */
  const char *blob_digest;
  /* bzip2 and xz too (an ADD's archive), where libarchive has them built
   * in; layers are plain, gzip or zstd. */
  bool more_filters;
};

struct layer_result {
  char diff_id[LAYER_DIGEST_SIZE]; /* sha256 of the uncompressed stream */
  uint64_t tar_bytes;              /* its length */
  uint64_t entries;
  uint64_t file_bytes; /* logical size of the regular files written */
  unsigned dropped;    /* devices, FIFOs, sockets, aufs names */
};

/* Unpack the layer read from blob_fd (at its current offset; plain tar,
 * gzip or zstd, told apart by their magic numbers) into the empty
 * directory dest_fd.  Returns 0 with *out filled, or -1: err->code EINVAL
 * (the layer is damaged or holds what is refused: the message names the
 * entry), EFBIG (over a limit), others (I/O, space). */
/* Archive name -> relative path.  "./" components and trailing slashes
 * go; an absolute name, ".." anywhere, a component over NAME_MAX or a path
 * over `cap` is refused (returns -1). */
int layer_clean_name(const char *raw, char *out, size_t cap);

int layer_extract(int blob_fd, int dest_fd, const struct layer_limits *lim,
                  struct layer_result *out, struct husk_err *err);

/* Can this libarchive decompress the blob at blob_fd?  A zstd frame with
 * no zstd in it (have_zstd false) is ENOTSUP saying so, where libarchive
 * would only see a damaged tar; a blob whose start cannot be read in
 * place (a pipe) passes.  layer_extract checks it first. */
int layer_codec_check(int blob_fd, bool have_zstd, struct husk_err *err);

/* Is the file at fd (read from offset 0, left at offset 0) a tar archive,
 * plain or compressed with a filter of layer_limits' more_filters?  Told
 * by reading its first entry's header, as Docker's ADD tells. */
int layer_is_archive(int fd, bool *out, struct husk_err *err);

/* The other way: the tree under dirfd as an uncompressed layer tar,
 * written to out_fd (layer_write.c).  Host owners become the box's (the
 * host id less `id_base`; outside the box's 65536 ids, 65534); overlay
 * whiteouts and opaque directories become OCI's; devices, FIFOs and
 * sockets are left out (counted).  Symlinks are written, never followed.
 * `exclude` (NULL-terminated, or NULL): relative paths left out with what
 * is below them. */
struct layer_written {
  char diff_id[LAYER_DIGEST_SIZE]; /* sha256 of the tar written (also its blob digest) */
  uint64_t size;                   /* bytes written */
  uint64_t entries;
  unsigned skipped;
};
int layer_write_tree(int dirfd, uint32_t id_base, const char *const *exclude, int out_fd,
                     struct layer_written *res, struct husk_err *err);

#endif
