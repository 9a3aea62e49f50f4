/* A tiny unit-test harness: TAP lines and a non-zero exit on failure.
 *
 *   TEST(name) { CHECK(x == 1); CHECK_STR(a, "b"); }
 *   int main(void) { RUN(name); return unit_done(); } */
#ifndef HUSK_TESTS_UNIT_H
#define HUSK_TESTS_UNIT_H

#include <stdio.h>
#include <string.h>
#ifdef _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <unistd.h>
#endif

static int unit_n, unit_failed, unit_cur_failed;

#define TEST(name) static void test_##name(void)
#define CHECK(cond)                                                                       \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      printf("#   %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);                 \
      unit_cur_failed = 1;                                                                \
    }                                                                                     \
  } while (0)
#define CHECK_STR(a, b)                                                                   \
  do {                                                                                    \
    const char *a_ = (a), *b_ = (b);                                                      \
    if (!a_ || !b_ || strcmp(a_, b_)) {                                                   \
      printf("#   %s:%d: `%s` != `%s`\n", __FILE__, __LINE__, a_ ? a_ : "(null)",         \
             b_ ? b_ : "(null)");                                                         \
      unit_cur_failed = 1;                                                                \
    }                                                                                     \
  } while (0)
#define RUN(name)                                                                         \
  do {                                                                                    \
    unit_cur_failed = 0;                                                                  \
    test_##name();                                                                        \
    unit_n++;                                                                             \
    if (unit_cur_failed)                                                                  \
      unit_failed++;                                                                      \
    printf("%s %d - %s\n", unit_cur_failed ? "not ok" : "ok", unit_n, #name);             \
  } while (0)

#ifdef _GNU_SOURCE
static inline int unit_rm_entry_(const char *path, const struct stat *st, int type,
                                 struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return (type == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT ? -1 : 0;
}

/* rm -rf `dir` (a test's scratch directory), symlinks not followed. */
static inline void unit_rm_tree(const char *dir) {
  if (nftw(dir, unit_rm_entry_, 16, FTW_DEPTH | FTW_PHYS) != 0)
    printf("# could not remove %s\n", dir);
}
#endif

static inline int unit_done(void) {
  printf("# %d passed, %d failed\n", unit_n - unit_failed, unit_failed);
  return unit_failed ? 1 : 0;
}

#endif
