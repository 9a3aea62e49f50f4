/* A build context that arrives as a tar stream (the HTTP API's builds):
 * unpacked with the layer extractor, whose rules hold for it as for any
 * untrusted tar (entries beneath the directory, no devices, no setuid, no
 * extended attributes, limits), into a work directory under tmp/ that the
 * end of the build or the store's next open removes. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "template/template_internal.h"
#include "util/id.h"

/* The extractor speaks of a layer; a context is not one. */
static void context_words(struct husk_err *err) {
  static const struct {
    const char *from, *to;
  } words[] = {
      {"damaged layer (start): ", "not a tar (plain, gzip or zstd): "},
      {"damaged layer", "damaged tar"},
      {"layer entry", "entry"},
      {"the layer", "it"},
  };
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
    size_t fl = strlen(words[i].from);
    if (!strncmp(err->msg, words[i].from, fl)) {
      char rest[sizeof err->msg];
      snprintf(rest, sizeof rest, "%s", err->msg + fl);
      snprintf(err->msg, sizeof err->msg, "%s%s", words[i].to, rest);
      return;
    }
  }
}

int template_context_unpack(struct template_store *ts, int tar_fd, uint64_t max_bytes,
                            struct template_context *out, struct husk_err *err) {
  *out = (struct template_context){.ts = ts, .dir = -1, .work = -1, .gc = -1};
  /* Held (shared) while the context lives: another process's store open
   * empties tmp/ only when no one holds it. */
  if ((out->gc = ts_gc_hold(ts, LOCK_SH)) < 0)
    return husk_error(err, errno, "cannot lock the template store");
  if (disk_reserve_check(ts->root, &ts->reserve, 0, err) < 0) {
    husk_error_wrap(err, "the build context cannot be stored");
    template_context_end(out);
    return -1;
  }
  if (id_new("ctx-", 12, out->name, sizeof out->name, err) < 0 ||
      (out->work = ts_subdir(ts->tmp, out->name, err)) < 0) {
    out->name[0] = '\0';
    template_context_end(out);
    return -1;
  }
  if ((out->dir = ts_subdir(out->work, "context", err)) < 0) {
    template_context_end(out);
    return -1;
  }
  struct layer_limits lim = {.max_bytes = max_bytes ? max_bytes : TEMPLATE_CONTEXT_MAX,
                             .max_entries = ts->cfg.max_layer_entries};
  struct layer_result res;
  if (layer_extract(tar_fd, out->dir, &lim, &res, err) < 0) {
    context_words(err);
    husk_error_wrap(err, "the build context");
    template_context_end(out);
    return -1;
  }
  return 0;
}

void template_context_end(struct template_context *c) {
  if (c->dir >= 0)
    close(c->dir);
  if (c->work >= 0)
    close(c->work);
  if (c->name[0])
    rmtree_at(c->ts->tmp, c->name);
  ts_gc_release(c->ts, c->gc, false);
  c->dir = c->work = c->gc = -1;
  c->name[0] = '\0';
}
