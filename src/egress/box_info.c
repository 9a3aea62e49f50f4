/* What a program acting for a box (fetch_url) needs to send its traffic
 * the way the box does: the address of the box's explicit proxy and the
 * CA that proxy presents for inject rules. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "egress/proxy_internal.h"

int egress_box_proxy(struct egress *e, const char *box_id, struct sockaddr_in *proxy, char **ca_pem,
                     struct husk_err *err) {
  *ca_pem = NULL;
  if (!e)
    return husk_fail(err, ENOENT, "no egress in this daemon");
  int rc = husk_fail(err, ENOENT, "the box has no egress");
  pthread_mutex_lock(&e->lock);
  for (struct ebox *b = e->boxes; b; b = b->next) {
    if (strcmp(b->id, box_id) || atomic_load(&b->dead) || b->slot == (unsigned)-1)
      continue;
    memset(proxy, 0, sizeof *proxy);
    proxy->sin_family = AF_INET;
    proxy->sin_addr.s_addr = b->host_ip;
    proxy->sin_port = htons(EGRESS_PORT_PROXY);
    rc = 0;
    if (b->has_ca && !(*ca_pem = egress_ca_pem(&b->ca)))
      rc = husk_fail(err, ENOMEM, "out of memory");
    break;
  }
  pthread_mutex_unlock(&e->lock);
  return rc;
}
