/* Unit tests for the helpers of src/util that the core and the fronts
 * share: UTF-8 (utf8.h), JSON text and times (json_text.h, timefmt.h),
 * base64 (base64.h), the clock (clock.h) and fileio.h's failures, with the edge cases each copy
 * they replace handled. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"
#include "util/base64.h"
#include "util/clock.h"
#include "util/fileio.h"
#include "util/json_text.h"
#include "util/strbuf.h"
#include "util/timefmt.h"
#include "util/utf8.h"

#define U8(s) (const unsigned char *)(s), sizeof(s) - 1

TEST(utf8_sequences) {
  CHECK(utf8_seq_len(U8("a")) == 1);
  CHECK(utf8_seq_len(U8("\0")) == 1); /* NUL is a character */
  CHECK(utf8_seq_len(U8("\xc3\xa9")) == 2);
  CHECK(utf8_seq_len(U8("\xe2\x82\xac")) == 3);
  CHECK(utf8_seq_len(U8("\xf0\x9f\x98\x80")) == 4);
  CHECK(utf8_seq_len(U8("\xf4\x8f\xbf\xbf")) == 4); /* U+10FFFF */
  CHECK(utf8_seq_len(U8("\xef\xbf\xbf")) == 3);     /* U+FFFF */
  CHECK(utf8_seq_len(U8("\xed\x9f\xbf")) == 3);     /* U+D7FF, below the surrogates */
  CHECK(utf8_seq_len(U8("\xee\x80\x80")) == 3);     /* U+E000, above them */
  CHECK(utf8_seq_len(U8("\xc3\xa9xyz")) == 2);      /* only the first */
  CHECK(utf8_seq_len(U8("\x80")) == 0);             /* a lone continuation */
  CHECK(utf8_seq_len(U8("\xbf")) == 0);
  CHECK(utf8_seq_len(U8("\xc0\xaf")) == 0); /* overlong '/' */
  CHECK(utf8_seq_len(U8("\xc1\xbf")) == 0);
  CHECK(utf8_seq_len(U8("\xe0\x80\xaf")) == 0); /* overlong, 3 bytes */
  CHECK(utf8_seq_len(U8("\xe0\x9f\xbf")) == 0);
  CHECK(utf8_seq_len(U8("\xf0\x80\x80\xaf")) == 0); /* overlong, 4 bytes */
  CHECK(utf8_seq_len(U8("\xf0\x8f\xbf\xbf")) == 0);
  CHECK(utf8_seq_len(U8("\xed\xa0\x80")) == 0);     /* U+D800 */
  CHECK(utf8_seq_len(U8("\xed\xbf\xbf")) == 0);     /* U+DFFF */
  CHECK(utf8_seq_len(U8("\xf4\x90\x80\x80")) == 0); /* U+110000 */
  CHECK(utf8_seq_len(U8("\xf5\x80\x80\x80")) == 0);
  CHECK(utf8_seq_len(U8("\xf8\x88\x80\x80\x80")) == 0); /* 5-byte forms */
  CHECK(utf8_seq_len(U8("\xfe")) == 0);
  CHECK(utf8_seq_len(U8("\xff")) == 0);
  CHECK(utf8_seq_len(U8("\xc3(")) == 0); /* continuation missing */
  CHECK(utf8_seq_len(U8("\xe2\x82(")) == 0);
  CHECK(utf8_seq_len(U8("\xe2(\xac")) == 0);
  CHECK(utf8_seq_len(U8("\xf0\x9f\x98\xc0")) == 0);
  /* Cut short: not a sequence (yet). */
  CHECK(utf8_seq_len(U8("\xc3")) == 0);
  CHECK(utf8_seq_len(U8("\xe2\x82")) == 0);
  CHECK(utf8_seq_len(U8("\xf0\x9f\x98")) == 0);
  CHECK(utf8_seq_len((const unsigned char *)"\xe2\x82\xac", 2) == 0);
}

TEST(utf8_valid_strings) {
  CHECK(utf8_valid("", 0));
  CHECK(utf8_valid("plain ascii", 11));
  CHECK(utf8_valid("h\xc3\xa9", 3));
  CHECK(utf8_valid("a\0b", 3)); /* NUL included */
  CHECK(utf8_valid("\xe2\x82\xac\xf0\x9f\x98\x80", 7));
  CHECK(!utf8_valid("\xed\xa0\x80", 3)); /* a surrogate */
  CHECK(!utf8_valid("\xc0\xaf", 2));     /* overlong */
  CHECK(!utf8_valid("\xe2\x82", 2));     /* cut */
  CHECK(!utf8_valid("ok\xff", 3));
  CHECK(!utf8_valid("\xf4\x90\x80\x80", 4));
  CHECK(utf8_valid("h\xc3\xa9\xff", 3)); /* only the n bytes count */
}

TEST(utf8_complete_prefix_cuts_before_a_partial_character) {
  CHECK(utf8_complete_prefix("", 0) == 0);
  CHECK(utf8_complete_prefix("abc", 3) == 3);
  CHECK(utf8_complete_prefix("ab\xc3\xa9", 4) == 4);
  CHECK(utf8_complete_prefix("ab\xc3", 3) == 2);
  CHECK(utf8_complete_prefix("ab\xe2\x82", 4) == 2);
  CHECK(utf8_complete_prefix("ab\xe2", 3) == 2);
  CHECK(utf8_complete_prefix("ab\xf0\x9f\x98", 5) == 2);
  CHECK(utf8_complete_prefix("\xf0\x9f", 2) == 0);
  CHECK(utf8_complete_prefix("\xf0\x9f\x98\x80", 4) == 4);
  /* Beginnings that no byte can complete are sent as they are. */
  CHECK(utf8_complete_prefix("ab\xe0\x80", 4) == 4); /* overlong */
  CHECK(utf8_complete_prefix("ab\xed\xa0", 4) == 4); /* surrogate */
  CHECK(utf8_complete_prefix("ab\xf4\x90", 4) == 4); /* above U+10FFFF */
  CHECK(utf8_complete_prefix("ab\xff", 3) == 3);
  CHECK(utf8_complete_prefix("ab\x80", 3) == 3);
  CHECK(utf8_complete_prefix("a\x80\x80\x80", 4) == 4);
  CHECK(utf8_complete_prefix("ab\xc3(", 4) == 4);
}

TEST(utf8_lossy_replaces_each_bad_byte) {
  size_t n = 99;
  char *s = utf8_lossy("ok\xff\xc3(", 5, true, &n);
  CHECK(s && n == 9 && !strcmp(s, "ok\xef\xbf\xbd\xef\xbf\xbd("));
  free(s);
  s = utf8_lossy("\xc0\x80", 2, true, &n); /* overlong: both bytes */
  CHECK(s && n == 6 && !memcmp(s, "\xef\xbf\xbd\xef\xbf\xbd", 6));
  free(s);
  s = utf8_lossy("\xe2\x82", 2, true, &n); /* cut at the end */
  CHECK(s && n == 6);
  free(s);
  s = utf8_lossy("a\0b", 3, true, &n);
  CHECK(s && n == 3 && !memcmp(s, "a\0b", 3));
  free(s);
  s = utf8_lossy("a\0b", 3, false, &n);
  CHECK(s && n == 5 &&
        !memcmp(s,
                "a\xef\xbf\xbd"
                "b",
                5));
  free(s);
  s = utf8_lossy("", 0, false, &n);
  CHECK(s && n == 0 && !*s);
  free(s);
}

TEST(json_text_as_the_api_and_mcp_send_bytes) {
  bool lossy = true;
  json_t *j = json_text("h\xc3\xa9", 3, true, &lossy);
  CHECK(j && !lossy && !strcmp(json_string_value(j), "h\xc3\xa9"));
  json_decref(j);
  j = json_text("ok\xff\xc3(", 5, false, &lossy);
  CHECK(j && lossy && !strcmp(json_string_value(j), "ok\xef\xbf\xbd\xef\xbf\xbd("));
  json_decref(j);
  /* The API keeps a NUL (JSON escapes it); MCP text has none. */
  j = json_text("a\0b", 3, true, &lossy);
  CHECK(j && !lossy && json_string_length(j) == 3);
  json_decref(j);
  j = json_text("a\0b", 3, false, &lossy);
  CHECK(j && lossy &&
        !strcmp(json_string_value(j), "a\xef\xbf\xbd"
                                      "b"));
  json_decref(j);
  j = json_text("\xff", 1, true, NULL);
  CHECK(j && !strcmp(json_string_value(j), "\xef\xbf\xbd"));
  json_decref(j);
  j = json_text("", 0, false, &lossy);
  CHECK(j && !lossy && json_string_length(j) == 0);
  json_decref(j);
}

static bool decodes_to(const char *s, const char *want, size_t want_len) {
  unsigned char *d = NULL;
  size_t n = 0;
  if (b64_decode(s, strlen(s), &d, &n) < 0)
    return false;
  bool ok = n == want_len && !memcmp(d, want, n) && d[n] == '\0';
  free(d);
  return ok;
}

static bool refused(const char *s, size_t len) {
  unsigned char *d = (unsigned char *)"untouched";
  size_t n = 7;
  return b64_decode(s, len, &d, &n) < 0 && n == 7 && !strcmp((char *)d, "untouched");
}

TEST(base64_encodes_rfc4648_vectors) {
  static const char *const vec[][2] = {{"", ""},
                                       {"f", "Zg=="},
                                       {"fo", "Zm8="},
                                       {"foo", "Zm9v"},
                                       {"foob", "Zm9vYg=="},
                                       {"fooba", "Zm9vYmE="},
                                       {"foobar", "Zm9vYmFy"}};
  for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
    size_t n = 99;
    char *e = b64_encode(vec[i][0], strlen(vec[i][0]), &n);
    CHECK_STR(e, vec[i][1]);
    CHECK(n == strlen(vec[i][1]) && b64_encoded_len(strlen(vec[i][0]), B64_STD) == n);
    free(e);
    CHECK(decodes_to(vec[i][1], vec[i][0], strlen(vec[i][0])));
  }
  char *e = b64_encode("", 0, NULL);
  CHECK_STR(e, "");
  free(e);
}

TEST(base64_url_alphabet_is_unpadded) {
  const unsigned char bin[] = {0xfb, 0xff, 0xbf};
  char out[16];
  CHECK(b64_encode_to(out, bin, 3, B64_STD) == 4 && !strcmp(out, "+/+/"));
  CHECK(b64_encode_to(out, bin, 3, B64_URL) == 4 && !strcmp(out, "-_-_"));
  CHECK(b64_encode_to(out, bin, 2, B64_STD) == 4 && !strcmp(out, "+/8="));
  CHECK(b64_encode_to(out, bin, 2, B64_URL) == 3 && !strcmp(out, "-_8"));
  CHECK(b64_encode_to(out, bin, 1, B64_URL) == 2 && !strcmp(out, "-w"));
  CHECK(b64_encode_to(out, bin, 0, B64_URL) == 0 && !strcmp(out, ""));
  for (size_t n = 0; n < 40; n++) {
    CHECK(b64_encoded_len(n, B64_STD) == (n + 2) / 3 * 4);
    CHECK(b64_encoded_len(n, B64_URL) == (n * 8 + 5) / 6);
  }
  for (int c = 1; c < 256; c++) {
    bool url = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_';
    bool std = url ? c != '-' && c != '_' : c == '+' || c == '/';
    CHECK(b64_char_ok((char)c, B64_URL) == url && b64_char_ok((char)c, B64_STD) == std);
  }
  CHECK(!b64_char_ok('\0', B64_URL) && !b64_char_ok('=', B64_STD));
  /* An admin key: 24 random bytes, 32 characters. */
  CHECK(b64_encoded_len(24, B64_URL) == 32);
}

TEST(base64_round_trips_every_byte) {
  unsigned char bin[256];
  for (size_t i = 0; i < sizeof bin; i++)
    bin[i] = (unsigned char)(255 - i);
  for (size_t n = 0; n <= sizeof bin; n += n < 8 ? 1 : 37) {
    char *e = b64_encode(bin, n, NULL);
    unsigned char *d = NULL;
    size_t dl = 0;
    CHECK(e && b64_decode(e, strlen(e), &d, &dl) == 0 && dl == n && !memcmp(d, bin, n));
    free(d);
    /* The same without its padding. */
    size_t el = e ? strlen(e) : 0;
    while (el && e[el - 1] == '=')
      el--;
    CHECK(e && b64_decode(e, el, &d, &dl) == 0 && dl == n && !memcmp(d, bin, n));
    free(d);
    free(e);
  }
}

TEST(base64_decode_leniency_and_refusals) {
  CHECK(decodes_to("aGk", "hi", 2)); /* unpadded (MCP clients) */
  CHECK(decodes_to("aGk=", "hi", 2));
  CHECK(decodes_to("aGk==", "hi", 2)); /* at most two "=" go */
  CHECK(decodes_to("Zh==", "f", 1));   /* stray low bits are dropped */
  CHECK(decodes_to("", "", 0));
  CHECK(decodes_to("==", "", 0));
  CHECK(refused("a b=", 4)); /* whitespace */
  CHECK(refused("aGk\n", 4));
  CHECK(refused("a", 1));     /* 6 bits: no byte */
  CHECK(refused("aGk=a", 5)); /* "=" inside */
  CHECK(refused("Zg===", 5)); /* three "=" */
  CHECK(refused("-_8", 3));   /* the URL alphabet */
  CHECK(refused("aG\0k", 4)); /* NUL */
  CHECK(refused("aGk\xc3\xa9", 5));
}

TEST(times_are_rfc3339_utc_with_milliseconds) {
  char t[TIME_RFC3339_SIZE];
  CHECK(time_rfc3339(0, t) && !strcmp(t, "1970-01-01T00:00:00.000Z"));
  CHECK(time_rfc3339(1, t) && !strcmp(t, "1970-01-01T00:00:00.001Z"));
  CHECK(time_rfc3339(1700000000123, t) && !strcmp(t, "2023-11-14T22:13:20.123Z"));
  CHECK(time_rfc3339(951782400999, t) && !strcmp(t, "2000-02-29T00:00:00.999Z"));
  CHECK(time_rfc3339(253402300799999, t) && !strcmp(t, "9999-12-31T23:59:59.999Z"));
  CHECK(time_rfc3339(INT64_MAX, t) && strlen(t) < sizeof t);
  /* JSON: null for a time not set. */
  json_t *j = json_time(1700000000123);
  CHECK(j && !strcmp(json_string_value(j), "2023-11-14T22:13:20.123Z"));
  json_decref(j);
  CHECK(json_is_null(json_time(0)));
  CHECK(json_is_null(json_time(-1000)));
}

TEST(wait_deadlines_are_normalised) {
  static const int64_t steps[] = {0, 1, 50, 999, 1000, 1001, 2500, 86400000};
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    struct timespec before, after;
    clock_gettime(CLOCK_MONOTONIC, &before);
    struct timespec d = clock_after_ms(CLOCK_MONOTONIC, steps[i]);
    clock_gettime(CLOCK_MONOTONIC, &after);
    CHECK(d.tv_nsec >= 0 && d.tv_nsec < 1000000000);
    int64_t lo = (int64_t)before.tv_sec * 1000000000 + before.tv_nsec + steps[i] * 1000000;
    int64_t hi = (int64_t)after.tv_sec * 1000000000 + after.tv_nsec + steps[i] * 1000000;
    int64_t at = (int64_t)d.tv_sec * 1000000000 + d.tv_nsec;
    CHECK(at >= lo && at <= hi);
  }
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  struct timespec d = clock_after_ms(CLOCK_REALTIME, 100);
  CHECK(d.tv_sec >= now.tv_sec && d.tv_sec <= now.tv_sec + 1);
  int64_t a = mono_ms(), b = mono_ms();
  CHECK(a > 0 && b >= a);
}

/* mkdir_p and proc_stat_fields fail as the rest of fileio.h does: -1 with
 * errno, so a caller's errno names the real cause. */
TEST(fileio_failures_are_minus_one_with_errno) {
  char tmpl[] = "/tmp/husk-test-fileio-XXXXXX";
  CHECK(mkdtemp(tmpl) != NULL);
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/a/b/c", tmpl);
  CHECK(mkdir_p(path, 0700) == 0);
  struct stat st;
  CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
  CHECK(mkdir_p(path, 0700) == 0); /* already there */
  snprintf(path, sizeof path, "%s/file", tmpl);
  int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  CHECK(fd >= 0);
  close(fd);
  snprintf(path, sizeof path, "%s/file/sub", tmpl);
  errno = 0;
  CHECK(mkdir_p(path, 0700) == -1 && errno == ENOTDIR);
  char *longp = malloc(PATH_MAX + 2);
  memset(longp, 'x', PATH_MAX + 1);
  longp[PATH_MAX + 1] = '\0';
  errno = 0;
  CHECK(mkdir_p(longp, 0700) == -1 && errno == ENAMETOOLONG);
  free(longp);
  errno = 0;
  CHECK(mkdir_p("", 0700) == -1 && errno == ENOENT);

  unsigned long long v[23];
  CHECK(proc_stat_fields(0, v, 23) == 0 && v[22] > 0); /* our own starttime */
  errno = 0;
  CHECK(proc_stat_fields(INT32_MAX, v, 23) == -1 && errno == ENOENT && v[22] == 0);

  char cmd[PATH_MAX + 32];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
  CHECK(system(cmd) == 0);
}

TEST(strbuf_builds_text_and_html) {
  struct strbuf b = {0};
  strbuf_printf(&b, "%s=%d;", "n", 42);
  strbuf_html(&b, "<a href=\"x\">Tom & Jerry's</a>");
  char *t = strbuf_take(&b);
  CHECK_STR(t, "n=42;&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&#39;s&lt;/a&gt;");
  free(t);
  /* Long formatted text grows the buffer. */
  struct strbuf c = {0};
  for (int i = 0; i < 1000; i++)
    strbuf_printf(&c, "%04d", i);
  t = strbuf_take(&c);
  CHECK(t && strlen(t) == 4000 && !strncmp(t + 3996, "0999", 4));
  free(t);
}

int main(void) {
  RUN(utf8_sequences);
  RUN(strbuf_builds_text_and_html);
  RUN(utf8_valid_strings);
  RUN(utf8_complete_prefix_cuts_before_a_partial_character);
  RUN(utf8_lossy_replaces_each_bad_byte);
  RUN(json_text_as_the_api_and_mcp_send_bytes);
  RUN(base64_encodes_rfc4648_vectors);
  RUN(base64_url_alphabet_is_unpadded);
  RUN(base64_round_trips_every_byte);
  RUN(base64_decode_leniency_and_refusals);
  RUN(times_are_rfc3339_utc_with_milliseconds);
  RUN(wait_deadlines_are_normalised);
  RUN(fileio_failures_are_minus_one_with_errno);
  return unit_done();
}
