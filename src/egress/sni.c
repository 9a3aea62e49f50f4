/* ClientHello server-name extraction (see sni.h).  Every length is checked
 * against the enclosing one before use. */
#include "egress/sni.h"

#include <stdint.h>
#include <string.h>

static unsigned rd16(const unsigned char *p) { return (unsigned)p[0] << 8 | p[1]; }

int egress_sni_peek(const unsigned char *buf, size_t len, char *sni, size_t sni_len) {
  sni[0] = '\0';
  if (len < 5)
    return len > 0 && buf[0] != 22 ? -1 : 0;
  if (buf[0] != 22 || buf[1] != 3)
    return -1;
  size_t rec = rd16(buf + 3);
  if (rec < 4 || rec > 16384)
    return -1;
  if (len < 5 + rec)
    return 0;
  const unsigned char *p = buf + 5, *end = buf + 5 + rec;
  if (p[0] != 1)
    return -1; /* not a ClientHello */
  size_t hl = (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
  p += 4;
  if (hl > (size_t)(end - p))
    return -1; /* hello split over records: refused */
  end = p + hl;
  if (end - p < 34)
    return -1;
  p += 34; /* version, random */
  if (end - p < 1 || p[0] > end - p - 1)
    return -1;
  p += 1 + p[0]; /* session id */
  if (end - p < 2 || rd16(p) > (size_t)(end - p - 2))
    return -1;
  p += 2 + rd16(p); /* cipher suites */
  if (end - p < 1 || p[0] > end - p - 1)
    return -1;
  p += 1 + p[0]; /* compression */
  if (end - p < 2)
    return 1; /* no extensions: no SNI */
  size_t el = rd16(p);
  p += 2;
  if (el > (size_t)(end - p))
    return -1;
  end = p + el;
  char found[256] = "";
  int ech = 0;
  while (end - p >= 4) {
    unsigned type = rd16(p), l = rd16(p + 2);
    p += 4;
    if (l > (size_t)(end - p))
      return -1;
    if (type == 0xfe0d)
      ech = 1;
    if (type == 0 && l >= 5) {
      const unsigned char *q = p;
      size_t list = rd16(q);
      if (list + 2 > l || q[2] != 0)
        return -1;
      size_t nl = rd16(q + 3);
      if (nl + 5 > l || nl == 0 || nl >= sizeof found)
        return -1;
      for (size_t i = 0; i < nl; i++)
        if (q[5 + i] < 0x21 || q[5 + i] > 0x7e)
          return -1;
      memcpy(found, q + 5, nl);
      found[nl] = '\0';
    }
    p += l;
  }
  if (!ech && strlen(found) < sni_len)
    strcpy(sni, found);
  return 1;
}
