#!/bin/sh
# Install the Debian packages husk needs that are missing on this machine.
#   scripts/deps.sh build   what `make` needs
#   scripts/deps.sh test    what `make test` needs in addition
#   scripts/deps.sh bench   what `make bench` needs in addition
#   scripts/deps.sh deb     what `make deb` needs in addition (debian/)
# Each package is listed with why in docs/dependencies.md.
set -eu

build="gcc libc6-dev make pkg-config libseccomp-dev libjansson-dev libsqlite3-dev libssl-dev libmicrohttpd-dev libarchive-dev curl jq"
# MCP (branch mcp): husk mcp --server forwards with libcurl.
build="$build libcurl4-openssl-dev"
test="clang python3 iproute2 procps curl"
# MCP suites (branch mcp): matplotlib for charts in the box; npm installs the
# pinned MCP clients (tests/mcp/package-lock.json), which bring their own Node 22.
# (An npm already installed, e.g. NodeSource's nodejs, is used as is.)
test="$test python3-matplotlib"
command -v npm >/dev/null 2>&1 || test="$test nodejs npm"
# Storage plane (issue 6): XML bodies (expat), CRC32 (zlib), the external
# store client (libcurl); the real S3 clients the tests drive.
build="$build libexpat1-dev zlib1g-dev"
test="$test awscli s3cmd rclone"
bench="bubblewrap runc util-linux hyperfine"
# The Debian packages (make deb, tests/pkg/deb.sh): dpkg-buildpackage and
# the debhelper sequence (no fakeroot: debian/control says
# Rules-Requires-Root: no); man-db renders the man pages in the tests.
deb="dpkg-dev debhelper man-db"
test="$test $deb"
# issue 7: network mode egress runs nft and ip; its tests make a test CA
# (openssl) and capture packets (tcpdump).
build="$build nftables iproute2"
test="$test openssl tcpdump"

want=""
for set in "$@"; do
  case "$set" in
    build) want="$want $build" ;;
    test) want="$want $build $test" ;;
    bench) want="$want $build $bench" ;;
    deb) want="$want $build $deb" ;;
    *) echo "deps.sh: unknown set '$set'" >&2; exit 2 ;;
  esac
done

missing=""
for p in $want; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "deps.sh: missing Debian packages:$missing (run as root to install them)" >&2
  exit 1
fi
echo "installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >&2
