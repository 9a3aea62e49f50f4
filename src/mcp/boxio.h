/* Box file I/O shared by the MCP tools: whole-file writes, bounded reads,
 * and the byte limits of what a tool result may inline. */
#ifndef HUSK_MCP_BOXIO_H
#define HUSK_MCP_BOXIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "box/box.h"
#include "box/files.h"
#include "util/error.h"

/* Output of a command inlined in a result, per stream: past it, the tail
 * is shown with a note and the whole output is kept as a file. */
#define MCP_INLINE_OUTPUT (20 * 1000)
/* What one call may carry of a file's bytes, whatever its encoding
 * (text, or base64 decoded): sandbox_write_file's content, store_file's
 * content, run_code's input files together.  Base64 text of it is up to
 * MCP_CONTENT_B64_MAX characters. */
#define MCP_CONTENT_MAX (3 * 1024 * 1024)
#define MCP_CONTENT_B64_MAX ((MCP_CONTENT_MAX + 2) / 3 * 4)
/* A non-image file inlined as text. */
#define MCP_INLINE_TEXT (64 * 1024)
/* One image returned as image content, and all images of one result. */
#define MCP_IMAGE_MAX (5 * 1024 * 1024)
#define MCP_IMAGES_TOTAL (10 * 1024 * 1024)

/* Borrow a box's filesystem (husk_box_open_fs) as a struct husk_fs; close b->fs. */
int mcp_box_fs(struct husk_mgr *m, const char *tenant, const char *id, struct husk_fs *b,
               struct husk_err *err);
/* Write `len` bytes as the whole file `path` (parents created). */
int mcp_box_write(const struct husk_fs *b, const char *path, const void *data, size_t len,
                  struct husk_err *err);
/* Write `len` bytes into the file `path` as it is: at byte `offset`, or
 * at its end when `offset` < 0 (a missing file is made, parents too, when
 * appending or at offset 0); its size afterwards to *size. */
int mcp_box_write_at(const struct husk_fs *b, const char *path, const void *data, size_t len,
                     int64_t offset, uint64_t *size, struct husk_err *err);
/* Copy the first `len` bytes of `src` (fewer if it is shorter) into the
 * file `path`: what it gains meanwhile (a process the command left behind
 * may still write to its output) is not copied. */
int mcp_box_copy_in(const struct husk_fs *b, const char *path, int src, uint64_t len,
                    struct husk_err *err);
/* Read at most `max` bytes at `off` of `fd` (pread).  *out malloc'd. */
int mcp_pread_max(int fd, uint64_t off, size_t max, char **out, size_t *len, struct husk_err *err);

#endif
