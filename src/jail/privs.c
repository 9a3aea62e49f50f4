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

/* Effective and permitted sets to `eff_perm`, inheritable to nothing. */
static int set_caps(uint32_t eff_perm, struct husk_err *err) {
  struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct data[2] = {{.effective = eff_perm, .permitted = eff_perm}, {0}};
  if (syscall(SYS_capset, &hdr, data) < 0)
    return husk_error(err, errno, "cannot set the capability sets to %#x (capset)", eff_perm);
  return 0;
}

/* Empty the bounding set except `keep` (bits of the first 32 caps). */
static int drop_bounding(uint32_t keep, struct husk_err *err) {
  for (int cap = 0; cap <= 63; cap++) {
    if (cap < 32 && (keep & CAP_BIT(cap)))
      continue;
    if (prctl(PR_CAPBSET_DROP, cap) < 0) {
      if (errno == EINVAL)
        break; /* past the kernel's last capability */
      return husk_error(err, errno, "cannot drop capability %d from the bounding set", cap);
    }
  }
  return 0;
}

int privs_drop_for_init(struct husk_err *err) {
  /* Securebits first, while we still hold CAP_SETPCAP: uid 0 gets no
   * implicit capabilities on exec, changing uid does not touch capability
   * sets (we manage them explicitly), and nobody can change that. */
  if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                   SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                                   SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED) < 0)
    return husk_error(err, errno, "cannot set securebits");
  if (drop_bounding(INIT_CAPS, err) < 0)
    return -1;
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
    return husk_error(err, errno, "cannot clear ambient capabilities");
  if (setgroups(0, NULL) < 0)
    return husk_error(err, errno, "cannot clear supplementary groups (setgroups)");
  if (set_caps(INIT_CAPS, err) < 0)
    return -1;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return husk_error(err, errno, "cannot set no_new_privs");
  return 0;
}

int privs_drop_for_program(uint32_t uid, uint32_t gid, struct husk_err *err) {
  /* init's bounding set holds only INIT_CAPS: drop those. */
  for (int cap = 0; cap < 32; cap++)
    if ((INIT_CAPS & CAP_BIT(cap)) && prctl(PR_CAPBSET_DROP, cap) < 0)
      return husk_error(err, errno, "cannot drop capability %d from the bounding set", cap);
  if (setresgid(gid, gid, gid) < 0)
    return husk_error(err, errno, "cannot change to gid %u (setresgid)", gid);
  if (setresuid(uid, uid, uid) < 0)
    return husk_error(err, errno, "cannot change to uid %u (setresuid)", uid);
  return set_caps(0, err);
}

int privs_set_rlimits(struct husk_err *err) {
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
    if (setrlimit(lims[i].res, &r) < 0)
      return husk_error(err, errno, "cannot set %s", lims[i].name);
  }
  return 0;
}

int privs_no_dumps(struct husk_err *err) {
  struct rlimit none = {0, 0};
  if (setrlimit(RLIMIT_CORE, &none) < 0)
    return husk_error(err, errno, "cannot set RLIMIT_CORE");
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
    return husk_error(err, errno, "cannot make the process not dumpable (PR_SET_DUMPABLE)");
  return 0;
}
