/* The E2B-compatible front (docs/e2b.md): E2B's control plane, its
 * in-box daemon envd (over Connect and plain HTTP) and its code
 * interpreter, served by the same listener and the same core as husk's
 * own API.  Shared between the e2b_*.c files of src/api.
 *
 * Routing (e2b.c): a request with an `E2b-Sandbox-Id` header is for the
 * sandbox plane, the port in `E2b-Sandbox-Port` choosing envd (49983),
 * the code interpreter (49999) or a port of the box; without it, a path
 * under an E2B control-plane root (/sandboxes, /v2/sandboxes, ...) is for
 * the control plane.  Everything else is husk's own API. */
#ifndef HUSK_API_E2B_H
#define HUSK_API_E2B_H

#include "api/internal.h"

#define E2B_ENVD_PORT 49983
#define E2B_INTERP_PORT 49999
/* What the emulated envd reports itself to be: the SDK enables features
 * by it (docs/e2b.md lists what each version brings). */
#define E2B_ENVD_VERSION "0.5.7"
/* The secret the boxes' access tokens are derived from. */
#define E2B_SECRET_LEN 32
/* An access token: 64 hex digits. */
#define E2B_TOKEN_LEN 64

/* ---- e2b.c: routing, the sandbox plane's authentication, tokens ----- */
/* Whether the request is for the E2B front (off without a secret). */
bool api_e2b_wanted(struct req *r, const char *url);
enum MHD_Result api_e2b_route(struct req *r, const char *url, const char *method);
/* AUTH_E2B_KEY: X-API-KEY holds a tenant key. */
enum MHD_Result e2b_authenticate_key(struct req *r);
/* AUTH_E2B_BOX: r->e2b_box names a live box; its token is presented
 * (X-Access-Token: the envd token, any port; E2B-Traffic-Access-Token:
 * the traffic token, any port but envd's).  A box that does not exist or
 * has ended is a 502, as E2B's edge answers for a dead sandbox. */
enum MHD_Result e2b_authenticate_box(struct req *r);
/* The box's tokens (E2B_TOKEN_LEN hex digits and a NUL): HMAC-SHA256 of
 * its id under the daemon's secret, so they survive restarts and are
 * stored nowhere.  0, or -1 (no secret). */
int e2b_box_token(const struct api_server *s, const char *box_id, bool traffic,
                  char out[E2B_TOKEN_LEN + 1]);
/* Read the secret at `path`, creating it (0600, synced) if missing. */
int e2b_secret_load(const char *path, unsigned char out[E2B_SECRET_LEN], struct husk_err *err);

/* ---- e2b_connect.c: the Connect protocol (JSON codec only) ---------- */
/* Connect's error codes ("not_found" ...) for an HTTP status or a husk
 * error, and the HTTP status of a unary error with that code. */
const char *e2b_connect_code_of_status(unsigned status);
const char *e2b_connect_code_of_err(const struct husk_err *err);
unsigned e2b_connect_status(const char *code);
/* A unary call's error reply: the status of `code`, application/json
 * {"code":code,"message":...}. */
enum MHD_Result e2b_connect_error(struct req *r, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
enum MHD_Result e2b_connect_err(struct req *r, const struct husk_err *err);
/* The request message of a unary call (Content-Type application/json,
 * the body one JSON object) or of a server-streaming one
 * (application/connect+json, the body one envelope: flags 0, a
 * big-endian length, the JSON).  NULL after replying the error. */
json_t *e2b_connect_request(struct req *r, bool streaming);
/* A unary call's reply: 200 application/json. */
enum MHD_Result e2b_connect_reply(struct req *r, json_t *msg);
/* A server stream: the response (200, application/connect+json) of
 * `s` (an api_stream of STREAM_RAW), then messages, then exactly one
 * end: `code` NULL for success, else the error (a stream's errors travel
 * inside its 200). */
enum MHD_Result e2b_stream_reply(struct req *r, struct api_stream *s);
int e2b_stream_send(struct api_stream *s, json_t *msg);
int e2b_stream_end(struct api_stream *s, const char *code, const char *message);
/* The Connect deadline of the request (Connect-Timeout-Ms), 0: none. */
uint64_t e2b_connect_timeout_ms(struct req *r);
/* protobuf-JSON: an int64 is written as a string; read as either. */
json_t *e2b_json_int64(int64_t v);
bool e2b_json_get_int64(const json_t *v, int64_t *out);

/* ---- the route tables ---------------------------------------------
 * Connect's (process, fs) shape their errors as Connect does; the others
 * as E2B's REST API does ({"code":404,"message":...}). */
extern const struct route e2b_control_routes[]; /* e2b_control.c */
extern const size_t e2b_control_nroutes;
extern const struct route e2b_snapshot_routes[]; /* e2b_snapshots.c: snapshots, fork, network */
extern const size_t e2b_snapshot_nroutes;
extern const struct route e2b_process_routes[]; /* e2b_process.c: process.Process */
extern const size_t e2b_process_nroutes;
extern const struct route e2b_fs_routes[]; /* e2b_fs.c: filesystem.Filesystem */
extern const size_t e2b_fs_nroutes;
extern const struct route e2b_files_routes[]; /* e2b_files.c: envd's /files, /health */
extern const size_t e2b_files_nroutes;
extern const struct route e2b_interp_routes[]; /* e2b_interp.c: the code interpreter */
extern const size_t e2b_interp_nroutes;

/* ---- e2b_port.c: any other port of the box ------------------------ */
/* Relay the request to the box's port r->e2b_port (authenticated). */
enum MHD_Result e2b_port_begin(struct req *r);

#endif
