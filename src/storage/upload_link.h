/* Upload links: an expiring URL a person opens to drop files into a
 * tenant's store, under a key prefix, for an agent to load_file them.
 *
 * The token (128 random bits) is shown once, in the URL; the state keeps
 * its SHA-256 (state/upload_link_state.h).  A link bounds each file's
 * size, may restrict the content types (checked against both the type
 * the client declares and the one the file's name implies), and takes at
 * most max_files files in all: one by default (one-time use).  Each file
 * claims a slot before a byte is stored and gives it back if it fails.
 * Files stream to a temporary file (store_writer) and are published only
 * when complete, under the link's prefix and a sanitised name; they count
 * against the tenant's quota like any object.
 *
 * Nothing here formats HTTP: src/api/routes_upload.c is the front. */
#ifndef HUSK_STORAGE_UPLOAD_LINK_H
#define HUSK_STORAGE_UPLOAD_LINK_H

#include <stdbool.h>
#include <stdint.h>

#include "state/upload_link_state.h"
#include "storage/store.h"
#include "util/error.h"

/* The bucket of a link when none is given: the MCP tools' (mcp/storage.h),
 * created on first use. */
#define UPLOAD_LINK_BUCKET "husk-mcp"
#define UPLOAD_LINK_DEFAULT_S 3600
#define UPLOAD_LINK_MAX_S 604800
#define UPLOAD_LINK_DEFAULT_FILES 1
#define UPLOAD_LINK_MAX_FILES 100
#define UPLOAD_LINK_DEFAULT_BYTES (100ULL << 20)
#define UPLOAD_LINK_MAX_BYTES STORE_PUT_MAX
#define UPLOAD_LINK_MAX_TYPES 16
#define UPLOAD_LINK_LIVE_MAX 100 /* links in force per tenant */
#define UPLOAD_LINK_NAME_MAX 200 /* bytes of a stored file's name */
#define UPLOAD_LINK_SUFFIX_MAX 1000 /* files of one name under a prefix: name, name-1 ... */
/* "hu_" + 32 hex digits + NUL */
#define UPLOAD_LINK_TOKEN_SIZE 36

struct upload_link_spec {
  const char *bucket;        /* NULL: UPLOAD_LINK_BUCKET */
  const char *prefix;        /* NULL: "uploads/<random>/"; '/' appended if missing */
  int64_t expires_s;         /* 0: the default; 1..UPLOAD_LINK_MAX_S */
  int64_t max_files;         /* 0: the default; 1..UPLOAD_LINK_MAX_FILES */
  uint64_t max_file_bytes;   /* 0: the default; at most UPLOAD_LINK_MAX_BYTES */
  const char *content_types; /* NULL or "": any; e.g. "image/png,application/pdf" */
  const char *created_by;    /* NULL or "": nobody; else a creator (state.h) */
};

/* A new link of the tenant's.  `base` is the public base of the HTTP
 * listener ("scheme://host[:port]"); *url (malloc'd) is base/u/<token>,
 * shown once.  EINVAL for a bad spec, STORE_ENOBUCKET for a given bucket
 * the tenant lacks, EDQUOT past UPLOAD_LINK_LIVE_MAX links in force. */
int upload_link_create(struct store *s, const char *tenant_id, const struct upload_link_spec *spec,
                       const char *base, struct state_upload_link *out, char **url,
                       struct husk_err *err);
/* The link a token names, and whether it takes files now: ENOENT (no
 * such token, or not a token's shape), EKEYREVOKED, EKEYEXPIRED, EMLINK
 * (used up).  `out` is filled whenever the token names a link. */
int upload_link_resolve(struct store *s, const char *token, struct state_upload_link *out,
                        struct husk_err *err);
/* Whether a file called `name`, declared as `declared` (may be NULL), is
 * of a type the link takes. */
bool upload_link_type_ok(const struct state_upload_link *l, const char *name, const char *declared);
/* A safe base name for a file the client named `name`: its last path
 * component, without control characters, at most UPLOAD_LINK_NAME_MAX
 * bytes of valid UTF-8; never "", "." or "..".  Malloc'd. */
char *upload_link_safe_name(const char *name);

/* One file arriving through a link. */
struct upload_link_file;
/* Claim a slot of the link (the errors of upload_link_resolve) and open
 * a temporary file for the data. */
int upload_link_file_open(struct store *s, const struct state_upload_link *l, const char *name,
                          struct upload_link_file **out, struct husk_err *err);
/* More data: EFBIG past the link's max_file_bytes, STORE_EQUOTA past the
 * tenant's quota. */
int upload_link_file_write(struct upload_link_file *f, const void *buf, size_t n,
                           struct husk_err *err);
uint64_t upload_link_file_size(const struct upload_link_file *f);
/* Publish the complete file under the link's prefix (a name already
 * there gets a "-N" suffix before its extension); its key to *key
 * (malloc'd), its size to *size.  Frees f, which on failure stores
 * nothing and gives its slot back. */
int upload_link_file_commit(struct upload_link_file *f, char **key, uint64_t *size,
                            struct husk_err *err);
/* Drop a file not committed: nothing stored, its slot given back. */
void upload_link_file_abort(struct upload_link_file *f);

#endif
