/* Times as the fronts show them: RFC 3339 in UTC with milliseconds, the
 * form of the API's and MCP's JSON and of S3's XML. */
#ifndef HUSK_UTIL_TIMEFMT_H
#define HUSK_UTIL_TIMEFMT_H

#include <stdbool.h>
#include <stdint.h>

/* Room for "2026-01-02T03:04:05.678Z" (whatever the year) and its NUL. */
#define TIME_RFC3339_SIZE 64

/* `ms` since the epoch into out; false (out empty) when gmtime cannot
 * represent it. */
bool time_rfc3339(int64_t ms, char out[TIME_RFC3339_SIZE]);

#endif
