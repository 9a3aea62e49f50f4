/* Tool plumbing: input schemas generated from the parameter tables, the
 * check of a call's arguments against them, and the result helpers every
 * tool uses.  One table per tool is the single source of truth: what
 * tools/list advertises is exactly what a call is checked against. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/internal.h"

static const char *type_name(enum mcp_ptype t) {
  switch (t) {
  case MCP_P_STRING: return "string";
  case MCP_P_INT: return "integer";
  case MCP_P_NUMBER: return "number";
  case MCP_P_BOOL: return "boolean";
  case MCP_P_STRMAP: return "object";
  case MCP_P_OBJECT: return "object";
  case MCP_P_STRLIST: return "array";
  }
  return "string";
}

json_t *mcp_input_schema(const struct mcp_tool *t) {
  json_t *props = json_object(), *req = json_array();
  for (const struct mcp_param *p = t->params; p && p->name; p++) {
    json_t *o = json_pack("{s:s, s:s}", "type", type_name(p->type), "description", p->description);
    if (!o)
      continue;
    if (p->choices) {
      json_t *e = json_array();
      for (const char *const *c = p->choices; *c; c++)
        json_array_append_new(e, json_string(*c));
      json_object_set_new(o, "enum", e);
    }
    if ((p->type == MCP_P_INT || p->type == MCP_P_NUMBER) && (p->min != 0 || p->max != 0)) {
      json_object_set_new(o, "minimum", p->type == MCP_P_INT ? json_integer((json_int_t)p->min)
                                                             : json_real(p->min));
      json_object_set_new(o, "maximum", p->type == MCP_P_INT ? json_integer((json_int_t)p->max)
                                                             : json_real(p->max));
    }
    if (p->type == MCP_P_STRING && p->max_len)
      json_object_set_new(o, "maxLength", json_integer((json_int_t)p->max_len));
    if (p->type == MCP_P_STRMAP) {
      json_object_set_new(o, "additionalProperties", json_pack("{s:s}", "type", "string"));
      if (p->max > 0)
        json_object_set_new(o, "maxProperties", json_integer((json_int_t)p->max));
    }
    if (p->type == MCP_P_STRLIST) {
      json_t *items = json_pack("{s:s}", "type", "string");
      if (items && p->max_len)
        json_object_set_new(items, "maxLength", json_integer((json_int_t)p->max_len));
      json_object_set_new(o, "items", items);
      json_object_set_new(o, "minItems", json_integer(1));
      if (p->max > 0)
        json_object_set_new(o, "maxItems", json_integer((json_int_t)p->max));
    }
    json_object_set_new(props, p->name, o);
    if (p->required)
      json_array_append_new(req, json_string(p->name));
  }
  json_t *schema = json_pack("{s:s, s:o, s:b}", "type", "object", "properties", props,
                             "additionalProperties", 0);
  if (schema && json_array_size(req))
    json_object_set_new(schema, "required", req);
  else
    json_decref(req);
  return schema;
}

static char *msgf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *msgf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0)
    s = NULL;
  va_end(ap);
  return s ? s : strdup("invalid arguments");
}

char *mcp_check_args(const struct mcp_tool *t, json_t *args) {
  const char *key;
  json_t *v;
  json_object_foreach(args, key, v) {
    const struct mcp_param *p = t->params;
    while (p && p->name && strcmp(p->name, key) != 0)
      p++;
    if (!p || !p->name) {
      /* Name the accepted ones: the model fixes its call from this. */
      char list[512] = "";
      for (const struct mcp_param *q = t->params; q && q->name; q++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", list[0] ? ", " : "",
                 q->name);
      return msgf("unknown argument `%.64s` for %s (accepted: %s)", key, t->name, list);
    }
  }
  for (const struct mcp_param *p = t->params; p && p->name; p++) {
    v = json_object_get(args, p->name);
    if (!v || json_is_null(v)) {
      if (p->required)
        return msgf("missing required argument `%s` (%s): %s", p->name, type_name(p->type),
                    p->description);
      continue;
    }
    switch (p->type) {
    case MCP_P_STRING:
      if (!json_is_string(v))
        return msgf("argument `%s` must be a string", p->name);
      if (p->max_len && json_string_length(v) > p->max_len)
        return msgf("argument `%s` is too long (%zu bytes, at most %zu)", p->name,
                    json_string_length(v), p->max_len);
      if (memchr(json_string_value(v), 0, json_string_length(v)))
        return msgf("argument `%s` must not contain NUL characters", p->name);
      if (p->choices) {
        const char *const *c = p->choices;
        while (*c && strcmp(*c, json_string_value(v)) != 0)
          c++;
        if (!*c) {
          char list[256] = "";
          for (c = p->choices; *c; c++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", list[0] ? ", " : "", *c);
          return msgf("argument `%s` must be one of: %s", p->name, list);
        }
      }
      break;
    case MCP_P_INT:
    case MCP_P_NUMBER: {
      double d;
      if (json_is_integer(v))
        d = (double)json_integer_value(v);
      else if (json_is_real(v) && p->type == MCP_P_NUMBER)
        d = json_real_value(v);
      else if (json_is_real(v) && floor(json_real_value(v)) == json_real_value(v) &&
               fabs(json_real_value(v)) < 9e15)
        d = json_real_value(v); /* 30.0 is an integer in JSON Schema */
      else
        return msgf("argument `%s` must be %s", p->name,
                    p->type == MCP_P_INT ? "an integer" : "a number");
      if ((p->min != 0 || p->max != 0) && (d < p->min || d > p->max || isnan(d)))
        return msgf("argument `%s` must be between %g and %g", p->name, p->min, p->max);
      break;
    }
    case MCP_P_BOOL:
      if (!json_is_boolean(v))
        return msgf("argument `%s` must be true or false", p->name);
      break;
    case MCP_P_STRMAP: {
      if (!json_is_object(v))
        return msgf("argument `%s` must be an object whose values are strings", p->name);
      size_t total = 0;
      const char *k;
      json_t *x;
      json_object_foreach(v, k, x) {
        if (!json_is_string(x))
          return msgf("argument `%s`: the value of `%.64s` must be a string", p->name, k);
        total += json_string_length(x) + strlen(k);
      }
      if (p->max > 0 && (double)json_object_size(v) > p->max)
        return msgf("argument `%s` has too many entries (%zu, at most %.0f)", p->name,
                    json_object_size(v), p->max);
      if (p->max_len && total > p->max_len)
        return msgf("argument `%s` is too large (%zu bytes, at most %zu)", p->name, total,
                    p->max_len);
      break;
    }
    case MCP_P_OBJECT: {
      if (!json_is_object(v))
        return msgf("argument `%s` must be an object", p->name);
      size_t len = json_dumpb(v, NULL, 0, JSON_COMPACT);
      if (p->max_len && len > p->max_len)
        return msgf("argument `%s` is too large (%zu bytes, at most %zu)", p->name, len,
                    p->max_len);
      break;
    }
    case MCP_P_STRLIST: {
      if (!json_is_array(v))
        return msgf("argument `%s` must be an array of strings", p->name);
      if (json_array_size(v) == 0)
        return msgf("argument `%s` must not be empty", p->name);
      if (p->max > 0 && (double)json_array_size(v) > p->max)
        return msgf("argument `%s` has too many items (%zu, at most %.0f)", p->name,
                    json_array_size(v), p->max);
      size_t i;
      json_t *x;
      json_array_foreach(v, i, x) {
        if (!json_is_string(x))
          return msgf("argument `%s`: item %zu must be a string", p->name, i);
        if (p->max_len && json_string_length(x) > p->max_len)
          return msgf("argument `%s`: item %zu is too long (%zu bytes, at most %zu)", p->name, i,
                      json_string_length(x), p->max_len);
        if (memchr(json_string_value(x), 0, json_string_length(x)))
          return msgf("argument `%s`: item %zu must not contain NUL characters", p->name, i);
      }
      break;
    }
    }
  }
  return NULL;
}

/* ---- results ------------------------------------------------------------------ */

void mcp_add_block(struct mcp_call *c, json_t *block) {
  if (block)
    json_array_append_new(c->content, block);
}

void mcp_result(struct mcp_call *c, json_t *structured, bool is_error) {
  if (!structured)
    structured = json_pack("{s:s}", "error", "out of memory");
  char *text = mcp_dump(structured);
  /* The full result as JSON text first (clients that show only text), the
   * same object as structuredContent (clients that show only that). */
  json_array_insert_new(c->content, 0, json_pack("{s:s, s:s}", "type", "text", "text", text ? text : "{}"));
  free(text);
  json_decref(c->structured);
  c->structured = structured;
  c->is_error = is_error;
}

int mcp_tool_error(struct mcp_call *c, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  json_decref(c->content);
  c->content = json_array();
  /* Cut to the buffer, the message may end inside a character. */
  json_array_append_new(c->content, json_pack("{s:s, s:o}", "type", "text", "text",
                                               mcp_text(msg, strlen(msg), NULL)));
  /* No structuredContent: clients validate it against the tool's output
   * schema even on errors, and a message is what the model needs. */
  json_decref(c->structured);
  c->structured = NULL;
  c->is_error = true;
  return 0;
}

char *mcp_take_error(struct mcp_call *c) {
  json_t *first = json_array_get(c->content, 0);
  const char *t = json_string_value(json_object_get(first, "text"));
  char *msg = strdup(t ? t : "failed");
  json_array_clear(c->content);
  json_decref(c->structured);
  c->structured = NULL;
  c->is_error = false;
  return msg;
}

int mcp_tool_core_error(struct mcp_call *c, const char *what, const char *id,
                        const struct husk_err *err) {
  switch (err->code) {
  case ENOENT:
    if (!strncmp(err->msg, "no template ", 12))
      return mcp_tool_error(c, "%s: template_list shows the templates there are", err->msg);
    if (strcmp(what, "sandbox") != 0 && strcmp(what, "job") != 0)
      return mcp_tool_error(c, "%s `%s` does not exist in the sandbox (sandbox_list_files shows "
                            "what is there)", what, id ? id : "");
    if (!strcmp(what, "job"))
      return mcp_tool_error(c, "job `%s` not found: the id is wrong or belongs to another client. "
                            "Jobs come from run_code or sandbox_exec calls that ran longer than the wait.",
                            id);
    return mcp_tool_error(c, "%s `%s` not found: it may have expired (its TTL ended), been "
                          "destroyed, or the id is wrong. Create a new one with sandbox_create "
                          "(files in the old one are gone).", what, id);
  case EBUSY:
  case ESTALE:
    return mcp_tool_error(c, "%s `%s` cannot do that now: %s", what, id, err->msg);
  case EDQUOT:
    return mcp_tool_error(c, "quota exceeded: %s. Destroy sandboxes you no longer need "
                          "(sandbox_list, then sandbox_destroy) and retry.", err->msg);
  case ENOSPC:
    return mcp_tool_error(c, "the sandbox's disk is full: delete files or create a sandbox "
                          "with more memory");
  case EINVAL:
  case EACCES:
  case EISDIR:
  case ENOTDIR:
  case EEXIST:
  case ENAMETOOLONG:
  case ELOOP:
  case ENOTEMPTY:
    return mcp_tool_error(c, "%s", err->msg);
  default:
    mcp_log(c->srv, "%s %s: %s", what, id ? id : "", err->msg);
    return mcp_tool_error(c, "%s failed: %s", what, err->msg);
  }
}

void mcp_progress(struct mcp_call *c, uint64_t progress, const char *message) {
  if (!c->progress_token || !c->caller->notify || progress <= c->progress_last)
    return;
  c->progress_last = progress;
  json_t *n = json_pack("{s:s, s:s, s:{s:O, s:I, s:s}}", "jsonrpc", "2.0", "method",
                        "notifications/progress", "params", "progressToken", c->progress_token,
                        "progress", (json_int_t)progress, "message", message ? message : "");
  if (n)
    c->caller->notify(c->caller->notify_ctx, n);
}

void mcp_created_by(const struct mcp_caller *c, char *out, size_t size) {
  if (c->user_id && c->user_id[0])
    snprintf(out, size, "%s", c->user_id);
  else if (c->key_id && c->key_id[0])
    snprintf(out, size, "key:%s", c->key_id);
  else if (size)
    out[0] = '\0';
}

json_t *mcp_arg(struct mcp_call *c, const char *name) {
  json_t *v = json_object_get(c->args, name);
  return v && !json_is_null(v) ? v : NULL;
}

const char *mcp_arg_str(struct mcp_call *c, const char *name) {
  json_t *v = mcp_arg(c, name);
  return json_is_string(v) ? json_string_value(v) : NULL;
}

bool mcp_arg_int(struct mcp_call *c, const char *name, int64_t *out) {
  json_t *v = mcp_arg(c, name);
  if (json_is_integer(v))
    *out = json_integer_value(v);
  else if (json_is_real(v))
    *out = (int64_t)json_real_value(v);
  else
    return false;
  return true;
}

bool mcp_arg_num(struct mcp_call *c, const char *name, double *out) {
  json_t *v = mcp_arg(c, name);
  if (!json_is_number(v))
    return false;
  *out = json_number_value(v);
  return true;
}
