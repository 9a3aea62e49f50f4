#!/bin/bash
# The Debian packages as a user gets them: built with dpkg-buildpackage
# from a copy of the tree (the packages land beside the copy, in scratch
# space, not beside the tree), the three .deb files holding what each
# must, unpacked into a scratch root (dpkg-deb -x: the real system is not
# touched), the unpacked husk running a box, and the man pages rendered.
# Then each command's --help against its man page, both ways: every
# option the page lists is in --help, and every option --help names is on
# the page (--help and --version themselves are run instead).
. "$(dirname "$0")/../lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VERSION=$(sed -n 's/^#define HUSK_VERSION "\(.*\)"/\1/p' "$ROOT/include/husk/base.h")
SRC=$T_SCRATCH/src
D=$T_SCRATCH/root

# ---- build ----------------------------------------------------------------------
if ! command -v dpkg-buildpackage >/dev/null || ! command -v dh >/dev/null; then
  not_ok "dpkg-buildpackage and debhelper are installed (scripts/deps.sh deb)"
  finish
  exit 1
fi
MA=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
ARCH=$(dpkg-architecture -qDEB_HOST_ARCH)
# The working tree as it is (uncommitted changes included), without build
# trees or other ignored files.
mkdir -p "$SRC"
if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "$ROOT" ls-files -z -co --exclude-standard |
    tar -C "$ROOT" --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -C "$SRC" -xf -
else
  tar -C "$ROOT" --exclude=./build --exclude='./build-*' --exclude=./var \
    --exclude=node_modules -cf - . | tar -C "$SRC" -xf -
fi
# A make above (make test) must not hand its jobserver to this build.
if (cd "$SRC" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL DEB_BUILD_OPTIONS="parallel=2 nocheck" \
  dpkg-buildpackage -us -uc -b) >"$T_SCRATCH/build.log" 2>&1; then
  ok "dpkg-buildpackage -us -uc -b"
else
  not_ok "dpkg-buildpackage -us -uc -b"
  sed 's/^/# /' "$T_SCRATCH/build.log" | tail -30
  finish
  exit 1
fi
deb() { echo "$T_SCRATCH/${1}_${VERSION}-1_$ARCH.deb"; }
for p in husk libhusk0 libhusk-dev; do
  check "$p: $(basename "$(deb $p)") was built" test -f "$(deb $p)"
done

# ---- what each package holds ------------------------------------------------------
# has PACKAGE PATH...: the package's listing (dpkg-deb -c) holds each path.
has() {
  local p=$1 f
  shift
  dpkg-deb -c "$(deb "$p")" | awk '{print $6}' | sed 's|^\./|/|' >"$T_SCRATCH/$p.list"
  for f in "$@"; do
    check "$p holds $f" grep -qx -- "$f" "$T_SCRATCH/$p.list"
  done
}
has husk /usr/bin/husk /usr/lib/husk/husk-serve /usr/lib/husk/husk-mcp /usr/lib/husk/husk \
  /usr/share/man/man1/husk.1.gz /usr/share/man/man1/husk-run.1.gz \
  /usr/share/man/man1/husk-serve.1.gz /usr/share/man/man1/husk-mcp.1.gz \
  /usr/share/man/man1/husk-template.1.gz
check "husk holds the systemd unit" grep -Eqx '(/usr)?/lib/systemd/system/husk.service' \
  "$T_SCRATCH/husk.list"
has libhusk0 "/usr/lib/$MA/libhusk.so.$VERSION" "/usr/lib/$MA/libhusk.so.${VERSION%%.*}"
HEADERS=()
for h in "$ROOT"/include/husk/*.h; do HEADERS+=("/usr/include/husk/$(basename "$h")"); done
has libhusk-dev "${HEADERS[@]}" "/usr/lib/$MA/libhusk.so" "/usr/lib/$MA/libhusk.a" \
  "/usr/lib/$MA/pkgconfig/husk.pc" /usr/share/doc/libhusk-dev/examples/boxes.c
# The commands link the core statically: the library is only in libhusk*.
check "husk holds no libhusk" bash -c "! grep -q libhusk '$T_SCRATCH/husk.list'"
check "libhusk0 holds no header, no .a, no unversioned .so" \
  bash -c "! grep -Eq '\\.h\$|\\.a\$|\\.so\$' '$T_SCRATCH/libhusk0.list'"
DEPENDS=$(dpkg-deb -f "$(deb husk)" Depends)
check "husk depends on nftables and iproute2 (network mode egress)" \
  bash -c "grep -qw nftables <<<'$DEPENDS' && grep -qw iproute2 <<<'$DEPENDS'"
check "husk depends on the libraries it links (shlibs: libseccomp)" grep -q libseccomp <<<"$DEPENDS"
check "libhusk-dev depends on libhusk0 of its version" \
  grep -q "libhusk0 (= $VERSION-1)" <<<"$(dpkg-deb -f "$(deb libhusk-dev)" Depends)"
# The unit is enabled on install, never started by it.
dpkg-deb -e "$(deb husk)" "$T_SCRATCH/control"
check "postinst enables husk.service" grep -q "deb-systemd-helper enable 'husk.service'" \
  "$T_SCRATCH/control/postinst"
check "postinst does not start husk.service (only try-restart on upgrade)" \
  bash -c "! grep -Eq 'deb-systemd-invoke (start|restart)' '$T_SCRATCH/control/postinst'"

# ---- unpacked into a scratch root ---------------------------------------------------
for p in husk libhusk0 libhusk-dev; do
  dpkg-deb -x "$(deb "$p")" "$D"
done
expect_eq "installed husk --version" "$("$D/usr/bin/husk" --version 2>&1)" "husk $VERSION"
expect_eq "installed husk-serve --version" "$("$D/usr/lib/husk/husk-serve" --version 2>&1)" \
  "husk $VERSION"
expect_eq "installed husk-mcp --version" "$("$D/usr/lib/husk/husk-mcp" --version 2>&1)" \
  "husk $VERSION"
check "the commands were built for LIBEXECDIR /usr/lib/husk" \
  grep -aq '/usr/lib/husk' "$D/usr/bin/husk"
check "every library the commands need is on this host" bash -c \
  "! ldd '$D/usr/bin/husk' '$D/usr/lib/husk/husk-serve' '$D/usr/lib/husk/husk-mcp' | grep -q 'not found'"
OUT=$("$D/usr/bin/husk" run -- echo ok 2>"$T_SCRATCH/run.err" </dev/null)
RC=$?
expect_eq "installed husk run -- echo ok" "$RC/$OUT" "0/ok"
[ "$RC" = 0 ] || sed 's/^/# /' "$T_SCRATCH/run.err" | head -5
export PKG_CONFIG_SYSROOT_DIR=$D PKG_CONFIG_PATH=$D/usr/lib/$MA/pkgconfig
if cc -std=c17 -Wall -Wextra -Werror $(pkg-config --cflags husk) "$ROOT/examples/boxes.c" \
  -o "$T_SCRATCH/boxes" $(pkg-config --libs husk) 2>"$T_SCRATCH/cc.log"; then
  ok "examples/boxes.c builds against libhusk-dev (pkg-config husk)"
else
  not_ok "examples/boxes.c builds against libhusk-dev ($(head -c 300 "$T_SCRATCH/cc.log"))"
fi
check "it loads libhusk.so.${VERSION%%.*} of libhusk0" bash -c \
  "LD_LIBRARY_PATH='$D/usr/lib/$MA' ldd '$T_SCRATCH/boxes' | grep -q 'libhusk.so.${VERSION%%.*} => $D'"
for m in husk husk-run husk-serve husk-mcp husk-template; do
  f=$D/usr/share/man/man1/$m.1.gz
  if MANWIDTH=80 man --warnings -l "$f" >"$T_SCRATCH/man.out" 2>"$T_SCRATCH/man.err" &&
    [ ! -s "$T_SCRATCH/man.err" ] && grep -q NAME "$T_SCRATCH/man.out"; then
    ok "man -l renders $m.1 without warnings"
  else
    not_ok "man -l renders $m.1 without warnings ($(head -c 300 "$T_SCRATCH/man.err"))"
  fi
done

# ---- --help, --version and the man pages ---------------------------------------------
# The long options listed in a page's OPTIONS section (each .TP item's tag).
man_options() {
  awk '/^\.SH OPTIONS/ {o = 1; next} /^\.SH/ {o = 0} o && prev == ".TP" {print} {prev = $0}' "$1" |
    sed 's/\\-/-/g' | grep -o -- '--[a-z][a-z0-9-]*' | sort -u
}
for c in run serve mcp template snapshot; do
  run_husk "$c" --help
  expect_eq "husk $c --help: exit 0, nothing on stderr" "$RC/$ERR" "0/"
  HELP=$(grep -o -- '--[a-z][a-z0-9-]*' <<<"$OUT" | grep -vx -- '--help\|--version' | sort -u)
  PAGE_ALL=$(man_options "$ROOT/man/husk-$c.1")
  PAGE=$(grep -vx -- '--help\|--version' <<<"$PAGE_ALL")
  check "husk-$c.1 lists options" [ -n "$PAGE" ]
  check "husk-$c.1 lists --help and --version" \
    bash -c 'grep -qx -- --help <<<"$1" && grep -qx -- --version <<<"$1"' _ "$PAGE_ALL"
  expect_eq "husk-$c.1 lists every option of husk $c --help" \
    "$(comm -23 <(echo "$HELP") <(echo "$PAGE") | tr '\n' ' ')" ""
  expect_eq "husk $c --help names every option of husk-$c.1" \
    "$(comm -13 <(echo "$HELP") <(echo "$PAGE") | tr '\n' ' ')" ""
  run_husk "$c" --version
  expect_eq "husk $c --version" "$RC/$OUT/$ERR" "0/husk $VERSION/"
done
for a in --help help -h; do
  run_husk "$a"
  expect_eq "husk $a: exit 0, nothing on stderr" "$RC/$ERR" "0/"
  MISSING=""
  for c in run serve mcp template version help; do
    grep -q "^  $c\b" <<<"$OUT" || MISSING="$MISSING $c"
  done
  expect_eq "husk $a names each command of husk.1" "$MISSING" ""
done
check "husk.1 lists the commands run, serve, mcp, version, help" bash -c "
  for c in run serve mcp template version help; do
    awk '/^\.SH COMMANDS/ {o = 1; next} /^\.SH/ {o = 0} o' '$ROOT/man/husk.1' | grep -qx \".B \$c\" || exit 1
  done"
MISSING=""
for f in "$ROOT"/man/*.1; do
  p=$(basename "$f" .1)
  grep -F 'the man pages ' "$ROOT/README.md" | grep -qF "$p(1)" || MISSING="$MISSING $p"
done
expect_eq "README's list of the husk package's man pages names every page of man/" "$MISSING" ""
run_husk --version
expect_eq "husk --version" "$RC/$OUT/$ERR" "0/husk $VERSION/"
finish
