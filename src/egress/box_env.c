/* What a box in egress mode is given to find the proxy: the proxy
 * variables pointing at its link's host end, the placeholders of its
 * secret bindings, and, when a rule injects, the CA bundle it trusts
 * (the system roots plus its own CA) with the variables that name it. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "egress/proxy_internal.h"
#include "util/cleanup.h"

/* The CA bundle the box trusts: the system roots plus its own CA, written
 * into the box's /tmp by the host, owned by host root (not writable or
 * removable from inside: /tmp is sticky). */
#define BOX_CA_BUNDLE "tmp/.husk-ca-bundle.pem"
#define BOX_CA_PATH "/tmp/.husk-ca-bundle.pem"

int egress_box_env_write_ca(int fs, const char *ca_pem, struct husk_err *err) {
  cleanup_free char *sys = NULL;
  size_t syslen = 0;
  {
    cleanup_fclose FILE *f = fopen("/etc/ssl/certs/ca-certificates.crt", "re");
    if (f) {
      FILE *m = open_memstream(&sys, &syslen);
      if (m) {
        char buf[8192];
        size_t r;
        while ((r = fread(buf, 1, sizeof buf, f)) > 0)
          fwrite(buf, 1, r, m);
        fclose(m);
      }
    }
  }
  const char *tmpname = "tmp/.husk-ca-bundle.pem.new";
  unlinkat(fs, tmpname, 0);
  cleanup_close int fd = openat(fs, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
  if (fd < 0)
    return husk_error(err, errno, "cannot write the CA bundle into the box");
  size_t cl = strlen(ca_pem);
  if ((sys && write(fd, sys, syslen) != (ssize_t)syslen) || write(fd, ca_pem, cl) != (ssize_t)cl)
    return husk_error(err, errno, "cannot write the CA bundle into the box");
  if (renameat(fs, tmpname, fs, BOX_CA_BUNDLE) < 0)
    return husk_error(err, errno, "cannot install the CA bundle in the box");
  return 0;
}

char **egress_box_env_new(const struct ebox *b, bool inject) {
  size_t n = 0, cap = 32 + b->pol.nbindings;
  char **env = calloc(cap, sizeof *env);
  if (!env)
    return NULL;
  char hs[16];
  inet_ntop(AF_INET, &b->host_ip, hs, sizeof hs);
  char url[64];
  snprintf(url, sizeof url, "http://%s:%d", hs, EGRESS_PORT_PROXY);
  static const char *const proxy_vars[] = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                                           "http_proxy", "https_proxy", "all_proxy"};
  for (size_t i = 0; i < 6; i++)
    if (asprintf(&env[n++], "%s=%s", proxy_vars[i], url) < 0)
      goto fail;
  if (asprintf(&env[n++], "NO_PROXY=localhost,127.0.0.1,::1") < 0 ||
      asprintf(&env[n++], "no_proxy=localhost,127.0.0.1,::1") < 0)
    goto fail;
  if (inject) {
    static const char *const ca_vars[] = {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
                                          "CURL_CA_BUNDLE", "AWS_CA_BUNDLE", "GIT_SSL_CAINFO"};
    for (size_t i = 0; i < 6; i++)
      if (asprintf(&env[n++], "%s=%s", ca_vars[i], BOX_CA_PATH) < 0)
        goto fail;
  }
  for (size_t i = 0; i < b->pol.nbindings; i++)
    if (asprintf(&env[n++], "%s=%s", b->pol.bindings[i].env, b->pol.bindings[i].placeholder) < 0)
      goto fail;
  return env;
fail:
  for (size_t i = 0; i < cap; i++)
    free(env[i]);
  free(env);
  return NULL;
}
