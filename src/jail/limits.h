/* Every default and hard bound of the jail, in one place.  Each value is
 * documented in docs/limits.md; change both together. */
#ifndef HUSK_JAIL_LIMITS_H
#define HUSK_JAIL_LIMITS_H

#define KiB (1024ULL)
#define MiB (1024ULL * KiB)
#define GiB (1024ULL * MiB)

/* Defaults for a box when the caller says nothing. */
#define HUSK_DEFAULT_MEMORY (512 * MiB) /* cgroup memory limit, no swap */
#define HUSK_DEFAULT_PIDS 256           /* tasks (processes + threads) */
#define HUSK_DEFAULT_CPU_MILLI 1000     /* 1 CPU of bandwidth */
#define HUSK_DEFAULT_TIMEOUT_MS (300 * 1000ULL) /* wall time for one run */
#define HUSK_DEFAULT_DISK (1 * GiB)     /* tmpfs holding /workspace, /tmp, /dev/shm */
#define HUSK_DEFAULT_OUTPUT (16 * MiB)  /* stdout + stderr, bytes */

/* Bounds on what a caller may ask for; outside them a request is refused. */
#define HUSK_MIN_MEMORY (8 * MiB)       /* less cannot even exec a shell */
#define HUSK_MAX_MEMORY (1024 * GiB)
#define HUSK_MIN_PIDS 2                 /* init + the program */
#define HUSK_MAX_PIDS 1000000
#define HUSK_MIN_CPU_MILLI 10           /* 1% of a CPU */
#define HUSK_MAX_CPU_MILLI (1024 * 1000)
#define HUSK_MIN_DISK (1 * MiB)
#define HUSK_MAX_DISK (1024 * GiB)
#define HUSK_MAX_TIMEOUT_MS (7ULL * 24 * 3600 * 1000) /* a week */
#define HUSK_MAX_OUTPUT (64 * GiB)

/* One inode per this many bytes of --disk, with a floor: limits the number
 * of files a box can create (inode exhaustion) in proportion to its space. */
#define HUSK_DISK_BYTES_PER_INODE (8 * KiB)
#define HUSK_MIN_INODES 4096

/* Identity inside the box. */
#define HUSK_BOX_UID 1000 /* the program's uid and gid inside the box */
#define HUSK_BOX_GID 1000
#define HUSK_BOX_HOSTNAME "husk"

/* Each box maps 65536 ids (0..65535 inside) onto its own host range:
 * host = HUSK_UID_BASE + slot * HUSK_UID_RANGE.  Slots are claimed with an
 * abstract-socket lock held by the box's init, so two live boxes never share
 * a range, whichever husk process started them. */
#define HUSK_UID_RANGE 65536U
#define HUSK_UID_BASE 0x40000000U /* 1073741824: far above normal uids and subuid ranges */
#define HUSK_UID_SLOTS 4096U      /* max concurrent boxes per host */

/* Per-process limits inside the box (setrlimit). */
#define HUSK_RLIMIT_NOFILE 4096
#define HUSK_RLIMIT_MEMLOCK (64 * KiB)
#define HUSK_DEVPTS_MAX 64 /* ptys a box may open */

/* oom_score_adj of every box process: under host memory pressure, boxes
 * are killed before host services. */
#define HUSK_BOX_OOM_SCORE_ADJ "500"

/* The control protocol between husk and a box's init. */
#define HUSK_CTL_MSG_MAX (256 * KiB) /* argv + env + cwd of one exec */
/* Processes init tracks at once: running ones it started, and ended ones
 * whose exit the daemon has not acknowledged yet (a full table refuses new
 * execs with EAGAIN). */
#define HUSK_INIT_TRACKED 1024

/* Size of the read-only staging root (holds /etc and mount points only). */
#define HUSK_STAGING_ROOT_SIZE "4m"
/* A box's own /dev (a box of a prepared root): six device nodes, two
 * directories, five links and its root fit these. */
#define HUSK_BOX_DEV_SIZE "4k"
#define HUSK_BOX_DEV_INODES "16"
/* Host files the root copies (/etc/ld.so.cache, mime.types...): at most
 * this large each. */
#define HUSK_ROOT_COPY_MAX (1024 * 1024)
/* Host directories a root shows through overlays of their own (/usr, the
 * /etc directories it mirrors): at most this many. */
#define HUSK_ROOT_LAYERS_MAX 16

#endif
