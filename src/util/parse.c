#include "util/parse.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

/* Parse leading decimal digits; returns number of digits consumed, -1 on
 * overflow. */
static int parse_digits(const char *s, uint64_t *out) {
  uint64_t v = 0;
  int n = 0;
  for (; isdigit((unsigned char)s[n]); n++) {
    unsigned d = (unsigned)(s[n] - '0');
    if (v > (UINT64_MAX - d) / 10)
      return -1;
    v = v * 10 + d;
  }
  *out = v;
  return n;
}

int parse_size(const char *s, uint64_t *out, struct husk_err *err) {
  if (!s || !*s)
    return husk_fail(err, EINVAL, "empty size (expected e.g. 256M or 1G)");
  uint64_t v;
  int n = parse_digits(s, &v);
  if (n < 0)
    return husk_fail(err, ERANGE, "size `%s` is too large", s);
  if (n == 0)
    return husk_fail(err, EINVAL, "invalid size `%s` (expected e.g. 256M or 1G)", s);
  const char *u = s + n;
  unsigned shift = 0;
  switch (*u) {
  case '\0':
    break;
  case 'b': case 'B': shift = 0; u++; break;
  case 'k': case 'K': shift = 10; u++; break;
  case 'm': case 'M': shift = 20; u++; break;
  case 'g': case 'G': shift = 30; u++; break;
  case 't': case 'T': shift = 40; u++; break;
  default:
    return husk_fail(err, EINVAL, "invalid size unit in `%s` (use K, M, G or T)", s);
  }
  if (shift && (*u == 'i' || *u == 'I'))
    u++;
  if (shift && (*u == 'b' || *u == 'B'))
    u++;
  if (*u)
    return husk_fail(err, EINVAL, "invalid size `%s` (trailing characters)", s);
  if (shift && v > (UINT64_MAX >> shift))
    return husk_fail(err, ERANGE, "size `%s` is too large", s);
  *out = v << shift;
  return 0;
}

int parse_u64_range(const char *s, uint64_t min, uint64_t max, uint64_t *out, struct husk_err *err) {
  if (!s || !*s)
    return husk_fail(err, EINVAL, "empty number");
  uint64_t v;
  int n = parse_digits(s, &v);
  if (n < 0)
    return husk_fail(err, ERANGE, "number `%s` is too large", s);
  if (n == 0 || s[n])
    return husk_fail(err, EINVAL, "invalid number `%s`", s);
  if (v < min || v > max)
    return husk_fail(err, ERANGE, "number %s is out of range [%llu, %llu]", s,
                      (unsigned long long)min, (unsigned long long)max);
  *out = v;
  return 0;
}

int parse_milli(const char *s, uint64_t min_milli, uint64_t max_milli, uint64_t *out_milli,
                struct husk_err *err) {
  if (!s || !*s)
    return husk_fail(err, EINVAL, "empty number");
  uint64_t whole = 0;
  int n = parse_digits(s, &whole);
  if (n < 0)
    return husk_fail(err, ERANGE, "number `%s` is too large", s);
  const char *p = s + n;
  uint64_t frac = 0;
  int fdigits = 0;
  if (*p == '.') {
    p++;
    while (isdigit((unsigned char)*p)) {
      if (fdigits < 3) {
        frac = frac * 10 + (uint64_t)(*p - '0');
        fdigits++;
      } else if (*p != '0') {
        return husk_fail(err, EINVAL, "`%s` has more precision than 0.001", s);
      }
      p++;
    }
    if (fdigits == 0 && n == 0)
      return husk_fail(err, EINVAL, "invalid number `%s`", s);
  } else if (n == 0) {
    return husk_fail(err, EINVAL, "invalid number `%s`", s);
  }
  if (*p)
    return husk_fail(err, EINVAL, "invalid number `%s`", s);
  while (fdigits < 3) {
    frac *= 10;
    fdigits++;
  }
  if (whole > (UINT64_MAX - frac) / 1000)
    return husk_fail(err, ERANGE, "number `%s` is too large", s);
  uint64_t v = whole * 1000 + frac;
  if (v < min_milli || v > max_milli)
    return husk_fail(err, ERANGE, "`%s` is out of range [%llu.%03llu, %llu.%03llu]", s,
                      (unsigned long long)(min_milli / 1000), (unsigned long long)(min_milli % 1000),
                      (unsigned long long)(max_milli / 1000), (unsigned long long)(max_milli % 1000));
  *out_milli = v;
  return 0;
}

int parse_env_assignment(const char *s, struct husk_err *err) {
  const char *eq = s ? strchr(s, '=') : NULL;
  if (!eq)
    return husk_fail(err, EINVAL, "environment assignment `%s` has no `=`", s ? s : "");
  if (eq == s)
    return husk_fail(err, EINVAL, "environment assignment `%s` has an empty name", s);
  if (!(isalpha((unsigned char)s[0]) || s[0] == '_'))
    return husk_fail(err, EINVAL, "invalid environment variable name in `%s`", s);
  for (const char *p = s; p < eq; p++)
    if (!(isalnum((unsigned char)*p) || *p == '_'))
      return husk_fail(err, EINVAL, "invalid environment variable name in `%s`", s);
  return (int)(eq - s);
}
