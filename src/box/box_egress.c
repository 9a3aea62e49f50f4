/* Boxes and the network and secrets plane: the glue between the box
 * manager and src/egress.  A box in mode `egress` has a row in box_egress
 * (its policy, placeholders included), a link and listeners owned by the
 * proxy, and extra variables in its exec env (proxy, CA bundle,
 * placeholders).  Mode `none` touches none of this. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "box/box_internal.h"
#include "egress/dns.h"
#include "egress/egress.h"
#include "egress/policy.h"
#include "egress/vault.h"
#include "box/exec.h"
#include "state/egress_state.h"
#include "util/cleanup.h"

static void egress_log_cb(void *ctx, const char *line) {
  struct husk_mgr *m = ctx;
  if (m->cfg.log)
    m->cfg.log(m->cfg.log_ctx, line);
}

int box_egress_open(struct husk_mgr *m, struct husk_err *err) {
  if (egress_vault_open(&m->vault, m->cfg.state, m->data_dir, err) < 0)
    return -1;
  struct egress_config ec = {.state = m->cfg.state, .vault = m->vault,
                             .ca_file = m->cfg.egress_ca_file, .max_conns = m->cfg.egress_max_conns,
                             .tenant_max_conns = m->cfg.egress_tenant_max_conns,
                             .total_max_conns = m->cfg.egress_total_max_conns,
                             .idle_ms = m->cfg.egress_idle_ms,
                             .audit_retention_ms = m->cfg.audit_retention_ms,
                             .log = egress_log_cb, .log_ctx = m};
  /* The daemon's id: the hex of its cgroup prefix ("box-<8 hex>-"). */
  char hash[9];
  snprintf(hash, sizeof hash, "%.8s", m->cg_prefix + 4);
  ec.hash = hash;
  if (m->cfg.egress_resolver && egress_dns_parse_server(m->cfg.egress_resolver, &ec.resolver, err) < 0)
    return husk_error_wrap(err, "the egress resolver");
  if (m->cfg.egress_nallow > EGRESS_MAX_ALLOW)
    return husk_fail(err, EINVAL, "at most %d ranges exempt from the egress deny set",
                     EGRESS_MAX_ALLOW);
  for (size_t i = 0; i < m->cfg.egress_nallow; i++)
    if (egress_cidr_parse(m->cfg.egress_allow[i], &ec.allow[ec.nallow++], err) < 0)
      return husk_error_wrap(err, "a range exempt from the egress deny set");
  return egress_open(&m->egress, &ec, err);
}

void box_egress_close(struct husk_mgr *m) {
  egress_close(m->egress);
  m->egress = NULL;
  egress_vault_close(m->vault);
  m->vault = NULL;
}

int box_egress_prepare(struct husk_mgr *m, const char *tenant, const char *network,
                       const char *egress_json, char **policy, struct husk_err *err) {
  *policy = NULL;
  if (!network || !strcmp(network, "none")) {
    if (egress_json)
      return husk_fail(err, EINVAL, "egress settings need network mode \"egress\"");
    return 0;
  }
  if (strcmp(network, "egress"))
    return husk_fail(err, EINVAL, "unknown network mode `%.32s` (available: none, egress)", network);
  if (!m->egress)
    return husk_fail(err, ENOTSUP, "network mode egress is not available in this daemon");
  char *p = egress_policy_prepare(egress_json, err);
  if (!p)
    return -1;
  /* Every bound secret must exist now: a binding to nothing is a typo. */
  struct egress_policy *pol = calloc(1, sizeof *pol);
  if (!pol || egress_policy_parse(p, true, pol, err) < 0) {
    if (!pol)
      husk_fail(err, ENOMEM, "out of memory");
    free(pol);
    free(p);
    return -1;
  }
  for (size_t i = 0; i < pol->nbindings; i++)
    if (egress_vault_exists(m->vault, tenant, pol->bindings[i].name, err) < 0) {
      if (err->code == ENOENT)
        husk_fail(
            err, EINVAL,
            "egress.secrets[%zu]: no secret `%s` in the tenant's vault (store it there first)", i,
            pol->bindings[i].name);
      free(pol);
      free(p);
      return -1;
    }
  free(pol);
  *policy = p;
  return 0;
}

/* Retire the current env (execs may be reading it) and install `env`. */
static void set_env(struct live_box *b, char **env) {
  struct retired_env *r = calloc(1, sizeof *r);
  pthread_mutex_lock(&b->lock);
  if (r) {
    r->env = b->env;
    r->next = b->retired;
    b->retired = r;
  } else {
    box_env_free(b->env); /* out of memory: leak nothing, accept the race */
  }
  b->env = env;
  pthread_mutex_unlock(&b->lock);
}

static char **env_dup(char *const *a, char *const *add) {
  size_t n = 0, k = 0;
  while (a && a[n])
    n++;
  while (add && add[k])
    k++;
  char **out = calloc(n + k + 1, sizeof *out);
  if (!out)
    return NULL;
  for (size_t i = 0; i < n + k; i++)
    if (!(out[i] = strdup(i < n ? a[i] : add[i - n]))) {
      box_env_free(out);
      return NULL;
    }
  return out;
}

int box_egress_attach(struct husk_mgr *m, struct live_box *b, const char *policy_json, bool fresh,
                      struct husk_err *err) {
  struct egress_box_spec spec = {.box_id = b->id, .tenant = b->tenant, .slot = b->j.slot,
                                 .init_pid = b->j.pid, .pidfd = b->j.pidfd, .fs = b->j.fs,
                                 .policy_json = policy_json};
  char **add = NULL;
  if (egress_box_start(m->egress, &spec, fresh, &add, err) < 0)
    return -1;
  pthread_mutex_lock(&b->lock);
  if (!b->user_env)
    b->user_env = env_dup(b->env, NULL);
  char **user = b->user_env;
  pthread_mutex_unlock(&b->lock);
  char **env = env_dup(user, add);
  box_env_free(add);
  if (!env) {
    egress_box_stop(m->egress, b->id);
    return husk_fail(err, ENOMEM, "out of memory");
  }
  set_env(b, env);
  b->egress = true;
  return 0;
}

void box_egress_detach(struct husk_mgr *m, struct live_box *b) {
  if (m->egress)
    egress_box_stop(m->egress, b->id);
  b->egress = false;
}

char **box_exec_env(struct live_box *b, char *const *req_env) {
  pthread_mutex_lock(&b->lock);
  char **env = exec_build_env(b->env, req_env);
  pthread_mutex_unlock(&b->lock);
  return env;
}

void box_env_retire_all(struct live_box *b) {
  for (struct retired_env *r = b->retired, *n; r; r = n) {
    n = r->next;
    box_env_free(r->env);
    free(r);
  }
  b->retired = NULL;
  box_env_free(b->user_env);
  b->user_env = NULL;
}

/* Network changes are rare: one at a time keeps detach/attach of one box
 * from interleaving with another change of the same box. */
static pthread_mutex_t net_change_lock = PTHREAD_MUTEX_INITIALIZER;

int husk_box_set_network(struct husk_mgr *m, const char *tenant, const char *id, const char *network,
                    const char *egress_json, struct husk_box_info *out, struct husk_err *err) {
  struct live_box *b = box_running(m, tenant, id, err);
  if (!b)
    return -1;
  pthread_mutex_lock(&net_change_lock);
  int rc = -1;
  cleanup_free char *policy = NULL;
  if (!network)
    network = egress_json ? "egress" : "none";
  if (box_egress_prepare(m, tenant, network, egress_json, &policy, err) < 0)
    goto out;
  /* Keep the placeholders of bindings whose env name stays: the box may
   * already have handed them to its programs. */
  if (policy && b->egress) {
    char net[16];
    cleanup_free char *old = NULL;
    struct egress_policy *np = calloc(1, sizeof *np), *op = calloc(1, sizeof *op);
    if (np && op && state_box_egress_get(m->cfg.state, b->id, net, sizeof net, &old, err) == 0 &&
        egress_policy_parse(old, true, op, err) == 0 && egress_policy_parse(policy, true, np, err) == 0) {
      for (size_t i = 0; i < np->nbindings; i++)
        for (size_t j = 0; j < op->nbindings; j++)
          if (!strcmp(np->bindings[i].env, op->bindings[j].env))
            memcpy(np->bindings[i].placeholder, op->bindings[j].placeholder,
                   sizeof np->bindings[i].placeholder);
      char *merged = egress_policy_to_json(np);
      if (merged) {
        free(policy);
        policy = merged;
      }
    }
    free(np);
    free(op);
  }
  pthread_mutex_lock(&b->lock);
  bool was = b->egress;
  pthread_mutex_unlock(&b->lock);
  if (was) {
    /* The old link, listeners and connections go; a new policy starts
     * from a clean link. */
    box_egress_detach(m, b);
    pthread_mutex_lock(&b->lock);
    char **user = b->user_env;
    b->user_env = NULL;
    pthread_mutex_unlock(&b->lock);
    if (user)
      set_env(b, user);
  }
  if (state_box_egress_set(m->cfg.state, b->id, policy ? "egress" : "none", policy ? policy : "{}",
                           err) < 0)
    goto out;
  if (policy && box_egress_attach(m, b, policy, true, err) < 0) {
    struct husk_err ignored;
    state_box_egress_set(m->cfg.state, b->id, "none", "{}", &ignored);
    goto out;
  }
  box_log(m, "box %s: network %s", b->id, policy ? "egress" : "none");
  rc = 0;
out:
  pthread_mutex_unlock(&net_change_lock);
  lb_unref(m, b);
  if (rc == 0 && out)
    rc = husk_box_get(m, tenant, id, out, err);
  return rc;
}

int husk_secret_put(struct husk_mgr *m, const char *tenant, const char *name, const void *value,
                   size_t len, struct husk_err *err) {
  if (!m->vault)
    return husk_fail(err, ENOTSUP, "the secrets vault is not available");
  return egress_vault_put(m->vault, tenant, name, value, len, err);
}

int husk_secret_delete(struct husk_mgr *m, const char *tenant, const char *name, struct husk_err *err) {
  if (!m->vault)
    return husk_fail(err, ENOTSUP, "the secrets vault is not available");
  return egress_vault_delete(m->vault, tenant, name, err);
}

int husk_secret_list(struct husk_mgr *m, const char *tenant,
                    int (*cb)(void *ctx, const char *name, int64_t created_ms, int64_t updated_ms),
                    void *ctx, struct husk_err *err) {
  if (!m->vault)
    return husk_fail(err, ENOTSUP, "the secrets vault is not available");
  return egress_vault_list(m->vault, tenant, cb, ctx, err);
}

struct egress_vault *box_mgr_vault(struct husk_mgr *m) { return m ? m->vault : NULL; }
