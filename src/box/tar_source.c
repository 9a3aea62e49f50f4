/* Data extents and hardlink tables of the tar writers (tar_source.h). */
#define _GNU_SOURCE
#include "box/tar_source.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tar_regions_of(struct tar_regions *rs, int fd, const struct stat *st, size_t max) {
  rs->n = 0;
  int64_t size = st->st_size;
  bool maybe_sparse = (int64_t)st->st_blocks * 512 < size;
  for (int64_t pos = 0; pos < size;) {
    int64_t d = maybe_sparse ? lseek(fd, pos, SEEK_DATA) : pos;
    if (d < 0) {
      if (errno == ENXIO)
        break;                       /* nothing but a hole from pos on */
      d = pos, maybe_sparse = false; /* no SEEK_DATA: all data */
    }
    if (d >= size)
      break;
    int64_t h = maybe_sparse ? lseek(fd, d, SEEK_HOLE) : size;
    if (h < 0 || h > size)
      h = size;
    if (rs->n == max)
      return 1;
    if (rs->n == rs->cap) {
      size_t nc = rs->cap ? rs->cap * 2 : 16;
      struct tar_region *r = realloc(rs->r, nc * sizeof *r);
      if (!r) {
        errno = ENOMEM;
        return -1;
      }
      rs->r = r;
      rs->cap = nc;
    }
    rs->r[rs->n++] = (struct tar_region){d, h - d};
    pos = h;
  }
  return 0;
}

void tar_regions_free(struct tar_regions *rs) {
  free(rs->r);
  *rs = (struct tar_regions){0};
}

static size_t link_hash(dev_t dev, ino_t ino) {
  uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ULL ^ (uint64_t)dev;
  return (size_t)(h ^ (h >> 29));
}

const char *tar_links_find(const struct tar_links *l, const struct stat *st) {
  if (!l->cap)
    return NULL;
  for (size_t j = link_hash(st->st_dev, st->st_ino) & (l->cap - 1); l->slots[j].path;
       j = (j + 1) & (l->cap - 1))
    if (l->slots[j].dev == st->st_dev && l->slots[j].ino == st->st_ino)
      return l->slots[j].path;
  return NULL;
}

int tar_links_add(struct tar_links *l, const struct stat *st, const char *name) {
  if (l->n * 2 >= l->cap) {
    size_t nc = l->cap ? l->cap * 2 : 256;
    struct tar_link_slot *n = calloc(nc, sizeof *n);
    if (!n) {
      errno = ENOMEM;
      return -1;
    }
    for (size_t i = 0; i < l->cap; i++) {
      if (!l->slots[i].path)
        continue;
      size_t j = link_hash(l->slots[i].dev, l->slots[i].ino) & (nc - 1);
      while (n[j].path)
        j = (j + 1) & (nc - 1);
      n[j] = l->slots[i];
    }
    free(l->slots);
    l->slots = n;
    l->cap = nc;
  }
  size_t j = link_hash(st->st_dev, st->st_ino) & (l->cap - 1);
  while (l->slots[j].path)
    j = (j + 1) & (l->cap - 1);
  if (!(l->slots[j].path = strdup(name))) {
    errno = ENOMEM;
    return -1;
  }
  l->slots[j].dev = st->st_dev;
  l->slots[j].ino = st->st_ino;
  l->n++;
  return 0;
}

void tar_links_free(struct tar_links *l) {
  for (size_t i = 0; i < l->cap; i++)
    free(l->slots[i].path);
  free(l->slots);
  *l = (struct tar_links){0};
}
