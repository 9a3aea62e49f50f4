#!/usr/bin/env python3
"""Destroy every sandbox a standalone `husk mcp` data directory still runs
(boxes outlive the process; a test must not leave any behind).

  stdio_cleanup.py HUSK DATA      prints how many were destroyed"""
import json, subprocess, sys

husk, data = sys.argv[1], sys.argv[2]
p = subprocess.Popen([husk, "mcp", "--data", data, "--quiet"], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

def call(i, name, args):
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                              "params": {"name": name, "arguments": args}}) + "\n")
    p.stdin.flush()
    while True:
        m = json.loads(p.stdout.readline())
        if m.get("id") == i:
            return m["result"]

boxes = call(1, "sandbox_list", {}).get("structuredContent", {}).get("sandboxes", [])
for n, b in enumerate(boxes):
    call(n + 2, "sandbox_destroy", {"sandbox_id": b["sandbox_id"]})
left = call(999, "sandbox_list", {}).get("structuredContent", {}).get("sandboxes", [])
p.stdin.close()
p.wait(timeout=60)
print(len(boxes))
sys.exit(1 if left else 0)
