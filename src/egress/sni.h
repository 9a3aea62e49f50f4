/* The server name of a TLS ClientHello, read without terminating TLS
 * (tunnel mode and transparent :443).  The hello must fit in the first
 * TLS record (it always does in practice: 16 KiB). */
#ifndef HUSK_EGRESS_SNI_H
#define HUSK_EGRESS_SNI_H

#include <stddef.h>

/* 1: complete hello; `sni` holds the name ("" when the hello has none, or
 * when it carries Encrypted Client Hello, whose outer name is not the
 * destination).  0: need more bytes.  -1: not a TLS ClientHello. */
int egress_sni_peek(const unsigned char *buf, size_t len, char *sni, size_t sni_len);

#endif
