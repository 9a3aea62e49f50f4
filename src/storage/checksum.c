/* The checksums an S3 client may ask the store to check (CRC-32, CRC-32C,
 * CRC-64/NVME, SHA-1, SHA-256: x-amz-checksum-*, in standard base64:
 * util/base64.h).  The writer (writer.c) runs them over a body as it
 * arrives. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include <zlib.h>

#include "storage/store_internal.h"

/* CRC-32C (Castagnoli), table-driven.  Neither libcrypto nor zlib has it,
 * and the x-amz-checksum-crc32c header is only worth a 256-entry table. */
static uint32_t crc32c_table[256];
/* CRC-64/NVME (poly 0xAD93D23594C93659, reflected, init and xorout all
 * ones): the default checksum of newer AWS SDKs.  No Debian 12 library
 * has it (ISA-L 2.30 lacks crc64_rocksoft), so a table, like CRC-32C's. */
static uint64_t crc64nvme_table[256];

/* Both tables, built once, on first use. */
static pthread_once_t crc_tables_once = PTHREAD_ONCE_INIT;
static void crc_tables_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    crc32c_table[i] = c;
  }
  for (uint64_t i = 0; i < 256; i++) {
    uint64_t c = i;
    for (int k = 0; k < 8; k++)
      c = c & 1 ? (c >> 1) ^ 0x9A6C9329AC4BC9B5ull : c >> 1;
    crc64nvme_table[i] = c;
  }
}

uint32_t store_crc32_update(uint32_t crc, const void *buf, size_t n) {
  return (uint32_t)crc32_z(crc, buf, n);
}

uint32_t store_crc32c_update(uint32_t crc, const void *buf, size_t n) {
  pthread_once(&crc_tables_once, crc_tables_init);
  const unsigned char *p = buf;
  crc = ~crc;
  while (n--)
    crc = crc32c_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint64_t store_crc64nvme_update(uint64_t crc, const void *buf, size_t n) {
  pthread_once(&crc_tables_once, crc_tables_init);
  const unsigned char *p = buf;
  crc = ~crc;
  while (n--)
    crc = crc64nvme_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

/* For tests and callers that check a whole buffer. */
uint64_t store_crc64nvme(const void *buf, size_t n) { return store_crc64nvme_update(0, buf, n); }

enum store_checksum store_checksum_parse(const char *n) {
  if (!n)
    return CK_NONE;
  if (!strcasecmp(n, "crc32"))
    return CK_CRC32;
  if (!strcasecmp(n, "crc32c"))
    return CK_CRC32C;
  if (!strcasecmp(n, "sha1"))
    return CK_SHA1;
  if (!strcasecmp(n, "sha256"))
    return CK_SHA256;
  if (!strcasecmp(n, "crc64nvme"))
    return CK_CRC64NVME;
  return CK_NONE;
}

const char *store_checksum_name(enum store_checksum ck) {
  switch (ck) {
  case CK_CRC32: return "crc32";
  case CK_CRC32C: return "crc32c";
  case CK_SHA1: return "sha1";
  case CK_SHA256: return "sha256";
  case CK_CRC64NVME: return "crc64nvme";
  case CK_NONE: break;
  }
  return "";
}

