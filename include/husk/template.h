/* husk: templates, the software a box runs.
 *
 * `default` is the host's /usr, read-only.  Any other template is an image
 * kept by the manager's data directory: imported from an OCI or Docker
 * archive (docker save, podman save, an oci-archive; plain, gzip or zstd)
 * or an OCI image layout directory.  A box of it (husk_box_spec.template_name)
 * runs the image's programs as its user, with its Env, in its WorkingDir,
 * on its layers (shared read-only by every box of the template) under a
 * writable layer of the box's own.
 *
 * A template belongs to a tenant, or (tenant "") is shared: every tenant
 * sees it.  A tenant sees its own templates and the shared ones, its own
 * first when names meet; never another tenant's.
 *
 * Layers are untrusted input: every entry is created relative to the
 * layer's own directory, `..`, absolute names, entries below a symlink,
 * hardlinks out of the layer, device nodes, setuid bits and extended
 * attributes are refused or dropped, and every digest is checked.  An
 * import that fails (or whose process dies) leaves nothing: no template,
 * no layer. */
#ifndef HUSK_TEMPLATE_H
#define HUSK_TEMPLATE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "husk/base.h"

struct husk_mgr;

#define HUSK_TEMPLATE_ID_MAX 32
#define HUSK_TEMPLATE_NAME_MAX 64 /* size of a name buffer, NUL included */

struct husk_template_info {
  char id[HUSK_TEMPLATE_ID_MAX];     /* "tpl_" + 24 hex digits */
  char name[HUSK_TEMPLATE_NAME_MAX]; /* 1..63 of [a-z0-9._-], not "default" */
  char tenant_id[32];                /* "": shared */
  char source[16];                   /* "oci", "build", "debian" */
  char digest[80];                   /* of the image config: "sha256:..." */
  uint64_t size;                     /* bytes of its unpacked layers */
  int64_t created_ms;                /* Unix time in ms */
};

/* Import the image archive read through in(ctx, buf, cap) (returns bytes
 * read, 0 at the end, -1 with errno) as template `name` of `tenant` (""
 * for a shared one).  *out (may be NULL) describes it.
 * Errors: EINVAL (a bad name, not an image, a forged digest, a hostile
 * layer: the message names the entry; or a manager that keeps no
 * templates), EEXIST (the name is taken), EFBIG (past a size limit),
 * EDQUOT (the tenant's template storage), ENOSPC (the data disk's
 * reserve), others (I/O). */
HUSK_PUBLIC int husk_template_import(struct husk_mgr *m, const char *tenant, const char *name,
                                     ssize_t (*in)(void *ctx, void *buf, size_t cap),
                                     void *ctx, struct husk_template_info *out,
                                     struct husk_err *err);

/* The same from an OCI image layout directory (index.json, blobs/) of the
 * host.  Errors: those of husk_template_import, and ENOENT / ENOTDIR /
 * EACCES (`dir` cannot be opened as a directory). */
HUSK_PUBLIC int husk_template_import_dir(struct husk_mgr *m, const char *tenant,
                                         const char *name, const char *dir,
                                         struct husk_template_info *out, struct husk_err *err);

/* The template `name_or_id` as `tenant` sees it (its own, else a shared
 * one).  Errors: ENOENT. */
HUSK_PUBLIC int husk_template_get(struct husk_mgr *m, const char *tenant, const char *name_or_id,
                                  struct husk_template_info *out, struct husk_err *err);

/* Every template `tenant` sees, its own first, each group by name (tenant
 * NULL: every template of every tenant, shared ones first): cb(ctx, t) for
 * each, `t` valid during the call only.  As husk_box_list: cb returns 0 to
 * go on, > 0 to stop (the listing returns 0), < 0 to fail (the listing
 * returns that value; err is not filled).  `default` is not listed: it is
 * not a stored template.
 * Errors: EINVAL (`tenant` is not a tenant id), others (the state). */
HUSK_PUBLIC int husk_template_list(struct husk_mgr *m, const char *tenant,
                                   int (*cb)(void *ctx, const struct husk_template_info *t),
                                   void *ctx, struct husk_err *err);

/* Delete the owner's template; its layers go once no template has them.
 * Errors: ENOENT (none of `tenant`'s own: a shared one is deleted with
 * tenant ""), EBUSY (a live box or a warm pool uses it). */
HUSK_PUBLIC int husk_template_delete(struct husk_mgr *m, const char *tenant,
                                     const char *name_or_id, struct husk_err *err);

/* Write the template as an OCI image archive through out(ctx, buf, len)
 * (returns 0, or -1 with errno to stop): its config and layer blobs byte
 * for byte as imported.  Errors: ENOENT, others. */
HUSK_PUBLIC int husk_template_export(struct husk_mgr *m, const char *tenant,
                                     const char *name_or_id,
                                     int (*out)(void *ctx, const void *buf, size_t len),
                                     void *ctx, struct husk_err *err);

/* ---- builds ---- */

#include "husk/run.h" /* struct husk_limits */

/* A Dockerfile build (docs/templates.md, Builds): FROM a template `tenant`
 * sees, each RUN step in a husk box of the image so far, COPY and ADD from
 * the context directory; steps are cached by their content. */
struct husk_build_req {
  const char *dockerfile;       /* its text (dockerfile_len bytes), or NULL: the file
                                   dockerfile_path of the context */
  size_t dockerfile_len;
  const char *dockerfile_path;  /* beneath context_dir; NULL: "Dockerfile" */
  const char *context_dir;      /* COPY and ADD sources, resolved beneath it; NULL: none */
  char *const *build_args;      /* "NAME=VALUE" for ARG, NULL-terminated, or NULL */
  const char *const *egress_hosts; /* hosts ("*.suffix" patterns too) RUN steps reach on
                                      ports 80 and 443 through husk's proxy,
                                      NULL-terminated; NULL: no network */
  struct husk_limits limits;    /* of each step's box; timeout_ms: each RUN's (0: 30 min) */
  bool no_cache;                /* run every step */
  /* The build's output as it comes: step headers and each step's own
   * output.  May be NULL. */
  void (*log)(void *ctx, const char *buf, size_t len);
  void *log_ctx;
  int cancel_fd;                /* readable: stop, keep nothing; -1: none */
};

/* Build template `name` of `tenant` ("" : a shared one, whose steps run
 * as boxes of the tenant "husk-builds", made if missing) from req; the
 * steps' boxes are `tenant`'s otherwise, counted in its quotas.  *out
 * (may be NULL) describes the template.  A failed or cancelled build
 * leaves no template and no step box.
 * Errors: EINVAL (the Dockerfile: the message names the line; a failed
 * step: its number, exit code and output; a bad egress host; a COPY out of
 * the context), EEXIST (the name is taken), ENOENT (no FROM template),
 * ECANCELED (cancel_fd), others as husk_box_create and
 * husk_template_import. */
HUSK_PUBLIC int husk_template_build(struct husk_mgr *m, const char *tenant, const char *name,
                                    const struct husk_build_req *req,
                                    struct husk_template_info *out, struct husk_err *err);

#endif
