/* JSON strings the fronts (the HTTP API, MCP) make alike: a time, and
 * bytes that may not be text. */
#ifndef HUSK_UTIL_JSON_TEXT_H
#define HUSK_UTIL_JSON_TEXT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* RFC 3339 UTC with milliseconds (util/timefmt.h), or JSON null for a
 * time that is not set (ms <= 0). */
json_t *json_time(int64_t ms);

/* Bytes as a JSON string: as they are when they are UTF-8 (without NUL,
 * unless `keep_nul`), else with U+FFFD for each byte that is not, and
 * *lossy set (lossy may be NULL).  NULL when out of memory. */
json_t *json_text(const char *buf, size_t len, bool keep_nul, bool *lossy);

#endif
