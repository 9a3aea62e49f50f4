/* A template made from a Debian root (template.h: template_create_debian).
 *
 * debootstrap fills a directory of the import's work area from the Debian
 * mirror the operator names (by default the first one of the host's apt
 * sources); the tree is written as one layer (layer_write.c) and imported
 * like any image, with a config of our own.  debootstrap runs as the
 * host's root, with the same trust as the host's own apt: only the
 * operator creates these (the command line; never a tenant's request). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/evp.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "template/template_internal.h"
#include "util/cleanup.h"

#define DEBOOTSTRAP "/usr/sbin/debootstrap"
#define DEFAULT_MIRROR "http://deb.debian.org/debian"
#define MAX_PACKAGES 256

extern char **environ;

static bool word_ok(const char *s, const char *extra, size_t max) {
  size_t n = strlen(s);
  if (n == 0 || n > max)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr(extra, c);
    if (!ok || (i == 0 && !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))))
      return false;
  }
  return true;
}

/* The first http(s) mirror of the host's apt sources for Debian, else the
 * default. */
static void host_mirror(char *out, size_t len) {
  snprintf(out, len, "%s", DEFAULT_MIRROR);
  static const char *const files[] = {"/etc/apt/sources.list.d/debian.sources",
                                      "/etc/apt/sources.list"};
  for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
    FILE *fp = fopen(files[f], "re");
    if (!fp)
      continue;
    char line[1024];
    while (fgets(line, sizeof line, fp)) {
      char *u = strstr(line, "http");
      if (!u || line[0] == '#' || strstr(line, "security"))
        continue;
      u[strcspn(u, " \t\r\n")] = '\0';
      if (!strncmp(u, "http://", 7) || !strncmp(u, "https://", 8)) {
        snprintf(out, len, "%s", u);
        fclose(fp);
        return;
      }
    }
    fclose(fp);
  }
}

/* The comma-separated package list's longest length, NUL included. */
#define PACKAGES_MAX 8192

static const char *arch_name(void) {
  struct utsname u;
  if (uname(&u) == 0 && !strcmp(u.machine, "aarch64"))
    return "arm64";
  return "amd64";
}

/* The proxy variables debootstrap (its wget) is given from husk's own
 * environment. */
static const char *const proxy_vars[] = {"http_proxy", "https_proxy", "no_proxy",
                                         "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"};
enum { NPROXY = sizeof proxy_vars / sizeof proxy_vars[0] };

static void free_proxy_env(char *(*env)[NPROXY]) {
  for (size_t i = 0; i < NPROXY; i++)
    free((*env)[i]);
}

/* debootstrap SUITE DIR MIRROR, its output to `log_fd`. */
static int run_debootstrap(const char *suite, const char *packages, const char *dir,
                           const char *mirror, int log_fd, struct husk_err *err) {
  if (access(DEBOOTSTRAP, X_OK) < 0)
    return husk_error(err, errno, "cannot run `%s` (install the debootstrap package)", DEBOOTSTRAP);
  /* The list is at most PACKAGES_MAX bytes (checked by the caller). */
  char include[sizeof "--include=" + PACKAGES_MAX];
  snprintf(include, sizeof include, "--include=%s", packages);
  char *argv[8];
  size_t n = 0;
  argv[n++] = DEBOOTSTRAP;
  argv[n++] = "--variant=minbase";
  if (packages[0])
    argv[n++] = include;
  argv[n++] = (char *)suite;
  argv[n++] = (char *)dir;
  argv[n++] = (char *)mirror;
  argv[n] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (log_fd >= 0) {
    posix_spawn_file_actions_adddup2(&fa, log_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, log_fd, 2);
  }
  /* A fixed environment, but for the proxy settings of husk's own: a host
   * behind a proxy reaches its mirror through it as its apt does.  (Their
   * values, which may hold credentials, are never logged.) */
  char *envp[3 + NPROXY + 1] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                "LANG=C.UTF-8", "DEBIAN_FRONTEND=noninteractive"};
  __attribute__((cleanup(free_proxy_env))) char *owned[NPROXY] = {0};
  size_t ne = 3;
  for (size_t i = 0; i < NPROXY; i++) {
    const char *v = getenv(proxy_vars[i]);
    if (!v)
      continue;
    if (asprintf(&owned[i], "%s=%s", proxy_vars[i], v) < 0) {
      owned[i] = NULL;
      posix_spawn_file_actions_destroy(&fa);
      return husk_error(err, ENOMEM, "debootstrap's environment");
    }
    envp[ne++] = owned[i];
  }
  envp[ne] = NULL;
  pid_t pid;
  int rc = posix_spawn(&pid, DEBOOTSTRAP, &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    return husk_error(err, rc, "cannot start debootstrap");
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR)
      return husk_error(err, errno, "debootstrap");
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return husk_fail(err, EIO,
                     "debootstrap of `%s` from %s failed (exit %d): its log says why (is the "
                     "mirror reachable, are the packages in the suite?)",
                     suite, mirror, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  return 0;
}

/* "user" (uid and gid 1000, home /workspace) in the root's passwd and
 * group, unless it has a uid 1000 already. */
static int add_box_user(const char *root, struct husk_err *err) {
  static const struct {
    const char *file, *line, *probe;
  } add[] = {{"etc/passwd", "user:x:1000:1000:box user:/workspace:/bin/bash\n", ":x:1000:"},
             {"etc/group", "user:x:1000:\n", ":x:1000:"}};
  for (size_t i = 0; i < sizeof add / sizeof *add; i++) {
    char path[PATH_MAX + 16], buf[65536];
    snprintf(path, sizeof path, "%s/%s", root, add[i].file);
    cleanup_close int fd = open(path, O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
      return husk_error(err, errno, "cannot open the Debian root's `/%s`", add[i].file);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n < 0)
      return husk_error(err, errno, "cannot read the Debian root's `/%s`", add[i].file);
    buf[n] = '\0';
    if (strstr(buf, add[i].probe))
      continue;
    if (write(fd, add[i].line, strlen(add[i].line)) != (ssize_t)strlen(add[i].line))
      return husk_error(err, errno, "cannot add the box user to `/%s`", add[i].file);
  }
  return 0;
}

static char *config_for(const char *diff_id, const char *suite) {
  json_t *c =
      json_pack("{s:s, s:s, s:{s:[s], s:[s], s:s, s:s, s:{s:s}}, s:{s:s, s:[s]}}", "architecture",
                arch_name(), "os", "linux", "config", "Env",
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "Cmd",
                "/bin/bash", "WorkingDir", "/workspace", "User", "user", "Labels",
                "org.husk.debian.suite", suite, "rootfs", "type", "layers", "diff_ids", diff_id);
  char *s = c ? json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(c);
  return s;
}

static void sha256_hex(const char *s, char out[LAYER_DIGEST_SIZE]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned l = 0;
  EVP_Digest(s, strlen(s), md, &l, EVP_sha256(), NULL);
  char *p = out + snprintf(out, LAYER_DIGEST_SIZE, "sha256:");
  for (unsigned i = 0; i < l && i < 32; i++)
    p += snprintf(p, 3, "%02x", md[i]);
}

int template_create_debian(struct template_store *ts, const char *tenant, const char *name,
                           const struct template_debian *d, struct state_template *out,
                           struct husk_err *err) {
  if (import_check_new(ts, tenant, name, err) < 0)
    return -1;
  if (!word_ok(d->suite, "-", 32))
    return husk_fail(err, EINVAL, "`%s` is not a Debian suite name", d->suite);
  size_t np = 0;
  for (size_t i = 0; d->packages && d->packages[i]; i++, np++)
    if (!word_ok(d->packages[i], "+-.", 128) || np >= MAX_PACKAGES)
      return husk_fail(err, EINVAL, "`%.128s` is not a Debian package name (or too many)",
                       d->packages[i]);
  char mirror[512];
  if (d->mirror) {
    if ((strncmp(d->mirror, "http://", 7) && strncmp(d->mirror, "https://", 8)) ||
        strlen(d->mirror) >= sizeof mirror || strpbrk(d->mirror, " \t\n'\"\\"))
      return husk_fail(err, EINVAL, "the mirror is an http:// or https:// URL");
    snprintf(mirror, sizeof mirror, "%s", d->mirror);
  } else {
    host_mirror(mirror, sizeof mirror);
  }
  char packages[PACKAGES_MAX] = "";
  size_t o = 0;
  for (size_t i = 0; i < np; i++) {
    int w = snprintf(packages + o, sizeof packages - o, "%s%s", i ? "," : "", d->packages[i]);
    if (w < 0 || (size_t)w >= sizeof packages - o)
      return husk_fail(err, EINVAL, "the package list is too long");
    o += (size_t)w;
  }
  struct import im = {0};
  struct image img = {0};
  struct image_layer layer = {0};
  cleanup_close int tree = -1, blob = -1;
  int rc = -1;
  if (import_begin(ts, tenant, &im, err) < 0)
    goto out;
  char root[PATH_MAX];
  if (snprintf(root, sizeof root, "%s/templates/tmp/%s/debian", ts->cfg.data_dir, im.work) >=
      (int)sizeof root) {
    husk_fail(err, ENAMETOOLONG, "the data directory's path is too long");
    goto out;
  }
  ts_log(ts, "template %s: debootstrap %s from %s%s%s", name, d->suite, mirror, np ? " with " : "",
         packages);
  if (run_debootstrap(d->suite, packages, root, mirror, d->log_fd, err) < 0)
    goto out;
  /* The box user of every husk box, as in the default template. */
  if (add_box_user(root, err) < 0)
    goto out;
  tree = openat(im.wfd, "debian", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  blob = openat(im.wfd, "layer.tar", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (tree < 0 || blob < 0) {
    husk_error(err, errno, "the Debian root");
    goto out;
  }
  struct layer_written w;
  if (layer_write_tree(tree, 0, NULL, blob, &w, err) < 0 || fsync(blob) < 0) {
    husk_error_wrap(err, "cannot write the Debian root as a layer");
    goto out;
  }
  snprintf(layer.digest, sizeof layer.digest, "%s", w.diff_id);
  snprintf(layer.diff_id, sizeof layer.diff_id, "%s", w.diff_id);
  layer.size = w.size;
  if (!(layer.blob = strdup("layer.tar")) || !(img.config_json = config_for(w.diff_id, d->suite))) {
    husk_error(err, ENOMEM, "Debian template");
    goto out;
  }
  sha256_hex(img.config_json, img.config_digest);
  img.layers = &layer;
  img.nlayers = 1;
  char **ids;
  size_t nids;
  if (image_config_parse(img.config_json, strlen(img.config_json), &img.config, &ids, &nids, err) <
      0)
    goto out;
  for (size_t i = 0; i < nids; i++)
    free(ids[i]);
  free(ids);
  rc = import_commit(&im, im.wfd, true, tenant, name, "debian", &img, out, err);
out:
  img.layers = NULL;
  img.nlayers = 0;
  free(layer.blob);
  image_free(&img);
  import_end(&im);
  return rc;
}
