/* The HTTP API client of the commands that talk to a running `husk serve`
 * (husk snapshot, husk user): one JSON request with the tenant's key from
 * HUSK_API_KEY, its reply bounded, errors printed under the command's
 * name. */
#ifndef HUSK_CLI_API_CLIENT_H
#define HUSK_CLI_API_CLIENT_H

#include <jansson.h>
#include <stdbool.h>

#define CLI_API_DEFAULT_SERVER "http://127.0.0.1:7070"
/* A reply larger than this is refused (a listing of 1000 is far less). */
#define CLI_API_REPLY_MAX (16u << 20)

/* One request to `server` (a base URL) + `path`, with `body` (JSON text or
 * NULL).  *status: the HTTP status (0: none); *out: the JSON reply or
 * NULL.  0, or 1 with the error printed as "PROG: ...": no key, the server
 * unreachable, a reply too large, or a status other than 2xx (with the
 * server's message). */
int cli_api_request(const char *prog, const char *server, const char *method, const char *path,
                    const char *body, long *status, json_t **out);

/* Whether `s` can be an id of husk's in a URL: 1 to 63 of a-z, 0-9, _. */
bool cli_api_id_ok(const char *s);

/* `j` indented, on stdout. */
void cli_api_print_json(const json_t *j);

#endif
