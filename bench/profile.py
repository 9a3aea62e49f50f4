#!/usr/bin/env python3
"""Break husk's start-to-exit time into phases, from a `perf script` dump.

Input (see bench/profile.sh): `perf script -F comm,pid,tid,time,event,trace`
of a system-wide recording with
  - uprobes `huskbench:<function>` and `huskbench:<function>__return` on
    husk's functions (main, husk_run, cgroup_sweep, detect, jail_create,
    compile, cgroup_create, cgroup_attach, rootfs_enter, landlock_apply_box,
    seccomp_policy_apply, init_main, supervise, jail_destroy, cgroup_stats,
    cgroup_destroy ...),
  - raw_syscalls:sys_enter / sys_exit,
  - sched:sched_process_fork / exec / exit,
while the timing driver (comm `spawnbench`) started `husk run -- true`
repeatedly.

Usage: profile.py DUMP [LABEL] [DUMP2 LABEL2 ...]
Prints, per phase, the median over the runs of each dump (ms), so that two
recordings (say back-to-back and after an idle gap) are side by side.
"""
import collections
import re
import statistics
import sys

LINE = re.compile(r"^\s*(\S+)\s+(\d+)/(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)$")


def syscall_names():
    names = {}
    for path in ("/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "/usr/include/asm/unistd_64.h"):
        try:
            for line in open(path):
                m = re.match(r"#define __NR_(\w+)\s+(\d+)", line)
                if m:
                    names[int(m.group(2))] = m.group(1)
            break
        except OSError:
            continue
    # Newer than some headers.
    names.setdefault(435, "clone3")
    names.setdefault(442, "mount_setattr")
    names.setdefault(444, "landlock_create_ruleset")
    names.setdefault(445, "landlock_add_rule")
    names.setdefault(446, "landlock_restrict_self")
    names.setdefault(424, "pidfd_send_signal")
    names.setdefault(428, "open_tree")
    names.setdefault(429, "move_mount")
    names.setdefault(430, "fsopen")
    names.setdefault(431, "fsconfig")
    names.setdefault(432, "fsmount")
    names.setdefault(436, "close_range")
    return names


NR = syscall_names()


class Proc:
    def __init__(self, pid):
        self.pid = pid
        self.events = []        # (t, name) uprobes and sched events
        self.syscalls = []      # (t_enter, t_exit, name)
        self.children = []
        self.pending = None

    def first(self, name, after=0.0):
        for t, n in self.events:
            if n == name and t >= after:
                return t
        return None

    def first_syscall(self, name, after=0.0):
        for s in self.syscalls:
            if s[2] == name and s[0] >= after:
                return s
        return None


def load(path):
    procs = {}
    runs = []  # host pids, in order
    driver_pids = set()

    def proc(pid):
        p = procs.get(pid)
        if not p:
            p = procs[pid] = Proc(pid)
        return p

    for line in open(path, errors="replace"):
        m = LINE.match(line)
        if not m:
            continue
        comm, pid, tid, t, ev, rest = m.groups()
        t = float(t) * 1e3  # ms
        tid = int(tid)
        if ev == "sched:sched_process_fork":
            cm = re.search(r"child_pid=(\d+)", rest)
            child = int(cm.group(1))
            if comm == "spawnbench":
                driver_pids.add(int(pid))
                runs.append(child)
                proc(child).events.append((t, "fork"))
            elif int(pid) in procs:
                proc(int(pid)).children.append(child)
                proc(child).events.append((t, "fork"))
            continue
        if tid not in procs:
            continue
        p = procs[tid]
        if ev == "sched:sched_process_exec":
            p.events.append((t, "exec:" + rest.split()[0].split("=", 1)[1]))
        elif ev == "sched:sched_process_exit":
            p.events.append((t, "exit"))
        elif ev == "raw_syscalls:sys_enter":
            nr = int(rest.split()[1])
            p.pending = (t, NR.get(nr, str(nr)))
        elif ev == "raw_syscalls:sys_exit":
            if p.pending:
                p.syscalls.append((p.pending[0], t, p.pending[1]))
                p.pending = None
            else:  # the return from clone3/fork in a new child
                nr = int(rest.split()[1])
                p.events.append((t, "start:" + NR.get(nr, str(nr))))
        elif ev.startswith("huskbench:"):
            p.events.append((t, ev.split(":", 1)[1]))
    return procs, runs


def between(p, t0, t1):
    """Syscalls of p inside [t0, t1]: {name: (count, total ms)}."""
    out = collections.defaultdict(lambda: [0, 0.0])
    for a, b, n in p.syscalls:
        if a >= t0 and b <= t1:
            out[n][0] += 1
            out[n][1] += b - a
    return out


# The host-side timeline of one run: (phase ending at this point, where the
# point is).  A point whose probe is missing (a function renamed, inlined or
# gone) is skipped: its phase merges into the next one.
#   ("h", name)  first event `name` of the husk process
#   ("b", name)  first event of the box's init process (the clone3 child)
#   ("p", name)  first event of the program process (forked by init)
#   ("sys", "clone3", 0|1)  enter / exit of the husk process's clone3
TIMELINE = [
    ("spawn + execve of husk", ("h", "exec")),
    ("ld.so + libc init (shared libraries)", ("h", "main")),
    ("option parsing, limits", ("h", "cgroup_sweep")),
    ("cgroup host detection (mountinfo, parents)", ("h", "detect__return")),
    ("stale-cgroup sweep (readdir of parents)", ("h", "cgroup_sweep__return")),
    ("signals, run name", ("h", "jail_create")),
    ("seccomp compile (libseccomp at run time)", ("h", "compile__return")),
    ("uid slot + Landlock probe", ("h", "cgroup_create")),
    ("cgroup create + limits", ("h", "cgroup_create__return")),
    ("box tmpfs (fsopen/fsmount/open_tree), pipes", ("sys", "clone3", 0)),
    ("clone3 (user+mnt+pid+net+ipc+uts ns)", ("sys", "clone3", 1)),
    ("uid/gid maps", ("h", "cgroup_attach")),
    ("v1 cgroup attach (cgroup.procs writes)", ("h", "cgroup_attach__return")),
    ("box: wake-up, setresuid, cgroup ns", ("b", "rootfs_enter")),
    ("box: rootfs (mounts, /etc, /proc, /dev, pivot)", ("b", "rootfs_enter__return")),
    ("box: hostname, loopback, stdio, caps, rlimits", ("b", "landlock_apply_box")),
    ("box: Landlock", ("b", "landlock_apply_box__return")),
    ("box: seccomp install", ("b", "seccomp_policy_apply__return")),
    ("box: init up -> husk sees READY", ("h", "jail_create__return")),
    ("exec request -> init forks program", ("p", "fork")),
    ("program: fork -> execve (Landlock, fds, cwd)", ("p", "exec")),
    ("program: true runs (exec, ld.so, exit)", ("p", "exit")),
    ("exit reported to husk", ("h", "jail_destroy")),
    ("teardown: kill + reap init (ns teardown)", ("h", "cgroup_stats")),
    ("cgroup stats + rmdir", ("h", "jail_destroy__return")),
    ("husk exit (exit_group, mm teardown)", ("h", "exit")),
]
TOTAL = "TOTAL (fork of husk -> husk exited)"


def first_events(p):
    ev = {}
    for t, n in p.events:
        key = "exec" if n.startswith("exec:") else n
        ev.setdefault(key, t)
    return ev


def analyse(procs, runs):
    """One dict of phase -> ms per complete run, and syscall breakdowns."""
    results = []
    details = collections.defaultdict(list)
    for hpid in runs:
        h = procs.get(hpid)
        if not h or not h.children:
            continue
        box = procs.get(h.children[0])
        prog = procs.get(box.children[0]) if box and box.children else None
        if not prog:
            continue
        ev = {"h": first_events(h), "b": first_events(box), "p": first_events(prog)}
        if "fork" not in ev["h"] or "exit" not in ev["h"] or "main" not in ev["h"]:
            continue
        clone = h.first_syscall("clone3")
        r = collections.OrderedDict()
        last, pending = ev["h"]["fork"], []
        for phase, where in TIMELINE:
            if where[0] == "sys":
                t = clone[where[2]] if clone else None
            else:
                t = ev[where[0]].get(where[1])
            pending.append(phase)
            if t is None:
                continue
            name = pending[-1] if len(pending) == 1 else " + ".join(pending)
            r[name] = max(0.0, t - last)
            last, pending = max(last, t), []
        r[TOTAL] = ev["h"]["exit"] - ev["h"]["fork"]
        results.append(r)
        details["husk process, whole run"].append(between(h, ev["h"]["fork"], ev["h"]["exit"]))
        b = ev["b"]
        if "rootfs_enter" in b and "rootfs_enter__return" in b:
            details["box: rootfs_enter"].append(between(box, b["rootfs_enter"], b["rootfs_enter__return"]))
        details["box: setup until it runs as init"].append(between(box, 0, b.get("init_main", 1e18)))
        details["box: as init (exec request to exit report)"].append(
            between(box, b.get("init_main", 0), ev["p"].get("exit", 1e18) + 5))
        details["program (fork to exit)"].append(between(prog, 0, 1e18))
    # Keep only runs with the same phases as the majority.
    if results:
        keys = collections.Counter(tuple(r.keys()) for r in results).most_common(1)[0][0]
        results = [r for r in results if tuple(r.keys()) == keys]
    return results, details


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        sys.exit(2)
    sets = []
    while args:
        path = args.pop(0)
        label = args.pop(0) if args else path
        procs, runs = load(path)
        res, det = analyse(procs, runs)
        if not res:
            print(f"profile: no complete run found in {path} (are the uprobes in place?)", file=sys.stderr)
            sys.exit(1)
        sets.append((label, res, det))

    phases = list(sets[0][1][0].keys())
    w = max(len(p) for p in phases)
    head = "".join(f" {lab[:22]:>22}" for lab, _, _ in sets)
    print(f"== husk run -- true, phase medians in ms (runs: {', '.join(str(len(r)) for _, r, _ in sets)})")
    print(f"{'phase':<{w}}{head}")
    for ph in phases:
        cells = ""
        for _, res, _ in sets:
            xs = [r[ph] for r in res]
            med = statistics.median(xs)
            tot = statistics.median([r[TOTAL] for r in res])
            cells += f" {med:9.3f} ({100 * med / tot:4.1f}%)     " if not ph.startswith("TOTAL") else f" {med:9.3f}              "
        print(f"{ph:<{w}}{cells}")
    print("(medians of each phase; they need not add up exactly to the median total)")

    for label, res, det in sets:
        for where, runs in det.items():
            agg = collections.defaultdict(lambda: [[], []])
            for d in runs:
                for name in set(list(d.keys())):
                    agg[name][0].append(d[name][0])
                    agg[name][1].append(d[name][1])
            n = len(runs)
            # median per run, counting runs without the syscall as 0
            rows = []
            for name, (counts, times) in agg.items():
                times = times + [0.0] * (n - len(times))
                counts = counts + [0] * (n - len(counts))
                rows.append((statistics.median(times), statistics.median(counts), max(times), name))
            rows.sort(reverse=True)
            total = statistics.median([sum(v[1] for v in d.values()) for d in runs])
            count = statistics.median([sum(v[0] for v in d.values()) for d in runs])
            print(f"\n== [{label}] {where}: {count:.0f} syscalls, {total:.3f} ms inside syscalls (median per run)")
            print(f"{'syscall':<24} {'calls':>6} {'median ms':>10} {'max ms':>8}")
            for med, cnt, mx, name in rows[:12]:
                print(f"{name:<24} {cnt:6.0f} {med:10.3f} {mx:8.3f}")


if __name__ == "__main__":
    main()
