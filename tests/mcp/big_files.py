#!/usr/bin/env python3
"""Write a large random binary file into a sandbox in pieces through MCP
(sandbox_write_file, base64, append) and read it back in pages
(sandbox_read_file, offset + max_bytes), over one transport; print one
JSON line saying what came back.

  big_files.py http URL KEY SIZE CHUNK PAGE
  big_files.py stdio HUSK DATA-DIR SIZE CHUNK PAGE"""
import base64, hashlib, json, os, subprocess, sys, time, urllib.request

mode = sys.argv[1]
size, chunk, page = (int(x) for x in sys.argv[4:7])
n = [0]

if mode == "http":
    url, key = sys.argv[2], sys.argv[3]

    def call(name, args):
        n[0] += 1
        body = json.dumps({"jsonrpc": "2.0", "id": n[0], "method": "tools/call",
                           "params": {"name": name, "arguments": args}}).encode()
        req = urllib.request.Request(url, data=body, method="POST", headers={
            "Authorization": "Bearer " + key, "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25"})
        with urllib.request.urlopen(req, timeout=120) as r:
            ctype, data = r.headers.get("Content-Type", ""), r.read().decode()
        if ctype.startswith("text/event-stream"):
            for line in data.splitlines():
                if line.startswith("data:"):
                    m = json.loads(line[5:])
                    if m.get("id") == n[0]:
                        return m["result"]
            raise RuntimeError("no reply in the stream")
        return json.loads(data)["result"]
    proc = None
else:
    proc = subprocess.Popen([sys.argv[2], "mcp", "--data", sys.argv[3], "--quiet"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def call(name, args):
        n[0] += 1
        proc.stdin.write(json.dumps({
            "jsonrpc": "2.0", "id": n[0], "method": "tools/call",
            "params": {"name": name, "arguments": args,
                       "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                 "io.modelcontextprotocol/clientCapabilities": {}}}}).encode() + b"\n")
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("husk mcp ended")
            m = json.loads(line)
            if m.get("id") == n[0]:
                return m["result"]

out = {"ok": False}
t0 = time.time()
box = None
try:
    data = os.urandom(size)
    want = hashlib.sha256(data).hexdigest()
    box = call("sandbox_create", {"memory_mb": 512})["structuredContent"]["sandbox_id"]
    writes, last = 0, None
    for off in range(0, size, chunk):
        piece = data[off:off + chunk]
        r = call("sandbox_write_file", {"sandbox_id": box, "path": "big.bin", "append": off > 0,
                                        "encoding": "base64",
                                        "content": base64.b64encode(piece).decode()})
        writes += 1
        if r.get("isError"):
            raise RuntimeError("write at %d: %s" % (off, r["content"][0]["text"][:300]))
        last = r["structuredContent"]
        if last["size"] != len(piece):
            raise RuntimeError("write at %d: size %r" % (off, last["size"]))
    got, reads, h = 0, 0, hashlib.sha256()
    while True:
        r = call("sandbox_read_file", {"sandbox_id": box, "path": "big.bin", "offset": got,
                                       "max_bytes": page})
        reads += 1
        if r.get("isError"):
            raise RuntimeError("read at %d: %s" % (got, r["content"][0]["text"][:300]))
        sc = r["structuredContent"]
        b = (base64.b64decode(sc["content"]) if sc["encoding"] == "base64"
             else sc["content"].encode())
        if len(b) != sc["bytes_returned"] or sc["offset"] != got:
            raise RuntimeError("read at %d: %d bytes, said %r" % (got, len(b), sc["bytes_returned"]))
        h.update(b)
        got += len(b)
        if not sc["truncated"] or not b:
            break
    out = {"ok": h.hexdigest() == want, "file_size": last["file_size"], "read": got,
           "writes": writes, "reads": reads}
except Exception as e:  # reported, not raised: the suite says what failed
    out["error"] = repr(e)[:500]
finally:
    try:
        if box:
            call("sandbox_destroy", {"sandbox_id": box})
    except Exception:
        pass
    if proc:
        proc.stdin.close()
        proc.wait(timeout=60)
out["seconds"] = round(time.time() - t0, 1)
print(json.dumps(out))
