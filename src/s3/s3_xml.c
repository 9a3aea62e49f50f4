/* XML request bodies (CompleteMultipartUpload, Delete,
 * CreateBucketConfiguration), parsed with expat.
 *
 * The documents are small and flat: we track the element path and the
 * text of the current leaf, and act when a leaf or record closes.  Size is
 * bounded before parsing (S3_XML_MAX), expat refuses malformed input and
 * (2.4+) entity amplification; DTDs are not needed by any S3 body and are
 * refused outright. */
#define _GNU_SOURCE
#include <errno.h>
#include <expat.h>
#include <stdlib.h>
#include <string.h>

#include "s3/s3_internal.h"

#define DEPTH_MAX 8
#define TEXT_MAX (STORE_KEY_MAX * 2)

struct px {
  XML_Parser p;
  int depth;
  char names[DEPTH_MAX][32];
  char text[TEXT_MAX + 1];
  size_t tlen;
  bool bad;
  const char *why;
  const char *root;
  /* Complete */
  struct store_part *parts;
  size_t nparts, cap;
  int cur_num;
  char cur_etag[STORE_ETAG_SIZE + 8];
  bool have_num, have_etag;
  /* Delete */
  char **keys;
  size_t nkeys;
  bool quiet;
  char *cur_key;
  enum { K_COMPLETE, K_DELETE, K_CHECK } kind;
};

static void fail(struct px *x, const char *why) {
  if (!x->bad) {
    x->bad = true;
    x->why = why;
  }
  XML_StopParser(x->p, XML_FALSE);
}

static void on_start(void *ud, const XML_Char *name, const XML_Char **atts) {
  struct px *x = ud;
  (void)atts;
  if (x->depth == 0 && strcmp(name, x->root)) {
    fail(x, "unexpected root element");
    return;
  }
  if (x->depth >= DEPTH_MAX || strlen(name) >= sizeof x->names[0]) {
    fail(x, "the document is nested too deeply");
    return;
  }
  snprintf(x->names[x->depth], sizeof x->names[0], "%s", name);
  x->depth++;
  x->tlen = 0;
  x->text[0] = 0;
  if (x->kind == K_COMPLETE && x->depth == 2 && !strcmp(name, "Part")) {
    x->have_num = x->have_etag = false;
  }
  if (x->kind == K_DELETE && x->depth == 2 && !strcmp(name, "Object")) {
    free(x->cur_key);
    x->cur_key = NULL;
  }
}

static void on_text(void *ud, const XML_Char *s, int len) {
  struct px *x = ud;
  if (x->tlen + (size_t)len > TEXT_MAX) {
    fail(x, "an element's text is too long");
    return;
  }
  memcpy(x->text + x->tlen, s, (size_t)len);
  x->tlen += (size_t)len;
  x->text[x->tlen] = 0;
}

static void on_end(void *ud, const XML_Char *name) {
  struct px *x = ud;
  if (x->bad)
    return;
  x->depth--;
  if (x->kind == K_COMPLETE) {
    if (x->depth == 2 && !strcmp(name, "PartNumber")) {
      const char *t = x->text;
      size_t n = strlen(t);
      if (!n || n > 5 || strspn(t, "0123456789") != n || atoi(t) < 1 || atoi(t) > STORE_PARTS_MAX) {
        fail(x, "bad PartNumber");
        return;
      }
      x->cur_num = atoi(t);
      x->have_num = true;
    } else if (x->depth == 2 && !strcmp(name, "ETag")) {
      if (x->tlen >= sizeof x->cur_etag) {
        fail(x, "bad ETag");
        return;
      }
      memcpy(x->cur_etag, x->text, x->tlen + 1);
      x->have_etag = true;
    } else if (x->depth == 1 && !strcmp(name, "Part")) {
      if (!x->have_num || !x->have_etag) {
        fail(x, "each Part needs PartNumber and ETag");
        return;
      }
      if (x->nparts >= STORE_PARTS_MAX) {
        fail(x, "too many parts");
        return;
      }
      if (x->nparts == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 16;
        struct store_part *p = realloc(x->parts, cap * sizeof *p);
        if (!p) {
          fail(x, "out of memory");
          return;
        }
        x->parts = p;
        x->cap = cap;
      }
      struct store_part *p = &x->parts[x->nparts++];
      memset(p, 0, sizeof *p);
      p->num = x->cur_num;
      size_t el = strlen(x->cur_etag);
      if (el >= sizeof p->etag) {
        x->nparts--;
        fail(x, "bad ETag");
        return;
      }
      memcpy(p->etag, x->cur_etag, el + 1);
    }
  } else if (x->kind == K_DELETE) {
    if (x->depth == 1 && !strcmp(name, "Quiet")) {
      x->quiet = !strcmp(x->text, "true");
    } else if (x->depth == 2 && !strcmp(name, "Key")) {
      free(x->cur_key);
      x->cur_key = strndup(x->text, x->tlen);
      if (!x->cur_key)
        fail(x, "out of memory");
    } else if (x->depth == 1 && !strcmp(name, "Object")) {
      if (!x->cur_key) {
        fail(x, "each Object needs a Key");
        return;
      }
      if (x->nkeys >= S3_DELETE_MAX) {
        fail(x, "at most 1000 keys per request");
        return;
      }
      char **k = realloc(x->keys, (x->nkeys + 1) * sizeof *k);
      if (!k) {
        fail(x, "out of memory");
        return;
      }
      x->keys = k;
      x->keys[x->nkeys++] = x->cur_key;
      x->cur_key = NULL;
    }
  }
  x->tlen = 0;
  x->text[0] = 0;
}

static void on_doctype(void *ud, const XML_Char *name, const XML_Char *sysid,
                       const XML_Char *pubid, int has_internal_subset) {
  (void)name;
  (void)sysid;
  (void)pubid;
  (void)has_internal_subset;
  fail(ud, "DTDs are not allowed");
}

static int run(struct px *x, const char *xml, size_t n, struct husk_err *err) {
  if (n > S3_XML_MAX)
    return husk_fail(err, E2BIG, "The XML you provided was larger than the maximum allowed");
  x->p = XML_ParserCreate("UTF-8");
  if (!x->p)
    return husk_error(err, ENOMEM, "XML parser");
  XML_SetUserData(x->p, x);
  XML_SetElementHandler(x->p, on_start, on_end);
  XML_SetCharacterDataHandler(x->p, on_text);
  XML_SetStartDoctypeDeclHandler(x->p, on_doctype);
  enum XML_Status st = XML_Parse(x->p, xml ? xml : "", (int)n, XML_TRUE);
  XML_ParserFree(x->p);
  x->p = NULL;
  if (x->bad || st != XML_STATUS_OK)
    return husk_fail(err, EBADMSG,
                     "The XML you provided was not well-formed or did not validate against our "
                     "published schema%s%s",
                     x->why ? ": " : "", x->why ? x->why : "");
  return 0;
}

int s3_parse_complete(const char *xml, size_t n, struct store_part **parts, size_t *nparts,
                      struct husk_err *err) {
  struct px *x = calloc(1, sizeof *x);
  if (!x)
    return husk_error(err, ENOMEM, "XML");
  x->kind = K_COMPLETE;
  x->root = "CompleteMultipartUpload";
  int rc = run(x, xml, n, err);
  if (rc == 0 && x->nparts == 0)
    rc = husk_fail(err, EBADMSG, "The XML you provided was not well-formed or did not validate against our published schema: no parts");
  if (rc == 0) {
    *parts = x->parts;
    *nparts = x->nparts;
  } else {
    free(x->parts);
  }
  free(x);
  return rc;
}

int s3_parse_delete(const char *xml, size_t n, char ***keys, size_t *nkeys, bool *quiet,
                    struct husk_err *err) {
  struct px *x = calloc(1, sizeof *x);
  if (!x)
    return husk_error(err, ENOMEM, "XML");
  x->kind = K_DELETE;
  x->root = "Delete";
  int rc = run(x, xml, n, err);
  if (rc == 0 && x->nkeys == 0)
    rc = husk_fail(err, EBADMSG, "The XML you provided was not well-formed or did not validate against our published schema: no objects");
  free(x->cur_key);
  if (rc == 0) {
    *keys = x->keys;
    *nkeys = x->nkeys;
    *quiet = x->quiet;
  } else {
    for (size_t i = 0; i < x->nkeys; i++)
      free(x->keys[i]);
    free(x->keys);
  }
  free(x);
  return rc;
}

int s3_parse_check(const char *xml, size_t n, const char *root, struct husk_err *err) {
  struct px *x = calloc(1, sizeof *x);
  if (!x)
    return husk_error(err, ENOMEM, "XML");
  x->kind = K_CHECK;
  x->root = root;
  int rc = run(x, xml, n, err);
  free(x);
  return rc;
}
