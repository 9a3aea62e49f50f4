/* What the two tar writers (tar.c: a directory of a box; snapshot_archive.c:
 * a box's writable state) take from the files they archive: the data
 * extents of a (maybe sparse) file, and the table of inodes already in the
 * archive, so that a second name of one is written as a hardlink. */
#ifndef HUSK_BOX_TAR_SOURCE_H
#define HUSK_BOX_TAR_SOURCE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Data extents of one file: [off, off + len) each, in order. */
struct tar_region {
  int64_t off, len;
};
struct tar_regions {
  struct tar_region *r;
  size_t n, cap;
};

/* The data extents of fd (st: its fstat) up to st->st_size, found with
 * SEEK_DATA/SEEK_HOLE when its blocks say it has holes (everything is data
 * where the filesystem cannot tell).  n = 0 for an empty or all-hole file.
 * Returns 0, 1 when there are more than `max` extents, -1 with errno
 * (ENOMEM). */
int tar_regions_of(struct tar_regions *rs, int fd, const struct stat *st, size_t max);
void tar_regions_free(struct tar_regions *rs);

/* Inodes (dev, ino) already archived, with the archive name of their first
 * copy. */
struct tar_link_slot {
  dev_t dev;
  ino_t ino;
  char *path; /* NULL: an empty slot */
};
struct tar_links {
  struct tar_link_slot *slots; /* open addressing, a power-of-two size */
  size_t n, cap;
};

/* The archive name of st's inode, or NULL when it is not archived yet. */
const char *tar_links_find(const struct tar_links *l, const struct stat *st);
/* Remember `name` for st's inode (not already there).  -1 with errno. */
int tar_links_add(struct tar_links *l, const struct stat *st, const char *name);
void tar_links_free(struct tar_links *l);

#endif
