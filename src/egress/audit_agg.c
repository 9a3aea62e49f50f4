/* Egress audit aggregation (see audit_agg.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress/audit_agg.h"
#include "egress/host.h"

#define REASON_MAX 128

struct agg_box {
  struct agg_box *next;
  char id[STATE_BOX_ID_SIZE];
  char tenant[STATE_TENANT_ID_SIZE];
  unsigned rows;       /* records this interval */
  unsigned keys, dns_keys;
  uint64_t suppressed; /* decisions over a cap this interval */
};

struct agg_tenant {
  struct agg_tenant *next;
  char id[STATE_TENANT_ID_SIZE];
  unsigned rows;
};

/* One kind of decision of one box. */
struct agg_entry {
  struct agg_entry *next; /* hash chain */
  struct agg_box *box;
  uint32_t hash;
  char action[64], outcome[16];
  int status;
  char host[EGRESS_HOST_MAX];
  unsigned port;
  char mode[16], via[24], reason[REASON_MAX];
  bool dns;
  char addr[48];        /* the last one */
  uint64_t pending;     /* decisions not yet in a record */
  uint64_t bytes_up, bytes_down;
  int64_t first_ts, last_ts;
};

struct egress_agg {
  pthread_mutex_t lock;
  struct egress_agg_limits lim;
  struct agg_entry **bucket;
  size_t nbuckets; /* a power of two */
  size_t nkeys;
  struct agg_box *boxes;
  struct agg_tenant *tenants;
  int64_t due;
  uint64_t lost;
};

static const char *or_dash(const char *s) { return s && *s ? s : "-"; }

static uint32_t fnv(uint32_t h, const char *s) {
  for (; s && *s; s++)
    h = (h ^ (unsigned char)*s) * 16777619u;
  return (h ^ 0x1f) * 16777619u;
}

static uint32_t event_hash(const struct egress_agg_event *ev) {
  uint32_t h = 2166136261u;
  h = fnv(h, ev->box_id);
  h = fnv(h, ev->action);
  h = fnv(h, ev->outcome);
  h = fnv(h, ev->host);
  h = fnv(h, ev->mode);
  h = fnv(h, ev->via);
  h = fnv(h, ev->reason);
  return (h ^ (uint32_t)ev->status * 31u ^ ev->port) * 16777619u;
}

/* Stored fields are cut to their size: compare the same way. */
static bool same(const char *stored, size_t size, const char *s) {
  return !strncmp(stored, or_dash(s), size - 1);
}

static bool entry_is(const struct agg_entry *x, uint32_t h, const struct egress_agg_event *ev) {
  return x->hash == h && !strcmp(x->box->id, ev->box_id) && x->status == ev->status &&
         x->port == ev->port && x->dns == ev->dns && same(x->action, sizeof x->action, ev->action) &&
         same(x->outcome, sizeof x->outcome, ev->outcome) &&
         same(x->host, sizeof x->host, ev->host) && same(x->mode, sizeof x->mode, ev->mode) &&
         same(x->via, sizeof x->via, ev->via) && same(x->reason, sizeof x->reason, ev->reason);
}

int egress_agg_new(struct egress_agg **out, const struct egress_agg_limits *lim,
                   struct husk_err *err) {
  struct egress_agg *a = calloc(1, sizeof *a);
  if (!a)
    return husk_fail(err, ENOMEM, "out of memory");
  a->lim = *lim;
  if (!a->lim.interval_ms)
    a->lim.interval_ms = EGRESS_AUDIT_INTERVAL_MS;
  if (!a->lim.box_rows)
    a->lim.box_rows = EGRESS_AUDIT_BOX_ROWS;
  if (!a->lim.tenant_rows)
    a->lim.tenant_rows = EGRESS_AUDIT_TENANT_ROWS;
  if (!a->lim.max_keys)
    a->lim.max_keys = EGRESS_AUDIT_MAX_KEYS;
  if (!a->lim.box_keys)
    a->lim.box_keys = EGRESS_AUDIT_BOX_KEYS;
  a->nbuckets = 64;
  while (a->nbuckets < a->lim.max_keys && a->nbuckets < ((size_t)1 << 20))
    a->nbuckets *= 2;
  a->bucket = calloc(a->nbuckets, sizeof *a->bucket);
  if (!a->bucket) {
    free(a);
    return husk_fail(err, ENOMEM, "out of memory");
  }
  pthread_mutex_init(&a->lock, NULL);
  *out = a;
  return 0;
}

void egress_agg_free(struct egress_agg *a) {
  if (!a)
    return;
  for (size_t i = 0; i < a->nbuckets; i++)
    for (struct agg_entry *x = a->bucket[i], *n; x; x = n) {
      n = x->next;
      free(x);
    }
  for (struct agg_box *b = a->boxes, *n; b; b = n) {
    n = b->next;
    free(b);
  }
  for (struct agg_tenant *t = a->tenants, *n; t; t = n) {
    n = t->next;
    free(t);
  }
  free(a->bucket);
  pthread_mutex_destroy(&a->lock);
  free(a);
}

static struct agg_box *box_get(struct egress_agg *a, const struct egress_agg_event *ev) {
  for (struct agg_box *b = a->boxes; b; b = b->next)
    if (!strcmp(b->id, ev->box_id))
      return b;
  struct agg_box *b = calloc(1, sizeof *b);
  if (!b)
    return NULL;
  snprintf(b->id, sizeof b->id, "%s", ev->box_id);
  snprintf(b->tenant, sizeof b->tenant, "%s", ev->tenant ? ev->tenant : "");
  b->next = a->boxes;
  a->boxes = b;
  return b;
}

static struct agg_tenant *tenant_get(struct egress_agg *a, const char *id) {
  for (struct agg_tenant *t = a->tenants; t; t = t->next)
    if (!strcmp(t->id, id))
      return t;
  struct agg_tenant *t = calloc(1, sizeof *t);
  if (!t)
    return NULL;
  snprintf(t->id, sizeof t->id, "%s", id);
  t->next = a->tenants;
  a->tenants = t;
  return t;
}

/* May the box write one more record this interval?  Takes it if so. */
static bool take_row(struct egress_agg *a, struct agg_box *b) {
  struct agg_tenant *t = tenant_get(a, b->tenant);
  if (!t || b->rows >= a->lim.box_rows || t->rows >= a->lim.tenant_rows)
    return false;
  b->rows++;
  t->rows++;
  return true;
}

static void base_row(struct state_audit *r, const char *box, const char *tenant, const char *action,
                     const char *outcome, int status, int64_t ts) {
  memset(r, 0, sizeof *r);
  snprintf(r->tenant_id, sizeof r->tenant_id, "%s", tenant);
  snprintf(r->box_id, sizeof r->box_id, "%s", box);
  snprintf(r->action, sizeof r->action, "%s", action);
  snprintf(r->outcome, sizeof r->outcome, "%s", outcome);
  r->status = status;
  r->ts_ms = ts;
}

static void detail(struct state_audit *r, const char *host, unsigned port, const char *addr,
                   const char *mode, const char *via, uint64_t up, uint64_t down,
                   const char *reason, uint64_t count, int64_t first_ts) {
  int n = snprintf(r->detail, sizeof r->detail,
                   "host=%s port=%u addr=%s mode=%s via=%s bytes_up=%llu bytes_down=%llu", host, port,
                   addr, mode, via, (unsigned long long)up, (unsigned long long)down);
  /* count= and first_ms= before the reason: a long reason is what gets cut. */
  if (n >= 0 && (size_t)n < sizeof r->detail)
    n += snprintf(r->detail + n, sizeof r->detail - (size_t)n, " count=%llu",
                  (unsigned long long)count);
  if (first_ts && n >= 0 && (size_t)n < sizeof r->detail)
    n += snprintf(r->detail + n, sizeof r->detail - (size_t)n, " first_ms=%lld",
                  (long long)first_ts);
  if (reason && *reason && n >= 0 && (size_t)n < sizeof r->detail)
    snprintf(r->detail + n, sizeof r->detail - (size_t)n, " reason=%s", reason);
}

void egress_agg_row(const struct egress_agg_event *ev, struct state_audit *row) {
  base_row(row, or_dash(ev->box_id), ev->tenant ? ev->tenant : "", ev->action, ev->outcome,
           ev->status, ev->ts_ms);
  detail(row, or_dash(ev->host), ev->port, or_dash(ev->addr), or_dash(ev->mode), or_dash(ev->via),
         ev->bytes_up, ev->bytes_down, ev->reason, 1, 0);
}

int egress_agg_add(struct egress_agg *a, const struct egress_agg_event *ev,
                   struct state_audit *row) {
  struct egress_agg_event e = *ev;
  if (!e.ts_ms)
    e.ts_ms = state_now_ms();
  uint32_t h = event_hash(&e);
  int write = 0;
  pthread_mutex_lock(&a->lock);
  struct agg_box *b = box_get(a, &e);
  if (!b) {
    a->lost++;
    goto out;
  }
  struct agg_entry **slot = &a->bucket[h & (a->nbuckets - 1)], *x;
  for (x = *slot; x && !entry_is(x, h, &e); x = x->next)
    ;
  if (x) {
    x->pending++;
    if (!x->first_ts)
      x->first_ts = e.ts_ms;
    x->last_ts = e.ts_ms;
    x->bytes_up += e.bytes_up;
    x->bytes_down += e.bytes_down;
    snprintf(x->addr, sizeof x->addr, "%s", or_dash(e.addr));
    goto out;
  }
  /* The first of its kind: written now if the caps allow, else counted. */
  write = take_row(a, b);
  bool room = a->nkeys < a->lim.max_keys && b->keys < a->lim.box_keys &&
              (!e.dns || b->dns_keys < a->lim.box_keys / 2);
  if (room && (x = calloc(1, sizeof *x))) {
    x->box = b;
    x->hash = h;
    snprintf(x->action, sizeof x->action, "%s", or_dash(e.action));
    snprintf(x->outcome, sizeof x->outcome, "%s", or_dash(e.outcome));
    x->status = e.status;
    snprintf(x->host, sizeof x->host, "%s", or_dash(e.host));
    x->port = e.port;
    snprintf(x->mode, sizeof x->mode, "%s", or_dash(e.mode));
    snprintf(x->via, sizeof x->via, "%s", or_dash(e.via));
    snprintf(x->reason, sizeof x->reason, "%s", or_dash(e.reason));
    x->dns = e.dns;
    snprintf(x->addr, sizeof x->addr, "%s", or_dash(e.addr));
    if (!write) {
      x->pending = 1;
      x->first_ts = x->last_ts = e.ts_ms;
      x->bytes_up = e.bytes_up;
      x->bytes_down = e.bytes_down;
    }
    x->next = *slot;
    *slot = x;
    a->nkeys++;
    b->keys++;
    b->dns_keys += e.dns;
  } else if (!write) {
    b->suppressed++;
  }
out:
  pthread_mutex_unlock(&a->lock);
  if (write)
    egress_agg_row(&e, row);
  return write;
}

int64_t egress_agg_due(struct egress_agg *a) {
  pthread_mutex_lock(&a->lock);
  int64_t d = a->due;
  pthread_mutex_unlock(&a->lock);
  return d;
}

uint64_t egress_agg_lost(struct egress_agg *a) {
  pthread_mutex_lock(&a->lock);
  uint64_t n = a->lost;
  pthread_mutex_unlock(&a->lock);
  return n;
}

static void suppressed_row(const struct egress_agg *a, const struct agg_box *b,
                           struct state_audit *r) {
  base_row(r, b->id, b->tenant, "egress.audit", "suppressed", 0, 0);
  snprintf(r->detail, sizeof r->detail,
           "count=%llu egress decisions over the audit caps (%u records per box, %u per tenant per "
           "%u ms; %u kinds of decision per box)",
           (unsigned long long)b->suppressed, a->lim.box_rows, a->lim.tenant_rows,
           a->lim.interval_ms, a->lim.box_keys);
}

/* Under the lock: the records of box `only` (every box if NULL), and with
 * `forget` the entries and box records go; otherwise entries that had
 * nothing to write go (their kind was idle a whole interval). */
static size_t collect(struct egress_agg *a, const char *only, bool forget,
                      struct state_audit **rows) {
  size_t cap = 0;
  for (size_t i = 0; i < a->nbuckets; i++)
    for (struct agg_entry *x = a->bucket[i]; x; x = x->next)
      cap += x->pending && (!only || !strcmp(x->box->id, only));
  for (struct agg_box *b = a->boxes; b; b = b->next)
    cap += !only || !strcmp(b->id, only);
  struct state_audit *out = cap ? calloc(cap, sizeof *out) : NULL;
  size_t n = 0;
  /* Connections first, then DNS: under the cap, "who reached what" wins. */
  for (int dns = 0; dns < 2; dns++)
  for (size_t i = 0; i < a->nbuckets; i++) {
    for (struct agg_entry **pp = &a->bucket[i], *x; (x = *pp);) {
      if ((only && strcmp(x->box->id, only)) || x->dns != dns) {
        pp = &x->next;
        continue;
      }
      struct agg_box *b = x->box;
      if (x->pending) {
        /* A drain (the box goes, the daemon stops) writes every count it
         * holds: at most one record per entry, once, so the entry bounds
         * it; the interval's cap, which first-seen decisions may have
         * used up, would turn the counts of known hosts into "suppressed". */
        if (out && (forget || take_row(a, b))) {
          struct state_audit *r = &out[n++];
          base_row(r, b->id, b->tenant, x->action, x->outcome, x->status, x->last_ts);
          detail(r, x->host, x->port, x->addr, x->mode, x->via, x->bytes_up, x->bytes_down,
                 strcmp(x->reason, "-") ? x->reason : NULL, x->pending, x->first_ts);
        } else if (out) {
          b->suppressed += x->pending;
        } else {
          a->lost += x->pending;
        }
      }
      bool drop = forget || !x->pending;
      x->pending = x->bytes_up = x->bytes_down = 0;
      x->first_ts = 0;
      if (drop) {
        *pp = x->next;
        a->nkeys--;
        b->keys--;
        b->dns_keys -= x->dns;
        free(x);
      } else {
        pp = &x->next;
      }
    }
  }
  for (struct agg_box **pp = &a->boxes, *b; (b = *pp);) {
    if (only && strcmp(b->id, only)) {
      pp = &b->next;
      continue;
    }
    if (b->suppressed) {
      if (out)
        suppressed_row(a, b, &out[n++]);
      else
        a->lost += b->suppressed;
      b->suppressed = 0;
    }
    if (forget || b->keys == 0) {
      *pp = b->next;
      free(b);
    } else {
      pp = &b->next;
    }
  }
  if (!n) {
    free(out);
    out = NULL;
  }
  *rows = out;
  return n;
}

size_t egress_agg_tick(struct egress_agg *a, int64_t now_ms, struct state_audit **rows) {
  *rows = NULL;
  pthread_mutex_lock(&a->lock);
  if (!a->due)
    a->due = now_ms + a->lim.interval_ms;
  if (now_ms < a->due) {
    pthread_mutex_unlock(&a->lock);
    return 0;
  }
  a->due = now_ms + a->lim.interval_ms;
  /* A new interval: the caps start again, and the records of the one that
   * ended count against it. */
  for (struct agg_box *b = a->boxes; b; b = b->next)
    b->rows = 0;
  for (struct agg_tenant *t = a->tenants, *n; t; t = n) {
    n = t->next;
    free(t);
  }
  a->tenants = NULL;
  size_t n = collect(a, NULL, false, rows);
  pthread_mutex_unlock(&a->lock);
  return n;
}

size_t egress_agg_drain(struct egress_agg *a, const char *box_id, struct state_audit **rows) {
  pthread_mutex_lock(&a->lock);
  size_t n = collect(a, box_id, true, rows);
  pthread_mutex_unlock(&a->lock);
  return n;
}
