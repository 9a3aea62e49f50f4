#include "front/listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int front_parse_listen(const char *s, struct sockaddr_storage *ss, socklen_t *len,
                       struct husk_err *err) {
  char host[128];
  const char *port;
  memset(ss, 0, sizeof *ss);
  if (!s || !*s)
    return husk_fail(err, EINVAL, "empty listen address");
  if (s[0] == '[') {
    const char *e = strchr(s, ']');
    if (!e || e[1] != ':' || (size_t)(e - s - 1) >= sizeof host)
      return husk_fail(err, EINVAL, "listen address must be ADDR:PORT or [IPv6]:PORT");
    memcpy(host, s + 1, (size_t)(e - s - 1));
    host[e - s - 1] = '\0';
    port = e + 2;
  } else {
    const char *c = strrchr(s, ':');
    if (!c || (size_t)(c - s) >= sizeof host || strchr(s, ':') != c)
      return husk_fail(err, EINVAL, "listen address must be ADDR:PORT or [IPv6]:PORT");
    memcpy(host, s, (size_t)(c - s));
    host[c - s] = '\0';
    port = c + 1;
  }
  if (!*port || strspn(port, "0123456789") != strlen(port) || strlen(port) > 5 ||
      atoi(port) > 65535)
    return husk_fail(err, EINVAL, "bad port in listen address");
  uint16_t p = (uint16_t)atoi(port);
  struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
  if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons(p);
    *len = sizeof *a4;
  } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(p);
    *len = sizeof *a6;
  } else {
    return husk_fail(err, EINVAL, "listen address must be a numeric IPv4 or [IPv6] address");
  }
  return 0;
}

void front_listen_host(const char *listen, char *out, size_t size) {
  const char *colon = strrchr(listen, ':');
  snprintf(out, size, "%.*s", colon ? (int)(colon - listen) : (int)strlen(listen), listen);
}
