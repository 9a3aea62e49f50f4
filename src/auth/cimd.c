/* Client ID Metadata Documents (docs/oauth.md): a client whose client_id
 * is an https URL is described by the JSON document served there, which
 * husk fetches (auth/fetch.h: from the daemon, TLS verified, no
 * redirects, bounded, never to a denied address), checks and caches.
 *
 * What makes such a client safe to show a person is that the document
 * says where codes may go (redirect_uris, under registration's one rule)
 * and that its URL's host vouches for it: the URL is strict so the host
 * shown is the host fetched from (https, a DNS name -- not an IP literal
 * --, no userinfo, no fragment, no dot segments, a real path), and the
 * document must name itself (client_id equal to the URL byte for byte).
 * A document carries no secret: its clients are public (PKCE, `none`).
 *
 * The cache is in memory (a restart fetches again): by URL, for what the
 * reply's Cache-Control max-age says clamped to 5 minutes .. 24 hours (1
 * hour without one), at most AUTH_CIMD_MAX documents, the least recently
 * used going first.  Entries are packed strings, not struct auth_client
 * (4 KiB each), so a full cache is what the documents weigh. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth/auth_internal.h"
#include "auth/fetch.h"
#include "util/cleanup.h"
#include "util/cleanup_json.h"
#include "util/id.h"

#define CIMD_BUCKETS 16384 /* a power of two above AUTH_CIMD_MAX */
_Static_assert(AUTH_CIMD_FETCHING_MAX < AUTH_FETCH_CONCURRENCY,
               "documents leave fetch slots to the other sign-in fetches");

struct cimd_entry {
  struct cimd_entry *hash_next;
  struct cimd_entry *prev, *next; /* most recently used first */
  uint64_t hash;
  int64_t expires_ms;
  size_t n_redirects;
  /* url, host, name, then each redirect URI, each NUL-terminated. */
  char *text;
  size_t text_len;
};

struct auth_cimd {
  pthread_mutex_t lock;
  uint64_t seed; /* of the hash: URLs are chosen by anyone */
  struct cimd_entry *buckets[CIMD_BUCKETS];
  struct cimd_entry *head, *tail;
  size_t n;
  unsigned fetching; /* fetches under way (<= AUTH_CIMD_FETCHING_MAX) */
};

int cimd_init(struct auth *a, struct husk_err *err) {
  struct auth_cimd *c = calloc(1, sizeof *c);
  if (!c)
    return husk_error(err, ENOMEM, "cannot allocate the client document cache");
  if (id_random_bytes(&c->seed, sizeof c->seed, err) < 0) {
    free(c);
    return -1;
  }
  if (pthread_mutex_init(&c->lock, NULL) != 0) {
    free(c);
    return husk_error(err, ENOMEM, "cannot allocate the client document cache");
  }
  a->cimd = c;
  return 0;
}

static void entry_free(struct cimd_entry *e) {
  if (!e)
    return;
  free(e->text);
  free(e);
}

void cimd_destroy(struct auth *a) {
  struct auth_cimd *c = a->cimd;
  if (!c)
    return;
  for (struct cimd_entry *e = c->head, *next; e; e = next) {
    next = e->next;
    entry_free(e);
  }
  pthread_mutex_destroy(&c->lock);
  free(c);
  a->cimd = NULL;
}

bool auth_client_id_is_url(const char *id) { return id && !strncmp(id, "https://", 8); }

/* ---- the URL ---- */

/* A label of digits only, or 0x and hex: what makes a host an IPv4
 * address to a resolver (127.1, 2130706433, 0x7f.1 are all loopback). */
static bool numeric_label(const char *s, size_t n) {
  if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    for (size_t i = 2; i < n; i++)
      if (!strchr("0123456789abcdefABCDEF", s[i]))
        return false;
    return true;
  }
  for (size_t i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9')
      return false;
  return n > 0;
}

/* A path segment that is `.` or `..`, percent-encoded or not. */
static bool dot_segment(const char *s, size_t n) {
  size_t dots = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '.') {
      dots++;
    } else if (i + 2 < n && s[i] == '%' && s[i + 1] == '2' &&
               (s[i + 2] == 'e' || s[i + 2] == 'E')) {
      dots++;
      i += 2;
    } else {
      return false;
    }
  }
  return dots == 1 || dots == 2;
}

int auth_cimd_url_check(const char *url, char host[AUTH_HOST_MAX + 1], struct husk_err *err) {
  if (!url || !*url)
    return husk_fail(err, EINVAL, "client_id is missing");
  size_t n = strnlen(url, AUTH_CLIENT_URL_MAX + 1);
  if (n > AUTH_CLIENT_URL_MAX)
    return husk_fail(err, EINVAL, "a client_id URL is at most %d bytes", AUTH_CLIENT_URL_MAX);
  for (size_t i = 0; i < n; i++)
    if (!auth_uri_char(url[i]))
      return husk_fail(err, EINVAL,
                       "a client_id URL holds only the characters of URIs (no space, no "
                       "control character, no non-ASCII byte: percent-encode them)");
  if (strncmp(url, "https://", 8) != 0)
    return husk_fail(err, EINVAL, "a client_id URL is https://");
  if (memchr(url, '#', n))
    return husk_fail(err, EINVAL, "a client_id URL must not have a fragment (#...)");
  const char *auth = url + 8;
  size_t alen = strcspn(auth, "/?");
  if (memchr(auth, '@', alen))
    return husk_fail(err, EINVAL, "a client_id URL must not hold a user name or password (@)");
  if (alen > 0 && auth[0] == '[')
    return husk_fail(err, EINVAL, "a client_id URL's host is a name, not an IP address");
  const char *colon = memchr(auth, ':', alen);
  size_t hlen = colon ? (size_t)(colon - auth) : alen;
  if (hlen == 0 || hlen > AUTH_HOST_MAX)
    return husk_fail(err, EINVAL, "a client_id URL's host is 1 to %d bytes", AUTH_HOST_MAX);
  /* Labels of letters, digits and `-`, none empty. */
  size_t start = 0;
  for (size_t i = 0; i <= hlen; i++) {
    if (i < hlen && auth[i] != '.') {
      char c = auth[i];
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'))
        return husk_fail(err, EINVAL,
                         "a client_id URL's host is a DNS name (letters, digits, `-` and `.`)");
      continue;
    }
    if (i == start)
      return husk_fail(err, EINVAL, "a client_id URL's host has an empty label");
    if (i == hlen && numeric_label(auth + start, i - start))
      return husk_fail(err, EINVAL, "a client_id URL's host is a name, not an IP address");
    start = i + 1;
  }
  if (colon) {
    size_t plen = alen - hlen - 1;
    unsigned port = 0;
    bool ok = plen >= 1 && plen <= 5;
    for (size_t i = 0; ok && i < plen; i++) {
      ok = colon[1 + i] >= '0' && colon[1 + i] <= '9';
      port = port * 10 + (unsigned)(colon[1 + i] - '0');
    }
    if (!ok || port == 0 || port > 65535)
      return husk_fail(err, EINVAL, "a client_id URL's port is 1 to 65535");
  }
  const char *path = auth + alen;
  size_t plen = strcspn(path, "?");
  if (plen == 0 || path[0] != '/' || (plen == 1 && path[0] == '/'))
    return husk_fail(err, EINVAL, "a client_id URL has a path other than /");
  for (size_t i = 1; i <= plen;) {
    size_t seg = strcspn(path + i, "/?");
    if (seg > plen - i)
      seg = plen - i;
    if (dot_segment(path + i, seg))
      return husk_fail(err, EINVAL, "a client_id URL's path must not have . or .. segments");
    i += seg + 1;
  }
  if (host) {
    memcpy(host, auth, hlen);
    host[hlen] = '\0';
  }
  return 0;
}

/* ---- the document ---- */

int auth_cimd_parse(const char *url, const char *body, size_t len, struct auth_client *out,
                    struct husk_err *err) {
  static const char what[] = "the client's metadata document";
  struct auth_client c = {.document = true};
  if (auth_cimd_url_check(url, c.host, err) < 0)
    return -1;
  json_error_t je;
  cleanup_json json_t *o = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
  if (!json_is_object(o))
    return husk_fail(err, EINVAL, "%s is not a JSON object", what);
  json_t *id = json_object_get(o, "client_id");
  if (!json_is_string(id) || json_string_length(id) != strlen(url) ||
      memcmp(json_string_value(id), url, json_string_length(id)) != 0)
    return husk_fail(err, EINVAL, "%s's client_id is not the URL it was fetched from", what);
  /* A document anyone can read carries no secret: its client is public. */
  if (json_object_get(o, "client_secret") || json_object_get(o, "client_secret_expires_at"))
    return husk_fail(err, EINVAL, "%s must not hold a client_secret", what);
  json_t *m = json_object_get(o, "token_endpoint_auth_method");
  if (m && !json_is_null(m)) {
    const char *ms = json_string_value(m);
    if (!ms)
      return husk_fail(err, EINVAL, "%s's token_endpoint_auth_method is not a string", what);
    if (!strcmp(ms, "client_secret_post") || !strcmp(ms, "client_secret_basic") ||
        !strcmp(ms, "client_secret_jwt"))
      return husk_fail(err, EINVAL,
                       "%s names a secret (token_endpoint_auth_method): a document cannot carry "
                       "one, so it must be none",
                       what);
    if (strcmp(ms, "none") != 0)
      return husk_fail(err, EINVAL,
                       "%s's token_endpoint_auth_method is not supported: only none is "
                       "(private_key_jwt is not)",
                       what);
  }
  snprintf(c.auth_method, sizeof c.auth_method, "none");
  json_t *ru = json_object_get(o, "redirect_uris");
  if (!json_is_array(ru) || json_array_size(ru) == 0 || json_array_size(ru) > AUTH_REDIRECTS_MAX)
    return husk_fail(err, EINVAL, "%s's redirect_uris must be an array of 1 to %d URIs", what,
                     AUTH_REDIRECTS_MAX);
  size_t i;
  json_t *v;
  json_array_foreach(ru, i, v) {
    const char *s = json_string_value(v);
    if (!s || strlen(s) != json_string_length(v))
      return husk_fail(err, EINVAL, "%s's redirect_uris must be strings", what);
    struct husk_err e;
    if (auth_redirect_check(s, &e) < 0)
      return husk_fail(err, EINVAL, "%s's redirect_uris: %s", what, e.msg);
    /* auth_redirect_check bounds it to AUTH_REDIRECT_MAX bytes. */
    memcpy(c.redirect_uris[i], s, strlen(s) + 1);
  }
  c.n_redirects = json_array_size(ru);
  json_t *jn = json_object_get(o, "client_name");
  if (jn && !json_is_null(jn)) {
    const char *s = json_string_value(jn);
    if (!s || strlen(s) != json_string_length(jn))
      return husk_fail(err, EINVAL, "%s's client_name is not a string", what);
    struct husk_err e;
    if (auth_check_label("client name", s, AUTH_CLIENT_NAME_MAX, &e) < 0)
      return husk_fail(err, EINVAL, "%s's client_name: %s", what, e.msg);
    memcpy(c.name, s, strlen(s) + 1);
  }
  memcpy(c.id, url, strlen(url) + 1);
  if (out)
    *out = c;
  return 0;
}

/* ---- the cache ---- */

static uint64_t url_hash(const struct auth_cimd *c, const char *url) {
  uint64_t h = 0xcbf29ce484222325ULL ^ c->seed; /* FNV-1a, seeded */
  for (const unsigned char *p = (const unsigned char *)url; *p; p++) {
    h ^= *p;
    h *= 0x100000001b3ULL;
  }
  return h ^ (h >> 29);
}

static void lru_unlink(struct auth_cimd *c, struct cimd_entry *e) {
  if (e->prev)
    e->prev->next = e->next;
  else
    c->head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else
    c->tail = e->prev;
  e->prev = e->next = NULL;
}

static void lru_push(struct auth_cimd *c, struct cimd_entry *e) {
  e->prev = NULL;
  e->next = c->head;
  if (c->head)
    c->head->prev = e;
  c->head = e;
  if (!c->tail)
    c->tail = e;
}

/* Out of the table and the list, and freed. */
static void entry_remove(struct auth_cimd *c, struct cimd_entry *e) {
  struct cimd_entry **pp = &c->buckets[e->hash & (CIMD_BUCKETS - 1)];
  while (*pp && *pp != e)
    pp = &(*pp)->hash_next;
  if (*pp)
    *pp = e->hash_next;
  lru_unlink(c, e);
  c->n--;
  entry_free(e);
}

static struct cimd_entry *entry_find(struct auth_cimd *c, const char *url, uint64_t h) {
  for (struct cimd_entry *e = c->buckets[h & (CIMD_BUCKETS - 1)]; e; e = e->hash_next)
    if (e->hash == h && !strcmp(e->text, url))
      return e;
  return NULL;
}

static void entry_unpack(const struct cimd_entry *e, struct auth_client *out) {
  memset(out, 0, sizeof *out);
  out->document = true;
  const char *p = e->text;
  snprintf(out->id, sizeof out->id, "%s", p);
  p += strlen(p) + 1;
  snprintf(out->host, sizeof out->host, "%s", p);
  p += strlen(p) + 1;
  snprintf(out->name, sizeof out->name, "%s", p);
  p += strlen(p) + 1;
  for (size_t i = 0; i < e->n_redirects && i < AUTH_REDIRECTS_MAX; i++) {
    snprintf(out->redirect_uris[i], sizeof out->redirect_uris[i], "%s", p);
    p += strlen(p) + 1;
  }
  out->n_redirects = e->n_redirects;
  snprintf(out->auth_method, sizeof out->auth_method, "none");
}

int cimd_cached(struct auth *a, const char *url, struct auth_client *out, struct husk_err *err) {
  struct auth_cimd *c = a->cimd;
  if (!c || !auth_client_id_is_url(url))
    return husk_fail(err, ENOENT, "no such OAuth client");
  uint64_t h = url_hash(c, url);
  int64_t now = auth_now(a);
  pthread_mutex_lock(&c->lock);
  struct cimd_entry *e = entry_find(c, url, h);
  if (e && e->expires_ms <= now) {
    entry_remove(c, e);
    e = NULL;
  }
  if (e) {
    lru_unlink(c, e);
    lru_push(c, e);
    if (out)
      entry_unpack(e, out);
  }
  pthread_mutex_unlock(&c->lock);
  return e ? 0 : husk_fail(err, ENOENT, "no such OAuth client");
}

int cimd_store(struct auth *a, const struct auth_client *cl, int64_t expires_ms,
               struct husk_err *err) {
  struct auth_cimd *c = a->cimd;
  size_t len = strlen(cl->id) + strlen(cl->host) + strlen(cl->name) + 3;
  for (size_t i = 0; i < cl->n_redirects; i++)
    len += strlen(cl->redirect_uris[i]) + 1;
  struct cimd_entry *e = calloc(1, sizeof *e);
  char *text = malloc(len);
  if (!e || !text) {
    free(e);
    free(text);
    return husk_error(err, ENOMEM, "cannot cache a client metadata document");
  }
  char *p = text;
  const char *parts[3 + AUTH_REDIRECTS_MAX] = {cl->id, cl->host, cl->name};
  size_t np = 3;
  for (size_t i = 0; i < cl->n_redirects && i < AUTH_REDIRECTS_MAX; i++)
    parts[np++] = cl->redirect_uris[i];
  for (size_t i = 0; i < np; i++) {
    size_t k = strlen(parts[i]) + 1;
    memcpy(p, parts[i], k);
    p += k;
  }
  e->text = text;
  e->text_len = len;
  e->n_redirects = np - 3;
  e->expires_ms = expires_ms;
  e->hash = url_hash(c, cl->id);
  pthread_mutex_lock(&c->lock);
  struct cimd_entry *old = entry_find(c, cl->id, e->hash);
  if (old)
    entry_remove(c, old);
  struct cimd_entry **b = &c->buckets[e->hash & (CIMD_BUCKETS - 1)];
  e->hash_next = *b;
  *b = e;
  lru_push(c, e);
  c->n++;
  while (c->n > AUTH_CIMD_MAX && c->tail)
    entry_remove(c, c->tail);
  pthread_mutex_unlock(&c->lock);
  return 0;
}

static void reply_freep(struct auth_fetch_reply *r) { auth_fetch_reply_free(r); }

static void fetching_givep(struct auth_cimd **c) {
  pthread_mutex_lock(&(*c)->lock);
  (*c)->fetching--;
  pthread_mutex_unlock(&(*c)->lock);
}

/* How long a document is cached: its max-age (seconds; -1 none) clamped. */
static int64_t ttl_ms(int64_t max_age_s) {
  if (max_age_s < 0)
    return AUTH_CIMD_TTL_DEFAULT_MS;
  if (max_age_s > AUTH_CIMD_TTL_MAX_MS / 1000)
    return AUTH_CIMD_TTL_MAX_MS;
  int64_t ms = max_age_s * 1000;
  return ms < AUTH_CIMD_TTL_MIN_MS ? AUTH_CIMD_TTL_MIN_MS : ms;
}

int auth_client_resolve(struct auth *a, const char *id, bool (*may_fetch)(void *ctx), void *ctx,
                        struct auth_client *out, struct husk_err *err) {
  if (!auth_client_id_is_url(id))
    return auth_client_get(a, id, out, err);
  if (auth_cimd_url_check(id, NULL, err) < 0)
    return -1;
  if (cimd_cached(a, id, out, NULL) == 0)
    return 0;
  if (!a->fetcher)
    return husk_fail(err, ENOTSUP, "this server does not fetch client metadata documents");
  /* One of the documents' fetch slots first, so that a fetch refused
   * for it does not spend one of the address's fetches. */
  struct auth_cimd *cc = a->cimd;
  pthread_mutex_lock(&cc->lock);
  bool slot = cc->fetching < AUTH_CIMD_FETCHING_MAX;
  if (slot)
    cc->fetching++;
  pthread_mutex_unlock(&cc->lock);
  if (!slot)
    return husk_fail(err, EBUSY, "the server is fetching too much at once: try again");
  __attribute__((cleanup(fetching_givep), unused)) struct auth_cimd *hold = cc;
  if (may_fetch && !may_fetch(ctx))
    return husk_fail(err, EAGAIN,
                     "too many client metadata documents were fetched for your address, or "
                     "one is being fetched: try again later");
  static const char what[] = "the client's metadata document";
  struct auth_fetch_request rq = {
      .url = id, .max_bytes = AUTH_CIMD_BYTES, .timeout_ms = AUTH_CIMD_TIMEOUT_MS};
  __attribute__((cleanup(reply_freep))) struct auth_fetch_reply rep = {0};
  struct husk_err fe = {0};
  if (auth_fetch(a->fetcher, &rq, &rep, &fe) < 0) {
    husk_sanitize_line(fe.msg);
    switch (fe.code) {
    case EBUSY: return husk_fail(err, EBUSY, "the server is fetching too much at once: try again");
    case EFBIG:
      return husk_fail(err, EPROTO, "%s is larger than %d KiB", what, AUTH_CIMD_BYTES / 1024);
    case ETIMEDOUT:
      return husk_fail(err, EPROTO, "%s took more than %d s to fetch", what,
                       AUTH_CIMD_TIMEOUT_MS / 1000);
    case EACCES:
      return husk_fail(err, EPROTO,
                       "%s is on an address this server does not fetch from (a private, local "
                       "or reserved network)",
                       what);
    default: return husk_fail(err, EPROTO, "%s could not be fetched: %s", what, fe.msg);
    }
  }
  if (rep.status >= 300 && rep.status < 400)
    return husk_fail(err, EPROTO, "%s's server answered a redirect (HTTP %ld), not followed", what,
                     rep.status);
  if (rep.status != 200)
    return husk_fail(err, EPROTO, "%s's server answered HTTP %ld", what, rep.status);
  struct auth_client c;
  if (auth_cimd_parse(id, rep.body, rep.len, &c, err) < 0)
    return -1;
  if (cimd_store(a, &c, auth_now(a) + ttl_ms(rep.max_age_s), err) < 0)
    return -1;
  if (out)
    *out = c;
  return 0;
}
