/* The box spawner of `husk serve`: a single-threaded helper process that
 * creates boxes on the daemon's request.
 *
 * Why: a box's init is a clone of the process that creates it.  Cloned
 * from the multi-threaded daemon, it could inherit a malloc or setxid lock
 * held by some other thread at that instant and hang forever (fork in init,
 * setresuid in the child), and it would carry a copy of the daemon's
 * memory (keys, other tenants' data) into the box.  The spawner is a husk
 * binary executed afresh with an empty environment, before and apart from
 * everything the daemon holds, so every init starts from a small, clean,
 * single-threaded image.  Boxes are the spawner's children; it reaps them.
 * The daemon waits for their end through pidfds. */
#ifndef HUSK_BOX_SPAWNER_H
#define HUSK_BOX_SPAWNER_H

#include "jail/jail.h"
#include "util/error.h"

#define HUSK_SPAWNER_ARGV0 "husk-spawner"

struct spawner;

/* Start the spawner: `binary` if given, else the `husk` binary next to
 * this one if it is of the same build (it says so in its first message),
 * else the installed one if it is, else /proc/self/exe, executed as
 * HUSK_SPAWNER_ARGV0.  Every binary that may be a spawner
 * (husk, husk-serve, husk-mcp) calls spawner_main() under that name.
 * `nice` (0: normal): the spawner's priority, so also that of the work of
 * building each box; the box's init is set back to 0 before it is
 * returned.  The warm pool builds at a low priority so that refilling it
 * does not slow the requests it serves.  `root_dir` (or NULL): an empty
 * directory on which the spawner, in a mount namespace of its own,
 * prepares once the read-only part of the root every box shares (the
 * skeleton, /usr, the generated /etc: rootfs_prepare()); a spawner that
 * cannot is not started. */
int spawner_start(struct spawner **out, int nice, const char *root_dir, const char *binary,
                  struct husk_err *err);
void spawner_stop(struct spawner *s);

/* A box of an image template: its layers (`ids`, top first, each the
 * directory `layers_dir`/<id>/root, opened by the spawner in its own mount
 * namespace), and the user its programs run as. */
struct spawn_image {
  const char *layers_dir;
  const char *const *ids;
  size_t n;
  bool user_set;
  uint32_t uid, gid;
};

/* A snapshot restored into the new box's filesystem before its root is
 * built: the archive's fd (a file, read from its start; the caller keeps
 * it), its recorded digest (hex), and the bounds of what it may write. */
struct spawn_restore {
  int fd;
  const char *sha256;
  uint64_t max_bytes, max_entries;
};

/* jail_create() in the spawner.  Thread-safe (requests are serialised).
 * The jail comes back with pid, pidfd, control connection, filesystem fd,
 * uid range and its cgroup opened in this process; no slot lock (the
 * box's init holds it).  A spawner that died is restarted. */
int spawner_create(struct spawner *s, const struct jail_config *cfg,
                   const struct spawn_image *img, const struct spawn_restore *restore,
                   struct jail *j, struct husk_err *err);

/* The spawner process (argv[1]: the root_dir, if any): serve requests on
 * `sock` until it closes. */
int spawner_main(int sock, const char *root_dir);

#endif
