/* Scope-bound resources, in the style of crun and bubblewrap.
 *
 *   cleanup_free char *s = ...;   freed when `s` goes out of scope
 *   cleanup_close int fd = ...;   closed unless handed off with take_fd()
 *
 * Ownership hand-off: `return take_ptr(&p);` / `int fd = take_fd(&tmp);`. */
#ifndef HUSK_UTIL_CLEANUP_H
#define HUSK_UTIL_CLEANUP_H

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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

#define cleanup_free __attribute__((cleanup(cleanup_freep)))
#define cleanup_close __attribute__((cleanup(cleanup_closep)))
#define cleanup_fclose __attribute__((cleanup(cleanup_fclosep)))
#define cleanup_closedir __attribute__((cleanup(cleanup_closedirp)))

static inline int take_fd(int *fd) {
  int r = *fd;
  *fd = -1;
  return r;
}

static inline void *take_ptr_impl(void **p) {
  void *r = *p;
  *p = NULL;
  return r;
}
#define take_ptr(pp) take_ptr_impl((void **)(pp))

/* close() that keeps errno, for best-effort cleanup paths. */
static inline void close_quiet(int fd) {
  if (fd >= 0) {
    int saved = errno;
    close(fd);
    errno = saved;
  }
}

#endif
