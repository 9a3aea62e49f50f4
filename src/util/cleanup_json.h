/* cleanup_json: a jansson value released (json_decref) when it goes out of
 * scope, unless handed off with steal_pointer().  Apart from cleanup.h so
 * that only the files that use jansson include it. */
#ifndef HUSK_UTIL_CLEANUP_JSON_H
#define HUSK_UTIL_CLEANUP_JSON_H

#include <jansson.h>

#include "util/cleanup.h"

static inline void cleanup_json_decrefp(json_t **j) {
  if (*j) {
    json_decref(*j);
    *j = NULL;
  }
}

#define cleanup_json __attribute__((cleanup(cleanup_json_decrefp)))

#endif
