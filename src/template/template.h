/* Templates: the software a box runs.
 *
 * `default` is the host's /usr, read-only, what a box gets unless told.  Any
 * other template is an image (imported from an OCI or Docker archive, or
 * built) whose layers are unpacked once into a content-addressed store
 * under DATA/templates and stacked read-only by an overlay mount under
 * each box of it (src/jail/rootfs.c):
 *
 *   DATA/templates/
 *     layers/<diff_id hex>/root    a layer's tree, named by the sha256 of
 *                                  its tar: shared by every template that
 *                                  has it, stored once
 *     layers/<diff_id hex>/lock    held shared (flock) while a box uses it
 *     blobs/sha256/<hex>           the blobs as imported (export gives
 *                                  them back byte for byte)
 *     tmp/                         imports in progress
 *     gc.lock                      imports hold it shared, the collector
 *                                  exclusive
 *
 * Crash safety: an import unpacks into tmp/, renames each finished layer
 * into layers/ (atomic), and records the template's row last; a crash
 * leaves tmp/ (removed at open) and maybe layers no row names (collected
 * at open and after each delete).  A reply that says "imported" is only
 * sent once the row is committed. */
#ifndef HUSK_TEMPLATE_TEMPLATE_H
#define HUSK_TEMPLATE_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "state/template_state.h"
#include "template/image.h"
#include "template/layer.h"
#include "util/error.h"

struct state;
struct template_store;

#define TEMPLATE_DEFAULT "default"

struct template_store_config {
  const char *data_dir;
  struct state *state;
  uint64_t max_image_bytes;   /* an archive, and a layer unpacked; 0: 16 GiB */
  uint64_t max_layer_entries; /* 0: 2,000,000 */
  uint64_t tenant_quota;      /* bytes of unpacked layers per tenant; 0: none */
  const char *data_reserve;   /* of the data disk no import may use (util/disk_reserve.h:
                                 "SIZE", "N%"; NULL: the default) */
  void (*log)(void *ctx, const char *line);
  void *log_ctx;
};

int template_store_open(struct template_store **out, const struct template_store_config *cfg,
                        struct husk_err *err);
void template_store_close(struct template_store *ts);

/* A name a template may have: 1..63 of [a-z0-9._-], starting with a letter
 * or digit, not "default". */
bool template_name_ok(const char *name);

/* Import an image archive read through in(ctx, buf, cap) (0 at its end,
 * -1 with errno) as template `name` of `tenant` ("": shared).  *out (may be
 * NULL) receives the row.  Errors: EINVAL (bad name, not an image, a
 * hostile or damaged layer: the message says which entry), EEXIST (the
 * name is taken), EFBIG (over a limit), EDQUOT (the tenant's template
 * storage), ENOSPC (the data disk's reserve), others. */
int template_import_archive(struct template_store *ts, const char *tenant, const char *name,
                            ssize_t (*in)(void *ctx, void *buf, size_t cap), void *ctx,
                            struct state_template *out, struct husk_err *err);

/* The same from an OCI image layout directory of the host. */
int template_import_layout(struct template_store *ts, const char *tenant, const char *name,
                           const char *dir, struct state_template *out, struct husk_err *err);

/* A template from a Debian root: debootstrap (minbase) of `suite` from
 * `mirror` (NULL: the host's apt mirror) with `packages`, its output to
 * log_fd (-1: none).  For the operator only: debootstrap runs as the
 * host's root.  Errors: EINVAL (a bad suite or package name), EIO
 * (debootstrap failed: its log says why), as an import otherwise. */
struct template_debian {
  const char *suite;
  const char *const *packages; /* NULL-terminated, or NULL */
  const char *mirror;
  int log_fd;
};
int template_create_debian(struct template_store *ts, const char *tenant, const char *name,
                           const struct template_debian *d, struct state_template *out,
                           struct husk_err *err);

/* Write template `name_or_id` (as `tenant` sees it) as an OCI image
 * archive through out(ctx, buf, len) (0, or -1 with errno to stop): the
 * config and layer blobs as imported, a manifest and index made for them.
 * Errors: ENOENT, EUCLEAN (a blob missing from the store), others. */
int template_export(struct template_store *ts, const char *tenant, const char *name_or_id,
                    int (*out)(void *ctx, const void *buf, size_t len), void *ctx,
                    struct husk_err *err);

/* An image assembled layer by layer (a Dockerfile build, box/build.c): it
 * starts from a template, gets layers made from directory trees (a step's
 * changes, files copied in) or taken from the build cache, and becomes a
 * template of its own when committed.  Until then it holds the store's
 * collection off and its work directory is under tmp/ (a crash leaves only
 * what the next open removes). */
struct template_asm;
int template_asm_begin(struct template_store *ts, const char *tenant, const char *name,
                       const struct state_template *base, struct template_asm **out,
                       struct husk_err *err);
/* A directory the assembly's trees can be made in (its work directory). */
int template_asm_workdir(struct template_asm *a);
/* The tree under tree_fd (host owners less id_base, the paths in `exclude`
 * left out) as a new top layer; its diff_id to diff_id_out. */
int template_asm_add_tree(struct template_asm *a, int tree_fd, uint32_t id_base,
                          const char *const *exclude, char diff_id_out[LAYER_DIGEST_SIZE],
                          struct husk_err *err);
/* A layer the store has (a cache hit) as the new top layer; ENOENT when it
 * is gone. */
int template_asm_add_layer(struct template_asm *a, const char *diff_id, struct husk_err *err);
/* The layers so far, top first, as ids (64 hex digits) into ids[], at most
 * IMAGE_MAX_LAYERS; returns how many. */
size_t template_asm_layers(const struct template_asm *a, const char *ids[IMAGE_MAX_LAYERS]);
/* Record the image with `config_json` (its rootfs.diff_ids are set here)
 * as the template; *out (may be NULL) gets the row. */
int template_asm_commit(struct template_asm *a, const char *config_json,
                        struct state_template *out, struct husk_err *err);
/* Ends it (whether committed or not): its work directory goes. */
void template_asm_end(struct template_asm *a);

/* A build context sent as a tar (plain, gzip or zstd) read from tar_fd
 * to its end: unpacked as a layer is (untrusted: beneath its directory,
 * no devices, no setuid, no extended attributes), at most max_bytes of
 * tar (0: TEMPLATE_CONTEXT_MAX), into a work directory of the store;
 * out->dir is its root.  template_context_end removes it (a crash leaves
 * it to the next open). */
#define TEMPLATE_CONTEXT_MAX (1ULL << 30)
struct template_context {
  struct template_store *ts;
  char name[40];
  int work, dir, gc;
};
int template_context_unpack(struct template_store *ts, int tar_fd, uint64_t max_bytes,
                            struct template_context *out, struct husk_err *err);
void template_context_end(struct template_context *c);

/* The build cache: the layer a step made, by the step's key (a digest of
 * everything the step's result depends on).  Layers it names are kept
 * until its entries go unused for TEMPLATE_CACHE_KEEP_MS (template_collect),
 * and count in the tenant's template storage meanwhile: put fails with
 * EDQUOT past the store's tenant_quota, ENOENT when the tenant is being
 * deleted (state_build_cache_put). */
#define TEMPLATE_CACHE_KEEP_MS (7LL * 24 * 3600 * 1000)
int template_cache_get(struct template_store *ts, const char *tenant, const char *key,
                       char diff_id[LAYER_DIGEST_SIZE], struct husk_err *err);
int template_cache_put(struct template_store *ts, const char *tenant, const char *key,
                       const char *diff_id, struct husk_err *err);

/* Delete the owner's template (by name or id); its layers go once no
 * template has them.  Errors: ENOENT, EBUSY (a live box uses it). */
int template_delete(struct template_store *ts, const char *tenant, const char *name_or_id,
                    struct husk_err *err);

/* What a box of a template is built from: the layers' directories, top
 * first, each opened O_PATH and held against collection (flock shared on
 * its lock) until template_layers_release. */
struct template_layers {
  size_t n;
  int dirs[IMAGE_MAX_LAYERS]; /* layers/<id>/root, O_PATH | O_DIRECTORY */
  int locks[IMAGE_MAX_LAYERS];
};
int template_layers_open(struct template_store *ts, const struct state_template *t,
                         struct template_layers *out, struct husk_err *err);
void template_layers_release(struct template_layers *l);

/* What a box of template `t` runs with, from its image config: the env its
 * commands start from, the working directory, the user (names looked up
 * in the image's /etc/passwd and /etc/group, through its layers `l`), and
 * the program a run without one starts (Entrypoint then Cmd). */
struct template_profile {
  char **env;    /* NAME=VALUE, NULL-terminated (never NULL) */
  char *workdir; /* "" when the image sets none */
  bool user_set; /* always: the image's user (its root when it names none) */
  uint32_t uid, gid;
  char **argv; /* NULL when the image has neither Entrypoint nor Cmd */
};
int template_profile(const struct state_template *t, const struct template_layers *l,
                     struct template_profile *out, struct husk_err *err);
void template_profile_free(struct template_profile *p);
/* A deep copy (-1: out of memory, *dst zeroed). */
int template_profile_copy(struct template_profile *dst, const struct template_profile *src);

/* A template as the fronts show it: id, name, source, size (unpacked
 * bytes), digest (of its config), created_at, shared (the operator's), and
 * with `full` its layers and image config.  NULL when out of memory. */
json_t *template_json(const struct state_template *t, bool full);

/* Remove what no template and no build cache entry names: layers and
 * blobs (skipping any a box holds).  Returns how many were removed; 0
 * when an import, build or context holds the store (the last of this
 * process to end then collects). */
int template_collect(struct template_store *ts, struct husk_err *err);

#endif
