/* The listen address of an HTTP front (--listen, --s3-listen). */
#ifndef HUSK_FRONT_LISTEN_H
#define HUSK_FRONT_LISTEN_H

#include <stddef.h>
#include <sys/socket.h>

#include "util/error.h"

/* Parse "127.0.0.1:7070" or "[::1]:7070": a numeric address and a port
 * (0: any free port). */
int front_parse_listen(const char *s, struct sockaddr_storage *ss, socklen_t *len,
                       struct husk_err *err);

/* The address part of a listen address front_parse_listen accepted, as
 * written ("127.0.0.1", "[::1]"), for URLs. */
void front_listen_host(const char *listen, char *out, size_t size);

#endif
