#!/usr/bin/env python3
"""A scripted MCP session over stdio: start COMMAND..., send the JSON-RPC
messages of a script read from stdin (one per line), print every message the
server writes as one JSON line, then close stdin.

Script lines:
  {"jsonrpc": ...}        send this message; wait for the reply of its id
  touch PATH TEXT         append TEXT to the file PATH (a change to notice)
  wait METHOD SECONDS     wait until a notification METHOD arrives (or time out)
  quiet SECONDS           wait SECONDS and print what arrived meanwhile

Output: one line per message received: {"got": message} or
{"timeout": METHOD}; then {"exit": code, "stderr": text}."""
import json
import select
import subprocess
import sys
import time

p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE)
buf = b""


def read_one(deadline):
    global buf
    while b"\n" not in buf:
        left = deadline - time.time()
        if left <= 0:
            return None
        r, _, _ = select.select([p.stdout], [], [], left)
        if not r:
            return None
        chunk = p.stdout.read1(65536)
        if not chunk:
            return None
        buf += chunk
    line, buf = buf.split(b"\n", 1)
    m = json.loads(line)
    print(json.dumps({"got": m}), flush=True)
    return m


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    if line.startswith("{"):
        msg = json.loads(line)
        p.stdin.write((json.dumps(msg) + "\n").encode())
        p.stdin.flush()
        if "id" in msg:
            end = time.time() + 60
            while True:
                m = read_one(end)
                if m is None or m.get("id") == msg["id"]:
                    break
    elif line.startswith("touch "):
        _, path, text = line.split(" ", 2)
        with open(path, "a") as f:
            f.write(text + "\n")
    elif line.startswith("wait "):
        _, method, secs = line.split(" ")
        end = time.time() + float(secs)
        while True:
            m = read_one(end)
            if m is None:
                print(json.dumps({"timeout": method}), flush=True)
                break
            if m.get("method") == method:
                break
    elif line.startswith("quiet "):
        end = time.time() + float(line.split(" ")[1])
        while read_one(end) is not None:
            pass
p.stdin.close()
try:
    p.wait(timeout=30)
except subprocess.TimeoutExpired:
    p.kill()
    p.wait()
print(json.dumps({"exit": p.returncode, "stderr": p.stderr.read().decode(errors="replace")}))
