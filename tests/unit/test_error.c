/* Unit tests for src/util/error.{h,c}: message formatting, the strerror
 * suffix, bounded truncation and single-line sanitizing. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "util/error.h"

/* The error struct with guard bytes on both sides: an overflow of msg[]
 * inside a struct is invisible to ASan, so check canaries by hand. */
struct guarded {
  unsigned char before[64];
  struct husk_err e;
  unsigned char after[256];
};

static void guard_init(struct guarded *g) {
  memset(g, 0xA5, sizeof *g);
  g->e.code = 12345;
}

static bool guard_ok(const struct guarded *g) {
  for (size_t i = 0; i < sizeof g->before; i++)
    if (g->before[i] != 0xA5)
      return false;
  for (size_t i = 0; i < sizeof g->after; i++)
    if (g->after[i] != 0xA5)
      return false;
  return true;
}

/* msg is NUL-terminated within the buffer. */
static size_t msg_len(const struct husk_err *e) {
  const char *z = memchr(e->msg, '\0', sizeof e->msg);
  return z ? (size_t)(z - e->msg) : sizeof e->msg;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

static bool one_line(const char *m) {
  for (; *m; m++)
    if ((unsigned char)*m < 0x20 || *m == 0x7f)
      return false;
  return true;
}

static char *repeat(char c, size_t n) {
  char *s = malloc(n + 1);
  if (!s)
    abort();
  memset(s, c, n);
  s[n] = '\0';
  return s;
}

TEST(error_appends_strerror) {
  struct husk_err e;
  memset(&e, 0x7f, sizeof e);
  CHECK(husk_error(&e, ENOENT, "cannot open `%s`", "/x/y") == -1);
  CHECK(e.code == ENOENT);
  char want[256];
  snprintf(want, sizeof want, "cannot open `/x/y`: %s", strerror(ENOENT));
  CHECK_STR(e.msg, want);

  CHECK(husk_error(&e, EACCES, "plain") == -1);
  snprintf(want, sizeof want, "plain: %s", strerror(EACCES));
  CHECK_STR(e.msg, want);
  CHECK(e.code == EACCES);

  /* errnum 0: nothing to append. */
  CHECK(husk_error(&e, 0, "no errno %d", 7) == -1);
  CHECK_STR(e.msg, "no errno 7");
  CHECK(e.code == 0);

  /* Unknown errno values still produce text and keep the code. */
  CHECK(husk_error(&e, 4095, "odd") == -1);
  CHECK(e.code == 4095);
  CHECK(strncmp(e.msg, "odd: ", 5) == 0);
  CHECK(strlen(e.msg) > 5);

  /* Empty format. */
  CHECK(husk_error(&e, EIO, "%s", "") == -1);
  snprintf(want, sizeof want, ": %s", strerror(EIO));
  CHECK_STR(e.msg, want);
}

TEST(error_preserves_errno_argument) {
  /* The message must reflect the errnum argument, not the ambient errno. */
  struct husk_err e;
  errno = EPERM;
  husk_error(&e, ENOSPC, "write");
  char want[128];
  snprintf(want, sizeof want, "write: %s", strerror(ENOSPC));
  CHECK_STR(e.msg, want);
  CHECK(e.code == ENOSPC);
}

TEST(fail_has_no_strerror) {
  struct husk_err e;
  CHECK(husk_fail(&e, EINVAL, "bad value `%s`", "x") == -1);
  CHECK_STR(e.msg, "bad value `x`");
  CHECK(e.code == EINVAL);
  CHECK(strstr(e.msg, strerror(EINVAL)) == NULL);
  CHECK(husk_fail(&e, 0, "zero") == -1);
  CHECK_STR(e.msg, "zero");
  CHECK(e.code == 0);
}

TEST(null_err_is_allowed) {
  CHECK(husk_error(NULL, EIO, "x %d", 1) == -1);
  CHECK(husk_fail(NULL, EIO, "x %d", 1) == -1);
  CHECK(husk_error_wrap(NULL, "ctx %d", 1) == -1);
  husk_err_clear(NULL);
}

TEST(clear) {
  struct husk_err e;
  husk_error(&e, EIO, "something");
  husk_err_clear(&e);
  CHECK(e.code == 0);
  CHECK_STR(e.msg, "");
}

/* Lengths around the buffer size, for every producer. */
TEST(truncation_boundaries) {
  const size_t cap = HUSK_ERR_MSG_MAX; /* includes the NUL */
  static struct guarded g;
  size_t lens[] = {0, 1, cap - 5, cap - 4, cap - 3, cap - 2, cap - 1, cap, cap + 1, cap + 2,
                   2 * cap, 100000};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    char *s = repeat('x', lens[i]);

    /* husk_fail: exact fit up to cap-1, then "..." */
    guard_init(&g);
    CHECK(husk_fail(&g.e, EINVAL, "%s", s) == -1);
    CHECK(guard_ok(&g));
    CHECK(msg_len(&g.e) < cap);
    CHECK(g.e.code == EINVAL);
    if (lens[i] <= cap - 1) {
      CHECK_STR(g.e.msg, s);
    } else {
      CHECK(msg_len(&g.e) == cap - 1);
      CHECK(ends_with(g.e.msg, "..."));
      CHECK(strncmp(g.e.msg, s, cap - 4) == 0);
    }

    /* husk_error: the suffix counts too */
    guard_init(&g);
    CHECK(husk_error(&g.e, ENOENT, "%s", s) == -1);
    CHECK(guard_ok(&g));
    CHECK(msg_len(&g.e) < cap);
    CHECK(g.e.code == ENOENT);
    size_t full = lens[i] + 2 + strlen(strerror(ENOENT));
    if (full <= cap - 1) {
      CHECK(!ends_with(g.e.msg, "..."));
      CHECK(msg_len(&g.e) == full);
    } else {
      CHECK(msg_len(&g.e) == cap - 1);
      CHECK(ends_with(g.e.msg, "..."));
    }
    free(s);
  }
}

TEST(truncation_with_strerror_exact_fit) {
  const size_t cap = HUSK_ERR_MSG_MAX;
  const char *text = strerror(ENOENT);
  size_t suffix = 2 + strlen(text);
  static struct guarded g;
  for (size_t delta = 0; delta < 4; delta++) {
    /* prefix + ": text" == cap - 1 - delta + 1 ... around the edge */
    size_t plen = cap - 1 - suffix + delta;
    char *s = repeat('p', plen);
    guard_init(&g);
    husk_error(&g.e, ENOENT, "%s", s);
    CHECK(guard_ok(&g));
    if (delta == 0) {
      CHECK(msg_len(&g.e) == cap - 1);
      CHECK(ends_with(g.e.msg, text)); /* fits exactly, untouched */
    } else {
      CHECK(msg_len(&g.e) == cap - 1);
      CHECK(ends_with(g.e.msg, "..."));
    }
    free(s);
  }
}

TEST(wrap_prefixes) {
  struct husk_err e;
  husk_error(&e, ENOENT, "cannot open `%s`", "f");
  char inner[HUSK_ERR_MSG_MAX];
  snprintf(inner, sizeof inner, "%s", e.msg);
  CHECK(husk_error_wrap(&e, "loading config %d", 2) == -1);
  char want[HUSK_ERR_MSG_MAX + 64];
  snprintf(want, sizeof want, "loading config 2: %s", inner);
  CHECK_STR(e.msg, want);
  CHECK(e.code == ENOENT); /* the code is kept */
  /* Twice. */
  husk_error_wrap(&e, "outer");
  snprintf(want, sizeof want, "outer: loading config 2: %s", inner);
  CHECK_STR(e.msg, want);
  CHECK(e.code == ENOENT);
  /* Wrapping an empty message. */
  husk_err_clear(&e);
  husk_error_wrap(&e, "ctx");
  CHECK_STR(e.msg, "ctx: ");
  CHECK(e.code == 0);
}

TEST(wrap_truncates) {
  const size_t cap = HUSK_ERR_MSG_MAX;
  static struct guarded g;
  /* A long inner message. */
  char *s = repeat('i', cap - 1);
  guard_init(&g);
  husk_fail(&g.e, EIO, "%s", s);
  CHECK(msg_len(&g.e) == cap - 1);
  CHECK(husk_error_wrap(&g.e, "ctx") == -1);
  CHECK(guard_ok(&g));
  CHECK(msg_len(&g.e) == cap - 1);
  CHECK(strncmp(g.e.msg, "ctx: iii", 8) == 0);
  CHECK(ends_with(g.e.msg, "..."));
  CHECK(g.e.code == EIO);
  free(s);

  /* A context longer than the buffer. */
  s = repeat('c', 3 * cap);
  guard_init(&g);
  husk_fail(&g.e, EIO, "inner");
  CHECK(husk_error_wrap(&g.e, "%s", s) == -1);
  CHECK(guard_ok(&g));
  CHECK(msg_len(&g.e) == cap - 1);
  CHECK(ends_with(g.e.msg, "..."));
  CHECK(strstr(g.e.msg, "inner") == NULL);
  free(s);

  /* Context of exactly cap-1 characters: no room for ": inner". */
  s = repeat('c', cap - 1);
  guard_init(&g);
  husk_fail(&g.e, EIO, "inner");
  husk_error_wrap(&g.e, "%s", s);
  CHECK(guard_ok(&g));
  CHECK(msg_len(&g.e) == cap - 1);
  CHECK(ends_with(g.e.msg, "..."));
  free(s);

  /* Many nested wraps stay bounded. */
  guard_init(&g);
  husk_error(&g.e, ENOSPC, "write `%s`", "file");
  for (int i = 0; i < 500; i++)
    husk_error_wrap(&g.e, "level %d", i);
  CHECK(guard_ok(&g));
  CHECK(msg_len(&g.e) == cap - 1);
  CHECK(strncmp(g.e.msg, "level 499: level 498: ", 22) == 0);
  CHECK(ends_with(g.e.msg, "..."));
  CHECK(g.e.code == ENOSPC);
}

TEST(messages_are_sanitized) {
  struct husk_err e;
  husk_fail(&e, EINVAL, "name `%s`", "a\nb\rc\td\x1b[31me\x7f" "f\x01");
  CHECK_STR(e.msg, "name `a?b?c?d?[31me?f?`");
  CHECK(one_line(e.msg));
  husk_error(&e, EIO, "x\n%s", "y");
  CHECK(one_line(e.msg));
  CHECK(strncmp(e.msg, "x?y: ", 5) == 0);
  husk_fail(&e, EIO, "inner\nline");
  husk_error_wrap(&e, "ctx\x1b]0;title\x07");
  CHECK(one_line(e.msg));
  CHECK_STR(e.msg, "ctx?]0;title?: inner?line");
}

TEST(sanitize_line_ascii_controls) {
  char s[64];
  strcpy(s, "plain text, nothing to do ~!@#$%^&*()");
  husk_sanitize_line(s);
  CHECK_STR(s, "plain text, nothing to do ~!@#$%^&*()");

  /* Every C0 control and DEL becomes '?'. */
  char all[40];
  size_t n = 0;
  for (int c = 1; c < 0x20; c++)
    all[n++] = (char)c;
  all[n++] = 0x7f;
  all[n] = '\0';
  husk_sanitize_line(all);
  CHECK(strlen(all) == 32);
  CHECK(strspn(all, "?") == 32);

  strcpy(s, "\x1b[2J\x1b[H\x1b]52;c;aGk=\x07");
  husk_sanitize_line(s);
  CHECK(strchr(s, 0x1b) == NULL);
  CHECK(strchr(s, 0x07) == NULL);
  CHECK(one_line(s));

  strcpy(s, "");
  husk_sanitize_line(s);
  CHECK_STR(s, "");

  /* UTF-8 text is kept. */
  strcpy(s, "caf\xc3\xa9 \xe2\x9c\x93");
  husk_sanitize_line(s);
  CHECK_STR(s, "caf\xc3\xa9 \xe2\x9c\x93");
}

/* C1 control characters (U+0080..U+009F) encoded in UTF-8 are acted upon by
 * common terminals (xterm, VTE): U+009B is CSI, U+009D is OSC (window
 * title, OSC 52 clipboard writes), U+0085 is NEL (a newline).  Text from a
 * box printed on a host log line must not carry them. */
TEST(sanitize_line_c1_controls) {
  char s[64];
  strcpy(s, "a\xc2\x9b" "2Jb");
  husk_sanitize_line(s);
  CHECK(strstr(s, "\xc2\x9b") == NULL);

  strcpy(s, "a\xc2\x9d" "52;c;aGk=\xc2\x9c");
  husk_sanitize_line(s);
  CHECK(strstr(s, "\xc2\x9d") == NULL);

  strcpy(s, "line1\xc2\x85line2");
  husk_sanitize_line(s);
  CHECK(strstr(s, "\xc2\x85") == NULL);
}

int main(void) {
  RUN(error_appends_strerror);
  RUN(error_preserves_errno_argument);
  RUN(fail_has_no_strerror);
  RUN(null_err_is_allowed);
  RUN(clear);
  RUN(truncation_boundaries);
  RUN(truncation_with_strerror_exact_fit);
  RUN(wrap_prefixes);
  RUN(wrap_truncates);
  RUN(messages_are_sanitized);
  RUN(sanitize_line_ascii_controls);
  RUN(sanitize_line_c1_controls);
  return unit_done();
}
