#!/usr/bin/env python3
"""Clients of bench/contexts.sh (the code contexts benchmark).

  contexts.py http PORT KEY BOX N WARMUP   over one keep-alive HTTP connection
                                          (its setup is not timed): context
                                          create, create + delete, execute of
                                          `1+1` in one warm context, exec of
                                          `python3 -c 'print(1+1)'`, GET of the
                                          box (a request's floor); one JSON
                                          line per operation
  contexts.py host N WARMUP                `python3 -c 'print(1+1)'` on the
                                          host, no box (subprocess.run)
  contexts.py jupyter N WARMUP STARTS      a local Jupyter kernel (ipykernel):
                                          execute `1+1` until its execute_reply
                                          and the idle status; STARTS kernel
                                          starts (start + wait_for_ready)
  contexts.py report RESULTS               the table, the ratio and the verdicts

Every line: {"op", "n", "errors", "ms": [samples], "first_error"?}.
"""
import http.client
import json
import statistics
import subprocess
import sys
import time

# bench/ holds a profile.py that would shadow the standard library's
# (jupyter_client's imports reach it): not this script's directory first.
sys.path = [p for p in sys.path[1:]] if sys.path and sys.path[0].endswith("bench") else sys.path


def now_ms():
    return time.perf_counter() * 1e3


def line(op, ms, errors, first=None, **extra):
    r = {"op": op, "n": len(ms), "errors": errors, "ms": ms}
    if first:
        r["first_error"] = str(first)[:300]
    r.update(extra)
    print(json.dumps(r), flush=True)


class Api:
    def __init__(self, port, key):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.h = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        self.c.connect()
        self.sock = self.c.sock
        self.reconnects = 0

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        self.c.request(method, path, body=data, headers=self.h)
        r = self.c.getresponse()
        raw = r.read()
        if self.c.sock is not self.sock:
            self.reconnects += 1
            self.sock = self.c.sock
        if r.getheader("Connection", "").lower() == "close":
            self.c.close()
            self.c.connect()
            self.sock = self.c.sock
            self.reconnects += 1
        return r.status, (json.loads(raw) if raw else None)


def timed(n, warm, fn):
    ms, errors, first = [], 0, None
    for i in range(warm + n):
        t0 = now_ms()
        try:
            err = fn()
        except Exception as e:  # noqa: BLE001 -- counted, the first one kept
            err = repr(e)
        t1 = now_ms()
        if err:
            errors += 1
            first = first or err
        elif i >= warm:
            ms.append(round(t1 - t0, 4))
    return ms, errors, first


def cmd_http(port, key, box, n, warm):
    a = Api(int(port), key)
    n, warm = int(n), int(warm)
    base = f"/v1/sandboxes/{box}"

    # create alone (the delete after it untimed), then create + delete
    ids = []

    def create():
        s, j = a.call("POST", f"{base}/contexts", {"language": "python"})
        if s != 201:
            return f"create: {s} {j}"
        ids.append(j["id"])
        return None

    def delete_last():
        s, j = a.call("DELETE", f"{base}/contexts/{ids.pop()}")
        return None if s == 204 else f"delete: {s} {j}"

    ms, errors, first, dms = [], 0, None, []
    for i in range(warm + n):
        t0 = now_ms()
        e = create()
        t1 = now_ms()
        e2 = delete_last() if not e else None
        t2 = now_ms()
        if e or e2:
            errors += 1
            first = first or e or e2
        elif i >= warm:
            ms.append(round(t1 - t0, 4))
            dms.append(round(t2 - t0, 4))
    line("create", ms, errors, first)
    line("create+delete", dms, errors, first)

    s, j = a.call("POST", f"{base}/contexts", {"language": "python"})
    if s != 201:
        line("execute", [], 1, f"create: {s} {j}")
    else:
        ctx = j["id"]

        def execute():
            s, j = a.call("POST", f"{base}/contexts/{ctx}/execute", {"code": "1+1"})
            if s != 200 or j.get("status") != "ok":
                return f"execute: {s} {j}"
            main = [r for r in j.get("results", []) if r.get("is_main_result")]
            if not main or main[0].get("data", {}).get("text/plain") != "2":
                return f"execute: no main result 2: {j}"
            return None

        line("execute", *timed(n, warm, execute))
        a.call("DELETE", f"{base}/contexts/{ctx}")

    # The floor of any request on this connection and client: GET the box.
    def get_box():
        s, j = a.call("GET", base)
        return None if s == 200 else f"get: {s} {j}"

    line("get", *timed(n, warm, get_box))

    def exec_py():
        s, j = a.call("POST", f"{base}/exec", {"cmd": ["python3", "-c", "print(1+1)"]})
        if s != 200 or j.get("exit_code") != 0 or j.get("stdout") != "2\n":
            return f"exec: {s} {j}"
        return None

    line("exec", *timed(n, warm, exec_py), reconnects=a.reconnects)


def cmd_host(n, warm):
    def run():
        p = subprocess.run([sys.executable, "-c", "print(1+1)"], capture_output=True)
        return None if p.stdout == b"2\n" else f"host: {p}"

    line("host", *timed(int(n), int(warm), run))


def cmd_jupyter(n, warm, starts):
    try:
        from jupyter_client import KernelManager
        import ipykernel  # noqa: F401 -- the kernel the manager starts
    except ImportError as e:
        line("jupyter-execute", [], 0, f"not installed: {e}", skipped=True)
        line("jupyter-start", [], 0, f"not installed: {e}", skipped=True)
        return

    def start():
        km = KernelManager(kernel_name="python3")
        km.start_kernel()
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        return km, kc

    sms, serr, sfirst = [], 0, None
    for _ in range(int(starts)):
        t0 = now_ms()
        try:
            km, kc = start()
        except Exception as e:  # noqa: BLE001
            serr += 1
            sfirst = sfirst or repr(e)
            continue
        sms.append(round(now_ms() - t0, 4))
        kc.stop_channels()
        km.shutdown_kernel(now=True)

    km, kc = start()

    def execute():
        mid = kc.execute("1+1", store_history=True)
        got, idle = None, False
        while not idle:
            m = kc.get_iopub_msg(timeout=30)
            if m["parent_header"].get("msg_id") != mid:
                continue
            t = m["msg_type"]
            if t == "execute_result":
                got = m["content"]["data"].get("text/plain")
            elif t == "status" and m["content"]["execution_state"] == "idle":
                idle = True
        while True:
            r = kc.get_shell_msg(timeout=30)
            if r["parent_header"].get("msg_id") == mid:
                break
        if r["content"]["status"] != "ok" or got != "2":
            return f"jupyter: {r['content']} {got}"
        return None

    try:
        line("jupyter-execute", *timed(int(n), int(warm), execute))
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    line("jupyter-start", sms, serr, sfirst)


def pct(v, q):
    if not v:
        return float("nan")
    v = sorted(v)
    i = q * (len(v) - 1)
    lo = int(i)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (i - lo)


def cmd_report(path):
    rows = {}
    for l in open(path):
        l = l.strip()
        if l:
            r = json.loads(l)
            rows[r["label"]] = r
    names = [
        ("http-create", "context create (python), HTTP"),
        ("http-create+delete", "context create + delete, HTTP"),
        ("lib-create", "context create + delete, libhusk"),
        ("jupyter-start", "peer: Jupyter kernel start (+ ready)"),
        ("http-execute", "execute 1+1, warm context, HTTP"),
        ("lib-execute", "execute 1+1, warm context, libhusk"),
        ("jupyter-execute", "peer: Jupyter kernel execute 1+1"),
        ("http-get", "GET the box, HTTP (a request's floor)"),
        ("http-exec", "exec python3 -c 'print(1+1)', HTTP"),
        ("lib-exec", "exec python3 -c 'print(1+1)', libhusk"),
        ("host-host", "python3 -c 'print(1+1)' on the host"),
    ]
    print(f"{'':42} {'n':>5} {'p50 ms':>9} {'p95 ms':>9} {'mean':>9}  errors")
    for k, name in names:
        r = rows.get(k)
        if not r:
            continue
        if r.get("skipped"):
            print(f"{name:42} skipped: {r.get('first_error', '')}")
            continue
        v = r["ms"]
        mean = statistics.fmean(v) if v else float("nan")
        print(f"{name:42} {len(v):5d} {pct(v, .5):9.3f} {pct(v, .95):9.3f} {mean:9.3f}  {r['errors']}"
              + (f"  first: {r['first_error'][:120]}" if r.get("first_error") else ""))
    p = lambda k: pct(rows.get(k, {}).get("ms", []), .5)  # noqa: E731
    print()
    e, x, c = p("http-execute"), p("http-exec"), p("http-create")
    verdict = lambda ok: "met" if ok else ("NOT met" if ok is False else "not measured")  # noqa: E731
    ok = lambda v: None if v != v else v  # noqa: E731 -- NaN: not measured
    print(f"target: execute 1+1 over HTTP p50 <= 3 ms: {e:.3f} ms -> {verdict(ok(e <= 3) if e == e else None)}")
    r = e / x if x == x and x else float("nan")
    print(f"target: execute <= 0.5 x exec of python3 -c (same box, same run): {r:.3f} x -> "
          f"{verdict(r <= 0.5 if r == r else None)}")
    print(f"target: context create p50 <= 100 ms (default template): {c:.3f} ms -> "
          f"{verdict(c <= 100 if c == c else None)}")
    j = p("jupyter-execute")
    if j == j:
        print(f"execute vs the Jupyter kernel's: {e / j:.2f} x")
    le = p("lib-execute")
    if le == le:
        print(f"the HTTP front's share of an execute: {e - le:.3f} ms of {e:.3f} ms")
    if rows.get("http-exec", {}).get("reconnects"):
        print(f"warning: the client reconnected {rows['http-exec']['reconnects']} times")


def main():
    a = sys.argv[1:]
    if not a:
        sys.exit(__doc__)
    cmd, args = a[0], a[1:]
    {"http": cmd_http, "host": cmd_host, "jupyter": cmd_jupyter, "report": cmd_report}[cmd](*args)


if __name__ == "__main__":
    main()
