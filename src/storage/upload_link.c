/* Upload links (see upload_link.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "box/box_store.h"
#include "storage/store_internal.h"
#include "storage/upload_link.h"
#include "util/cleanup.h"
#include "util/id.h"
#include "util/utf8.h"

static int token_hash(const char *token, unsigned char out[STATE_ULINK_HASH_SIZE],
                      struct husk_err *err) {
  unsigned len = 0;
  if (EVP_Digest(token, strlen(token), out, &len, EVP_sha256(), NULL) != 1 ||
      len != STATE_ULINK_HASH_SIZE)
    return husk_fail(err, ENOMEM, "SHA-256");
  return 0;
}

/* "type/subtype" or "type/" plus a star, lower-case: letters, digits and "+-.". */
static bool type_pattern_ok(const char *t, size_t n) {
  const char *slash = memchr(t, '/', n);
  if (!slash || slash == t || slash == t + n - 1)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = t[i];
    if (t + i == slash)
      continue;
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' ||
          (c == '*' && i == n - 1 && t + i == slash + 1)))
      return false;
  }
  return true;
}

/* The list as stored: lower-case, no blanks, comma-separated. */
static int normalize_types(const char *in, char *out, size_t size, struct husk_err *err) {
  out[0] = '\0';
  if (!in)
    return 0;
  size_t len = 0;
  int count = 0;
  const char *p = in;
  while (*p) {
    p += strspn(p, " \t,");
    if (!*p)
      break;
    size_t n = strcspn(p, " \t,");
    char item[128];
    if (n >= sizeof item)
      return husk_fail(err, EINVAL, "content type `%.40s...` is too long", p);
    for (size_t i = 0; i < n; i++)
      item[i] = (char)((p[i] >= 'A' && p[i] <= 'Z') ? p[i] - 'A' + 'a' : p[i]);
    item[n] = '\0';
    if (!type_pattern_ok(item, n))
      return husk_fail(err, EINVAL, "content type `%s` is not of the form type/subtype or type/*",
                       item);
    if (++count > UPLOAD_LINK_MAX_TYPES)
      return husk_fail(err, EINVAL, "at most %d content types", UPLOAD_LINK_MAX_TYPES);
    if (len + n + 2 > size)
      return husk_fail(err, EINVAL, "the content types are too long");
    if (len)
      out[len++] = ',';
    memcpy(out + len, item, n + 1);
    len += n;
    p += n;
  }
  return 0;
}

static bool prefix_ok(const char *p) {
  size_t n = strlen(p);
  if (n == 0 || n > STATE_ULINK_PREFIX_MAX - 1 || p[0] == '/' || !utf8_valid(p, n))
    return false;
  for (const unsigned char *c = (const unsigned char *)p; *c; c++)
    if (*c < 0x20 || *c == 0x7f || *c == '\\')
      return false;
  /* No "." or ".." segment: the keys become paths when loaded. */
  for (const char *seg = p; *seg;) {
    size_t sl = strcspn(seg, "/");
    if ((sl == 1 && seg[0] == '.') || (sl == 2 && seg[0] == '.' && seg[1] == '.') ||
        (sl == 0 && seg != p))
      return false;
    seg += sl;
    if (*seg == '/')
      seg++;
  }
  return true;
}

int upload_link_create(struct store *s, const char *tenant_id, const struct upload_link_spec *spec,
                       const char *base, struct state_upload_link *out, char **url,
                       struct husk_err *err) {
  *url = NULL;
  if (!base || !base[0])
    return husk_fail(err, EOPNOTSUPP,
                     "upload links are served by `husk serve`'s HTTP listener, which this server "
                     "does not have");
  if (s->remote)
    return husk_fail(err, EOPNOTSUPP,
                     "upload links need the embedded store: this server keeps objects in an "
                     "external one");
  struct state_upload_link l;
  memset(&l, 0, sizeof l);
  snprintf(l.tenant_id, sizeof l.tenant_id, "%s", tenant_id);
  if (spec->created_by && spec->created_by[0]) {
    if (strnlen(spec->created_by, sizeof l.created_by) == sizeof l.created_by ||
        state_check_created_by(spec->created_by, false, err) < 0)
      return husk_fail(err, EINVAL, "the link's creator is not a user id or key: and a key id");
    memcpy(l.created_by, spec->created_by, strlen(spec->created_by) + 1);
  }
  const char *bucket = spec->bucket ? spec->bucket : UPLOAD_LINK_BUCKET;
  if (strlen(bucket) >= sizeof l.bucket || !store_bucket_name_ok(bucket) ||
      store_bucket_reserved(bucket))
    return husk_fail(err, EINVAL, "`%.70s` is not a bucket name", bucket);
  snprintf(l.bucket, sizeof l.bucket, "%s", bucket);
  int64_t exp = spec->expires_s ? spec->expires_s : UPLOAD_LINK_DEFAULT_S;
  if (exp < 1 || exp > UPLOAD_LINK_MAX_S)
    return husk_fail(err, EINVAL, "expires_in_seconds must be 1..%d", UPLOAD_LINK_MAX_S);
  l.max_files = spec->max_files ? spec->max_files : UPLOAD_LINK_DEFAULT_FILES;
  if (l.max_files < 1 || l.max_files > UPLOAD_LINK_MAX_FILES)
    return husk_fail(err, EINVAL, "max_files must be 1..%d", UPLOAD_LINK_MAX_FILES);
  uint64_t mb = spec->max_file_bytes ? spec->max_file_bytes : UPLOAD_LINK_DEFAULT_BYTES;
  if (mb > UPLOAD_LINK_MAX_BYTES)
    return husk_fail(err, EINVAL, "max_file_bytes must be at most %llu",
                     (unsigned long long)UPLOAD_LINK_MAX_BYTES);
  if (s->quota && mb > s->quota)
    mb = s->quota; /* no file may pass the tenant's whole quota anyway */
  l.max_file_bytes = (int64_t)mb;
  if (normalize_types(spec->content_types, l.content_types, sizeof l.content_types, err) < 0)
    return -1;
  if (spec->prefix) {
    size_t n = strlen(spec->prefix);
    if (!prefix_ok(spec->prefix))
      return husk_fail(err, EINVAL,
                       "prefix must be 1..%d bytes of UTF-8 without control characters, a "
                       "leading '/', empty, '.' or '..' parts",
                       STATE_ULINK_PREFIX_MAX - 1);
    snprintf(l.prefix, sizeof l.prefix, "%s%s", spec->prefix,
             spec->prefix[n - 1] == '/' ? "" : "/");
  } else {
    char rnd[40];
    if (id_new(NULL, 8, rnd, sizeof rnd, err) < 0)
      return -1;
    snprintf(l.prefix, sizeof l.prefix, "uploads/%s/", rnd);
  }
  /* The bucket: the default one is made on first use, like the MCP
   * tools'; another must be the tenant's already. */
  if (!spec->bucket) {
    if (store_bucket_create(s, tenant_id, bucket, err) < 0 && err->code != STORE_EOWNED)
      return -1;
  } else if (store_bucket_exists(s, tenant_id, bucket, err) < 0) {
    return -1;
  }
  char token[UPLOAD_LINK_TOKEN_SIZE];
  if (id_new("ul_", 16, l.id, sizeof l.id, err) < 0 ||
      id_new("hu_", 16, token, sizeof token, err) < 0 || token_hash(token, l.token_hash, err) < 0)
    return -1;
  l.created_ms = state_now_ms();
  l.expires_ms = l.created_ms + exp * 1000;
  if (state_upload_link_insert(s->st, &l, UPLOAD_LINK_LIVE_MAX, err) < 0) {
    explicit_bzero(token, sizeof token);
    return -1;
  }
  size_t bl = strlen(base);
  while (bl && base[bl - 1] == '/')
    bl--;
  int rc = asprintf(url, "%.*s/u/%s", (int)bl, base, token);
  explicit_bzero(token, sizeof token);
  if (rc < 0) {
    *url = NULL;
    return husk_fail(err, ENOMEM, "upload link URL");
  }
  *out = l;
  return 0;
}

/* Whether the link takes files at `now` (the errors of resolve). */
static int usable(const struct state_upload_link *l, int64_t now, struct husk_err *err) {
  if (l->revoked_ms)
    return husk_fail(err, EKEYREVOKED, "this upload link was revoked");
  if (l->expires_ms <= now)
    return husk_fail(err, EKEYEXPIRED, "this upload link has expired");
  if (l->files_used >= l->max_files)
    return husk_fail(err, EMLINK, "this upload link has already been used");
  return 0;
}

int upload_link_resolve(struct store *s, const char *token, struct state_upload_link *out,
                        struct husk_err *err) {
  size_t n = strlen(token);
  if (n != UPLOAD_LINK_TOKEN_SIZE - 1 || strncmp(token, "hu_", 3) != 0 ||
      strspn(token + 3, "0123456789abcdef") != n - 3)
    return husk_fail(err, ENOENT, "no such upload link");
  unsigned char h[STATE_ULINK_HASH_SIZE];
  if (token_hash(token, h, err) < 0)
    return -1;
  if (state_upload_link_by_token(s->st, h, out, err) < 0)
    return -1;
  return usable(out, state_now_ms(), err);
}

/* Whether `type` matches one pattern of the link's list. */
static bool type_listed(const char *list, const char *type) {
  size_t tl = strcspn(type, "; \t");
  for (const char *p = list; *p;) {
    size_t n = strcspn(p, ",");
    if (n >= 2 && p[n - 1] == '*' && p[n - 2] == '/') {
      if (tl > n - 1 && strncasecmp(type, p, n - 1) == 0)
        return true;
    } else if (n == tl && strncasecmp(type, p, n) == 0) {
      return true;
    }
    p += n;
    if (*p == ',')
      p++;
  }
  return false;
}

bool upload_link_type_ok(const struct state_upload_link *l, const char *name,
                         const char *declared) {
  if (!l->content_types[0])
    return true;
  const char *guessed = box_store_guess_type(name);
  return type_listed(l->content_types,
                     declared && declared[0] ? declared : "application/octet-stream") &&
         type_listed(l->content_types, guessed);
}

/* The code point of a valid UTF-8 sequence of `n` (2-4) bytes. */
static uint32_t code_point(const unsigned char *p, size_t n) {
  if (n == 2)
    return (uint32_t)(p[0] & 0x1f) << 6 | (p[1] & 0x3f);
  if (n == 3)
    return (uint32_t)(p[0] & 0x0f) << 12 | (uint32_t)(p[1] & 0x3f) << 6 | (p[2] & 0x3f);
  return (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3f) << 12 |
         (uint32_t)(p[2] & 0x3f) << 6 | (p[3] & 0x3f);
}

/* C1 controls and the format characters that change how a name reads
 * without showing (bidi overrides and isolates, zero-width ones, tags):
 * "evil\u202Egnp.exe" must not read as "evilexe.png". */
static bool invisible(uint32_t c) {
  return (c >= 0x80 && c <= 0x9f) || c == 0xad || c == 0x61c || (c >= 0x200b && c <= 0x200f) ||
         (c >= 0x2028 && c <= 0x202e) || (c >= 0x2060 && c <= 0x206f) || c == 0xfeff ||
         (c >= 0xfff9 && c <= 0xfffb) || (c >= 0xe0000 && c <= 0xe007f);
}

char *upload_link_safe_name(const char *name) {
  const char *b = name ? name : "";
  /* The last component by either separator a browser might send. */
  for (const char *p = b; *p; p++)
    if (*p == '/' || *p == '\\')
      b = p + 1;
  size_t n = strlen(b);
  char *out = malloc(UPLOAD_LINK_NAME_MAX + 16);
  if (!out)
    return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n && o < UPLOAD_LINK_NAME_MAX;) {
    unsigned char c = (unsigned char)b[i];
    if (c < 0x80) {
      out[o++] = (c < 0x20 || c == 0x7f || c == ':' || c == '*' || c == '?' || c == '"' ||
                  c == '<' || c == '>' || c == '|')
                     ? '_'
                     : (char)c;
      i++;
      continue;
    }
    size_t sl = utf8_seq_len((const unsigned char *)b + i, n - i);
    if (sl == 0) { /* not UTF-8 */
      out[o++] = '_';
      i++;
      continue;
    }
    if (o + sl > UPLOAD_LINK_NAME_MAX)
      break;
    if (invisible(code_point((const unsigned char *)b + i, sl))) {
      out[o++] = '_';
    } else {
      memcpy(out + o, b + i, sl);
      o += sl;
    }
    i += sl;
  }
  out[o] = '\0';
  /* Leading dots would make "." / ".." or a hidden file. */
  size_t lead = strspn(out, ". ");
  if (lead)
    memmove(out, out + lead, o - lead + 1);
  if (!out[0])
    snprintf(out, UPLOAD_LINK_NAME_MAX + 16, "file");
  return out;
}

struct upload_link_file {
  struct store *s;
  struct state_upload_link l;
  char *name;
  struct store_writer *w;
  uint64_t room; /* the quota's */
  bool claimed;
};

static void release(struct upload_link_file *f) {
  if (!f->claimed)
    return;
  f->claimed = false;
  struct husk_err e;
  if (state_upload_link_release(f->s->st, f->l.id, &e) < 0)
    store_log(f->s, "upload link %s: cannot give a slot back: %s", f->l.id, e.msg);
}

void upload_link_file_abort(struct upload_link_file *f) {
  if (!f)
    return;
  if (f->w)
    store_writer_abort(f->w);
  release(f);
  free(f->name);
  free(f);
}

int upload_link_file_open(struct store *s, const struct state_upload_link *l, const char *name,
                          struct upload_link_file **out, struct husk_err *err) {
  struct upload_link_file *f = calloc(1, sizeof *f);
  if (!f)
    return husk_fail(err, ENOMEM, "upload");
  f->s = s;
  f->l = *l;
  if (!(f->name = upload_link_safe_name(name))) {
    free(f);
    return husk_fail(err, ENOMEM, "upload");
  }
  if (state_upload_link_claim(s->st, l->id, state_now_ms(), err) < 0) {
    upload_link_file_abort(f);
    return -1;
  }
  f->claimed = true;
  if (store_quota_room(s, l->tenant_id, NULL, NULL, &f->room, err) < 0 ||
      store_writer_open(s, CK_NONE, false, (uint64_t)l->max_file_bytes, &f->w, err) < 0) {
    upload_link_file_abort(f);
    return -1;
  }
  *out = f;
  return 0;
}

int upload_link_file_write(struct upload_link_file *f, const void *buf, size_t n,
                           struct husk_err *err) {
  uint64_t have = store_writer_size(f->w);
  if (have + n > (uint64_t)f->l.max_file_bytes)
    return husk_fail(err, EFBIG, "a file may have at most %lld bytes through this link",
                     (long long)f->l.max_file_bytes);
  if (have + n > f->room)
    return husk_fail(err, STORE_EQUOTA, "the storage quota would be exceeded");
  return store_writer_write(f->w, buf, n, err);
}

uint64_t upload_link_file_size(const struct upload_link_file *f) { return store_writer_size(f->w); }

/* prefix + name, or with "-N" before the extension for N >= 1. */
/* The lock that orders the key picks under a link's tenant, bucket and
 * prefix: one of a fixed set, by an FNV-1a hash of the three. */
#define PICK_LOCKS 64
static pthread_mutex_t pick_locks[PICK_LOCKS] = {[0 ... PICK_LOCKS - 1] = PTHREAD_MUTEX_INITIALIZER};

static pthread_mutex_t *pick_lock_for(const struct state_upload_link *l) {
  uint32_t h = 2166136261u;
  const char *parts[] = {l->tenant_id, l->bucket, l->prefix};
  for (size_t i = 0; i < 3; i++) {
    for (const char *c = parts[i] ? parts[i] : ""; *c; c++)
      h = (h ^ (unsigned char)*c) * 16777619u;
    h = (h ^ 0xffu) * 16777619u; /* a separator no name holds */
  }
  return &pick_locks[h % PICK_LOCKS];
}

static char *key_for(const char *prefix, const char *name, int n) {
  char *k = NULL;
  if (n == 0)
    return asprintf(&k, "%s%s", prefix, name) < 0 ? NULL : k;
  const char *dot = strrchr(name, '.');
  if (!dot || dot == name)
    dot = name + strlen(name);
  return asprintf(&k, "%s%.*s-%d%s", prefix, (int)(dot - name), name, n, dot) < 0 ? NULL : k;
}

int upload_link_file_commit(struct upload_link_file *f, char **key, uint64_t *size,
                            struct husk_err *err) {
  *key = NULL;
  char etag[STORE_ETAG_SIZE];
  struct store_expect e = {.length = -1};
  if (store_writer_finish(f->w, &e, etag, NULL, err) < 0) {
    upload_link_file_abort(f);
    return -1;
  }
  /* A name already under the prefix is kept: this file gets a suffix.
   * Choosing the key and committing it are one step for the uploads under
   * one prefix, so two uploads of one name cannot both take the same free
   * key (the commit replaces what is there); other prefixes, and so other
   * tenants, take other locks. */
  pthread_mutex_t *pick_lock = pick_lock_for(&f->l);
  pthread_mutex_lock(pick_lock);
  char *k = NULL;
  bool free_key = false;
  for (int i = 0; i < UPLOAD_LINK_SUFFIX_MAX && !free_key; i++) {
    free(k);
    if (!(k = key_for(f->l.prefix, f->name, i))) {
      pthread_mutex_unlock(pick_lock);
      upload_link_file_abort(f);
      return husk_fail(err, ENOMEM, "upload");
    }
    struct store_object o;
    struct husk_err e2;
    if (store_object_get(f->s, f->l.tenant_id, f->l.bucket, k, &o, NULL, &e2) == 0) {
      store_object_free(&o);
    } else if (e2.code == STORE_ENOKEY || e2.code == STORE_ENOBUCKET) {
      free_key = true;
    } else { /* the store cannot say (an external one unreachable) */
      pthread_mutex_unlock(pick_lock);
      free(k);
      upload_link_file_abort(f);
      *err = e2;
      return -1;
    }
  }
  if (!free_key) {
    pthread_mutex_unlock(pick_lock);
    free(k);
    upload_link_file_abort(f);
    return husk_fail(err, EEXIST, "%d files of this name are already under the prefix: rename it",
                     UPLOAD_LINK_SUFFIX_MAX);
  }
  *size = store_writer_size(f->w);
  struct store_writer *w = f->w;
  f->w = NULL;
  /* The person who uploads has no identity here: the file is written on
   * behalf of the link's creator (docs/oauth.md, Attribution). */
  int crc = store_put_commit(w, f->l.tenant_id, f->l.bucket, k, box_store_guess_type(f->name), NULL,
                             f->l.created_by, NULL, err);
  pthread_mutex_unlock(pick_lock);
  if (crc < 0) {
    free(k);
    upload_link_file_abort(f);
    return -1;
  }
  struct husk_err e3;
  if (state_upload_link_stored(f->s->st, f->l.id, (int64_t)*size, &e3) < 0)
    store_log(f->s, "upload link %s: cannot count its bytes: %s", f->l.id, e3.msg);
  f->claimed = false; /* the slot is the stored file's */
  upload_link_file_abort(f);
  *key = k;
  return 0;
}
