/* The template store: images imported from OCI archives, Docker archives
 * and OCI layout directories (made by tests/template/mkimage.py); layers
 * shared between templates stored once and collected when no template
 * has them; forged digests and diff_ids refused with nothing left behind;
 * names per tenant, shared templates, quotas (the build cache's layers
 * counted); a crashed import's leftovers gone at the next open. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/state.h"
#include "state/template_state.h"
#include "template/template.h"
#include "unit.h"

static char base[] = "/tmp/husk-tpl-XXXXXX";
static char data[300];
static struct state *st;
static struct template_store *ts;
static char tenant[STATE_TENANT_ID_SIZE], other[STATE_TENANT_ID_SIZE];

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
  char cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  return system(cmd);
}

/* An image file from layer directories: mkimage.py ARGS. */
static const char *image(const char *name, const char *args) {
  static char paths[8][400];
  static unsigned next;
  char *path = paths[next++ % 8];
  snprintf(path, sizeof paths[0], "%s/%s", base, name);
  char a[2048];
  size_t o = 0;
  for (const char *p = args; *p && o + 300 < sizeof a;) {
    if (!strncmp(p, "%L%", 3)) {
      o += (size_t)snprintf(a + o, sizeof a - o, "%s/l", base);
      p += 3;
    } else {
      a[o++] = *p++;
    }
  }
  a[o] = '\0';
  if (sh("python3 tests/template/mkimage.py %s %s", path, a) != 0)
    printf("#   mkimage.py %s failed\n", a);
  return path;
}

static ssize_t file_in(void *ctx, void *buf, size_t cap) { return read(*(int *)ctx, buf, cap); }

static int import_file(const char *tn, const char *name, const char *path, struct husk_err *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return husk_error(err, errno, "open %s", path);
  struct state_template t;
  int rc = template_import_archive(ts, tn, name, file_in, &fd, &t, err);
  close(fd);
  if (rc < 0)
    printf("#   import of %s as %s: %s\n", path, name, err->msg);
  if (rc == 0)
    state_template_free(&t);
  return rc;
}

static int count_dir(const char *sub) {
  char p[400];
  snprintf(p, sizeof p, "%s/templates/%s", data, sub);
  DIR *d = opendir(p);
  if (!d)
    return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.')
      n++;
  closedir(d);
  return n;
}

static void open_store(void) {
  struct husk_err err;
  struct template_store_config c = {.data_dir = data, .state = st, .tenant_quota = 1 << 20};
  if (template_store_open(&ts, &c, &err) < 0)
    printf("#   template_store_open: %s\n", err.msg);
}

TEST(an_oci_archive_is_imported_and_its_layers_open) {
  const char *img = image("a.tar", "--layer %L%/base --layer %L%/top "
                                   "--env A=1 --workdir /srv --user 1000:1000 "
                                   "--entrypoint '[\"/bin/app\"]' --cmd '[\"--serve\"]' "
                                   "--label team=core");
  struct husk_err err = {0};
  int fd = open(img, O_RDONLY | O_CLOEXEC);
  struct state_template t;
  CHECK(template_import_archive(ts, tenant, "app", file_in, &fd, &t, &err) == 0);
  close(fd);
  if (err.msg[0])
    printf("#   %s\n", err.msg);
  CHECK_STR(t.name, "app");
  CHECK(t.size > 0);
  CHECK(strstr(t.config_json, "\"/bin/app\"") != NULL);
  state_template_free(&t);
  CHECK(count_dir("layers") == 2);
  struct state_template g;
  CHECK(state_template_get(st, tenant, "app", true, &g, &err) == 0);
  struct template_layers l;
  CHECK(template_layers_open(ts, &g, &l, &err) == 0);
  CHECK(l.n == 2);
  /* Top first: the top layer has the whiteout of etc/motd. */
  struct stat sb;
  CHECK(fstatat(l.dirs[0], "etc/motd", &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISCHR(sb.st_mode));
  CHECK(fstatat(l.dirs[1], "etc/motd", &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode));
  template_layers_release(&l);
  state_template_free(&g);
  /* The same name again is refused; another tenant may use it. */
  CHECK(import_file(tenant, "app", img, &err) == -1 && err.code == EEXIST);
  CHECK(import_file(other, "app", img, &err) == 0);
  CHECK(count_dir("layers") == 2); /* stored once */
}

TEST(docker_archives_and_layout_directories_too) {
  struct husk_err err = {0};
  const char *d = image("d.tar", "--format docker-archive --layer %L%/base "
                                 "--layer %L%/other:plain");
  CHECK(import_file(tenant, "from-docker", d, &err) == 0);
  if (err.msg[0])
    printf("#   %s\n", err.msg);
  const char *dir = image("layout", "--format oci-dir --layer %L%/base");
  struct state_template t;
  CHECK(template_import_layout(ts, tenant, "from-layout", dir, &t, &err) == 0);
  if (err.msg[0])
    printf("#   %s\n", err.msg);
  state_template_free(&t);
  CHECK(count_dir("layers") == 3);
}

TEST(forged_images_are_refused_and_leave_nothing) {
  struct husk_err err = {0};
  int before = count_dir("layers");
  const char *b = image("forged-blob.tar", "--layer %L%/fresh --tamper blob");
  CHECK(import_file(tenant, "forged", b, &err) == -1 && err.code == EINVAL);
  CHECK(strstr(err.msg, "does not match its digest") != NULL);
  const char *c = image("forged-config.tar", "--layer %L%/fresh --tamper config");
  CHECK(import_file(tenant, "forged", c, &err) == -1 && err.code == EINVAL);
  const char *i = image("forged-diffid.tar", "--layer %L%/fresh --tamper diffid");
  CHECK(import_file(tenant, "forged", i, &err) == -1 && err.code == EINVAL);
  CHECK(strstr(err.msg, "damaged or forged") != NULL);
  char p[400];
  snprintf(p, sizeof p, "%s/junk.tar", base);
  sh("head -c 5000 /dev/urandom > %s", p);
  CHECK(import_file(tenant, "forged", p, &err) == -1 && err.code == EINVAL);
  sh("tar cf %s -C %s/l base", p, base);
  CHECK(import_file(tenant, "forged", p, &err) == -1 && err.code == EINVAL);
  CHECK(strstr(err.msg, "not an image") != NULL);
  CHECK(count_dir("layers") == before);
  CHECK(count_dir("tmp") == 0);
  struct state_template t;
  CHECK(state_template_get(st, tenant, "forged", true, &t, &err) == -1 && err.code == ENOENT);
}

TEST(a_hostile_layer_is_refused_naming_its_entry) {
  struct husk_err err = {0};
  char raw[400];
  snprintf(raw, sizeof raw, "%s/evil.tar", base);
  /* A symlink to the outside, then a file through it. */
  sh("cd %s && rm -rf evil && mkdir -p evil && ln -s /etc evil/link && "
     "python3 -c 'import tarfile,io; t=tarfile.open(\"%s\",\"w\"); "
     "t.add(\"evil/link\",arcname=\"link\"); i=tarfile.TarInfo(\"link/husk-pwned\"); i.size=1; "
     "t.addfile(i,io.BytesIO(b\"x\")); t.close()'",
     base, raw);
  char args[600];
  snprintf(args, sizeof args, "--raw-layer %s:plain", raw);
  const char *img = image("evil-img.tar", args);
  CHECK(import_file(tenant, "evil", img, &err) == -1 && err.code == EINVAL);
  CHECK(strstr(err.msg, "link/husk-pwned") != NULL);
  CHECK(access("/etc/husk-pwned", F_OK) < 0);
  CHECK(count_dir("tmp") == 0);
}

TEST(names_quota_and_shared_templates) {
  struct husk_err err = {0};
  const char *img = image("q.tar", "--layer %L%/base");
  CHECK(import_file(tenant, "Bad Name", img, &err) == -1 && err.code == EINVAL);
  CHECK(import_file(tenant, "default", img, &err) == -1 && err.code == EINVAL);
  const char *big = image("big.tar", "--layer %L%/big");
  CHECK(import_file(tenant, "big", big, &err) == -1 && err.code == EDQUOT);
  CHECK(import_file("", "shared-big", big, &err) == 0); /* the operator's: no quota */
  struct state_template t;
  CHECK(state_template_get(st, other, "shared-big", true, &t, &err) == 0);
  state_template_free(&t);
  CHECK(state_template_get(st, other, "shared-big", false, &t, &err) == -1);
  /* A tenant's own name shadows the shared one. */
  CHECK(import_file("", "app", img, &err) == 0);
  CHECK(state_template_get(st, tenant, "app", true, &t, &err) == 0 && !strcmp(t.tenant_id, tenant));
  state_template_free(&t);
  /* And deleting is the owner's: the shared one is not the tenant's. */
  CHECK(template_delete(ts, tenant, "shared-big", &err) == -1 && err.code == ENOENT);
}

TEST(layers_are_collected_when_no_template_has_them) {
  struct husk_err err = {0};
  int before = count_dir("layers");
  const char *img = image("only.tar", "--layer %L%/only");
  CHECK(import_file(tenant, "only", img, &err) == 0);
  CHECK(count_dir("layers") == before + 1);
  /* A box holds the layer: not collected while it does. */
  struct state_template t;
  CHECK(state_template_get(st, tenant, "only", false, &t, &err) == 0);
  struct template_layers l;
  CHECK(template_layers_open(ts, &t, &l, &err) == 0);
  CHECK(template_delete(ts, tenant, "only", &err) == 0);
  CHECK(count_dir("layers") == before + 1);
  template_layers_release(&l);
  CHECK(template_collect(ts, &err) == 1);
  CHECK(count_dir("layers") == before);
  state_template_free(&t);
  /* Shared layers stay while any template has them. */
  CHECK(template_delete(ts, tenant, "from-docker", &err) == 0);
  CHECK(count_dir("layers") == before - 1); /* `other` was only in it */
}

TEST(a_failed_imports_layers_go_at_once) {
  struct husk_err err = {0};
  int before = count_dir("layers"), blobs = count_dir("blobs/sha256");
  /* Its first layer is placed, its second unpacks past the tenant's
   * quota (zeros: the archive itself is small). */
  const char *img = image("half.tar", "--layer %L%/fresh --layer %L%/zeros");
  CHECK(import_file(tenant, "half", img, &err) == -1 && err.code == EDQUOT);
  CHECK(count_dir("layers") == before);
  CHECK(count_dir("blobs/sha256") == blobs);
}

TEST(one_import_ending_keeps_anothers_hold_on_the_store) {
  struct husk_err err = {0};
  struct state_template from;
  CHECK(state_template_get(st, "", "app", false, &from, &err) == 0);
  int before = count_dir("layers");
  struct template_asm *a = NULL, *b = NULL;
  CHECK(template_asm_begin(ts, "", "held-a", &from, &a, &err) == 0);
  CHECK(template_asm_begin(ts, "", "held-b", &from, &b, &err) == 0);
  if (!a || !b)
    return;
  int wfd = template_asm_workdir(a);
  CHECK(mkdirat(wfd, "tree", 0755) == 0);
  int tree = openat(wfd, "tree", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int f = openat(tree, "new", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  CHECK(f >= 0 && write(f, "x", 1) == 1);
  close(f);
  char diff[LAYER_DIGEST_SIZE];
  CHECK(template_asm_add_tree(a, tree, 0, NULL, diff, &err) == 0);
  close(tree);
  CHECK(count_dir("layers") == before + 1);
  /* The other ends: the one in progress still holds collection off (each
   * hold is a lock of its own, not one shared by the process). */
  template_asm_end(b);
  CHECK(template_collect(ts, &err) == 0);
  CHECK(count_dir("layers") == before + 1);
  /* Ended without a commit: its layer goes with it. */
  template_asm_end(a);
  CHECK(count_dir("layers") == before);
  state_template_free(&from);
}

/* A tree of one file of `bytes` random bytes in the assembly's work
 * directory; its fd, or -1. */
static int random_tree(struct template_asm *a, size_t bytes) {
  static unsigned trees;
  char name[32];
  snprintf(name, sizeof name, "rand%u", trees++);
  int wfd = template_asm_workdir(a);
  if (mkdirat(wfd, name, 0755) < 0)
    return -1;
  int tree = openat(wfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int f = tree >= 0 ? openat(tree, "data", O_WRONLY | O_CREAT | O_CLOEXEC, 0644) : -1;
  int r = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  bool ok = f >= 0 && r >= 0;
  char buf[65536];
  for (size_t left = bytes; ok && left;) {
    size_t n = left < sizeof buf ? left : sizeof buf;
    ok = read(r, buf, n) == (ssize_t)n && write(f, buf, n) == (ssize_t)n;
    left -= n;
  }
  if (f >= 0)
    close(f);
  if (r >= 0)
    close(r);
  if (!ok && tree >= 0) {
    close(tree);
    tree = -1;
  }
  return tree;
}

/* A RUN step as a build does it: a layer of `bytes` made, then cached. */
static int cached_step(struct template_asm *a, const char *tn, const char *key, size_t bytes,
                       struct husk_err *err) {
  int tree = random_tree(a, bytes);
  if (tree < 0)
    return husk_error(err, errno, "a step's tree");
  char diff[LAYER_DIGEST_SIZE];
  int rc = template_asm_add_tree(a, tree, 0, NULL, diff, err);
  close(tree);
  if (rc == 0)
    rc = template_cache_put(ts, tn, key, diff, err);
  return rc;
}

static uint64_t usage(const char *tn) {
  uint64_t used = 0;
  struct husk_err err;
  if (state_template_usage(st, tn, &used, &err) < 0)
    printf("#   usage: %s\n", err.msg);
  return used;
}

/* The layers a tenant's build cache keeps count in its template storage
 * (quota 1 MiB here): builds that fail after their cached steps cannot
 * store past it. */
TEST(build_cache_layers_count_in_the_quota) {
  struct husk_err err = {0};
  struct state_tenant t;
  CHECK(state_tenant_create(st, "builder", STATE_UNLIMITED, STATE_UNLIMITED, &t, &err) == 0);
  struct state_template from;
  CHECK(state_template_get(st, t.id, "app", true, &from, &err) == 0); /* the shared one */
  int before = count_dir("layers");
  struct template_asm *a = NULL, *b = NULL;
  /* Two builds whose last step fails: each keeps its cached step's layer. */
  CHECK(template_asm_begin(ts, t.id, "b1", &from, &a, &err) == 0);
  CHECK(a && cached_step(a, t.id, "sha256:k1", 400000, &err) == 0);
  template_asm_end(a);
  CHECK(count_dir("layers") == before + 1);
  CHECK(usage(t.id) == 400000);
  CHECK(template_asm_begin(ts, t.id, "b2", &from, &a, &err) == 0);
  CHECK(a && cached_step(a, t.id, "sha256:k2", 400000, &err) == 0);
  template_asm_end(a);
  CHECK(usage(t.id) == 800000);
  /* A third cannot: its step's layer is past the room left, and goes. */
  CHECK(template_asm_begin(ts, t.id, "b3", &from, &a, &err) == 0);
  CHECK(a && cached_step(a, t.id, "sha256:k3", 400000, &err) == -1 && err.code == EDQUOT);
  template_asm_end(a);
  CHECK(count_dir("layers") == before + 2);
  CHECK(count_dir("tmp") == 0);
  CHECK(usage(t.id) == 800000);
  /* Nor can an import. */
  CHECK(import_file(t.id, "big", image("big2.tar", "--layer %L%/zeros"), &err) == -1 &&
        err.code == EDQUOT);

  /* Two builds at once, each begun with the whole room: the second step's
   * cache entry is refused, and its layer goes once no one holds the store
   * (here a third build, with no layer of its own, ends last). */
  struct state_tenant t2;
  CHECK(state_tenant_create(st, "builder2", STATE_UNLIMITED, STATE_UNLIMITED, &t2, &err) == 0);
  before = count_dir("layers");
  struct template_asm *h = NULL;
  CHECK(template_asm_begin(ts, t2.id, "c1", &from, &a, &err) == 0);
  CHECK(template_asm_begin(ts, t2.id, "c2", &from, &b, &err) == 0);
  CHECK(template_asm_begin(ts, t2.id, "c3", &from, &h, &err) == 0);
  CHECK(a && cached_step(a, t2.id, "sha256:c1", 600000, &err) == 0);
  CHECK(b && cached_step(b, t2.id, "sha256:c2", 600000, &err) == -1 && err.code == EDQUOT);
  CHECK(usage(t2.id) == 600000);
  template_asm_end(a);
  template_asm_end(b);
  CHECK(count_dir("layers") == before + 2); /* `h` holds the store */
  template_asm_end(h);
  CHECK(count_dir("layers") == before + 1);

  /* A build that commits: its cached layers count once, with the template. */
  struct state_tenant t3;
  CHECK(state_tenant_create(st, "builder3", STATE_UNLIMITED, STATE_UNLIMITED, &t3, &err) == 0);
  CHECK(template_asm_begin(ts, t3.id, "done", &from, &a, &err) == 0);
  CHECK(a && cached_step(a, t3.id, "sha256:d1", 700000, &err) == 0);
  struct state_template built = {0};
  CHECK(a && template_asm_commit(a, from.config_json, &built, &err) == 0);
  template_asm_end(a);
  CHECK(built.size > 700000 && usage(t3.id) == (uint64_t)built.size);
  state_template_free(&built);
  /* Deleted, the template's layer is still the cache's: still counted. */
  CHECK(template_delete(ts, t3.id, "done", &err) == 0);
  CHECK(usage(t3.id) == 700000);
  state_template_free(&from);
}

TEST(a_crashed_import_is_cleaned_at_open) {
  char p[400];
  snprintf(p, sizeof p, "%s/templates/tmp/imp-crashed/L0/root/x", data);
  sh("mkdir -p %s && mkdir -p %s/templates/layers/%064d/root", p, data, 7);
  int before = count_dir("layers");
  template_store_close(ts);
  open_store();
  CHECK(count_dir("tmp") == 0);
  CHECK(count_dir("layers") == before - 1);
}

int main(void) {
  if (!mkdtemp(base)) {
    perror("mkdtemp");
    return 1;
  }
  snprintf(data, sizeof data, "%s/data", base);
  mkdir(data, 0700);
  sh("L=%s/l && mkdir -p $L/base/etc $L/base/bin $L/top/etc $L/other $L/fresh $L/only $L/big && "
     "echo hello > $L/base/etc/motd && printf '#!/bin/sh\\necho app\\n' > $L/base/bin/app && "
     "touch $L/top/etc/.wh.motd && echo o > $L/other/o && echo f > $L/fresh/f && "
     "echo only > $L/only/only && head -c 2000000 /dev/urandom > $L/big/blob && "
     "mkdir -p $L/zeros && head -c 2000000 /dev/zero > $L/zeros/zeros",
     base);
  struct husk_err err;
  char db[400];
  snprintf(db, sizeof db, "%s/husk.db", data);
  struct state_tenant t1, t2;
  if (state_open(&st, db, &err) < 0 ||
      state_tenant_create(st, "one", STATE_UNLIMITED, STATE_UNLIMITED, &t1, &err) < 0 ||
      state_tenant_create(st, "two", STATE_UNLIMITED, STATE_UNLIMITED, &t2, &err) < 0) {
    printf("# setup: %s\n", err.msg);
    return 1;
  }
  snprintf(tenant, sizeof tenant, "%s", t1.id);
  snprintf(other, sizeof other, "%s", t2.id);
  open_store();
  RUN(an_oci_archive_is_imported_and_its_layers_open);
  RUN(docker_archives_and_layout_directories_too);
  RUN(forged_images_are_refused_and_leave_nothing);
  RUN(a_hostile_layer_is_refused_naming_its_entry);
  RUN(names_quota_and_shared_templates);
  RUN(layers_are_collected_when_no_template_has_them);
  RUN(a_failed_imports_layers_go_at_once);
  RUN(one_import_ending_keeps_anothers_hold_on_the_store);
  RUN(build_cache_layers_count_in_the_quota);
  RUN(a_crashed_import_is_cleaned_at_open);
  template_store_close(ts);
  state_close(st);
  sh("rm -rf %s", base);
  return unit_done();
}
