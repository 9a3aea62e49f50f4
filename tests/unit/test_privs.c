/* Unit tests for src/jail/privs.c that run outside a box: the daemon's own
 * hardening (privs_no_dumps), checked in a child process. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/privs.h"
#include "unit.h"

/* In a child: from a dumpable process with core files allowed (as far as
 * the hard limit lets), privs_no_dumps leaves neither.  Exit status: 0 ok,
 * else which step was wrong. */
static int no_dumps_child(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_CORE, &rl) < 0)
    return 10;
  rl.rlim_cur = rl.rlim_max;
  if (setrlimit(RLIMIT_CORE, &rl) < 0 || prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
    return 11;
  if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 1)
    return 12;
  struct husk_err err = {.code = -1, .msg = "unset"};
  if (privs_no_dumps(&err) < 0 || err.code != -1)
    return 13;
  if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
    return 14;
  if (getrlimit(RLIMIT_CORE, &rl) < 0 || rl.rlim_cur != 0 || rl.rlim_max != 0)
    return 15;
  /* A fork keeps both (the daemon's threads and helpers it forks). */
  pid_t p = fork();
  if (p == 0)
    _exit(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0 &&
                  getrlimit(RLIMIT_CORE, &rl) == 0 && rl.rlim_cur == 0
              ? 0
              : 1);
  int st;
  if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) ||
      WEXITSTATUS(st) != 0)
    return 16;
  return 0;
}

TEST(no_dumps) {
  pid_t p = fork();
  CHECK(p >= 0);
  if (p == 0)
    _exit(no_dumps_child());
  int st = 0;
  CHECK(waitpid(p, &st, 0) == p);
  CHECK(WIFEXITED(st));
  if (WEXITSTATUS(st) != 0)
    printf("#   child step %d failed\n", WEXITSTATUS(st));
  CHECK(WEXITSTATUS(st) == 0);
}

int main(void) {
  RUN(no_dumps);
  return unit_done();
}
