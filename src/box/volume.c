/* Named volumes (see husk/volume.h).
 *
 * A volume is a row (state/volumes.c) and an ext4 image,
 * DATA/volumes/<id>.img.  Its creation, crash-safe:
 *
 *   1. The row, 'creating'.
 *   2. The image made in DATA/volumes/tmp (a sparse file of the size,
 *      mkfs.ext4 on it, its root directory the box user's), fsync'ed.
 *   3. Renamed into DATA/volumes, the directory fsync'ed.
 *   4. The row 'ready'.
 * A crash before 4 leaves a 'creating' row, which box_volume_sweep
 * removes with its file at the next start, as it does image files no row
 * names (a deletion's, between its commit and the unlink).
 *
 * A box's mounts are recorded (state_volume_attach) after its row and
 * before its jail is built: box_make_jail reads them back and hands the
 * opened images to the spawner, so a box resumed from disk gets them
 * again.  The row's live state is what holds the volume: nothing is
 * released when a box ends. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "box/box_internal.h"
#include "husk/volume.h"
#include "jail/limits.h"
#include "state/volume_state.h"
#include "util/cleanup.h"
#include "util/fileio.h"

#define VOL_DIR "volumes"
#define VOL_TMP "tmp"
#define VOL_SUFFIX ".img"
/* Where mkfs.ext4 is on Debian and others (e2fsprogs). */
static const char *const mkfs_paths[] = {"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"};

static bool name_ok(const char *n) {
  size_t len = n ? strlen(n) : 0;
  return len >= 1 && len < HUSK_VOLUME_NAME_MAX &&
         strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789-") == len;
}

static int check_name(const char *name, struct husk_err *err) {
  if (!name_ok(name))
    return husk_fail(err, EINVAL, "a volume name is 1 to %d characters of a-z, 0-9 and '-'",
                     HUSK_VOLUME_NAME_MAX - 1);
  return 0;
}

/* DATA/volumes (made if missing), as a directory fd. */
static int vol_dir(struct husk_mgr *m, struct husk_err *err) {
  char dir[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s/" VOL_DIR "/" VOL_TMP, m->data_dir) >= (int)sizeof dir)
    return husk_fail(err, ENAMETOOLONG, "the data directory's path is too long");
  if (mkdir_private(dir, err) < 0)
    return -1;
  dir[strlen(dir) - strlen("/" VOL_TMP)] = '\0';
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return husk_error(err, errno, "cannot open `%s`", dir);
  return fd;
}

static void fill_info(struct husk_volume_info *vi, const struct state_volume *v) {
  memset(vi, 0, sizeof *vi);
  snprintf(vi->id, sizeof vi->id, "%s", v->id);
  snprintf(vi->name, sizeof vi->name, "%s", v->name);
  vi->size = (uint64_t)v->size;
  vi->created_ms = v->created_ms;
  snprintf(vi->box_id, sizeof vi->box_id, "%s", v->box_id);
}

/* 2.  mkfs.ext4 on `path`, its root owned by the box user; what it
 * says on stderr goes into the error. */
static int run_mkfs(const char *path, uint64_t size, struct husk_err *err) {
  const char *mkfs = NULL;
  for (size_t i = 0; i < sizeof mkfs_paths / sizeof mkfs_paths[0] && !mkfs; i++)
    if (access(mkfs_paths[i], X_OK) == 0)
      mkfs = mkfs_paths[i];
  if (!mkfs)
    return husk_fail(err, ENOTSUP, "mkfs.ext4 is not installed (install e2fsprogs)");
  char kib[32], owner[64];
  snprintf(kib, sizeof kib, "%lluk", (unsigned long long)(size / 1024));
  snprintf(owner, sizeof owner, "root_owner=%u:%u", HUSK_BOX_UID, HUSK_BOX_GID);
  char *argv[] = {"mkfs.ext4", "-q", "-F", "-m", "0", "-E", owner, (char *)path, kib, NULL};
  char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C", NULL};
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) < 0)
    return husk_error(err, errno, "cannot run mkfs.ext4");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
  pid_t pid;
  int rc = posix_spawn(&pid, mkfs, &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  close(pipefd[1]);
  if (rc != 0) {
    close(pipefd[0]);
    return husk_error(err, rc, "cannot start `%s`", mkfs);
  }
  char msg[256];
  size_t got = 0;
  for (;;) {
    char buf[512];
    ssize_t n = read(pipefd[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    size_t take = (size_t)n < sizeof msg - 1 - got ? (size_t)n : sizeof msg - 1 - got;
    memcpy(msg + got, buf, take);
    got += take;
  }
  close(pipefd[0]);
  msg[got] = '\0';
  for (char *p = msg; *p; p++)
    if (*p == '\n' || (unsigned char)*p < 0x20)
      *p = ' ';
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR)
      return husk_error(err, errno, "mkfs.ext4");
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return husk_fail(err, EIO, "mkfs.ext4 failed (exit %d): %s",
                     WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), msg);
  return 0;
}

/* 2 and 3. */
static int make_image(struct husk_mgr *m, int dir, const char *id, uint64_t size,
                      struct husk_err *err) {
  char name[64], tmp[80], path[PATH_MAX];
  snprintf(name, sizeof name, "%s" VOL_SUFFIX, id);
  snprintf(tmp, sizeof tmp, VOL_TMP "/%s", name);
  if (snprintf(path, sizeof path, "%s/" VOL_DIR "/%s", m->data_dir, tmp) >= (int)sizeof path)
    return husk_fail(err, ENAMETOOLONG, "the data directory's path is too long");
  {
    cleanup_close int fd =
        openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
      return husk_error(err, errno, "cannot create `%s`", path);
    if (ftruncate(fd, (off_t)size) < 0) {
      husk_error(err, errno, "cannot size `%s`", path);
      unlinkat(dir, tmp, 0);
      return -1;
    }
  }
  if (run_mkfs(path, size, err) < 0) {
    unlinkat(dir, tmp, 0);
    return -1;
  }
  cleanup_close int fd = openat(dir, tmp, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || fsync(fd) < 0 || renameat(dir, tmp, dir, name) < 0 || fsync(dir) < 0) {
    husk_error(err, errno, "cannot put the volume's image in place");
    unlinkat(dir, tmp, 0);
    unlinkat(dir, name, 0);
    return -1;
  }
  return 0;
}

int husk_volume_create(struct husk_mgr *m, const char *tenant, const char *name, uint64_t size,
                       struct husk_volume_info *out, struct husk_err *err) {
  if (check_name(name, err) < 0)
    return -1;
  if (size == 0)
    size = HUSK_VOLUME_DEFAULT_SIZE;
  if (size < HUSK_VOLUME_MIN_SIZE || size > HUSK_VOLUME_MAX_SIZE || size % (1 << 20) != 0)
    return husk_fail(err, EINVAL,
                     "a volume's size is a whole number of MiB from %llu MiB to %llu GiB",
                     (unsigned long long)(HUSK_VOLUME_MIN_SIZE >> 20),
                     (unsigned long long)(HUSK_VOLUME_MAX_SIZE >> 30));
  cleanup_close int dir = vol_dir(m, err);
  if (dir < 0)
    return -1;
  /* The image is sparse, but what it may come to hold must fit the data
   * disk now, above its reserve (the database lives there too). */
  if (disk_reserve_check(dir, &m->data_reserve, size, err) < 0)
    return husk_error_wrap(err, "cannot make a volume of %llu MiB",
                           (unsigned long long)(size >> 20));
  /* 1. */
  struct state_volume v = {.size = (int64_t)size, .created_ms = state_now_ms()};
  snprintf(v.tenant_id, sizeof v.tenant_id, "%s", tenant);
  snprintf(v.name, sizeof v.name, "%s", name);
  if (state_new_id("v_", v.id, sizeof v.id, err) < 0 ||
      state_volume_insert(m->cfg.state, &v, HUSK_VOLUMES_PER_TENANT_MAX, err) < 0)
    return -1;
  /* 2, 3 and 4. */
  struct husk_err ignored;
  if (make_image(m, dir, v.id, size, err) < 0) {
    state_volume_remove(m->cfg.state, v.id, &ignored);
    return husk_error_wrap(err, "cannot make volume `%s`", name);
  }
  if (state_volume_ready(m->cfg.state, v.id, err) < 0) {
    char img[64];
    snprintf(img, sizeof img, "%s" VOL_SUFFIX, v.id);
    unlinkat(dir, img, 0);
    state_volume_remove(m->cfg.state, v.id, &ignored);
    return -1;
  }
  box_log(m, "volume %s (%s, %llu MiB) created for tenant %s", v.id, name,
          (unsigned long long)(size >> 20), tenant);
  if (out)
    fill_info(out, &v);
  return 0;
}

int husk_volume_get(struct husk_mgr *m, const char *tenant, const char *name,
                    struct husk_volume_info *out, struct husk_err *err) {
  if (!name_ok(name))
    return husk_fail(err, ENOENT, "no such volume");
  struct state_volume v;
  if (state_volume_get(m->cfg.state, tenant, name, &v, err) < 0)
    return -1;
  fill_info(out, &v);
  return 0;
}

struct list_ctx {
  int (*cb)(void *, const struct husk_volume_info *);
  void *ctx;
};

static int list_one(void *ctx, const struct state_volume *v) {
  struct list_ctx *lc = ctx;
  struct husk_volume_info vi;
  fill_info(&vi, v);
  return lc->cb(lc->ctx, &vi);
}

int husk_volume_list(struct husk_mgr *m, const char *tenant,
                     int (*cb)(void *ctx, const struct husk_volume_info *vi), void *ctx,
                     struct husk_err *err) {
  struct list_ctx lc = {.cb = cb, .ctx = ctx};
  return state_volume_list(m->cfg.state, tenant, list_one, &lc, err);
}

int husk_volume_delete(struct husk_mgr *m, const char *tenant, const char *name,
                       struct husk_err *err) {
  if (!name_ok(name))
    return husk_fail(err, ENOENT, "no such volume");
  char id[STATE_VOLUME_ID_SIZE];
  if (state_volume_delete(m->cfg.state, tenant, name, id, err) < 0)
    return -1;
  /* Committed: the image goes now, or at the next start's sweep. */
  struct husk_err e2;
  cleanup_close int dir = vol_dir(m, &e2);
  char img[64];
  snprintf(img, sizeof img, "%s" VOL_SUFFIX, id);
  if (dir < 0 || (unlinkat(dir, img, 0) < 0 && errno != ENOENT))
    box_log(m, "volume %s: cannot remove its image now (the next start will): %s", id,
            dir < 0 ? e2.msg : strerror(errno));
  box_log(m, "volume %s (%s) of tenant %s deleted", id, name, tenant);
  return 0;
}

/* ---- a box's mounts ------------------------------------------------------------ */

/* "/workspace/a/b" -> "a/b": absolute, under /workspace (not it), every
 * component a plain name (no "", ".", ".."), of printable ASCII. */
static int mount_path(const char *path, char *rel, size_t rel_size, struct husk_err *err) {
  static const char ws[] = "/workspace/";
  if (!path || strncmp(path, ws, sizeof ws - 1) != 0 || !path[sizeof ws - 1])
    return husk_fail(err, EINVAL,
                     "a volume's path must be a directory under /workspace, e.g. "
                     "/workspace/data (not `%.100s`)",
                     path ? path : "");
  const char *r = path + sizeof ws - 1;
  if (strlen(r) >= rel_size)
    return husk_fail(err, EINVAL, "a volume's path is too long (at most %zu bytes)",
                     rel_size - 1 + sizeof ws - 1);
  for (const char *p = r; *p;) {
    size_t n = strcspn(p, "/");
    if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
      return husk_fail(err, EINVAL,
                       "a volume's path must be normalized (no `.`, `..`, `//` or trailing "
                       "`/`): `%.100s`",
                       path);
    for (size_t i = 0; i < n; i++)
      if ((unsigned char)p[i] <= 0x20 || (unsigned char)p[i] >= 0x7f)
        return husk_fail(err, EINVAL,
                         "a volume's path holds a space or a character that is not printable "
                         "ASCII: `%.100s`",
                         path);
    p += n;
    if (*p == '/' && !p[1])
      return husk_fail(err, EINVAL,
                       "a volume's path must be normalized (no trailing `/`): `%.100s`", path);
    if (*p == '/')
      p++;
  }
  snprintf(rel, rel_size, "%s", r);
  return 0;
}

/* a is b, or b is under a. */
static bool nested(const char *a, const char *b) {
  size_t n = strlen(a);
  return !strncmp(a, b, n) && (b[n] == '\0' || b[n] == '/');
}

int box_volumes_check(const struct husk_box_spec *req, struct state_volume_mount *out,
                      struct husk_err *err) {
  if (req->nvolumes > HUSK_VOLUME_MOUNTS_MAX)
    return husk_fail(err, EINVAL, "a sandbox mounts at most %d volumes (%zu asked)",
                     HUSK_VOLUME_MOUNTS_MAX, req->nvolumes);
  if (req->nvolumes && !req->volumes)
    return husk_fail(err, EINVAL, "the volume list is missing");
  for (size_t i = 0; i < req->nvolumes; i++) {
    const struct husk_volume_mount *v = &req->volumes[i];
    memset(&out[i], 0, sizeof out[i]);
    if (check_name(v->name, err) < 0 ||
        mount_path(v->path, out[i].path, sizeof out[i].path, err) < 0)
      return -1;
    snprintf(out[i].name, sizeof out[i].name, "%s", v->name);
    out[i].read_only = v->read_only;
    for (size_t k = 0; k < i; k++) {
      if (!strcmp(out[k].name, out[i].name))
        return husk_fail(err, EINVAL, "volume `%s` is mounted twice", v->name);
      if (nested(out[k].path, out[i].path) || nested(out[i].path, out[k].path))
        return husk_fail(err, EINVAL,
                         "volume paths /workspace/%s and /workspace/%s are nested in each "
                         "other: each needs a place of its own",
                         out[k].path, out[i].path);
    }
  }
  return 0;
}

int box_volumes_precheck(struct husk_mgr *m, const char *tenant,
                         const struct state_volume_mount *mounts, size_t n, struct husk_err *err) {
  for (size_t i = 0; i < n; i++) {
    struct state_volume v;
    if (state_volume_get(m->cfg.state, tenant, mounts[i].name, &v, err) < 0)
      return -1;
    if (v.box_id[0])
      return husk_fail(err, EBUSY, "volume `%s` is mounted by sandbox %s already", mounts[i].name,
                       v.box_id);
  }
  return 0;
}

int box_volumes_open(struct husk_mgr *m, const char *box_id, struct jail_volume *out,
                     char paths[][STATE_VOLUME_PATH_SIZE], size_t *n, struct husk_err *err) {
  *n = 0;
  struct state_volume_mount mounts[JAIL_MAX_VOLUMES];
  size_t got = 0;
  if (state_volume_mounts(m->cfg.state, box_id, mounts, JAIL_MAX_VOLUMES, &got, err) < 0)
    return -1;
  if (got == 0)
    return 0;
  cleanup_close int dir = vol_dir(m, err);
  if (dir < 0)
    return -1;
  for (size_t i = 0; i < got; i++) {
    char img[64];
    snprintf(img, sizeof img, "%.31s" VOL_SUFFIX, mounts[i].volume_id);
    int fd = openat(dir, img, (mounts[i].read_only ? O_RDONLY : O_RDWR) | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      int e = errno;
      box_volumes_close(out, *n);
      *n = 0;
      return husk_error(err, e, "cannot open the image of volume `%s`", mounts[i].name);
    }
    snprintf(paths[i], STATE_VOLUME_PATH_SIZE, "%s", mounts[i].path);
    out[i] = (struct jail_volume){.image = fd, .path = paths[i], .read_only = mounts[i].read_only};
    *n = i + 1;
  }
  return 0;
}

void box_volumes_close(struct jail_volume *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    close_quiet(v[i].image);
}

/* ---- the sweep ------------------------------------------------------------------ */

static int sweep_creating(void *ctx, const struct state_volume *v) {
  struct husk_mgr *m = ctx;
  struct husk_err err;
  if (state_volume_remove(m->cfg.state, v->id, &err) < 0)
    box_log(m, "volume %s: %s", v->id, err.msg);
  else
    box_log(m, "volume %s (%s): removed, it was being made when the daemon stopped", v->id,
            v->name);
  return 0;
}

/* Image files (in DATA/volumes, and any in tmp) no row names. */
static void sweep_files(struct husk_mgr *m, int dir, const char *sub) {
  cleanup_close int d = sub ? openat(dir, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                            : fcntl(dir, F_DUPFD_CLOEXEC, 3);
  if (d < 0)
    return;
  DIR *ds = fdopendir(d);
  if (!ds)
    return;
  d = -1; /* the DIR's */
  int fd = dirfd(ds);
  struct dirent *e;
  while ((e = readdir(ds))) {
    size_t len = strlen(e->d_name), sl = strlen(VOL_SUFFIX);
    if (len <= sl || strcmp(e->d_name + len - sl, VOL_SUFFIX) != 0)
      continue;
    char id[STATE_VOLUME_ID_SIZE];
    if (len - sl >= sizeof id)
      continue;
    memcpy(id, e->d_name, len - sl);
    id[len - sl] = '\0';
    bool known = false;
    struct husk_err err;
    if (state_volume_exists(m->cfg.state, id, &known, &err) < 0)
      continue;
    /* In tmp, a file is always a leftover: its row is 'creating' (removed
     * above) or gone. */
    if ((!known || sub) && unlinkat(fd, e->d_name, 0) == 0)
      box_log(m, "volume %s: removed its image, no volume has it", id);
  }
  closedir(ds);
}

void box_volume_sweep(struct husk_mgr *m, bool at_start) {
  struct husk_err err;
  if (at_start &&
      state_volume_list_creating(m->cfg.state, STATE_LIST_MAX, sweep_creating, m, &err) < 0)
    box_log(m, "volumes: %s", err.msg);
  cleanup_close int dir = vol_dir(m, &err);
  if (dir < 0) {
    box_log(m, "volumes: %s", err.msg);
    return;
  }
  /* Later than the start, a file in tmp may be one being made now. */
  if (at_start)
    sweep_files(m, dir, VOL_TMP);
  sweep_files(m, dir, NULL);
}
