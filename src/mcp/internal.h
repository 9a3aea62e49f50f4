/* Shared between the files of src/mcp. */
#ifndef HUSK_MCP_INTERNAL_H
#define HUSK_MCP_INTERNAL_H

#include <pthread.h>
#include <string.h>

#include "box/files.h"
#include "auth/auth.h"
#include "mcp/mcp.h"
#include "util/base64.h"
#include "util/json_text.h"
#include "util/utf8.h"

/* husk's own tools (tools_exec.c, tools_box.c), in tools/list order. */
extern const struct mcp_tool mcp_tool_run_code, mcp_tool_sandbox_create, mcp_tool_sandbox_exec,
    mcp_tool_sandbox_write_file, mcp_tool_sandbox_read_file, mcp_tool_sandbox_list_files,
    mcp_tool_sandbox_destroy, mcp_tool_sandbox_list, mcp_tool_sandbox_pause,
    mcp_tool_sandbox_resume, mcp_tool_sandbox_snapshot, mcp_tool_sandbox_snapshots,
    mcp_tool_job_status, mcp_tool_job_wait,
    mcp_tool_job_cancel, mcp_tool_template_list, mcp_tool_contexts;
/* tools_fetch.c */
extern const struct mcp_tool mcp_tool_fetch_url;
/* tools_preview.c: listed where the server serves preview URLs. */
extern const struct mcp_tool mcp_tool_expose_port;
/* tools_upload.c: with the storage plane's tools. */
extern const struct mcp_tool mcp_tool_create_upload_link;

/* A tools/call in flight, findable by notifications/cancelled. */
struct mcp_inflight {
  struct mcp_inflight *next;
  char *scope;  /* tenant id: a caller cancels only its own calls */
  char *id;     /* the request id as compact JSON */
  int event_fd; /* written to cancel */
  bool cancelled;
};

struct mcp_sub;
struct mcp_prompts;
struct mcp_doc;

struct mcp_server {
  struct mcp_config cfg;
  pthread_mutex_t lock;
  struct mcp_inflight *inflight;
  struct mcp_prompts *prompts; /* --prompts DIR, or NULL */
  int docs_fd;                 /* --resources DIR (O_PATH), or -1 */
  /* The last walk of the documents, sorted, and when it was made. */
  pthread_mutex_t docs_lock;
  struct mcp_doc *docs;
  size_t ndocs;
  bool docs_walked;
  int64_t docs_walked_ms;
  /* Resource subscriptions and the thread that polls them. */
  pthread_mutex_t sub_lock;
  pthread_cond_t sub_cond;
  struct mcp_sub *subs;
  pthread_t watcher;
  bool watching, sub_stop;
};

/* prompts.c: the prompts of a directory (one Markdown file each).  Files
 * that cannot be used are reported through `log` with file and line and
 * left out; -1 only when the directory cannot be read. */
#define MCP_PROMPTS_MAX 1000            /* .md files in the directory */
#define MCP_PROMPT_FILE_MAX (256 * 1024) /* bytes of one file */
#define MCP_PROMPT_NAME_MAX 64
#define MCP_PROMPT_ARGS_MAX 32
#define MCP_PROMPT_YAML_DEPTH 16          /* collections in collections */
#define MCP_PROMPT_RESULT_MAX (1024 * 1024) /* a filled prompt's text */
int mcp_prompts_load(const char *dir, void (*log)(void *ctx, const char *line), void *log_ctx,
                     struct mcp_prompts **out, struct husk_err *err);
void mcp_prompts_free(struct mcp_prompts *ps);
size_t mcp_prompts_count(const struct mcp_prompts *ps);
bool mcp_prompt_name_ok(const char *s);
json_t *mcp_prompts_list(const struct mcp_prompts *ps);
/* The result of prompts/get, or -1 and why (for an Invalid params error). */
int mcp_prompt_get(const struct mcp_prompts *ps, const char *name, json_t *args, json_t **result,
                   char *why, size_t whylen);

/* resources.c */
#define MCP_URI_MAX 8192         /* bytes of a resource URI */
#define MCP_RESOURCES_PAGE 100   /* resources per resources/list page */
#define MCP_DOCS_MAX 10000       /* documents listed */
#define MCP_DOCS_DEPTH 8         /* directory levels of the documents walked */
#define MCP_SUBSCRIPTIONS_MAX 100
#define MCP_SUBSCRIBE_POLL_MS 1000
#define MCP_SUBSCRIBE_LOCK_MS 3000
#define MCP_DOCS_VISIT_MAX 100000 /* directory entries one walk of the documents looks at */
#define MCP_DOCS_CACHE_MS 5000    /* how long a walk of the documents is kept */
int mcp_docs_open(const char *dir, int *fd, struct husk_err *err);
/* One page of resources (cursor: the previous page's nextCursor, or
 * NULL); *next the next page's cursor (malloc'd) or NULL.  NULL and why:
 * a bad cursor. */
json_t *mcp_resources_list(struct mcp_server *s, const struct mcp_caller *c, json_t *cursor,
                           char **next, char *why, size_t whylen);
json_t *mcp_resource_templates(struct mcp_server *s);
/* {"contents": [...]}, or NULL and why (*not_found: no such resource). */
json_t *mcp_resource_read(struct mcp_server *s, const struct mcp_caller *c, const char *uri,
                          bool *not_found, char *why, size_t whylen);
int mcp_resource_subscribe(struct mcp_server *s, const struct mcp_caller *c, const char *uri,
                           char *why, size_t whylen);
/* uri NULL: every subscription of the caller's transport.  false: not
 * done, a notification to that transport has been blocked in its write
 * for MCP_SUBSCRIBE_LOCK_MS (the transport must then not be freed). */
bool mcp_resource_unsubscribe(struct mcp_server *s, const struct mcp_caller *c, const char *uri);
void mcp_resources_stop(struct mcp_server *s);

/* tools.c: the input schema of a tool and the check of its arguments
 * (NULL: fine; else a message for the model, malloc'd). */
json_t *mcp_input_schema(const struct mcp_tool *t);
char *mcp_check_args(const struct mcp_tool *t, json_t *args);

/* tools_exec.c: write run_code's `files` (b64: `files_base64`) under
 * /workspace of a box.  -1: the call's result says what was wrong. */
int mcp_write_inputs(struct mcp_call *c, const struct husk_fs *b, json_t *map, bool b64);
/* run_code's `files` and `files_base64` hold at most MCP_CONTENT_MAX
 * bytes of files together; else the call's result says so and -1. */
int mcp_check_inputs(struct mcp_call *c);

/* tools_ctx.c: run_code with a sandbox_id, in a code context of that box. */
int mcp_run_in_context(struct mcp_call *c);
/* The fields of such a result beyond the job result's (stdout, stderr,
 * their sizes, sandbox_id, duration_ms, notes), for run_code's schema. */
#define MCP_CTX_RESULT_FIELDS                                                                     \
  "\"context_id\":{\"type\":\"string\"},\"language\":{\"type\":\"string\"},"                 \
  "\"execution_count\":{\"type\":\"integer\"},"                                               \
  "\"outputs\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"           \
  "\"mime_type\":{\"type\":\"string\"},\"returned_as\":{\"type\":\"string\"},"               \
  "\"main_result\":{\"type\":\"boolean\"},\"text\":{\"type\":\"string\"},"                   \
  "\"uri\":{\"type\":\"string\"},\"mime_types\":{\"type\":\"array\",\"items\":"              \
  "{\"type\":\"string\"}}},\"required\":[\"mime_type\",\"returned_as\"]}},"                 \
  "\"error\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"          \
  "\"value\":{\"type\":\"string\"},\"traceback\":{\"type\":\"string\"}}},"                  \
  "\"message\":{\"type\":\"string\"},\"context_restarted\":{\"type\":\"boolean\"}"

/* content.c */
/* The image MIME type of a file by name and first bytes, or NULL. */
const char *mcp_image_mime(const char *name, const unsigned char *head, size_t n);
/* A MIME type by file name (for links and listings). */
const char *mcp_mime_by_name(const char *name);
/* Whether fd is readable now (poll, no wait). */
bool mcp_fd_readable(int fd);

/* The names tools_exec.c and tools_box.c call the shared helpers by.
 * Text in MCP results is UTF-8 without NUL (a file or output holding one
 * is binary); base64 is the standard alphabet, padded (util/base64.h). */
static inline char *mcp_b64_encode(const void *buf, size_t len) {
  return b64_encode(buf, len, NULL);
}
static inline int mcp_b64_decode(const char *s, size_t len, unsigned char **out, size_t *out_len) {
  return b64_decode(s, len, out, out_len);
}
/* The bytes base64 text of `len` characters decodes to (padding and all:
 * a text that is not base64 fails when decoded). */
static inline size_t mcp_b64_decoded_len(const char *s, size_t len) {
  size_t pad = 0;
  while (pad < 2 && len > pad && s[len - 1 - pad] == '=')
    pad++;
  return (len - pad) / 4 * 3 + ((len - pad) % 4 ? (len - pad) % 4 - 1 : 0);
}
static inline bool mcp_utf8_valid(const char *buf, size_t len) {
  return utf8_valid(buf, len) && (len == 0 || !memchr(buf, 0, len));
}
static inline json_t *mcp_time(int64_t ms) { return json_time(ms); }
/* Bytes as a JSON string: invalid UTF-8 and NUL become U+FFFD (*lossy set). */
static inline json_t *mcp_text(const char *buf, size_t len, bool *lossy) {
  return json_text(buf, len, false, lossy);
}

#endif
