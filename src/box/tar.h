/* Directory trees of a box as tar streams (upload and download for
 * `husk serve`).
 *
 * libarchive is used only for the format: headers and data blocks to and
 * from a stream through callbacks.  Every filesystem access is ours, through
 * fds (src/box/files.c), never archive_write_disk: an archive is data from
 * the outside world and the tree is data from the box, and neither gets to
 * choose a path on the host. */
#ifndef HUSK_BOX_TAR_H
#define HUSK_BOX_TAR_H

#include <stddef.h>
#include <sys/types.h>

#include "box/files.h" /* husk_tar_read, husk_tar_write (include/husk/files.h) */
#include "util/error.h"

#endif
