/* A tenant's end in the state, storage and template planes: S3 keys
 * minted by an API key are revoked with it; a tenant marked deleted has no
 * working key and gets no new box, template or build cache entry; the
 * purge removes every row, object file and template layer it owned (a
 * layer another template has stays), leaves other tenants alone, and a
 * SIGKILL at any step leaves a state from which running the steps again
 * (or, after the last one, opening the template store) finishes the job. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "state/db.h"
#include "state/state.h"
#include "state/template_state.h"
#include "storage/store.h"
#include "storage/upload_link.h"
#include "template/template.h"
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
static struct template_store *ts;

static void open_all(void) {
  struct husk_err err;
  char db[128];
  snprintf(db, sizeof db, "%s/husk.db", dir);
  if (state_open(&st, db, &err) < 0) {
    printf("# state_open: %s\n", err.msg);
    exit(2);
  }
  struct store_config c = {.data_dir = dir, .state = st, .public_url = "http://127.0.0.1:9"};
  if (store_open(&s, &c, &err) < 0) {
    printf("# store_open: %s\n", err.msg);
    exit(2);
  }
  struct template_store_config tc = {.data_dir = dir, .state = st};
  if (template_store_open(&ts, &tc, &err) < 0) {
    printf("# template_store_open: %s\n", err.msg);
    exit(2);
  }
}

static void close_all(void) {
  template_store_close(ts);
  store_close(s);
  state_close(st);
  ts = NULL;
  s = NULL;
  st = NULL;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
  char cmd[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  return system(cmd);
}

/* Layers (and blobs) in the template store. */
static int count_layers(const char *sub) {
  char p[160];
  snprintf(p, sizeof p, "%s/templates/%s", dir, sub);
  DIR *d = opendir(p);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    n += e->d_name[0] != '.';
  if (d)
    closedir(d);
  return n;
}

static ssize_t file_in(void *ctx, void *buf, size_t cap) { return read(*(int *)ctx, buf, cap); }

/* Import an image of layers `shared` (every tenant's images have it) and
 * `tag` (its own) as template `name` of `tenant` ("": the operator's). */
static int import(const char *tenant_id, const char *name, const char *tag, struct husk_err *err) {
  char img[128];
  snprintf(img, sizeof img, "%s/img-%s.tar", dir, tag);
  if (sh("mkdir -p %s/l/%s && echo %s > %s/l/%s/own && "
         "python3 tests/template/mkimage.py %s --layer %s/l/shared --layer %s/l/%s",
         dir, tag, tag, dir, tag, img, dir, dir, tag) != 0)
    return husk_fail(err, EIO, "mkimage.py failed");
  int fd = open(img, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return husk_error(err, errno, "%s", img);
  struct state_template t;
  int rc = template_import_archive(ts, tenant_id, name, file_in, &fd, &t, err);
  close(fd);
  if (rc == 0)
    state_template_free(&t);
  return rc;
}

/* A build that failed after a cached step: the step's layer (a file
 * `tag` on top of template `from`) is kept by the build cache only. */
static int cached_step(const char *tenant_id, const char *from, const char *tag,
                       struct husk_err *err) {
  struct state_template base;
  if (state_template_get(st, tenant_id, from, true, &base, err) < 0)
    return -1;
  struct template_asm *a = NULL;
  int rc = template_asm_begin(ts, tenant_id, "never-committed", &base, &a, err);
  state_template_free(&base);
  if (rc < 0)
    return -1;
  int wfd = template_asm_workdir(a);
  int tree = -1, f = -1;
  char diff[LAYER_DIGEST_SIZE], key[80];
  snprintf(key, sizeof key, "sha256:step-of-%s", tag);
  if (mkdirat(wfd, "tree", 0755) < 0 ||
      (tree = openat(wfd, "tree", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
      (f = openat(tree, tag, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) < 0 ||
      write(f, tag, strlen(tag)) != (ssize_t)strlen(tag))
    rc = husk_error(err, errno, "a step's tree");
  else if (template_asm_add_tree(a, tree, 0, NULL, diff, err) < 0 ||
           template_cache_put(ts, tenant_id, key, diff, err) < 0)
    rc = -1;
  if (f >= 0)
    close(f);
  if (tree >= 0)
    close(tree);
  template_asm_end(a);
  return rc;
}

static int count_files(const char *sub) {
  char p[160];
  snprintf(p, sizeof p, "%s/storage/%s", dir, sub);
  DIR *d = opendir(p);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    n += e->d_name[0] != '.';
  if (d)
    closedir(d);
  return n;
}

static int64_t count(const char *sql, const char *tenant) {
  sqlite3_stmt *q = NULL;
  int64_t v = -1;
  if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) == SQLITE_OK &&
      sqlite3_bind_text(q, 1, tenant, -1, SQLITE_STATIC) == SQLITE_OK &&
      sqlite3_step(q) == SQLITE_ROW)
    v = sqlite3_column_int64(q, 0);
  else
    printf("# `%s`: %s\n", sql, sqlite3_errmsg(st->db));
  sqlite3_finalize(q);
  return v;
}

/* Rows a tenant owns, over every table that names one. */
static int64_t owned_rows(const char *tenant) {
  static const char *const tables[] = {"api_keys", "boxes",     "jobs",       "secrets",
                                       "s3_keys",  "buckets",   "objects",    "uploads",
                                       "links",    "templates", "build_cache", "upload_links"};
  int64_t n = 0;
  for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
    char sql[96];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE tenant_id = ?1", tables[i]);
    n += count(sql, tenant);
  }
  return n + count("SELECT count(*) FROM tenants WHERE id = ?1", tenant);
}

static struct state_tenant tenant(const char *name) {
  struct state_tenant t = {0};
  struct husk_err err;
  if (state_tenant_create(st, name, -1, -1, &t, &err) < 0) {
    printf("# tenant_create: %s\n", err.msg);
    exit(2);
  }
  return t;
}

static int box(const char *tenant_id, const char *id, const char *state_name) {
  struct state_box b = {.memory = 100,
                        .pids = 64,
                        .cpu_milli = 1000,
                        .disk = 1 << 20,
                        .timeout_ms = 60000,
                        .uid_base = -1,
                        .slot = -1};
  snprintf(b.id, sizeof b.id, "%s", id);
  snprintf(b.tenant_id, sizeof b.tenant_id, "%s", tenant_id);
  snprintf(b.state, sizeof b.state, "%s", STATE_BOX_CREATING);
  struct husk_err err;
  if (state_box_insert(st, &b, &err) < 0)
    return -1;
  if (strcmp(state_name, STATE_BOX_CREATING) &&
      state_box_set_state(st, id, NULL, state_name, "test", 0, &err) < 0)
    return -1;
  return 0;
}

/* Everything a tenant can own: keys of both kinds, an ended box with a
 * process, a job, a secret, a bucket with objects, an upload with a part,
 * a link, a template (a layer of its own, one every template has) and a
 * build cache entry (a layer of its own). */
static void populate(const struct state_tenant *t, const char *tag) {
  struct husk_err err;
  char plain[STATE_KEY_SIZE], ak[STORE_ACCESS_KEY_SIZE], sk[STORE_SECRET_SIZE];
  struct state_key k;
  CHECK_OK(state_key_create(st, t->id, plain, sizeof plain, &k, &err));
  CHECK_OK(store_key_mint(s, t->id, k.id, ak, sk, &err));
  char bid[40];
  snprintf(bid, sizeof bid, "b_%s", tag);
  CHECK(box(t->id, bid, STATE_BOX_RUNNING) == 0);
  struct state_proc p = {.pid = 7, .cmd_json = "[\"sleep\"]"};
  snprintf(p.box_id, sizeof p.box_id, "%s", bid);
  snprintf(p.state, sizeof p.state, "%s", STATE_PROC_RUNNING);
  CHECK_OK(state_proc_insert(st, &p, &err));
  struct state_job j = {.pid = 7, .kind = "exec", .state = STATE_JOB_RUNNING};
  snprintf(j.id, sizeof j.id, "j_%s", tag);
  snprintf(j.tenant_id, sizeof j.tenant_id, "%s", t->id);
  snprintf(j.box_id, sizeof j.box_id, "%s", bid);
  CHECK_OK(state_job_insert(st, &j, &err));
  CHECK_OK(state_box_set_state(st, bid, NULL, STATE_BOX_STOPPED, "test", 0, &err));
  sqlite3_stmt *q = NULL;
  CHECK(sqlite3_prepare_v2(st->db,
                           "INSERT INTO secrets (tenant_id, name, sealed, "
                           "created_ms, updated_ms) "
                           "VALUES (?1, 'TOKEN', x'00', 0, 0)",
                           -1, &q, NULL) == SQLITE_OK);
  sqlite3_bind_text(q, 1, t->id, -1, SQLITE_STATIC);
  CHECK(sqlite3_step(q) == SQLITE_DONE);
  sqlite3_finalize(q);
  char bucket[32];
  snprintf(bucket, sizeof bucket, "bkt-%s", tag);
  CHECK_OK(store_bucket_create(s, t->id, bucket, &err));
  struct store_object o;
  for (int i = 0; i < 3; i++) {
    char key[16];
    snprintf(key, sizeof key, "k%d", i);
    CHECK_OK(store_put_buffer(s, t->id, bucket, key, "data", 4, NULL, NULL, &o, &err));
    store_object_free(&o);
  }
  char up[STORE_ID_SIZE];
  CHECK_OK(store_upload_create(s, t->id, bucket, "big", NULL, NULL, up, &err));
  struct store_writer *w = NULL;
  CHECK_OK(store_writer_open(s, CK_NONE, false, 0, &w, &err));
  char etag[STORE_ETAG_SIZE];
  struct store_expect e = {.length = -1};
  CHECK_OK(store_writer_write(w, "part", 4, &err));
  CHECK_OK(store_writer_finish(w, &e, etag, NULL, &err));
  CHECK_OK(store_part_commit(w, t->id, bucket, "big", up, 1, &err));
  struct store_link l;
  CHECK_OK(store_link_create(s, t->id, bucket, "k0", 60, NULL, false, NULL, &l, &err));
  store_link_free(&l);
  struct upload_link_spec us = {.bucket = bucket};
  struct state_upload_link ul;
  char *ul_url = NULL;
  CHECK_OK(upload_link_create(s, t->id, &us, "http://127.0.0.1:9", &ul, &ul_url, &err));
  free(ul_url);
  char tpl[32];
  snprintf(tpl, sizeof tpl, "tpl-%s", tag);
  CHECK_OK(import(t->id, tpl, tag, &err));
  char step[40];
  snprintf(step, sizeof step, "step-%s", tag);
  CHECK_OK(cached_step(t->id, tpl, step, &err));
}

/* What populate adds to the template store: two layers (the template's
 * own, the cached step's), each with its blob. */
#define POPULATE_LAYERS 2

/* As box_tenant_finish_delete does, once the boxes are ended. */
static int delete_tenant(const char *id, struct husk_err *err) {
  if (store_tenant_purge(s, id, err) < 0 || state_tenant_purge(st, id, err) < 0)
    return -1;
  return template_collect(ts, err) < 0 ? -1 : 0;
}

TEST(revoking_an_api_key_revokes_the_s3_keys_it_minted) {
  struct husk_err err;
  struct state_tenant t = tenant("minted");
  char p1[STATE_KEY_SIZE], p2[STATE_KEY_SIZE];
  struct state_key k1, k2;
  CHECK_OK(state_key_create(st, t.id, p1, sizeof p1, &k1, &err));
  CHECK_OK(state_key_create(st, t.id, p2, sizeof p2, &k2, &err));
  char a1[STORE_ACCESS_KEY_SIZE], a2[STORE_ACCESS_KEY_SIZE], sk[STORE_SECRET_SIZE];
  char owner[32];
  CHECK_OK(store_key_mint(s, t.id, k1.id, a1, sk, &err));
  CHECK_OK(store_key_mint(s, t.id, k2.id, a2, sk, &err));
  CHECK_ERR(store_key_mint(s, t.id, "not an id", a2, sk, &err), EINVAL);
  CHECK_OK(state_key_revoke(st, t.id, k1.id, &err));
  CHECK_ERR(store_key_lookup(s, a1, owner, sk, NULL, &err), STORE_ENOACCESSKEY);
  CHECK_OK(store_key_lookup(s, a2, owner, sk, NULL, &err));
  CHECK_STR(owner, t.id);
  CHECK_OK(state_tenant_mark_deleted(st, t.id, &err));
  CHECK_OK(delete_tenant(t.id, &err));
}

TEST(a_marked_tenant_has_no_key_and_gets_no_box) {
  struct husk_err err;
  struct state_tenant t = tenant("marked");
  char plain[STATE_KEY_SIZE], ak[STORE_ACCESS_KEY_SIZE], sk[STORE_SECRET_SIZE], owner[32];
  struct state_key k;
  CHECK_OK(state_key_create(st, t.id, plain, sizeof plain, &k, &err));
  CHECK_OK(store_key_mint(s, t.id, k.id, ak, sk, &err));
  CHECK_ERR(state_tenant_purge(st, t.id, &err), ESTALE); /* not marked: nothing goes */
  CHECK_OK(state_tenant_mark_deleted(st, t.id, &err));
  struct state_tenant got;
  CHECK_OK(state_tenant_get(st, t.id, &got, &err));
  CHECK(got.deleted_ms > 0);
  int64_t first = got.deleted_ms;
  CHECK_OK(state_tenant_mark_deleted(st, t.id, &err));
  CHECK_OK(state_tenant_get(st, t.id, &got, &err));
  CHECK(got.deleted_ms == first);
  CHECK_ERR(state_key_authenticate(st, plain, NULL, &err), EACCES);
  CHECK_ERR(store_key_lookup(s, ak, owner, sk, NULL, &err), STORE_ENOACCESSKEY);
  CHECK(box(t.id, "b_after_mark", STATE_BOX_CREATING) == -1);
  CHECK_ERR(state_tenant_mark_deleted(st, "t_000000000000000000000000", &err), ENOENT);
  CHECK_OK(delete_tenant(t.id, &err));
}

/* An import or build in progress when its tenant is marked records no
 * template and no cache entry for it, and leaves no layer behind. */
TEST(a_marked_tenant_gets_no_template_and_no_cache_entry) {
  struct husk_err err;
  struct state_tenant t = tenant("late");
  CHECK_OK(import(t.id, "before", "late-before", &err));
  int layers0 = count_layers("layers"), blobs0 = count_layers("blobs/sha256");
  CHECK_OK(state_tenant_mark_deleted(st, t.id, &err));
  CHECK_ERR(import(t.id, "after", "late-after", &err), ENOENT);
  CHECK(strstr(err.msg, "being deleted") != NULL);
  CHECK_ERR(cached_step(t.id, "before", "late-step", &err), ENOENT);
  CHECK(count_layers("layers") == layers0 && count_layers("blobs/sha256") == blobs0);
  CHECK(count("SELECT count(*) FROM templates WHERE tenant_id = ?1", t.id) == 1);
  CHECK(count("SELECT count(*) FROM build_cache WHERE tenant_id = ?1", t.id) == 0);
  /* The row itself, in the insert's transaction (the check before the
   * import began is no guard: the mark may come while it unpacks). */
  struct state_template row = {.source = "oci",
                               .config_digest = "sha256:0",
                               .config_json = "{}",
                               .layers_json = "[]"};
  snprintf(row.id, sizeof row.id, "tpl_000000000000000000000001");
  snprintf(row.tenant_id, sizeof row.tenant_id, "%s", t.id);
  snprintf(row.name, sizeof row.name, "raced");
  CHECK_ERR(state_template_insert(st, &row, 0, &err), ENOENT);
  CHECK_ERR(state_build_cache_put(st, t.id, "sha256:k", "sha256:d", 1, 0, &err), ENOENT);
  CHECK_OK(delete_tenant(t.id, &err));
  CHECK(count_layers("layers") == layers0 - 1); /* `before`'s own layer */
  /* Gone altogether: refused the same way. */
  CHECK_ERR(state_template_insert(st, &row, 0, &err), ENOENT);
  CHECK(strstr(err.msg, "not found") != NULL);
  CHECK_ERR(state_build_cache_put(st, t.id, "sha256:k", "sha256:d", 1, 0, &err), ENOENT);
}

TEST(purge_removes_everything_the_tenant_owned_and_nothing_else) {
  struct husk_err err;
  struct state_tenant gone = tenant("gone"), kept = tenant("kept");
  int files0 = count_files("objects"), parts0 = count_files("parts");
  int layers0 = count_layers("layers"), blobs0 = count_layers("blobs/sha256");
  populate(&gone, "gone");
  populate(&kept, "kept");
  int64_t kept_rows = owned_rows(kept.id);
  CHECK(count("SELECT count(*) FROM templates WHERE tenant_id = ?1", gone.id) == 1);
  CHECK(count("SELECT count(*) FROM build_cache WHERE tenant_id = ?1", gone.id) == 1);
  CHECK(count_files("objects") == files0 + 6 && count_files("parts") == parts0 + 2);
  CHECK(count_layers("layers") == layers0 + 2 * POPULATE_LAYERS);
  /* A live box holds the purge back until it is ended. */
  CHECK(box(gone.id, "b_live", STATE_BOX_RUNNING) == 0);
  CHECK_OK(state_tenant_mark_deleted(st, gone.id, &err));
  CHECK_OK(store_tenant_purge(s, gone.id, &err));
  CHECK_ERR(state_tenant_purge(st, gone.id, &err), EBUSY);
  CHECK_OK(state_box_set_state(st, "b_live", NULL, STATE_BOX_STOPPED, "test", 0, &err));
  CHECK_OK(state_tenant_purge(st, gone.id, &err));
  CHECK(template_collect(ts, &err) == 2 * POPULATE_LAYERS); /* each layer and its blob */
  CHECK(owned_rows(gone.id) == 0);
  CHECK(owned_rows(kept.id) == kept_rows);
  CHECK(count_files("objects") == files0 + 3 && count_files("parts") == parts0 + 1);
  /* Its own layers and blobs went; the one every template has stayed. */
  CHECK(count_layers("layers") == layers0 + POPULATE_LAYERS);
  CHECK(count_layers("blobs/sha256") == blobs0 + POPULATE_LAYERS);
  struct state_template tp;
  CHECK_OK(state_template_get(st, kept.id, "tpl-kept", false, &tp, &err));
  struct template_layers tl;
  CHECK_OK(template_layers_open(ts, &tp, &tl, &err)); /* every layer of it is there */
  CHECK(tl.n == 2);
  template_layers_release(&tl);
  state_template_free(&tp);
  CHECK_OK(state_template_get(st, "", "shared", false, &tp, &err));
  CHECK_OK(template_layers_open(ts, &tp, &tl, &err));
  template_layers_release(&tl);
  state_template_free(&tp);
  struct state_tenant t;
  CHECK_ERR(state_tenant_get(st, gone.id, &t, &err), ENOENT);
  /* The audit log is kept: it is the record of what the tenant did. */
  CHECK_OK(state_tenant_create(st, "gone", -1, -1, &t, &err)); /* the name is free */
}

/* ---- crashes ---- */

static const char *kill_at;
static int kill_after; /* the hook passes this many times before killing */
static void kill_hook(const char *point) {
  if (kill_at && !strcmp(point, kill_at) && kill_after-- <= 0)
    raise(SIGKILL);
}

/* A child runs the whole deletion of `id` and is killed at `point`. */
static bool child_killed_at(const char *point, int after, const char *id) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    struct husk_err err;
    kill_at = point;
    kill_after = after;
    state_fault_hook = kill_hook;
    if (state_tenant_mark_deleted(st, id, &err) < 0 || delete_tenant(id, &err) < 0)
      _exit(3);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

TEST(sigkill_at_any_step_then_a_rerun_finishes) {
  static const struct {
    const char *point;
    int after;
  } points[] = {
      {"tenant_mark_deleted", 0},          /* before the mark commits */
      {"store_tenant_purge", 0},           /* the first batch of objects */
      {"store_tenant_purge", 2},           /* the parts (after an empty batch of objects) */
      {"store_tenant_purge_committed", 0}, /* objects' rows gone, files not yet */
      {"tenant_purge", 0},                 /* the last transaction */
      {"tenant_purge_committed", 0},       /* rows gone, template layers not yet */
  };
  for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
    struct husk_err err;
    char name[32];
    snprintf(name, sizeof name, "crash%zu", i);
    struct state_tenant t = tenant(name);
    int files0 = count_files("objects"), parts0 = count_files("parts");
    int layers0 = count_layers("layers"), blobs0 = count_layers("blobs/sha256");
    populate(&t, name);
    CHECK(count_layers("layers") == layers0 + POPULATE_LAYERS);
    close_all(); /* the child has the files to itself */
    open_all();
    CHECK(child_killed_at(points[i].point, points[i].after, t.id));
    close_all(); /* as a restarted daemon: store_open and template_store_open sweep orphans */
    open_all();
    struct state_tenant got;
    bool purged = !strcmp(points[i].point, "tenant_purge_committed");
    if (purged) {
      CHECK_ERR(state_tenant_get(st, t.id, &got, &err), ENOENT); /* nothing to resume */
    } else {
      CHECK_OK(state_tenant_get(st, t.id, &got, &err));
      if (i == 0) {
        CHECK(got.deleted_ms == 0); /* the mark is all or nothing */
        CHECK_OK(state_tenant_mark_deleted(st, t.id, &err));
      } else {
        CHECK(got.deleted_ms > 0);
      }
      CHECK_OK(delete_tenant(t.id, &err));
    }
    CHECK(owned_rows(t.id) == 0);
    CHECK(count_files("objects") == files0 && count_files("parts") == parts0);
    CHECK(count_layers("layers") == layers0 && count_layers("blobs/sha256") == blobs0);
    if (unit_cur_failed)
      printf("#   (killed at %s #%d)\n", points[i].point, points[i].after);
  }
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/husk-tdel-XXXXXX");
  if (!mkdtemp(dir))
    return 2;
  chmod(dir, 0700);
  if (sh("mkdir -p %s/l/shared && echo shared > %s/l/shared/shared", dir, dir) != 0)
    return 2;
  open_all();
  struct husk_err err;
  if (import("", "shared", "operator", &err) < 0) { /* has the `shared` layer too */
    printf("# the operator's template: %s\n", err.msg);
    return 2;
  }
  RUN(revoking_an_api_key_revokes_the_s3_keys_it_minted);
  RUN(a_marked_tenant_has_no_key_and_gets_no_box);
  RUN(a_marked_tenant_gets_no_template_and_no_cache_entry);
  RUN(purge_removes_everything_the_tenant_owned_and_nothing_else);
  RUN(sigkill_at_any_step_then_a_rerun_finishes);
  close_all();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    printf("# could not remove %s\n", dir);
  return unit_done();
}
