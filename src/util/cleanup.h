/* Scope-bound resources, in the style of crun and bubblewrap.
 *
 *   cleanup_free char *s = ...;        freed when `s` goes out of scope
 *   cleanup_close int fd = ...;        closed unless handed off with take_fd()
 *   cleanup_close_vec int fds[N + 1];  every fd up to the first -1 closed
 *   cleanup_pid pid_t pid = ...;       a child killed and reaped unless handed
 *                                      off with take_pid()
 * (cleanup_json, for jansson values, is in util/cleanup_json.h.)
 *
 * Ownership hand-off: `return steal_pointer(&p);` (typed), `take_ptr(&p)`,
 * `int fd = take_fd(&tmp);`, `j->pid = take_pid(&pid);`. */
#ifndef HUSK_UTIL_CLEANUP_H
#define HUSK_UTIL_CLEANUP_H

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static inline void cleanup_freep(void *p) {
  void **pp = (void **)p;
  free(*pp);
  *pp = NULL;
}

static inline void cleanup_closep(int *fd) {
  if (*fd >= 0) {
    int saved = errno;
    close(*fd);
    errno = saved;
    *fd = -1;
  }
}

/* An array of fds that ends at its first negative entry, as crun's
 * cleanup_close_vecp, but on the array itself rather than a pointer to it:
 *   cleanup_close_vec int fds[CAP + 1] = {-1};
 * Whoever fills it keeps a -1 after the last fd.  It is handed off (or
 * closed early, by calling this) as a whole: a -1 put in the middle would
 * end it there. */
static inline void cleanup_close_vecp(void *p) {
  for (int *fd = p; *fd >= 0; fd++)
    cleanup_closep(fd);
}

static inline void cleanup_fclosep(FILE **f) {
  if (*f) {
    fclose(*f);
    *f = NULL;
  }
}

static inline void cleanup_closedirp(DIR **d) {
  if (*d) {
    closedir(*d);
    *d = NULL;
  }
}

/* A child that was started but not handed over (crun's cleanup_pidp): it is
 * killed and reaped, so that a failed setup leaves neither a process nor a
 * zombie behind. */
static inline void cleanup_pidp(pid_t *pid) {
  if (*pid > 0) {
    int saved = errno;
    kill(*pid, SIGKILL);
    while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
      ;
    errno = saved;
    *pid = -1;
  }
}

#define cleanup_free __attribute__((cleanup(cleanup_freep)))
#define cleanup_close __attribute__((cleanup(cleanup_closep)))
#define cleanup_close_vec __attribute__((cleanup(cleanup_close_vecp)))
#define cleanup_fclose __attribute__((cleanup(cleanup_fclosep)))
#define cleanup_closedir __attribute__((cleanup(cleanup_closedirp)))
#define cleanup_pid __attribute__((cleanup(cleanup_pidp)))

static inline int take_fd(int *fd) {
  int r = *fd;
  *fd = -1;
  return r;
}

static inline pid_t take_pid(pid_t *pid) {
  pid_t r = *pid;
  *pid = -1;
  return r;
}

static inline void *take_ptr_impl(void **p) {
  void *r = *p;
  *p = NULL;
  return r;
}
#define take_ptr(pp) take_ptr_impl((void **)(pp))

/* bubblewrap's steal_pointer: the value of *pp, leaving NULL in its place.
 * Typed: the result has the type of *pp, and a pp that does not point to a
 * pointer does not compile (NULL cannot be stored through it). */
#define steal_pointer(pp)                                                                         \
  __extension__({                                                                                  \
    __typeof__(*(pp)) *steal_from_ = (pp);                                                         \
    __typeof__(*(pp)) stolen_ = *steal_from_;                                                      \
    *steal_from_ = NULL;                                                                           \
    stolen_;                                                                                       \
  })

/* close() that keeps errno, for best-effort cleanup paths. */
static inline void close_quiet(int fd) {
  if (fd >= 0) {
    int saved = errno;
    close(fd);
    errno = saved;
  }
}

#endif
