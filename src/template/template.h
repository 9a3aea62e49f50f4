/* Templates: the software a box runs.
 *
 * `default` is the host's /usr, as every box had before templates.  Any
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
  uint64_t data_reserve;      /* bytes of the data disk no import may use */
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

/* Remove what no template names: layers and blobs (skipping any a box
 * holds).  Returns how many were removed. */
int template_collect(struct template_store *ts, struct husk_err *err);

#endif
