#!/bin/sh
# Install the Debian packages husk needs that are missing on this machine.
#   scripts/deps.sh build   what `make` needs
#   scripts/deps.sh test    what `make test` needs in addition
#   scripts/deps.sh bench   what `make bench` needs in addition
#   scripts/deps.sh deb     what `make deb` needs in addition (debian/)
# Each package is listed with why in docs/dependencies.md.
set -eu

# Building: the compilers and the libraries libhusk and the fronts link
# (libcurl: the external store client and husk mcp --server; expat: S3
# XML bodies; zlib: CRC32; libargon2: users' password hashes; cjose: ID
# tokens of single sign-on), the tools
# network mode egress runs (nft, ip), and mkfs.ext4 for named volumes
# (e2fsprogs).  The -dev packages bring their runtime libraries (libargon2-dev:
# libargon2-1), which the husk package's Depends name through ${shlibs:Depends}.
build="gcc libc6-dev make pkg-config libseccomp-dev libjansson-dev libsqlite3-dev libssl-dev"
build="$build libmicrohttpd-dev libarchive-dev libcurl4-openssl-dev libexpat1-dev zlib1g-dev libyaml-dev"
build="$build libargon2-dev libcjose-dev"
build="$build curl jq nftables iproute2 e2fsprogs"
# Testing: clang (the -Werror build and the fuzzers), the host tools the
# suites drive (ip, ps, openssl for a test CA, tcpdump), matplotlib and pandas for
# charts and tables in boxes, python3-cryptography for the ID tokens a fake single
# sign-on provider signs (tests/serve/oidc_smoke.py), the real S3 clients, busybox for the template suites'
# images, debootstrap for a Debian template (husk template create --debian
# runs it), and npm for the pinned MCP clients (tests/mcp/package-lock.json,
# which bring their own Node; an npm already installed is used as is).
test="clang python3 iproute2 procps curl openssl tcpdump python3-matplotlib python3-pandas"
test="$test python3-cryptography"
test="$test awscli s3cmd rclone busybox-static debootstrap"
command -v npm >/dev/null 2>&1 || test="$test nodejs npm"
# chromium: the browser that opens a box's dashboard through a preview URL
# (tests/serve/preview_browser.sh, headless, driven by the pinned
# playwright-core of tests/browser/package-lock.json, which brings no
# browser of its own).
test="$test chromium"
bench="bubblewrap runc util-linux hyperfine podman busybox-static erofs-utils python3-ipykernel python3-jupyter-client"
# The Debian packages (make deb, tests/pkg/deb.sh): dpkg-buildpackage and
# the debhelper sequence (no fakeroot: debian/control says
# Rules-Requires-Root: no); man-db renders the man pages in the tests.
deb="dpkg-dev debhelper man-db"
test="$test $deb"

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
