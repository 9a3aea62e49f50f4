#!/usr/bin/env python3
"""One MCP request over Streamable HTTP (POST /mcp), printed as the JSON-RPC
reply (a JSON reply, or the one with the request's id in an SSE stream).

  mcpcall.py URL KEY METHOD [PARAMS-JSON]
  mcpcall.py URL KEY call TOOL ARGS-JSON|@FILE  (tools/call)

Prints {"http": status, "reply": {...}} on one line."""
import json
import sys
import urllib.error
import urllib.request

url, key, method = sys.argv[1], sys.argv[2], sys.argv[3]
if method == "call":
    a = sys.argv[5]
    if a.startswith("@"):  # arguments too large for a command line
        a = open(a[1:]).read()
    params = {"name": sys.argv[4], "arguments": json.loads(a)}
    method = "tools/call"
else:
    params = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).encode()
req = urllib.request.Request(url, data=body, method="POST", headers={
    "Authorization": "Bearer " + key, "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"})
try:
    with urllib.request.urlopen(req, timeout=300) as r:
        status, ctype, data = r.status, r.headers.get("Content-Type", ""), r.read().decode()
except urllib.error.HTTPError as e:
    status, ctype, data = e.code, e.headers.get("Content-Type", ""), e.read().decode()
reply = None
if ctype.startswith("text/event-stream"):
    for line in data.splitlines():
        if line.startswith("data:"):
            m = json.loads(line[5:])
            if m.get("id") == 7:
                reply = m
elif data:
    try:
        reply = json.loads(data)
    except ValueError:
        reply = {"raw": data}
print(json.dumps({"http": status, "reply": reply}))
