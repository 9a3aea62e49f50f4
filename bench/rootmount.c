/* rootmount: what a box's root costs to mount and detach, for the ways a
 * template's root could be made, measured side by side in one run.
 *
 *   rootmount N LAYERS FLAT EROFS
 *
 * LAYERS is a colon-separated list of layer directories (top first), FLAT
 * the same tree as one directory, EROFS the same tree as an erofs image
 * file (mkfs.erofs).  In a private mount namespace, N rounds; in each
 * round every variant once, in turn, so that drift hits all alike:
 *
 *   bind        the default template: a read-only recursive bind of /usr
 *   layers      husk's choice: each layer cloned, idmapped and attached,
 *               an overlay of them with a fresh tmpfs upper
 *   flat        the same with the one flattened directory
 *   erofs-file  the image file mounted per box (fsopen "erofs"), idmapped,
 *               under the same overlay
 *   erofs-once  the image mounted once; per box a clone of that mount,
 *               idmapped, under the overlay
 *
 * A variant's time covers its mounts and the detach of all of them.  The
 * idmap's user namespace is made once (every image variant needs one, and
 * it costs them all the same).  Output: one line a variant, the median,
 * p10 and p90 in microseconds, and the ratio of the median to `layers`'. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_LAYERS 64
#define SCRATCH "/run/husk-rootmount"

enum { V_BIND, V_LAYERS, V_FLAT, V_EROFS_FILE, V_EROFS_ONCE, NV };
static const char *const names[NV] = {"bind", "layers", "flat", "erofs-file", "erofs-once"};

static const char *layers[MAX_LAYERS];
static int layer_fd[MAX_LAYERS];
static size_t nlayers;
static int flat_fd = -1, erofs_once_fd = -1, userns = -1;
static const char *erofs_file;

static void die(const char *what) {
  fprintf(stderr, "rootmount: %s: %s\n", what, strerror(errno));
  exit(1);
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* A user namespace mapping 0 to 100000 (65536 ids), held by a child. */
static int make_userns(void) {
  int go[2];
  if (pipe(go) < 0)
    die("pipe");
  pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);
  if (pid < 0)
    die("clone(CLONE_NEWUSER)");
  if (pid == 0) {
    char c;
    close(go[1]);
    while (read(go[0], &c, 1) < 0 && errno == EINTR)
      ;
    _exit(0);
  }
  close(go[0]);
  char path[64], map[] = "0 100000 65536\n";
  snprintf(path, sizeof path, "/proc/%d/uid_map", pid);
  int fd = open(path, O_WRONLY);
  if (fd < 0 || write(fd, map, strlen(map)) < 0)
    die("uid_map");
  close(fd);
  snprintf(path, sizeof path, "/proc/%d/gid_map", pid);
  fd = open(path, O_WRONLY);
  if (fd < 0 || write(fd, map, strlen(map)) < 0)
    die("gid_map");
  close(fd);
  snprintf(path, sizeof path, "/proc/%d/ns/user", pid);
  int ns = open(path, O_RDONLY | O_CLOEXEC);
  if (ns < 0)
    die("ns/user");
  close(go[1]);
  waitpid(pid, NULL, 0);
  return ns;
}

static void idmap(int tree) {
  struct mount_attr a = {.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                         .userns_fd = (uint64_t)userns};
  if (mount_setattr(tree, "", AT_EMPTY_PATH, &a, sizeof a) < 0)
    die("mount_setattr(IDMAP)");
}

static void attach(int tree, const char *at) {
  if (mkdir(at, 0700) < 0 && errno != EEXIST)
    die("mkdir");
  if (move_mount(tree, "", AT_FDCWD, at, MOVE_MOUNT_F_EMPTY_PATH) < 0)
    die("move_mount");
  close(tree);
}

/* One lower layer at SCRATCH/L<i>: a clone of `src` (an fd), idmapped. */
static void clone_layer(int src, size_t i) {
  int tree = open_tree(src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
  if (tree < 0)
    die("open_tree");
  idmap(tree);
  char at[64];
  snprintf(at, sizeof at, SCRATCH "/L%zu", i);
  attach(tree, at);
}

/* The box's tmpfs with upper and work, then the overlay of n layers. */
static void overlay(size_t n) {
  if (mkdir(SCRATCH "/box", 0700) < 0 && errno != EEXIST)
    die("mkdir box");
  if (mount("tmpfs", SCRATCH "/box", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m") < 0)
    die("mount box tmpfs");
  if (mkdir(SCRATCH "/box/upper", 0755) < 0 || mkdir(SCRATCH "/box/work", 0700) < 0 ||
      chown(SCRATCH "/box/upper", 100000, 100000) < 0)
    die("upper");
  char lower[MAX_LAYERS * 32];
  size_t o = 0;
  for (size_t i = 0; i < n; i++)
    o += (size_t)snprintf(lower + o, sizeof lower - o, "%s" SCRATCH "/L%zu", i ? ":" : "", i);
  int fs = fsopen("overlay", FSOPEN_CLOEXEC);
  if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", lower, 0) < 0 ||
      fsconfig(fs, FSCONFIG_SET_STRING, "upperdir", SCRATCH "/box/upper", 0) < 0 ||
      fsconfig(fs, FSCONFIG_SET_STRING, "workdir", SCRATCH "/box/work", 0) < 0 ||
      fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
    die("overlay");
  int mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  if (mnt < 0)
    die("fsmount overlay");
  close(fs);
  attach(mnt, SCRATCH "/root");
}

static int erofs_mount(void) {
  int fs = fsopen("erofs", FSOPEN_CLOEXEC);
  if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "source", erofs_file, 0) < 0 ||
      fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
    die("erofs");
  int mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY);
  if (mnt < 0)
    die("fsmount erofs");
  close(fs);
  return mnt;
}

static void one(int v) {
  if (mount("tmpfs", SCRATCH, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,nr_inodes=512") < 0)
    die("mount scratch");
  switch (v) {
  case V_BIND: {
    int tree = open_tree(AT_FDCWD, "/usr", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    if (tree < 0)
      die("open_tree /usr");
    struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
    if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) < 0)
      die("mount_setattr ro");
    attach(tree, SCRATCH "/root");
    break;
  }
  case V_LAYERS:
    for (size_t i = 0; i < nlayers; i++)
      clone_layer(layer_fd[i], i);
    overlay(nlayers);
    break;
  case V_FLAT:
    clone_layer(flat_fd, 0);
    overlay(1);
    break;
  case V_EROFS_FILE: {
    int mnt = erofs_mount();
    idmap(mnt);
    attach(mnt, SCRATCH "/L0");
    overlay(1);
    break;
  }
  case V_EROFS_ONCE:
    clone_layer(erofs_once_fd, 0);
    overlay(1);
    break;
  }
  if (umount2(SCRATCH, MNT_DETACH) < 0)
    die("umount2");
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: rootmount N LAYERS FLAT EROFS\n");
    return 2;
  }
  int n = atoi(argv[1]);
  if (n < 1)
    n = 1;
  for (char *s = strtok(argv[2], ":"); s && nlayers < MAX_LAYERS; s = strtok(NULL, ":"))
    layers[nlayers++] = s;
  erofs_file = argv[4];
  if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    die("private mount namespace");
  if (mkdir(SCRATCH, 0700) < 0 && errno != EEXIST)
    die("mkdir " SCRATCH);
  userns = make_userns();
  for (size_t i = 0; i < nlayers; i++)
    if ((layer_fd[i] = open(layers[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
      die(layers[i]);
  if ((flat_fd = open(argv[3], O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
    die(argv[3]);
  /* The image mounted once, as a spawner would keep it. */
  if (mkdir("/run/husk-rootmount-erofs", 0700) < 0 && errno != EEXIST)
    die("mkdir erofs");
  int once = erofs_mount();
  attach(once, "/run/husk-rootmount-erofs");
  if ((erofs_once_fd = open("/run/husk-rootmount-erofs", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
    die("erofs once");

  double *t[NV];
  for (int v = 0; v < NV; v++)
    if (!(t[v] = calloc((size_t)n, sizeof(double))))
      die("calloc");
  for (int v = 0; v < NV; v++) /* warm-up */
    one(v);
  for (int r = 0; r < n; r++)
    for (int v = 0; v < NV; v++) {
      double t0 = now_us();
      one(v);
      t[v][r] = now_us() - t0;
    }
  double base = 0;
  for (int v = 0; v < NV; v++) {
    qsort(t[v], (size_t)n, sizeof(double), cmp);
    if (v == V_LAYERS)
      base = t[v][n / 2];
  }
  printf("# %d rounds, %zu layers; microseconds per box root (mount + detach)\n", n, nlayers);
  printf("%-11s %9s %9s %9s %8s\n", "variant", "median", "p10", "p90", "x layers");
  for (int v = 0; v < NV; v++)
    printf("%-11s %9.1f %9.1f %9.1f %8.2f\n", names[v], t[v][n / 2], t[v][n / 10],
           t[v][n * 9 / 10], t[v][n / 2] / base);
  return 0;
}
