/* JSON replies that carry box data, within the daemon's reply budget.
 *
 * What a box prints or holds is hostile in size: a reply that copies it
 * into a JSON tree and then dumps that tree costs several times its size
 * (a NUL byte becomes the six bytes of "\u0000", invalid UTF-8 is sent as
 * text and again as base64).  Here a reply is a list of parts -- literal
 * JSON text, byte strings to escape, byte strings to base64 -- whose exact
 * length is counted first and whose text is produced as libmicrohttpd
 * sends it, a block at a time: its memory is the raw bytes, however they
 * escape.
 *
 * The budget: every request that holds box data for its reply (a sync
 * exec's output, a listing page, a stream's queue) first reserves the most
 * it may hold from one daemon-wide counter (--reply-budget); a request
 * that does not fit is refused with 503 and Retry-After instead of growing
 * the daemon's memory.  The reservation is given back when the reply has
 * been sent (or failed).  One tenant's requests together hold at most a
 * share of it (--tenant-reply-budget), so that one tenant filling it does
 * not refuse every other tenant's replies. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

#define REPLY_BLOCK (64 * 1024)
#define REPLY_MAX_PARTS 24

/* ---- the budget ------------------------------------------------------ */

uint64_t api_reply_max(const struct api_server *s) {
  return s->cfg.reply_max ? s->cfg.reply_max : API_REPLY_MAX_DEFAULT;
}

static uint64_t budget_total(const struct api_server *s) {
  return s->cfg.reply_budget ? s->cfg.reply_budget : API_REPLY_BUDGET_DEFAULT;
}

/* What one tenant's requests may hold of it together: a share, so that one
 * tenant filling it leaves the rest to the others (--tenant-reply-budget,
 * by default half of the budget). */
static uint64_t budget_tenant(const struct api_server *s) {
  uint64_t share = s->cfg.tenant_reply_budget ? s->cfg.tenant_reply_budget : budget_total(s) / 2;
  return share < budget_total(s) ? share : budget_total(s);
}

bool api_budget_take(struct api_server *s, const char *tenant, uint64_t n) {
  if (tenant && *tenant && !tenant_load_take_bytes(&s->front.loads, tenant, n, budget_tenant(s)))
    return false;
  uint64_t total = budget_total(s);
  uint64_t cur = atomic_load(&s->reply_reserved);
  do {
    if (n > total || cur > total - n) {
      if (tenant && *tenant)
        tenant_load_give_bytes(&s->front.loads, tenant, n);
      return false;
    }
  } while (!atomic_compare_exchange_weak(&s->reply_reserved, &cur, cur + n));
  return true;
}

void api_budget_give(struct api_server *s, const char *tenant, uint64_t n) {
  if (!n)
    return;
  atomic_fetch_sub(&s->reply_reserved, n);
  if (tenant && *tenant)
    tenant_load_give_bytes(&s->front.loads, tenant, n);
}

enum MHD_Result api_reply_busy(struct req *r) {
  snprintf(r->xhdr_name, sizeof r->xhdr_name, "Retry-After");
  snprintf(r->xhdr_value, sizeof r->xhdr_value, "1");
  return api_reply_error(r, 503, "unavailable",
                         "the server holds as much reply data as it may "
                         "(--reply-budget, or this tenant's share of it): try again");
}

/* ---- parts ----------------------------------------------------------- */

enum part_kind { PART_TEXT, PART_STRING, PART_BASE64 };

struct part {
  enum part_kind kind;
  const unsigned char *data;
  size_t len;
};

struct jreply {
  struct api_server *srv;
  char tenant[STATE_TENANT_ID_SIZE]; /* whose share holds `reserved` ("" admin) */
  uint64_t reserved;
  struct part parts[REPLY_MAX_PARTS];
  size_t nparts;
  void *owned[REPLY_MAX_PARTS * 2];
  size_t nowned;
  bool failed;
  /* Production: the current part, the offset in its input, and the rest
   * of an escape or base64 group that did not fit in the last block. */
  size_t pi, po;
  char carry[8];
  size_t carry_len, carry_off;
};

struct jreply *jreply_new(struct api_server *s, const char *tenant, uint64_t reserved) {
  struct jreply *j = calloc(1, sizeof *j);
  if (!j) {
    api_budget_give(s, tenant, reserved);
    return NULL;
  }
  j->srv = s;
  snprintf(j->tenant, sizeof j->tenant, "%s", tenant ? tenant : "");
  j->reserved = reserved;
  return j;
}

void jreply_free(struct jreply *j) {
  if (!j)
    return;
  for (size_t i = 0; i < j->nowned; i++)
    free(j->owned[i]);
  api_budget_give(j->srv, j->tenant, j->reserved);
  free(j);
}

static void add(struct jreply *j, enum part_kind k, const void *data, size_t len) {
  if (j->nparts == REPLY_MAX_PARTS) {
    j->failed = true;
    return;
  }
  j->parts[j->nparts++] = (struct part){k, data, len};
}

void jreply_own(struct jreply *j, void *p) {
  if (!p)
    return;
  if (j->nowned == sizeof j->owned / sizeof j->owned[0]) {
    free(p);
    j->failed = true;
    return;
  }
  j->owned[j->nowned++] = p;
}

void jreply_text(struct jreply *j, const char *text) {
  char *c = strdup(text);
  if (!c) {
    j->failed = true;
    return;
  }
  jreply_own(j, c);
  add(j, PART_TEXT, c, strlen(c));
}

void jreply_take_text(struct jreply *j, char *text, size_t len) {
  jreply_own(j, text);
  if (!j->failed)
    add(j, PART_TEXT, text, len);
}

void jreply_string(struct jreply *j, const void *buf, size_t len) {
  add(j, PART_TEXT, "\"", 1);
  add(j, PART_STRING, buf, len);
  add(j, PART_TEXT, "\"", 1);
}

void jreply_base64(struct jreply *j, const void *buf, size_t len) {
  add(j, PART_TEXT, "\"", 1);
  add(j, PART_BASE64, buf, len);
  add(j, PART_TEXT, "\"", 1);
}

void jreply_fields(struct jreply *j, json_t *o) {
  char *d = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  size_t n = d ? strlen(d) : 0;
  if (n < 2 || d[0] != '{' || d[n - 1] != '}') {
    free(d);
    j->failed = true;
    return;
  }
  /* "{...}" without its braces: the caller frames the object. */
  d[n - 1] = '\0';
  jreply_own(j, d);
  if (!j->failed)
    add(j, PART_TEXT, d + 1, n - 2);
}

/* The JSON text of the unit at s (one UTF-8 sequence, or one invalid byte,
 * sent as U+FFFD) into out (at least 6 bytes); *used: the bytes taken. */
static size_t string_unit(const unsigned char *s, size_t n, char *out, size_t *used) {
  unsigned char c = s[0];
  static const char hex[] = "0123456789abcdef";
  if (c >= 0x80) {
    size_t l = utf8_seq_len(s, n);
    if (l) {
      memcpy(out, s, l);
      *used = l;
      return l;
    }
    *used = 1;
    memcpy(out, "\xef\xbf\xbd", 3);
    return 3;
  }
  *used = 1;
  const char *esc = c == '"'    ? "\\\""
                    : c == '\\' ? "\\\\"
                    : c == '\n' ? "\\n"
                    : c == '\r' ? "\\r"
                    : c == '\t' ? "\\t"
                    : c == '\b' ? "\\b"
                    : c == '\f' ? "\\f"
                                : NULL;
  if (esc) {
    memcpy(out, esc, 2);
    return 2;
  }
  if (c < 0x20) {
    memcpy(out, "\\u00", 4);
    out[4] = hex[c >> 4];
    out[5] = hex[c & 15];
    return 6;
  }
  out[0] = (char)c;
  return 1;
}

/* The base64 of the group at s (up to 3 bytes) into out (at least 5
 * bytes); *used: the bytes taken. */
static size_t base64_unit(const unsigned char *s, size_t n, char *out, size_t *used) {
  *used = n > 3 ? 3 : n;
  return b64_encode_to(out, s, *used, B64_STD);
}

static uint64_t part_length(const struct part *p) {
  if (p->kind == PART_TEXT)
    return p->len;
  if (p->kind == PART_BASE64)
    return b64_encoded_len(p->len, B64_STD);
  uint64_t total = 0;
  char out[8];
  for (size_t i = 0; i < p->len;) {
    size_t used;
    total += string_unit(p->data + i, p->len - i, out, &used);
    i += used;
  }
  return total;
}

static ssize_t jreply_read(void *cls, uint64_t pos, char *buf, size_t max) {
  struct jreply *j = cls;
  (void)pos;
  size_t n = 0;
  while (n < max) {
    if (j->carry_off < j->carry_len) {
      size_t k = j->carry_len - j->carry_off;
      if (k > max - n)
        k = max - n;
      memcpy(buf + n, j->carry + j->carry_off, k);
      j->carry_off += k;
      n += k;
      continue;
    }
    if (j->pi == j->nparts)
      break;
    const struct part *p = &j->parts[j->pi];
    if (j->po == p->len) {
      j->pi++;
      j->po = 0;
      continue;
    }
    if (p->kind == PART_TEXT) {
      size_t k = p->len - j->po;
      if (k > max - n)
        k = max - n;
      memcpy(buf + n, p->data + j->po, k);
      j->po += k;
      n += k;
      continue;
    }
    size_t used;
    size_t l = p->kind == PART_STRING
                   ? string_unit(p->data + j->po, p->len - j->po, j->carry, &used)
                   : base64_unit(p->data + j->po, p->len - j->po, j->carry, &used);
    j->po += used;
    j->carry_len = l;
    j->carry_off = 0;
  }
  return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void jreply_release(void *cls) { jreply_free(cls); }

enum MHD_Result api_reply_jreply(struct req *r, unsigned status, struct jreply *j) {
  if (!j)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  add(j, PART_TEXT, "\n", 1); /* nicer with curl */
  if (j->failed) {
    jreply_free(j);
    return api_reply_error(r, 500, "internal_error", "out of memory");
  }
  uint64_t total = 0;
  for (size_t i = 0; i < j->nparts; i++)
    total += part_length(&j->parts[i]);
  struct MHD_Response *resp =
      MHD_create_response_from_callback(total, REPLY_BLOCK, jreply_read, j, jreply_release);
  if (!resp) {
    jreply_free(j);
    return api_reply_error(r, 500, "internal_error", "out of memory");
  }
  MHD_add_response_header(resp, "Content-Type", "application/json");
  return api_queue(r, status, resp);
}
