#!/bin/bash
# The A/B behind an image template's root: what mounting and detaching a
# box's root costs when the template is kept as its layers (husk's way), as
# one flattened directory, or as an erofs image (mounted per box, or once
# and cloned), next to the default template's bind of /usr; and what
# flattening to erofs would add to an import (mkfs.erofs against copying
# the same tree).  Results: docs/performance.md, "Templates".
#
#   bench/rootmount.sh [ROUNDS]     (default 300; as root)
# The tree is a copy of the host's /usr/bin as the bottom layer, with four
# small layers above it, as a five-layer image would be.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-300}
CC=${CC:-cc}
command -v mkfs.erofs >/dev/null || { echo "rootmount: mkfs.erofs (erofs-utils) is needed" >&2; exit 1; }
TMP=$(mktemp -d /var/tmp/husk-rootmount.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
"$CC" -std=c17 -O2 -Wall -Wextra -o "$TMP/rootmount" bench/rootmount.c
mkdir -p "$TMP"/L{0,1,2,3,4} "$TMP/flat"
cp -a /usr/bin "$TMP/L0/"
for i in 1 2 3 4; do
  mkdir -p "$TMP/L$i/etc/layer$i" && echo "$i" >"$TMP/L$i/etc/layer$i/file"
done
for i in 0 1 2 3 4; do cp -a "$TMP/L$i/." "$TMP/flat/"; done
echo "# tree: $(du -sh "$TMP/flat" | cut -f1), $(find "$TMP/flat" | wc -l) entries"
sync
t0=$(date +%s%N)
mkfs.erofs --quiet "$TMP/img.erofs" "$TMP/flat" && sync
t1=$(date +%s%N)
cp -a "$TMP/flat" "$TMP/copy" && sync
t2=$(date +%s%N)
rm -rf "$TMP/copy"
echo "# flattening: mkfs.erofs $(((t1 - t0) / 1000000)) ms, cp -a of the same tree $(((t2 - t1) / 1000000)) ms"
"$TMP/rootmount" "$ROUNDS" "$TMP/L4:$TMP/L3:$TMP/L2:$TMP/L1:$TMP/L0" "$TMP/flat" "$TMP/img.erofs"
