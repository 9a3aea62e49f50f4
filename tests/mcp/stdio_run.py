#!/usr/bin/env python3
"""Feed JSON-RPC lines to `husk mcp` and print what it wrote to stdout as a
JSON array (one element per line, each parsed; a line that is not one JSON
object makes the script fail: stdout must carry nothing else).

  stdio_run.py HUSK ARGS... < lines     (stdin: one message per line)

A line "SLEEP n" waits n seconds before the next message."""
import json, subprocess, sys, threading, time

proc = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL)
for line in sys.stdin.read().split("\n"):
    if not line:
        continue
    if line.startswith("SLEEP "):
        proc.stdin.flush()
        time.sleep(float(line[6:]))
        continue
    proc.stdin.write(line.encode() + b"\n")
proc.stdin.close()
timer = threading.Timer(120, proc.kill)
timer.start()
out = proc.stdout.read()
proc.wait()
timer.cancel()
if proc.returncode < 0:
    print("husk mcp did not exit after stdin's EOF", file=sys.stderr)
    sys.exit(3)
msgs = []
for raw in out.split(b"\n"):
    if not raw:
        continue
    m = json.loads(raw)  # raises on anything that is not JSON
    assert isinstance(m, dict), raw
    msgs.append(m)
print(json.dumps({"rc": proc.returncode, "msgs": msgs}))
