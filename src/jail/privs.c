#define _GNU_SOURCE
#include "jail/privs.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail/limits.h"

int privs_drop_to_box_user(const char **step) {
  /* Securebits first, while we still hold CAP_SETPCAP: root inside the box
   * gets no implicit capabilities on exec, and nobody can change that. */
  *step = "set securebits";
  if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                   SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                                   SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED) < 0)
    return -errno;
  /* The bounding set limits what any future exec could ever gain. */
  *step = "drop bounding capabilities";
  for (int cap = 0; cap <= 63; cap++) {
    if (prctl(PR_CAPBSET_READ, cap) < 0)
      break; /* past the kernel's last capability */
    if (prctl(PR_CAPBSET_DROP, cap) < 0)
      return -errno;
  }
  *step = "clear ambient capabilities";
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
    return -errno;
  *step = "setgroups";
  if (setgroups(0, NULL) < 0)
    return -errno;
  *step = "setresgid";
  if (setresgid(HUSK_BOX_GID, HUSK_BOX_GID, HUSK_BOX_GID) < 0)
    return -errno;
  /* With SECBIT_NO_SETUID_FIXUP set, leaving uid 0 would keep permitted
   * caps; clear every set explicitly below. */
  *step = "setresuid";
  if (setresuid(HUSK_BOX_UID, HUSK_BOX_UID, HUSK_BOX_UID) < 0)
    return -errno;
  *step = "clear capability sets";
  struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct data[2] = {{0}};
  if (syscall(SYS_capset, &hdr, data) < 0)
    return -errno;
  *step = "set no_new_privs";
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return -errno;
  *step = NULL;
  return 0;
}

int privs_set_rlimits(const char **step) {
  static const struct {
    int res;
    rlim_t v;
    const char *name;
  } lims[] = {
      {RLIMIT_CORE, 0, "RLIMIT_CORE"}, /* no core files: nothing for core_pattern to act on */
      {RLIMIT_NOFILE, HUSK_RLIMIT_NOFILE, "RLIMIT_NOFILE"},
      {RLIMIT_MEMLOCK, HUSK_RLIMIT_MEMLOCK, "RLIMIT_MEMLOCK"},
  };
  for (size_t i = 0; i < sizeof lims / sizeof lims[0]; i++) {
    struct rlimit r = {.rlim_cur = lims[i].v, .rlim_max = lims[i].v};
    if (setrlimit(lims[i].res, &r) < 0) {
      *step = lims[i].name;
      return -errno;
    }
  }
  return 0;
}
