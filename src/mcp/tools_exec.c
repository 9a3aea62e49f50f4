/* The tools that run commands: run_code (a fresh box per call),
 * sandbox_exec (a command in a box of the caller's), and the job tools
 * that pick up a call which outlived its wait.
 *
 * Every command runs as a core job (src/box/job.h): a background process
 * whose output goes to files and whose exit the monitor records, so a call
 * can wait at most mcp_wait_ms() (clients drop a call after about 60 s),
 * answer with a job_id and what was produced so far, and a later call -- even
 * after a daemon restart -- collects the rest.  The command's time limit is
 * the job's process's own (the core kills its process group at the
 * deadline, also across daemon restarts). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box/job.h"
#include "husk/context.h"
#include "mcp/boxio.h"
#include "mcp/internal.h"
#include "util/cleanup.h"
#include "util/strbuf.h"

#define RUN_TIMEOUT_DEFAULT_S 300
#define RUN_TIMEOUT_MAX_S 3600
/* A run_code box outlives its command by this much, so that a result not
 * yet collected survives a while; then its TTL ends it. */
#define RUN_BOX_GRACE_MS (15 * 60 * 1000)
#define CODE_MAX (1024 * 1024)
#define OUTPUT_FILES_MAX 50
#define OUTPUT_DIR "/workspace/output"
/* Where whole outputs too long to inline are kept in a box. */
#define KEPT_OUTPUT_DIR "/workspace/.husk/output"

/* ---- output of a job ------------------------------------------------------------ */

struct stream_out {
  json_t *text;   /* what is shown (all, or the tail) */
  uint64_t bytes; /* all of it */
  bool truncated;
  char kept[128]; /* path in the box of the whole output, or "" */
  char *link;     /* storage plane URL of the whole output, or NULL */
};

/* Read a job's stream: the whole output if short, else its tail; when cut,
 * keep the whole in the box (a box that lives on) or publish it (storage
 * plane). */
static void read_stream(struct mcp_call *c, struct husk_mgr *m, const struct state_job *job,
                        int stream, bool keep, struct stream_out *o) {
  memset(o, 0, sizeof *o);
  struct husk_err err;
  cleanup_close int fd = -1;
  if (job_output(m, job, stream, &fd, &err) < 0) {
    o->text = json_string("");
    return;
  }
  struct stat st;
  if (fstat(fd, &st) < 0)
    st.st_size = 0;
  o->bytes = (uint64_t)st.st_size;
  uint64_t off = 0;
  if (o->bytes > MCP_INLINE_OUTPUT) {
    o->truncated = true;
    off = o->bytes - MCP_INLINE_OUTPUT;
  }
  cleanup_free char *buf = NULL;
  size_t n = 0;
  if (mcp_pread_max(fd, off, MCP_INLINE_OUTPUT, &buf, &n, &err) < 0)
    n = 0;
  size_t skip = 0;
  if (off) /* do not start inside a UTF-8 character */
    while (skip < n && skip < 3 && ((unsigned char)buf[skip] & 0xc0) == 0x80)
      skip++;
  o->text = mcp_text(buf ? buf + skip : "", n - skip, NULL);
  if (!o->truncated)
    return;
  const struct mcp_storage *sp = mcp_storage(c->srv);
  if (keep) {
    struct husk_fs b;
    if (mcp_box_fs(m, job->tenant_id, job->box_id, &b, &err) == 0) {
      snprintf(o->kept, sizeof o->kept, KEPT_OUTPUT_DIR "/%s.%s", job->id,
               stream == 1 ? "stdout" : "stderr");
      if (mcp_box_copy_in(&b, o->kept, fd, o->bytes, &err) < 0)
        o->kept[0] = '\0';
      close(b.fs);
    }
  } else if (sp && sp->publish) {
    char name[96];
    snprintf(name, sizeof name, "%s.%s.txt", job->id, stream == 1 ? "stdout" : "stderr");
    int64_t exp = 0;
    /* Named after the job: each poll of a running job, and its end,
     * replace the one object of this stream. */
    /* Written on behalf of whoever started the job, whoever polls it. */
    if (sp->publish(sp->ctx, job->tenant_id, job->created_by, name, true, "text/plain", fd,
                    o->bytes, &o->link, &exp, &err) < 0)
      o->link = NULL;
  }
}

static void put_stream(struct mcp_call *c, json_t *r, const char *name, struct stream_out *o,
                       json_t *notes, bool running) {
  json_object_set_new(r, name, o->text ? o->text : json_string(""));
  o->text = NULL;
  char k[48];
  snprintf(k, sizeof k, "%s_bytes", name);
  json_object_set_new(r, k, json_integer((json_int_t)o->bytes));
  snprintf(k, sizeof k, "%s_truncated", name);
  json_object_set_new(r, k, json_boolean(o->truncated));
  if (!o->truncated)
    return;
  char note[384];
  if (o->kept[0]) {
    snprintf(k, sizeof k, "%s_file", name);
    json_object_set_new(r, k, json_string(o->kept));
    snprintf(note, sizeof note,
             "%s was %llu bytes: only the last %d are shown; the whole "
             "output is in the sandbox at %s (read it with sandbox_read_file or grep it with "
             "sandbox_exec)",
             name, (unsigned long long)o->bytes, MCP_INLINE_OUTPUT, o->kept);
  } else if (o->link) {
    snprintf(k, sizeof k, "%s_url", name);
    json_object_set_new(r, k, json_string(o->link));
    mcp_add_block(c, json_pack("{s:s, s:s, s:s, s:s}", "type", "resource_link", "uri", o->link,
                               "name", name, "mimeType", "text/plain"));
    /* The URL whole (a cut one would be a broken link): it can be long. */
    char *n = NULL;
    if (asprintf(&n, "%s was %llu bytes: only the last %d are shown; the whole output: %s", name,
                 (unsigned long long)o->bytes, MCP_INLINE_OUTPUT, o->link) >= 0) {
      json_array_append_new(notes, json_string(n));
      free(n);
      free(o->link);
      o->link = NULL;
      return;
    }
    snprintf(note, sizeof note,
             "%s was %llu bytes: only the last %d are shown; the whole "
             "output is at %s_url",
             name, (unsigned long long)o->bytes, MCP_INLINE_OUTPUT, name);
  } else if (running) {
    snprintf(note, sizeof note, "%s is %llu bytes so far: only the last %d are shown", name,
             (unsigned long long)o->bytes, MCP_INLINE_OUTPUT);
  } else {
    snprintf(note, sizeof note,
             "%s was %llu bytes: only the last %d are shown (to keep the "
             "whole output, run the code in a sandbox: sandbox_create, then sandbox_exec)",
             name, (unsigned long long)o->bytes, MCP_INLINE_OUTPUT);
  }
  free(o->link);
  o->link = NULL;
  json_array_append_new(notes, json_string(note));
}

/* ---- output files of run_code ------------------------------------------------------ */

#define OUTPUT_DEPTH 4

struct file_list {
  char *paths[OUTPUT_FILES_MAX];
  uint64_t sizes[OUTPUT_FILES_MAX];
  size_t n;
  bool more;
  bool too_deep; /* a directory at the depth limit: what is below it is not listed */
};

static int list_cb(void *ctx, const struct husk_dirent *e) {
  struct file_list *fl = ctx;
  if (e->type == 'd' && e->depth >= OUTPUT_DEPTH)
    fl->too_deep = true;
  if (e->type != 'f')
    return 0;
  if (fl->n == OUTPUT_FILES_MAX) {
    fl->more = true;
    return 1;
  }
  fl->paths[fl->n] = strdup(e->path);
  fl->sizes[fl->n] = e->size;
  if (fl->paths[fl->n])
    fl->n++;
  return 0;
}

/* Files the code wrote under /workspace/output: images as image content,
 * small text inline, others as links (storage plane) or named. */
static json_t *collect_files(struct mcp_call *c, struct husk_mgr *m, const struct state_job *job,
                             json_t *notes) {
  json_t *files = json_array();
  struct husk_err err = {0};
  struct husk_fs b;
  if (mcp_box_fs(m, job->tenant_id, job->box_id, &b, &err) < 0)
    return files;
  struct file_list fl = {0};
  husk_file_list(&b, OUTPUT_DIR, OUTPUT_DEPTH, list_cb, &fl, &err);
  const struct mcp_storage *sp = mcp_storage(c->srv);
  uint64_t images = 0;
  for (size_t i = 0; i < fl.n; i++) {
    const char *path = fl.paths[i];
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    json_t *f = json_pack("{s:s, s:I, s:s}", "path", path, "size", (json_int_t)fl.sizes[i],
                          "mime_type", mcp_mime_by_name(name));
    cleanup_close int fd = -1;
    struct stat st;
    if (husk_file_open_read(&b, path, &fd, &st, &err) < 0) {
      json_array_append_new(files, f);
      continue;
    }
    size_t want = st.st_size > MCP_IMAGE_MAX ? 16 : (size_t)st.st_size;
    cleanup_free char *buf = NULL;
    size_t n = 0;
    if (mcp_pread_max(fd, 0, want, &buf, &n, &err) < 0)
      n = 0;
    const char *img = buf ? mcp_image_mime(name, (unsigned char *)buf, n) : NULL;
    if (img && (uint64_t)st.st_size <= MCP_IMAGE_MAX && images + n <= MCP_IMAGES_TOTAL) {
      cleanup_free char *b64 = mcp_b64_encode(buf, n);
      if (b64) {
        mcp_add_block(c,
                      json_pack("{s:s, s:s, s:s}", "type", "image", "data", b64, "mimeType", img));
        json_object_set_new(f, "mime_type", json_string(img));
        json_object_set_new(f, "returned_as", json_string("image"));
        images += n;
      }
    } else if (!img && n == (size_t)st.st_size && n <= MCP_INLINE_TEXT && buf &&
               mcp_utf8_valid(buf, n)) {
      json_object_set_new(f, "content", json_stringn(buf, n));
      json_object_set_new(f, "returned_as", json_string("inline"));
    } else {
      char *url = NULL;
      int64_t exp = 0;
      if (sp && sp->publish &&
          sp->publish(sp->ctx, job->tenant_id, job->created_by, name, false, mcp_mime_by_name(name),
                      fd, (uint64_t)st.st_size, &url, &exp, &err) == 0 &&
          url) {
        json_object_set_new(f, "url", json_string(url));
        json_object_set_new(f, "url_expires_at", mcp_time(exp));
        json_object_set_new(f, "returned_as", json_string("link"));
        mcp_add_block(c, json_pack("{s:s, s:s, s:s, s:s, s:I}", "type", "resource_link", "uri", url,
                                   "name", name, "mimeType", mcp_mime_by_name(name), "size",
                                   (json_int_t)st.st_size));
        free(url);
      } else {
        /* No storage plane, or it could not publish (no address for
         * links, quota): the file is named, with what to do instead. */
        if (sp && sp->publish)
          mcp_log(c->srv, "run_code: %s not published: %s", name, err.msg);
        json_object_set_new(f, "returned_as", json_string("none"));
        char note[400];
        snprintf(note, sizeof note,
                 "%s was not returned (binary or over %d KiB%s): to fetch it, "
                 "run the code in a sandbox (sandbox_create, sandbox_exec) and use "
                 "sandbox_read_file%s",
                 path, MCP_INLINE_TEXT / 1024, sp && sp->publish ? "; no link could be made" : "",
                 sp && sp->publish ? " or store_file" : "");
        json_array_append_new(notes, json_string(note));
      }
    }
    json_array_append_new(files, f);
  }
  if (fl.more)
    json_array_append_new(notes,
                          json_string("more than 50 output files: only the first 50 are listed"));
  if (fl.too_deep)
    json_array_append_new(notes, json_string("files more than 4 directory levels below "
                                             "/workspace/output are not returned: write results "
                                             "closer to it, or tar the tree into one file there"));
  for (size_t i = 0; i < fl.n; i++)
    free(fl.paths[i]);
  close(b.fs);
  return files;
}

/* ---- job results ----------------------------------------------------------------- */

static json_t *base_result(const struct state_job *job, const char *status) {
  json_t *r = json_pack("{s:s, s:s}", "status", status, "job_id", job->id);
  if (r && !job->ephemeral)
    json_object_set_new(r, "sandbox_id", json_string(job->box_id));
  if (r && job->created_by[0])
    json_object_set_new(r, "created_by", json_string(job->created_by));
  return r;
}

static void finish_notes(json_t *r, json_t *notes) {
  if (json_array_size(notes))
    json_object_set_new(r, "notes", notes);
  else
    json_decref(notes);
}

/* Still running after the wait: what it produced so far. */
static int report_running(struct mcp_call *c, struct husk_mgr *m, const struct state_job *job) {
  json_t *r = base_result(job, "running");
  json_t *notes = json_array();
  struct stream_out o1, o2;
  read_stream(c, m, job, 1, false, &o1);
  read_stream(c, m, job, 2, false, &o2);
  put_stream(c, r, "stdout", &o1, notes, true);
  put_stream(c, r, "stderr", &o2, notes, true);
  json_object_set_new(r, "exit_code", json_null());
  json_object_set_new(r, "running_seconds",
                      json_integer((json_int_t)((state_now_ms() - job->created_ms) / 1000)));
  char note[256];
  snprintf(note, sizeof note,
           "still running: call job_wait with job_id \"%s\" to wait for the "
           "result (output so far is above), or job_cancel to stop it",
           job->id);
  json_array_append_new(notes, json_string(note));
  finish_notes(r, notes);
  mcp_result(c, r, false);
  return 0;
}

/* A result stored when the job ended (job_status / job_wait again). */
static int report_stored(struct mcp_call *c, const struct state_job *job) {
  if (!strcmp(job->state, STATE_JOB_CANCELLED)) {
    mcp_result(c, base_result(job, "cancelled"), false);
    return 0;
  }
  json_error_t je;
  json_t *r = job->result_json ? json_loads(job->result_json, 0, &je) : NULL;
  if (!json_is_object(r)) {
    json_decref(r);
    r = base_result(job, "completed");
  }
  json_t *notes = json_object_get(r, "notes");
  if (!json_is_array(notes)) {
    notes = json_array();
    json_object_set_new(r, "notes", notes);
  }
  json_array_append_new(notes, json_string("this result was already returned once; images "
                                           "are not sent again"));
  json_t *ec = json_object_get(r, "exit_code");
  bool failed = strcmp(json_string_value(json_object_get(r, "status")) ?: "", "completed") != 0 ||
                (json_is_integer(ec) && json_integer_value(ec) != 0);
  mcp_result(c, r, failed);
  return 0;
}

/* The job's process ended: gather everything, record the job's end (which
 * destroys a run_code box), answer. */
static int report_ended(struct mcp_call *c, struct husk_mgr *m, struct state_job *job) {
  struct husk_err err;
  struct husk_proc bp;
  if (job_proc(m, job, &bp, &err) < 0)
    return mcp_tool_core_error(c, "job", job->id, &err);
  bool lost = strcmp(bp.state, STATE_PROC_EXITED) != 0;
  json_t *r = base_result(job, lost ? "failed" : "completed");
  json_t *notes = json_array();
  struct stream_out o1, o2;
  read_stream(c, m, job, 1, !job->ephemeral, &o1);
  read_stream(c, m, job, 2, !job->ephemeral, &o2);
  put_stream(c, r, "stdout", &o1, notes, false);
  put_stream(c, r, "stderr", &o2, notes, false);
  bool timed_out = !lost && bp.reason == HUSK_REASON_TIMEOUT;
  json_object_set_new(r, "exit_code", lost ? json_null() : json_integer(bp.exit_code));
  if (!lost && bp.signal && !timed_out)
    json_object_set_new(r, "signal", json_integer(bp.signal));
  json_object_set_new(
      r, "duration_ms",
      json_integer((json_int_t)(bp.ended_ms > bp.started_ms ? bp.ended_ms - bp.started_ms : 0)));
  json_object_set_new(r, "timed_out", json_boolean(timed_out));
  if (timed_out)
    json_array_append_new(notes, json_string("the command hit its time limit (timeout_seconds) "
                                             "and was stopped; exit code 124"));
  if (lost)
    json_array_append_new(notes, json_string("the sandbox ended (expired, destroyed or out of "
                                             "memory) before the command finished"));
  else if (!timed_out && (bp.exit_code == 137 || bp.signal == SIGKILL))
    json_array_append_new(notes, json_string("the command was killed (exit 137): often the "
                                             "memory limit; use less memory or a bigger sandbox"));
  if (!strcmp(job->kind, "run_code") && !lost)
    json_object_set_new(r, "files", collect_files(c, m, job, notes));
  husk_proc_free(&bp);
  finish_notes(r, notes);
  /* The stored copy is the structured result: images are not kept. */
  cleanup_free char *stored = mcp_dump(r);
  if (job_end(m, job, stored && strlen(stored) <= STATE_JOB_RESULT_MAX ? stored : NULL, &err) < 0) {
    if (err.code == ESTALE) {
      /* Another call collected it at the same time (and may have destroyed
       * its box while this one read): answer what that one recorded. */
      struct state_job again;
      if (job_get(m, job->tenant_id, job->id, &again, &err) == 0) {
        json_decref(r);
        json_decref(c->content);
        c->content = json_array();
        int rc = report_stored(c, &again);
        state_job_free(&again);
        return rc;
      }
    }
    mcp_log(c->srv, "job %s: cannot record its end: %s", job->id, err.msg);
  }
  json_t *ec = json_object_get(r, "exit_code");
  mcp_result(c, r, lost || !json_is_integer(ec) || json_integer_value(ec) != 0);
  return 0;
}

/* Of the output, what a progress notification carries at most per stream:
 * the newest whole lines of what came since the last one. */
#define PROGRESS_OUTPUT_MAX 2000

struct tick_ctx {
  struct mcp_call *c;
  struct husk_mgr *m;
  const struct state_job *job;
  uint64_t seen[2]; /* bytes of stdout, stderr already shown */
};

/* What is new of a stream since the last notification (its newest lines,
 * at most PROGRESS_OUTPUT_MAX bytes), appended to b. */
static void progress_output(struct tick_ctx *t, int stream, struct strbuf *b) {
  struct husk_err err;
  cleanup_close int fd = -1;
  struct stat st;
  if (job_output(t->m, t->job, stream, &fd, &err) < 0 || fstat(fd, &st) < 0)
    return;
  uint64_t size = (uint64_t)st.st_size, from = t->seen[stream - 1];
  if (size <= from)
    return;
  bool cut = size - from > PROGRESS_OUTPUT_MAX;
  if (cut)
    from = size - PROGRESS_OUTPUT_MAX;
  cleanup_free char *buf = NULL;
  size_t n = 0;
  if (mcp_pread_max(fd, from, (size_t)(size - from), &buf, &n, &err) < 0 || n == 0)
    return;
  t->seen[stream - 1] = from + n;
  size_t start = 0;
  if (cut) { /* from a line's start on */
    const char *nl = memchr(buf, '\n', n);
    start = nl ? (size_t)(nl - buf) + 1 : 0;
  }
  strbuf_str(b, stream == 1 ? "\n[stdout]" : "\n[stderr]");
  if (cut)
    strbuf_str(b, " ...");
  strbuf_chr(b, '\n');
  strbuf_add(b, buf + start, n - start);
}

static void tick(void *ctx, uint64_t waited_ms) {
  struct tick_ctx *t = ctx;
  struct strbuf b = {0};
  char head[64];
  snprintf(head, sizeof head, "running for %llu s", (unsigned long long)(waited_ms / 1000));
  strbuf_str(&b, head);
  /* Only for a caller that asked for progress: reading costs. */
  if (t->c->progress_token && t->c->caller->notify) {
    progress_output(t, 1, &b);
    progress_output(t, 2, &b);
  }
  cleanup_free char *text = strbuf_take(&b);
  /* The box's bytes as valid text (a notification is JSON). */
  json_t *j = text ? mcp_text(text, strlen(text), NULL) : NULL;
  mcp_progress(t->c, waited_ms / 1000, j ? json_string_value(j) : head);
  json_decref(j);
}

/* Wait at most `wait_ms` for the job, then report. */
static int wait_and_report(struct mcp_call *c, struct husk_mgr *m, struct state_job *job,
                           uint64_t wait_ms, bool started_here) {
  struct husk_err err;
  snprintf(c->audit_box, sizeof c->audit_box, "%s", job->box_id);
  /* Notifications show the output from its start for the call that
   * started the job, else from where this call began (job_wait: what
   * came before was in earlier answers). */
  struct tick_ctx t = {.c = c, .m = m, .job = job};
  for (int stream = 1; stream <= 2 && !started_here; stream++) {
    cleanup_close int fd = -1;
    struct stat st;
    if (job_output(m, job, stream, &fd, &err) == 0 && fstat(fd, &st) == 0)
      t.seen[stream - 1] = (uint64_t)st.st_size;
  }
  int r = job_wait(m, job, wait_ms, c->cancel_fd, tick, &t, &err);
  if (r < 0 && err.code == ECANCELED) {
    /* Cancelled by notifications/cancelled (or the caller left, where that
     * means cancel): the command stops.  A caller that merely went away
     * leaves it running as a job. */
    bool gone = c->caller->cancel_fd >= 0 && mcp_fd_readable(c->caller->cancel_fd);
    if (!gone || c->caller->gone_cancels)
      job_cancel(m, job->tenant_id, job->id, &err);
    c->suppressed = true;
    return 0;
  }
  if (r < 0)
    return mcp_tool_core_error(c, "job", job->id, &err);
  return r == 0 ? report_running(c, m, job) : report_ended(c, m, job);
}

/* ---- shared schema of job results ---------------------------------------------------- */

/* The job fields (every field but status), shared by the job tools and
 * run_code. */
#define JOB_RESULT_FIELDS                                                                          \
  "\"job_id\":{\"type\":\"string\"},"                                                              \
  "\"sandbox_id\":{\"type\":\"string\"},"                                                          \
  "\"created_by\":{\"type\":\"string\"},"                                                          \
  "\"exit_code\":{\"type\":[\"integer\",\"null\"]},"                                               \
  "\"signal\":{\"type\":\"integer\"},"                                                             \
  "\"stdout\":{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"},"                             \
  "\"stdout_bytes\":{\"type\":\"integer\"},\"stderr_bytes\":{\"type\":\"integer\"},"               \
  "\"stdout_truncated\":{\"type\":\"boolean\"},\"stderr_truncated\":{\"type\":\"boolean\"},"       \
  "\"stdout_file\":{\"type\":\"string\"},\"stderr_file\":{\"type\":\"string\"},"                   \
  "\"duration_ms\":{\"type\":\"integer\"},\"running_seconds\":{\"type\":\"integer\"},"             \
  "\"timed_out\":{\"type\":\"boolean\"},"                                                          \
  "\"files\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"                  \
  "\"path\":{\"type\":\"string\"},\"size\":{\"type\":\"integer\"},\"mime_type\":{\"type\":"        \
  "\"string\"},"                                                                                   \
  "\"returned_as\":{\"type\":\"string\"},\"content\":{\"type\":\"string\"},\"url\":{\"type\":"     \
  "\"string\"}},"                                                                                  \
  "\"required\":[\"path\",\"size\"]}},"                                                            \
  "\"notes\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}"

/* job_status's: the job result, or with offsets a piece of the output. */
#define JOB_STATUS_SCHEMA                                                                          \
  "{\"type\":\"object\",\"properties\":{"                                                          \
  "\"status\":{\"type\":\"string\",\"enum\":[\"completed\",\"failed\",\"running\",\"cancelled\","  \
  "\"ended\"],\"description\":\"" JOB_STATUS_DESC                                                  \
  "; ended: with offsets, the job is over\"}," JOB_RESULT_FIELDS ","                               \
  "\"stdout_offset\":{\"type\":\"integer\"},\"stderr_offset\":{\"type\":\"integer\"},"             \
  "\"stdout_next_offset\":{\"type\":\"integer\"},\"stderr_next_offset\":{\"type\":\"integer\"},"   \
  "\"stdout_more\":{\"type\":\"boolean\"},\"stderr_more\":{\"type\":\"boolean\"},"                 \
  "\"stdout_gone\":{\"type\":\"boolean\"},\"stderr_gone\":{\"type\":\"boolean\"}"                  \
  "},\"required\":[\"status\",\"job_id\"]}"

#define JOB_STATUS_DESC                                                                            \
  "completed: the command ended (see exit_code); running: still running, "                         \
  "call job_wait; failed: the sandbox ended first; cancelled: stopped by job_cancel"

#define JOB_RESULT_SCHEMA                                                                          \
  "{\"type\":\"object\",\"properties\":{"                                                          \
  "\"status\":{\"type\":\"string\",\"enum\":[\"completed\",\"failed\",\"running\",\"cancelled\"]," \
  "\"description\":\"" JOB_STATUS_DESC "\"}," JOB_RESULT_FIELDS                                    \
  "},\"required\":[\"status\",\"job_id\"]}"

/* run_code answers a job result (no sandbox_id) or an execution in a code
 * context (sandbox_id): one schema that admits both. */
#define RUN_CODE_SCHEMA                                                                            \
  "{\"type\":\"object\",\"properties\":{"                                                          \
  "\"status\":{\"type\":\"string\",\"enum\":[\"completed\",\"failed\",\"running\",\"cancelled\","  \
  "\"ok\",\"error\",\"interrupted\",\"timeout\",\"died\",\"restarted\"],"                          \
  "\"description\":\"without sandbox_id: " JOB_STATUS_DESC ". With sandbox_id (a code context): "  \
  "ok, error (the code raised), interrupted, timeout, died (the interpreter ended: restarted, "    \
  "state lost), restarted (by a contexts restart or delete)\"}," JOB_RESULT_FIELDS                 \
  "," MCP_CTX_RESULT_FIELDS "},\"required\":[\"status\"]}"

/* An input file name for run_code: relative, inside /workspace. */
static bool input_name_ok(const char *n) {
  if (!*n || n[0] == '/' || strlen(n) > 200)
    return false;
  for (const char *p = n; p;) {
    const char *e = strchr(p, '/');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == 0 || (len == 2 && !strncmp(p, "..", 2)) || (len == 1 && p[0] == '.'))
      return false;
    p = e ? e + 1 : NULL;
  }
  return true;
}

/* ---- run_code ------------------------------------------------------------------------ */

/* "node" and "javascript" are the same language: node is the name run_code
 * always had, javascript the code contexts'. */
static const char *const languages[] = {"python", "bash", "node", "javascript", NULL};

static const struct mcp_param run_code_params[] = {
    {"language", MCP_P_STRING, false,
     "python (default; python3 with numpy and matplotlib), bash, "
     "or node / javascript (if installed). With context_id: the context's language (leave it out)",
     languages, 0, 0, 0},
    {"template", MCP_P_STRING, false,
     "the software it runs with: a template name from "
     "template_list (default: \"default\"); the template must have the language's interpreter. "
     "Not with sandbox_id (the sandbox has its template)",
     NULL, 0, 0, 64},
    {"code", MCP_P_STRING, true,
     "the program; without sandbox_id it runs as /workspace/main.py "
     "(.sh, .js) with /workspace as working directory; with sandbox_id it is one step of the "
     "context's session (a notebook cell)",
     NULL, 0, 0, CODE_MAX},
    {"files", MCP_P_STRMAP, false,
     "input files to create first: relative path under /workspace "
     "-> text content (with files_base64, at most 3 MiB of files)",
     NULL, 0, 0, MCP_CONTENT_MAX},
    {"files_base64", MCP_P_STRMAP, false,
     "binary input files: relative path under /workspace -> "
     "base64 content (with files, at most 3 MiB of files, decoded)",
     NULL, 0, 0, MCP_CONTENT_B64_MAX},
    {"timeout_seconds", MCP_P_INT, false,
     "time limit (default 300; with sandbox_id the server's "
     "wait, 45 s unless configured); past it the program is stopped (exit_code 124), or a "
     "context's execution interrupted (status timeout, the state kept)",
     NULL, 1, RUN_TIMEOUT_MAX_S, 0},
    {"sandbox_id", MCP_P_STRING, false,
     "run in this sandbox (from sandbox_create) in a code "
     "context that keeps variables, imports and figures between calls, like a notebook",
     NULL, 0, 0, 64},
    {"context_id", MCP_P_STRING, false,
     "with sandbox_id: the context to run in (from contexts "
     "create); default \"default-<language>\", made on first use",
     NULL, 0, 0, HUSK_CTX_ID_MAX - 1},
    {NULL, 0, false, NULL, NULL, 0, 0, 0},
};

int mcp_check_inputs(struct mcp_call *c) {
  uint64_t total = 0;
  const char *name;
  json_t *v;
  json_object_foreach(mcp_arg(c, "files"), name, v) total += json_string_length(v);
  json_object_foreach(mcp_arg(c, "files_base64"), name, v) total +=
      mcp_b64_decoded_len(json_string_value(v), json_string_length(v));
  if (total > MCP_CONTENT_MAX)
    return mcp_tool_error(c,
                          "the input files hold %llu bytes, more than a call may carry (%d, "
                          "3 MiB, decoded): write them with sandbox_write_file in parts, or "
                          "load_file them from storage",
                          (unsigned long long)total, MCP_CONTENT_MAX),
           -1;
  return 0;
}

int mcp_write_inputs(struct mcp_call *c, const struct husk_fs *b, json_t *map, bool b64) {
  const char *name;
  json_t *v;
  struct husk_err err;
  json_object_foreach(map, name, v) {
    if (!input_name_ok(name))
      return mcp_tool_error(c,
                            "input file name `%.200s` is not allowed: use a relative path "
                            "under /workspace without `..` (for example \"data/in.csv\")",
                            name),
             -1;
    char path[256];
    snprintf(path, sizeof path, "/workspace/%s", name);
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    unsigned char *bin = NULL;
    size_t blen = 0;
    if (b64 && mcp_b64_decode(s, len, &bin, &blen) < 0)
      return mcp_tool_error(c, "files_base64 `%.200s` is not valid base64", name), -1;
    int rc = mcp_box_write(b, path, b64 ? (const void *)bin : s, b64 ? blen : len, &err);
    free(bin);
    if (rc < 0)
      return mcp_tool_core_error(c, "input file", name, &err), -1;
  }
  return 0;
}

static int run_code(struct mcp_call *c) {
  if (mcp_arg_str(c, "sandbox_id"))
    return mcp_run_in_context(c);
  if (mcp_arg_str(c, "context_id"))
    return mcp_tool_error(c, "context_id needs sandbox_id: a code context lives in a sandbox "
                             "(sandbox_create); leave context_id out for a one-shot run");
  if (mcp_check_inputs(c) < 0)
    return 0;
  const char *lang = mcp_arg_str(c, "language"), *code = mcp_arg_str(c, "code");
  if (!lang)
    lang = "python";
  int64_t secs = RUN_TIMEOUT_DEFAULT_S;
  mcp_arg_int(c, "timeout_seconds", &secs);
  snprintf(c->audit_detail, sizeof c->audit_detail, "language=%s", lang);
  struct husk_mgr *m = mcp_call_mgr(c);
  if (!m)
    return 0;
  const char *interp = !strcmp(lang, "python") ? "python3"
                       : !strcmp(lang, "bash") ? "bash"
                                               : "node";
  const char *script = !strcmp(lang, "python") ? "/workspace/main.py"
                       : !strcmp(lang, "bash") ? "/workspace/main.sh"
                                               : "/workspace/main.js";
  struct husk_err err;
  char creator[STATE_CREATED_BY_SIZE];
  mcp_created_by(c->caller, creator, sizeof creator);
  struct husk_box_spec cr = {.template_name = mcp_arg_str(c, "template"),
                             .metadata_json = "{\"via\":\"mcp run_code\"}",
                             .created_by = creator};
  cr.limits.timeout_ms = (uint64_t)secs * 1000 + RUN_BOX_GRACE_MS;
  struct husk_box_info bi = {0};
  if (husk_box_create(m, c->caller->tenant, &cr, &bi, &err) < 0)
    return mcp_tool_core_error(c, "sandbox", "", &err);
  snprintf(c->audit_box, sizeof c->audit_box, "%s", bi.id);
  char box_id[sizeof bi.id];
  snprintf(box_id, sizeof box_id, "%s", bi.id);
  husk_box_info_free(&bi);
  struct husk_fs b;
  bool ok = false;
  if (mcp_box_fs(m, c->caller->tenant, box_id, &b, &err) < 0) {
    mcp_tool_core_error(c, "sandbox", box_id, &err);
  } else {
    if (husk_file_mkdir(&b, OUTPUT_DIR, true, &err) < 0 ||
        mcp_box_write(&b, script, code, strlen(code), &err) < 0)
      mcp_tool_core_error(c, "sandbox", box_id, &err);
    else if (mcp_write_inputs(c, &b, mcp_arg(c, "files"), false) == 0 &&
             mcp_write_inputs(c, &b, mcp_arg(c, "files_base64"), true) == 0)
      ok = true;
    close(b.fs);
  }
  struct state_job job = {0};
  if (ok) {
    char *argv[] = {(char *)interp, (char *)script, NULL};
    char *env[] = {"MPLBACKEND=Agg", "MPLCONFIGDIR=/tmp/.matplotlib", "PYTHONUNBUFFERED=1",
                   "OUTPUT_DIR=" OUTPUT_DIR, NULL};
    struct husk_exec_req er = {.argv = argv,
                               .env = env,
                               .cwd = "/workspace",
                               .timeout_ms = (uint64_t)secs * 1000,
                               .cancel_fd = -1,
                               .created_by = creator};
    ok = false;
    if (job_start(m, c->caller->tenant, box_id, "run_code", true, &er, &job, &err) < 0)
      mcp_tool_core_error(c, "run", interp, &err);
    else
      ok = true;
  }
  if (!ok) {
    husk_box_destroy(m, c->caller->tenant, box_id, "killed", &err);
    return 0;
  }
  /* No stdin: EOF at once, so a program reading it does not hang. */
  husk_proc_stdin(m, c->caller->tenant, box_id, job.pid, "", 0, true, &err);
  int rc = wait_and_report(c, m, &job, mcp_wait_ms(c->srv), true);
  state_job_free(&job);
  return rc;
}

const struct mcp_tool mcp_tool_run_code = {
    "run_code",
    "Run code",
    "Run code in an isolated Linux sandbox, in one of two ways. WITHOUT sandbox_id: the program "
    "runs once in a fresh sandbox that is destroyed afterwards; use it for a self-contained "
    "script (calculations, data processing, charts). Installed: Python 3 with numpy and "
    "matplotlib (the Agg backend is preset), bash and the usual command-line tools; node only if "
    "the host has it. The sandbox has NO network access and no credentials, 512 MiB of memory and "
    "1 GiB of disk. Pass input data with `files` (text) or `files_base64` (binary); they appear "
    "under /workspace. Write results to /workspace/output (the OUTPUT_DIR variable): PNG/JPEG/SVG "
    "images come back as images, small text files inline. Returns stdout, stderr and exit_code. "
    "If the program runs longer than the server's wait (45 s unless configured; see the "
    "instructions) you get status \"running\" and a job_id: call job_wait with it. WITH "
    "sandbox_id (from sandbox_create): the code is the next step of a stateful session, like a "
    "notebook cell: variables, imports, loaded data and figures stay between calls in the "
    "sandbox's code context (one per language by default; see the contexts tool for more). The "
    "value of the last expression comes back as text, matplotlib figures as images (no savefig "
    "needed), HTML as a resource, an exception as an error with its traceback. Prefer it for "
    "exploring data step by step or building on earlier results without re-running everything; "
    "each step must finish within its timeout (default: the server's wait).",
    run_code_params,
    RUN_CODE_SCHEMA,
    false,
    false,
    false,
    run_code,
    .scope = AUTH_SCOPE_SANDBOX,
};

/* ---- sandbox_exec ------------------------------------------------------------------- */

static const struct mcp_param exec_params[] = {
    {"sandbox_id", MCP_P_STRING, true, "the id from sandbox_create", NULL, 0, 0, 64},
    {"command", MCP_P_STRING, true, "a bash command line, e.g. \"python3 main.py > out.txt\"", NULL,
     0, 0, 128 * 1024},
    {"cwd", MCP_P_STRING, false, "absolute working directory (default /workspace)", NULL, 0, 0,
     1024},
    {"stdin", MCP_P_STRING, false, "text given to the command on stdin", NULL, 0, 0, 1024 * 1024},
    {"timeout_seconds", MCP_P_INT, false,
     "time limit of the command (default 300); past it the "
     "command is stopped and exit_code is 124",
     NULL, 1, RUN_TIMEOUT_MAX_S, 0},
    {NULL, 0, false, NULL, NULL, 0, 0, 0},
};

static int sandbox_exec(struct mcp_call *c) {
  const char *id = mcp_arg_str(c, "sandbox_id"), *cmd = mcp_arg_str(c, "command");
  const char *cwd = mcp_arg_str(c, "cwd"), *in = mcp_arg_str(c, "stdin");
  int64_t secs = RUN_TIMEOUT_DEFAULT_S;
  mcp_arg_int(c, "timeout_seconds", &secs);
  snprintf(c->audit_box, sizeof c->audit_box, "%.40s", id);
  snprintf(c->audit_detail, sizeof c->audit_detail, "bash -c");
  if (cwd && cwd[0] != '/')
    return mcp_tool_error(c, "cwd must be an absolute path such as /workspace/project");
  struct husk_mgr *m = mcp_call_mgr(c);
  if (!m)
    return 0;
  /* bash where the box has it (the default template does); an image
   * without it gets its sh. */
  static const char pick[] = "if command -v bash >/dev/null 2>&1; then exec bash -c \"$1\"; "
                             "else exec sh -c \"$1\"; fi";
  char *bash_argv[] = {"bash", "-c", (char *)cmd, NULL};
  char *sh_argv[] = {"/bin/sh", "-c", (char *)pick, "sh", (char *)cmd, NULL};
  struct husk_box_info bi = {0};
  struct husk_err err;
  bool is_default =
      husk_box_get(m, c->caller->tenant, id, &bi, &err) < 0 || !strcmp(bi.template_name, "default");
  husk_box_info_free(&bi);
  char creator[STATE_CREATED_BY_SIZE];
  mcp_created_by(c->caller, creator, sizeof creator);
  struct husk_exec_req er = {.argv = is_default ? bash_argv : sh_argv,
                             .cwd = cwd,
                             .timeout_ms = (uint64_t)secs * 1000,
                             .cancel_fd = -1,
                             .created_by = creator};
  struct state_job job = {0};
  if (job_start(m, c->caller->tenant, id, "exec", false, &er, &job, &err) < 0) {
    if (cwd && strstr(err.msg, "working directory"))
      return mcp_tool_error(c,
                            "cwd `%s` does not exist in the sandbox (create it first, e.g. "
                            "mkdir -p, or leave cwd out for /workspace)",
                            cwd);
    return mcp_tool_core_error(c, "sandbox", id, &err);
  }
  if (husk_proc_stdin(m, c->caller->tenant, id, job.pid, in ? in : "", in ? strlen(in) : 0, true,
                      &err) < 0 &&
      err.code != EBUSY)
    mcp_log(c->srv, "job %s: stdin: %s", job.id, err.msg);
  int rc = wait_and_report(c, m, &job, mcp_wait_ms(c->srv), true);
  state_job_free(&job);
  return rc;
}

const struct mcp_tool mcp_tool_sandbox_exec = {
    "sandbox_exec",
    "Run a command in a sandbox",
    "Run a bash command line in a sandbox made by sandbox_create (sh in a template without bash; "
    "working directory /workspace, or the template's, unless cwd is given). Files and installed "
    "state persist between calls in the same sandbox. "
    "Returns stdout, stderr and exit_code; a non-zero exit_code is reported as an error result. "
    "Output longer than 20 kB per stream is cut to its last 20 kB and kept whole in a file in the "
    "sandbox (path in stdout_file / stderr_file). If the command runs longer than the server's "
    "wait (45 s unless configured) "
    "you get status \"running\" and a job_id: call job_wait with it (or job_cancel). No network.",
    exec_params,
    JOB_RESULT_SCHEMA,
    false,
    false,
    false,
    sandbox_exec,
    .scope = AUTH_SCOPE_SANDBOX,
};

/* ---- job tools ---------------------------------------------------------------------- */

static const struct mcp_param job_params[] = {
    {"job_id", MCP_P_STRING, true, "the job_id a run_code or sandbox_exec call returned", NULL, 0,
     0, 64},
    {NULL, 0, false, NULL, NULL, 0, 0, 0},
};

static const struct mcp_param job_status_params[] = {
    {"job_id", MCP_P_STRING, true, "the job_id a run_code or sandbox_exec call returned", NULL, 0,
     0, 64},
    {"stdout_offset", MCP_P_INT, false,
     "read stdout from this byte on (0 at first, then the "
     "stdout_next_offset of the previous call): only what is new comes back, up to 64 KiB a "
     "call, while the job runs and after",
     NULL, 0, 1e15, 0},
    {"stderr_offset", MCP_P_INT, false, "the same for stderr", NULL, 0, 1e15, 0},
    {NULL, 0, false, NULL, NULL, 0, 0, 0},
};

/* Of a job's stream, the bytes from `off` on: at most MCP_INLINE_TEXT, cut
 * back to whole UTF-8 characters, with where to go on from and the total
 * so far. */
static void read_from(struct husk_mgr *m, const struct state_job *job, int stream, uint64_t off,
                      json_t *r) {
  const char *name = stream == 1 ? "stdout" : "stderr";
  char k[48];
  struct husk_err err;
  cleanup_close int fd = -1;
  uint64_t total = 0;
  cleanup_free char *buf = NULL;
  size_t n = 0;
  if (job_output(m, job, stream, &fd, &err) == 0) {
    struct stat st;
    total = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
    if (off < total && mcp_pread_max(fd, off, MCP_INLINE_TEXT, &buf, &n, &err) < 0)
      n = 0;
  } else {
    snprintf(k, sizeof k, "%s_gone", name);
    json_object_set_new(r, k, json_true());
  }
  /* Not in the middle of a character: a cut one comes whole next time. */
  if (n > 0 && off + n < total) {
    size_t keep = n;
    size_t back = 0;
    while (back < 3 && back < keep && ((unsigned char)buf[keep - 1 - back] & 0xc0) == 0x80)
      back++;
    if (back < keep && ((unsigned char)buf[keep - 1 - back] & 0x80)) {
      unsigned char lead = (unsigned char)buf[keep - 1 - back];
      size_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
      if (need > back + 1)
        n = keep - 1 - back;
    }
  }
  json_object_set_new(r, name, mcp_text(buf ? buf : "", n, NULL));
  snprintf(k, sizeof k, "%s_offset", name);
  json_object_set_new(r, k, json_integer((json_int_t)off));
  snprintf(k, sizeof k, "%s_next_offset", name);
  json_object_set_new(r, k, json_integer((json_int_t)(off + n)));
  snprintf(k, sizeof k, "%s_bytes", name);
  json_object_set_new(r, k, json_integer((json_int_t)total));
  snprintf(k, sizeof k, "%s_more", name);
  json_object_set_new(r, k, json_boolean(off + n < total));
}

/* job_status with stdout_offset / stderr_offset: what is new of the
 * output, however long it is, on any transport. */
static int report_from(struct mcp_call *c, struct husk_mgr *m, const struct state_job *job) {
  bool running = !strcmp(job->state, STATE_JOB_RUNNING);
  if (running) {
    struct husk_err err;
    /* Ended since: its result recorded first, as job_status would. */
    if (job_wait(m, job, 0, -1, NULL, NULL, &err) > 0)
      running = false;
  }
  json_t *r = base_result(job, running                                    ? "running"
                               : !strcmp(job->state, STATE_JOB_CANCELLED) ? "cancelled"
                                                                          : "ended");
  int64_t o1 = -1, o2 = -1;
  mcp_arg_int(c, "stdout_offset", &o1);
  mcp_arg_int(c, "stderr_offset", &o2);
  if (o1 >= 0)
    read_from(m, job, 1, (uint64_t)o1, r);
  if (o2 >= 0)
    read_from(m, job, 2, (uint64_t)o2, r);
  json_t *notes = json_array();
  if (json_is_true(json_object_get(r, "stdout_gone")) ||
      json_is_true(json_object_get(r, "stderr_gone")))
    json_array_append_new(notes, json_string("the output is gone with its sandbox: job_status "
                                             "without offsets gives the job's result"));
  else if (running)
    json_array_append_new(notes, json_string("still running: call job_status again with the "
                                             "*_next_offset values to get what comes next"));
  else
    json_array_append_new(notes, json_string("the job has ended: job_status without offsets "
                                             "gives its result (exit_code, files)"));
  finish_notes(r, notes);
  mcp_result(c, r, false);
  return 0;
}

static const struct mcp_param job_wait_params[] = {
    {"job_id", MCP_P_STRING, true, "the job_id a run_code or sandbox_exec call returned", NULL, 0,
     0, 64},
    {"timeout_seconds", MCP_P_INT, false,
     "longest wait (default and maximum: the server's wait, 45 s unless configured); "
     "call again if it is still running",
     NULL, 0, 3600, 0},
    {NULL, 0, false, NULL, NULL, 0, 0, 0},
};

static int job_common(struct mcp_call *c, uint64_t wait_ms) {
  const char *id = mcp_arg_str(c, "job_id");
  snprintf(c->audit_detail, sizeof c->audit_detail, "%.60s", id);
  struct husk_mgr *m = mcp_call_mgr(c);
  if (!m)
    return 0;
  struct state_job job;
  struct husk_err err;
  if (job_get(m, c->caller->tenant, id, &job, &err) < 0)
    return mcp_tool_core_error(c, "job", id, &err);
  snprintf(c->audit_box, sizeof c->audit_box, "%s", job.box_id);
  int rc;
  if (mcp_arg(c, "stdout_offset") || mcp_arg(c, "stderr_offset"))
    rc = report_from(c, m, &job);
  else if (!strcmp(job.state, STATE_JOB_RUNNING))
    rc = wait_and_report(c, m, &job, wait_ms, false);
  else
    rc = report_stored(c, &job);
  state_job_free(&job);
  return rc;
}

static int job_status_run(struct mcp_call *c) { return job_common(c, 0); }

static int job_wait_run(struct mcp_call *c) {
  uint64_t w = mcp_wait_ms(c->srv);
  int64_t s;
  if (mcp_arg_int(c, "timeout_seconds", &s) && (uint64_t)s * 1000 < w)
    w = (uint64_t)s * 1000;
  return job_common(c, w);
}

static int job_cancel_run(struct mcp_call *c) {
  const char *id = mcp_arg_str(c, "job_id");
  snprintf(c->audit_detail, sizeof c->audit_detail, "%.60s", id);
  struct husk_mgr *m = mcp_call_mgr(c);
  if (!m)
    return 0;
  struct husk_err err;
  struct state_job job;
  if (job_get(m, c->caller->tenant, id, &job, &err) < 0)
    return mcp_tool_core_error(c, "job", id, &err);
  snprintf(c->audit_box, sizeof c->audit_box, "%s", job.box_id);
  int rc = 0;
  if (job_cancel(m, c->caller->tenant, id, &err) < 0) {
    if (err.code == EBUSY)
      rc = mcp_tool_error(c, "job `%s` has already ended: get its result with job_status", id);
    else
      rc = mcp_tool_core_error(c, "job", id, &err);
  } else {
    json_t *r = base_result(&job, "cancelled");
    json_object_set_new(r, "notes", json_pack("[s]", "the command was killed"));
    mcp_result(c, r, false);
  }
  state_job_free(&job);
  return rc;
}

const struct mcp_tool mcp_tool_job_status = {
    "job_status",
    "Job status",
    "Look at a job (a run_code or sandbox_exec call that ran longer than the wait) without "
    "waiting: its status, the output so far (its last 20 kB), and once it has ended, its full "
    "result. To follow a long output as it grows, or read all of it, pass stdout_offset (and/or "
    "stderr_offset): 0 the first time, then the stdout_next_offset of the previous answer; each "
    "answer holds only what is new (up to 64 KiB), with stdout_bytes so far and stdout_more.",
    job_status_params,
    JOB_STATUS_SCHEMA,
    true,
    false,
    true,
    job_status_run,
    .scope = AUTH_SCOPE_SANDBOX_READ,
};

const struct mcp_tool mcp_tool_job_wait = {
    "job_wait",
    "Wait for a job",
    "Wait up to the server's wait (45 s unless configured) for a job to finish and return its "
    "result (stdout, stderr, "
    "exit_code, files, images). If it is still running you get status \"running\" with the "
    "output so far: call job_wait again.",
    job_wait_params,
    JOB_RESULT_SCHEMA,
    true,
    false,
    true,
    job_wait_run,
    .scope = AUTH_SCOPE_SANDBOX_READ,
};

const struct mcp_tool mcp_tool_job_cancel = {
    "job_cancel",
    "Cancel a job",
    "Stop a running job: its command is killed (a run_code sandbox is destroyed too).",
    job_params,
    JOB_RESULT_SCHEMA,
    false,
    true,
    true,
    job_cancel_run,
    .scope = AUTH_SCOPE_SANDBOX,
};
