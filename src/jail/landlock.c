#define _GNU_SOURCE
#include "jail/landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include "jail/syscalls.h"
#include "util/cleanup.h"

int landlock_abi(void) {
  int v = sys_landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return v < 0 ? 0 : v;
}

#define FS_READ (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)

static uint64_t fs_handled(int abi) {
  uint64_t all = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0..12 */
  if (abi >= 2) all |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) all |= LANDLOCK_ACCESS_FS_TRUNCATE;
  if (abi >= 5) all |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
  return all;
}

static int allow(int ruleset, const char *path, uint64_t access, struct husk_err *err) {
  cleanup_close int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      return 0;
    return husk_error(err, errno, "cannot open `%s` for a Landlock rule", path);
  }
  struct landlock_path_beneath_attr pb = {.allowed_access = access, .parent_fd = fd};
  if (sys_landlock_add_rule(ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
    return husk_error(err, errno, "cannot add the Landlock rule for `%s`", path);
  return 0;
}

int landlock_box_ruleset(int abi, bool writable_root, struct husk_err *err) {
  if (abi <= 0)
    return husk_fail(err, ENOSYS, "Landlock is not available");
  uint64_t handled = fs_handled(abi);
  struct husk_landlock_ruleset_attr attr = {.handled_access_fs = handled};
  size_t size = sizeof attr.handled_access_fs;
  if (abi >= 6) {
    attr.scoped = HUSK_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | HUSK_LANDLOCK_SCOPE_SIGNAL;
    size = sizeof attr;
  }
  cleanup_close int rs = sys_landlock_create_ruleset(&attr, size, 0);
  if (rs < 0)
    return husk_error(err, errno, "cannot create the Landlock ruleset (ABI %d)", abi);
  uint64_t dev = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE;
  if (abi >= 3) dev |= LANDLOCK_ACCESS_FS_TRUNCATE;
  if (abi >= 5) dev |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
  /* An image box's root is its own layer: everything but making device
   * nodes (which the box's capabilities refuse anyway). */
  uint64_t root = writable_root ? handled & ~(uint64_t)(LANDLOCK_ACCESS_FS_MAKE_CHAR |
                                                        LANDLOCK_ACCESS_FS_MAKE_BLOCK)
                                : FS_READ;
  if (allow(rs, "/", root, err) < 0 || allow(rs, "/workspace", handled, err) < 0 ||
      allow(rs, "/tmp", handled, err) < 0 || allow(rs, "/dev/shm", handled, err) < 0 ||
      allow(rs, "/dev", dev | LANDLOCK_ACCESS_FS_READ_DIR, err) < 0 ||
      allow(rs, "/proc",
            LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
                LANDLOCK_ACCESS_FS_WRITE_FILE,
            err) < 0)
    return -1;
  return take_fd(&rs);
}

int landlock_restrict(int ruleset, struct husk_err *err) {
  if (sys_landlock_restrict_self(ruleset, 0) < 0)
    return husk_error(err, errno, "cannot restrict the process with Landlock");
  return 0;
}

int landlock_apply_box(int abi, bool writable_root, struct husk_err *err) {
  if (abi <= 0)
    return 0;
  cleanup_close int rs = landlock_box_ruleset(abi, writable_root, err);
  if (rs < 0)
    return -1;
  return landlock_restrict(rs, err);
}
