// The official MCP TypeScript SDK's OAuth client against husk serve, end
// to end, with a person signing in in headless Chromium: a
// StreamableHTTPClientTransport to <URL>/mcp with an in-memory
// OAuthClientProvider whose redirect URI is this script's own loopback
// server.  Discovery from the 401, dynamic registration, authorization
// with PKCE on husk's page (screenshot of the consent page), the code at
// the callback, the token, tools/list and tools/call, a refresh the SDK
// does by itself once the access token expired, a token in the query
// string or at the other resource (/v1) refused, revocation; Deny; a
// viewer's token refused a `sandbox` tool with 403 insufficient_scope, and
// a rotated refresh token presented again ending the whole family.
// Prints TAP lines (docs/oauth.md is the contract).
//
// Environment:
//   URL          husk serve's base URL (http://127.0.0.1:PORT): the issuer
//   SDK          v1 (@modelcontextprotocol/sdk) | v2 (@modelcontextprotocol/client)
//   SCENARIOS    any of: flow deny viewer attribution cimd (default: flow deny viewer)
//   CIMD_URL     for cimd: the client's metadata document URL (its client_id),
//   CIMD_NAME    and the client_name that document says
//   ORG          the tenant's name;  PASSWORD  every user's password
//   MEMBER, VIEWER, USER2   user names (member, viewer, a second member)
//   ACCESS_TTL   the daemon's --oauth-access-ttl (seconds)
//   SHOTS        directory for the screenshots;  OUT  a JSON file of results
//   CHROMIUM, MCPDIR, BROWSER_DIR
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { MCPDIR, importFrom, t, ok, notOk, setPrefix, failures, callbackServer, loggingFetch,
         mask, signIn, closeBrowser } from "./lib.mjs";

const URL_ = process.env.URL.replace(/\/$/, "");
const MCP_URL = `${URL_}/mcp`;
const SDK = process.env.SDK || "v1";
const SCENARIOS = (process.env.SCENARIOS || "flow deny viewer").split(/\s+/).filter(Boolean);
const ORG = process.env.ORG, PASSWORD = process.env.PASSWORD;
const TTL = Number(process.env.ACCESS_TTL || 3);
const SHOTS = process.env.SHOTS || process.env.TMPDIR || "/tmp";
const DEFAULT_SCOPES = ["sandbox", "sandbox:read", "storage:read", "storage:write"];
const out = {};
setPrefix(`[${SDK}] `);

// Nothing may hang the suite.
setTimeout(() => { notOk("the driver finished within 170 s"); process.exit(1); }, 170000).unref();

async function load() {
  if (SDK === "v1") {
    const sdk = (sub) => importFrom(MCPDIR, "@modelcontextprotocol/sdk", sub);
    const { Client } = await sdk("./client/index.js");
    const { StreamableHTTPClientTransport } = await sdk("./client/streamableHttp.js");
    const { UnauthorizedError } = await sdk("./client/auth.js");
    return { Client, StreamableHTTPClientTransport, UnauthorizedError, opts: {} };
  }
  const m = await importFrom(MCPDIR, "@modelcontextprotocol/client");
  for (const k of ["Client", "StreamableHTTPClientTransport", "UnauthorizedError"])
    if (!m[k]) throw new Error(`@modelcontextprotocol/client exports no ${k}`);
  return { Client: m.Client, StreamableHTTPClientTransport: m.StreamableHTTPClientTransport,
           UnauthorizedError: m.UnauthorizedError,
           opts: { versionNegotiation: { mode: { pin: "2026-07-28" } } } };
}
const lib = await load();
const cb = await callbackServer();

const call = (c, name, args) =>
  c.callTool({ name, arguments: args }, ...(SDK === "v1" ? [undefined] : []), { timeout: 120000 });
const sc = (r) => r.structuredContent ?? JSON.parse(r.content[0].text);
const sameSet = (a, b) => assert.deepEqual([...new Set(a)].sort(), [...new Set(b)].sort());
const scopesOf = (s) => String(s || "").split(" ").filter(Boolean);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// One parameter of a WWW-Authenticate header.
const wwwParam = (h, k) => { const m = new RegExp(`${k}="([^"]*)"`).exec(h || ""); return m ? m[1] : null; };

// One JSON-RPC request to /mcp with an access token, outside the SDK.
async function rawMcp(token) {
  const r = await fetch(MCP_URL, { method: "POST", headers: { authorization: `Bearer ${token}`,
    "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }) });
  return { status: r.status, www: r.headers.get("www-authenticate"), text: (await r.text()).slice(0, 300) };
}

// An OAuthClientProvider kept in memory (both SDKs' interface).  Signs
// the person in when the SDK redirects, while `interactive`; otherwise
// only records the redirect (a client that would have to ask the person
// again).
class MemoryProvider {
  constructor(label, person, metadataUrl) {
    this.label = label;
    this.person = person; // {user, action, shot}
    // A client known by its metadata document (the SDK uses it as the
    // client_id, and registers nothing, when the server says it may).
    if (metadataUrl) this.clientMetadataUrl = metadataUrl;
    this.interactive = true;
    this.redirects = [];
    this.invalidated = [];
    this.saved = [];
    this._state = randomBytes(16).toString("hex");
  }
  get redirectUrl() { return cb.url; }
  get clientMetadata() {
    return { client_name: `husk OAuth test ${this.label}`, redirect_uris: [cb.url],
             grant_types: ["authorization_code", "refresh_token"], response_types: ["code"],
             token_endpoint_auth_method: "none" };
  }
  state() { return this._state; }
  clientInformation() { return this.client; }
  saveClientInformation(c) { this.client = c; }
  tokens() { return this._tokens; }
  saveTokens(tk) { this._tokens = tk; this.saved.push(tk); }
  // Kept with the code verifier (v2 checks the callback's issuer against it, SEP-2352).
  saveDiscoveryState(d) { this.discovery = d; }
  discoveryState() { return this.discovery; }
  saveCodeVerifier(v) { this.verifier = v; }
  codeVerifier() { return this.verifier; }
  invalidateCredentials(what) {
    this.invalidated.push(what);
    if (what === "all" || what === "client") this.client = undefined;
    if (what === "all" || what === "tokens") this._tokens = undefined;
    if (what === "all" || what === "verifier") this.verifier = undefined;
    if (what === "all" || what === "discovery") this.discovery = undefined;
  }
  redirectToAuthorization(url) {
    this.redirects.push(new URL(String(url)));
    if (!this.interactive) return;
    this.signing = signIn(url, { org: ORG, password: PASSWORD, callback: cb, ...this.person });
  }
}

function transport(provider, log) {
  return new lib.StreamableHTTPClientTransport(new URL(MCP_URL),
    { authProvider: provider, fetch: loggingFetch(log) });
}
const newClient = () => new lib.Client({ name: "husk-oauth-test", version: "1.0.0" }, lib.opts);

// The first connect: 401, discovery, registration, the redirect; the
// person signs in; finishAuth with what came back; connect again.
// Returns {client, page (signIn's result), log, provider, firstError}.
async function session(provider, log) {
  const s = { provider, log };
  let tr = transport(provider, log), c = newClient();
  try { await c.connect(tr); s.firstError = null; } catch (e) { s.firstError = e; }
  await c.close().catch(() => {});
  if (!provider.signing) throw new Error(`the SDK did not redirect to sign in: ${s.firstError}`);
  s.page = await provider.signing;
  if (s.page.error) throw new Error(`sign-in: ${s.page.error}`);
  if (!s.page.callback || !s.page.callback.code)
    throw new Error(`no code at the callback: ${JSON.stringify(s.page.callback)}`);
  const params = new URLSearchParams(s.page.callback);
  tr = transport(provider, log);
  if (SDK === "v1") await tr.finishAuth(params.get("code"));
  else await tr.finishAuth(params);
  c = newClient();
  await c.connect(tr);
  s.client = c;
  return s;
}

// ---- the whole flow, a member --------------------------------------------------
async function flow() {
  const log = [];
  const member = process.env.MEMBER;
  const p = new MemoryProvider(`${SDK} flow`, { user: member, action: "allow", shot: join(SHOTS, `${SDK}-consent.png`) });
  let s;
  await t("connect with an authProvider: 401, discovery, registration, sign-in, token, connected", async () => {
    s = await session(p, log);
  });
  if (!s) {
    console.log("# requests: " + JSON.stringify(log.map((e) => `${e.method} ${e.path} ${e.status}`)));
    return;
  }
  const first = (pred) => log.find(pred);

  await t("the first connect fails with the SDK's UnauthorizedError (the person must sign in)", async () => {
    assert.ok(s.firstError instanceof lib.UnauthorizedError, String(s.firstError));
  });
  await t("POST /mcp without credentials: 401 with WWW-Authenticate Bearer resource_metadata and scope", async () => {
    const e = first((x) => x.path === "/mcp");
    assert.equal(e.status, 401);
    assert.match(e.www, /^Bearer /);
    assert.equal(wwwParam(e.www, "resource_metadata"), `${URL_}/.well-known/oauth-protected-resource/mcp`);
    sameSet(scopesOf(wwwParam(e.www, "scope")), DEFAULT_SCOPES);
    assert.equal(wwwParam(e.www, "error"), null, "no error= when no token was sent");
  });
  await t("protected resource metadata (RFC 9728): resource <issuer>/mcp, the issuer as its server", async () => {
    const e = first((x) => x.path === "/.well-known/oauth-protected-resource/mcp");
    assert.ok(e, "the SDK fetched it");
    assert.equal(e.status, 200);
    assert.equal(e.reply.resource, MCP_URL);
    assert.deepEqual(e.reply.authorization_servers, [URL_]);
    assert.deepEqual(e.reply.bearer_methods_supported, ["header"]);
    for (const x of DEFAULT_SCOPES) assert.ok(e.reply.scopes_supported.includes(x), x);
  });
  await t("authorization server metadata (RFC 8414): issuer and endpoints", async () => {
    const e = first((x) => x.path === "/.well-known/oauth-authorization-server");
    assert.ok(e, "the SDK fetched it");
    assert.equal(e.status, 200);
    const m = e.reply;
    assert.equal(m.issuer, URL_);
    assert.equal(m.authorization_endpoint, `${URL_}/oauth/authorize`);
    assert.equal(m.token_endpoint, `${URL_}/oauth/token`);
    assert.equal(m.registration_endpoint, `${URL_}/oauth/register`);
    assert.equal(m.revocation_endpoint, `${URL_}/oauth/revoke`);
    assert.deepEqual(m.response_types_supported, ["code"]);
    sameSet(m.grant_types_supported, ["authorization_code", "refresh_token"]);
    assert.deepEqual(m.code_challenge_methods_supported, ["S256"]);
    sameSet(m.token_endpoint_auth_methods_supported, ["none", "client_secret_post", "client_secret_basic"]);
    assert.equal(m.authorization_response_iss_parameter_supported, true);
    for (const x of DEFAULT_SCOPES) assert.ok(m.scopes_supported.includes(x), x);
  });
  await t("dynamic registration (RFC 7591): 201, client_id oc_…, the metadata as stored", async () => {
    const e = first((x) => x.path === "/oauth/register");
    assert.ok(e, "the SDK registered");
    assert.equal(e.status, 201);
    assert.match(e.reply.client_id, /^oc_[0-9a-f]{24}$/);
    assert.equal(typeof e.reply.client_id_issued_at, "number");
    assert.deepEqual(e.reply.redirect_uris, [cb.url]);
    assert.equal(e.reply.client_name, p.clientMetadata.client_name);
    assert.ok(!e.reply.client_secret, "a public client gets no secret");
    assert.equal(p.client.client_id, e.reply.client_id);
  });
  await t("the authorization request: code, S256 PKCE, state, resource <issuer>/mcp, the scopes", async () => {
    assert.equal(p.redirects.length, 1);
    const u = p.redirects[0], q = u.searchParams;
    assert.equal(`${u.origin}${u.pathname}`, `${URL_}/oauth/authorize`);
    assert.equal(q.get("response_type"), "code");
    assert.equal(q.get("client_id"), p.client.client_id);
    assert.equal(q.get("redirect_uri"), cb.url);
    assert.equal(q.get("code_challenge_method"), "S256");
    assert.match(q.get("code_challenge"), /^[A-Za-z0-9_-]{43}$/);
    assert.equal(q.get("state"), p.state());
    assert.equal(q.get("resource"), MCP_URL);
    sameSet(scopesOf(q.get("scope")), DEFAULT_SCOPES);
  });
  await t("the sign-in page: 200, no script, CSP, X-Frame-Options, Referrer-Policy, no-store", async () => {
    const h = s.page.headers;
    assert.equal(s.page.status, 200);
    assert.equal(s.page.scripts, 0, "no <script>");
    const csp = h["content-security-policy"] || "";
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /frame-ancestors 'none'/);
    const fa = /form-action ([^;]*)/.exec(csp);
    assert.ok(fa, `form-action in ${csp}`);
    assert.ok(fa[1].split(/\s+/).includes("'self'"), csp);
    assert.ok(fa[1].split(/\s+/).some((x) => x.replace(/\/$/, "") === `http://127.0.0.1:${cb.port}`),
              `the redirect URI's origin in form-action: ${csp}`);
    assert.equal((h["x-frame-options"] || "").toUpperCase(), "DENY");
    assert.equal(h["referrer-policy"], "no-referrer");
    assert.match(h["cache-control"] || "", /no-store/);
    assert.deepEqual(s.page.csp_errors || [], [], "the CSP blocked nothing (the form's redirect is allowed)");
  });
  await t("the sign-in page sets its CSRF cookie husk_oauth: HttpOnly, SameSite=Strict, Path=/ (not Secure over http)", async () => {
    const k = (s.page.cookies || []).find((x) => x.name === "husk_oauth");
    assert.ok(k, `cookies: ${(s.page.cookies || []).map((x) => x.name)}`);
    assert.equal(k.httpOnly, true);
    assert.equal(k.sameSite, "Strict");
    assert.equal(k.path, "/");
    assert.equal(k.secure, false);
  });
  await t("the consent page names the client, its redirect host and the scopes asked", async () => {
    const txt = s.page.text;
    assert.ok(txt.includes(p.clientMetadata.client_name), `client name not in: ${txt.slice(0, 500)}`);
    assert.ok(txt.includes("127.0.0.1"), `redirect host not in: ${txt.slice(0, 500)}`);
    for (const x of DEFAULT_SCOPES) assert.ok(new RegExp(`(^|[^:\\w])${x}([^:\\w]|$)`).test(txt), `scope ${x} not in: ${txt.slice(0, 500)}`);
  });
  await t("the consent page's screenshot is not blank (PNG, text drawn)", async () => {
    const sh = s.page.shot;
    console.log(`# screenshot ${SDK}-consent.png: ${JSON.stringify(sh)}`);
    assert.ok(sh && sh.bytes > 3000, `${sh && sh.bytes} bytes`);
    assert.ok(sh.dark > 500, `${sh.dark} dark pixels`);
    assert.ok(sh.colours > 2, `${sh.colours} colours`);
  });
  await t("Allow: the callback gets the code, the state as sent and iss (RFC 9207)", async () => {
    const q = s.page.callback;
    assert.match(q.code, /^hac_[0-9a-f]{64}$/);
    assert.equal(q.state, p.state());
    assert.equal(q.iss, URL_);
    assert.equal(q.error, undefined);
  });
  await t("the token request: authorization_code with the PKCE verifier → Bearer hat_/hrt_, expires_in, the scopes, no-store", async () => {
    const e = first((x) => x.path === "/oauth/token" && x.grant === "authorization_code");
    assert.ok(e, "a token request");
    assert.equal(e.status, 200, JSON.stringify(mask(e.reply)));
    for (const k of ["code", "code_verifier", "redirect_uri", "client_id"]) assert.ok(e.sent[k], `sent ${k}`);
    assert.match(e.cache || "", /no-store/);
    const r = e.reply;
    assert.equal(String(r.token_type).toLowerCase(), "bearer");
    assert.match(r.access_token, /^hat_[0-9a-f]{64}$/);
    assert.match(r.refresh_token, /^hrt_[0-9a-f]{64}$/);
    assert.equal(r.expires_in, TTL);
    sameSet(scopesOf(r.scope), DEFAULT_SCOPES);
    assert.equal(p.tokens().access_token, r.access_token);
  });
  await t("the order: 401, metadata, registration, token, then /mcp with the token", async () => {
    const seq = log.map((x) => `${x.method} ${x.path}`);
    const at = (k) => seq.indexOf(k);
    assert.ok(at("POST /mcp") === 0, seq.join(", "));
    assert.ok(at("GET /.well-known/oauth-authorization-server") < at("POST /oauth/register"), seq.join(", "));
    assert.ok(at("POST /oauth/register") < at("POST /oauth/token"), seq.join(", "));
    const after = log.slice(at("POST /oauth/token") + 1).filter((x) => x.path === "/mcp");
    assert.ok(after.length > 0 && after.every((x) => x.status < 400), JSON.stringify(after));
  });

  const c = s.client;
  await t("tools/list with the access token", async () => {
    const { tools } = await c.listTools();
    const names = tools.map((x) => x.name);
    for (const w of ["run_code", "sandbox_create", "sandbox_list", "sandbox_destroy"]) assert.ok(names.includes(w), w);
  });
  await t("tools/call run_code prints", async () => {
    const r = await call(c, "run_code", { language: "python", code: "print('signed in', 6*7)" });
    assert.ok(!r.isError, JSON.stringify(r));
    assert.equal(sc(r).stdout, "signed in 42\n");
  });
  let box;
  await t("tools/call sandbox_create", async () => {
    const r = await call(c, "sandbox_create", { ttl_seconds: 300 });
    assert.ok(!r.isError, JSON.stringify(r));
    box = sc(r).sandbox_id;
    assert.match(box, /^b_[0-9a-f]{24}$/);
    out.flow_box = box;
  });

  // ---- refresh: the access token expires; the SDK refreshes by itself
  const before = p.tokens();
  const mark = log.length;
  await sleep(TTL * 1000 + 1500);
  await t(`after --oauth-access-ttl ${TTL} s: a call still works (sandbox_list sees the box)`, async () => {
    const r = await call(c, "sandbox_list", {});
    assert.ok(!r.isError, JSON.stringify(r));
    assert.ok(sc(r).sandboxes.some((b) => b.sandbox_id === box), JSON.stringify(sc(r)));
  });
  await t("…because the SDK refreshed by itself (grant refresh_token, 200, no-store) and retried", async () => {
    const since = log.slice(mark);
    const seq = since.map((x) => `${x.method} ${x.path} ${x.status}${x.grant ? " " + x.grant : ""}`);
    console.log(`# after the expiry: ${seq.join(", ")}`);
    const iref = since.findIndex((x) => x.path === "/oauth/token" && x.grant === "refresh_token");
    assert.ok(iref >= 0, seq.join(", "));
    assert.equal(since[iref].status, 200, JSON.stringify(mask(since[iref].reply)));
    assert.match(since[iref].cache || "", /no-store/);
    assert.equal(since[iref].reply.expires_in, TTL);
    assert.ok(since.slice(iref + 1).some((x) => x.path === "/mcp" && x.status === 200), seq.join(", "));
    // A 401 the SDK got for the expired token says why.
    for (const x of since.filter((y) => y.path === "/mcp" && y.status === 401)) {
      assert.equal(wwwParam(x.www, "error"), "invalid_token", x.www);
      assert.equal(wwwParam(x.www, "resource_metadata"), `${URL_}/.well-known/oauth-protected-resource/mcp`, x.www);
    }
  });
  await t("the expired access token is refused: POST /mcp 401 error=\"invalid_token\"", async () => {
    const r = await rawMcp(before.access_token);
    assert.equal(r.status, 401, r.text);
    assert.equal(wwwParam(r.www, "error"), "invalid_token", r.www);
  });
  await t("the refresh rotated both tokens (new access and refresh token, same scopes)", async () => {
    const now = p.tokens();
    assert.notEqual(now.access_token, before.access_token);
    assert.match(now.refresh_token, /^hrt_/);
    assert.notEqual(now.refresh_token, before.refresh_token);
    sameSet(scopesOf(now.scope), DEFAULT_SCOPES);
  });
  await t("tools/call sandbox_destroy with the refreshed token", async () => {
    const r = await call(c, "sandbox_destroy", { sandbox_id: box });
    assert.ok(!r.isError, JSON.stringify(r));
    delete out.flow_box;
  });

  // ---- where a token is taken, and for what
  await t("the access token in the query string is refused: 400", async () => {
    const r = await fetch(`${MCP_URL}?access_token=${p.tokens().access_token}`, { method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }) });
    assert.equal(r.status, 400, await r.text());
  });
  await t("the /mcp token at the HTTP API (/v1) is refused: 401 invalid_token (another resource)", async () => {
    const r = await fetch(`${URL_}/v1/sandboxes`, { headers: { authorization: `Bearer ${p.tokens().access_token}` } });
    assert.equal(r.status, 401, await r.text());
    assert.equal(wwwParam(r.headers.get("www-authenticate"), "error"), "invalid_token");
  });

  // ---- revoke the refresh token: the family ends
  const access = p.tokens().access_token, refresh = p.tokens().refresh_token;
  await t("POST /oauth/revoke with the refresh token (and client_id): 200", async () => {
    const r = await fetch(`${URL_}/oauth/revoke`, { method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: refresh, token_type_hint: "refresh_token", client_id: p.client.client_id }) });
    assert.equal(r.status, 200, await r.text());
  });
  await t("then the access token of that sign-in is refused: POST /mcp 401 invalid_token", async () => {
    const r = await rawMcp(access);
    assert.equal(r.status, 401, r.text);
    assert.equal(wwwParam(r.www, "error"), "invalid_token", r.www);
  });
  p.interactive = false;
  const mark2 = log.length;
  await t("and the SDK's next call fails: 401, its refresh is refused (invalid_grant), it would have to ask the person again", async () => {
    let err;
    try { await call(c, "sandbox_list", {}); } catch (e) { err = e; }
    assert.ok(err, "the call failed");
    const since = log.slice(mark2);
    const seq = since.map((x) => `${x.method} ${x.path} ${x.status}${x.grant ? " " + x.grant : ""}`);
    assert.ok(since.some((x) => x.path === "/mcp" && x.status === 401), seq.join(", "));
    assert.ok(!since.some((x) => x.path === "/mcp" && x.status === 200), seq.join(", "));
    const ref = since.find((x) => x.path === "/oauth/token" && x.grant === "refresh_token");
    assert.ok(ref, `the SDK tried its refresh token: ${seq.join(", ")}`);
    assert.equal(ref.status, 400);
    assert.equal(ref.reply && ref.reply.error, "invalid_grant");
    assert.equal(p.redirects.length, 2, "a second redirect to sign in");
  });
  await c.close().catch(() => {});
}

// ---- Deny ---------------------------------------------------------------------------
async function deny() {
  const log = [];
  const p = new MemoryProvider(`${SDK} deny`, { user: process.env.MEMBER, action: "deny" });
  let tr = transport(p, log), c = newClient();
  let err;
  try { await c.connect(tr); } catch (e) { err = e; }
  await c.close().catch(() => {});
  await t("Deny: the callback gets error=access_denied with the state and iss, no code", async () => {
    assert.ok(err instanceof lib.UnauthorizedError, String(err));
    assert.ok(p.signing, "the SDK redirected");
    const page = await p.signing;
    assert.equal(page.error, undefined, page.error);
    const q = page.callback;
    assert.equal(q.error, "access_denied", JSON.stringify(q));
    assert.equal(q.code, undefined);
    assert.equal(q.state, p.state());
    assert.equal(q.iss, URL_);
  });
  await t("Deny: no token was asked for", async () => {
    assert.ok(!log.some((x) => x.path === "/oauth/token"), JSON.stringify(log.map((x) => x.path)));
  });
}

// ---- a viewer ------------------------------------------------------------------------
async function viewer() {
  const log = [];
  const p = new MemoryProvider(`${SDK} viewer`, { user: process.env.VIEWER, action: "allow" });
  let s;
  await t("a viewer signs in (asked for the default scopes)", async () => { s = await session(p, log); });
  if (!s) return;
  await t("the viewer is granted only what the role allows: sandbox:read storage:read", async () => {
    const e = log.find((x) => x.path === "/oauth/token" && x.grant === "authorization_code");
    sameSet(scopesOf(e.reply.scope), ["sandbox:read", "storage:read"]);
  });
  let n0;
  await t("viewer: sandbox_list works", async () => {
    const r = await call(s.client, "sandbox_list", {});
    assert.ok(!r.isError, JSON.stringify(r));
    n0 = sc(r).sandboxes.length;
  });
  p.interactive = false;
  const mark = log.length;
  await t("viewer: sandbox_create fails in the SDK (HTTP 403 insufficient_scope, scope=\"sandbox\")", async () => {
    let err, r;
    try { r = await call(s.client, "sandbox_create", {}); } catch (e) { err = e; }
    if (r && r.structuredContent && r.structuredContent.sandbox_id) out.viewer_box = r.structuredContent.sandbox_id;
    assert.ok(err, `no error from the SDK: ${JSON.stringify(r)}`);
    console.log(`# the SDK's error: ${String(err && err.message).slice(0, 200)}`);
    const e = log.slice(mark).find((x) => x.path === "/mcp" && x.status === 403);
    assert.ok(e, JSON.stringify(log.slice(mark).map((x) => `${x.method} ${x.path} ${x.status}`)));
    assert.match(e.www, /^Bearer /);
    assert.equal(wwwParam(e.www, "error"), "insufficient_scope");
    assert.equal(wwwParam(e.www, "scope"), "sandbox");
    assert.equal(wwwParam(e.www, "resource_metadata"), `${URL_}/.well-known/oauth-protected-resource/mcp`);
  });
  await t("viewer: no box was created, sandbox_list still works", async () => {
    let c = s.client;
    try { await c.listTools(); } catch {
      // v2 may have closed its session on the failed step-up: the stored tokens still serve.
      c = newClient();
      await c.connect(transport(p, log));
    }
    const r = await call(c, "sandbox_list", {});
    assert.ok(!r.isError, JSON.stringify(r));
    assert.equal(sc(r).sandboxes.length, n0);
    await c.close().catch(() => {});
  });
  if (p.tokens()) await reuse(p);
}

// ---- a rotated refresh token presented again: reuse ends the family ------------------
async function token(params) {
  const r = await fetch(`${URL_}/oauth/token`, { method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams(params) });
  let j = null;
  try { j = await r.json(); } catch {}
  return { status: r.status, j };
}
async function reuse(p) {
  const cid = p.client.client_id, old = p.tokens().refresh_token;
  let fresh;
  await t("refresh by hand: a new pair, the old refresh token dead", async () => {
    const r = await token({ grant_type: "refresh_token", refresh_token: old, client_id: cid });
    assert.equal(r.status, 200, JSON.stringify(mask(r.j)));
    fresh = r.j;
    assert.notEqual(fresh.refresh_token, old);
    const m = await rawMcp(fresh.access_token);
    assert.ok(m.status !== 401 && m.status !== 403, `the new access token: ${m.status} ${m.text}`);
  });
  await t("the old refresh token again (reuse): 400 invalid_grant, and the new tokens are revoked too", async () => {
    const r = await token({ grant_type: "refresh_token", refresh_token: old, client_id: cid });
    assert.equal(r.status, 400, JSON.stringify(mask(r.j)));
    assert.equal(r.j && r.j.error, "invalid_grant");
    const m = await rawMcp(fresh.access_token);
    assert.equal(m.status, 401, m.text);
    const again = await token({ grant_type: "refresh_token", refresh_token: fresh.refresh_token, client_id: cid });
    assert.equal(again.status, 400, JSON.stringify(mask(again.j)));
  });
}

// ---- a client known by its metadata document (Client ID Metadata Documents) -----------
async function cimd() {
  const log = [];
  const url = process.env.CIMD_URL, name = process.env.CIMD_NAME;
  const p = new MemoryProvider(`${SDK} cimd`, { user: process.env.MEMBER, action: "allow",
    shot: join(SHOTS, `${SDK}-cimd-consent.png`) }, url);
  let s;
  await t("connect with clientMetadataUrl: 401, discovery, sign-in, token, connected", async () => {
    s = await session(p, log);
  });
  if (!s) {
    console.log("# requests: " + JSON.stringify(log.map((e) => `${e.method} ${e.path} ${e.status}`)));
    return;
  }
  await t("the server says client_id_metadata_document_supported, so the SDK registered nothing", async () => {
    const m = log.find((x) => x.path === "/.well-known/oauth-authorization-server");
    assert.equal(m && m.reply.client_id_metadata_document_supported, true);
    assert.ok(!log.some((x) => x.path === "/oauth/register"), "no registration");
  });
  await t("the authorization request's client_id is the document's URL", async () => {
    assert.equal(p.redirects[0].searchParams.get("client_id"), url);
  });
  await t("the consent page says who vouches for the client: '<host> says it is <name>'", async () => {
    const host = new URL(url).hostname;
    assert.ok(s.page.text.includes(`${host} says it is ${name}`), s.page.text.slice(0, 500));
  });
  await t("the token request sent the URL as client_id (a public client: no secret)", async () => {
    const e = log.find((x) => x.path === "/oauth/token" && x.grant === "authorization_code");
    assert.ok(e && e.status === 200, JSON.stringify(e && mask(e.reply)));
    assert.ok(e.sent.client_id && !e.sent.client_secret);
    out.cimd_client = p.clientInformation().client_id;
  });
  await t("tools/list with the access token", async () => {
    const { tools } = await s.client.listTools();
    assert.ok(tools.some((x) => x.name === "sandbox_list"));
  });
  const mark = log.length;
  await sleep(TTL * 1000 + 1500);
  await t(`after --oauth-access-ttl ${TTL} s the SDK refreshes by itself with the URL client: 200`, async () => {
    const r = await call(s.client, "sandbox_list", {});
    assert.ok(!r.isError, JSON.stringify(r));
    const e = log.slice(mark).find((x) => x.path === "/oauth/token" && x.grant === "refresh_token");
    assert.ok(e && e.status === 200, JSON.stringify(e && mask(e.reply)));
  });
  await t("POST /oauth/revoke with the refresh token and the URL as client_id: 200, the token dies", async () => {
    const access = p.tokens().access_token;
    const r = await fetch(`${URL_}/oauth/revoke`, { method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: p.tokens().refresh_token, client_id: url }) });
    assert.equal(r.status, 200, await r.text());
    assert.equal((await rawMcp(access)).status, 401);
  });
  await s.client.close().catch(() => {});
}

// ---- two people of one tenant each create a box ---------------------------------------
async function attribution() {
  for (const [who, user] of [["member", process.env.MEMBER], ["user2", process.env.USER2]]) {
    const log = [];
    const p = new MemoryProvider(`${SDK} ${user}`, { user, action: "allow" });
    let s;
    await t(`${user} signs in`, async () => { s = await session(p, log); });
    if (!s) continue;
    await t(`${user}: sandbox_create`, async () => {
      const r = await call(s.client, "sandbox_create", { ttl_seconds: 300 });
      assert.ok(!r.isError, JSON.stringify(r));
      out[`${who}_box`] = sc(r).sandbox_id;
      out[`${who}_client`] = p.client.client_id;
      out[`${who}_client_name`] = p.clientMetadata.client_name;
    });
    await s.client.close().catch(() => {});
  }
}

try {
  for (const sc of SCENARIOS) {
    if (sc === "flow") await flow();
    else if (sc === "deny") await deny();
    else if (sc === "viewer") await viewer();
    else if (sc === "attribution") await attribution();
    else if (sc === "cimd") await cimd();
    else notOk(`unknown scenario ${sc}`);
  }
} catch (e) {
  notOk("the driver ran to its end", e && e.stack || e);
} finally {
  if (process.env.OUT) writeFileSync(process.env.OUT, JSON.stringify(out));
  await closeBrowser();
  await cb.close();
}
process.exit(failures() ? 1 : 0);
