#!/usr/bin/env python3
"""Helpers of bench/serve.sh (the `husk serve` benchmarks).

  serve.py prefix DATA               this daemon's cgroup prefix ("box-<fnv1a>-")
  serve.py snap DATA PID [LABEL]     one JSON line: host memory (/proc/meminfo,
                                     /proc/slabinfo), this daemon's boxes
                                     (cgroups, processes, their memory
                                     charges) and the daemon's own RSS and fds
  serve.py settle DATA PID [LABEL]   the same, once /proc/meminfo has stopped
                                     moving (at most 30 s)
  serve.py leftovers DATA [--clean]  what this daemon left behind: its box
                                     cgroups in every hierarchy, processes in
                                     them, DATA/boxes entries; --clean kills
                                     those processes (by pid) and removes the
                                     cgroups.  Exit 1 if anything was left.
  serve.py density DIR COUNT         the density phase's JSON line from its files
  serve.py files DIR SIZE REPS       the files phase's JSON line from its files
  serve.py count DATA                number of this daemon's box processes
  serve.py oneshot TSV N             stats of a spawnbench run, as a JSON line
  serve.py busy [SECONDS]            % of all CPUs busy meanwhile (other work)
  serve.py foreign DATA              box processes on the machine that are
                                     not this daemon's (other husk users)
  serve.py report RESULTS [JSON_OUT] the tables, ratios and verdicts

Memory accounting (snap): the host's figure is
    used = MemTotal - MemFree - Buffers - (Cached - Shmem)
i.e. every page the kernel handed out except the page cache of files (which
is shared, reclaimable, and moved by unrelated disk I/O such as SQLite's
writes); tmpfs/shmem pages, anonymous memory, all slab (reclaimable
included: dentries and inodes of the boxes' mounts are real cost), kernel
stacks, page tables, per-cpu and vmalloc areas all count.  The boxes' own
memory cgroups are summed too, but they only see what was charged after each
box's init entered its cgroup: the namespaces, mounts and cgroups created
before (and the kernel objects charged to the daemon) are missing from them,
so the host figure is the one to judge by.
"""
import glob
import json
import math
import os
import re
import signal
import statistics
import sys
import time


def fnv_prefix(data):
    h = 2166136261
    for b in os.path.realpath(data).encode():
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return f"box-{h:08x}-"


def db_ids(data):
    """Every box id in the daemon's database (read-only; WAL lets us read
    while it writes)."""
    import sqlite3
    path = os.path.join(os.path.realpath(data), "husk.db")
    if not os.path.exists(path):
        return set()
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        ids = {r[0] for r in con.execute("SELECT id FROM boxes")}
        con.close()
        return ids
    except sqlite3.Error:
        return set()


class Ours:
    """Which box cgroups are this daemon's: named with its prefix
    ("box-<fnv1a of the data dir>-<id>", pool boxes included), or, for
    builds that name them "box-<id>", holding an id of its database."""

    def __init__(self, data):
        self.prefix = fnv_prefix(data)
        self.ids = db_ids(data)

    def name(self, n):
        if n.startswith(self.prefix):
            return True
        return n.startswith("box-") and (n[4:] in self.ids or n.rsplit("-", 1)[-1] in self.ids)

    def cgroup_text(self, text):
        """Does a /proc/PID/cgroup text put the process in one of ours?"""
        for m in re.finditer(r"/husk/(box-[^/\n]+)", text):
            if self.name(m.group(1)):
                return True
        return False


def husk_parents():
    """Every husk cgroup parent: one per v1 hierarchy, and the v2 one."""
    return sorted(set(glob.glob("/sys/fs/cgroup/husk") + glob.glob("/sys/fs/cgroup/*/husk")))


def our_cgroups(ours):
    out = []
    for parent in husk_parents():
        try:
            out += [os.path.join(parent, n) for n in os.listdir(parent) if ours.name(n)]
        except OSError:
            pass
    return out


def procs_in(ours, foreign=False):
    """pids in one of our box cgroups (foreign: in any other box cgroup)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            cg = open(f"/proc/{d}/cgroup").read()
        except OSError:
            continue
        mine = ours.cgroup_text(cg)
        if (mine and not foreign) or (foreign and not mine and "/husk/box-" in cg):
            pids.append(int(d))
    return pids


def meminfo():
    m = {}
    for line in open("/proc/meminfo"):
        k, v = line.split(":", 1)
        m[k] = int(v.split()[0]) * 1024
    m["used_nocache"] = m["MemTotal"] - m["MemFree"] - m["Buffers"] - (m["Cached"] - m["Shmem"])
    return m


def slabinfo():
    s = {}
    try:
        for line in open("/proc/slabinfo"):
            if line.startswith(("slabinfo", "#")):
                continue
            f = line.split()
            # name active_objs num_objs objsize objperslab pagesperslab : ... : slabdata active_slabs num_slabs
            s[f[0]] = int(f[14]) * int(f[5]) * 4096  # num_slabs x pages per slab
    except (OSError, IndexError, ValueError):
        pass
    return s


def read_int(path):
    try:
        return int(open(path).read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def rss_and_fds(pid):
    rss = fds = 0
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        pass
    return rss, fds


def children(pid):
    try:
        return [int(x) for x in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def cmd_snap(data, pid, label="", extra=None):
    ours = Ours(data)
    prefix = ours.prefix
    cgs = our_cgroups(ours)
    mem_usage = kmem_usage = 0
    n_memcg = 0
    for cg in cgs:
        parent = os.path.dirname(os.path.dirname(cg))
        if parent.endswith("/memory"):  # v1
            n_memcg += 1
            mem_usage += read_int(cg + "/memory.usage_in_bytes") or 0
            kmem_usage += read_int(cg + "/memory.kmem.usage_in_bytes") or 0
        elif os.path.exists(cg + "/memory.current"):  # v2
            n_memcg += 1
            mem_usage += read_int(cg + "/memory.current") or 0
    boxes = procs_in(ours)
    drss, dfds = rss_and_fds(pid)
    # the daemon's helpers (the spawner) are its children outside the boxes
    helpers = [c for c in children(pid) if c not in set(boxes)]
    hrss = sum(rss_and_fds(c)[0] for c in helpers)
    box_rss = sum(rss_and_fds(p)[0] for p in boxes)
    out = {"label": label, "t": time.time(), "meminfo": meminfo(), "slab": slabinfo(),
           "prefix": prefix, "cgroups": len(cgs), "hierarchies": len(husk_parents()), "memcgs": n_memcg,
           "memcg_usage": mem_usage, "memcg_kmem": kmem_usage, "box_procs": len(boxes),
           "box_rss": box_rss, "daemon_rss": drss, "daemon_fds": dfds, "helper_rss": hrss,
           "threads": len(os.listdir(f"/proc/{pid}/task")) if os.path.isdir(f"/proc/{pid}/task") else 0,
           "data_boxes": len(os.listdir(os.path.join(data, "boxes"))) if os.path.isdir(os.path.join(data, "boxes")) else 0}
    out.update(extra or {})
    print(json.dumps(out))


def cmd_settle(data, pid, label, tol_mib=2.0, max_s=30.0):
    """A snapshot once the host figure has settled: deferred frees of earlier
    work (RCU, cgroup and namespace teardown, writeback) still move it for a
    few seconds.  Settled: it moved less than tol_mib over each of the last
    two seconds (or max_s passed)."""
    t0 = time.time()
    last, calm = meminfo()["used_nocache"], 0
    while time.time() - t0 < max_s and calm < 2:
        time.sleep(1)
        cur = meminfo()["used_nocache"]
        calm = calm + 1 if abs(cur - last) < tol_mib * 1048576 else 0
        last = cur
    cmd_snap(data, pid, label, {"settle_s": round(time.time() - t0, 1)})


def cmd_leftovers(data, clean):
    ours = Ours(data)
    prefix = ours.prefix
    cgs = our_cgroups(ours)
    pids = procs_in(ours)
    bdir = os.path.join(data, "boxes")
    entries = os.listdir(bdir) if os.path.isdir(bdir) else []
    left = bool(cgs or pids or entries)
    print(f"leftovers of {data} (cgroups {prefix}* or box-<id of its database>): {len(cgs)} cgroups, {len(pids)} processes, "
          f"{len(entries)} entries in boxes/ -> {'LEFT BEHIND' if left else 'nothing left'}")
    if clean and (pids or cgs):
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        deadline = time.time() + 10
        while time.time() < deadline and procs_in(ours):
            time.sleep(0.1)
        for cg in sorted(cgs, key=len, reverse=True):
            try:
                os.rmdir(cg)
            except OSError as e:
                print(f"  cannot remove {cg}: {e}")
        print(f"  cleaned: killed {len(pids)} processes, removed the cgroups")
    return 1 if left else 0


def cmd_oneshot(path, n):
    """Stats of a spawnbench run (label <tab> run <tab> ns lines)."""
    runs, failed = {}, []
    for line in open(path):
        label, run, v = line.rstrip("\n").split("\t")
        if label.startswith("#"):
            continue
        if run == "FAILED":
            failed.append(label)
        else:
            runs.setdefault(label, []).append(int(v) / 1e6)
    pct = lambda xs, p: sorted(xs)[max(0, math.ceil(p / 100 * len(xs)) - 1)]
    stats = {l: {"median": statistics.median(x), "p95": pct(x, 95), "min": min(x), "n": len(x)}
             for l, x in runs.items()}
    print(json.dumps({"label": "oneshot", "n": n, "stats": stats, "failed": failed}))


def cpu_times():
    f = open("/proc/stat").readline().split()[1:9]
    v = [int(x) for x in f]
    return sum(v), v[3] + v[4]


def cmd_busy(secs):
    """Share of the machine's CPUs busy during `secs` (other work: the
    benchmark itself is idle while this runs)."""
    t0, i0 = cpu_times()
    time.sleep(secs)
    t1, i1 = cpu_times()
    print(f"{100 * (1 - (i1 - i0) / max(1, t1 - t0)):.0f}")


def cmd_foreign(data):
    print(len(procs_in(Ours(data), foreign=True)))


MEMINFO_PARTS = ("SUnreclaim", "SReclaimable", "Shmem", "AnonPages", "KernelStack", "PageTables", "Percpu",
                 "VmallocUsed")


def cmd_density(d, count):
    """One JSON line from the density phase's files in directory d."""
    rd = lambda n: json.loads(open(os.path.join(d, n)).read().strip().splitlines()[-1])
    before, up, after = rd("snap-before.json"), rd("snap-up.json"), rd("snap-after.json")
    before0 = rd("snap-before0.json") if os.path.exists(os.path.join(d, "snap-before0.json")) else before
    create, delete = rd("create.json"), rd("delete.json")
    n = max(1, create.get("n", 0))
    mb, mu = before["meminfo"], up["meminfo"]
    dm = lambda k: (mu[k] - mb[k]) / n
    per = {"host used (MemTotal-MemFree-Buffers-Cached+Shmem)": dm("used_nocache"),
           "  of which slab (SUnreclaim)": dm("SUnreclaim"),
           "  of which slab (SReclaimable)": dm("SReclaimable"),
           "  of which shmem/tmpfs (Shmem)": dm("Shmem"),
           "  of which anonymous (AnonPages)": dm("AnonPages"),
           "  of which kernel stacks (KernelStack)": dm("KernelStack"),
           "  of which page tables (PageTables)": dm("PageTables"),
           "  of which per-cpu (Percpu)": dm("Percpu"),
           "  of which vmalloc (VmallocUsed)": dm("VmallocUsed"),
           "host MemFree decrease (page cache included)": -dm("MemFree"),
           "host MemTotal-MemAvailable": ((mu["MemTotal"] - mu["MemAvailable"]) - (mb["MemTotal"] - mb["MemAvailable"])) / n,
           "boxes' memory cgroups (usage, kmem included)": (up["memcg_usage"] - before["memcg_usage"]) / n,
           "  of which kmem (v1 memory.kmem.usage_in_bytes)": (up["memcg_kmem"] - before["memcg_kmem"]) / n,
           "boxes' processes RSS (shared pages counted per box)": (up["box_rss"] - before["box_rss"]) / n}
    other = per["host used (MemTotal-MemFree-Buffers-Cached+Shmem)"] - sum(
        v for k, v in per.items() if k.startswith("  of which"))
    per["  of which other kernel memory (the rest)"] = other
    per["sum of the per-type counters above (slab..vmalloc)"] = sum(
        per[k] for k in per if k.startswith("  of which") and k.rstrip(")").endswith(MEMINFO_PARTS))
    slab = sorted(((k, (up["slab"].get(k, 0) - before["slab"].get(k, 0)) / n) for k in up["slab"]),
                  key=lambda kv: -kv[1])[:8]
    residual = after["meminfo"]["used_nocache"] - before["meminfo"]["used_nocache"]
    released = (up["meminfo"]["used_nocache"] - after["meminfo"]["used_nocache"]) / n
    drift = before["meminfo"]["used_nocache"] - before0["meminfo"]["used_nocache"]
    drift_s = before["t"] - before0["t"]
    out = {"label": "density", "count": count, "clients": create.get("clients"), "created": create.get("n", 0),
           "create_errors": create.get("errors"), "start_s": create.get("wall_s", 0),
           "create_p50": create.get("total", {}).get("p50", 0), "create_p95": create.get("total", {}).get("p95", 0),
           "running_api": int(open(os.path.join(d, "running.txt")).read().strip() or 0),
           "procs": up["box_procs"], "cgroups": up["cgroups"], "hierarchies": up.get("hierarchies", 1),
           "per_box": per,
           "slab_top": [(k, v) for k, v in slab if v > 0],
           "daemon_fds_per_box": (up["daemon_fds"] - before["daemon_fds"]) / n,
           "daemon_rss_per_box": (up["daemon_rss"] + up["helper_rss"] - before["daemon_rss"] - before["helper_rss"]) / n,
           "threads": up["threads"], "delete_s": delete.get("wall_s", 0), "delete_errors": delete.get("errors"),
           "deleted": delete.get("n", 0),
           "after_leftovers": open(os.path.join(d, "leftovers.txt")).read().strip().split("-> ")[-1],
           "settle_before_s": before0.get("settle_s"), "settle_after_s": after.get("settle_s"),
           "residual": residual, "released_per_box": released, "drift": drift, "drift_s": drift_s,
           "before": before, "up": up, "after": after}
    print(json.dumps(out))


def cmd_files(d, size, reps):
    """One JSON line from the files phase: times.tsv holds `kind <tab> seconds`."""
    t = {}
    for line in open(os.path.join(d, "times.tsv")):
        k, v = line.split()
        t.setdefault(k, []).append(float(v))
    out = {"label": "files", "size": size, "reps": reps,
           "sha_ok": open(os.path.join(d, "sha.txt")).read().strip() == "ok",
           "names": {"cp": "cp SRC DST (same filesystem as SRC)", "cp_tmpfs": "cp SRC /dev/shm/DST (into tmpfs)",
                     "upload": "upload: curl -T SRC PUT .../files",
                     "download": "download: curl -o DST GET .../files",
                     "download_null": "download to /dev/null (API alone)",
                     "roundtrip": "upload + download (2 x size moved)"},
           "samples": t}
    for k, v in t.items():
        out[k] = statistics.median(v)
    if "upload" in t and "download" in t:
        out["roundtrip"] = statistics.median([a + b for a, b in zip(t["upload"], t["download"])])
    print(json.dumps(out))


# ---- report -------------------------------------------------------------------


def load(path):
    res = []
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            res.append(json.loads(line))
    return res


def mib(x):
    return x / 1048576


def cmd_report(path, json_out=""):
    rs = load(path)
    by = {r.get("label", ""): r for r in rs}
    verdicts = []
    meta = by.get("meta", {})
    configs = [c for c in ("pool0", f"pool{meta.get('pool', '')}") if c]
    configs = list(dict.fromkeys(configs))
    oneshot = by.get("oneshot", {}).get("stats", {})
    bw = oneshot.get("bwrap", {}).get("median")

    print("== one-shot `true` in this run (ms, %d runs each, back to back)" % by.get("oneshot", {}).get("n", 0))
    print(f"{'tool':<9} {'median':>8} {'p95':>8}")
    for label, s in oneshot.items():
        print(f"{label:<9} {s['median']:8.2f} {s['p95']:8.2f}")
    print()

    def cfgname(c):
        return "no pool (--pool 0)" if c == "pool0" else f"warm pool (--pool {c[4:]})"

    print("== API lifecycle: create + exec `true` + delete over HTTP on loopback (ms)")
    print(f"{'daemon':<24} {'clients':>7} {'gap':>5} {'n':>6} {'err':>4} {'p50':>8} {'p95':>8} {'p99':>8} "
          f"{'create':>7} {'exec':>6} {'delete':>7} {'per s':>8} {'CPU ms':>7} {'p50/bwrap':>9}")
    for c in configs:
        for kind in ("lc1", "lc1gap", "lc16"):
            r = by.get(f"{c}-{kind}")
            if not r:
                continue
            if not r.get("n"):
                print(f"{cfgname(c):<24} {r.get('clients', '?'):>7} FAILED ({r.get('errors', '?')} errors)")
                continue
            t = r["total"]
            ratio = f"{t['p50'] / bw:8.2f}x" if bw else "?"
            print(f"{cfgname(c):<24} {r['clients']:>7} {r['gap_ms']:>5} {r['n']:>6} {r['errors']:>4} "
                  f"{t['p50']:8.2f} {t['p95']:8.2f} {t['p99']:8.2f} {r['create']['p50']:7.2f} "
                  f"{r['exec']['p50']:6.2f} {r['delete']['p50']:7.2f} {r['rate']:8.1f} "
                  f"{(r.get('cpu_ms_per_op') or 0):7.2f} {ratio:>9}")
    ncpu = os.cpu_count() or 1
    print("create/exec/delete: p50 of each request; gap: idle ms before each lifecycle of a client;"
          " per s: lifecycles completed per second, all clients;\nCPU ms: CPU time of the whole machine"
          f" per lifecycle (all processes and kernel threads; 500/s on {ncpu} CPUs allows {ncpu * 1000 / 500:.1f} ms)")
    for c in configs:
        r1, r16 = by.get(f"{c}-lc1"), by.get(f"{c}-lc16")
        if r1 and r1.get("n") and bw:
            ok = r1["total"]["p50"] < bw
            verdicts.append(("2", f"lifecycle p50, 1 client, {cfgname(c)}", f"{r1['total']['p50']:.2f} ms",
                             f"< bwrap one-shot {bw:.2f} ms", ok, c != "pool0"))
        rg = by.get(f"{c}-lc1gap")
        if rg and rg.get("n") and bw:
            ok = rg["total"]["p50"] < bw
            verdicts.append(("2", f"lifecycle p50, 1 client, {rg['gap_ms']} ms apart, {cfgname(c)}",
                             f"{rg['total']['p50']:.2f} ms", f"< bwrap one-shot {bw:.2f} ms", ok, c != "pool0"))
        if r16 and r16.get("n"):
            ok = r16["rate"] >= 500
            verdicts.append(("2", f"lifecycles/s, 16 clients, {cfgname(c)}", f"{r16['rate']:.0f}/s", ">= 500/s",
                             ok, c != "pool0"))
    print()

    print("== exec `true` in one live box, one client, vs bare fork+exec in the same run")
    print(f"{'what':<36} {'n':>6} {'per s':>8} {'p50 ms':>8} {'p95 ms':>8} {'CPU ms':>7} {'ratio':>8}")
    fe, sp = by.get("forkexec"), by.get("spawn")
    for label, name in (("forkexec", "bare fork+exec+wait"), ("spawn", "bare posix_spawn+wait")):
        r = by.get(label)
        if r and r.get("n"):
            print(f"{name:<36} {r['n']:>6} {r['rate']:8.0f} {r['total']['p50']:8.3f} {r['total']['p95']:8.3f} "
                  f"{(r.get('cpu_ms_per_op') or 0):7.3f}")
    for c in configs:
        r = by.get(f"{c}-exec")
        if not r or not r.get("n"):
            continue
        ratio = r["rate"] / fe["rate"] if fe and fe.get("rate") else None
        print(f"{'exec via API, ' + cfgname(c):<36} {r['n']:>6} {r['rate']:8.0f} {r['total']['p50']:8.3f} "
              f"{r['total']['p95']:8.3f} {(r.get('cpu_ms_per_op') or 0):7.3f} {(f'{ratio:7.2f}x' if ratio else '?'):>8}")
        if ratio is not None:
            verdicts.append(("3", f"execs/s vs bare fork+exec, {cfgname(c)}", f"{r['rate']:.0f}/s = {ratio:.2f} x bare",
                             f">= 0.5 x bare ({0.5 * fe['rate']:.0f}/s)", ratio >= 0.5, True))
    if sp and sp.get("rate") and fe and fe.get("rate"):
        print(f"(posix_spawn is {sp['rate'] / fe['rate']:.2f} x fork+exec; the target is judged against fork+exec,"
              " what init does per command)")
    print()

    d = by.get("density")
    if d:
        print(f"== density: {d['count']} idle boxes ({d['clients']} clients creating)")
        print(f"started: {d['created']} of {d['count']} in {d['start_s']:.2f} s ({d['created'] / d['start_s']:.0f} boxes/s; "
              f"create p50 {d['create_p50']:.1f} ms, p95 {d['create_p95']:.1f} ms); running per the API: {d['running_api']}, "
              f"processes in their cgroups: {d['procs']}, their cgroup directories: {d['cgroups']} "
              f"({d['hierarchies']} hierarchies)")
        per = d["per_box"]
        per.setdefault("sum of the per-type counters above (slab..vmalloc)", sum(
            per[k] for k in per if k.startswith("  of which") and k.rstrip(")").endswith(MEMINFO_PARTS)))
        print("host memory per idle box (kernel accounting, delta with all boxes up / number of boxes):")
        for k, v in per.items():
            print(f"  {k:<44} {v / 1024:9.1f} KiB")
        if d.get("slab_top"):
            print("largest slab cache growth per box: " +
                  ", ".join(f"{n} {v / 1024:.1f} KiB" for n, v in d["slab_top"]))
        print(f"daemon: {d['daemon_fds_per_box']:.1f} fds and {d['daemon_rss_per_box'] / 1024:.1f} KiB RSS per box; "
              f"threads {d['threads']}")
        print(f"snapshots: before once the host figure had settled ({d.get('settle_before_s')} s), with all up 3 s "
              f"after the last create, after deletion once settled again ({d.get('settle_after_s')} s)")
        print(f"cross-checks: host memory freed by deleting them, per box: {d['released_per_box'] / 1024:.1f} KiB; "
              f"drift of the host figure with no box change in the {d['drift_s']:.1f} s before the baseline: {mib(d['drift']):+.1f} MiB "
              f"({d['drift'] / max(1, d['count']) / 1024:+.1f} KiB per box; other work on the machine)")
        print(f"deleted {d.get('deleted', '?')} of {d['created']} in {d['delete_s']:.2f} s "
              f"({d.get('delete_errors', '?')} errors); after deletion: {d['after_leftovers']}; "
              f"host memory not returned: {mib(d['residual']):.1f} MiB ({d['residual'] / max(1, d['count']) / 1024:.1f} KiB per box)")
        worst = max(per["host used (MemTotal-MemFree-Buffers-Cached+Shmem)"],
                    per["sum of the per-type counters above (slab..vmalloc)"])
        verdicts.append(("4", "host memory per idle box (the larger of used, sum)", f"{worst / 1048576:.2f} MiB",
                         "<= 1 MiB", worst <= 1048576, True))
        verdicts.append(("4", f"time to start {d['count']} boxes", f"{d['start_s']:.2f} s", "<= 10 s",
                         d["start_s"] <= 10 and d["created"] == d["count"], True))
        verdicts.append(("4", "all deleted through the API, nothing left",
                         f"{d.get('deleted', 0)} deleted, {d['after_leftovers']}", "all, nothing left",
                         d["after_leftovers"].endswith("nothing left") and d.get("deleted") == d["created"], True))
        print()

    f = by.get("files")
    if f:
        print(f"== files: {mib(f['size']):.0f} MiB upload then download through the API vs cp (median of {f['reps']}, MiB/s)")
        print(f"{'what':<40} {'s':>7} {'MiB/s':>8} {'vs cp':>7}")
        cp = f["cp"]
        for k in ("cp", "cp_tmpfs", "upload", "download", "download_null", "roundtrip"):
            if k not in f:
                continue
            s = f[k]
            print(f"{f['names'][k]:<40} {s:7.2f} {mib(f['size']) * (2 if k == 'roundtrip' else 1) / s:8.0f} "
                  f"{(cp * (2 if k == 'roundtrip' else 1)) / s:6.2f}x")
        print(f"sha256 of every download equals the source: {'yes' if f['sha_ok'] else 'NO'}")
        for k in ("upload", "download"):
            r = cp / f[k]
            verdicts.append(("5", f"{k} throughput vs cp", f"{r:.2f} x cp", ">= 0.5 x cp", r >= 0.5 and f["sha_ok"], True))
        print()

    print("== targets")
    for num, what, got, want, ok, judged in verdicts:
        tag = ("MET" if ok else "NOT MET") if judged else ("(met)" if ok else "(not met: no pool, for reference)")
        print(f"{num}. {what:<58} {got:>22}  target {want:<26} {tag}")
    if json_out:
        with open(json_out, "w") as fh:
            json.dump({"results": rs, "verdicts": verdicts}, fh, indent=1)
        print(f"\nresults written to {json_out}")
    return 0


def main():
    a = sys.argv[1:]
    if not a:
        print(__doc__)
        return 2
    if a[0] == "prefix":
        print(fnv_prefix(a[1]))
    elif a[0] == "snap":
        cmd_snap(a[1], int(a[2]), a[3] if len(a) > 3 else "")
    elif a[0] == "settle":
        cmd_settle(a[1], int(a[2]), a[3] if len(a) > 3 else "")
    elif a[0] == "leftovers":
        return cmd_leftovers(a[1], "--clean" in a)
    elif a[0] == "density":
        cmd_density(a[1], int(a[2]))
    elif a[0] == "files":
        cmd_files(a[1], int(a[2]), int(a[3]))
    elif a[0] == "foreign":
        cmd_foreign(a[1])
    elif a[0] == "count":
        print(len(procs_in(Ours(a[1]))))
    elif a[0] == "oneshot":
        cmd_oneshot(a[1], int(a[2]))
    elif a[0] == "busy":
        cmd_busy(float(a[1]) if len(a) > 1 else 1.0)
    elif a[0] == "report":
        return cmd_report(a[1], a[2] if len(a) > 2 else "")
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
