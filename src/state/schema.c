/* The database schema and its migrations.
 *
 * PRAGMA user_version is the schema version: migrations[i] takes a database
 * from version i to i + 1.  Each step runs in its own IMMEDIATE transaction
 * together with the version bump, so a crash mid-migration leaves the
 * previous version intact, and two processes opening one fresh file cannot
 * both apply a step (the second re-reads the version under the write lock).
 * A released step is never edited: changes go in a new step at the end.
 *
 * PRAGMA application_id marks the file as husk's, so pointing --data at some
 * other SQLite file fails at open instead of growing husk tables in it.
 *
 * Tables are STRICT: a value of the wrong type is an error, not silently
 * stored as text.  Box and process states are not CHECKed here but in C
 * (box_state_known), so that adding a state needs no table rebuild. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>

#include "state/db.h"
#include "util/cleanup.h"

/* "husk" in ASCII. */
#define HUSK_APPLICATION_ID 0x6875736b

static const char schema_v1[] =
    "CREATE TABLE tenants ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  name TEXT NOT NULL UNIQUE,"
    "  max_boxes INTEGER NOT NULL CHECK (max_boxes >= -1),"
    "  max_memory INTEGER NOT NULL CHECK (max_memory >= -1),"
    "  created_ms INTEGER NOT NULL"
    ") STRICT;"

    /* Only the SHA-256 of a key; UNIQUE gives the lookup index. */
    "CREATE TABLE api_keys ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  tenant_id TEXT NOT NULL REFERENCES tenants(id),"
    "  hash BLOB NOT NULL UNIQUE CHECK (length(hash) = 32),"
    "  created_ms INTEGER NOT NULL,"
    "  revoked_ms INTEGER NOT NULL DEFAULT 0"
    ") STRICT;"
    "CREATE INDEX api_keys_tenant ON api_keys(tenant_id, created_ms);"

    "CREATE TABLE boxes ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  tenant_id TEXT NOT NULL REFERENCES tenants(id),"
    "  state TEXT NOT NULL,"
    "  reason TEXT NOT NULL DEFAULT '',"
    "  template TEXT NOT NULL DEFAULT '',"
    "  memory INTEGER NOT NULL CHECK (memory >= 0),"
    "  pids INTEGER NOT NULL CHECK (pids >= 0),"
    "  cpu_milli INTEGER NOT NULL CHECK (cpu_milli >= 0),"
    "  disk INTEGER NOT NULL CHECK (disk >= 0),"
    "  timeout_ms INTEGER NOT NULL CHECK (timeout_ms >= 0),"
    "  env_json TEXT NOT NULL"
    "    CHECK (json_valid(env_json) AND json_type(env_json) = 'object'),"
    "  metadata_json TEXT NOT NULL"
    "    CHECK (json_valid(metadata_json) AND json_type(metadata_json) = 'object'),"
    "  created_ms INTEGER NOT NULL,"
    "  expires_ms INTEGER NOT NULL DEFAULT 0,"
    "  ended_ms INTEGER NOT NULL DEFAULT 0,"
    "  init_pid INTEGER NOT NULL DEFAULT 0,"
    "  init_start_time INTEGER NOT NULL DEFAULT 0,"
    "  uid_base INTEGER NOT NULL DEFAULT -1,"
    "  slot INTEGER NOT NULL DEFAULT -1,"
    "  cgroup TEXT NOT NULL DEFAULT ''"
    ") STRICT;"
    /* Listing pages per tenant and for admin; quota counts; reconciliation. */
    "CREATE INDEX boxes_tenant_created ON boxes(tenant_id, created_ms, id);"
    "CREATE INDEX boxes_created ON boxes(created_ms, id);"
    "CREATE INDEX boxes_tenant_state ON boxes(tenant_id, state);"
    "CREATE INDEX boxes_state ON boxes(state);"

    /* pids are reused inside a box: seq orders the rows, and only a running
     * row must be unique per (box, pid). */
    "CREATE TABLE processes ("
    "  seq INTEGER PRIMARY KEY,"
    "  box_id TEXT NOT NULL REFERENCES boxes(id) ON DELETE CASCADE,"
    "  pid INTEGER NOT NULL CHECK (pid > 0),"
    "  cmd_json TEXT NOT NULL CHECK (json_valid(cmd_json) AND json_type(cmd_json) = 'array'),"
    "  state TEXT NOT NULL,"
    "  exit_code INTEGER NOT NULL DEFAULT -1,"
    "  signal INTEGER NOT NULL DEFAULT 0,"
    "  started_ms INTEGER NOT NULL,"
    "  ended_ms INTEGER NOT NULL DEFAULT 0,"
    "  tag TEXT NOT NULL DEFAULT ''"
    ") STRICT;"
    "CREATE INDEX processes_box_pid ON processes(box_id, pid);"
    "CREATE UNIQUE INDEX processes_running ON processes(box_id, pid) WHERE state = 'running';"

    /* AUTOINCREMENT: ids are never reused, so `after_id` cursors stay valid.
     * tenant/key/box ids are plain text, not foreign keys: the record must
     * outlive what it names, and may name something that never existed (a
     * denied call on an unknown box). */
    "CREATE TABLE audit ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  ts_ms INTEGER NOT NULL,"
    "  tenant_id TEXT NOT NULL DEFAULT '',"
    "  key_id TEXT NOT NULL DEFAULT '',"
    "  action TEXT NOT NULL,"
    "  box_id TEXT NOT NULL DEFAULT '',"
    "  detail TEXT NOT NULL DEFAULT '',"
    "  outcome TEXT NOT NULL,"
    "  status INTEGER NOT NULL DEFAULT 0"
    ") STRICT;"
    "CREATE INDEX audit_tenant ON audit(tenant_id, id);"
    "CREATE INDEX audit_box ON audit(box_id, id);"
    "CREATE INDEX audit_action ON audit(action, id);"
    "CREATE INDEX audit_ts ON audit(ts_ms);"
    /* The log is evidence: the database itself refuses to change it.  A
     * retention policy, when one is wanted, is a migration that says so. */
    "CREATE TRIGGER audit_immutable BEFORE UPDATE ON audit"
    "  BEGIN SELECT RAISE(ABORT, 'audit records are immutable'); END;"
    "CREATE TRIGGER audit_append_only BEFORE DELETE ON audit"
    "  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;";

/* ---- MCP jobs ----
 * A job is a command of an MCP tool call that outlived the call's wait: its
 * process is a background process of a box (output in files, exit collected
 * by the monitor), and this row says whose it is, whether its box is
 * disposable (run_code: destroyed once the result is collected), and, once
 * collected, the result the front built (opaque JSON).  Not a foreign key to
 * boxes: a job's row outlives its disposable box. */
static const char schema_jobs[] =
    "CREATE TABLE jobs ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  tenant_id TEXT NOT NULL REFERENCES tenants(id),"
    "  box_id TEXT NOT NULL,"
    "  pid INTEGER NOT NULL CHECK (pid > 0),"
    "  kind TEXT NOT NULL,"
    "  ephemeral INTEGER NOT NULL CHECK (ephemeral IN (0, 1)),"
    "  state TEXT NOT NULL,"
    "  result_json TEXT CHECK (result_json IS NULL OR json_valid(result_json)),"
    "  created_ms INTEGER NOT NULL,"
    "  ended_ms INTEGER NOT NULL DEFAULT 0"
    ") STRICT;"
    "CREATE INDEX jobs_tenant ON jobs(tenant_id, created_ms);"
    "CREATE INDEX jobs_box ON jobs(box_id);";

/* The network and secrets plane: the secrets vault (values sealed
 * by src/egress/vault.c, never plaintext here) and the egress settings of
 * each box (mode and policy with its placeholders, for re-adoption). */
static const char schema_egress[] =
    "CREATE TABLE secrets ("
    "  tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,"
    "  name TEXT NOT NULL,"
    "  sealed BLOB NOT NULL,"
    "  created_ms INTEGER NOT NULL,"
    "  updated_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (tenant_id, name)"
    ") STRICT;"
    "CREATE TABLE box_egress ("
    "  box_id TEXT PRIMARY KEY NOT NULL REFERENCES boxes(id) ON DELETE CASCADE,"
    "  network TEXT NOT NULL,"
    "  policy_json TEXT NOT NULL"
    ") STRICT;";

/* The storage plane: S3 access keys, buckets, objects, multipart
 * uploads, links and their access log.  Object bytes live in files under
 * DATA/storage (src/storage/store.c); a row names its file, and a row
 * exists only once its file is complete and fsynced.  Keys and names are
 * TEXT compared as bytes (BINARY), which is S3's UTF-8 listing order. */
static const char schema_storage[] =
    /* The secret is kept sealed (AES-256-GCM under DATA/storage/master.key)
     * because verifying a signature needs it in the clear: a copy of the
     * database alone does not give it away.  `internal` keys sign links. */
    "CREATE TABLE s3_keys ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  tenant_id TEXT NOT NULL REFERENCES tenants(id),"
    "  sealed BLOB NOT NULL,"
    "  internal INTEGER NOT NULL DEFAULT 0,"
    "  created_ms INTEGER NOT NULL,"
    "  revoked_ms INTEGER NOT NULL DEFAULT 0"
    ") STRICT;"
    "CREATE INDEX s3_keys_tenant ON s3_keys(tenant_id, created_ms);"
    "CREATE TABLE buckets ("
    "  tenant_id TEXT NOT NULL REFERENCES tenants(id),"
    "  name TEXT NOT NULL,"
    "  created_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (tenant_id, name)"
    ") STRICT, WITHOUT ROWID;"
    "CREATE TABLE objects ("
    "  tenant_id TEXT NOT NULL,"
    "  bucket TEXT NOT NULL,"
    "  key TEXT NOT NULL,"
    "  file TEXT NOT NULL UNIQUE,"
    "  size INTEGER NOT NULL CHECK (size >= 0),"
    "  etag TEXT NOT NULL,"
    "  content_type TEXT NOT NULL DEFAULT '',"
    "  meta_json TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(meta_json)),"
    "  mtime_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (tenant_id, bucket, key),"
    "  FOREIGN KEY (tenant_id, bucket) REFERENCES buckets(tenant_id, name)"
    ") STRICT;"
    "CREATE TABLE uploads ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  tenant_id TEXT NOT NULL,"
    "  bucket TEXT NOT NULL,"
    "  key TEXT NOT NULL,"
    "  content_type TEXT NOT NULL DEFAULT '',"
    "  meta_json TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(meta_json)),"
    "  created_ms INTEGER NOT NULL,"
    "  FOREIGN KEY (tenant_id, bucket) REFERENCES buckets(tenant_id, name)"
    ") STRICT;"
    "CREATE INDEX uploads_bucket ON uploads(tenant_id, bucket, key);"
    "CREATE TABLE parts ("
    "  upload_id TEXT NOT NULL REFERENCES uploads(id) ON DELETE CASCADE,"
    "  num INTEGER NOT NULL CHECK (num BETWEEN 1 AND 10000),"
    "  file TEXT NOT NULL UNIQUE,"
    "  size INTEGER NOT NULL CHECK (size >= 0),"
    "  md5 TEXT NOT NULL,"
    "  mtime_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (upload_id, num)"
    ") STRICT;"
    "CREATE TABLE links ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  tenant_id TEXT NOT NULL REFERENCES tenants(id),"
    "  bucket TEXT NOT NULL,"
    "  key TEXT NOT NULL,"
    "  filename TEXT NOT NULL DEFAULT '',"
    "  url TEXT NOT NULL,"
    "  created_ms INTEGER NOT NULL,"
    "  expires_ms INTEGER NOT NULL,"
    "  revoked_ms INTEGER NOT NULL DEFAULT 0"
    ") STRICT;"
    "CREATE INDEX links_tenant ON links(tenant_id, created_ms);"
    "CREATE TABLE link_access ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  link_id TEXT NOT NULL REFERENCES links(id) ON DELETE CASCADE,"
    "  ts_ms INTEGER NOT NULL,"
    "  remote TEXT NOT NULL DEFAULT '',"
    "  user_agent TEXT NOT NULL DEFAULT '',"
    "  status INTEGER NOT NULL"
    ") STRICT;"
    "CREATE INDEX link_access_link ON link_access(link_id, seq);";

/* Audit retention: records older than a day may be deleted (by the
 * retention pass, state_audit_prune); younger ones stay append-only, so
 * no mistake can erase what just happened. */
static const char schema_audit_retention[] =
    "DROP TRIGGER audit_append_only;"
    "CREATE TRIGGER audit_append_only BEFORE DELETE ON audit"
    "  WHEN OLD.ts_ms > CAST(strftime('%s', 'now') AS INTEGER) * 1000 - 86400000"
    "  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;";

/* Tenant lifecycle and per-tenant concurrency: the concurrent requests and
 * execs a tenant may hold in the API (-1: the daemon's default), the time
 * its deletion began (0: not being deleted; a deleted tenant's row goes
 * once everything it owned is gone), and the API key that minted each S3
 * key ('' for keys made before this step and for internal ones), so that
 * revoking the API key revokes them too. */
static const char schema_tenant_lifecycle[] =
    "ALTER TABLE tenants ADD COLUMN max_execs INTEGER NOT NULL DEFAULT -1"
    "  CHECK (max_execs >= -1);"
    "ALTER TABLE tenants ADD COLUMN max_requests INTEGER NOT NULL DEFAULT -1"
    "  CHECK (max_requests >= -1);"
    "ALTER TABLE tenants ADD COLUMN deleted_ms INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE s3_keys ADD COLUMN api_key_id TEXT NOT NULL DEFAULT '';"
    "CREATE INDEX s3_keys_api_key ON s3_keys(api_key_id) WHERE api_key_id != '';";

/* The exec id the daemon gave a background process: init reports it with
 * the exit, and an exit init re-sends after a daemon crash must not end a
 * newer process that got the same pid.  0: a row from before (matched by
 * pid alone). */
static const char schema_proc_exec_id[] =
    "ALTER TABLE processes ADD COLUMN exec_id INTEGER NOT NULL DEFAULT 0;";

/* Refused link fetches (forged signature, expired, revoked) are counted,
 * not logged one by one: per link when the fetch names a link of the
 * tenant whose key it claims, in the single row of link_denied otherwise. */
static const char schema_link_denied[] =
    "ALTER TABLE links ADD COLUMN denied INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE links ADD COLUMN denied_last_ms INTEGER NOT NULL DEFAULT 0;"
    "CREATE TABLE link_denied ("
    "  id INTEGER PRIMARY KEY CHECK (id = 1),"
    "  count INTEGER NOT NULL,"
    "  last_ms INTEGER NOT NULL"
    ") STRICT;";

/* Templates: a box's software.  tenant_id '' is a template the operator
 * shares with every tenant; a tenant's own name shadows a shared one.  The
 * layers (content-addressed directories under DATA/templates) are named in
 * layers_json, base first; a layer no row names is removed. */
static const char schema_templates[] =
    "CREATE TABLE templates ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  tenant_id TEXT NOT NULL,"
    "  name TEXT NOT NULL,"
    "  source TEXT NOT NULL,"
    "  config_digest TEXT NOT NULL,"
    "  config_json TEXT NOT NULL CHECK (json_valid(config_json)),"
    "  layers_json TEXT NOT NULL"
    "    CHECK (json_valid(layers_json) AND json_type(layers_json) = 'array'),"
    "  size INTEGER NOT NULL CHECK (size >= 0),"
    "  created_ms INTEGER NOT NULL,"
    "  UNIQUE (tenant_id, name)"
    ") STRICT;";

/* The limits of a background process, kept so that a restarted daemon
 * still enforces them: its wall time (counted from started_ms) and its
 * stdout + stderr bytes (0: none), and the limit that ended it ('': none),
 * recorded before its process group is killed, so that its exit, even one
 * collected after a crash, is reported as that limit's. */
static const char schema_proc_limits[] =
    "ALTER TABLE processes ADD COLUMN timeout_ms INTEGER NOT NULL DEFAULT 0"
    "  CHECK (timeout_ms >= 0);"
    "ALTER TABLE processes ADD COLUMN output_limit INTEGER NOT NULL DEFAULT 0"
    "  CHECK (output_limit >= 0);"
    "ALTER TABLE processes ADD COLUMN limit_hit TEXT NOT NULL DEFAULT ''"
    "  CHECK (limit_hit IN ('', 'timeout', 'output'));";

/* A box of an image template: the template's id (its name may be reused
 * after a delete; deleting a template checks its live boxes by id) and the
 * image's working directory, where commands start unless they say. */
static const char schema_box_template[] =
    "ALTER TABLE boxes ADD COLUMN template_id TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE boxes ADD COLUMN workdir TEXT NOT NULL DEFAULT '';"
    "CREATE INDEX boxes_template ON boxes(template_id) WHERE template_id != '';";

/* The build cache: the layer a Dockerfile step made, by a digest of what
 * the step depends on, per tenant ('' the operator's). */
static const char schema_build_cache[] =
    "CREATE TABLE build_cache ("
    "  tenant_id TEXT NOT NULL,"
    "  key TEXT NOT NULL,"
    "  diff_id TEXT NOT NULL,"
    "  used_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (tenant_id, key)"
    ") STRICT;"
    "CREATE INDEX build_cache_used ON build_cache(used_ms);";

/* A cache entry's layer counts in its tenant's template storage (the
 * unpacked bytes of the layer; 0 for entries made before it was kept). */
static const char schema_build_cache_size[] =
    "ALTER TABLE build_cache ADD COLUMN size INTEGER NOT NULL DEFAULT 0 CHECK (size >= 0);";

/* Pause and snapshots.  A paused box keeps its row in a live state with
 * the time it was paused (its lifetime stops counting then) and, paused
 * to disk, the snapshot (kind 'pause': the box's own, never listed) it
 * resumes from; a box made from a snapshot names it (a snapshot is not
 * deleted while a live box does).  A snapshot row is written 'creating' before its archive
 * goes to the store and 'ready' after, so a crash in between leaves a
 * row the next start removes with whatever part of the archive exists. */
static const char schema_snapshots[] =
    "ALTER TABLE boxes ADD COLUMN paused_ms INTEGER NOT NULL DEFAULT 0 CHECK (paused_ms >= 0);"
    "ALTER TABLE boxes ADD COLUMN snapshot_id TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE boxes ADD COLUMN paused_snapshot TEXT NOT NULL DEFAULT '';"
    "CREATE INDEX boxes_snapshot ON boxes(snapshot_id) WHERE snapshot_id != '';"
    "CREATE TABLE snapshots ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  tenant_id TEXT NOT NULL REFERENCES tenants(id),"
    "  box_id TEXT NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN ('creating', 'ready')),"
    "  kind TEXT NOT NULL DEFAULT 'snapshot' CHECK (kind IN ('snapshot', 'pause')),"
    "  template TEXT NOT NULL DEFAULT '',"
    "  template_id TEXT NOT NULL DEFAULT '',"
    "  workdir TEXT NOT NULL DEFAULT '',"
    "  memory INTEGER NOT NULL CHECK (memory >= 0),"
    "  pids INTEGER NOT NULL CHECK (pids >= 0),"
    "  cpu_milli INTEGER NOT NULL CHECK (cpu_milli >= 0),"
    "  disk INTEGER NOT NULL CHECK (disk >= 0),"
    "  timeout_ms INTEGER NOT NULL CHECK (timeout_ms >= 0),"
    "  env_json TEXT NOT NULL"
    "    CHECK (json_valid(env_json) AND json_type(env_json) = 'object'),"
    "  metadata_json TEXT NOT NULL"
    "    CHECK (json_valid(metadata_json) AND json_type(metadata_json) = 'object'),"
    "  size INTEGER NOT NULL DEFAULT 0 CHECK (size >= 0),"
    "  data_bytes INTEGER NOT NULL DEFAULT 0 CHECK (data_bytes >= 0),"
    "  entries INTEGER NOT NULL DEFAULT 0 CHECK (entries >= 0),"
    "  sha256 TEXT NOT NULL DEFAULT '',"
    "  created_ms INTEGER NOT NULL"
    ") STRICT;"
    "CREATE INDEX snapshots_tenant ON snapshots(tenant_id, created_ms, id);"
    "CREATE INDEX snapshots_state ON snapshots(state);";

/* Named volumes: a tenant's ext4 images (DATA/volumes/<id>.img) that
 * outlive boxes.  A row is 'creating' while its image is made and 'ready'
 * after, so a crash in between leaves a row the next start removes with
 * its file.  box_volumes records which box mounts which volume where; a
 * volume is in use while a box of one of its rows is live (computed, so a
 * crash never leaves one stuck). */
static const char schema_volumes[] =
    "CREATE TABLE volumes ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  tenant_id TEXT NOT NULL REFERENCES tenants(id),"
    "  name TEXT NOT NULL,"
    "  size INTEGER NOT NULL CHECK (size > 0),"
    "  state TEXT NOT NULL CHECK (state IN ('creating', 'ready')),"
    "  created_ms INTEGER NOT NULL,"
    "  UNIQUE (tenant_id, name)"
    ") STRICT;"
    "CREATE TABLE box_volumes ("
    "  box_id TEXT NOT NULL,"
    "  volume_id TEXT NOT NULL REFERENCES volumes(id),"
    "  path TEXT NOT NULL,"
    "  read_only INTEGER NOT NULL CHECK (read_only IN (0, 1)),"
    "  PRIMARY KEY (box_id, volume_id)"
    ") STRICT;"
    "CREATE INDEX box_volumes_volume ON box_volumes(volume_id);";

/* Listing one box's snapshots (the API's ?sandbox=, MCP's sandbox_id)
 * reads only its rows, in the listing's order. */
static const char schema_snapshot_box[] =
    "CREATE INDEX snapshots_box ON snapshots(tenant_id, box_id, created_ms, id);";

/* Preview URLs of a box's ports (box/preview.c): only the SHA-256 of a
 * token and of a password; the access log of each, bounded per preview. */
static const char schema_previews[] =
    "CREATE TABLE previews ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  tenant_id TEXT NOT NULL REFERENCES tenants(id),"
    "  box_id TEXT NOT NULL,"
    "  port INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),"
    "  access TEXT NOT NULL CHECK (access IN ('public', 'key', 'password')),"
    "  token_hash BLOB NOT NULL UNIQUE CHECK (length(token_hash) = 32),"
    "  password_hash BLOB CHECK (password_hash IS NULL OR length(password_hash) = 32),"
    "  max_body INTEGER NOT NULL CHECK (max_body > 0),"
    "  max_header INTEGER NOT NULL CHECK (max_header > 0),"
    "  max_conns INTEGER NOT NULL CHECK (max_conns > 0),"
    "  idle_ms INTEGER NOT NULL CHECK (idle_ms > 0),"
    "  duration_ms INTEGER NOT NULL CHECK (duration_ms > 0),"
    "  created_ms INTEGER NOT NULL,"
    "  expires_ms INTEGER NOT NULL,"
    "  revoked_ms INTEGER NOT NULL DEFAULT 0,"
    "  log_count INTEGER NOT NULL DEFAULT 0"
    ") STRICT;"
    "CREATE INDEX previews_box ON previews(box_id, created_ms);"
    "CREATE INDEX previews_tenant ON previews(tenant_id);"
    /* seq: the rowid; without AUTOINCREMENT (no sqlite_sequence write per
     * row): only the oldest rows are ever deleted, so none is reused. */
    "CREATE TABLE preview_access ("
    "  seq INTEGER PRIMARY KEY,"
    "  preview_id TEXT NOT NULL REFERENCES previews(id) ON DELETE CASCADE,"
    "  ts_ms INTEGER NOT NULL,"
    "  remote TEXT NOT NULL,"
    "  method TEXT NOT NULL,"
    "  path TEXT NOT NULL,"
    "  status INTEGER NOT NULL,"
    "  bytes_in INTEGER NOT NULL DEFAULT 0,"
    "  bytes_out INTEGER NOT NULL DEFAULT 0,"
    "  duration_ms INTEGER NOT NULL DEFAULT 0"
    ") STRICT;"
    "CREATE INDEX preview_access_preview ON preview_access(preview_id, seq);";

/* Upload links (storage/upload_link.c): only the SHA-256 of a token. */
static const char schema_upload_links[] =
    "CREATE TABLE upload_links ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  tenant_id TEXT NOT NULL REFERENCES tenants(id),"
    "  token_hash BLOB NOT NULL UNIQUE CHECK (length(token_hash) = 32),"
    "  bucket TEXT NOT NULL,"
    "  prefix TEXT NOT NULL,"
    "  content_types TEXT NOT NULL DEFAULT '',"
    "  max_files INTEGER NOT NULL CHECK (max_files > 0),"
    "  max_file_bytes INTEGER NOT NULL CHECK (max_file_bytes > 0),"
    "  files_used INTEGER NOT NULL DEFAULT 0 CHECK (files_used >= 0),"
    "  bytes_used INTEGER NOT NULL DEFAULT 0,"
    "  created_ms INTEGER NOT NULL,"
    "  expires_ms INTEGER NOT NULL,"
    "  revoked_ms INTEGER NOT NULL DEFAULT 0"
    ") STRICT;"
    "CREATE INDEX upload_links_tenant ON upload_links(tenant_id, created_ms);";

/* The files an upload link has stored, apart from the slots it has
 * claimed: a claim whose upload a crash cut off is given back at the next
 * start (files_used = files_stored), no upload being in flight then.  A
 * link's past claims are taken as stored: which were is not known. */
static const char schema_upload_link_files[] =
    "ALTER TABLE upload_links ADD COLUMN files_stored INTEGER NOT NULL DEFAULT 0;"
    "UPDATE upload_links SET files_stored = files_used;";

/* People inside tenants and husk as an OAuth 2.1 authorization server
 * (src/auth/, docs/oauth.md).  Secrets are never stored: a user's
 * password as its Argon2id encoded string ('' when it has none), a client
 * secret, an authorization code and a token as their SHA-256.  A deleted
 * user keeps its row (deleted_ms != 0) for the audit, and its name is free
 * again.  A code names the family of the tokens it is exchanged for, and
 * every token of one sign-in shares that family: reusing a code or a
 * rotated refresh token revokes the family.  scopes are the bits of
 * auth.h's AUTH_SCOPE_* (never renumbered).  tenant_id of a code or token
 * is its user's (not a foreign key: the user's is). */
static const char schema_users_oauth[] =
    "CREATE TABLE users ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  tenant_id TEXT NOT NULL REFERENCES tenants(id),"
    "  name TEXT NOT NULL,"
    "  display_name TEXT NOT NULL DEFAULT '',"
    "  role TEXT NOT NULL CHECK (role IN ('viewer', 'member', 'admin')),"
    "  password_hash TEXT NOT NULL DEFAULT '',"
    "  disabled INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),"
    "  failed_count INTEGER NOT NULL DEFAULT 0 CHECK (failed_count >= 0),"
    "  failed_since_ms INTEGER NOT NULL DEFAULT 0,"
    "  locked_until_ms INTEGER NOT NULL DEFAULT 0,"
    "  created_ms INTEGER NOT NULL,"
    "  deleted_ms INTEGER NOT NULL DEFAULT 0"
    ") STRICT;"
    "CREATE UNIQUE INDEX users_name ON users(tenant_id, name) WHERE deleted_ms = 0;"
    "CREATE INDEX users_tenant ON users(tenant_id, created_ms, id);"
    "CREATE TABLE oauth_clients ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  name TEXT NOT NULL DEFAULT '',"
    "  redirect_uris TEXT NOT NULL"
    "    CHECK (json_valid(redirect_uris) AND json_type(redirect_uris) = 'array'),"
    "  auth_method TEXT NOT NULL"
    "    CHECK (auth_method IN ('none', 'client_secret_post', 'client_secret_basic')),"
    "  secret_hash BLOB CHECK (secret_hash IS NULL OR length(secret_hash) = 32),"
    "  created_ms INTEGER NOT NULL,"
    "  used_ms INTEGER NOT NULL DEFAULT 0"
    ") STRICT;"
    "CREATE TABLE oauth_codes ("
    "  hash BLOB PRIMARY KEY NOT NULL CHECK (length(hash) = 32),"
    "  client_id TEXT NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,"
    "  user_id TEXT NOT NULL REFERENCES users(id),"
    "  tenant_id TEXT NOT NULL,"
    "  redirect_uri TEXT NOT NULL,"
    "  challenge TEXT NOT NULL,"
    "  resource TEXT NOT NULL,"
    "  scopes INTEGER NOT NULL CHECK (scopes >= 0),"
    "  expires_ms INTEGER NOT NULL,"
    "  used_ms INTEGER NOT NULL DEFAULT 0,"
    "  family TEXT NOT NULL"
    ") STRICT, WITHOUT ROWID;"
    "CREATE INDEX oauth_codes_expires ON oauth_codes(expires_ms);"
    "CREATE INDEX oauth_codes_user ON oauth_codes(user_id);"
    "CREATE INDEX oauth_codes_client ON oauth_codes(client_id);"
    "CREATE TABLE oauth_tokens ("
    "  hash BLOB PRIMARY KEY NOT NULL CHECK (length(hash) = 32),"
    "  kind TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),"
    "  family TEXT NOT NULL,"
    "  client_id TEXT NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,"
    "  user_id TEXT NOT NULL REFERENCES users(id),"
    "  tenant_id TEXT NOT NULL,"
    "  resource TEXT NOT NULL,"
    "  scopes INTEGER NOT NULL CHECK (scopes >= 0),"
    "  expires_ms INTEGER NOT NULL,"
    "  revoked_ms INTEGER NOT NULL DEFAULT 0,"
    "  rotated_ms INTEGER NOT NULL DEFAULT 0,"
    "  created_ms INTEGER NOT NULL"
    ") STRICT, WITHOUT ROWID;"
    "CREATE INDEX oauth_tokens_family ON oauth_tokens(family, created_ms);"
    "CREATE INDEX oauth_tokens_user ON oauth_tokens(user_id);"
    "CREATE INDEX oauth_tokens_client ON oauth_tokens(client_id);"
    "CREATE INDEX oauth_tokens_expires ON oauth_tokens(expires_ms);";

/* Who acted, when a request came with an access token: the user (its id,
 * and its display name or name at the time) and the OAuth client. */
static const char schema_audit_users[] =
    "ALTER TABLE audit ADD COLUMN user_id TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE audit ADD COLUMN user_name TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE audit ADD COLUMN client_id TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE audit ADD COLUMN client_name TEXT NOT NULL DEFAULT '';"
    "CREATE INDEX audit_user ON audit(user_id, id) WHERE user_id != '';";

/* Who created a box, an MCP job, a background process or an upload link
 * (state.h's STATE_CREATED_BY_SIZE): '' for the rows from before.  The
 * box listing filters on it per tenant. */
static const char schema_created_by[] =
    "ALTER TABLE boxes ADD COLUMN created_by TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE jobs ADD COLUMN created_by TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE processes ADD COLUMN created_by TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE upload_links ADD COLUMN created_by TEXT NOT NULL DEFAULT '';"
    "CREATE INDEX boxes_tenant_creator ON boxes(tenant_id, created_by, created_ms, id);";

/* A tenant's OpenID Connect provider (auth/oidc.c, docs/oauth.md): what
 * the operator set and what discovery found.  The client secret is not
 * here: it is sealed in the tenant's vault under a reserved name
 * (has_secret says whether there is one). */
static const char schema_oidc_configs[] =
    "CREATE TABLE oidc_configs ("
    "  tenant_id TEXT PRIMARY KEY NOT NULL REFERENCES tenants(id),"
    "  issuer TEXT NOT NULL,"
    "  client_id TEXT NOT NULL,"
    "  has_secret INTEGER NOT NULL CHECK (has_secret IN (0, 1)),"
    "  display_name TEXT NOT NULL,"
    "  claim TEXT NOT NULL CHECK (claim IN ('email', 'preferred_username', 'sub')),"
    "  scopes TEXT NOT NULL,"
    "  create_users TEXT NOT NULL CHECK (create_users IN ('', 'viewer', 'member')),"
    "  authorization_endpoint TEXT NOT NULL,"
    "  token_endpoint TEXT NOT NULL,"
    "  jwks_uri TEXT NOT NULL,"
    "  token_auth TEXT NOT NULL"
    "    CHECK (token_auth IN ('client_secret_basic', 'client_secret_post')),"
    "  created_ms INTEGER NOT NULL,"
    "  updated_ms INTEGER NOT NULL"
    ") STRICT;";

/* A user's link to its provider: the issuer and the `sub` it vouched for
 * at the first single sign-on ('' when none).  One live user per
 * (tenant, issuer, sub). */
static const char schema_users_idp[] =
    "ALTER TABLE users ADD COLUMN idp_issuer TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE users ADD COLUMN idp_subject TEXT NOT NULL DEFAULT '';"
    "CREATE UNIQUE INDEX users_idp ON users(tenant_id, idp_issuer, idp_subject)"
    "  WHERE deleted_ms = 0 AND idp_subject != '';";

/* Single sign-ons in progress: first waiting for the provider (phase
 * 'provider', found by the SHA-256 of `state`), then for the person's
 * consent (phase 'consent', found by the SHA-256 of the consent form's
 * handle, with the user).  The browser-binding cookie only as its
 * SHA-256.  The nonce and the PKCE verifier are kept as they are: they
 * are needed as such, and each row lives 10 minutes. */
static const char schema_sso_pending[] =
    "CREATE TABLE sso_pending ("
    "  hash BLOB PRIMARY KEY NOT NULL CHECK (length(hash) = 32),"
    "  phase TEXT NOT NULL CHECK (phase IN ('provider', 'consent')),"
    "  tenant_id TEXT NOT NULL,"
    "  binding_hash BLOB NOT NULL CHECK (length(binding_hash) = 32),"
    "  nonce TEXT NOT NULL,"
    "  verifier TEXT NOT NULL,"
    "  params TEXT NOT NULL CHECK (json_valid(params)),"
    "  user_id TEXT NOT NULL DEFAULT '',"
    "  created_ms INTEGER NOT NULL,"
    "  expires_ms INTEGER NOT NULL"
    ") STRICT, WITHOUT ROWID;"
    "CREATE INDEX sso_pending_expires ON sso_pending(expires_ms);";

/* The provider's subject of a user acting with a token, when it has one. */
static const char schema_audit_idp[] =
    "ALTER TABLE audit ADD COLUMN idp_subject TEXT NOT NULL DEFAULT '';";

static const char *const migrations[] = {
    schema_v1,          schema_jobs,         schema_egress,      schema_storage,
    schema_audit_retention, schema_tenant_lifecycle, schema_proc_exec_id, schema_link_denied,
    schema_templates,   schema_proc_limits, schema_box_template, schema_build_cache,
    schema_build_cache_size, schema_snapshots, schema_volumes, schema_snapshot_box,
    schema_previews, schema_upload_links, schema_upload_link_files, schema_users_oauth,
    schema_audit_users, schema_created_by, schema_oidc_configs, schema_users_idp,
    schema_sso_pending, schema_audit_idp};
#define SCHEMA_VERSION ((int)(sizeof migrations / sizeof migrations[0]))

int state_schema_latest(void) { return SCHEMA_VERSION; }

static int pragma_int(struct state *st, const char *sql, int64_t *out, struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, sql, err) < 0)
    return -1;
  int r = db_step_row(st, s, "cannot read the database header", err);
  if (r < 0)
    return -1;
  *out = r ? sqlite3_column_int64(s, 0) : 0;
  return 0;
}

/* Under the write lock: is this a husk database (or an empty file), and at
 * which version? */
static int read_version(struct state *st, int *version, struct husk_err *err) {
  int64_t app = 0, ver = 0, objects = 0;
  if (pragma_int(st, "PRAGMA application_id", &app, err) < 0 ||
      pragma_int(st, "PRAGMA user_version", &ver, err) < 0 ||
      pragma_int(st, "SELECT count(*) FROM sqlite_schema", &objects, err) < 0)
    return -1;
  if (app == 0 && ver == 0 && objects == 0) {
    *version = 0; /* a new file */
    return 0;
  }
  if (app != HUSK_APPLICATION_ID)
    return husk_fail(err, EINVAL, "not a husk database (application_id %#llx)",
                     (unsigned long long)app);
  if (ver > SCHEMA_VERSION)
    return husk_fail(err, ENOTSUP,
                     "schema version %lld is newer than this husk's (%d): upgrade husk",
                     (long long)ver, SCHEMA_VERSION);
  if (ver < 0)
    return husk_fail(err, EINVAL, "schema version %lld is invalid", (long long)ver);
  *version = (int)ver;
  return 0;
}

static int migrate_step(struct state *st, bool *done, struct husk_err *err) {
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  int version = 0;
  if (read_version(st, &version, err) < 0)
    return -1;
  if (version == SCHEMA_VERSION) {
    *done = true;
    return db_commit(&txn, err);
  }
  int rc = sqlite3_exec(st->db, migrations[version], NULL, NULL, NULL);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "migration to schema version %d failed", version + 1);
  char bump[96];
  snprintf(bump, sizeof bump, "PRAGMA application_id=%d; PRAGMA user_version=%d",
           HUSK_APPLICATION_ID, version + 1);
  rc = sqlite3_exec(st->db, bump, NULL, NULL, NULL);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "cannot set schema version %d", version + 1);
  db_fault_point("migrate");
  return db_commit(&txn, err);
}

int schema_migrate(struct state *st, struct husk_err *err) {
  for (bool done = false; !done;)
    if (migrate_step(st, &done, err) < 0)
      return -1;
  return 0;
}
