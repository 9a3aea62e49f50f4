/* Durability: when a commit reaches the disk, and group commit.
 *
 * The promise (state.h) is that a change acknowledged by a reply survives
 * power loss.  SQLite's synchronous=FULL keeps it by fsyncing the WAL inside
 * every COMMIT, under our connection mutex.  A request that changes the
 * box's row and then appends its audit record pays two fsyncs, one after the
 * other, and every other thread waits for the state lock meanwhile.
 *
 * So the connection runs synchronous=NORMAL (WAL frames are written, not
 * synced, at commit; SQLite itself still syncs around checkpoints), and this
 * file restores FULL's guarantee by syncing the WAL after commits itself:
 *
 *   - By default, right after each commit, from SQLite's WAL hook, still
 *     under the connection mutex: exactly FULL's behaviour, for every caller
 *     that does not ask for anything else (the monitor, the pool, the S3
 *     front, `husk mcp`, tests).
 *   - A thread that answers a request can defer: between
 *     state_defer_begin() and state_defer_end() its commits are not synced
 *     one by one; state_defer_end() -- called before the reply leaves --
 *     makes everything committed so far durable (this thread's changes,
 *     and any other's it may have read) with one fdatasync, outside the
 *     connection mutex.  Concurrent requests share it: one fdatasync
 *     covers every commit made before it started (group commit).
 *
 * One fdatasync of the WAL makes durable every frame appended to it before
 * the call, whoever appended it: the WAL is one file, and recovery replays
 * it up to the last commit frame whose checksum chain holds.
 *
 * The WAL hook replaces SQLite's auto-checkpoint (they share the hook), so
 * the hook also checkpoints once the WAL passes the same 1000 pages. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/db.h"

/* SQLite's default auto-checkpoint threshold (pages in the WAL). */
#define CHECKPOINT_FRAMES 1000

int (*db_fdatasync)(int fd) = fdatasync;
int (*db_fsync)(int fd) = fsync;

/* The deferral of the calling thread: on while a request is being
 * answered; `seq` is its last commit. */
static _Thread_local struct {
  struct state *st;
  uint64_t seq;  /* its last commit */
  uint64_t seen; /* the last commit there was when it last left the state lock */
} defer;

/* The WAL's descriptor, opened on first use (SQLite creates the file when
 * the connection first reads), reopened if something removed the file:
 * then the current WAL is a new file at the same path.  Returns an errno
 * value, 0 when st->wal_fd is usable.  Called by the syncing thread only. */
static int wal_open(struct state *st) {
  if (st->wal_fd >= 0) {
    struct stat sb;
    if (fstat(st->wal_fd, &sb) == 0 && sb.st_nlink > 0)
      return 0;
    close(st->wal_fd);
    st->wal_fd = -1;
  }
  if (!st->wal_path)
    return EIO;
  int fd = open(st->wal_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
  if (fd < 0)
    return errno;
  /* Its directory entry must be durable too (what FULL's DIRSYNC does). */
  int dfd = open(st->wal_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || (db_fsync(dfd) < 0 && errno != EINVAL)) {
    int e = errno;
    if (dfd >= 0)
      close(dfd);
    close(fd);
    return e;
  }
  close(dfd);
  st->wal_fd = fd;
  return 0;
}

/* Make every commit numbered up to `seq` durable.  Callers may or may not
 * hold the connection mutex; the sync lock is always taken after it, never
 * before, and the syncing thread holds neither while it waits on the disk. */
static int sync_to(struct state *st, uint64_t seq, struct husk_err *err) {
  pthread_mutex_lock(&st->sync_lock);
  int e = 0;
  while (!st->sync_failed && st->synced_seq < seq && e == 0) {
    if (st->syncing) {
      pthread_cond_wait(&st->sync_cond, &st->sync_lock);
      continue;
    }
    st->syncing = true;
    /* Commits made from here on are another sync's job. */
    uint64_t target = __atomic_load_n(&st->commit_seq, __ATOMIC_ACQUIRE);
    e = wal_open(st);
    if (e == 0) {
      pthread_mutex_unlock(&st->sync_lock);
      int r = db_fdatasync(st->wal_fd);
      int se = errno;
      pthread_mutex_lock(&st->sync_lock);
      if (r < 0) {
        /* After failed write-back the kernel may call the next sync clean
         * while the data is lost: nothing counts as durable any more. */
        st->sync_failed = se;
      } else if (target > st->synced_seq) {
        st->synced_seq = target;
      }
      st->syncs++;
    }
    st->syncing = false;
    pthread_cond_broadcast(&st->sync_cond);
  }
  /* A failed sync poisons only what was not already durable before it. */
  if (st->sync_failed && st->synced_seq < seq)
    e = st->sync_failed;
  pthread_mutex_unlock(&st->sync_lock);
  if (e)
    return husk_fail(err, e, "the database could not be written to disk: %s", strerror(e));
  return 0;
}

/* SQLite calls this after every commit of the connection, in the committing
 * thread, with our connection mutex held. */
static int wal_hook(void *arg, sqlite3 *db, const char *schema, int frames) {
  struct state *st = arg;
  uint64_t seq = __atomic_add_fetch(&st->commit_seq, 1, __ATOMIC_ACQ_REL);
  int rc = SQLITE_OK;
  if (defer.st == st) {
    defer.seq = seq;
  } else {
    struct husk_err err;
    if (sync_to(st, seq, &err) < 0)
      rc = SQLITE_IOERR_FSYNC; /* the statement reports it; the commit stands */
  }
  if (frames >= CHECKPOINT_FRAMES)
    sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
  return rc;
}

int db_durable_init(struct state *st, struct husk_err *err) {
  st->wal_fd = -1;
  const char *db = sqlite3_db_filename(st->db, "main");
  const char *wal = db ? sqlite3_filename_wal(db) : NULL;
  if (!wal || !*wal)
    return husk_fail(err, EINVAL, "the database has no write-ahead log");
  st->wal_path = strdup(wal);
  st->wal_dir = strdup(wal);
  if (!st->wal_path || !st->wal_dir) {
    free(st->wal_path);
    free(st->wal_dir);
    st->wal_path = st->wal_dir = NULL;
    return husk_fail(err, ENOMEM, "out of memory");
  }
  char *slash = strrchr(st->wal_dir, '/');
  if (slash)
    slash[slash == st->wal_dir ? 1 : 0] = '\0';
  else
    strcpy(st->wal_dir, ".");
  pthread_mutex_init(&st->sync_lock, NULL);
  pthread_cond_init(&st->sync_cond, NULL);
  sqlite3_wal_hook(st->db, wal_hook, st);
  return 0;
}

void db_durable_close(struct state *st) {
  if (st->wal_fd >= 0)
    close(st->wal_fd);
  st->wal_fd = -1;
  free(st->wal_path);
  free(st->wal_dir);
  st->wal_path = st->wal_dir = NULL;
  pthread_mutex_destroy(&st->sync_lock);
  pthread_cond_destroy(&st->sync_cond);
}

void state_defer_begin(struct state *st) {
  defer.st = st;
  defer.seq = defer.seen = 0;
}

void db_durable_seen(struct state *st) {
  if (defer.st == st)
    defer.seen = __atomic_load_n(&st->commit_seq, __ATOMIC_ACQUIRE);
}

int state_durable_now(struct state *st, struct husk_err *err) {
  if (defer.st != st)
    return 0; /* not deferring: every commit was synced when made */
  return sync_to(st, defer.seq > defer.seen ? defer.seq : defer.seen, err);
}

void state_defer_forget(struct state *st) {
  if (defer.st != st)
    return;
  defer.st = NULL;
  defer.seq = defer.seen = 0;
}

int state_defer_end(struct state *st, struct husk_err *err) {
  if (defer.st != st)
    return 0;
  /* Not only this thread's commits: what it read may have been committed
   * by another request still waiting for its sync, and a reply must not
   * show what a power loss could take back.  With nothing pending (the
   * usual case for a read) this costs nothing. */
  uint64_t seq = defer.seq > defer.seen ? defer.seq : defer.seen;
  defer.st = NULL;
  defer.seq = defer.seen = 0;
  return sync_to(st, seq, err);
}
