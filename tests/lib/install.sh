#!/bin/bash
# libhusk as a user gets it: `make install` into a scratch root, only the
# husk_ API exported (shared and static), the example program compiled
# against the installed headers and library through pkg-config, both ways,
# and run: it creates a box, runs a command in it, moves files, deletes it
# and runs a one-shot box, leaving nothing behind.
. "$(dirname "$0")/../lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
D=$T_SCRATCH/root
# The default PREFIX (/usr/local): the build tree's objects were compiled
# for it, so nothing is rebuilt.
P=/usr/local
if make -C "$ROOT" --no-print-directory -s install BUILD="$BUILD" DESTDIR="$D" \
  >"$T_SCRATCH/install.log" 2>&1; then
  ok "make install DESTDIR=..."
else
  not_ok "make install DESTDIR=..."
  sed 's/^/# /' "$T_SCRATCH/install.log" | tail -20
  finish
  exit 1
fi
for f in bin/husk lib/husk/husk-serve lib/husk/husk-mcp lib/husk/husk lib/libhusk.a \
  lib/libhusk.so include/husk/husk.h lib/pkgconfig/husk.pc; do
  check "installed: $P/$f" test -e "$D$P/$f" -o -L "$D$P/$f"
done
SONAME=$(objdump -p "$D$P/lib/libhusk.so" | awk '$1 == "SONAME" {print $2}')
check "libhusk.so has a soname with the major version ($SONAME)" test -e "$D$P/lib/$SONAME"
check "each public header compiles on its own" bash -c '
  for h in "$1"/usr/local/include/husk/*.h; do
    printf "#include <husk/%s>\nint main(void) { return 0; }\n" "$(basename "$h")" |
      cc -std=c17 -Wall -Wextra -Werror -I"$1/usr/local/include" -x c - -o /dev/null || exit 1
  done' _ "$D"
# Nothing but the API leaves the library: no internal name can collide
# with a program's own.
FOREIGN=$(nm -D --defined-only "$D$P/lib/libhusk.so" | awk '{print $3}' | grep -v '^husk_')
expect_eq "libhusk.so exports only husk_ symbols" "$FOREIGN" ""
FOREIGN=$(nm -g --defined-only "$D$P/lib/libhusk.a" | awk 'NF == 3 {print $3}' | grep -v '^husk_')
expect_eq "libhusk.a defines only husk_ global symbols" "$FOREIGN" ""
N_API=$(nm -D --defined-only "$D$P/lib/libhusk.so" | grep -c ' T husk_')
check "the API is there ($N_API functions)" [ "$N_API" -ge 40 ]
# A program defining names the library uses inside links with either.
cat >"$T_SCRATCH/collide.c" <<'C'
#include <husk/husk.h>
int write_all(void) { return 7; }
int strbuf_add(void) { return 8; }
int main(void) { return husk_version()[0] == '0' && write_all() == 7 && strbuf_add() == 8 ? 0 : 1; }
C
export PKG_CONFIG_SYSROOT_DIR=$D PKG_CONFIG_PATH=$D$P/lib/pkgconfig
check "pkg-config knows husk $(pkg-config --modversion husk 2>/dev/null)" pkg-config --exists husk
CF=$(pkg-config --cflags husk)
# libhusk.a linked in, the libraries it needs (husk.pc's Requires.private)
# as the system has them.
STATIC="$(pkg-config --libs-only-L husk) -Wl,-Bstatic -lhusk -Wl,-Bdynamic
  $(pkg-config --libs $(pkg-config --print-requires-private husk)) -lpthread -lm"
if cc -std=c17 $CF "$T_SCRATCH/collide.c" -o "$T_SCRATCH/collide" $STATIC 2>"$T_SCRATCH/cc.log"; then
  check "a program with its own write_all and strbuf_add links libhusk.a and runs" "$T_SCRATCH/collide"
else
  not_ok "a program with its own write_all and strbuf_add links libhusk.a ($(head -c 300 "$T_SCRATCH/cc.log"))"
fi
if cc -std=c17 -Wall -Wextra -Werror $CF "$ROOT/examples/boxes.c" -o "$T_SCRATCH/boxes" \
  $(pkg-config --libs husk) 2>"$T_SCRATCH/cc.log"; then
  ok "examples/boxes.c builds against the shared library (pkg-config --cflags --libs husk)"
else
  not_ok "examples/boxes.c builds against the shared library ($(head -c 300 "$T_SCRATCH/cc.log"))"
fi
if cc -std=c17 $CF "$ROOT/examples/boxes.c" -o "$T_SCRATCH/boxes-static" $STATIC \
  2>"$T_SCRATCH/cc.log"; then
  ok "examples/boxes.c builds against the static library"
else
  not_ok "examples/boxes.c builds against the static library ($(head -c 300 "$T_SCRATCH/cc.log"))"
fi
SOMAJOR=${SONAME##*.so.}
check "the shared build loads libhusk.so.$SOMAJOR" bash -c \
  "LD_LIBRARY_PATH='$D$P/lib' ldd '$T_SCRATCH/boxes' | grep -q 'libhusk.so.$SOMAJOR => $D'"
# Cgroups of a data directory's boxes: box-<FNV-1a of its real path>-<id>.
cg_of() {
  local p
  p=$(python3 -c '
import os, sys
h = 2166136261
for c in os.path.realpath(sys.argv[1]).encode():
    h = ((h ^ c) * 16777619) & 0xffffffff
print("box-%08x-" % h)' "$1")
  find /sys/fs/cgroup -maxdepth 4 -type d -name "$p*" -path '*husk*' 2>/dev/null
}
gone() { [ -z "$(cg_of "$1")" ]; }
wait_for() { # SECONDS COMMAND...
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    [ $SECONDS -ge $end ] && return 1
    sleep 0.2
  done
}
# An image for the example's template: busybox, and a passwd naming uid 0.
IMG=""
if [ -x /bin/busybox ]; then
  mkdir -p "$T_SCRATCH/img/bin" "$T_SCRATCH/img/etc"
  cp /bin/busybox "$T_SCRATCH/img/bin/busybox"
  for c in sh id; do ln -sf busybox "$T_SCRATCH/img/bin/$c"; done
  printf 'root:x:0:0:root:/root:/bin/sh\n' >"$T_SCRATCH/img/etc/passwd"
  printf 'root:x:0:\n' >"$T_SCRATCH/img/etc/group"
  python3 "$ROOT/tests/template/mkimage.py" "$T_SCRATCH/img.tar" --layer "$T_SCRATCH/img" && IMG=$T_SCRATCH/img.tar
fi
check "an image for the example's template (busybox: scripts/deps.sh test)" [ -n "$IMG" ]
run_example() { # NAME BINARY
  local data=$T_SCRATCH/data-$1
  LD_LIBRARY_PATH=$D$P/lib HUSK_BINARY=$D$P/bin/husk "$2" "$data" $IMG >"$T_SCRATCH/$1.out" \
    2>"$T_SCRATCH/$1.err" &
  local pid=$!
  wait "$pid"
  local rc=$?
  expect_eq "$1: the example exits 0 ($(tr '\n' ' ' <"$T_SCRATCH/$1.err" | head -c 300))" "$rc" 0
  check "$1: the box ran the script, its output streamed back" grep -q '^line 3$' "$T_SCRATCH/$1.out"
  check "$1: the file the script wrote was read back" grep -q '^result.txt: done$' "$T_SCRATCH/$1.out"
  check "$1: /workspace was listed" grep -q '/workspace/count.sh' "$T_SCRATCH/$1.out"
  check "$1: the one-shot box ran as the box user" grep -q '^one-shot: 1000$' "$T_SCRATCH/$1.out"
  check "$1: an image was imported as a template (husk_template_import)" \
    grep -q '^template example-image (tpl_' "$T_SCRATCH/$1.out"
  check "$1: a box of it ran as the image's root" grep -q '^uid=0(root) gid=0(root)' "$T_SCRATCH/$1.out"
  check "$1: a template was built from it (husk_template_build), its output streamed" \
    bash -c 'grep -q "^build: step 2: RUN" "$1" && grep -q "^template example-built (tpl_.*) built" "$1"' _ "$T_SCRATCH/$1.out"
  check "$1: the template was deleted with its layers" \
    [ -z "$(ls -A "$data/templates/layers" 2>/dev/null)" ]
  check "$1: the deleted box's cgroups are gone" wait_for 30 gone "$data"
  check "$1: the one-shot box's cgroup is gone" \
    [ -z "$(find /sys/fs/cgroup -maxdepth 4 -type d -name "run-$pid-*" 2>/dev/null)" ]
}
run_example shared "$T_SCRATCH/boxes"
[ -x "$T_SCRATCH/boxes-static" ] && run_example static "$T_SCRATCH/boxes-static"
finish
