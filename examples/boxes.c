/* A complete program on libhusk: a box that lives across calls.
 *
 *   cc boxes.c $(pkg-config --cflags --libs husk) -o boxes
 *   sudo ./boxes /tmp/husk-example [IMAGE.tar]
 *
 * It opens a manager on a data directory, makes (or finds) a tenant,
 * creates a box, writes a script into it, runs the script with its output
 * streamed back, reads the file the script wrote, lists /workspace, shows
 * the box's usage, deletes the box; given an image archive (docker save,
 * podman save, an oci-archive), imports it as a template, runs `id` in a
 * box of it, builds a second template from it with a Dockerfile (its
 * output streamed back) and deletes them all; and finally runs one program in a
 * throw-away box with husk_run.  HUSK_BINARY names the `husk` program boxes
 * are started from when it is not where the library was installed. */
#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC, ssize_t */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <husk/husk.h>

static int die(const char *what, const struct husk_err *err) {
  fprintf(stderr, "boxes: %s: %s\n", what, err->msg);
  return 1;
}

/* Output of the command, as it comes. */
static int sink(void *ctx, int stream, const char *buf, size_t len) {
  (void)ctx;
  fprintf(stream == HUSK_STDOUT ? stdout : stderr, "%.*s", (int)len, buf);
  return 0;
}

static int print_entry(void *ctx, const struct husk_dirent *e) {
  (void)ctx;
  printf("  %c %6llu %s\n", e->type, (unsigned long long)e->size, e->path);
  return 0;
}

static ssize_t read_fd(void *ctx, void *buf, size_t cap) { return read(*(int *)ctx, buf, cap); }

/* A build's output, as it comes. */
static void build_log(void *ctx, const char *buf, size_t len) {
  (void)ctx;
  printf("build: %.*s", (int)len, buf);
}

/* A template built FROM the imported one: a RUN step in a box of it. */
static int build_from(struct husk_mgr *m, const char *tenant, struct husk_err *err) {
  static const char dockerfile[] = "FROM example-image\n"
                                   "RUN echo built by a RUN step > /built\n"
                                   "CMD [\"cat\", \"/built\"]\n";
  struct husk_build_req req = {.dockerfile = dockerfile,
                               .dockerfile_len = sizeof dockerfile - 1,
                               .log = build_log,
                               /* a one-off: no step cache entry keeps its
                                  layer once the template is deleted */
                               .no_cache = true,
                               .cancel_fd = -1};
  struct husk_template_info t;
  if (husk_template_build(m, tenant, "example-built", &req, &t, err) < 0)
    return -1;
  printf("template %s (%s) built: %llu bytes\n", t.name, t.id, (unsigned long long)t.size);
  return husk_template_delete(m, tenant, "example-built", err);
}

/* The image archive at `path` as a template, `id` run in a box of it, a
 * template built from it; all deleted afterwards. */
static int image_box(struct husk_mgr *m, const char *tenant, const char *path,
                     struct husk_err *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err->msg, sizeof err->msg, "cannot open `%s`: %s", path, strerror(errno));
    return -1;
  }
  struct husk_template_info t;
  int rc = husk_template_import(m, tenant, "example-image", read_fd, &fd, &t, err);
  close(fd);
  if (rc < 0)
    return -1;
  printf("template %s (%s): %llu bytes unpacked\n", t.name, t.id, (unsigned long long)t.size);
  struct husk_box_spec spec = {.template_name = "example-image"};
  struct husk_box_info box;
  if (husk_box_create(m, tenant, &spec, &box, err) < 0)
    return -1;
  char *cmd[] = {"id", NULL};
  struct husk_exec_req req = {.argv = cmd, .sink = sink, .cancel_fd = -1};
  struct husk_exec_result res;
  rc = husk_box_exec(m, tenant, box.id, &req, &res, err);
  struct husk_err end_err;
  if (husk_box_destroy(m, tenant, box.id, "stopped", &end_err) < 0 && rc == 0) {
    *err = end_err;
    rc = -1;
  }
  husk_box_info_free(&box);
  if (rc == 0)
    rc = build_from(m, tenant, err);
  if (rc == 0)
    rc = husk_template_delete(m, tenant, "example-image", err);
  return rc;
}

/* Write `text` to `path` in the box: a new unnamed file, then put in place. */
static int write_file(const struct husk_fs *fs, const char *path, const char *text,
                      struct husk_err *err) {
  int fd;
  char tmp[HUSK_TMPNAME_MAX];
  if (husk_file_create(fs, path, true, 0755, &fd, tmp, sizeof tmp, err) < 0)
    return -1;
  size_t len = strlen(text);
  if (write(fd, text, len) != (ssize_t)len) {
    snprintf(err->msg, sizeof err->msg, "cannot write `%s`: %s", path, strerror(errno));
    husk_file_abort(fs, path, fd, tmp);
    close(fd);
    return -1;
  }
  int rc = husk_file_commit(fs, path, fd, tmp, err);
  close(fd);
  return rc;
}

int main(int argc, char **argv) {
  const char *data = argc > 1 ? argv[1] : "/tmp/husk-example";
  struct husk_err err = {0};
  printf("libhusk %s (compiled against %s)\n", husk_version(), HUSK_VERSION);

  struct husk_mgr_config cfg = {.data_dir = data, .husk_binary = getenv("HUSK_BINARY")};
  struct husk_mgr *m;
  if (husk_mgr_open(&m, &cfg, &err) < 0)
    return die("open the manager", &err);

  char tenant[HUSK_TENANT_ID_MAX];
  if (husk_tenant_find(m, "example", tenant, &err) < 0 &&
      husk_tenant_create(m, "example", tenant, &err) < 0)
    return die("tenant", &err);

  struct husk_box_spec spec = {.limits = {.memory_bytes = 256 << 20, .timeout_ms = 600000}};
  struct husk_box_info box;
  if (husk_box_create(m, tenant, &spec, &box, &err) < 0)
    return die("create a box", &err);
  printf("box %s is %s\n", box.id, box.state);

  struct husk_fs fs;
  if (husk_box_open_fs(m, tenant, box.id, &fs, &err) < 0)
    return die("open the box's files", &err);
  if (write_file(&fs, "/workspace/count.sh",
                 "#!/bin/sh\nfor i in 1 2 3; do echo \"line $i\"; done\n"
                 "echo done >/workspace/result.txt\n",
                 &err) < 0)
    return die("write the script", &err);

  char *cmd[] = {"/workspace/count.sh", NULL};
  struct husk_exec_req req = {.argv = cmd, .sink = sink, .cancel_fd = -1};
  struct husk_exec_result res;
  if (husk_box_exec(m, tenant, box.id, &req, &res, &err) < 0)
    return die("run the script", &err);
  printf("the script %s with %d after %llu ms\n", husk_reason_name(res.reason), res.exit_code,
         (unsigned long long)res.wall_ms);

  int fd;
  struct stat st;
  if (husk_file_open_read(&fs, "/workspace/result.txt", &fd, &st, &err) < 0)
    return die("read the result", &err);
  char buf[64] = "";
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  printf("result.txt: %s", n > 0 ? buf : "(empty)\n");

  printf("/workspace:\n");
  if (husk_file_list(&fs, "/workspace", 1, print_entry, NULL, &err) < 0)
    return die("list /workspace", &err);
  husk_fs_close(&fs);

  struct husk_box_metrics use;
  if (husk_box_metrics(m, tenant, box.id, &use, &err) < 0)
    return die("usage", &err);
  printf("memory peak %llu KiB, cpu %llu ms\n", (unsigned long long)use.memory_peak >> 10,
         (unsigned long long)use.cpu_usec / 1000);

  if (husk_box_destroy(m, tenant, box.id, "stopped", &err) < 0)
    return die("delete the box", &err);
  husk_box_info_free(&box);
  if (argc > 2 && image_box(m, tenant, argv[2], &err) < 0)
    return die("a box of an image", &err);
  husk_mgr_close(m, false);

  /* One program, one box, nothing left afterwards. */
  char *once[] = {"sh", "-c", "echo one-shot: $(id -u)", NULL};
  struct husk_run_spec rs = {.argv = once, .stdin_fd = -1, .stdout_fd = 1, .stderr_fd = 2};
  struct husk_run_result rr;
  int code = husk_run(&rs, &rr);
  if (rr.message[0])
    fprintf(stderr, "boxes: husk_run: %s\n", rr.message);
  return code;
}
