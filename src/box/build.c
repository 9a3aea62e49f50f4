/* Dockerfile builds (box.h: box_build).
 *
 * FROM names a template; then, in order:
 *   RUN       runs in a box of the image so far (a box like any other: its
 *             isolation, its limits, no network unless the build's egress
 *             policy allows hosts), as the image's user, in its working
 *             directory, with its ENV and the ARGs; the box's own layer
 *             (what the step changed) becomes the image's next layer
 *   COPY/ADD  files of the build context, resolved beneath it (a symlink
 *             leading out of it is refused), become the next layer
 *   ENV, ARG, WORKDIR, USER, LABEL, CMD, ENTRYPOINT change the config
 * Each RUN is cached by a key made from everything its result depends on:
 * the key of the step before (so the base, every earlier step and the
 * content of every earlier COPY), its text, the env, user and working
 * directory.  A rebuild with one changed line redoes only what follows it.
 * The image is recorded as a template at the end; a failed step fails the
 * build, its output having been streamed, and leaves no template. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box/box.h"
#include "box/box_internal.h"
#include "box/copy.h"
#include "egress/policy.h"
#include "jail/limits.h"
#include "jail/syscalls.h"
#include "template/dockerfile.h"
#include "template/layer.h"
#include "template/template.h"
#include "util/cleanup.h"
#include "util/fileio.h"

#define BUILD_STEP_TIMEOUT_MS (30ULL * 60 * 1000)
#define KEY_SIZE 72

/* What the box's own layer holds that is husk's, not the step's: mount
 * points made for it and husk's /etc files. */
static const char *const not_the_steps[] = {
    "workspace", "proc", "dev", "tmp", "etc/hosts", "etc/hostname", "etc/resolv.conf", NULL};

struct build {
  struct husk_mgr *m;
  const struct box_build_req *req;
  struct template_asm *asm_;
  json_t *config;     /* the image config so far */
  json_t *args;       /* ARG name -> value (RUN's env, not the image's) */
  char key[KEY_SIZE]; /* of everything so far */
  struct husk_err *err;
  unsigned copies;
  int context; /* the request's, or the one unpacked from its tar */
};

static void say(struct build *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct build *b, const char *fmt, ...) {
  if (!b->req->log)
    return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  size_t len = (size_t)n < sizeof line - 1 ? (size_t)n : sizeof line - 2;
  line[len++] = '\n';
  b->req->log(b->req->log_ctx, line, len);
}

/* key = sha256(key | parts...) */
static void chain(char key[KEY_SIZE], const char *const *parts) {
  EVP_MD_CTX *c = EVP_MD_CTX_new();
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned l = 0;
  if (!c || EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1) {
    EVP_MD_CTX_free(c);
    key[0] = '\0'; /* no key: no cache hit */
    return;
  }
  EVP_DigestUpdate(c, key, strlen(key));
  for (size_t i = 0; parts[i]; i++) {
    EVP_DigestUpdate(c, "\n", 1);
    EVP_DigestUpdate(c, parts[i], strlen(parts[i]));
  }
  EVP_DigestFinal_ex(c, md, &l);
  EVP_MD_CTX_free(c);
  char *p = key + snprintf(key, KEY_SIZE, "sha256:");
  for (unsigned i = 0; i < l && i < 32; i++)
    p += snprintf(p, 3, "%02x", md[i]);
}

static json_t *cfg_obj(struct build *b) {
  json_t *c = json_object_get(b->config, "config");
  if (!json_is_object(c)) {
    c = json_object();
    json_object_set_new(b->config, "config", c);
  }
  return c;
}

static const char *cfg_str(struct build *b, const char *key) {
  const char *s = json_string_value(json_object_get(cfg_obj(b), key));
  return s ? s : "";
}

/* Env NAME=VALUE of the config, NAME replaced if there. */
static void set_env(struct build *b, const char *name, const char *value) {
  json_t *env = json_object_get(cfg_obj(b), "Env");
  if (!json_is_array(env)) {
    env = json_array();
    json_object_set_new(cfg_obj(b), "Env", env);
  }
  size_t nl = strlen(name), i;
  json_t *e;
  char *entry = NULL;
  if (asprintf(&entry, "%s=%s", name, value) < 0)
    return;
  json_array_foreach(env, i, e) {
    const char *s = json_string_value(e);
    if (s && !strncmp(s, name, nl) && s[nl] == '=') {
      json_array_set_new(env, i, json_string(entry));
      free(entry);
      return;
    }
  }
  json_array_append_new(env, json_string(entry));
  free(entry);
}

/* The image so far as a template row of our own (for the step's box). */
static int image_so_far(struct build *b, struct state_template *t) {
  memset(t, 0, sizeof *t);
  const char *ids[IMAGE_MAX_LAYERS];
  size_t n = template_asm_layers(b->asm_, ids);
  json_t *layers = json_array();
  for (size_t i = n; layers && i-- > 0;) { /* base first */
    char d[80];
    snprintf(d, sizeof d, "sha256:%s", ids[i]);
    json_array_append_new(layers, json_pack("{s:s, s:s}", "diff_id", d, "digest", d));
  }
  snprintf(t->id, sizeof t->id, "build");
  snprintf(t->name, sizeof t->name, "%s", b->req->name);
  t->layers_json = layers ? json_dumps(layers, JSON_COMPACT) : NULL;
  json_decref(layers);
  json_t *c = json_deep_copy(b->config);
  json_object_set_new(c, "rootfs", json_pack("{s:s, s:[]}", "type", "layers", "diff_ids"));
  t->config_json = c ? json_dumps(c, JSON_COMPACT) : NULL;
  json_decref(c);
  if (!t->layers_json || !t->config_json) {
    state_template_free(t);
    return husk_error(b->err, ENOMEM, "build");
  }
  return 0;
}

static int sink(void *ctx, int stream, const char *buf, size_t len) {
  struct build *b = ctx;
  if (b->req->log)
    b->req->log(b->req->log_ctx, buf, len);
  return 0;
}

/* RUN: a box of the image so far; its own layer becomes the next one. */
static int run_step(struct build *b, const struct df_step *st, size_t no) {
  const struct box_build_req *r = b->req;
  json_t *env = json_object_get(cfg_obj(b), "Env");
  char *env_text = json_dumps(env ? env : json_null(), JSON_COMPACT | JSON_ENCODE_ANY);
  char *args_text = json_dumps(b->args, JSON_COMPACT | JSON_SORT_KEYS);
  const char *parts[] = {"RUN",
                         st->text,
                         env_text ? env_text : "",
                         args_text ? args_text : "",
                         cfg_str(b, "User"),
                         cfg_str(b, "WorkingDir"),
                         NULL};
  chain(b->key, parts);
  free(env_text);
  free(args_text);
  char cached[LAYER_DIGEST_SIZE];
  struct husk_err e2;
  if (!r->no_cache && b->key[0] &&
      template_cache_get(b->m->cfg.templates, r->owner, b->key, cached, &e2) == 0 &&
      template_asm_add_layer(b->asm_, cached, &e2) == 0) {
    say(b, "step %zu: %s (cached)", no, st->text);
    return 0;
  }
  say(b, "step %zu: %s", no, st->text);
  /* The step's box: the image so far, the ARGs as env too. */
  size_t nargs = json_object_size(b->args);
  cleanup_free char **renv = calloc(nargs + 1, sizeof *renv);
  if (!renv)
    return husk_error(b->err, ENOMEM, "build");
  const char *k;
  json_t *v;
  size_t i = 0;
  json_object_foreach(b->args, k, v) {
    if (asprintf(&renv[i], "%s=%s", k, json_string_value(v)) < 0)
      return husk_error(b->err, ENOMEM, "build");
    i++;
  }
  struct state_template t;
  int rc = image_so_far(b, &t);
  struct box_image *img = rc == 0 ? calloc(1, sizeof *img) : NULL;
  if (rc == 0 && !img) {
    state_template_free(&t);
    rc = husk_error(b->err, ENOMEM, "build");
  }
  if (rc == 0 && box_image_of(b->m, &t, renv, img, b->err) < 0) {
    free(img);
    img = NULL;
    rc = -1;
  }
  struct husk_box_info bi = {0};
  uint64_t step_ms = r->limits.timeout_ms ? r->limits.timeout_ms : BUILD_STEP_TIMEOUT_MS;
  /* Tagged: a step's box shows in the tenant's listing as its build's. */
  char meta[128];
  snprintf(meta, sizeof meta, "{\"husk.build\":\"%s\"}", r->name);
  struct husk_box_spec spec = {.limits = r->limits,
                               .network = r->egress_json ? "egress" : NULL,
                               .egress_json = r->egress_json,
                               .metadata_json = meta};
  spec.limits.timeout_ms = step_ms + 60 * 1000; /* the box outlives its step */
  bool made = rc == 0 && box_create(b->m, r->tenant, &spec, img, NULL, &bi, b->err) == 0;
  for (i = 0; i < nargs; i++)
    free(renv[i]);
  if (img) {
    box_image_free(img);
    free(img);
  }
  if (!made)
    return husk_error_wrap(b->err, "step %zu (`%.200s`): cannot create its box", no, st->text);
  char *sh[] = {"/bin/sh", "-c", st->args[0], NULL};
  struct husk_exec_req x = {.argv = st->shell ? sh : st->args,
                            .timeout_ms = step_ms,
                            .output_limit = HUSK_MAX_OUTPUT,
                            .sink = sink,
                            .sink_ctx = b,
                            .cancel_fd = r->cancel_fd};
  struct husk_exec_result res;
  rc = husk_box_exec(b->m, r->tenant, bi.id, &x, &res, b->err);
  if (rc == 0 && (res.reason != HUSK_REASON_EXITED || res.exit_code != 0))
    rc = husk_fail(b->err, EINVAL, "step %zu (`%.200s`) failed: %s, exit code %d%s%s", no, st->text,
                   husk_reason_name(res.reason), res.exit_code, res.message[0] ? ": " : "",
                   res.message);
  /* Its changes, from the box's own layer. */
  struct husk_fs fs = {.fs = -1};
  if (rc == 0 && husk_box_open_fs(b->m, r->tenant, bi.id, &fs, b->err) == 0) {
    cleanup_close int upper =
        openat(fs.fs, "rootfs/upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    char diff[LAYER_DIGEST_SIZE];
    if (upper < 0)
      rc = husk_error(b->err, errno, "step %zu: cannot read its changes", no);
    else if (template_asm_add_tree(b->asm_, upper, fs.uid - HUSK_BOX_UID, not_the_steps, diff,
                                   b->err) < 0)
      rc = husk_error_wrap(b->err, "step %zu: cannot keep its changes", no);
    else if (!r->no_cache && b->key[0] &&
             template_cache_put(b->m->cfg.templates, r->owner, b->key, diff, &e2) < 0) {
      /* The entry would keep the layer past the owner's template storage,
       * or the owner is being deleted: the build ends here (and the
       * layer goes with it); anything else only costs the cache. */
      if (e2.code == EDQUOT || e2.code == ENOENT) {
        *b->err = e2;
        rc = husk_error_wrap(b->err, "step %zu (`%.200s`)", no, st->text);
      } else {
        say(b, "step %zu: not cached: %s", no, e2.msg);
      }
    }
    husk_fs_close(&fs);
  } else if (rc == 0) {
    rc = -1;
  }
  husk_box_destroy(b->m, r->tenant, bi.id, "stopped", &e2);
  husk_box_info_free(&bi);
  return rc;
}

/* Every directory of a COPY's tree gets one fixed time: the tree (and with
 * it the layer's digest, and the cache keys of the steps after it) then
 * depends on the files copied, not on when the build ran. */
static int fix_dir_times(int dirfd, int depth) {
  static const struct timespec epoch[2] = {{0, 0}, {0, 0}};
  if (depth > 256)
    return -1;
  int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    close_quiet(fd);
    return -1;
  }
  rewinddir(d); /* the duplicate shares the offset of the caller's fd */
  int rc = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_type == DT_DIR && strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0 || fix_dir_times(sub, depth + 1) < 0)
        rc = -1;
      close_quiet(sub);
    }
  closedir(d);
  if (futimens(dirfd, epoch) < 0)
    rc = -1;
  return rc;
}

/* COPY SRC... DST: the sources from the context, under DST (relative to the
 * working directory), as one layer. */
/* An ADD's archive: at most this much unpacked, this many entries. */
#define ADD_MAX_BYTES TEMPLATE_CONTEXT_MAX
#define ADD_MAX_ENTRIES 1000000

/* A fresh directory of the build's work space ("PREFIX<n>"), opened; -1
 * with b->err set. */
static int scratch_dir(struct build *b, const char *prefix, size_t no) {
  int wfd = template_asm_workdir(b->asm_);
  char tname[32];
  snprintf(tname, sizeof tname, "%s%u", prefix, b->copies++);
  if (mkdirat(wfd, tname, 0755) < 0)
    return husk_error(b->err, errno, "step %zu", no);
  int fd = openat(wfd, tname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return husk_error(b->err, errno, "step %zu", no);
  return fd;
}

/* ADD of the archive at fd `src` into the directory `dir` (of the step's
 * tree; `name` beneath it, made if missing, or NULL: `dir` itself).  The
 * archive is unpacked as a layer is (layer_extract: every entry created
 * beneath a directory of its own, a name that climbs out, a link out of
 * it, a device refused or dropped, setuid bits dropped, bounded) into a
 * fresh directory of the work space, then merged into the destination:
 * owners as the archive has them, or --chown's. */
static int add_archive(struct build *b, int src, int dir, const char *name, uid_t uid, gid_t gid,
                       size_t no, const char *what) {
  cleanup_close int tmp = scratch_dir(b, "add", no);
  if (tmp < 0)
    return -1;
  struct layer_limits lim = {.max_bytes = ADD_MAX_BYTES, .max_entries = ADD_MAX_ENTRIES,
                             .more_filters = true};
  struct layer_result res;
  if (layer_extract(src, tmp, &lim, &res, b->err) < 0)
    return husk_error_wrap(b->err, "step %zu: the archive `%.200s`", no, what);
  cleanup_close int dest = -1;
  if (name) {
    if (mkdirat(dir, name, 0755) < 0 && errno != EEXIST)
      return husk_error(b->err, errno, "step %zu: `%.200s`", no, name);
    dest = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  } else {
    dest = fcntl(dir, F_DUPFD_CLOEXEC, 3);
  }
  if (dest < 0)
    return husk_error(b->err, errno, "step %zu: the destination of `%.200s`", no, what);
  struct copy_opts o = {.uid = uid, .gid = gid, .keep_owner = true, .max_depth = 256};
  if (copy_tree(tmp, dest, &o, NULL, b->err) < 0)
    return husk_error_wrap(b->err, "step %zu: `%.200s`", no, what);
  return 0;
}

static int copy_step(struct build *b, const struct df_step *st, size_t no) {
  say(b, "step %zu: %s", no, st->text);
  if (b->context < 0)
    return husk_fail(b->err, EINVAL, "step %zu: COPY needs a build context", no);
  const char *dst = st->args[st->nargs - 1];
  char full[PATH_MAX];
  const char *wd = cfg_str(b, "WorkingDir");
  if (dst[0] == '/')
    snprintf(full, sizeof full, "%s", dst);
  else if (snprintf(full, sizeof full, "%s/%s", *wd ? wd : "", dst) >= (int)sizeof full)
    return husk_fail(b->err, ENAMETOOLONG, "step %zu: the destination is too long", no);
  bool into_dir = st->nargs > 2 || full[strlen(full) - 1] == '/';
  /* Owner: --chown's numbers (names are not looked up here), else root. */
  uint32_t uid = 0, gid = 0;
  if (st->chown) {
    char *e;
    unsigned long u = strtoul(st->chown, &e, 10);
    unsigned long g = *e == ':' ? strtoul(e + 1, &e, 10) : u;
    if (*e || u > 65535 || g > 65535)
      return husk_fail(b->err, EINVAL,
                       "step %zu: --chown takes numeric ids (UID[:GID]); names are not looked "
                       "up in the image's /etc/passwd",
                       no);
    uid = (uint32_t)u;
    gid = (uint32_t)g;
  }
  cleanup_close int tree = scratch_dir(b, "copy", no);
  if (tree < 0)
    return -1;
  /* The destination's directories, root's (0755), then each source. */
  char parent[PATH_MAX];
  snprintf(parent, sizeof parent, "%s", full);
  if (!into_dir) {
    char *slash = strrchr(parent, '/');
    if (slash)
      *slash = '\0';
  }
  cleanup_close int at = fcntl(tree, F_DUPFD_CLOEXEC, 3);
  for (char *save, *c = strtok_r(parent, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
    if (!strcmp(c, "."))
      continue;
    if (!strcmp(c, ".."))
      return husk_fail(b->err, EINVAL, "step %zu: `..` in the destination", no);
    if (mkdirat(at, c, 0755) < 0 && errno != EEXIST)
      return husk_error(b->err, errno, "step %zu", no);
    int next = openat(at, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0)
      return husk_error(b->err, errno, "step %zu", no);
    close(at);
    at = next;
  }
  for (size_t i = 0; i + 1 < st->nargs; i++) {
    const char *src = st->args[i];
    /* Beneath the context: a symlink on the way that leads out, or `..`
     * above it, is refused (RESOLVE_BENEATH). */
    cleanup_close int s = sys_openat2(b->context, *src ? src : ".", O_RDONLY | O_CLOEXEC, 0,
                                      RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
    if (s < 0) {
      if (errno == EXDEV || errno == ELOOP)
        return husk_fail(b->err, EINVAL,
                         "step %zu: `%.200s` leads out of the build context (a symlink or `..`)",
                         no, src);
      return husk_error(b->err, errno, "step %zu: `%.200s` of the build context", no, src);
    }
    struct stat sst;
    if (fstat(s, &sst) < 0)
      return husk_error(b->err, errno, "step %zu: `%.200s`", no, src);
    struct copy_opts o = {.uid = uid, .gid = gid, .max_depth = 256};
    if (S_ISDIR(sst.st_mode)) {
      if (copy_tree(s, at, &o, NULL, b->err) < 0)
        return husk_error_wrap(b->err, "step %zu: `%.200s`", no, src);
      continue;
    }
    if (!S_ISREG(sst.st_mode))
      return husk_fail(b->err, EINVAL, "step %zu: `%.200s` is not a file or directory", no, src);
    if (st->add) {
      bool archive;
      if (layer_is_archive(s, &archive, b->err) < 0)
        return husk_error_wrap(b->err, "step %zu: `%.200s`", no, src);
      if (archive) {
        /* Unpacked into the destination, a directory (as Docker's ADD). */
        const char *last = into_dir ? NULL : strrchr(full, '/');
        if (add_archive(b, s, at, last ? last + 1 : into_dir ? NULL : full,
                        st->chown ? uid : (uid_t)-1, st->chown ? gid : (gid_t)-1, no, src) < 0)
          return -1;
        continue;
      }
    }
    const char *base = into_dir ? strrchr(src, '/') : strrchr(full, '/');
    base = base ? base + 1 : into_dir ? src : full;
    cleanup_close int d =
        openat(at, base, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, sst.st_mode & 0777);
    if (d < 0)
      return husk_error(b->err, errno, "step %zu: `%.200s`", no, base);
    char buf[65536];
    ssize_t n;
    while ((n = read(s, buf, sizeof buf)) > 0)
      if (write_all(d, buf, (size_t)n) < 0)
        return husk_error(b->err, errno, "step %zu: `%.200s`", no, base);
    /* The source's times, as copy_tree keeps them: the same context gives
     * the same layer (and cache key) whenever it is built. */
    struct timespec ts[2] = {sst.st_atim, sst.st_mtim};
    if (n < 0 || fchown(d, uid, gid) < 0 || fchmod(d, sst.st_mode & 0777) < 0 ||
        futimens(d, ts) < 0)
      return husk_error(b->err, errno, "step %zu: `%.200s`", no, base);
  }
  if (fix_dir_times(tree, 0) < 0)
    return husk_error(b->err, errno, "step %zu: the copied tree", no);
  char diff[LAYER_DIGEST_SIZE];
  if (template_asm_add_tree(b->asm_, tree, 0, NULL, diff, b->err) < 0)
    return husk_error_wrap(b->err, "step %zu", no);
  /* What follows depends on the files' content: the layer's digest. */
  const char *parts[] = {"COPY", st->text, diff, NULL};
  chain(b->key, parts);
  return 0;
}

static json_t *run_form(const struct df_step *st) {
  if (st->shell)
    return json_pack("[s, s, s]", "/bin/sh", "-c", st->args[0]);
  json_t *a = json_array();
  for (size_t i = 0; a && i < st->nargs; i++)
    json_array_append_new(a, json_string(st->args[i]));
  return a;
}

static int config_step(struct build *b, const struct df_step *st, size_t no) {
  json_t *c = cfg_obj(b);
  switch (st->op) {
  case DF_ENV:
    for (size_t i = 0; i + 1 < st->nargs; i += 2)
      set_env(b, st->args[i], st->args[i + 1]);
    break;
  case DF_ARG:
    for (size_t i = 0; i + 1 < st->nargs; i += 2)
      json_object_set_new(b->args, st->args[i], json_string(st->args[i + 1]));
    break;
  case DF_WORKDIR: {
    const char *wd = st->args[0], *cur = cfg_str(b, "WorkingDir");
    char full[PATH_MAX];
    if (wd[0] == '/')
      snprintf(full, sizeof full, "%s", wd);
    else
      snprintf(full, sizeof full, "%s/%s", *cur ? cur : "", wd);
    json_object_set_new(c, "WorkingDir", json_string(full));
    break;
  }
  case DF_USER: json_object_set_new(c, "User", json_string(st->args[0])); break;
  case DF_LABEL: {
    json_t *l = json_object_get(c, "Labels");
    if (!json_is_object(l)) {
      l = json_object();
      json_object_set_new(c, "Labels", l);
    }
    for (size_t i = 0; i + 1 < st->nargs; i += 2)
      json_object_set_new(l, st->args[i], json_string(st->args[i + 1]));
    break;
  }
  case DF_CMD: json_object_set_new(c, "Cmd", run_form(st)); break;
  case DF_ENTRYPOINT:
    json_object_set_new(c, "Entrypoint", run_form(st));
    json_object_del(c, "Cmd"); /* as Docker: a new ENTRYPOINT resets CMD */
    break;
  default: return husk_fail(b->err, EINVAL, "step %zu: not a config instruction", no);
  }
  const char *parts[] = {st->text, NULL};
  chain(b->key, parts);
  return 0;
}

char *box_build_egress_policy(const char *const *hosts, size_t n) {
  json_t *rules = json_array();
  for (size_t i = 0; rules && i < n; i++)
    /* Port 80 as well as 443: package mirrors (Debian's, Ubuntu's) are
     * plain HTTP, and apt-get is what RUN steps mostly run. */
    if (json_array_append_new(rules, json_pack("{s:s, s:[i, i]}", "host", hosts[i], "ports", 80,
                                               443)) < 0) {
      json_decref(rules);
      rules = NULL;
    }
  json_t *p = rules ? json_pack("{s:o}", "rules", rules) : NULL;
  char *text = p ? json_dumps(p, JSON_COMPACT) : NULL;
  json_decref(p);
  return text;
}

int box_build_tenant(struct husk_mgr *m, char out[HUSK_TENANT_ID_MAX], struct husk_err *err) {
  for (int tries = 0; tries < 2; tries++) {
    if (husk_tenant_find(m, BOX_BUILD_TENANT, out, err) == 0)
      return 0;
    if (err->code != ENOENT)
      return -1;
    if (husk_tenant_create(m, BOX_BUILD_TENANT, out, err) == 0)
      return 0;
    if (err->code != EEXIST) /* else another build made it meanwhile */
      return -1;
  }
  return -1;
}

/* The Dockerfile at `path` of the context (beneath it, a regular file of
 * at most DOCKERFILE_MAX_BYTES) into a malloc'd buffer. */
static int read_dockerfile(int context, const char *path, char **out, size_t *len,
                           struct husk_err *err) {
  cleanup_close int fd = sys_openat2(context, path, O_RDONLY | O_NOCTTY | O_CLOEXEC, 0,
                                     RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
  if (fd < 0) {
    if (errno == EXDEV || errno == ELOOP)
      return husk_fail(err, EINVAL, "the Dockerfile `%.200s` leads out of the build context",
                       path);
    return husk_error(err, errno, "the Dockerfile `%.200s` of the build context", path);
  }
  struct stat st;
  if (fstat(fd, &st) < 0)
    return husk_error(err, errno, "the Dockerfile `%.200s`", path);
  if (!S_ISREG(st.st_mode))
    return husk_fail(err, EINVAL, "the Dockerfile `%.200s` is not a file", path);
  if (st.st_size > DOCKERFILE_MAX_BYTES)
    return husk_fail(err, EFBIG, "the Dockerfile is larger than %d bytes", DOCKERFILE_MAX_BYTES);
  char *buf = malloc((size_t)st.st_size + 1);
  if (!buf)
    return husk_error(err, ENOMEM, "the Dockerfile");
  /* One byte more than its size: a file that grows meanwhile is noticed. */
  size_t cap = (size_t)st.st_size + 1, n = 0;
  while (n < cap) {
    ssize_t got = read(fd, buf + n, cap - n);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      free(buf);
      return husk_error(err, errno, "the Dockerfile");
    }
    if (got == 0)
      break;
    n += (size_t)got;
  }
  if (n == cap) {
    free(buf);
    return husk_fail(err, EAGAIN, "the Dockerfile changed while it was read");
  }
  *out = buf;
  *len = (size_t)n;
  return 0;
}

static int build_parsed(struct husk_mgr *m, const struct box_build_req *req, int context,
                        const struct dockerfile *df, struct state_template *out,
                        struct husk_err *err);

int box_build(struct husk_mgr *m, const struct box_build_req *req, struct state_template *out,
              struct husk_err *err) {
  if (!m->cfg.templates)
    return husk_fail(err, EINVAL, "this server keeps no templates");
  /* A bad host in the policy fails the build before any step, not at the
   * first RUN's box. */
  if (req->egress_json) {
    cleanup_free struct egress_policy *pol = malloc(sizeof *pol);
    if (!pol)
      return husk_error(err, ENOMEM, "the build's egress policy");
    if (egress_policy_parse(req->egress_json, false, pol, err) < 0)
      return husk_error_wrap(err, "the build's egress hosts");
  }
  struct template_context tc = {.dir = -1, .work = -1, .gc = -1};
  int context = req->context;
  if (req->context_tar >= 0) {
    if (template_context_unpack(m->cfg.templates, req->context_tar, req->context_max, &tc, err) <
        0)
      return -1;
    context = tc.dir;
  }
  cleanup_free char *text = NULL;
  const char *dockerfile = req->dockerfile;
  size_t dockerfile_len = req->dockerfile_len;
  int rc = -1;
  if (!dockerfile) {
    if (context < 0) {
      husk_fail(err, EINVAL, "no Dockerfile");
      goto out;
    }
    if (read_dockerfile(context, req->dockerfile_path ? req->dockerfile_path : "Dockerfile",
                        &text, &dockerfile_len, err) < 0)
      goto out;
    dockerfile = text;
  }
  struct dockerfile df;
  if (dockerfile_parse(dockerfile, dockerfile_len, req->build_args, &df, err) < 0) {
    husk_error_wrap(err, "Dockerfile");
    goto out;
  }
  rc = build_parsed(m, req, context, &df, out, err);
  dockerfile_free(&df);
out:
  template_context_end(&tc);
  return rc;
}

/* The caller gave up (its cancel fd is readable): no further step, and
 * no template from what was done. */
static int check_cancel(const struct box_build_req *r, struct husk_err *err) {
  if (r->cancel_fd < 0)
    return 0;
  struct pollfd p = {.fd = r->cancel_fd, .events = POLLIN};
  if (poll(&p, 1, 0) > 0)
    return husk_fail(err, ECANCELED, "the build was cancelled");
  return 0;
}

static int build_parsed(struct husk_mgr *m, const struct box_build_req *req, int context,
                        const struct dockerfile *df_, struct state_template *out,
                        struct husk_err *err) {
  const struct dockerfile df = *df_;
  struct build b = {.m = m, .req = req, .err = err, .args = json_object(), .context = context};
  struct state_template base = {0};
  cleanup_free char *config = NULL;
  int rc = -1;
  size_t from = 0;
  while (from < df.n && df.steps[from].op != DF_FROM)
    from++; /* ARGs before FROM only serve FROM's substitution */
  const char *bname = df.steps[from].args[0];
  if (!strcmp(bname, "default") || !strcmp(bname, "scratch")) {
    husk_fail(err, EINVAL, "FROM %s: a build starts from an image template (husk template list)",
              bname);
    goto out;
  }
  if (state_template_get(m->cfg.state, req->owner, bname, true, &base, err) < 0) {
    husk_error_wrap(err, "FROM %s", bname);
    goto out;
  }
  if (template_asm_begin(m->cfg.templates, req->owner, req->name, &base, &b.asm_, err) < 0)
    goto out;
  if (!b.args || !(b.config = json_loads(base.config_json, 0, NULL))) {
    husk_error(err, ENOMEM, "build");
    goto out;
  }
  json_object_del(b.config, "rootfs");
  json_object_del(b.config, "history");
  snprintf(b.key, sizeof b.key, "%s", base.config_digest);
  const char *parts[] = {base.layers_json, NULL};
  chain(b.key, parts);
  say(&b, "step 1: FROM %s (%s)", bname, base.id);
  for (size_t i = from + 1; i < df.n; i++) {
    const struct df_step *st = &df.steps[i];
    if (check_cancel(req, err) < 0)
      goto out;
    int r = st->op == DF_RUN    ? run_step(&b, st, i + 1)
            : st->op == DF_COPY ? copy_step(&b, st, i + 1)
                                : config_step(&b, st, i + 1);
    if (r < 0)
      goto out;
  }
  if (check_cancel(req, err) < 0)
    goto out;
  json_object_set_new(b.config, "created", json_string("1970-01-01T00:00:00Z"));
  if (!(config = json_dumps(b.config, JSON_COMPACT | JSON_SORT_KEYS))) {
    husk_error(err, ENOMEM, "build");
    goto out;
  }
  rc = template_asm_commit(b.asm_, config, out, err);
  if (rc == 0)
    say(&b, "built template %s", req->name);
out:
  template_asm_end(b.asm_);
  json_decref(b.config);
  json_decref(b.args);
  state_template_free(&base);
  return rc;
}
