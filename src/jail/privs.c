#define _GNU_SOURCE
#include "jail/privs.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail/limits.h"

#define CAP_BIT(c) (1u << (c))
#define INIT_CAPS (CAP_BIT(CAP_SETUID) | CAP_BIT(CAP_SETGID) | CAP_BIT(CAP_SETPCAP) | CAP_BIT(CAP_KILL))

static int set_caps(uint32_t eff_perm) {
  struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct data[2] = {{.effective = eff_perm, .permitted = eff_perm}, {0}};
  return syscall(SYS_capset, &hdr, data) < 0 ? -errno : 0;
}

/* Empty the bounding set except `keep` (bits of the first 32 caps). */
static int drop_bounding(uint32_t keep) {
  for (int cap = 0; cap <= 63; cap++) {
    if (cap < 32 && (keep & CAP_BIT(cap)))
      continue;
    if (prctl(PR_CAPBSET_DROP, cap) < 0) {
      if (errno == EINVAL)
        break; /* past the kernel's last capability */
      return -errno;
    }
  }
  return 0;
}

int privs_drop_for_init(const char **step) {
  /* Securebits first, while we still hold CAP_SETPCAP: uid 0 gets no
   * implicit capabilities on exec, changing uid does not touch capability
   * sets (we manage them explicitly), and nobody can change that. */
  *step = "set securebits";
  if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                   SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                                   SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED) < 0)
    return -errno;
  int rc;
  *step = "drop bounding capabilities";
  if ((rc = drop_bounding(INIT_CAPS)) < 0)
    return rc;
  *step = "clear ambient capabilities";
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
    return -errno;
  *step = "setgroups";
  if (setgroups(0, NULL) < 0)
    return -errno;
  *step = "reduce capabilities";
  if ((rc = set_caps(INIT_CAPS)) < 0)
    return rc;
  *step = "set no_new_privs";
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return -errno;
  *step = NULL;
  return 0;
}

int privs_drop_for_program(const char **step) {
  int rc;
  /* init's bounding set holds only INIT_CAPS: drop those. */
  *step = "drop bounding capabilities";
  for (int cap = 0; cap < 32; cap++)
    if ((INIT_CAPS & CAP_BIT(cap)) && prctl(PR_CAPBSET_DROP, cap) < 0)
      return -errno;
  (void)rc;
  *step = "setresgid";
  if (setresgid(HUSK_BOX_GID, HUSK_BOX_GID, HUSK_BOX_GID) < 0)
    return -errno;
  *step = "setresuid";
  if (setresuid(HUSK_BOX_UID, HUSK_BOX_UID, HUSK_BOX_UID) < 0)
    return -errno;
  *step = "clear capability sets";
  if ((rc = set_caps(0)) < 0)
    return rc;
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
      /* Whatever the host gave husk, a box gets no realtime scheduling and
       * cannot raise its priority (which would sidestep --cpus). */
      {RLIMIT_RTPRIO, 0, "RLIMIT_RTPRIO"},
      {RLIMIT_NICE, 0, "RLIMIT_NICE"},
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

int privs_no_dumps(const char **step) {
  *step = "RLIMIT_CORE";
  struct rlimit none = {0, 0};
  if (setrlimit(RLIMIT_CORE, &none) < 0)
    return -errno;
  *step = "PR_SET_DUMPABLE";
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
    return -errno;
  *step = NULL;
  return 0;
}
