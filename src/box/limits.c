#include <errno.h>
#include <stdio.h>

#include "husk/husk.h"
#include "jail/limits.h"
#include "util/error.h"

const char *husk_reason_name(enum husk_reason r) {
  switch (r) {
  case HUSK_REASON_EXITED: return "exited";
  case HUSK_REASON_SIGNALED: return "signaled";
  case HUSK_REASON_TIMEOUT: return "timeout";
  case HUSK_REASON_MEMORY: return "memory";
  case HUSK_REASON_PIDS: return "pids";
  case HUSK_REASON_OUTPUT: return "output";
  case HUSK_REASON_SETUP_ERROR: return "setup_error";
  }
  return "unknown";
}

static int check(const char *what, uint64_t *v, uint64_t def, uint64_t min, uint64_t max,
                 struct husk_err *err) {
  if (*v == 0)
    *v = def;
  if (*v < min || *v > max)
    return husk_fail(err, EINVAL, "%s %llu is out of range [%llu, %llu]", what,
                     (unsigned long long)*v, (unsigned long long)min, (unsigned long long)max);
  return 0;
}

int husk_limits_resolve(struct husk_limits *l, struct husk_err *err) {
  if (check("memory", &l->memory_bytes, HUSK_DEFAULT_MEMORY, HUSK_MIN_MEMORY, HUSK_MAX_MEMORY, err) < 0 ||
      check("pids", &l->pids, HUSK_DEFAULT_PIDS, HUSK_MIN_PIDS, HUSK_MAX_PIDS, err) < 0 ||
      check("cpus (milli)", &l->cpu_milli, HUSK_DEFAULT_CPU_MILLI, HUSK_MIN_CPU_MILLI, HUSK_MAX_CPU_MILLI, err) < 0 ||
      check("disk", &l->disk_bytes, HUSK_DEFAULT_DISK, HUSK_MIN_DISK, HUSK_MAX_DISK, err) < 0 ||
      check("timeout (ms)", &l->timeout_ms, HUSK_DEFAULT_TIMEOUT_MS, 1, HUSK_MAX_TIMEOUT_MS, err) < 0 ||
      check("output", &l->output_bytes, HUSK_DEFAULT_OUTPUT, 1, HUSK_MAX_OUTPUT, err) < 0)
    return -1;
  return 0;
}
