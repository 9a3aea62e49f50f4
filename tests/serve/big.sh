#!/bin/bash
# Large transfers stream: a 1 GiB file up and down (sha256 compared), a tar
# of a directory of many files both ways, an upload that fills the box's
# disk (507, nothing left half-written), and the daemon's memory stays
# small throughout (no whole-body buffering).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

if ! serve_start; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant big || not_ok "tenant"
KEY=$TKEY
new_box '{"disk":"2G","memory":"3G","timeout":600}' || not_ok "a box with a 2 GiB disk"
S=/v1/sandboxes/$BOX
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$SPID/status"; }

# 1 GiB of random bytes, generated once (fast: a repeated random block).
BIG=$T_SCRATCH/big.bin
head -c $((4 * 1024 * 1024)) /dev/urandom >"$T_SCRATCH/block"
for _ in $(seq 256); do cat "$T_SCRATCH/block"; done >"$BIG"
printf 'tail' >>"$BIG" # not a multiple of any block size
WANT=$(sha256sum "$BIG" | cut -d' ' -f1)

API_TIMEOUT=300 api PUT "$S/files?path=/workspace/big.bin" -T "$BIG" -H "Expect:"
expect_code "upload 1 GiB" 201
expect_eq "upload: size" "$(jf 'j["size"]')" $((1024 * 1024 * 1024 + 4))
check "upload: the daemon did not hold the body in memory (RSS < 200 MiB)" [ "$(rss_kb)" -lt 204800 ]
api POST "$S/exec" -d '{"cmd":["sha256sum","/workspace/big.bin"],"timeout":120}'
expect_eq "upload: the box sees the same bytes" "$(jf 'j["stdout"].split()[0]')" "$WANT"
GOT=$(curl -sS --max-time 300 -H "Authorization: Bearer $TKEY" "$URL$S/files?path=/workspace/big.bin" | sha256sum | cut -d' ' -f1)
expect_eq "download 1 GiB: same sha256" "$GOT" "$WANT"
GOT=$(curl -sS -H "Authorization: Bearer $TKEY" -H "Range: bytes=1073741824-" "$URL$S/files?path=/workspace/big.bin")
expect_eq "range at the end of the big file" "$GOT" tail
check "download: the daemon stayed small (RSS < 200 MiB)" [ "$(rss_kb)" -lt 204800 ]

# Filling the disk: 507, and the half-written file is not left behind.
API_TIMEOUT=300 api PUT "$S/files?path=/workspace/second.bin" -T "$BIG" -H "Expect:"
expect_code "an upload past the box's disk: 507" 507
expect_eq "507: insufficient_storage" "$(jf 'j["error"]["code"]')" insufficient_storage
api GET "$S/files/stat?path=/workspace/second.bin"
expect_code "507: no partial file" 404
api DELETE "$S/files?path=/workspace/big.bin"
expect_code "remove the big file" 204
api GET "$S/metrics"
check "the space is back" [ "$(jf 'j["disk_used"]')" -lt $((100 * 1024 * 1024)) ]

# Many files through tar, both ways.
mkdir -p "$T_SCRATCH/many"
python3 - "$T_SCRATCH/many" <<'EOF'
import os, sys
root = sys.argv[1]
for d in range(20):
    p = os.path.join(root, "d%02d" % d, "sub")
    os.makedirs(p)
    for f in range(100):
        with open(os.path.join(p, "f%03d" % f), "wb") as fh:
            fh.write(os.urandom(f * 37))
EOF
tar -C "$T_SCRATCH/many" -cf "$T_SCRATCH/many.tar" .
API_TIMEOUT=300 api PUT "$S/files/tar?path=/workspace/many" --data-binary @"$T_SCRATCH/many.tar"
expect_code "tar upload of 2000 files" 200
api POST "$S/exec" -d '{"cmd":["sh","-c","find /workspace/many -type f | wc -l"]}'
expect_eq "tar upload: all files there" "$(jf 'j["stdout"].strip()')" 2000
mkdir -p "$T_SCRATCH/many.back"
curl -sS --max-time 300 -H "Authorization: Bearer $TKEY" "$URL$S/files/tar?path=/workspace/many" |
  tar -C "$T_SCRATCH/many.back" -xf -
check "tar download: the same tree" diff -r "$T_SCRATCH/many" "$T_SCRATCH/many.back"

# A big file through the tar stream too.
api POST "$S/exec" -d '{"cmd":["sh","-c","mkdir -p /workspace/t && head -c 300000000 /dev/urandom > /workspace/t/r && sha256sum /workspace/t/r"],"timeout":120}'
WANT=$(jf 'j["stdout"].split()[0]')
GOT=$(curl -sS --max-time 300 -H "Authorization: Bearer $TKEY" "$URL$S/files/tar?path=/workspace/t" |
  tar -xOf - | sha256sum | cut -d' ' -f1)
expect_eq "a 300 MB file through the tar download" "$GOT" "$WANT"

api DELETE "$S"
check "the box leaves nothing" wait_for 30 box_gone "$BOX"
serve_stop
serve_finish
