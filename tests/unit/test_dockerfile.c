/* The Dockerfile parser: the forms builds use, substitution, continuations
 * and the escape directive, and every refusal with its line number. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "template/dockerfile.h"
#include "unit.h"

static int parse(const char *text, char *const *args, struct dockerfile *d, struct husk_err *err) {
  return dockerfile_parse(text, strlen(text), args, d, err);
}

TEST(the_usual_forms) {
  struct dockerfile d;
  struct husk_err err = {0};
  const char *t = "# a comment\n"
                  "FROM python-base AS build\n"
                  "\n"
                  "ARG VERSION=1.2\n"
                  "ENV APP=/srv/app LANG=C.UTF-8\n"
                  "ENV GREETING hello  world\n"
                  "WORKDIR $APP\n"
                  "COPY --chown=1000:1000 requirements.txt setup.py ${APP}/\n"
                  "RUN pip install -r requirements.txt && \\\n"
                  "    # a comment inside\n"
                  "    echo done\n"
                  "RUN [\"python3\", \"-c\", \"print(1)\"]\n"
                  "USER 1000\n"
                  "LABEL org.x=\"a b\" v=${VERSION}\n"
                  "CMD [\"python3\", \"app.py\"]\n"
                  "entrypoint /bin/sh -c\n";
  CHECK(parse(t, NULL, &d, &err) == 0);
  if (err.msg[0])
    printf("#   %s\n", err.msg);
  CHECK(d.n == 12);
  if (d.n != 12)
    return;
  CHECK(d.steps[0].op == DF_FROM && !strcmp(d.steps[0].args[0], "python-base"));
  CHECK(d.steps[1].op == DF_ARG && !strcmp(d.steps[1].args[1], "1.2"));
  CHECK(d.steps[2].op == DF_ENV && d.steps[2].nargs == 4 &&
        !strcmp(d.steps[2].args[1], "/srv/app"));
  CHECK_STR(d.steps[3].args[0], "GREETING");
  CHECK_STR(d.steps[3].args[1], "hello world");
  CHECK_STR(d.steps[4].args[0], "/srv/app");
  CHECK(d.steps[5].op == DF_COPY && d.steps[5].nargs == 3);
  CHECK_STR(d.steps[5].chown, "1000:1000");
  CHECK_STR(d.steps[5].args[2], "/srv/app/");
  CHECK(d.steps[6].op == DF_RUN && d.steps[6].shell && d.steps[6].line == 9);
  CHECK(strstr(d.steps[6].args[0], "echo done") != NULL);
  CHECK(strstr(d.steps[6].args[0], "comment") == NULL);
  CHECK(d.steps[7].op == DF_RUN && !d.steps[7].shell && d.steps[7].nargs == 3);
  CHECK_STR(d.steps[9].args[1], "a b");
  CHECK_STR(d.steps[9].args[3], "1.2");
  CHECK(d.steps[10].op == DF_CMD && !d.steps[10].shell);
  CHECK(d.steps[11].op == DF_ENTRYPOINT && d.steps[11].shell);
  dockerfile_free(&d);
}

TEST(build_args_defaults_and_substitution_forms) {
  struct dockerfile d;
  struct husk_err err = {0};
  char *args[] = {"TAG=given", NULL};
  const char *t = "ARG TAG=default\n"
                  "ARG EMPTY\n"
                  "FROM base-$TAG\n"
                  "ENV A=${TAG:-x} B=${EMPTY:-fallback} C=${TAG:+set} D=${EMPTY:+no} E='$TAG' "
                  "F=\\$TAG\n";
  CHECK(parse(t, args, &d, &err) == 0);
  if (d.n == 4) {
    CHECK_STR(d.steps[2].args[0], "base-given");
    char **a = d.steps[3].args;
    CHECK_STR(a[1], "given");
    CHECK_STR(a[3], "fallback");
    CHECK_STR(a[5], "set");
    CHECK_STR(a[7], "");
    CHECK_STR(a[9], "$TAG");
    CHECK_STR(a[11], "$TAG");
  } else {
    CHECK(0);
  }
  dockerfile_free(&d);
}

TEST(the_escape_directive) {
  struct dockerfile d;
  struct husk_err err = {0};
  CHECK(parse("# escape=`\nFROM x\nRUN dir c:\\ `\n  && echo ok\n", NULL, &d, &err) == 0);
  CHECK(d.n == 2 && strstr(d.steps[1].args[0], "c:\\") && strstr(d.steps[1].args[0], "echo ok"));
  dockerfile_free(&d);
}

static void refused(const char *text, const char *needle) {
  struct dockerfile d;
  struct husk_err err = {0};
  int rc = parse(text, NULL, &d, &err);
  CHECK(rc == -1);
  if (rc == 0)
    dockerfile_free(&d);
  else if (!strstr(err.msg, needle))
    printf("#   `%s` lacks `%s`\n", err.msg, needle);
  CHECK(rc == -1 && strstr(err.msg, needle));
}

TEST(add_is_copy_that_unpacks_archives) {
  static const char text[] = "FROM x\nADD --chown=1:2 a.tar.gz /opt/\nCOPY a.tar.gz /opt/\n";
  struct dockerfile d;
  struct husk_err err = {0};
  CHECK(dockerfile_parse(text, sizeof text - 1, NULL, &d, &err) == 0);
  CHECK(d.n == 3 && d.steps[1].op == DF_COPY && d.steps[1].add && !d.steps[2].add);
  CHECK_STR(d.steps[1].chown, "1:2");
  CHECK_STR(d.steps[1].args[0], "a.tar.gz");
  dockerfile_free(&d);
}

TEST(refusals_name_the_line) {
  refused("FROM x\nHEALTHCHECK CMD true\n", "line 2");
  refused("FROM x\nFROM y\n", "second FROM");
  refused("RUN true\n", "before FROM");
  refused("# nothing\n", "no FROM");
  refused("FROM x\nCOPY --from=build /a /b\n", "line 2");
  refused("FROM x\nADD https://example.test/a.tgz /tmp/\n", "URL");
  refused("FROM x\nENV A=\"unterminated\n", "unterminated");
  refused("FROM x\nCOPY onlyone\n", "source and a destination");
  refused("FROM x\nADD onlyone\n", "source and a destination");
  refused("FROM x\nRUN\n", "nothing to run");
  refused("FROM x\nENV =v\n", "not a name");
  refused("FROM x\nWORKDIR a b\n", "one word");
  refused("FROM x\nENV A=${B\n", "}");
  struct dockerfile d;
  struct husk_err err = {0};
  CHECK(dockerfile_parse("FROM x\0RUN y", 12, NULL, &d, &err) == -1 && err.code == EINVAL);
}

int main(void) {
  RUN(the_usual_forms);
  RUN(build_args_defaults_and_substitution_forms);
  RUN(the_escape_directive);
  RUN(add_is_copy_that_unpacks_archives);
  RUN(refusals_name_the_line);
  return unit_done();
}
