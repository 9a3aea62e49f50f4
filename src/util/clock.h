/* Monotonic milliseconds, for deadlines, back-offs and elapsed times (never
 * for anything shown as a date), and the deadline of a timed wait. */
#ifndef HUSK_UTIL_CLOCK_H
#define HUSK_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The time `ms` (>= 0) from now on `clock`: the deadline of a
 * pthread_cond_timedwait on a condition variable that uses that clock. */
static inline struct timespec clock_after_ms(clockid_t clock, int64_t ms) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  ts.tv_sec += (time_t)(ms / 1000);
  ts.tv_nsec += (long)(ms % 1000) * 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  return ts;
}

#endif
