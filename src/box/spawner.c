#define _GNU_SOURCE
#include "box/spawner.h"

/* Where `make install` puts the binaries `husk` runs (the Makefile sets
 * HUSK_LIBEXECDIR from LIBEXECDIR). */
#ifndef HUSK_LIBEXECDIR
#define HUSK_LIBEXECDIR "/usr/lib/husk"
#endif
#define HUSK_SPAWNER_PATH HUSK_LIBEXECDIR "/husk"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "box/snapshot_archive.h"
#include "husk/husk.h"
#include "jail/ctl.h"
#include "jail/privs.h"
#include "jail/rootfs.h"
#include "template/image.h"
#include "util/cleanup.h"
#include "util/fileio.h"
#include "util/clock.h"

#define SPAWNER_FD 3 /* the request socket, in the spawner */

/* Messages carry a ctl_hdr so that ctl_send/ctl_recv frame and check them. */
#define SPAWN_REQ 100
#define SPAWN_RESP 101
#define SPAWN_HELLO 102

/* The spawner's first message: which protocol it speaks.  The daemon runs
 * the `husk` binary installed next to it as its spawner (see launch());
 * one from another build must not be trusted to read these structs. */
#define SPAWN_PROTO 4
struct spawn_hello {
  struct ctl_hdr h;
  uint32_t proto;
  uint32_t req_size, resp_size;
  char version[32];
  int32_t prep_code;  /* 0, or why the shared root could not be prepared */
  char prep_msg[256];
};
/* How long a freshly started spawner may take to say hello. */
#define SPAWN_HELLO_MS 5000

struct spawn_req {
  struct ctl_hdr h;
  uint64_t memory, pids, cpu_milli, disk;
  char name[96];
  char ctl_path[PATH_MAX];
  /* An image template's box (struct spawn_image). */
  char layers_dir[PATH_MAX];
  uint32_t nlayers;
  char layers[IMAGE_MAX_LAYERS][LAYER_DIGEST_SIZE];
  uint32_t user_set, uid, gid;
  /* A snapshot to restore into the box's filesystem (its archive's fd
   * comes with the request): the digest it must have, the bounds of what
   * it may write. */
  uint32_t restore;
  char restore_sha256[65];
  uint64_t restore_max_bytes, restore_max_entries;
};

struct spawn_resp {
  struct ctl_hdr h;
  int32_t rc;
  int32_t code;
  char msg[HUSK_ERR_MSG_MAX];
  int32_t pid;
  uint32_t slot, uid_base;
  int32_t landlock_abi;
};

struct spawner {
  pthread_mutex_t lock;
  int sock;
  pid_t pid;
  int nice; /* of the spawner process, and of each box while it is built */
  char *root_dir; /* where it prepares the root boxes share, or NULL */
  char *binary;   /* the binary to run as the spawner, or NULL: found by launch() */
};

static struct spawn_hello hello_of_this_build(void) {
  struct spawn_hello h = {.h = {.type = SPAWN_HELLO, .len = sizeof h}, .proto = SPAWN_PROTO,
                          .req_size = sizeof(struct spawn_req),
                          .resp_size = sizeof(struct spawn_resp)};
  snprintf(h.version, sizeof h.version, "%s", HUSK_VERSION);
  return h;
}

/* Start `binary` as the spawner and wait for its hello.  0: it runs and
 * speaks our protocol; -1: it is gone (killed and reaped if it started). */
static int launch_binary(struct spawner *s, const char *binary, struct husk_err *err) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    return husk_error(err, errno, "socketpair for the box spawner");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  /* dup2 clears close-on-exec on the copy; everything else closes. */
  posix_spawn_file_actions_adddup2(&fa, sv[1], SPAWNER_FD);
  char *argv[] = {HUSK_SPAWNER_ARGV0, s->root_dir, NULL};
  char *envp[] = {NULL}; /* nothing of the daemon's environment */
  pid_t pid;
  int rc = posix_spawn(&pid, binary, &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  close(sv[1]);
  if (rc != 0) {
    close(sv[0]);
    return husk_error(err, rc, "cannot start the box spawner `%s`", binary);
  }
  struct spawn_hello got, want = hello_of_this_build();
  struct pollfd pf = {.fd = sv[0], .events = POLLIN};
  ssize_t n = -1; /* no answer in time */
  int pr;
  while ((pr = poll(&pf, 1, SPAWN_HELLO_MS)) < 0 && errno == EINTR)
    ;
  if (pr > 0) {
    size_t nfds = 0;
    n = ctl_recv(sv[0], &got, sizeof got, NULL, &nfds, NULL);
  }
  if (n != (ssize_t)sizeof got || got.h.type != SPAWN_HELLO || got.proto != want.proto ||
      got.req_size != want.req_size || got.resp_size != want.resp_size ||
      memcmp(got.version, want.version, sizeof want.version) != 0) {
    close(sv[0]);
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
      ;
    return husk_fail(err, EPROTO, "`%s` is not a box spawner of this build", binary);
  }
  if (got.prep_code != 0) {
    got.prep_msg[sizeof got.prep_msg - 1] = '\0';
    husk_fail(err, got.prep_code, "cannot prepare the boxes' root in `%s`: %s", s->root_dir,
              got.prep_msg);
    close(sv[0]);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) /* it exits after saying so */
      ;
    return -1;
  }
  s->sock = sv[0];
  s->pid = pid;
  return 0;
}

/* Which binary becomes the spawner, and so the image every box's init is
 * a copy of.  Given one (a program linked with libhusk names the `husk` it
 * was installed with), that one.  Else the small `husk` next to this
 * daemon when it is of the same build (an init cloned from it costs less
 * memory per box and forks each command faster than a copy of the daemon
 * with its server libraries), else the installed `husk` of the same build,
 * else this very binary (every binary of husk is a spawner too). */
static int launch(struct spawner *s, struct husk_err *err) {
  int rc = -1;
  if (s->binary) {
    if (launch_binary(s, s->binary, err) < 0)
      return -1;
    rc = 0;
  }
  char self[PATH_MAX];
  ssize_t n = rc < 0 ? readlink("/proc/self/exe", self, sizeof self - 1) : -1;
  if (n > 0) {
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    char small[PATH_MAX + 8];
    struct husk_err ignored;
    if (slash && snprintf(small, sizeof small, "%.*s/husk", (int)(slash - self), self) <
                     (int)sizeof small &&
        strcmp(small, self) != 0 && access(small, X_OK) == 0)
      rc = launch_binary(s, small, &ignored);
  }
  if (rc < 0) {
    struct husk_err ignored;
    rc = launch_binary(s, HUSK_SPAWNER_PATH, &ignored);
  }
  if (rc < 0 && launch_binary(s, "/proc/self/exe", err) < 0)
    return -1;
  /* Best effort: a spawner left at normal priority only competes more. */
  if (s->nice != 0)
    setpriority(PRIO_PROCESS, (id_t)s->pid, s->nice);
  return 0;
}

int spawner_start(struct spawner **out, int nice, const char *root_dir, const char *binary,
                  struct husk_err *err) {
  struct spawner *s = calloc(1, sizeof *s);
  if (!s)
    return husk_fail(err, ENOMEM, "out of memory");
  s->nice = nice;
  if ((root_dir && !(s->root_dir = strdup(root_dir))) || (binary && !(s->binary = strdup(binary)))) {
    free(s->root_dir);
    free(s);
    return husk_fail(err, ENOMEM, "out of memory");
  }
  pthread_mutex_init(&s->lock, NULL);
  if (launch(s, err) < 0) {
    pthread_mutex_destroy(&s->lock);
    free(s->root_dir);
    free(s->binary);
    free(s);
    return -1;
  }
  *out = s;
  return 0;
}

static void reap_spawner(struct spawner *s) {
  close_quiet(s->sock);
  s->sock = -1;
  if (s->pid > 0) {
    /* Its EOF on the socket makes it exit; boxes it made keep running. */
    while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
      ;
    s->pid = -1;
  }
}

void spawner_stop(struct spawner *s) {
  if (!s)
    return;
  reap_spawner(s);
  pthread_mutex_destroy(&s->lock);
  free(s->root_dir);
  free(s->binary);
  free(s);
}

static int request(struct spawner *s, const struct spawn_req *rq, int restore_fd,
                   struct spawn_resp *rs, int fds[3], struct husk_err *err) {
  if (ctl_send(s->sock, rq, sizeof *rq, &restore_fd, restore_fd >= 0 ? 1 : 0, err) < 0)
    return husk_error_wrap(err, "cannot reach the box spawner");
  size_t n = 3;
  ssize_t got = ctl_recv(s->sock, rs, sizeof *rs, fds, &n, NULL);
  if (got != (ssize_t)sizeof *rs || rs->h.type != SPAWN_RESP) {
    for (size_t i = 0; i < n; i++)
      close(fds[i]);
    return husk_fail(err, EIO, "the box spawner did not answer");
  }
  if (rs->rc == 0 && n != 3) {
    for (size_t i = 0; i < n; i++)
      close(fds[i]);
    return husk_fail(err, EPROTO, "the box spawner sent an incomplete answer");
  }
  return 0;
}

int spawner_create(struct spawner *s, const struct jail_config *cfg,
                   const struct spawn_image *img, const struct spawn_restore *restore,
                   struct jail *j, struct husk_err *err) {
  /* Large (the layer list): not on a thread's stack. */
  cleanup_free struct spawn_req *rqp = calloc(1, sizeof *rqp);
  if (!rqp)
    return husk_error(err, ENOMEM, "spawn request");
  struct spawn_req *q = rqp;
  *q = (struct spawn_req){.h = {.type = SPAWN_REQ, .len = sizeof *q},
                          .memory = cfg->limits.memory_bytes, .pids = cfg->limits.pids,
                          .cpu_milli = cfg->limits.cpu_milli, .disk = cfg->disk_bytes};
  if (strlen(cfg->name) >= sizeof q->name || !cfg->ctl_path ||
      strlen(cfg->ctl_path) >= sizeof q->ctl_path)
    return husk_fail(err, ENAMETOOLONG, "box name or control path too long");
  strcpy(q->name, cfg->name);
  strcpy(q->ctl_path, cfg->ctl_path);
  if (img) {
    if (img->n == 0 || img->n > IMAGE_MAX_LAYERS ||
        strlen(img->layers_dir) >= sizeof q->layers_dir)
      return husk_fail(err, EINVAL, "a template box needs 1 to %d layers", IMAGE_MAX_LAYERS);
    snprintf(q->layers_dir, sizeof q->layers_dir, "%s", img->layers_dir);
    for (size_t i = 0; i < img->n; i++) {
      if (strlen(img->ids[i]) >= sizeof q->layers[0] || strchr(img->ids[i], '/'))
        return husk_fail(err, EINVAL, "a layer id is malformed");
      snprintf(q->layers[i], sizeof q->layers[0], "%s", img->ids[i]);
    }
    q->nlayers = (uint32_t)img->n;
    q->user_set = img->user_set;
    q->uid = img->uid;
    q->gid = img->gid;
  }
  int restore_fd = -1;
  if (restore) {
    if (strlen(restore->sha256) != 64)
      return husk_fail(err, EINVAL, "a snapshot digest is malformed");
    q->restore = 1;
    snprintf(q->restore_sha256, sizeof q->restore_sha256, "%s", restore->sha256);
    q->restore_max_bytes = restore->max_bytes;
    q->restore_max_entries = restore->max_entries;
    restore_fd = restore->fd;
  }
  struct spawn_resp rs;
  int fds[3] = {-1, -1, -1};
  pthread_mutex_lock(&s->lock);
  int rc = s->sock >= 0 ? request(s, q, restore_fd, &rs, fds, err) : -1;
  if (rc < 0) {
    /* The spawner died (or never answered): start a new one, try once more
     * (the archive is read from its start by each). */
    reap_spawner(s);
    if (launch(s, err) == 0)
      rc = request(s, q, restore_fd, &rs, fds, err);
  }
  pthread_mutex_unlock(&s->lock);
  if (rc < 0)
    return -1;
  if (rs.rc < 0) {
    rs.msg[sizeof rs.msg - 1] = '\0';
    husk_fail(err, rs.code, "%s", rs.msg);
    return -1;
  }
  *j = (struct jail)JAIL_INIT;
  j->pid = rs.pid;
  j->pidfd = fds[0];
  j->ctl = fds[1];
  j->fs = fds[2];
  j->slot = rs.slot;
  j->uid_base = rs.uid_base;
  j->landlock_abi = rs.landlock_abi;
  if (cgroup_open(&j->cg, cfg->name, err) < 0) {
    struct husk_err ignored;
    jail_destroy(j, true, NULL, &ignored);
    return -1;
  }
  return 0;
}

/* ---- the spawner process --------------------------------------------------- */

/* A snapshot's archive restored into a new box's filesystem
 * (snap_restore_fd: its digest checked as it is read). */
struct restore_ctx {
  int fd;
  const char *sha256;
  uint64_t max_bytes, max_entries;
};

static int restore_fill(void *ctx, int fs, uint32_t uid_base, struct husk_err *err) {
  struct restore_ctx *r = ctx;
  return snap_restore_fd(fs, uid_base, r->fd, r->sha256, r->max_bytes, r->max_entries, err);
}

/* The root every box shares, prepared once in a mount namespace of the
 * spawner's own: the host never sees the mount, and it goes when the
 * spawner does.  Each box's namespace is a copy of this one. */
static int prepare_root(const char *dir, struct spawn_hello *hello) {
  struct husk_err err;
  int rc;
  if (unshare(CLONE_NEWNS) < 0) {
    rc = husk_error(&err, errno, "cannot create a mount namespace");
  } else if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0) {
    /* Slave, not private: nothing of ours reaches the host, and the
     * host's unmounts still reach us, so this copy never keeps a
     * filesystem the host let go of busy. */
    rc = husk_error(&err, errno, "cannot keep its mounts from the host's");
  } else {
    rc = rootfs_prepare(dir, &err);
  }
  if (rc < 0) {
    hello->prep_code = err.code ? err.code : EIO;
    snprintf(hello->prep_msg, sizeof hello->prep_msg, "%.*s", (int)sizeof hello->prep_msg - 1,
             err.msg);
  }
  return rc;
}

/* Where an image box's layers are stacked: an empty directory that only
 * ever gets mounts in this process's private namespace. */
#define SPAWNER_IMAGE_SCRATCH "/run/husk/image"

struct image_fds {
  int fds[IMAGE_MAX_LAYERS];
  size_t n;
};

static void close_layers(struct image_fds *l) {
  for (size_t i = 0; i < l->n; i++)
    close_quiet(l->fds[i]);
  l->n = 0;
}

static bool layer_id_ok(const char *id) {
  size_t n = strlen(id);
  return n == 64 && strspn(id, "0123456789abcdef") == n;
}

static int open_layers(const struct spawn_req *rq, struct image_fds *l, struct husk_err *err) {
  l->n = 0;
  if (rq->nlayers > IMAGE_MAX_LAYERS)
    return husk_fail(err, EINVAL, "too many layers");
  if (mkdir_p(SPAWNER_IMAGE_SCRATCH, 0755) < 0)
    return husk_error(err, errno, "cannot create `%s`", SPAWNER_IMAGE_SCRATCH);
  for (uint32_t i = 0; i < rq->nlayers; i++) {
    char path[PATH_MAX + 96];
    char id[LAYER_DIGEST_SIZE];
    memcpy(id, rq->layers[i], sizeof id);
    id[sizeof id - 1] = '\0';
    if (!layer_id_ok(id) ||
        snprintf(path, sizeof path, "%s/%s/root", rq->layers_dir, id) >= (int)sizeof path) {
      close_layers(l);
      return husk_fail(err, EINVAL, "a layer id is malformed");
    }
    int fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      int e = errno;
      close_layers(l);
      return husk_error(err, e, "cannot open the template's layer `%s`", id);
    }
    l->fds[l->n++] = fd;
  }
  return 0;
}

int spawner_main(int sock, const char *root_dir) {
  /* It was exec'ed, which made it dumpable again. */
  struct husk_err perr;
  if (privs_no_dumps(&perr) < 0)
    return 1;
  struct spawn_hello hello = hello_of_this_build();
  bool prepared = root_dir && prepare_root(root_dir, &hello) == 0;
  int64_t retry_ms = 0; /* when to try again to prepare it, if that failed */
  if (ctl_send(sock, &hello, sizeof hello, NULL, 0, NULL) < 0 || hello.prep_code != 0)
    return 1;
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigprocmask(SIG_BLOCK, &mask, NULL);
  int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0)
    return 1;
  for (;;) {
    struct pollfd p[2] = {{.fd = sock, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      return 1;
    }
    if (p[1].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) > 0)
        ;
      /* Boxes are our children: reap every one that ended. */
      while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
    }
    if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
      continue;
    struct spawn_req rq;
    int rfd[1] = {-1};
    size_t nfds = 1;
    struct husk_err rerr;
    ssize_t n = ctl_recv(sock, &rq, sizeof rq, rfd, &nfds, &rerr);
    if (n == 0 || (n < 0 && rerr.code != EINTR && rerr.code != EAGAIN))
      return 0; /* the daemon is gone */
    cleanup_close int restore_fd = nfds == 1 ? rfd[0] : -1;
    if (n != (ssize_t)sizeof rq || rq.h.type != SPAWN_REQ)
      continue;
    rq.restore_sha256[sizeof rq.restore_sha256 - 1] = '\0';
    rq.name[sizeof rq.name - 1] = '\0';
    rq.ctl_path[sizeof rq.ctl_path - 1] = '\0';
    rq.layers_dir[sizeof rq.layers_dir - 1] = '\0';
    /* The host replaced a file the shared root binds (an update): build
     * it again for this box and the next ones; boxes made before keep
     * theirs.  While that fails, boxes are built from scratch (as safe,
     * slower), and it is tried again every few seconds. */
    if (root_dir && (prepared ? !rootfs_prepared_current() : mono_ms() >= retry_ms)) {
      struct husk_err prep_err;
      int rc = prepared && umount2(root_dir, MNT_DETACH) < 0
                   ? husk_error(&prep_err, errno, "cannot unmount the old one")
                   : rootfs_prepare(root_dir, &prep_err);
      prepared = rc == 0;
      if (!prepared) {
        /* stderr is the daemon's log */
        fprintf(stderr,
                "husk: spawner: cannot prepare the boxes' shared root again (%s); "
                "building each box's root from scratch until it can\n",
                prep_err.msg);
        retry_ms = mono_ms() + 5000;
      }
    }
    struct jail_config cfg = {
        .limits = {.memory_bytes = rq.memory, .pids = rq.pids, .cpu_milli = rq.cpu_milli},
        .disk_bytes = rq.disk, .name = rq.name, .die_with_parent = false, .ctl_path = rq.ctl_path};
    struct jail j;
    struct husk_err err;
    struct spawn_resp rs = {.h = {.type = SPAWN_RESP, .len = sizeof rs}};
    struct restore_ctx rc_ctx = {.fd = restore_fd, .sha256 = rq.restore_sha256,
                                 .max_bytes = rq.restore_max_bytes,
                                 .max_entries = rq.restore_max_entries};
    if (rq.restore) {
      if (restore_fd < 0) {
        rs.rc = -1;
        rs.code = EPROTO;
        snprintf(rs.msg, sizeof rs.msg, "a restore came without its archive");
        ctl_send(sock, &rs, sizeof rs, NULL, 0, NULL);
        continue;
      }
      cfg.fill_fs = restore_fill;
      cfg.fill_ctx = &rc_ctx;
    }
    /* An image template's box: its layers, opened here (a mount can only be
     * cloned in the namespace it was opened in), instead of the shared root. */
    struct image_fds layers = {0};
    if (rq.nlayers > 0) {
      if (open_layers(&rq, &layers, &err) < 0) {
        rs.rc = -1;
        rs.code = err.code ? err.code : EIO;
        snprintf(rs.msg, sizeof rs.msg, "%s", err.msg);
        ctl_send(sock, &rs, sizeof rs, NULL, 0, NULL);
        continue;
      }
      cfg.image_layers = layers.fds;
      cfg.image_nlayers = layers.n;
      cfg.image_scratch = SPAWNER_IMAGE_SCRATCH;
      cfg.user_set = rq.user_set != 0;
      cfg.uid = rq.uid;
      cfg.gid = rq.gid;
    }
    bool view_needed = prepared && rq.nlayers == 0;
    /* The box's own view of the shared root, on top of it while the box
     * is cloned (its namespace keeps a copy), then taken off again. */
    char view[PATH_MAX];
    if (view_needed) {
      if (rootfs_instance(root_dir, view, sizeof view, &err) < 0) {
        rs.rc = -1;
        rs.code = err.code ? err.code : EIO;
        husk_error_wrap(&err, "cannot build the box's view of the shared root");
        snprintf(rs.msg, sizeof rs.msg, "%s", err.msg);
        ctl_send(sock, &rs, sizeof rs, NULL, 0, NULL);
        continue;
      }
      cfg.prepared_root = view;
    }
    int created = jail_create(&j, &cfg, &err);
    close_layers(&layers);
    /* Left on, the next box's view would be stacked on this one: a
     * spawner that cannot take it off ends (the daemon starts another). */
    struct husk_err derr;
    if (view_needed && rootfs_instance_drop(view, &derr) < 0) {
      fprintf(stderr, "husk: spawner: %s\n", derr.msg);
      if (created == 0) {
        struct husk_err ignored;
        jail_destroy(&j, true, NULL, &ignored);
      }
      return 1;
    }
    if (created < 0) {
      rs.rc = -1;
      rs.code = err.code ? err.code : EIO;
      snprintf(rs.msg, sizeof rs.msg, "%s", err.msg);
      ctl_send(sock, &rs, sizeof rs, NULL, 0, NULL);
      continue;
    }
    /* A box built at low priority (the pool's spawner) runs its programs
     * at the normal one: init is set back before anyone can use it, and
     * every program inherits from init.  A box that cannot be is refused:
     * its programs would silently run starved. */
    errno = 0;
    int prio = getpriority(PRIO_PROCESS, 0);
    if (errno == 0 && prio != 0 && setpriority(PRIO_PROCESS, (id_t)j.pid, 0) < 0) {
      int e = errno;
      struct husk_err ignored;
      jail_destroy(&j, true, NULL, &ignored);
      rs.rc = -1;
      rs.code = e;
      snprintf(rs.msg, sizeof rs.msg, "cannot give the box normal priority: %s", strerror(e));
      ctl_send(sock, &rs, sizeof rs, NULL, 0, NULL);
      continue;
    }
    rs.pid = j.pid;
    rs.slot = j.slot;
    rs.uid_base = j.uid_base;
    rs.landlock_abi = j.landlock_abi;
    int fds[3] = {j.pidfd, j.ctl, j.fs};
    if (ctl_send(sock, &rs, sizeof rs, fds, 3, NULL) < 0) {
      struct husk_err ignored;
      jail_destroy(&j, true, NULL, &ignored); /* nobody will own it */
      continue;
    }
    /* The daemon has its copies; ours go.  The box's init keeps the slot. */
    close_quiet(j.pidfd);
    close_quiet(j.ctl);
    close_quiet(j.fs);
    close_quiet(j.slot_lock);
    cgroup_close(&j.cg);
  }
}
