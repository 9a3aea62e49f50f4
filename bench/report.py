#!/usr/bin/env python3
"""Tables for bench/run.sh.

Usage: report.py TMPDIR CMDLINES N GAP_MS [JSON_OUT]

TMPDIR holds samples-0.tsv (back to back) and, with GAP_MS > 0,
samples-GAP_MS.tsv (after idle), as written by spawnbench: one line per
timed run, `label <tab> run <tab> ns`, or `label <tab> FAILED <tab> status`,
and a last `#cpu <tab> - <tab> ns` line; and cpu-0 / cpu-GAP_MS, two lines
each (before and after the pass): `ns-since-epoch CLK_TCK <cpu line of
/proc/stat>`.
CMDLINES: `label <tab> argv joined by tabs` for each command.
Exit status 1 if husk itself failed, else 0: the target is reported, not
enforced.
"""
import json
import math
import shlex
import statistics
import sys


def pct(xs, p):
    """Nearest-rank percentile."""
    s = sorted(xs)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def load(path):
    order, runs, failed, cpu = [], {}, {}, 0.0
    for line in open(path):
        label, run, value = line.rstrip("\n").split("\t")
        if label == "#cpu":
            cpu = int(value) / 1e6
            continue
        if label not in order:
            order.append(label)
        if run == "FAILED":
            failed[label] = int(value)
        else:
            runs.setdefault(label, []).append(int(value) / 1e6)  # ms
    stats = {l: {"median": statistics.median(x), "p95": pct(x, 95), "min": min(x),
                 "mean": statistics.fmean(x), "n": len(x)} for l, x in runs.items()}
    return order, runs, failed, stats, cpu


def foreign_cpu(path, ours_ms):
    """Share of one CPU used by work other than the benchmark's processes
    during a pass (kernel threads finishing the boxes' teardown included)."""
    try:
        (t0, hz, *a), (t1, _, *b) = [l.split() for l in open(path)]
    except (OSError, ValueError):
        return None
    busy = lambda f: sum(int(x) for i, x in enumerate(f[1:9]) if i not in (3, 4))  # not idle, iowait
    busy_ms = (busy(b) - busy(a)) * 1000 / int(hz)
    wall_ms = (int(t1) - int(t0)) / 1e6
    return max(0.0, busy_ms - ours_ms) / wall_ms if wall_ms > 0 else None


def main():
    tmp, cmds_path, n, gap = sys.argv[1:5]
    json_out = sys.argv[5] if len(sys.argv) > 5 else ""
    n, gap = int(n), int(gap)
    commands = {}
    for line in open(cmds_path):
        label, argv = line.rstrip("\n").split("\t", 1)
        cmd = " ".join(shlex.quote(a) for a in argv.split("\t"))
        commands[label] = cmd.replace(tmp, "$TMP").replace("'", "")

    passes = [("back to back", 0)] + ([(f"after {gap} ms idle", gap)] if gap else [])
    report = {"n": n, "passes": {}, "commands": commands}
    verdicts, husk_failed, order, noise = [], False, [], []
    for title, g in passes:
        order, runs, failed, stats, cpu = load(f"{tmp}/samples-{g}.tsv")
        other = foreign_cpu(f"{tmp}/cpu-{g}", cpu)
        if other is not None and other > 0.25:
            noise.append(f"{title}: other work used {100 * other:.0f}% of a CPU during the pass")
        husk = stats.get("husk")
        busy = "" if other is None else f"; other work on the machine: {100 * other:.0f}% of a CPU"
        print(f"== start-to-exit latency of `true`, {title}, {n} runs each (ms{busy})")
        print(f"{'tool':<9} {'median':>8} {'p95':>8} {'min':>8} {'mean':>8}   {'husk/tool':>9}")
        for label in order:
            if label in failed:
                print(f"{label:<9} {'FAILED':>8}   (the error is shown above)")
                continue
            s = stats[label]
            ratio = "" if label == "husk" or not husk else f"{husk['median'] / s['median']:8.2f}x"
            print(f"{label:<9} {s['median']:8.2f} {s['p95']:8.2f} {s['min']:8.2f} {s['mean']:8.2f}   {ratio:>9}")
        verdict = None
        if husk and "bwrap" in stats:
            limit = 0.5 * stats["bwrap"]["median"]
            verdict = husk["median"] <= limit
            verdicts.append(f"{title + ':':<20} husk {husk['median']:.2f} ms vs 0.5 x bwrap = {limit:.2f} ms: "
                            f"{'MET' if verdict else 'NOT MET'} "
                            f"(husk/bwrap = {husk['median'] / stats['bwrap']['median']:.2f})")
        else:
            verdicts.append(f"{title}: cannot be judged, husk or bwrap did not run")
        husk_failed |= "husk" in failed
        report["passes"][title] = {"gap_ms": g, "stats": stats, "failed": failed,
                                   "target_met": verdict, "foreign_cpu": other, "samples_ms": runs}
        print()
    print("husk/tool = husk median / tool median (below 1: husk is faster)")

    print("\n== commands ($TMP: the benchmark's temporary directory; {}: a number per run)")
    for label in order:
        print(f"{label:<9} {commands.get(label, '?')}")

    print("\n== target: husk median <= 0.5 x bwrap median")
    for v in verdicts:
        print(v)
    for line in noise:
        print(f"\nwarning: {line}; the numbers are noisier than they should be")
    if json_out:
        with open(json_out, "w") as f:
            json.dump(report, f, indent=1)
        print(f"\nsamples written to {json_out}")
    return 1 if husk_failed else 0


if __name__ == "__main__":
    sys.exit(main())
