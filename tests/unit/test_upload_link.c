/* Upload links in the core (src/storage/upload_link.c and their rows):
 * what a spec may say, the token shown once and found by its hash, file
 * names made safe, content types matched both ways, file slots claimed
 * and given back, oversize files leaving nothing, names never replaced,
 * expiry, revocation and tenant isolation. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/state.h"
#include "state/upload_link_state.h"
#include "storage/store.h"
#include "storage/upload_link.h"
#include "unit.h"

#define CHECK_OK(expr)                                                                             \
  do {                                                                                             \
    husk_err_clear(&err);                                                                          \
    if ((expr) != 0) {                                                                             \
      printf("#   %s:%d: %s: %s\n", __FILE__, __LINE__, #expr, err.msg);                           \
      unit_cur_failed = 1;                                                                         \
    }                                                                                              \
  } while (0)
#define CHECK_ERR(expr, want)                                                                      \
  do {                                                                                             \
    husk_err_clear(&err);                                                                          \
    int r_ = (expr);                                                                               \
    if (r_ != -1 || err.code != (want)) {                                                          \
      printf("#   %s:%d: %s: got %d code %d (%s), want %d\n", __FILE__, __LINE__, #expr, r_,       \
             err.code, err.msg, (want));                                                           \
      unit_cur_failed = 1;                                                                         \
    }                                                                                              \
  } while (0)

static char dir[64];
static struct state *st;
static struct store *s;
static char t1[STATE_TENANT_ID_SIZE], t2[STATE_TENANT_ID_SIZE];
#define BASE "http://127.0.0.1:9"

static int tmp_files(void) {
  char p[160];
  snprintf(p, sizeof p, "%s/storage/tmp", dir);
  DIR *d = opendir(p);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    n += e->d_name[0] != '.';
  if (d)
    closedir(d);
  return n;
}

/* A link of t1 made from `spec`; its token (from the URL) to tok. */
static int mk(const struct upload_link_spec *spec, struct state_upload_link *l, char *tok) {
  struct husk_err err;
  char *url = NULL;
  if (upload_link_create(s, t1, spec, BASE, l, &url, &err) < 0) {
    printf("# create: %s\n", err.msg);
    return -1;
  }
  const char *u = strstr(url, "/u/");
  snprintf(tok, UPLOAD_LINK_TOKEN_SIZE, "%s", u ? u + 3 : "");
  free(url);
  return 0;
}

/* One file of `n` bytes through link l: 0 and its key in *key, or -1. */
static int upload(const struct state_upload_link *l, const char *name, size_t n, char **key,
                  struct husk_err *err) {
  struct upload_link_file *f = NULL;
  if (upload_link_file_open(s, l, name, &f, err) < 0)
    return -1;
  char buf[1000];
  memset(buf, 'x', sizeof buf);
  for (size_t done = 0; done < n;) {
    size_t k = n - done < sizeof buf ? n - done : sizeof buf;
    if (upload_link_file_write(f, buf, k, err) < 0) {
      upload_link_file_abort(f);
      return -1;
    }
    done += k;
  }
  uint64_t size = 0;
  return upload_link_file_commit(f, key, &size, err);
}

TEST(safe_names) {
  static const char *const cases[][2] = {
      {"report.pdf", "report.pdf"},
      {"../../etc/passwd", "passwd"},
      {"a/b", "b"},
      {"c:\\win\\evil.txt", "evil.txt"},
      {"..", "file"},
      {".hidden", "hidden"},
      {"", "file"},
      {"tab\there\x01.txt", "tab_here_.txt"},
      {"a<b>:c|d?.txt", "a_b__c_d_.txt"},
      {"bad\xff\xfeutf8", "bad__utf8"},
      {"ümlaut.txt", "ümlaut.txt"},
      {"dir/", "file"},
      /* Characters that change how a name reads without showing. */
      {"evil\xe2\x80\xaegnp.exe", "evil_gnp.exe"},
      {"a\xe2\x80\x8b" "b\xef\xbb\xbf.txt", "a_b_.txt"},
      {"c1\xc2\x85.txt", "c1_.txt"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *n = upload_link_safe_name(cases[i][0]);
    CHECK_STR(n, cases[i][1]);
    free(n);
  }
  char longname[600];
  memset(longname, 'L', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  char *n = upload_link_safe_name(longname);
  CHECK(n && strlen(n) == UPLOAD_LINK_NAME_MAX);
  free(n);
  /* A multi-byte character is never cut in half. */
  char mb[600] = "";
  for (int i = 0; i < 150; i++)
    strcat(mb, "é");
  n = upload_link_safe_name(mb);
  CHECK(n && strlen(n) == UPLOAD_LINK_NAME_MAX && strspn(n, "\xc3\xa9") == strlen(n));
  free(n);
}

TEST(spec_checks) {
  struct husk_err err;
  struct state_upload_link l;
  char *url = NULL;
  const struct upload_link_spec bad[] = {
      {.expires_s = UPLOAD_LINK_MAX_S + 1},
      {.expires_s = -1},
      {.max_files = UPLOAD_LINK_MAX_FILES + 1},
      {.max_files = -3},
      {.max_file_bytes = UPLOAD_LINK_MAX_BYTES + 1},
      {.content_types = "image"},
      {.content_types = "image/png;x"},
      {.content_types = "*/png"},
      {.prefix = "/abs/"},
      {.prefix = "a/../b"},
      {.prefix = "a//b"},
      {.prefix = "a\nb"},
      {.bucket = "Bad_Bucket"},
      {.bucket = "_internal"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECK_ERR(upload_link_create(s, t1, &bad[i], BASE, &l, &url, &err), EINVAL);
  struct upload_link_spec nb = {.bucket = "no-such-bucket"};
  CHECK_ERR(upload_link_create(s, t1, &nb, BASE, &l, &url, &err), STORE_ENOBUCKET);
  struct upload_link_spec none = {0};
  CHECK_ERR(upload_link_create(s, t1, &none, "", &l, &url, &err), EOPNOTSUPP);
  CHECK(url == NULL);
  /* Defaults, and the type list as stored. */
  struct upload_link_spec sp = {.content_types = " Image/* , application/PDF", .prefix = "in/x"};
  CHECK_OK(upload_link_create(s, t1, &sp, BASE "/", &l, &url, &err));
  CHECK(url && strncmp(url, BASE "/u/hu_", strlen(BASE "/u/hu_")) == 0 &&
        strlen(url) == strlen(BASE "/u/") + UPLOAD_LINK_TOKEN_SIZE - 1);
  CHECK_STR(l.bucket, UPLOAD_LINK_BUCKET);
  CHECK_STR(l.prefix, "in/x/");
  CHECK_STR(l.content_types, "image/*,application/pdf");
  CHECK(l.max_files == 1 && l.max_file_bytes == (int64_t)UPLOAD_LINK_DEFAULT_BYTES);
  CHECK(l.expires_ms - l.created_ms == UPLOAD_LINK_DEFAULT_S * 1000LL);
  CHECK_OK(store_bucket_exists(s, t1, UPLOAD_LINK_BUCKET, &err));
  /* The token is found by its hash, and only a token's shape is looked up. */
  struct state_upload_link got;
  CHECK_OK(upload_link_resolve(s, strstr(url, "/u/") + 3, &got, &err));
  CHECK_STR(got.id, l.id);
  CHECK_ERR(upload_link_resolve(s, "hu_00000000000000000000000000000000", &got, &err), ENOENT);
  CHECK_ERR(upload_link_resolve(s, "nonsense", &got, &err), ENOENT);
  CHECK_ERR(upload_link_resolve(s, "", &got, &err), ENOENT);
  free(url);
}

TEST(types) {
  struct state_upload_link l = {0};
  snprintf(l.content_types, sizeof l.content_types, "image/*,application/pdf");
  CHECK(upload_link_type_ok(&l, "a.png", "image/png"));
  CHECK(upload_link_type_ok(&l, "a.pdf", "application/pdf; charset=binary"));
  CHECK(!upload_link_type_ok(&l, "a.png", "application/x-msdownload")); /* declared */
  CHECK(!upload_link_type_ok(&l, "a.exe", "image/png"));                /* by its name */
  CHECK(!upload_link_type_ok(&l, "a.png", NULL));    /* undeclared: octet-stream */
  CHECK(!upload_link_type_ok(&l, "a.png", "image")); /* a bare type is no pattern */
  l.content_types[0] = '\0';
  CHECK(upload_link_type_ok(&l, "a.exe", NULL));
}

TEST(slots_and_files) {
  struct husk_err err;
  struct state_upload_link l, now;
  char tok[UPLOAD_LINK_TOKEN_SIZE];
  struct upload_link_spec sp = {.max_files = 2, .max_file_bytes = 5000};
  CHECK(mk(&sp, &l, tok) == 0);
  char *key = NULL;
  /* Too large: refused while it streams, nothing left, the slot back. */
  CHECK_ERR(upload(&l, "big.bin", 6000, &key, &err), EFBIG);
  CHECK(tmp_files() == 0);
  CHECK_OK(upload_link_resolve(s, tok, &now, &err));
  CHECK(now.files_used == 0);
  /* Two files, the second of the same name gets a suffix. */
  CHECK_OK(upload(&l, "../r.txt", 5000, &key, &err));
  char want[600];
  snprintf(want, sizeof want, "%sr.txt", l.prefix);
  CHECK_STR(key, want);
  free(key);
  key = NULL;
  CHECK_OK(upload(&l, "r.txt", 10, &key, &err));
  snprintf(want, sizeof want, "%sr-1.txt", l.prefix);
  CHECK_STR(key, want);
  free(key);
  key = NULL;
  struct store_object o;
  snprintf(want, sizeof want, "%sr.txt", l.prefix);
  CHECK_OK(store_object_get(s, t1, l.bucket, want, &o, NULL, &err));
  CHECK(o.size == 5000);
  store_object_free(&o);
  /* Used up. */
  CHECK_ERR(upload_link_resolve(s, tok, &now, &err), EMLINK);
  CHECK(now.files_used == 2 && now.bytes_used == 5010);
  CHECK_ERR(upload(&l, "third.txt", 1, &key, &err), EMLINK);
  /* An aborted file gives its slot back. */
  struct upload_link_spec one = {0};
  CHECK(mk(&one, &l, tok) == 0);
  struct upload_link_file *f = NULL;
  CHECK_OK(upload_link_file_open(s, &l, "x", &f, &err));
  CHECK_ERR(upload_link_resolve(s, tok, &now, &err), EMLINK); /* claimed */
  upload_link_file_abort(f);
  CHECK_OK(upload_link_resolve(s, tok, &now, &err));
  CHECK(tmp_files() == 0);
}

/* Uploads of one name at once through one link. */
struct racer {
  const struct state_upload_link *l;
  char *key;
  int rc;
};

static void *race(void *arg) {
  struct racer *r = arg;
  struct husk_err err;
  r->rc = upload(r->l, "same.txt", 3000, &r->key, &err);
  return NULL;
}

TEST(same_name_at_once) {
  enum { N = 8 };
  struct husk_err err;
  struct state_upload_link l;
  char tok[UPLOAD_LINK_TOKEN_SIZE];
  struct upload_link_spec sp = {.max_files = N};
  CHECK_OK(mk(&sp, &l, tok));
  struct racer r[N] = {0};
  pthread_t th[N];
  for (int i = 0; i < N; i++) {
    r[i].l = &l;
    CHECK(pthread_create(&th[i], NULL, race, &r[i]) == 0);
  }
  for (int i = 0; i < N; i++)
    pthread_join(th[i], NULL);
  int distinct = 0;
  for (int i = 0; i < N; i++) {
    bool seen = false;
    for (int j = 0; j < i; j++)
      seen |= r[i].key && r[j].key && strcmp(r[i].key, r[j].key) == 0;
    distinct += r[i].rc == 0 && r[i].key && !seen;
  }
  for (int i = 0; i < N; i++)
    free(r[i].key);
  CHECK(distinct == N);
}

/* Past UPLOAD_LINK_SUFFIX_MAX files of one name the upload is refused:
 * nothing already stored is replaced. */
TEST(suffixes_run_out) {
  struct husk_err err;
  struct state_upload_link l;
  char tok[UPLOAD_LINK_TOKEN_SIZE];
  struct upload_link_spec sp = {.max_files = 1};
  CHECK_OK(mk(&sp, &l, tok));
  for (int i = 0; i < UPLOAD_LINK_SUFFIX_MAX; i++) {
    char key[600];
    if (i == 0)
      snprintf(key, sizeof key, "%sfull.txt", l.prefix);
    else
      snprintf(key, sizeof key, "%sfull-%d.txt", l.prefix, i);
    if (store_put_buffer(s, t1, l.bucket, key, "old", 3, "text/plain", NULL, NULL, &err) < 0) {
      printf("# put %s: %s\n", key, err.msg);
      CHECK(0);
      return;
    }
  }
  char *key = NULL;
  CHECK(upload(&l, "full.txt", 10, &key, &err) < 0 && err.code == EEXIST);
  CHECK(key == NULL);
  free(key);
  char last[600];
  snprintf(last, sizeof last, "%sfull-%d.txt", l.prefix, UPLOAD_LINK_SUFFIX_MAX - 1);
  struct store_object o;
  CHECK_OK(store_object_get(s, t1, l.bucket, last, &o, NULL, &err));
  CHECK(o.size == 3);
  store_object_free(&o);
  /* The refused file did not use the link's one slot. */
  CHECK_OK(upload(&l, "other.txt", 10, &key, &err));
  free(key);
}

TEST(expiry_revocation_tenants) {
  struct husk_err err;
  struct state_upload_link l, now;
  char tok[UPLOAD_LINK_TOKEN_SIZE];
  struct upload_link_spec sp = {.max_files = 5};
  CHECK(mk(&sp, &l, tok) == 0);
  CHECK_ERR(state_upload_link_claim(st, l.id, l.expires_ms, &err), EKEYEXPIRED);
  CHECK_ERR(state_upload_link_revoke(st, t2, l.id, &err), ENOENT); /* not t2's */
  CHECK_OK(upload_link_resolve(s, tok, &now, &err));
  CHECK_OK(state_upload_link_revoke(st, t1, l.id, &err));
  CHECK_ERR(upload_link_resolve(s, tok, &now, &err), EKEYREVOKED);
  int64_t first = now.revoked_ms;
  CHECK_OK(state_upload_link_revoke(st, t1, l.id, &err)); /* again: keeps its time */
  CHECK_ERR(upload_link_resolve(s, tok, &now, &err), EKEYREVOKED);
  CHECK(now.revoked_ms == first && first > 0);
  CHECK_ERR(state_upload_link_claim(st, l.id, state_now_ms(), &err), EKEYREVOKED);
  CHECK_ERR(state_upload_link_revoke(st, t1, "ul_nope", &err), ENOENT);
}

static int count_cb(void *ctx, const struct state_upload_link *l) {
  (void)l;
  ++*(int *)ctx;
  return 0;
}

TEST(listing) {
  struct husk_err err;
  int n1 = 0, n2 = 0;
  CHECK_OK(state_upload_link_list(st, t1, count_cb, &n1, &err));
  CHECK_OK(state_upload_link_list(st, t2, count_cb, &n2, &err));
  CHECK(n1 >= 4 && n2 == 0);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/husk-ulink-XXXXXX");
  if (!mkdtemp(dir))
    return 2;
  chmod(dir, 0700);
  struct husk_err err;
  char db[128];
  snprintf(db, sizeof db, "%s/husk.db", dir);
  struct store_config c = {.data_dir = dir, .public_url = BASE};
  if (state_open(&st, db, &err) < 0 || (c.state = st, store_open(&s, &c, &err) < 0)) {
    printf("# open: %s\n", err.msg);
    return 2;
  }
  struct state_tenant a, b;
  if (state_tenant_create(st, "one", -1, -1, &a, &err) < 0 ||
      state_tenant_create(st, "two", -1, -1, &b, &err) < 0) {
    printf("# %s\n", err.msg);
    return 2;
  }
  snprintf(t1, sizeof t1, "%s", a.id);
  snprintf(t2, sizeof t2, "%s", b.id);
  RUN(safe_names);
  RUN(spec_checks);
  RUN(types);
  RUN(slots_and_files);
  RUN(same_name_at_once);
  RUN(suffixes_run_out);
  RUN(expiry_revocation_tenants);
  RUN(listing);
  store_close(s);
  state_close(st);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    printf("# could not remove %s\n", dir);
  return unit_done();
}
