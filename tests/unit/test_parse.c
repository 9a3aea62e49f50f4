/* Unit tests for src/util/parse.{h,c}: every accepted form and every
 * rejection path of the strict number parsers. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "unit.h"
#include "util/parse.h"

#define SENTINEL 0x5a5a5a5a5a5a5a5aULL

/* Printable rendering of a test input for diagnostics (inputs may hold
 * control characters that would break the TAP stream). */
static const char *show(const char *s) {
  static char buf[4][256];
  static int slot;
  char *b = buf[slot++ & 3];
  if (!s)
    return "(null)";
  size_t o = 0;
  for (; *s && o + 5 < sizeof buf[0]; s++) {
    unsigned char c = (unsigned char)*s;
    if (c < 0x20 || c >= 0x7f)
      o += (size_t)snprintf(b + o, sizeof buf[0] - o, "\\x%02x", c);
    else
      b[o++] = (char)c;
  }
  b[o] = '\0';
  return b;
}

/* An error message must be one printable line. */
static bool one_line(const char *m) {
  for (; *m; m++)
    if ((unsigned char)*m < 0x20 || *m == 0x7f)
      return false;
  return true;
}

/* User-input errors come from husk_fail(): no strerror text appended. */
static bool no_strerror(const char *m) {
  return !strstr(m, strerror(EINVAL)) && !strstr(m, strerror(ERANGE));
}

#define DIAG(fmt, ...) printf("#     " fmt "\n", __VA_ARGS__)

#define SIZE_OK(s, want)                                                                  \
  do {                                                                                    \
    uint64_t o_ = SENTINEL;                                                               \
    struct husk_err e_ = {0};                                                             \
    int r_ = parse_size((s), &o_, &e_);                                                   \
    CHECK(r_ == 0);                                                                       \
    CHECK(o_ == (uint64_t)(want));                                                        \
    if (r_ != 0 || o_ != (uint64_t)(want))                                                \
      DIAG("parse_size(`%s`) = %d, %llu (%s)", show(s), r_, (unsigned long long)o_,      \
           e_.msg);                                                                       \
  } while (0)

#define SIZE_BAD(s, errcode)                                                              \
  do {                                                                                    \
    uint64_t o_ = SENTINEL;                                                               \
    struct husk_err e_ = {0};                                                             \
    int r_ = parse_size((s), &o_, &e_);                                                   \
    CHECK(r_ == -1);                                                                      \
    CHECK(e_.code == (errcode));                                                          \
    CHECK(o_ == SENTINEL);                                                                \
    CHECK(e_.msg[0] != '\0');                                                             \
    CHECK(one_line(e_.msg));                                                              \
    CHECK(no_strerror(e_.msg));                                                           \
    if (r_ != -1 || e_.code != (errcode))                                                 \
      DIAG("parse_size(`%s`) = %d, %llu, code %d (%s)", show(s), r_,                     \
           (unsigned long long)o_, e_.code, show(e_.msg));                                \
  } while (0)

#define U64_OK(s, lo, hi, want)                                                           \
  do {                                                                                    \
    uint64_t o_ = SENTINEL;                                                               \
    struct husk_err e_ = {0};                                                             \
    int r_ = parse_u64_range((s), (lo), (hi), &o_, &e_);                                  \
    CHECK(r_ == 0);                                                                       \
    CHECK(o_ == (uint64_t)(want));                                                        \
    if (r_ != 0 || o_ != (uint64_t)(want))                                                \
      DIAG("parse_u64_range(`%s`) = %d, %llu (%s)", show(s), r_, (unsigned long long)o_, \
           e_.msg);                                                                       \
  } while (0)

#define U64_BAD(s, lo, hi, errcode)                                                       \
  do {                                                                                    \
    uint64_t o_ = SENTINEL;                                                               \
    struct husk_err e_ = {0};                                                             \
    int r_ = parse_u64_range((s), (lo), (hi), &o_, &e_);                                  \
    CHECK(r_ == -1);                                                                      \
    CHECK(e_.code == (errcode));                                                          \
    CHECK(o_ == SENTINEL);                                                                \
    CHECK(e_.msg[0] != '\0');                                                             \
    CHECK(one_line(e_.msg));                                                              \
    CHECK(no_strerror(e_.msg));                                                           \
    if (r_ != -1 || e_.code != (errcode))                                                 \
      DIAG("parse_u64_range(`%s`) = %d, %llu, code %d (%s)", show(s), r_,                \
           (unsigned long long)o_, e_.code, show(e_.msg));                                \
  } while (0)

#define MILLI_OK(s, lo, hi, want)                                                         \
  do {                                                                                    \
    uint64_t o_ = SENTINEL;                                                               \
    struct husk_err e_ = {0};                                                             \
    int r_ = parse_milli((s), (lo), (hi), &o_, &e_);                                      \
    CHECK(r_ == 0);                                                                       \
    CHECK(o_ == (uint64_t)(want));                                                        \
    if (r_ != 0 || o_ != (uint64_t)(want))                                                \
      DIAG("parse_milli(`%s`) = %d, %llu (%s)", show(s), r_, (unsigned long long)o_,     \
           e_.msg);                                                                       \
  } while (0)

#define MILLI_BAD(s, lo, hi, errcode)                                                     \
  do {                                                                                    \
    uint64_t o_ = SENTINEL;                                                               \
    struct husk_err e_ = {0};                                                             \
    int r_ = parse_milli((s), (lo), (hi), &o_, &e_);                                      \
    CHECK(r_ == -1);                                                                      \
    CHECK(e_.code == (errcode));                                                          \
    CHECK(o_ == SENTINEL);                                                                \
    CHECK(e_.msg[0] != '\0');                                                             \
    CHECK(one_line(e_.msg));                                                              \
    CHECK(no_strerror(e_.msg));                                                           \
    if (r_ != -1 || e_.code != (errcode))                                                 \
      DIAG("parse_milli(`%s`) = %d, %llu, code %d (%s)", show(s), r_,                    \
           (unsigned long long)o_, e_.code, show(e_.msg));                                \
  } while (0)

#define ENV_OK(s, namelen)                                                                \
  do {                                                                                    \
    struct husk_err e_ = {0};                                                             \
    int r_ = parse_env_assignment((s), &e_);                                              \
    CHECK(r_ == (namelen));                                                               \
    if (r_ != (namelen))                                                                  \
      DIAG("parse_env_assignment(`%s`) = %d (%s)", show(s), r_, show(e_.msg));           \
  } while (0)

#define ENV_BAD(s)                                                                        \
  do {                                                                                    \
    struct husk_err e_ = {0};                                                             \
    int r_ = parse_env_assignment((s), &e_);                                              \
    CHECK(r_ == -1);                                                                      \
    CHECK(e_.code == EINVAL);                                                             \
    CHECK(e_.msg[0] != '\0');                                                             \
    CHECK(one_line(e_.msg));                                                              \
    CHECK(no_strerror(e_.msg));                                                           \
    if (r_ != -1)                                                                         \
      DIAG("parse_env_assignment(`%s`) = %d", show(s), r_);                              \
  } while (0)

/* ---- parse_size ------------------------------------------------------- */

TEST(size_plain_numbers) {
  SIZE_OK("0", 0);
  SIZE_OK("1", 1);
  SIZE_OK("1024", 1024);
  SIZE_OK("0000000000000000000000000000000000000000042", 42);
  SIZE_OK("18446744073709551615", UINT64_MAX);
  SIZE_OK("0B", 0);
  SIZE_OK("1b", 1);
  SIZE_OK("512B", 512);
}

TEST(size_units) {
  const struct {
    char u;
    unsigned shift;
  } units[] = {{'k', 10}, {'K', 10}, {'m', 20}, {'M', 20}, {'g', 30}, {'G', 30}, {'t', 40}, {'T', 40}};
  const char *suffixes[] = {"", "i", "I", "b", "B", "iB", "ib", "IB", "Ib"};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    for (size_t j = 0; j < sizeof suffixes / sizeof suffixes[0]; j++) {
      char s[32];
      snprintf(s, sizeof s, "3%c%s", units[i].u, suffixes[j]);
      SIZE_OK(s, 3ULL << units[i].shift);
      snprintf(s, sizeof s, "0%c%s", units[i].u, suffixes[j]);
      SIZE_OK(s, 0);
    }
  SIZE_OK("256M", 256ULL << 20);
  SIZE_OK("256MiB", 256ULL << 20);
  SIZE_OK("256MB", 256ULL << 20);
  SIZE_OK("512k", 512ULL << 10);
  SIZE_OK("1G", 1ULL << 30);
  SIZE_OK("2T", 2ULL << 40);
}

TEST(size_overflow_at_every_unit) {
  /* Largest value that fits, then one more, for each unit. */
  const struct {
    const char *unit;
    unsigned shift;
  } units[] = {{"", 0}, {"B", 0}, {"K", 10}, {"KiB", 10}, {"M", 20}, {"MB", 20}, {"G", 30}, {"Gi", 30}, {"T", 40}, {"TiB", 40}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    uint64_t max = UINT64_MAX >> units[i].shift;
    char s[64];
    snprintf(s, sizeof s, "%llu%s", (unsigned long long)max, units[i].unit);
    SIZE_OK(s, max << units[i].shift);
    if (units[i].shift) {
      snprintf(s, sizeof s, "%llu%s", (unsigned long long)max + 1, units[i].unit);
      SIZE_BAD(s, ERANGE);
    }
    snprintf(s, sizeof s, "18446744073709551616%s", units[i].unit);
    SIZE_BAD(s, ERANGE);
    snprintf(s, sizeof s, "99999999999999999999999999%s", units[i].unit);
    SIZE_BAD(s, ERANGE);
  }
  SIZE_BAD("17179869184G", ERANGE); /* exactly 2^64 */
  SIZE_BAD("16777216T", ERANGE);    /* exactly 2^64 */
  SIZE_OK("16777215T", 16777215ULL << 40);
  SIZE_BAD("18446744073709551616", ERANGE);
}

TEST(size_rejects_malformed) {
  SIZE_BAD("", EINVAL);
  SIZE_BAD(NULL, EINVAL);
  SIZE_BAD("-1", EINVAL);
  SIZE_BAD("+1", EINVAL);
  SIZE_BAD("-0", EINVAL);
  SIZE_BAD(" 1", EINVAL);
  SIZE_BAD("1 ", EINVAL);
  SIZE_BAD("1 K", EINVAL);
  SIZE_BAD("\t1", EINVAL);
  SIZE_BAD("1\n", EINVAL);
  SIZE_BAD("K", EINVAL);
  SIZE_BAD("KiB", EINVAL);
  SIZE_BAD("1.5G", EINVAL);
  SIZE_BAD("1,5G", EINVAL);
  SIZE_BAD("0x10", EINVAL);
  SIZE_BAD("1e3", EINVAL);
  SIZE_BAD("1X", EINVAL);
  SIZE_BAD("1P", EINVAL);
  SIZE_BAD("1E", EINVAL);
  SIZE_BAD("1KK", EINVAL);
  SIZE_BAD("1KiBx", EINVAL);
  SIZE_BAD("1KBi", EINVAL);   /* suffix order is i then B */
  SIZE_BAD("1Bi", EINVAL);    /* plain bytes take no "i" */
  SIZE_BAD("1BB", EINVAL);
  SIZE_BAD("1ii", EINVAL);
  SIZE_BAD("1i", EINVAL);
  SIZE_BAD("1M1", EINVAL);
  SIZE_BAD("1\xc2\xb5", EINVAL);
  SIZE_BAD("1\x1b[31m", EINVAL); /* the message must still be one clean line */
  SIZE_BAD("１", EINVAL);         /* fullwidth digit */
}

TEST(size_error_messages) {
  struct husk_err e = {0};
  uint64_t o;
  CHECK(parse_size("12Q", &o, &e) == -1);
  CHECK(strstr(e.msg, "12Q") != NULL);
  CHECK(parse_size("1\nfake log line", &o, &e) == -1);
  CHECK(strchr(e.msg, '\n') == NULL);
  CHECK(strstr(e.msg, "fake log line") != NULL);
  /* A NULL error sink is allowed. */
  CHECK(parse_size("bad", &o, NULL) == -1);
  CHECK(parse_size("1K", &o, NULL) == 0 && o == 1024);
  /* A huge input cannot overflow the message buffer. */
  char big[8192];
  memset(big, '9', sizeof big - 2);
  big[sizeof big - 2] = 'Q';
  big[sizeof big - 1] = '\0';
  CHECK(parse_size(big, &o, &e) == -1);
  CHECK(e.code == ERANGE);
  CHECK(strlen(e.msg) < sizeof e.msg);
  memset(big, '0', sizeof big - 3);
  big[sizeof big - 3] = '7';
  big[sizeof big - 2] = 'K';
  CHECK(parse_size(big, &o, &e) == 0 && o == 7 * 1024);
}

/* ---- parse_u64_range ---------------------------------------------------- */

TEST(u64_range_bounds) {
  U64_OK("0", 0, 10, 0);
  U64_OK("10", 0, 10, 10);
  U64_OK("5", 5, 5, 5);
  U64_BAD("4", 5, 5, ERANGE);
  U64_BAD("6", 5, 5, ERANGE);
  U64_BAD("0", 1, 10, ERANGE);
  U64_BAD("11", 1, 10, ERANGE);
  U64_OK("1", 1, 10, 1);
  U64_OK("18446744073709551615", 0, UINT64_MAX, UINT64_MAX);
  U64_BAD("18446744073709551615", 0, UINT64_MAX - 1, ERANGE);
  U64_OK("18446744073709551614", 0, UINT64_MAX - 1, UINT64_MAX - 1);
  U64_BAD("3", 10, 1, ERANGE); /* empty range: nothing fits */
  U64_OK("007", 0, 10, 7);
}

TEST(u64_range_overflow) {
  U64_BAD("18446744073709551616", 0, UINT64_MAX, ERANGE);
  U64_BAD("18446744073709551620", 0, UINT64_MAX, ERANGE);
  U64_BAD("27670116110564327424", 0, UINT64_MAX, ERANGE); /* wraps to a small value mod 2^64 */
  U64_BAD("36893488147419103232", 0, UINT64_MAX, ERANGE); /* 2^65 */
  U64_BAD("100000000000000000000000000000000000000", 0, UINT64_MAX, ERANGE);
}

TEST(u64_range_malformed) {
  U64_BAD("", 0, 10, EINVAL);
  U64_BAD(NULL, 0, 10, EINVAL);
  U64_BAD("+1", 0, 10, EINVAL);
  U64_BAD("-1", 0, 10, EINVAL);
  U64_BAD("-0", 0, 10, EINVAL);
  U64_BAD(" 1", 0, 10, EINVAL);
  U64_BAD("1 ", 0, 10, EINVAL);
  U64_BAD("1K", 0, 10000, EINVAL);
  U64_BAD("1.0", 0, 10, EINVAL);
  U64_BAD("0x1", 0, 10, EINVAL);
  U64_BAD("1e1", 0, 100, EINVAL);
  U64_BAD("abc", 0, 10, EINVAL);
  U64_BAD("1\n", 0, 10, EINVAL);
}

/* ---- parse_milli -------------------------------------------------------- */

TEST(milli_forms) {
  const uint64_t M = UINT64_MAX;
  MILLI_OK("1", 0, M, 1000);
  MILLI_OK("0", 0, M, 0);
  MILLI_OK("0.5", 0, M, 500);
  MILLI_OK(".5", 0, M, 500);
  MILLI_OK("5.", 0, M, 5000);
  MILLI_OK("2.25", 0, M, 2250);
  MILLI_OK("0.001", 0, M, 1);
  MILLI_OK("0.010", 0, M, 10);
  MILLI_OK("1.0000", 0, M, 1000);
  MILLI_OK("1.000000000000000000000000000000000000", 0, M, 1000);
  MILLI_OK("1.5000", 0, M, 1500);
  MILLI_OK("000.250", 0, M, 250);
  MILLI_OK(".000", 0, M, 0);
  MILLI_OK("0.", 0, M, 0);
}

TEST(milli_precision) {
  const uint64_t M = UINT64_MAX;
  MILLI_BAD("1.0001", 0, M, EINVAL);
  MILLI_BAD("0.0005", 0, M, EINVAL);
  MILLI_BAD(".0001", 0, M, EINVAL);
  MILLI_BAD("1.0000000000001", 0, M, EINVAL);
  MILLI_BAD("1.2345", 0, M, EINVAL);
}

TEST(milli_huge) {
  const uint64_t M = UINT64_MAX;
  MILLI_OK("18446744073709551", 0, M, 18446744073709551000ULL);
  MILLI_OK("18446744073709551.615", 0, M, UINT64_MAX);
  MILLI_BAD("18446744073709551.616", 0, M, ERANGE);
  MILLI_BAD("18446744073709552", 0, M, ERANGE);
  MILLI_BAD("18446744073709551616", 0, M, ERANGE);
  MILLI_BAD("99999999999999999999999.5", 0, M, ERANGE);
  MILLI_BAD("1000000000000000000000", 0, M, ERANGE);
}

TEST(milli_range) {
  MILLI_OK("0.001", 1, 64000, 1);
  MILLI_OK("64", 1, 64000, 64000);
  MILLI_BAD("0", 1, 64000, ERANGE);
  MILLI_BAD("0.000", 1, 64000, ERANGE);
  MILLI_BAD("64.001", 1, 64000, ERANGE);
  MILLI_BAD("65", 1, 64000, ERANGE);
  MILLI_OK("2.5", 2500, 2500, 2500);
  MILLI_BAD("2.499", 2500, 2500, ERANGE);
}

TEST(milli_malformed) {
  const uint64_t M = UINT64_MAX;
  MILLI_BAD("", 0, M, EINVAL);
  MILLI_BAD(NULL, 0, M, EINVAL);
  MILLI_BAD(".", 0, M, EINVAL);
  MILLI_BAD("..5", 0, M, EINVAL);
  MILLI_BAD("1..", 0, M, EINVAL);
  MILLI_BAD("1.5.", 0, M, EINVAL);
  MILLI_BAD("1.2.3", 0, M, EINVAL);
  MILLI_BAD("-1", 0, M, EINVAL);
  MILLI_BAD("-0.5", 0, M, EINVAL);
  MILLI_BAD("+1", 0, M, EINVAL);
  MILLI_BAD(" 1", 0, M, EINVAL);
  MILLI_BAD("1 ", 0, M, EINVAL);
  MILLI_BAD("1,5", 0, M, EINVAL);
  MILLI_BAD("1e3", 0, M, EINVAL);
  MILLI_BAD("0x1", 0, M, EINVAL);
  MILLI_BAD("1s", 0, M, EINVAL);
  MILLI_BAD("inf", 0, M, EINVAL);
  MILLI_BAD("nan", 0, M, EINVAL);
  MILLI_BAD("1.5x", 0, M, EINVAL);
  MILLI_BAD(".x", 0, M, EINVAL);
}

/* ---- parse_env_assignment --------------------------------------------- */

TEST(env_valid) {
  ENV_OK("A=b", 1);
  ENV_OK("A=", 1);
  ENV_OK("_=x", 1);
  ENV_OK("_X1=y", 3);
  ENV_OK("path=/bin", 4);
  ENV_OK("A=b=c", 1);
  ENV_OK("A==", 1);
  ENV_OK("A=\n", 1); /* values are not restricted */
  ENV_OK("LONG_NAME_WITH_DIGITS_0123456789=v", 32);
  char big[4096];
  memset(big, 'N', 4000);
  strcpy(big + 4000, "=value");
  ENV_OK(big, 4000);
}

TEST(env_invalid) {
  ENV_BAD("=x");
  ENV_BAD("=");
  ENV_BAD("");
  ENV_BAD(NULL);
  ENV_BAD("A");
  ENV_BAD("1A=b");
  ENV_BAD("9=x");
  ENV_BAD("A-B=c");
  ENV_BAD("A B=c");
  ENV_BAD(" A=c");
  ENV_BAD("A =c");
  ENV_BAD("A.B=c");
  ENV_BAD("A\n=c");
  ENV_BAD("\x1b[2J=c");
  ENV_BAD("\xc3\x84=x"); /* non-ASCII letter */
  ENV_BAD("$A=x");
}

int main(void) {
  RUN(size_plain_numbers);
  RUN(size_units);
  RUN(size_overflow_at_every_unit);
  RUN(size_rejects_malformed);
  RUN(size_error_messages);
  RUN(u64_range_bounds);
  RUN(u64_range_overflow);
  RUN(u64_range_malformed);
  RUN(milli_forms);
  RUN(milli_precision);
  RUN(milli_huge);
  RUN(milli_range);
  RUN(milli_malformed);
  RUN(env_valid);
  RUN(env_invalid);
  return unit_done();
}
