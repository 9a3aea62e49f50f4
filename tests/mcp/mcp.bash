# Helpers shared by the MCP suites that drive `husk serve`'s /mcp over
# Streamable HTTP (sourced after tests/lib.sh and tests/serve/serve.bash).
#
#   tool KEY NAME ARGS     tools/call NAME with ARGS (JSON, or @FILE for
#                          arguments too large for a command line); the
#                          reply in R
#   rq EXPR                Python on the last reply: rep (the JSON-RPC
#                          reply), res (its result), sc (structuredContent),
#                          err (isError), txt (the first text block), links
#                          (the resource_link blocks)
#   expect_err DESC SUB    the last reply is an isError result whose text
#                          holds SUB
MCPDIR=${MCPDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}

tool() { R=$(python3 "$MCPDIR/mcpcall.py" "$URL/mcp" "$1" call "$2" "$3"); }
rq() {
  python3 -c '
import json, sys
o = json.loads(sys.argv[1])
rep = o["reply"] or {}
res = rep.get("result") or {}
sc = res.get("structuredContent") or {}
err = res.get("isError", False)
content = res.get("content") or [{}]
txt = content[0].get("text", "")
links = [b for b in content if b.get("type") == "resource_link"]
try:
    v = eval(sys.argv[2])
except Exception as e:
    v = "EXC %r in %s" % (e, sys.argv[1][:400])
print("true" if v is True else "false" if v is False else "" if v is None else v)' "$R" "$1"
}
expect_err() {
  if [ "$(rq 'err')" = true ] && [[ "$(rq 'txt')" == *"$2"* ]]; then ok "$1"
  else not_ok "$1 (got: $(head -c 400 <<<"$R"))"; fi
}
