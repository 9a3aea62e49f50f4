/* A template's box profile: the image config made into what a box runs
 * with (template.h: template_profile). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail/syscalls.h"
#include "template/template.h"
#include "util/cleanup.h"

#define ID_MAX 65535     /* the ids a box maps */
#define DB_MAX (1 << 20) /* /etc/passwd or /etc/group read at most */

static void strv_free(char **v) {
  for (size_t i = 0; v && v[i]; i++)
    free(v[i]);
  free(v);
}

static char **strv_dup(char *const *v) {
  size_t n = 0;
  while (v && v[n])
    n++;
  char **c = calloc(n + 1, sizeof *c);
  for (size_t i = 0; c && i < n; i++)
    if (!(c[i] = strdup(v[i]))) {
      strv_free(c);
      return NULL;
    }
  return c;
}

int template_profile_copy(struct template_profile *dst, const struct template_profile *src) {
  *dst = *src;
  dst->env = strv_dup(src->env);
  dst->argv = src->argv ? strv_dup(src->argv) : NULL;
  dst->workdir = strdup(src->workdir ? src->workdir : "");
  if (!dst->env || (src->argv && !dst->argv) || !dst->workdir) {
    template_profile_free(dst);
    return -1;
  }
  return 0;
}

void template_profile_free(struct template_profile *p) {
  strv_free(p->env);
  strv_free(p->argv);
  free(p->workdir);
  memset(p, 0, sizeof *p);
}

/* The image's file `rel` (etc/passwd), from the topmost layer that has
 * it; NULL when a layer above hides it (a whiteout, an opaque directory)
 * or none has it. */
static char *image_file(const struct template_layers *l, const char *rel) {
  for (size_t i = 0; i < l->n; i++) {
    struct stat st;
    if (fstatat(l->dirs[i], rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
      continue;
    if (!S_ISREG(st.st_mode) || st.st_size > DB_MAX)
      return NULL; /* a whiteout, or not a file we read */
    cleanup_close int fd = sys_openat2(l->dirs[i], rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0,
                                       RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
    if (fd < 0)
      return NULL;
    char *buf = malloc((size_t)st.st_size + 1);
    ssize_t n = buf ? read(fd, buf, (size_t)st.st_size) : -1;
    if (n < 0) {
      free(buf);
      return NULL;
    }
    buf[n] = '\0';
    return buf;
  }
  return NULL;
}

/* The first line of `db` (passwd or group format) whose field `key` is
 * `value`: copied into `line`, its fields in f[0..6] ("" when absent). */
static bool db_entry(const char *db, int key, const char *value, char *line, size_t cap,
                     char *f[7]) {
  for (const char *p = db; p && *p;) {
    const char *end = strchr(p, '\n');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n < cap) {
      memcpy(line, p, n);
      line[n] = '\0';
      int nf = 0;
      for (char *q = line; nf < 7; nf++) {
        f[nf] = q;
        char *c = strchr(q, ':');
        if (!c) {
          nf++;
          break;
        }
        *c = '\0';
        q = c + 1;
      }
      for (int k = nf; k < 7; k++)
        f[k] = line + n; /* "" */
      if (!strcmp(f[key], value))
        return true;
    }
    p = end ? end + 1 : p + n;
  }
  return false;
}

static bool numeric(const char *s, uint32_t *out) {
  if (!*s)
    return false;
  char *e;
  errno = 0;
  unsigned long v = strtoul(s, &e, 10);
  if (*e || errno || v > ID_MAX || s[0] == '-' || s[0] == '+')
    return false;
  *out = (uint32_t)v;
  return true;
}

/* "USER[:GROUP]", each a name or a number. */
static int resolve_user(const struct template_layers *l, const char *spec, uint32_t *uid,
                        uint32_t *gid, struct husk_err *err) {
  char user[256];
  if (snprintf(user, sizeof user, "%s", spec) >= (int)sizeof user)
    return husk_fail(err, EINVAL, "the image's user `%.64s...` is too long", spec);
  char *group = strchr(user, ':');
  if (group)
    *group++ = '\0';
  cleanup_free char *passwd = image_file(l, "etc/passwd");
  char line[1024], *f[7];
  bool by_number = numeric(user, uid);
  /* A number needs no entry (its entry, if any, gives the group); a name
   * does. */
  bool found = by_number ? db_entry(passwd, 2, user, line, sizeof line, f)
                         : db_entry(passwd, 0, user, line, sizeof line, f);
  if (!by_number && !(found && numeric(f[2], uid)))
    return husk_fail(err, EINVAL,
                     "the image's user `%s` is not in its /etc/passwd (nor a number below 65536)",
                     user);
  if (!group) {
    if (!found || !numeric(f[3], gid))
      *gid = *uid;
    return 0;
  }
  if (numeric(group, gid))
    return 0;
  cleanup_free char *groups = image_file(l, "etc/group");
  if (db_entry(groups, 0, group, line, sizeof line, f) && numeric(f[2], gid))
    return 0;
  return husk_fail(err, EINVAL, "the image's group `%s` is not in its /etc/group", group);
}

int template_profile(const struct state_template *t, const struct template_layers *l,
                     struct template_profile *out, struct husk_err *err) {
  memset(out, 0, sizeof *out);
  struct image_config c;
  char **ids = NULL;
  size_t nids;
  if (image_config_parse(t->config_json, strlen(t->config_json), &c, &ids, &nids, err) < 0)
    return husk_error_wrap(err, "template %s", t->name);
  for (size_t i = 0; i < nids; i++)
    free(ids[i]);
  free(ids);
  int rc = 0;
  out->env = c.env;
  c.env = NULL;
  out->workdir = c.workdir;
  c.workdir = NULL;
  /* An image that names no user runs as its root, as a container engine
   * runs it (root of the box's namespace: no capability). */
  out->user_set = true;
  if (c.user[0])
    rc = resolve_user(l, c.user, &out->uid, &out->gid, err);
  /* Entrypoint then Cmd, as a container engine runs them. */
  size_t ne = 0, nc = 0;
  while (c.entrypoint && c.entrypoint[ne])
    ne++;
  while (c.cmd && c.cmd[nc])
    nc++;
  if (rc == 0 && ne + nc > 0) {
    if (!(out->argv = calloc(ne + nc + 1, sizeof *out->argv))) {
      rc = husk_error(err, ENOMEM, "template profile");
    } else {
      for (size_t i = 0; i < ne; i++)
        out->argv[i] = c.entrypoint[i], c.entrypoint[i] = NULL;
      for (size_t i = 0; i < nc; i++)
        out->argv[ne + i] = c.cmd[i], c.cmd[i] = NULL;
    }
  }
  image_config_free(&c);
  if (rc < 0)
    template_profile_free(out);
  return rc;
}
