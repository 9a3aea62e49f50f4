#!/bin/bash
# The processes listing of a box does not grow the daemon's memory with
# what the box ran: it is paged (limit, cursor, at most --reply-max bytes
# of entries), a long argv is listed by its program name only (flagged
# cmd_truncated; the process itself still has it whole), and a page is
# reserved from the reply budget like any reply carrying box data.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

if ! serve_start --reply-budget 4M --tenant-reply-budget 4M; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant procs || not_ok "tenant"
KEY=$TKEY
new_box '{"disk":"64M","memory":"256M","timeout":900}' || not_ok "a box"
S=/v1/sandboxes/$BOX
hwm_kb() { awk '/^VmHWM/ {print $2}' "/proc/$SPID/status"; }
SLACK=49152
[ -n "${HUSK_ASAN:-}" ] && SLACK=262144
rj() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$T_SCRATCH/body" "$1"; }

api POST "$S/exec" -d '{"cmd":["echo","short"],"background":true}'
expect_code "a short background command" 201
SHORT=$(jf 'j["pid"]')
# 300 background commands, each with 60 000 bytes of arguments (a row holds
# at most 64 KiB of command): 18 MB
# of argv in the box's rows.
N=300
python3 - "${URL#http://}" "$KEY" "$S" "$N" >"$T_SCRATCH/made" <<'EOF'
import http.client, json, sys
host, key, path, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
body = json.dumps({"cmd": ["sh", "-c", "exit 0"] + ["x" * 20000] * 3, "background": True})
c = http.client.HTTPConnection(host, timeout=60)
made = 0
for _ in range(n):
    c.request("POST", path + "/exec", body, {"Authorization": "Bearer " + key})
    r = c.getresponse()
    data = r.read()
    if r.status != 201:
        print("# exec: HTTP %d %s" % (r.status, data[:200]), file=sys.stderr)
        break
    made += 1
print(made)
EOF
expect_eq "$N background commands with 60 kB of argv each" "$(cat "$T_SCRATCH/made")" "$N"
BASE=$(hwm_kb)
echo "# daemon VmHWM before the listings: $BASE kB"

api GET "$S/processes"
expect_code "the listing: 200" 200
expect_eq "first page: 100 entries, truncated, with a cursor" \
  "$(rj '[len(j["processes"]), j["truncated"], j["next_cursor"] is not None]')" "[100, True, True]"
expect_eq "a long argv is listed by its program name, flagged" \
  "$(rj '[j["processes"][0]["cmd"], j["processes"][0]["cmd_truncated"]]')" "[['sh'], True]"
check "the page is small (under 100 kB)" [ "$(stat -c %s "$T_SCRATCH/body")" -lt 100000 ]
pages() { # QUERY: walk every page; prints entries distinct-pids pages
  local cur="" all="$T_SCRATCH/all" n=0
  : >"$all"
  while :; do
    api GET "$S/processes?x=1$1${cur:+&cursor=$cur}"
    [ "$CODE" = 200 ] || { echo "error $CODE"; return; }
    rj '"\n".join(str(p["pid"]) for p in j["processes"])' >>"$all"
    n=$((n + 1))
    cur=$(rj 'j["next_cursor"] or ""')
    [ -n "$cur" ] || break
    [ $n -lt 100 ] || break
  done
  echo "$(grep -c . "$all") $(sort -u "$all" | grep -c .) $n"
}
expect_eq "all pages: every process once" "$(pages "")" "$((N + 1)) $((N + 1)) 4"
expect_eq "limit=7: 43 pages" "$(pages "&limit=7")" "$((N + 1)) $((N + 1)) 43"
api GET "$S/processes?limit=301"
expect_eq "the last entry is the short command, whole, not flagged" \
  "$(rj '[j["processes"][-1]["pid"], j["processes"][-1]["cmd"], j["processes"][-1]["cmd_truncated"], j["truncated"]]')" \
  "[$SHORT, ['echo', 'short'], False, False]"
LONG=$(rj 'j["processes"][0]["pid"]')
api GET "$S/processes/$LONG"
expect_eq "the process itself has its whole argv" "$(rj '[len(j["cmd"]), len(j["cmd"][3])]')" "[6, 20000]"
api GET "$S/processes?limit=0"
expect_code "limit=0: 400" 400
api GET "$S/processes?limit=501"
expect_code "limit past 500: 400" 400
api GET "$S/processes?cursor=abc"
expect_code "a bad cursor: 400" 400
# limit=500 reserves --reply-max plus 500 rows' most: past the 4M budget.
api GET "$S/processes?limit=500" -D "$T_SCRATCH/hdr"
expect_code "a page the reply budget cannot cover: 503" 503
check "503: Retry-After" grep -qi '^retry-after: 1' "$T_SCRATCH/hdr"
# The whole listing, many times, and at once.
for _ in 1 2 3; do
  pids=()
  for q in "" "&limit=300"; do
    curl -s -o /dev/null -H "Authorization: Bearer $KEY" "$URL$S/processes?x=1$q" &
    pids+=($!)
    curl -s -o /dev/null -H "Authorization: Bearer $KEY" "$URL$S/processes?x=1$q" &
    pids+=($!)
  done
  wait "${pids[@]}"
done
HWM=$(hwm_kb)
echo "# daemon VmHWM after: $HWM kB"
check "the daemon's peak memory grew by less than $((SLACK / 1024)) MiB (not with the argv)" [ $((HWM - BASE)) -lt $SLACK ]

reap_boxes "$KEY" >/dev/null
serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0
serve_finish
