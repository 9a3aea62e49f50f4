/* The object store itself: opening it (its directories, the master key,
 * then the sweep of what a crash left), its settings, and the two things
 * every part of the write path shares: the log and the unlink of a file
 * no row names any more (see store.h for the write discipline). */
#define _GNU_SOURCE
#include "storage/store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "state/state.h"
#include "storage/remote.h"
#include "storage/store_internal.h"
#include "util/disk_reserve.h"
#include "util/cleanup.h"
#include "util/parse.h"

/* Without a configured log, lines go to stderr. */
static void log_stderr(void *ctx, const char *line) {
  (void)ctx;
  fprintf(stderr, "husk: storage: %s\n", line);
}

void store_log(struct store *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  husk_vlog(s->log ? s->log : log_stderr, s->log_ctx, fmt, ap);
  va_end(ap);
}

void store_unlink(struct store *s, int dirfd, const char *name) {
  /* The commit that stopped naming the file must be on disk first (an
   * API request defers its syncs): a power loss could bring the row back
   * without its file.  If it cannot be, the file stays, for the next
   * start's sweep. */
  struct husk_err err;
  if (state_durable_now(s->st, &err) < 0) {
    store_log(s, "kept `%s`: %s", name, err.msg);
    return;
  }
  if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
    store_log(s, "cannot remove unused file `%s`: %s", name, strerror(errno));
}

static int open_subdir(struct store *s, const char *name, int *fd, struct husk_err *err) {
  if (mkdirat(s->dirfd, name, 0700) < 0 && errno != EEXIST)
    return husk_error(err, errno, "cannot create `%s/%s`", s->dir, name);
  *fd = openat(s->dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (*fd < 0)
    return husk_error(err, errno, "cannot open `%s/%s`", s->dir, name);
  return 0;
}

int store_open(struct store **out, const struct store_config *cfg, struct husk_err *err) {
  struct store *s = calloc(1, sizeof *s);
  if (!s)
    return husk_error(err, ENOMEM, "store");
  s->dirfd = s->objfd = s->tmpfd = s->partfd = -1;
  s->st = cfg->state;
  s->log = cfg->log;
  s->log_ctx = cfg->log_ctx;
  snprintf(s->region, sizeof s->region, "%s", cfg->region ? cfg->region : "us-east-1");
  s->quota = cfg->quota_bytes;
  if (disk_reserve_parse(cfg->data_reserve, &s->reserve, err) < 0)
    goto fail;
  /* No public URL: no links on the embedded store (until one is set,
   * e.g. once the S3 listener has its port). */
  s->public_url = strdup(cfg->public_url ? cfg->public_url : "");
  if (asprintf(&s->dir, "%s/storage", cfg->data_dir) < 0) {
    s->dir = NULL;
    husk_error(err, ENOMEM, "store");
    goto fail;
  }
  if (!s->public_url) {
    husk_error(err, ENOMEM, "store");
    goto fail;
  }
  if (mkdir(s->dir, 0700) < 0 && errno != EEXIST) {
    husk_error(err, errno, "cannot create `%s`", s->dir);
    goto fail;
  }
  s->dirfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (s->dirfd < 0) {
    husk_error(err, errno, "cannot open `%s`", s->dir);
    goto fail;
  }
  struct stat st;
  if (fstat(s->dirfd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
    husk_fail(err, EPERM, "`%s` must be a directory of ours with mode 0700", s->dir);
    goto fail;
  }
  if (open_subdir(s, "objects", &s->objfd, err) < 0 || open_subdir(s, "tmp", &s->tmpfd, err) < 0 ||
      open_subdir(s, "parts", &s->partfd, err) < 0 || store_master_key_load(s, err) < 0 ||
      store_sweep(s, err) < 0)
    goto fail;
  *out = s;
  return 0;
fail:
  store_close(s);
  return -1;
}

void store_close(struct store *s) {
  if (!s)
    return;
  close_quiet(s->dirfd);
  close_quiet(s->objfd);
  close_quiet(s->tmpfd);
  close_quiet(s->partfd);
  OPENSSL_cleanse(s->master, sizeof s->master);
  remote_close(s->remote);
  free(s->dir);
  free(s->public_url);
  free(s);
}

const char *store_region(const struct store *s) { return s->region; }
const char *store_public_url(const struct store *s) { return s->public_url; }

void store_set_remote(struct store *s, struct remote *r) {
  remote_close(s->remote);
  s->remote = r;
}

struct remote *store_remote(const struct store *s) {
  return s->remote;
}

int store_tmpfile(struct store *s, struct husk_err *err) {
  int fd = openat(s->tmpfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    return husk_error(err, errno, "cannot create a temporary file in `%s/tmp`", s->dir);
  return fd;
}

int store_set_public_url(struct store *s, const char *url) {
  char *u = strdup(url);
  if (!u)
    return -1;
  free(s->public_url);
  s->public_url = u;
  return 0;
}
