# Helpers shared by the preview suites (previews.sh, preview_attacks.sh,
# preview_browser.sh), sourced after tests/lib.sh and serve.bash; SRV is
# the path of preview_servers.py.  Not a suite itself.
#
#   bx BOX CMD              one shell command in the box; sets OUT and RC
#   bgx BOX ARGV...         a background process in the box
#   listening BOX PORT      something accepts on 127.0.0.1:PORT in the box
#   start_servers BOX NAME:PORT[:ARGS]...
#                           preview_servers.py uploaded and these of its
#                           servers started, each waited for
#   mkpreview BOX PORT [JSON]
#                           create a preview; sets PV (id), TOKEN, PASS,
#                           PURL (the path form without its final slash),
#                           HOSTURL, PBODY (the reply); tokens and
#                           passwords go to $T_SCRATCH/tokens and secrets
#   preq URL [CURL ARGS...] one request through a preview, no husk key
#                           unless given; sets CODE and BODY, the reply's
#                           head in $T_SCRATCH/ph
#   rhdr NAME               the values of header NAME in that reply
#   seen NAME / seen_prefix PREFIX
#                           what the box's echo server saw of the headers
#   box_dns BOX             the box's id as a host name label
#   wait_file_has FILE TEXT SECS, pid_gone PID
#   stop_bg                 end the background clients listed in BGPIDS

bx() {
  api POST "/v1/sandboxes/$1/exec" -d "$(python3 -c 'import json,sys; print(json.dumps({"cmd":["sh","-c",sys.argv[1]]}))' "$2")"
  OUT=$(jf 'j["stdout"]')
  RC=$(jf 'j["exit_code"]')
}
bgx() {
  local b=$1; shift
  api POST "/v1/sandboxes/$b/exec" -d "$(python3 -c 'import json,sys; print(json.dumps({"cmd":sys.argv[1:],"background":True}))' "$@")"
  [ "$CODE" = 201 ]
}
listening() {
  bx "$1" "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", $2), timeout=2).close()'"
  [ "$RC" = 0 ]
}
start_servers() {
  local box=$1 spec name port rest p ports=()
  shift
  api PUT "/v1/sandboxes/$box/files?path=/workspace/preview_servers.py" --data-binary @"$SRV"
  [ "$CODE" = 201 ] || return 1
  for spec in "$@"; do
    IFS=: read -r name port rest <<<"$spec"
    # shellcheck disable=SC2086 # rest: the server's own arguments, split
    bgx "$box" python3 /workspace/preview_servers.py "$name" "$port" $rest || return 1
    ports+=("$port")
  done
  for p in "${ports[@]}"; do wait_for 30 listening "$box" "$p" || return 1; done
}
mkpreview() {
  local args=()
  [ $# -ge 3 ] && args=(-d "$3")
  api POST "/v1/sandboxes/$1/ports/$2/previews" "${args[@]}"
  PBODY=$BODY
  PV=$(jf 'j["id"]')
  TOKEN=$(jf 'j["token"]')
  PASS=$(jf 'j.get("password")')
  HOSTURL=$(jf 'j.get("host_url")')
  PURL="$URL/p/$TOKEN"
  [ -n "$TOKEN" ] && echo "$TOKEN" >>"$T_SCRATCH/tokens"
  [ -n "$PASS" ] && echo "$PASS" >>"$T_SCRATCH/secrets"
  [ "$CODE" = 201 ] && [ -n "$TOKEN" ]
}
preq() {
  local u=$1; shift
  CODE=$(curl -sS -o "$T_SCRATCH/pb" -D "$T_SCRATCH/ph" -w '%{http_code}' --max-time 30 "$@" "$u" 2>"$T_SCRATCH/pcurl.err")
  BODY=$(tr -d '\0' <"$T_SCRATCH/pb" 2>/dev/null)
}
rhdr() { tr -d '\r' <"$T_SCRATCH/ph" | awk -v n="$1" 'BEGIN{IGNORECASE=1} index(tolower($0), tolower(n) ":") == 1 {sub(/^[^:]*:[ \t]*/, ""); print}'; }
seen() { jf '",".join(v for k, v in j["headers"] if k.lower() == "'"$1"'".lower())'; }
seen_prefix() { jf '",".join(k for k, v in j["headers"] if k.lower().startswith("'"$1"'".lower()))'; }
box_dns() { tr _ - <<<"$1"; }
wait_file_has() { wait_for "$3" grep -q "$2" "$1"; }
pid_gone() { ! kill -0 "$1" 2>/dev/null; }
BGPIDS=()
stop_bg() {
  local p
  for p in "${BGPIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  BGPIDS=()
}
