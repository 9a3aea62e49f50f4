#define _GNU_SOURCE
#include "util/timefmt.h"

#include <stdio.h>
#include <time.h>

bool time_rfc3339(int64_t ms, char out[TIME_RFC3339_SIZE]) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  out[0] = '\0';
  if (!gmtime_r(&t, &tm))
    return false;
  snprintf(out, TIME_RFC3339_SIZE, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
  return true;
}
