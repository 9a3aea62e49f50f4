#!/bin/bash
# One rule for what an MCP call may carry of a file: 3 MiB (3,145,728
# bytes) of the file's bytes, whatever the encoding -- sandbox_write_file's
# content, store_file's content and run_code's input files alike.  Base64
# of exactly 3 MiB of binary is taken (it is 4 MiB of text); one byte more
# of file, as text or as base64, is refused with the bound in the message
# (base64 past 4 MiB of text by the arguments' schema), and nothing is
# written.  A larger file is written in pieces (append, offset) and reads
# back whole.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve/serve.bash"
. "$(dirname "$0")/../serve/s3.bash"
MCPDIR=$(cd "$(dirname "$0")" && pwd)

. "$MCPDIR/mcp.bash"
# toolf KEY NAME ARGS-FILE: tools/call with the arguments in a file (MiBs).
toolf() { tool "$1" "$2" "@$3"; }
# args FILE PYTHON: write the JSON arguments the Python expression makes
# (with b64(n) = base64 of n bytes of a fixed pattern, txt(n) = n bytes
# of text) to FILE.
args() {
  python3 -c '
import base64, json, sys
pat = bytes(range(256))
def raw(n): return (pat * (n // 256 + 1))[:n]
def b64(n): return base64.b64encode(raw(n)).decode()
def txt(n): return "a" * n
json.dump(eval(sys.argv[2]), open(sys.argv[1], "w"))' "$1" "$2"
}
MAX=$((3 << 20))

if ! s3_start; then
  not_ok "the daemon starts with its S3 listener"
  finish
  exit 1
fi
new_tenant mcp-sizes && K=$TKEY
args "$T_SCRATCH/a" '{}'
toolf "$K" sandbox_create "$T_SCRATCH/a"
BOX=$(rq 'sc["sandbox_id"]')
check "a sandbox" [ -n "$BOX" ]

args "$T_SCRATCH/a" "{\"sandbox_id\":\"$BOX\",\"path\":\"max.bin\",\"encoding\":\"base64\",\"content\":b64($MAX)}"
toolf "$K" sandbox_write_file "$T_SCRATCH/a"
expect_eq "sandbox_write_file: base64 of exactly 3 MiB (4 MiB of text) is written whole" \
  "$(rq '[err, sc.get("size")]')" "[False, $MAX]"
args "$T_SCRATCH/a" "{\"sandbox_id\":\"$BOX\",\"path\":\"over.bin\",\"encoding\":\"base64\",\"content\":b64($MAX + 1)}"
toolf "$K" sandbox_write_file "$T_SCRATCH/a"
expect_eq "sandbox_write_file: base64 of 3 MiB + 1 byte is refused, naming the bound" \
  "$(rq 'err and ("3 MiB" in txt or "at most 4194304" in txt)')" true
args "$T_SCRATCH/a" "{\"sandbox_id\":\"$BOX\",\"path\":\"over.txt\",\"content\":txt($MAX + 1)}"
toolf "$K" sandbox_write_file "$T_SCRATCH/a"
expect_eq "sandbox_write_file: 3 MiB + 1 byte of text is refused" "$(rq 'err and "3 MiB" in txt')" true
args "$T_SCRATCH/a" "{\"sandbox_id\":\"$BOX\",\"command\":\"ls /workspace; stat -c %s max.bin\"}"
toolf "$K" sandbox_exec "$T_SCRATCH/a"
expect_eq "only the file within the rule is in the sandbox, whole" "$(rq 'sc["stdout"].split()')" \
  "['max.bin', '$MAX']"

args "$T_SCRATCH/a" "{\"content\":b64($MAX),\"encoding\":\"base64\",\"key\":\"sizes/max.bin\"}"
toolf "$K" store_file "$T_SCRATCH/a"
expect_eq "store_file: base64 of exactly 3 MiB is stored whole" "$(rq '[err, sc.get("size")]')" \
  "[False, $MAX]"
args "$T_SCRATCH/a" "{\"content\":b64($MAX + 1),\"encoding\":\"base64\",\"key\":\"sizes/over.bin\"}"
toolf "$K" store_file "$T_SCRATCH/a"
expect_eq "store_file: base64 of 3 MiB + 1 byte is refused, naming the bound" \
  "$(rq 'err and ("3 MiB" in txt or "at most 4194304" in txt)')" true

args "$T_SCRATCH/a" "{\"language\":\"bash\",\"code\":\"stat -c %s a.bin b.txt\",\"files_base64\":{\"a.bin\":b64($MAX - 10)},\"files\":{\"b.txt\":txt(10)}}"
toolf "$K" run_code "$T_SCRATCH/a"
expect_eq "run_code: input files of 3 MiB together (base64 and text) are written" \
  "$(rq 'sc.get("stdout", "").split()')" "['$((MAX - 10))', '10']"
args "$T_SCRATCH/a" "{\"language\":\"bash\",\"code\":\"true\",\"files_base64\":{\"a.bin\":b64($MAX - 10)},\"files\":{\"b.txt\":txt(11)}}"
toolf "$K" run_code "$T_SCRATCH/a"
expect_eq "run_code: one byte more across both maps is refused, naming the rule" \
  "$(rq 'err and "3 MiB" in txt')" true

# A file larger than a call may carry, written in pieces: append, then an
# offset into it; read back whole.
for i in 0 1 2 3; do
  args "$T_SCRATCH/a" "{\"sandbox_id\":\"$BOX\",\"path\":\"big/whole.bin\",\"encoding\":\"base64\",\"append\":True,\"content\":base64.b64encode(bytes([$i]) * $MAX).decode()}"
  toolf "$K" sandbox_write_file "$T_SCRATCH/a"
  expect_eq "sandbox_write_file append, piece $((i + 1)) of 4: 3 MiB written, the file grows" \
    "$(rq '[err, sc.get("size"), sc.get("file_size")]')" "[False, $MAX, $((MAX * (i + 1)))]"
done
args "$T_SCRATCH/a" "{\"sandbox_id\":\"$BOX\",\"path\":\"big/whole.bin\",\"offset\":$((MAX - 2)),\"content\":\"ZZZZ\"}"
toolf "$K" sandbox_write_file "$T_SCRATCH/a"
expect_eq "sandbox_write_file at an offset: 4 bytes across two pieces, the size kept" \
  "$(rq '[err, sc.get("size"), sc.get("file_size")]')" "[False, 4, $((MAX * 4))]"
python3 -c '
import hashlib, sys
m = int(sys.argv[1])
d = bytearray(b"".join(bytes([i]) * m for i in range(4)))
d[m - 2:m + 2] = b"ZZZZ"
print(hashlib.sha256(d).hexdigest())' "$MAX" >"$T_SCRATCH/want"
args "$T_SCRATCH/a" "{\"sandbox_id\":\"$BOX\",\"command\":\"sha256sum big/whole.bin | cut -d\\\" \\\" -f1\"}"
toolf "$K" sandbox_exec "$T_SCRATCH/a"
expect_eq "the 12 MiB file reads back byte-identical" "$(rq 'sc["stdout"].strip()')" "$(cat "$T_SCRATCH/want")"
args "$T_SCRATCH/a" "{\"sandbox_id\":\"$BOX\",\"path\":\"big/none.bin\",\"offset\":5,\"content\":\"x\"}"
toolf "$K" sandbox_write_file "$T_SCRATCH/a"
expect_err "sandbox_write_file at an offset of a file that does not exist: refused" "does not exist"
args "$T_SCRATCH/a" "{\"sandbox_id\":\"$BOX\",\"path\":\"big/whole.bin\",\"offset\":0,\"append\":True,\"content\":\"x\"}"
toolf "$K" sandbox_write_file "$T_SCRATCH/a"
expect_err "sandbox_write_file with both append and offset: refused" "not both"

# Hostile: the box points the file to write at something else.
args "$T_SCRATCH/a" "{\"sandbox_id\":\"$BOX\",\"command\":\"ln -s /etc/passwd evil && mkfifo fifo && ln -s /proc/self/mem mem\"}"
toolf "$K" sandbox_exec "$T_SCRATCH/a"
for f in evil fifo mem; do
  args "$T_SCRATCH/a" "{\"sandbox_id\":\"$BOX\",\"path\":\"$f\",\"append\":True,\"content\":\"owned\\n\"}"
  toolf "$K" sandbox_write_file "$T_SCRATCH/a"
  expect_eq "append through a box's $f (symlink to /etc/passwd, a FIFO, /proc/self/mem): refused at once" \
    "$(rq 'err')" true
done
check "the host's /etc/passwd is untouched" not grep -q owned /etc/passwd

args "$T_SCRATCH/a" "{\"sandbox_id\":\"$BOX\"}"
toolf "$K" sandbox_destroy "$T_SCRATCH/a"
serve_stop
serve_finish
