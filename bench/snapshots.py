#!/usr/bin/env python3
"""Clients of bench/snapshots.sh (pause/resume and snapshots benchmark).

  snapshots.py pause PORT KEY BOX N WARMUP [GAP] N cycles of POST …/pause then
                                                 POST …/resume over one
                                                 keep-alive connection, the
                                                 state checked each time;
                                                 GAP ms before each [0]
  snapshots.py freezer v2|v1 WORK N WARMUP [GAP [poll|spin]]
                                                 the kernel's own cost: a
                                                 scratch cgroup with WORK
                                                 ("sleep": 4 sleeping tasks,
                                                 "busy": one busy loop) frozen
                                                 and thawed the way husk does
                                                 (cgroup.freeze + cgroup.events
                                                 / freezer.state), GAP ms
                                                 between operations [2];
                                                 spin: cgroup.events re-read
                                                 without waiting for POLLPRI
  snapshots.py runc WORK N WARMUP TMPDIR        runc pause / runc resume of a
                                                 detached container running
                                                 WORK (bundle in TMPDIR)
  snapshots.py gen DIR MB                        the workload, written into DIR
                                                 (the same bytes every time);
                                                 prints its digest
  snapshots.py digest DIR                        the digest of what gen wrote
  snapshots.py snap PORT KEY BOX REPS            REPS snapshots of the box; the
                                                 first one kept (its id in the
                                                 JSON line), the others deleted
  snapshots.py create PORT KEY BODY REPS [DIGEST] REPS creates with BODY (JSON);
                                                 with DIGEST the first box's
                                                 files are checked; each box
                                                 deleted after (untimed)
  snapshots.py fork PORT KEY BODY K              K creates with BODY (JSON) one
                                                 after the other, then K at once
                                                 (K connections), the boxes kept
                                                 until the K are made; total
                                                 wall times and each create's
  snapshots.py peer SRC OUT UNPACK REPS          tar | zstd -3 (-T1 and -T0) of
                                                 SRC into OUT, and zstd -d |
                                                 tar -x of it into UNPACK
  snapshots.py report RESULTS                    the tables, ratios and verdicts

Every line: {"op", "n", "errors", "ms": [samples], "first_error"?, ...}.
"""
import hashlib
import http.client
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

# The workload, run by the box's python3 and by the host's (the same
# Debian python3, so the same bytes): 60 % random data in 6 files, 40 % text
# of pseudo-words in files of 10 KiB, 256 to a directory.  argv: DIR MB, or
# DIR alone for the digest only.  Prints {"files", "bytes", "sha256"}.
GEN = r'''
import hashlib, json, os, random, sys
d = sys.argv[1]
def digest():
    h, files, total = hashlib.sha256(), 0, 0
    for root, dirs, names in os.walk(d):
        dirs.sort()
        for n in sorted(names):
            p = os.path.join(root, n)
            h.update(os.path.relpath(p, d).encode() + b"\0")
            with open(p, "rb") as f:
                b = f.read()
            h.update(b)
            files += 1
            total += len(b)
    print(json.dumps({"files": files, "bytes": total, "sha256": h.hexdigest()}))
if len(sys.argv) > 2:
    mb = int(sys.argv[2])
    rng = random.Random(16)
    rnd = mb * 6 // 10 * 1048576
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    for i in range(6):
        with open(os.path.join(d, "data", "blob%d.bin" % i), "wb") as f:
            left = rnd // 6
            while left:
                k = min(left, 1 << 20)
                f.write(rng.randbytes(k))
                left -= k
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 10)))
             for _ in range(4000)]
    nfiles = (mb * 1048576 - rnd) // 10240
    for i in range(nfiles):
        sub = os.path.join(d, "text", "d%03d" % (i // 256))
        if i % 256 == 0:
            os.makedirs(sub, exist_ok=True)
        s = " ".join(rng.choices(vocab, k=2000)).encode()
        while len(s) < 10240:
            s += b" " + s
        with open(os.path.join(sub, "f%05d.txt" % i), "wb") as f:
            f.write(s[:10239] + b"\n")
digest()
'''


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
        self.port = int(port)
        self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        self.h = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        self.c.connect()

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        self.c.request(method, path, body=data, headers=self.h)
        r = self.c.getresponse()
        raw = r.read()
        if r.getheader("Connection", "").lower() == "close":
            self.c.close()
            self.c.connect()
        try:
            j = json.loads(raw) if raw else None
        except ValueError:
            j = raw[:200]
        return r.status, j


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


# ---- pause / resume over HTTP ---------------------------------------------------------


def cmd_pause(port, key, box, n, warm, gap_ms="0"):
    a = Api(port, key)
    gap = float(gap_ms) / 1e3
    base = f"/v1/sandboxes/{box}"

    def op(verb, want):
        s, j = a.call("POST", f"{base}/{verb}")
        if s != 200 or not isinstance(j, dict) or j.get("state") != want:
            return f"{verb}: {s} {j}"
        return None

    pms, rms, errors, first = [], [], 0, None
    for i in range(int(warm) + int(n)):
        time.sleep(gap)
        t0 = now_ms()
        e = op("pause", "paused")
        t1 = now_ms()
        time.sleep(gap)
        t1b = now_ms()
        e2 = op("resume", "running")
        t2 = now_ms()
        if e or e2:
            errors += 1
            first = first or e or e2
        elif i >= int(warm):
            pms.append(round(t1 - t0, 4))
            rms.append(round(t2 - t1b, 4))
    line("pause", pms, errors, first, gap_ms=float(gap_ms))
    line("resume", rms, errors, first, gap_ms=float(gap_ms))


# ---- the kernel's freezer ---------------------------------------------------------------

V2_ROOT = "/sys/fs/cgroup/unified"
V1_ROOT = "/sys/fs/cgroup/freezer"


def v2_root():
    for line_ in open("/proc/self/mountinfo"):
        left, _, right = line_.partition(" - ")
        if right.split()[0] == "cgroup2":
            return left.split()[4]
    return None


def v1_root():
    for line_ in open("/proc/self/mountinfo"):
        left, _, right = line_.partition(" - ")
        f = right.split()
        if f[0] == "cgroup" and "freezer" in f[2].split(","):
            return left.split()[4]
    return None


def cmd_freezer(kind, work, n, warm, gap_ms="2", wait="poll"):
    root = v2_root() if kind == "v2" else v1_root()
    gap = float(gap_ms) / 1e3
    label = f"{kind}-{work}" + ("" if wait == "poll" else f"-{wait}") + ("-spaced" if gap >= 0.02 else "")
    if not root:
        line(f"{label}-freeze", [], 0, f"no cgroup {kind} freezer mounted", skipped=True)
        line(f"{label}-thaw", [], 0, f"no cgroup {kind} freezer mounted", skipped=True)
        return
    cg = os.path.join(root, f"husk-bench-freezer-{os.getpid()}")
    os.mkdir(cg)
    procs = []
    try:
        if work == "busy":
            cmds = [["sh", "-c", "while :; do :; done"]]
        else:
            cmds = [["sleep", "100000"] for _ in range(4)]
        for c in cmds:
            procs.append(subprocess.Popen(c))
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            for p in procs:
                f.write(f"{p.pid}\n")
                f.flush()
        time.sleep(0.2)

        if kind == "v2":
            ev = os.open(os.path.join(cg, "cgroup.events"), os.O_RDONLY)
            fz = os.open(os.path.join(cg, "cgroup.freeze"), os.O_WRONLY)
            po = select.poll()
            po.register(ev, select.POLLPRI)

            def freeze(on):
                os.write(fz, b"1" if on else b"0")
                want = b"frozen 1" if on else b"frozen 0"
                end = time.monotonic() + 5
                while want not in os.pread(ev, 256, 0):
                    if time.monotonic() > end:
                        return "timeout"
                    if wait == "poll":  # as husk: POLLPRI, at most 50 ms
                        po.poll(50)
                return None
        else:
            st = os.path.join(cg, "freezer.state")

            def freeze(on):
                want = "FROZEN" if on else "THAWED"
                end = time.monotonic() + 5
                while True:  # as husk: write, read back, 1 ms between
                    with open(st, "w") as f:
                        f.write(want)
                    with open(st) as f:
                        if f.read().startswith(want):
                            return None
                    if time.monotonic() > end:
                        return "timeout"
                    time.sleep(0.001)

        fms, tms, errors, first = [], [], 0, None
        for i in range(int(warm) + int(n)):
            t0 = now_ms()
            e = freeze(True)
            t1 = now_ms()
            time.sleep(gap)
            t1b = now_ms()
            e2 = freeze(False)
            t2 = now_ms()
            if e or e2:
                errors += 1
                first = first or e or e2
            elif i >= int(warm):
                fms.append(round(t1 - t0, 4))
                tms.append(round(t2 - t1b, 4))
            time.sleep(gap)
        line(f"{label}-freeze", fms, errors, first, tasks=len(procs), gap_ms=float(gap_ms))
        line(f"{label}-thaw", tms, errors, first, tasks=len(procs), gap_ms=float(gap_ms))
    finally:
        if kind == "v2":
            try:
                with open(os.path.join(cg, "cgroup.freeze"), "w") as f:
                    f.write("0")
            except OSError:
                pass
        else:
            try:
                with open(os.path.join(cg, "freezer.state"), "w") as f:
                    f.write("THAWED")
            except OSError:
                pass
        for p in procs:
            p.kill()
            p.wait()
        for _ in range(100):
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.05)


def cmd_runc(work, n, warm, tmp):
    """runc pause / runc resume of a detached container (a bundle like
    bench/run.sh's: read-only root of /usr bound, uid 1000), each call a
    runc process, as a user of runc pays."""
    label = f"runc-{work}"
    runc = shutil.which("runc")
    if not runc:
        for op in ("pause", "resume"):
            line(f"{label}-{op}", [], 0, "runc is not installed", skipped=True)
        return
    bundle, state = os.path.join(tmp, "bundle"), os.path.join(tmp, "state")
    os.makedirs(os.path.join(bundle, "rootfs"), exist_ok=True)
    os.makedirs(state, exist_ok=True)
    subprocess.run([runc, "spec"], cwd=bundle, check=True)
    for d in ("usr", "proc", "dev", "sys", "tmp"):
        os.makedirs(os.path.join(bundle, "rootfs", d), exist_ok=True)
    for l in ("bin", "lib", "lib64", "sbin"):
        if not os.path.lexists(os.path.join(bundle, "rootfs", l)):
            os.symlink(f"usr/{l}", os.path.join(bundle, "rootfs", l))
    prog = ("while :; do :; done" if work == "busy"
            else "for i in 1 2 3 4; do sleep 100000 & done; wait")
    cfgp = os.path.join(bundle, "config.json")
    c = json.load(open(cfgp))
    c["process"].update(args=["sh", "-c", prog], terminal=False, user={"uid": 1000, "gid": 1000}, cwd="/")
    c["root"] = {"path": "rootfs", "readonly": True}
    c["mounts"].append({"destination": "/usr", "type": "bind", "source": "/usr",
                        "options": ["rbind", "ro", "nosuid", "nodev"]})
    json.dump(c, open(cfgp, "w"))
    cid = f"husk-bench-snap-{os.getpid()}"
    base = [runc, "--root", state]
    try:
        # The container inherits runc's stdio: no pipe (it would never end).
        with open(os.path.join(tmp, "run.err"), "w+") as err:
            p = subprocess.run(base + ["run", "-d", "--bundle", bundle, cid],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
            if p.returncode != 0:
                err.seek(0)
                raise RuntimeError(f"runc run: {err.read().strip()[:200]}")
        time.sleep(0.3)

        def op(verb):
            p = subprocess.run(base + [verb, cid], capture_output=True, text=True)
            return None if p.returncode == 0 else f"runc {verb}: {p.stderr.strip()[:200]}"

        pms, rms, errors, first = [], [], 0, None
        for i in range(int(warm) + int(n)):
            t0 = now_ms()
            e = op("pause")
            t1 = now_ms()
            e2 = op("resume")
            t2 = now_ms()
            if e or e2:
                errors += 1
                first = first or e or e2
            elif i >= int(warm):
                pms.append(round(t1 - t0, 4))
                rms.append(round(t2 - t1, 4))
        line(f"{label}-pause", pms, errors, first)
        line(f"{label}-resume", rms, errors, first)
    except RuntimeError as e:
        for op_ in ("pause", "resume"):
            line(f"{label}-{op_}", [], 1, str(e), skipped=True)
    finally:
        subprocess.run(base + ["delete", "-f", cid], capture_output=True)


# ---- the workload ------------------------------------------------------------------------


def cmd_gen(d, mb=None):
    args = [sys.executable, "-c", GEN, d] + ([mb] if mb else [])
    sys.stdout.write(subprocess.run(args, check=True, capture_output=True, text=True).stdout)


def box_exec(a, box, cmd, timeout=600):
    s, j = a.call("POST", f"/v1/sandboxes/{box}/exec", {"cmd": cmd, "timeout": timeout})
    if s != 200 or j.get("exit_code") != 0:
        raise RuntimeError(f"exec {cmd[:2]}: {s} {j}")
    return j["stdout"]


# ---- snapshots, restores, forks ----------------------------------------------------------


def cmd_snap(port, key, box, reps):
    a = Api(port, key)
    ms, errors, first, keep, sizes = [], 0, None, None, []
    for _ in range(int(reps)):
        t0 = now_ms()
        s, j = a.call("POST", f"/v1/sandboxes/{box}/snapshots", {})
        t1 = now_ms()
        if s != 201 or not isinstance(j, dict) or not j.get("id"):
            errors += 1
            first = first or f"snapshot: {s} {j}"
            if s in (404, 405, 501):
                break  # no snapshot route on this build: nothing to repeat
            continue
        ms.append(round(t1 - t0, 4))
        sizes.append({"size": j.get("size"), "data_bytes": j.get("data_bytes"),
                      "entries": j.get("entries")})
        if keep is None:
            keep = j["id"]
        else:
            a.call("DELETE", f"/v1/snapshots/{j['id']}")
    line("snapshot", ms, errors, first, id=keep, **(sizes[0] if sizes else {}))


def cmd_create(port, key, body, reps, digest=None):
    a = Api(port, key)
    body = json.loads(body)
    op = "restore" if "snapshot" in body else "create"
    ms, dms, errors, first, checked = [], [], 0, None, None
    for i in range(int(reps)):
        t0 = now_ms()
        s, j = a.call("POST", "/v1/sandboxes", body)
        t1 = now_ms()
        if s != 201 or not isinstance(j, dict) or not j.get("id"):
            errors += 1
            first = first or f"{op}: {s} {j}"
            continue
        ms.append(round(t1 - t0, 4))
        if digest and checked is None:
            try:
                got = json.loads(box_exec(a, j["id"], ["python3", "-c", GEN, "/workspace/w"]))
                checked = got.get("sha256") == digest
                if not checked:
                    first = first or f"restored files differ: {got}"
            except Exception as e:  # noqa: BLE001
                checked = False
                first = first or repr(e)
        t2 = now_ms()
        s, _ = a.call("DELETE", f"/v1/sandboxes/{j['id']}")
        dms.append(round(now_ms() - t2, 4))
        if s not in (200, 204):
            errors += 1
            first = first or f"delete: {s}"
    line(op, ms, errors, first, **({"content_checked": checked} if digest else {}))
    line(f"{op}-delete", dms, 0)


def cmd_fork(port, key, body, k):
    k = int(k)
    body = json.loads(body)

    def delete_all(a, ids):
        for b in ids:
            a.call("DELETE", f"/v1/sandboxes/{b}")

    # one after the other, one connection
    a = Api(port, key)
    ids, errors, first, each = [], 0, None, []
    t0 = now_ms()
    for _ in range(k):
        ta = now_ms()
        s, j = a.call("POST", "/v1/sandboxes", body)
        each.append(round(now_ms() - ta, 4))
        if s == 201:
            ids.append(j["id"])
        else:
            errors += 1
            first = first or f"{s} {j}"
    t1 = now_ms()
    delete_all(a, ids)
    line("fork-seq", [round(t1 - t0, 4)], errors, first, boxes=len(ids), each_ms=each)

    # K at once, K connections (connected before the clock starts)
    conns = [Api(port, key) for _ in range(k)]
    got = [None] * k
    go = threading.Barrier(k + 1)

    def one(i):
        go.wait()
        try:
            got[i] = conns[i].call("POST", "/v1/sandboxes", body)
        except Exception as e:  # noqa: BLE001
            got[i] = (0, repr(e))
        got[i] = got[i] + (now_ms(),)

    th = [threading.Thread(target=one, args=(i,)) for i in range(k)]
    for t in th:
        t.start()
    go.wait()
    t0 = now_ms()
    for t in th:
        t.join()
    t1 = max(g[2] for g in got)
    ids = [g[1]["id"] for g in got if g[0] == 201]
    bad = [g for g in got if g[0] != 201]
    each = sorted(round(g[2] - t0, 4) for g in got if g[0] == 201)
    delete_all(a, ids)
    line("fork-par", [round(t1 - t0, 4)], len(bad), f"{bad[0][0]} {bad[0][1]}" if bad else None,
         boxes=len(ids), each_ms=each)


# ---- the peers: tar | zstd -3 on the host ----------------------------------------------------


def sh(cmd):
    t0 = now_ms()
    subprocess.run(["bash", "-o", "pipefail", "-c", cmd], check=True)
    return round(now_ms() - t0, 4)


def cmd_peer(src, out, unpack, reps):
    reps = int(reps)
    for threads in ("1", "0"):
        ms = []
        for _ in range(reps):
            ms.append(sh(f"tar -cf - -C '{src}' . | zstd -3 -T{threads} -q -c > '{out}'"))
        line(f"tar-zstd-T{threads}", ms, 0, size=os.path.getsize(out))
    # What husk does besides: the archive made durable (fsync), and the
    # two digests its path computes (the snapshot's SHA-256, the store's
    # MD5 ETag), alone.
    ms = [sh(f"tar -cf - -C '{src}' . | zstd -3 -T1 -q -c > '{out}' && sync '{out}'") for _ in range(reps)]
    line("tar-zstd-T1-fsync", ms, 0)
    # openssl: the libcrypto husk links (coreutils' sha256sum has its own,
    # slower code)
    for d in ("sha256", "md5"):
        line(d, [sh(f"openssl dgst -{d} '{out}' > /dev/null") for _ in range(reps)], 0)
    ums = []
    for _ in range(reps):
        for e in os.listdir(unpack):
            p = os.path.join(unpack, e)
            shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
        ums.append(sh(f"zstd -d -q -c '{out}' | tar -xf - -C '{unpack}'"))
    line("unpack", ums, 0)


# ---- the report ---------------------------------------------------------------------------


def pct(v, q):
    if not v:
        return float("nan")
    v = sorted(v)
    i = q * (len(v) - 1)
    lo = int(i)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (i - lo)


def cmd_report(path):
    rows, info = {}, {}
    for l in open(path):
        l = l.strip()
        if l:
            r = json.loads(l)
            if r.get("op") == "info":
                info.update(r)
            else:
                rows[r["label"]] = r
    p50 = lambda k: pct(rows.get(k, {}).get("ms", []), .5)  # noqa: E731

    def table(names):
        print(f"{'':46} {'n':>4} {'p50 ms':>9} {'p90 ms':>9} {'min':>9} {'max':>9}  errors")
        for k, name in names:
            r = rows.get(k)
            if not r:
                continue
            if r.get("skipped"):
                print(f"{name:46} skipped: {r.get('first_error', '')}")
                continue
            v = r["ms"]
            mn = min(v) if v else float("nan")
            mx = max(v) if v else float("nan")
            print(f"{name:46} {len(v):4d} {pct(v, .5):9.2f} {pct(v, .9):9.2f} {mn:9.2f} {mx:9.2f}  {r['errors']}"
                  + (f"  first: {r['first_error'][:160]}" if r.get("first_error") else ""))

    print("== pause / resume (ms)")
    names = []
    for w, what in (("sleep", "4 sleeping"), ("busy", "busy loop")):
        names += [(f"http-{w}-spaced-pause", f"pause, HTTP, {what}, spaced"),
                  (f"http-{w}-spaced-resume", f"resume, HTTP, {what}, spaced"),
                  (f"http-{w}-pause", f"pause, HTTP, {what}, back to back"),
                  (f"http-{w}-resume", f"resume, HTTP, {what}, back to back"),
                  (f"kernel-v2-{w}-spaced-freeze", f"peer: v2 freeze, {what}, spaced, poll"),
                  (f"kernel-v2-{w}-spaced-thaw", f"peer: v2 thaw, {what}, spaced, poll"),
                  (f"kernel-v2-{w}-freeze", f"peer: v2 freeze, {what}, b2b, poll"),
                  (f"kernel-v2-{w}-thaw", f"peer: v2 thaw, {what}, b2b, poll"),
                  (f"kernel-v2-{w}-spin-freeze", f"peer: v2 freeze, {what}, b2b, re-read"),
                  (f"kernel-v2-{w}-spin-thaw", f"peer: v2 thaw, {what}, b2b, re-read"),
                  (f"kernel-v1-{w}-freeze", f"peer: v1 FROZEN, {what}"),
                  (f"kernel-v1-{w}-thaw", f"peer: v1 THAWED, {what}"),
                  (f"peer-runc-{w}-pause", f"peer: runc pause, {what}"),
                  (f"peer-runc-{w}-resume", f"peer: runc resume, {what}")]
    names.append(("http-get", "GET the box, HTTP (a request's floor)"))
    table(names)
    if info.get("runc"):
        print(f"runc: {info['runc']}")
    print()
    print("== snapshots (ms)")
    table([("http-snapshot", "snapshot, HTTP"),
           ("peer-tar-zstd-T1", "peer: tar -c | zstd -3 -T1 (disk)"),
           ("peer-tar-zstd-T0", "peer: tar -c | zstd -3 -T0 (disk)"),
           ("peer-tar-zstd-T1-fsync", "peer: tar -c | zstd -3 -T1, then fsync"),
           ("peer-sha256", "peer: openssl dgst -sha256 of that archive"),
           ("peer-md5", "peer: openssl dgst -md5 of that archive"),
           ("http-restore", "create from the snapshot, HTTP"),
           ("http-create", "plain create, HTTP (same limits)"),
           ("peer-unpack", "peer: zstd -d | tar -x (into tmpfs)"),
           ("http-restore-delete", "delete of a restored box, HTTP"),
           ("http-create-delete", "delete of a plain box, HTTP"),
           ("http-fork-seq", f"fork: {info.get('fork', '?')} creates from it, one by one"),
           ("http-fork-par", f"fork: {info.get('fork', '?')} creates from it, at once"),
           ("http-plain-fork-seq", f"control: {info.get('fork', '?')} plain creates, one by one"),
           ("http-plain-fork-par", f"control: {info.get('fork', '?')} plain creates, at once"),
           ("http-snapdelete", "DELETE the snapshot")])
    s = rows.get("http-snapshot", {})
    pt = rows.get("peer-tar-zstd-T1", {})
    if s.get("size"):
        print(f"archive: husk {s['size'] / 1e6:.1f} MB ({s.get('data_bytes', 0) / 1e6:.1f} MB of file data, "
              f"{s.get('entries')} entries); tar | zstd -3 -T1 {pt.get('size', 0) / 1e6:.1f} MB")
    for k in ("files", "box_tmpfs", "host_tmpfs", "store", "restored"):
        if k in info:
            print(f"{k}: {info[k]}")
    print()

    verdict = lambda ok: "not measured" if ok is None else ("met" if ok else "NOT met")  # noqa: E731
    nan = lambda v: v != v  # noqa: E731
    print("== targets (reported, not enforced)")
    for w in ("sleep", "busy"):
        for sp, swhat in (("-spaced", "spaced"), ("", "back to back")):
            for op in ("pause", "resume"):
                v = p50(f"http-{w}{sp}-{op}")
                print(f"{op} p50 <= 5 ms (cgroup v2, {w} box, {swhat}): {v:.2f} ms -> "
                      f"{verdict(None if nan(v) else v <= 5)}")
    sn, tz = p50("http-snapshot"), p50("peer-tar-zstd-T1")
    r = sn / tz if tz == tz and tz else float("nan")
    print(f"snapshot <= 1.5 x tar | zstd -3 -T1: {sn:.0f} / {tz:.0f} ms = {r:.2f} x -> {verdict(None if nan(r) else r <= 1.5)}")
    tz0 = p50("peer-tar-zstd-T0")
    if tz0 == tz0 and sn == sn:
        print(f"  (vs -T0: {sn / tz0:.2f} x)")
    rs, un, cr = p50("http-restore"), p50("peer-unpack"), p50("http-create")
    bound = 1.5 * un + cr
    r = rs / bound if bound == bound and bound else float("nan")
    print(f"restore <= 1.5 x unpack + one create: {rs:.0f} ms vs 1.5 x {un:.0f} + {cr:.0f} = {bound:.0f} ms "
          f"({r:.2f} of it) -> {verdict(None if nan(r) else r <= 1)}")
    for k, what in (("http-fork-seq", "one by one"), ("http-fork-par", "at once")):
        f = p50(k)
        n = rows.get(k, {}).get("boxes", 0)
        k10 = int(info.get("fork", 10)) * rs
        r = f / k10 if k10 == k10 and k10 else float("nan")
        ok = None if nan(r) or not n else (r <= 1 and n == int(info.get("fork", 10)))
        print(f"fork of {info.get('fork', '?')} ({what}) <= {info.get('fork', '?')} x one restore: {f:.0f} ms vs "
              f"{k10:.0f} ms ({r:.2f} of it; {n} boxes) -> {verdict(ok)}")
    for k, what in (("http-fork-seq", "each create, in order"), ("http-fork-par", "each answer, from the start"),
                    ("http-plain-fork-seq", "control, each plain create, in order")):
        e = rows.get(k, {}).get("each_ms")
        if e:
            print(f"fork ({what}): " + " ".join(f"{x:.0f}" for x in e) + " ms")
    c = rows.get("http-restore", {}).get("content_checked")
    if c is not None:
        print(f"restored content identical to the host's copy: {'yes' if c else 'NO'}")


def main():
    a = sys.argv[1:]
    if not a:
        sys.exit(__doc__)
    cmd, args = a[0], a[1:]
    {"pause": cmd_pause, "freezer": cmd_freezer, "runc": cmd_runc, "gen": cmd_gen, "snap": cmd_snap,
     "create": cmd_create, "fork": cmd_fork, "peer": cmd_peer, "report": cmd_report,
     "digest": lambda d: cmd_gen(d)}[cmd](*args)


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main()
