#!/usr/bin/env python3
"""CPU time of a `perf record -a -g` recording, by actor and by what it did;
or kernel memory still allocated at the end of a recording of kmem events.

  perf script -i perf.data -F comm,tid,ip,sym,dso | serve-perf.py [TOP]
  perf script -i kmem.data -F comm,tid,event,trace,ip,sym | serve-perf.py --mem BOXES [TOP]

--mem: the recording holds kmem:kmalloc, kmem:kmem_cache_alloc, kmem:kfree,
kmem:kmem_cache_free, kmem:mm_page_alloc and kmem:mm_page_free with call
graphs (bench/serve-memprofile.sh).  An allocation with no free later in
the recording is live at its end.  Pages allocated to hold slab objects are
left out (the objects are counted), so nothing counts twice.  Live bytes are
summed by actor and by where they were allocated (system call, refined by
the outermost kernel subsystem on the stack), and divided by BOXES.

Actors (by command name): the daemon (`husk-serve` and its `MHD-connection`
threads), the spawner (`husk`, `exe` or `husk-spawner`: it builds every box), box init
(`husk-init`: the box's pid 1, and the copies it forks before they exec),
the program (`true`), the load driver (`apibench`, `curl`), kernel threads,
idle (`swapper`) and everything else (other work on the machine).

What: for kernel stacks, the system call they are in (`sys_clone3`,
`sys_mount`...) or `page fault` / `irq, softirq, other kernel`; the daemon's
samples that have SQLite or libmicrohttpd anywhere in the stack are
attributed to them first (their syscalls included); other user-space
samples go to their library.  Percentages are of all samples on all CPUs
(2 CPUs x wall time = 200 %... shown as share of the recording's CPU time).
"""
import collections
import re
import sys

TOP = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 12


def actor(comm):
    if comm in ("husk-serve", "serve") or comm.startswith("MHD-"):
        return "daemon"
    # The spawner is the small `husk` binary executed as husk-spawner (its
    # comm is the file's name), or the daemon's own (`exe`) as a fallback.
    if comm in ("exe", "husk", "husk-spawner"):
        return "spawner"
    if comm == "husk-init":
        return "box init"
    if comm == "true":
        return "program (true)"
    if comm in ("apibench", "curl"):
        return "load driver"
    if comm == "swapper":
        return "idle"
    if comm == "perf" or comm.startswith("perf-"):
        return "the recorder (perf)"
    if re.match(r"(kworker|ksoftirqd|rcu|kthreadd|migration|cpuhp|kcompactd|khugepaged|kswapd|jbd2)", comm):
        return "kernel threads"
    return "other work"


# Kernel functions that name a subsystem: a sample in a syscall (or in an
# exit) is refined by the outermost of these below it.
NOTABLE = re.compile(
    r"^(copy_net_ns|copy_mnt_ns|create_user_ns|copy_pid_ns|copy_ipcs|copy_utsname|copy_cgroup_ns|"
    r"dup_mmap|copy_files|dup_fd|copy_fs|copy_sighand|copy_signal|"
    r"exit_mmap|exit_files|free_nsproxy|put_mnt_ns|cleanup_mnt|"
    r"zap_pid_ns_processes|exit_notify|release_task|do_mount|path_mount|do_new_mount|vfs_get_tree|"
    r"do_move_mount|attach_recursive_mnt|open_tree|__do_sys_open_tree|do_loopback|fsopen|vfs_fsconfig_locked|"
    r"cgroup_mkdir|cgroup_rmdir|cgroup_attach_task|cgroup_procs_write|cgroup_file_write|mem_cgroup_css_alloc|"
    r"kernfs_\w+|synchronize_rcu\w*|load_elf_binary|begin_new_exec|bprm_execve|"
    r"unix_bind|unix_stream_connect|unix_find_bsd|tcp_sendmsg|tcp_recvmsg|"
    r"ext4_sync_file|jbd2_\w+|file_write_and_wait_range|blkdev_issue_flush|"
    r"shmem_\w+|seccomp_\w+|landlock_\w+|do_pivot_root|__x64_sys_pivot_root|umount_tree|"
    r"proc_fill_super|devpts_\w+|mqueue_\w+|security_\w+)$")


def refine(frames, upto):
    """The outermost notable function among frames[:upto] (leaf first)."""
    for sym, _ in reversed(frames[:upto]):
        if NOTABLE.match(sym):
            return sym
    return None


def classify(act, frames):
    """frames: [(sym, dso)] leaf first."""
    dsos = [d for _, d in frames]
    if act == "daemon":
        if any("libsqlite3" in d for d in dsos):
            return "SQLite (its syscalls included)"
        if any("libmicrohttpd" in d for d in dsos):
            return "libmicrohttpd (its syscalls included)"
        if any("libjansson" in d for d in dsos):
            return "jansson (JSON)"
    sysname, at = None, 0
    for i, (sym, dso) in enumerate(frames):
        if "kernel" not in dso:
            break
        m = re.match(r"__(?:x64|ia32|se)_sys_(\w+)|__do_sys_(\w+)", sym)
        if m:
            sysname, at = m.group(1) or m.group(2), i
            break
    if sysname:
        r = refine(frames, at)
        return "sys_" + sysname + (f" > {r}" if r else "")
    if frames and "kernel" in frames[0][1]:
        if any(s in ("asm_exc_page_fault", "exc_page_fault") for s, _ in frames):
            return "page fault"
        for i, (s_, _) in enumerate(frames):
            if s_ in ("do_exit", "do_group_exit"):
                r = refine(frames, i)
                return "exit on a signal" + (f" > {r}" if r else "")
        syms = [s_ for s_, _ in frames]
        if "process_one_work" in syms:
            i = syms.index("process_one_work")
            return "workqueue: " + (syms[i - 1] if i > 0 else "?")
        r = refine(frames, len(frames))
        if r:
            return "kernel: " + r
        if "kthread" in syms:
            i = syms.index("kthread")
            return "kernel thread: " + (syms[i - 1] if i > 0 else "kthread")
        return "other kernel: " + syms[0]
    for sym, dso in frames:
        base = dso.rsplit("/", 1)[-1].split(".so")[0]
        if base and base != "[unknown]":
            if base in ("husk-serve", "husk"):
                return f"husk: {sym}"
            return base
    return "unknown"


MEM_NOTABLE = re.compile(
    r"^(copy_net_ns|copy_mnt_ns|create_user_ns|copy_pid_ns|copy_ipcs|copy_utsname|copy_cgroup_ns|"
    r"dup_mmap|dup_fd|copy_fs_struct|copy_sighand|copy_signal|dup_task_struct|alloc_thread_stack_node|"
    r"copy_creds|prepare_creds|cgroup_mkdir|kernfs_new_node|__kernfs_new_node|"
    r"do_new_mount|vfs_get_tree|fsconfig|vfs_fsconfig_locked|do_move_mount|__do_sys_open_tree|open_tree|"
    r"do_loopback|clone_mnt|alloc_vfsmnt|shmem_fill_super|proc_fill_super|devpts_fill_super|"
    r"shmem_\w+|pipe_\w+|create_pipe_files|alloc_pipe_info|unix_\w+|sock_alloc\w*|sk_alloc|"
    r"seccomp_\w+|bpf_prog_\w+|landlock_\w+|do_pivot_root|"
    r"__pte_alloc|__pmd_alloc|__pud_alloc|pte_alloc_one|do_anonymous_page|wp_page_copy|do_fault|"
    r"vm_area_alloc|vm_area_dup|mmap_region|__mmap_region|do_brk_flags|"
    r"alloc_pid|d_alloc\w*|__d_alloc|alloc_inode|new_inode\w*|alloc_empty_file|"
    r"load_elf_binary|bprm_execve|begin_new_exec|mm_alloc|"
    r"register_net_sysctl_sz|__register_sysctl_table|setup_net|ops_init|"
    r"pcpu_alloc\w*|__vmalloc_node\w*|"
    r"mem_cgroup_css_alloc|cpu_cgroup_css_alloc|pids_css_alloc|css_create|cgroup_apply_control_enable)$")


def mem_where(frames):
    syms = [f[0] for f in frames]
    sysname, at = None, len(syms)
    for i, sym in enumerate(syms):
        m = re.match(r"__(?:x64|ia32|se)_sys_(\w+)|__do_sys_(\w+)", sym)
        if m:
            sysname, at = m.group(1) or m.group(2), i
            break
    note = None
    for sym in reversed(syms[:at]):
        if MEM_NOTABLE.match(sym):
            note = sym
            break
    if sysname:
        return "sys_" + sysname + (f" > {note}" if note else "")
    if any(x in ("asm_exc_page_fault", "exc_page_fault") for x in syms):
        return "page fault" + (f" > {note}" if note else "")
    if "process_one_work" in syms:
        i = syms.index("process_one_work")
        return "workqueue: " + (syms[i - 1] if i > 0 else "?")
    return "kernel" + (f" > {note}" if note else (": " + syms[0] if syms else ""))


def mem_main(boxes, top):
    live = {}  # key -> (bytes, actor, where)
    comm, head, frames = None, None, []

    def flush():
        if head is None:
            return
        ev, args = head
        kv = dict(re.findall(r"(\w+)=(\S+)", args))
        if ev in ("kmalloc", "kmem_cache_alloc"):
            live[("o", kv.get("ptr"))] = (int(kv.get("bytes_alloc", 0)), actor(comm), mem_where(frames))
        elif ev in ("kfree", "kmem_cache_free"):
            live.pop(("o", kv.get("ptr")), None)
        elif ev == "mm_page_alloc":
            syms = [f[0] for f in frames]
            if any(x in ("allocate_slab", "new_slab", "___slab_alloc") for x in syms):
                return  # the slab's objects are counted instead
            live[("p", kv.get("pfn"))] = (4096 << int(kv.get("order", 0)), actor(comm), mem_where(frames))
        elif ev == "mm_page_free":
            live.pop(("p", kv.get("pfn")), None)

    for line in sys.stdin:
        if not line.strip():
            flush()
            head, frames = None, []
            continue
        if not line.startswith(("\t", " ")):
            flush()
            frames = []
            m = re.match(r"^(.*?)\s+(-?\d+)\s+kmem:(\w+):\s*(.*)$", line.rstrip("\n"))
            if m:
                comm, head = m.group(1).strip(), (m.group(3), m.group(4))
            else:
                head = None
            continue
        m = re.match(r"\s*[0-9a-f]+\s+(.*?)\s*$", line)
        if m:
            frames.append((m.group(1), ""))
    flush()
    by_actor = collections.Counter()
    by_where = collections.defaultdict(collections.Counter)
    for size, a, w in live.values():
        by_actor[a] += size
        by_where[a][w] += size
    total = sum(n for a, n in by_actor.items() if a not in ("the recorder (perf)", "other work"))
    print(f"kernel memory allocated during the recording and still live at its end, by the daemon, its "
          f"spawner, the boxes and kernel threads: {total / 1048576:.1f} MiB, {total / boxes / 1024:.1f} KiB per box "
          f"({boxes} boxes; the recorder and other work are listed apart)")
    for a, n in by_actor.most_common():
        print(f"\n{a}: {n / boxes / 1024:.1f} KiB per box")
        for w, k in by_where[a].most_common(top):
            print(f"    {k / boxes / 1024:7.1f} KiB  {w}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--mem":
        return mem_main(int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 12)
    samples = collections.Counter()
    by = collections.defaultdict(collections.Counter)
    comm, frames = None, []

    def flush():
        if comm is None:
            return
        a = actor(comm)
        samples[a] += 1
        by[a][classify(a, frames)] += 1

    for line in sys.stdin:
        if not line.strip():
            flush()
            comm, frames = None, []
            continue
        if not line.startswith(("\t", " ")):
            flush()
            comm = line.split()[0] if line.split() else "?"
            # comm may hold spaces (e.g. "kworker/u8:2-kv ..."): take up to the tid
            m = re.match(r"^(.*?)\s+(-?\d+)\s*$", line.rstrip("\n"))
            if m:
                comm = m.group(1).strip()
            frames = []
            continue
        m = re.match(r"\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$", line)
        if m:
            frames.append((m.group(1), m.group(2)))
    flush()
    total = sum(samples.values()) or 1
    busy = total - samples.get("idle", 0)
    print(f"{total} samples; busy (not idle): {100 * busy / total:.1f} % of the CPUs")
    for a, n in samples.most_common():
        print(f"\n{a}: {100 * n / total:.1f} % of all CPU time ({100 * n / busy if a != 'idle' else 0:.1f} % of the busy time)")
        if a in ("idle",):
            continue
        for what, k in by[a].most_common(TOP):
            print(f"    {100 * k / n:5.1f} %  {what}")


if __name__ == "__main__":
    main()
