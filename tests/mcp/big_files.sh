#!/bin/bash
# A 50 MiB file of random bytes through MCP, over both transports (HTTP
# /mcp of husk serve, and standalone husk mcp on stdio): written in pieces
# of 3 MiB (the most one call carries, as base64) with append, read back in
# pages of 1 MiB (sandbox_read_file's largest) and compared by sha256.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve/serve.bash"
MCPDIR=$(cd "$(dirname "$0")" && pwd)

SIZE=$((50 << 20)) CHUNK=$((3 << 20)) PAGE=$((1 << 20))
# field FILE EXPR: Python on the driver's JSON line (j).
field() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
report() { # DESC FILE
  if [ "$(field "$2" 'j["ok"]')" = True ]; then
    ok "$1 ($(field "$2" '"%d writes, %d reads, %.1f s" % (j["writes"], j["reads"], j["seconds"])'))"
  else
    not_ok "$1 (got: $(head -c 600 "$2"))"
  fi
}

if ! serve_start; then
  not_ok "the daemon starts"
  finish
  exit 1
fi
new_tenant mcp-big && K=$TKEY
python3 "$MCPDIR/big_files.py" http "$URL/mcp" "$K" $SIZE $CHUNK $PAGE >"$T_SCRATCH/http"
report "HTTP /mcp: 50 MiB written in 3 MiB pieces reads back byte-identical in 1 MiB pages" "$T_SCRATCH/http"
expect_eq "HTTP /mcp: the file is 50 MiB, and each byte came back once" \
  "$(field "$T_SCRATCH/http" '[j.get("file_size"), j.get("read"), j.get("writes"), j.get("reads")]')" \
  "[$SIZE, $SIZE, 17, 50]"

python3 "$MCPDIR/big_files.py" stdio "$HUSK" "$T_SCRATCH/sd" $SIZE $CHUNK $PAGE >"$T_SCRATCH/stdio"
report "husk mcp (stdio): 50 MiB written in 3 MiB pieces reads back byte-identical in 1 MiB pages" "$T_SCRATCH/stdio"
expect_eq "husk mcp (stdio): the file is 50 MiB, and each byte came back once" \
  "$(field "$T_SCRATCH/stdio" '[j.get("file_size"), j.get("read"), j.get("writes"), j.get("reads")]')" \
  "[$SIZE, $SIZE, 17, 50]"

check "the daemon is healthy" bash -c "curl -sf --max-time 10 '$URL/v1/health' >/dev/null"
serve_stop
serve_finish
