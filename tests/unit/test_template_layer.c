/* Image layers unpacked into directories: what is kept (files, modes,
 * owners, symlinks, hardlinks, sparse files, whiteouts as overlay's), what
 * is dropped (devices, setuid bits, xattrs) and what is refused with the
 * entry named (.., absolute names, writes below a planted symlink,
 * hardlinks out of the layer, size and entry limits); the diff_id is the
 * sha256 of the uncompressed stream, whatever the compression. */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "template/layer.h"
#include "unit.h"

static char base[] = "/tmp/husk-layer-XXXXXX";
static int ncase;

/* A layer being written. */
struct lw {
  struct archive *a;
};

struct ent {
  const char *name;
  mode_t type; /* AE_IFREG ... */
  mode_t perm;
  const char *data; /* files: content; symlinks: target; hardlinks: target (with type 0) */
  la_int64_t uid, gid;
  dev_t rdev;
};

static void lw_add(struct lw *w, const struct ent *e) {
  struct archive_entry *ae = archive_entry_new();
  archive_entry_set_pathname(ae, e->name);
  archive_entry_set_uid(ae, e->uid);
  archive_entry_set_gid(ae, e->gid);
  archive_entry_set_mtime(ae, 1700000000, 0);
  if (e->type == 0) { /* hardlink */
    archive_entry_set_filetype(ae, AE_IFREG);
    archive_entry_set_perm(ae, 0644);
    archive_entry_set_hardlink(ae, e->data);
    archive_entry_set_size(ae, 0);
    archive_write_header(w->a, ae);
  } else {
    archive_entry_set_filetype(ae, e->type);
    archive_entry_set_perm(ae, e->perm);
    if (e->type == AE_IFLNK)
      archive_entry_set_symlink(ae, e->data);
    if (e->type == AE_IFCHR || e->type == AE_IFBLK)
      archive_entry_set_rdev(ae, e->rdev);
    if (e->type == AE_IFREG) {
      archive_entry_set_size(ae, e->data ? (la_int64_t)strlen(e->data) : 0);
      archive_entry_xattr_add_entry(ae, "trusted.overlay.redirect", "/etc", 4);
      archive_entry_xattr_add_entry(ae, "security.capability", "\1\0\0\2", 4);
    }
    archive_write_header(w->a, ae);
    if (e->type == AE_IFREG && e->data)
      archive_write_data(w->a, e->data, strlen(e->data));
  }
  archive_entry_free(ae);
}

/* Write entries as a layer file (filter: "none", "gzip", "zstd"); returns
 * its path (static buffer per call site is fine: the tests use it at once). */
static const char *make_layer(const char *filter, const struct ent *ents, size_t n, char *path,
                              size_t plen) {
  snprintf(path, plen, "%s/layer%d.tar", base, ++ncase);
  struct archive *a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (!strcmp(filter, "gzip"))
    archive_write_add_filter_gzip(a);
  else if (!strcmp(filter, "zstd"))
    archive_write_add_filter_zstd(a);
  archive_write_open_filename(a, path);
  struct lw w = {.a = a};
  for (size_t i = 0; i < n; i++)
    lw_add(&w, &ents[i]);
  archive_write_close(a);
  archive_write_free(a);
  return path;
}

static const struct layer_limits big = {.max_bytes = 1ULL << 30, .max_entries = 100000};

/* Extract `layer` into a fresh directory; returns extract's result. */
static int extract(const char *layer, const struct layer_limits *lim, char *dir, size_t dlen,
                   struct layer_result *res, struct husk_err *err) {
  snprintf(dir, dlen, "%s/out%d", base, ++ncase);
  if (mkdir(dir, 0700) < 0)
    return -2;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int bfd = open(layer, O_RDONLY | O_CLOEXEC);
  int rc = layer_extract(bfd, dfd, lim, res, err);
  close(bfd);
  close(dfd);
  return rc;
}

static char *slurp(const char *path) {
  static char buf[4096];
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n < 0)
    return NULL;
  buf[n] = '\0';
  return buf;
}

static void sha256_file(const char *path, char out[LAYER_DIGEST_SIZE]) {
  EVP_MD_CTX *c = EVP_MD_CTX_new();
  EVP_DigestInit_ex(c, EVP_sha256(), NULL);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0)
    EVP_DigestUpdate(c, buf, (size_t)n);
  close(fd);
  unsigned char md[32];
  unsigned l;
  EVP_DigestFinal_ex(c, md, &l);
  EVP_MD_CTX_free(c);
  char *p = out + sprintf(out, "sha256:");
  for (int i = 0; i < 32; i++)
    p += sprintf(p, "%02x", md[i]);
}

static const struct ent basic[] = {
    {.name = "./usr/", .type = AE_IFDIR, .perm = 0755},
    {.name = "usr/bin/", .type = AE_IFDIR, .perm = 0755},
    {.name = "usr/bin/tool",
     .type = AE_IFREG,
     .perm = 04755,
     .data = "#!/bin/sh\necho tool\n",
     .uid = 0,
     .gid = 0},
    {.name = "usr/bin/alias", .type = AE_IFLNK, .perm = 0777, .data = "tool"},
    {.name = "usr/bin/hard", .type = 0, .perm = 0, .data = "usr/bin/tool"},
    {.name = "home/app/notes.txt",
     .type = AE_IFREG,
     .perm = 0600,
     .data = "mine\n",
     .uid = 1000,
     .gid = 1000},
    {.name = "home/far",
     .type = AE_IFREG,
     .perm = 0644,
     .data = "far\n",
     .uid = 200000,
     .gid = 70000},
    {.name = "tmp/", .type = AE_IFDIR, .perm = 01777},
    {.name = "dev/null",
     .type = AE_IFCHR,
     .perm = 0666,
     .data = NULL,
     .uid = 0,
     .gid = 0,
     .rdev = 0},
    {.name = "dev/sda",
     .type = AE_IFBLK,
     .perm = 0660,
     .data = NULL,
     .uid = 0,
     .gid = 0,
     .rdev = 0},
    {.name = "run/fifo", .type = AE_IFIFO, .perm = 0644},
};

TEST(a_plain_layer_is_unpacked_with_owners_modes_and_links) {
  char lp[256], dir[256], p[512];
  make_layer("none", basic, sizeof basic / sizeof *basic, lp, sizeof lp);
  struct layer_result r;
  struct husk_err err = {0};
  CHECK(extract(lp, &big, dir, sizeof dir, &r, &err) == 0);
  if (err.msg[0])
    printf("#   %s\n", err.msg);
  struct stat st;
  snprintf(p, sizeof p, "%s/usr/bin/tool", dir);
  CHECK(lstat(p, &st) == 0 && S_ISREG(st.st_mode));
  CHECK((st.st_mode & 07777) == 0755); /* setuid dropped */
  CHECK(st.st_uid == 0 && st.st_nlink == 2);
  CHECK_STR(slurp(p), "#!/bin/sh\necho tool\n");
  char x[64];
  CHECK(listxattr(p, x, sizeof x) == 0); /* no attribute of the layer's reached the disk */
  snprintf(p, sizeof p, "%s/usr/bin/alias", dir);
  char t[64] = "";
  CHECK(lstat(p, &st) == 0 && S_ISLNK(st.st_mode) && readlink(p, t, sizeof t) == 4);
  snprintf(p, sizeof p, "%s/home/app/notes.txt", dir);
  CHECK(lstat(p, &st) == 0 && st.st_uid == 1000 && st.st_gid == 1000 &&
        (st.st_mode & 0777) == 0600);
  snprintf(p, sizeof p, "%s/home/far", dir);
  CHECK(lstat(p, &st) == 0 && st.st_uid == 65534 && st.st_gid == 65534);
  snprintf(p, sizeof p, "%s/tmp", dir);
  CHECK(lstat(p, &st) == 0 && (st.st_mode & 07777) == 01777);
  snprintf(p, sizeof p, "%s/dev/null", dir);
  CHECK(lstat(p, &st) < 0 && errno == ENOENT);
  snprintf(p, sizeof p, "%s/run/fifo", dir);
  CHECK(lstat(p, &st) < 0 && errno == ENOENT);
  CHECK(r.dropped == 3);
  CHECK(r.entries == sizeof basic / sizeof *basic);
  char want[LAYER_DIGEST_SIZE];
  sha256_file(lp, want);
  CHECK_STR(r.diff_id, want);
}

TEST(gzip_and_zstd_layers_give_the_diff_id_of_their_tar) {
  char plain[256], gz[256], zs[256], dir[256];
  const struct ent e[] = {{.name = "a/b.txt", .type = AE_IFREG, .perm = 0644, .data = "hello\n"}};
  make_layer("none", e, 1, plain, sizeof plain);
  make_layer("gzip", e, 1, gz, sizeof gz);
  make_layer("zstd", e, 1, zs, sizeof zs);
  char want[LAYER_DIGEST_SIZE];
  sha256_file(plain, want);
  struct layer_result r;
  struct husk_err err = {0};
  CHECK(extract(gz, &big, dir, sizeof dir, &r, &err) == 0);
  CHECK_STR(r.diff_id, want);
  char p[512];
  snprintf(p, sizeof p, "%s/a/b.txt", dir);
  CHECK_STR(slurp(p), "hello\n");
  CHECK(extract(zs, &big, dir, sizeof dir, &r, &err) == 0);
  CHECK_STR(r.diff_id, want);
}

TEST(whiteouts_become_overlay_whiteouts) {
  char lp[256], dir[256], p[512];
  const struct ent e[] = {
      {.name = "etc/", .type = AE_IFDIR, .perm = 0755},
      {.name = "etc/.wh.motd", .type = AE_IFREG, .perm = 0644, .data = ""},
      {.name = "var/cache/.wh..wh..opq", .type = AE_IFREG, .perm = 0644, .data = ""},
      {.name = "var/.wh..wh.plnk", .type = AE_IFDIR, .perm = 0700},
  };
  make_layer("none", e, 4, lp, sizeof lp);
  struct layer_result r;
  struct husk_err err = {0};
  CHECK(extract(lp, &big, dir, sizeof dir, &r, &err) == 0);
  struct stat st;
  snprintf(p, sizeof p, "%s/etc/motd", dir);
  CHECK(lstat(p, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
  snprintf(p, sizeof p, "%s/etc/.wh.motd", dir);
  CHECK(lstat(p, &st) < 0);
  snprintf(p, sizeof p, "%s/var/cache", dir);
  char v[8] = "";
  CHECK(lgetxattr(p, "trusted.overlay.opaque", v, sizeof v) == 1 && v[0] == 'y');
  snprintf(p, sizeof p, "%s/var/.wh..wh.plnk", dir);
  CHECK(lstat(p, &st) < 0);
  CHECK(r.dropped == 1);
}

/* Each hostile layer is refused with its entry named, and nothing is
 * written outside the layer's directory. */
static void refused(const struct ent *e, size_t n, const char *needle) {
  char lp[256], dir[256];
  make_layer("none", e, n, lp, sizeof lp);
  struct layer_result r;
  struct husk_err err = {0};
  int rc = extract(lp, &big, dir, sizeof dir, &r, &err);
  CHECK(rc == -1);
  if (rc == -1 && !strstr(err.msg, needle))
    printf("#   message `%s` lacks `%s`\n", err.msg, needle);
  CHECK(rc == -1 && strstr(err.msg, needle));
  struct stat st;
  char p[512];
  snprintf(p, sizeof p, "%s/escaped", base);
  CHECK(lstat(p, &st) < 0 && errno == ENOENT);
}

TEST(hostile_layers_are_refused_naming_the_entry) {
  const struct ent dotdot[] = {
      {.name = "a/../../escaped", .type = AE_IFREG, .perm = 0644, .data = "x"}};
  refused(dotdot, 1, "a/../../escaped");
  const struct ent absolute[] = {{.name = "/escaped", .type = AE_IFREG, .perm = 0644, .data = "x"}};
  refused(absolute, 1, "/escaped");
  char outside[300];
  snprintf(outside, sizeof outside, "%s", base);
  const struct ent symdir[] = {
      {.name = "link", .type = AE_IFLNK, .perm = 0777, .data = outside},
      {.name = "link/escaped", .type = AE_IFREG, .perm = 0644, .data = "x"}};
  refused(symdir, 2, "link/escaped");
  const struct ent symdir2[] = {{.name = "link", .type = AE_IFLNK, .perm = 0777, .data = ".."},
                                {.name = "link/escaped", .type = AE_IFDIR, .perm = 0755}};
  refused(symdir2, 2, "link/escaped");
  const struct ent hl[] = {{.name = "h", .type = 0, .perm = 0, .data = "/etc/passwd"}};
  refused(hl, 1, "hardlink");
  const struct ent hl2[] = {{.name = "h", .type = 0, .perm = 0, .data = "../escaped"}};
  refused(hl2, 1, "hardlink");
  const struct ent hl3[] = {{.name = "d/", .type = AE_IFDIR, .perm = 0755},
                            {.name = "h", .type = 0, .perm = 0, .data = "d"}};
  refused(hl3, 2, "hardlink");
  const struct ent over[] = {{.name = "d/", .type = AE_IFDIR, .perm = 0755},
                             {.name = "d/x", .type = AE_IFREG, .perm = 0644, .data = "x"},
                             {.name = "d", .type = AE_IFREG, .perm = 0644, .data = "x"}};
  refused(over, 3, "replaces a directory");
  const struct ent fileparent[] = {{.name = "f", .type = AE_IFREG, .perm = 0644, .data = "x"},
                                   {.name = "f/g", .type = AE_IFREG, .perm = 0644, .data = "x"}};
  refused(fileparent, 2, "f/g");
}

TEST(limits_on_bytes_and_entries) {
  char lp[256], dir[256];
  static char blob[200000];
  memset(blob, 'x', sizeof blob - 1);
  const struct ent e[] = {{.name = "big", .type = AE_IFREG, .perm = 0644, .data = blob},
                          {.name = "a", .type = AE_IFREG, .perm = 0644, .data = "1"},
                          {.name = "b", .type = AE_IFREG, .perm = 0644, .data = "2"}};
  make_layer("gzip", e, 3, lp, sizeof lp);
  struct layer_result r;
  struct husk_err err = {0};
  struct layer_limits small = {.max_bytes = 100000, .max_entries = 100};
  CHECK(extract(lp, &small, dir, sizeof dir, &r, &err) == -1 && err.code == EFBIG);
  struct layer_limits few = {.max_bytes = 1 << 30, .max_entries = 2};
  CHECK(extract(lp, &few, dir, sizeof dir, &r, &err) == -1 && err.code == EFBIG);
  CHECK(strstr(err.msg, "entries") != NULL);
}

TEST(a_damaged_or_empty_layer_is_refused) {
  char p[256], dir[256];
  snprintf(p, sizeof p, "%s/empty.tar", base);
  close(open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  struct layer_result r;
  struct husk_err err = {0};
  CHECK(extract(p, &big, dir, sizeof dir, &r, &err) == -1 && err.code == EINVAL);
  snprintf(p, sizeof p, "%s/junk.tar", base);
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  char junk[1024];
  memset(junk, 'J', sizeof junk);
  CHECK(write(fd, junk, sizeof junk) == (ssize_t)sizeof junk);
  close(fd);
  CHECK(extract(p, &big, dir, sizeof dir, &r, &err) == -1 && err.code == EINVAL);
  /* A gzip stream cut short. */
  const struct ent e[] = {
      {.name = "a", .type = AE_IFREG, .perm = 0644, .data = "hello hello hello"}};
  char lp[256];
  make_layer("gzip", e, 1, lp, sizeof lp);
  struct stat st;
  stat(lp, &st);
  CHECK(truncate(lp, st.st_size / 2) == 0);
  CHECK(extract(lp, &big, dir, sizeof dir, &r, &err) == -1 && err.code == EINVAL);
}

TEST(a_zstd_layer_without_zstd_in_libarchive_says_so) {
  const struct ent e[] = {{.name = "a", .type = AE_IFREG, .perm = 0644, .data = "hello"}};
  char zp[256], gp[256];
  make_layer("zstd", e, 1, zp, sizeof zp);
  make_layer("gzip", e, 1, gp, sizeof gp);
  int zfd = open(zp, O_RDONLY | O_CLOEXEC), gfd = open(gp, O_RDONLY | O_CLOEXEC);
  struct husk_err err = {0};
  CHECK(layer_codec_check(zfd, false, &err) == -1 && err.code == ENOTSUP);
  CHECK(strstr(err.msg, "zstd") != NULL);
  CHECK(layer_codec_check(zfd, true, &err) == 0);
  CHECK(layer_codec_check(gfd, false, &err) == 0);
  int p[2];
  CHECK(pipe(p) == 0);
  CHECK(layer_codec_check(p[0], false, &err) == 0); /* a stream: libarchive decides */
  close(p[0]);
  close(p[1]);
  close(zfd);
  close(gfd);
}

/* A tree written back as a layer and unpacked again is the same tree:
 * files, modes, owners, links, whiteouts and opaque directories. */
TEST(a_tree_written_as_a_layer_unpacks_to_the_same_tree) {
  char lp[256], dir[256], dir2[256], p[512], blob[300];
  const struct ent e[] = {
      {.name = "bin/", .type = AE_IFDIR, .perm = 0755},
      {.name = "bin/tool", .type = AE_IFREG, .perm = 0755, .data = "tool\n"},
      {.name = "bin/hard", .type = 0, .data = "bin/tool"},
      {.name = "bin/link", .type = AE_IFLNK, .perm = 0777, .data = "tool"},
      {.name = "home/app/x", .type = AE_IFREG, .perm = 0600, .data = "x", .uid = 1000, .gid = 1000},
      {.name = "etc/.wh.motd", .type = AE_IFREG, .perm = 0644, .data = ""},
      {.name = "var/cache/.wh..wh..opq", .type = AE_IFREG, .perm = 0644, .data = ""},
  };
  make_layer("none", e, sizeof e / sizeof *e, lp, sizeof lp);
  struct layer_result r1, r2;
  struct husk_err err = {0};
  CHECK(extract(lp, &big, dir, sizeof dir, &r1, &err) == 0);
  snprintf(blob, sizeof blob, "%s/written.tar", base);
  int out = open(blob, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct layer_written w;
  CHECK(layer_write_tree(d, 0, NULL, out, &w, &err) == 0);
  close(out);
  close(d);
  char want[LAYER_DIGEST_SIZE];
  sha256_file(blob, want);
  CHECK_STR(w.diff_id, want);
  CHECK(extract(blob, &big, dir2, sizeof dir2, &r2, &err) == 0);
  CHECK_STR(r2.diff_id, w.diff_id);
  struct stat st;
  snprintf(p, sizeof p, "%s/bin/tool", dir2);
  CHECK(lstat(p, &st) == 0 && st.st_nlink == 2 && (st.st_mode & 0777) == 0755);
  CHECK_STR(slurp(p), "tool\n");
  snprintf(p, sizeof p, "%s/bin/link", dir2);
  CHECK(lstat(p, &st) == 0 && S_ISLNK(st.st_mode));
  snprintf(p, sizeof p, "%s/home/app/x", dir2);
  CHECK(lstat(p, &st) == 0 && st.st_uid == 1000 && (st.st_mode & 0777) == 0600);
  snprintf(p, sizeof p, "%s/etc/motd", dir2);
  CHECK(lstat(p, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
  snprintf(p, sizeof p, "%s/var/cache", dir2);
  char v[4] = "";
  CHECK(lgetxattr(p, "trusted.overlay.opaque", v, sizeof v) == 1 && v[0] == 'y');
  /* One tree written twice: the same bytes. */
  struct layer_written w2, w3;
  for (int k = 0; k < 2; k++) {
    out = open(blob, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    d = open(dir2, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(layer_write_tree(d, 0, NULL, out, k ? &w3 : &w2, &err) == 0);
    close(out);
    close(d);
  }
  CHECK_STR(w2.diff_id, w3.diff_id);
}

int main(void) {
  if (!mkdtemp(base)) {
    perror("mkdtemp");
    return 1;
  }
  RUN(a_plain_layer_is_unpacked_with_owners_modes_and_links);
  RUN(gzip_and_zstd_layers_give_the_diff_id_of_their_tar);
  RUN(whiteouts_become_overlay_whiteouts);
  RUN(hostile_layers_are_refused_naming_the_entry);
  RUN(limits_on_bytes_and_entries);
  RUN(a_damaged_or_empty_layer_is_refused);
  RUN(a_zstd_layer_without_zstd_in_libarchive_says_so);
  RUN(a_tree_written_as_a_layer_unpacks_to_the_same_tree);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", base);
  if (system(cmd) != 0)
    printf("# cannot remove %s\n", base);
  return unit_done();
}
