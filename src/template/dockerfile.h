/* A Dockerfile, parsed: the subset builds of agent boxes use.
 *
 *   FROM TEMPLATE [AS NAME]     the template to start from ("default" is
 *                               refused: a build needs an image)
 *   RUN CMD | RUN ["PROG",...]  run in a box of the build so far
 *   COPY [--chown=UID[:GID]] SRC... DST
 *   ADD [--chown=UID[:GID]] SRC... DST   as COPY, but a source that is a
 *                               tar archive (plain, gzip, bzip2, xz, zstd)
 *                               is unpacked into DST; no URL
 *   ENV K=V ... | ENV K V, ARG K[=V], WORKDIR DIR, USER U[:G],
 *   LABEL K=V ..., CMD, ENTRYPOINT (exec or shell form)
 * Comments, blank lines, line continuations (the escape character, `\`
 * or one set by `# escape=` at the top), $VAR and ${VAR} substitution in
 * FROM, COPY, ENV, WORKDIR, USER, LABEL and ARG (from ARG and ENV), and
 * JSON exec forms are understood.  Anything else (multi-stage COPY
 * --from, HEALTHCHECK, ONBUILD, heredocs...) is refused with its line
 * number.  A Dockerfile is untrusted input: its size, line count and every
 * word are bounded. */
#ifndef HUSK_TEMPLATE_DOCKERFILE_H
#define HUSK_TEMPLATE_DOCKERFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

#define DOCKERFILE_MAX_BYTES (1 << 20)
#define DOCKERFILE_MAX_STEPS 512

enum df_op {
  DF_FROM,
  DF_RUN,
  DF_COPY,
  DF_ENV,
  DF_ARG,
  DF_WORKDIR,
  DF_USER,
  DF_LABEL,
  DF_CMD,
  DF_ENTRYPOINT
};

struct df_step {
  enum df_op op;
  int line;    /* where it starts */
  char **args; /* NULL-terminated: RUN/CMD/ENTRYPOINT exec form, COPY sources + dest,
                  ENV/LABEL/ARG alternating keys and values, FROM/WORKDIR/USER one */
  size_t nargs;
  bool shell;  /* RUN/CMD/ENTRYPOINT in shell form: args[0] is the command line */
  char *chown; /* COPY --chown, or NULL */
  bool add;    /* ADD: archive sources are unpacked */
  char *text;  /* the instruction as written (one line), for logs and cache keys */
};

struct dockerfile {
  struct df_step *steps;
  size_t n;
};

/* Parse `text` (len bytes).  build_args: NAME=VALUE for ARGs
 * (NULL-terminated, or NULL).  Errors: EINVAL with the line number and
 * why. */
int dockerfile_parse(const char *text, size_t len, char *const *build_args, struct dockerfile *out,
                     struct husk_err *err);
void dockerfile_free(struct dockerfile *d);

#endif
