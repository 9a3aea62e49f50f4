// Single sign-on through the organization's OpenID Connect provider, with
// a person in headless Chromium (docs/oauth.md, "Signing in with the
// organization's identity provider"): the official MCP TypeScript SDK
// client (v1, @modelcontextprotocol/sdk) connects to husk's /mcp, the
// person presses the single sign-on button on husk's page, signs in on the
// provider's own login page (panva's oidc-provider, tests/oauth/idp/idp.mjs),
// comes back to husk's consent page (its screenshot), allows, and the
// client calls a tool.  Then, without the SDK (a client registered by
// hand), more people: the same person again, a person the provider knows
// and the tenant does not (refused, or made when the tenant says
// create_users), a disabled user (refused).
// Prints TAP lines.
//
// Environment:
//   URL          husk serve's base URL (http://127.0.0.1:PORT): the issuer
//   IDP          the provider's issuer (http://127.0.0.1:PORT)
//   ORG          the tenant whose provider is IDP (create_users null)
//   ORG_OPEN     another, with create_users "member"
//   PROVIDER     the configured display_name of the provider
//   ALICE, ALICE_DISPLAY  a member the tenant admin made (her email)
//   DAVE         a disabled user of ORG;  CAROL  a person ORG does not have
//   BOB          a person ORG_OPEN does not have yet
//   SHOTS        directory for screenshots;  OUT  a JSON file of results
//   BODIES       a file: every reply body husk sent the browser
//   CHROMIUM, MCPDIR, BROWSER_DIR
import assert from "node:assert/strict";
import { randomBytes, createHash } from "node:crypto";
import { appendFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MCPDIR, importFrom, t, notOk, setPrefix, failures, callbackServer, loggingFetch,
         launchBrowser, closeBrowser, inked } from "./lib.mjs";

const URL_ = process.env.URL.replace(/\/$/, "");
const IDP = process.env.IDP.replace(/\/$/, "");
const ORG = process.env.ORG, ORG_OPEN = process.env.ORG_OPEN, PROVIDER = process.env.PROVIDER;
const SHOTS = process.env.SHOTS || "/tmp";
const BODIES = process.env.BODIES;
const out = { seen: { callback_urls: [], idp_urls: [] } };
setPrefix("[oidc] ");
setTimeout(() => { notOk("the driver finished within 150 s"); process.exit(1); }, 150000).unref();

const sdk = (sub) => importFrom(MCPDIR, "@modelcontextprotocol/sdk", sub);
const { Client } = await sdk("./client/index.js");
const { StreamableHTTPClientTransport } = await sdk("./client/streamableHttp.js");
const cb = await callbackServer();
const sc = (r) => r.structuredContent ?? JSON.parse(r.content[0].text);

// The first visible element of several ways to find it.
async function first(page, locs) {
  for (const l of locs) {
    const x = l.first();
    if (await x.count().catch(() => 0) && await x.isVisible().catch(() => false)) return x;
  }
  return null;
}

// ssoSignIn(authUrl, {org, login, action, shot, callback}): a person on
// husk's authorization page who presses the single sign-on button, signs in
// at the provider, and (when husk shows its consent page) presses Allow or
// Deny.  Returns {status, sso_button, at_provider, consent_status,
// consent_url, text (the consent page's), shot, callback (params),
// final_url, final_status, final_text, error?}.
async function ssoSignIn(authUrl, opts) {
  const r = {};
  const b = await launchBrowser();
  const ctx = await b.newContext({ viewport: { width: 1000, height: 900 } });
  const pending = [];
  try {
    const page = await ctx.newPage();
    page.on("request", (q) => {
      const u = q.url();
      if (u.startsWith(`${URL_}/oauth/callback/`)) out.seen.callback_urls.push(u);
      if (u.startsWith(`${IDP}/auth?`)) out.seen.idp_urls.push(u);
    });
    page.on("console", (m) => { if (/Content.Security.Policy|form-action/i.test(m.text())) (r.csp_errors ||= []).push(m.text().slice(0, 400)); });
    // Every body husk sends this browser (not the redirects), for the suite's grep.
    page.on("response", (resp) => {
      if (!BODIES || !resp.url().startsWith(URL_) || (resp.status() >= 300 && resp.status() < 400)) return;
      // Not the page that sends the browser on to the provider: it is the
      // authorization request, with its state and nonce, as a 303 would be.
      pending.push(resp.text().then((x) => {
        if (resp.request().method() === "POST" && /\/oauth\/authorize$/.test(resp.url()) && /id="continue"/.test(x)) return;
        appendFileSync(BODIES, `--- ${resp.url().replace(/[?].*/, "")} ${resp.status()}\n${x}\n`);
      })
        .catch(() => {}));
    });
    const resp = await page.goto(String(authUrl), { waitUntil: "load", timeout: 30000 });
    r.status = resp ? resp.status() : null;
    if (r.status !== 200) throw new Error(`the authorization page answered ${r.status}`);
    const org = await first(page, [page.getByLabel(/organi[sz]ation/i), page.locator('input[name="organization"]')]);
    if (!org) throw new Error("no organization field");
    await org.fill(opts.org);
    const btn = await first(page, [page.getByRole("button", { name: /organi[sz]ation.s provider|single sign.on|\bsso\b/i })]);
    r.sso_button = btn ? (await btn.innerText()).trim() : null;
    if (!btn) throw new Error(`no single sign-on button: ${(await page.evaluate(() => document.body.innerText)).slice(0, 300)}`);
    // husk's answer moves on by itself (docs/oauth.md: a page with a meta
    // refresh) to the provider's login page: nothing else is clicked.
    let navErr = null;
    const reached = page.waitForURL((u) => String(u).startsWith(IDP + "/"), { timeout: 15000, waitUntil: "load" })
      .then(() => true, (e) => { navErr = e; return false; });
    await btn.click();
    r.at_provider = await reached;
    if (!r.at_provider && page.url().startsWith(`${URL_}/oauth/authorize`)) {
      await page.waitForTimeout(300); // the console's report of a blocked form comes late
      // The browser refused to go (the page's CSP): say so, then carry on
      // as a browser without that CSP would, to test the rest of the flow.
      r.button_blocked = `${String(navErr && navErr.message || navErr).split("\n")[0]} (the page's Content-Security-Policy: ${(r.csp_errors || ["no report"]).join(" | ")})`;
      const form = await page.locator("form").first().evaluate((f) =>
        Array.from(f.querySelectorAll("input")).filter((i) => i.type === "hidden").map((i) => [i.name, i.value]));
      const fields = Object.fromEntries(form);
      Object.assign(fields, { organization: opts.org, username: "", password: "", action: "sso" });
      const resp = await ctx.request.post(`${URL_}/oauth/authorize`, { form: fields, maxRedirects: 0 });
      let loc = resp.headers()["location"] || "";
      if (resp.status() === 200) {
        const m = /<a\b[^>]*\bid="continue"[^>]*\bhref="([^"]*)"/.exec(await resp.text());
        loc = m ? m[1].replace(/&amp;/g, "&") : "";
      }
      if (!loc.startsWith(IDP + "/")) throw new Error(`the sso form outside the page: ${resp.status()} ${loc.slice(0, 80)}`);
      out.seen.idp_urls.push(loc);
      await page.goto(loc, { waitUntil: "load", timeout: 30000 });
      r.at_provider = page.url().startsWith(IDP + "/");
    }
    if (!r.at_provider) throw new Error(`not at the provider after the button: ${page.url().replace(/[?].*/, "")}: ${(await page.evaluate(() => document.body.innerText)).slice(0, 300)}`);
    // The provider's own login page (oidc-provider's development interactions).
    await page.locator('input[name="login"]').fill(opts.login);
    await page.locator('input[name="password"]').fill("any password will do");
    const back = page.waitForURL((u) => String(u).startsWith(`${URL_}/`), { timeout: 30000 });
    const cbResp = page.waitForResponse((x) => x.url().startsWith(`${URL_}/oauth/callback/`), { timeout: 30000 });
    await page.locator('button[type="submit"], input[type="submit"]').first().click();
    await back;
    const c = await cbResp.catch(() => null);
    await page.waitForLoadState("load");
    r.consent_status = c ? c.status() : null;
    r.consent_url = page.url().replace(/[?].*/, "");
    r.text = await page.evaluate(() => document.body ? document.body.innerText : "");
    r.scripts = await page.locator("script").count();
    const want = opts.action === "deny" ? /^\s*(deny|cancel|decline)/i : /^\s*(allow|approve|accept)/i;
    // The consent page: a form posting to /oauth/callback, no password (not
    // the sign-in page shown again, whose password form has an Allow too).
    r.consent_form = await page.locator('form[action$="/oauth/callback"]').count() > 0;
    r.password_field = await page.locator('input[type="password"]').count() > 0;
    const choice = r.consent_form && !r.password_field ? await first(page, [page.getByRole("button", { name: want })]) : null;
    if (opts.shot) {
      const png = await page.screenshot({ type: "png", fullPage: true });
      writeFileSync(opts.shot, png);
      r.shot = { bytes: png.length, ...inked(png) };
    }
    if (!choice) { r.no_consent = true; return r; }
    const got = opts.callback ? opts.callback.next(30000) : null;
    got?.catch(() => {});
    const fin = page.waitForResponse((x) => x.url().startsWith(`${URL_}/oauth/callback`) && x.request().method() === "POST",
                                     { timeout: 30000 }).catch(() => null);
    await Promise.all([page.waitForNavigation({ waitUntil: "load", timeout: 30000 }).catch(() => {}), choice.click()]);
    const f = await fin;
    r.final_status = f ? f.status() : null;
    r.final_url = page.url();
    if (got) {
      const late = new Promise((_, rej) => setTimeout(() => rej(new Error(
        `the browser did not come back to the client (at ${r.final_url.replace(/[?].*/, "")})`)), 5000));
      r.callback = Object.fromEntries(await Promise.race([got, late]));
    }
  } catch (e) {
    r.error = String(e && e.message ? e.message : e).split("\n")[0];
    if (r.csp_errors) r.error += ` (the page's Content-Security-Policy: ${r.csp_errors.join(" | ")})`;
  } finally {
    await Promise.all(pending);
    await ctx.close().catch(() => {});
  }
  return r;
}

// ---- the MCP SDK's OAuth flow with single sign-on --------------------------------
class MemoryProvider {
  constructor(person) { this.person = person; this.redirects = []; this._state = randomBytes(16).toString("hex"); }
  get redirectUrl() { return cb.url; }
  get clientMetadata() {
    return { client_name: "husk OIDC test (SDK)", redirect_uris: [cb.url],
             grant_types: ["authorization_code", "refresh_token"], response_types: ["code"],
             token_endpoint_auth_method: "none" };
  }
  state() { return this._state; }
  clientInformation() { return this.client; }
  saveClientInformation(c) { this.client = c; }
  tokens() { return this._tokens; }
  saveTokens(tk) { this._tokens = tk; }
  saveCodeVerifier(v) { this.verifier = v; }
  codeVerifier() { return this.verifier; }
  invalidateCredentials() {}
  redirectToAuthorization(url) {
    this.redirects.push(new URL(String(url)));
    this.signing = ssoSignIn(url, { callback: cb, ...this.person });
  }
}

async function sdkFlow() {
  const log = [];
  const p = new MemoryProvider({ org: ORG, login: process.env.ALICE, action: "allow",
                                 shot: join(SHOTS, "oidc-consent.png") });
  const transport = () => new StreamableHTTPClientTransport(new URL(`${URL_}/mcp`), { authProvider: p, fetch: loggingFetch(log) });
  let c = new Client({ name: "husk-oidc-test", version: "1.0.0" });
  let firstErr;
  try { await c.connect(transport()); } catch (e) { firstErr = e; }
  await c.close().catch(() => {});
  let s;
  await t("the SDK gets 401, discovers, registers and sends the person to husk's authorization page", async () => {
    assert.ok(firstErr, "the first connect needs a sign-in");
    assert.ok(p.signing, `the SDK did not redirect: ${firstErr}`);
    assert.equal(`${p.redirects[0].origin}${p.redirects[0].pathname}`, `${URL_}/oauth/authorize`);
  });
  if (!p.signing) return;
  s = await p.signing;
  out.flow = { ...s, text: (s.text || "").slice(0, 2000) };
  await t("husk's page has the single sign-on button; pressing it with the organization goes to the provider", async () => {
    assert.ok(s.sso_button, s.error);
    console.log(`# the button: ${JSON.stringify(s.sso_button)}`);
    assert.ok(!s.button_blocked, `Chromium did not follow the button to the provider: ${s.button_blocked}; ` +
      "the rest of this flow went on through the same form posted outside the page");
    assert.ok(s.at_provider, s.error);
  });
  await t("after the provider's login page: husk's consent page (200 at the tenant's /oauth/callback/<id>, no script)", async () => {
    assert.equal(s.consent_status, 200, s.error || s.text);
    assert.equal(s.consent_url, `${URL_}/oauth/callback/${process.env.T_ACME}`);
    assert.equal(s.scripts, 0);
    assert.ok(!s.no_consent, `no Allow button: ${(s.text || "").slice(0, 300)}`);
  });
  await t(`the consent page names the person (${process.env.ALICE_DISPLAY}), the provider (via ${PROVIDER}), the client and the scopes`, async () => {
    const txt = s.text || "";
    assert.ok(txt.includes(process.env.ALICE_DISPLAY), txt.slice(0, 500));
    assert.match(txt, new RegExp(`via\\s+${PROVIDER.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`), txt.slice(0, 500));
    assert.ok(txt.includes(p.clientMetadata.client_name), txt.slice(0, 500));
    assert.ok(txt.includes("127.0.0.1"), txt.slice(0, 500));
    for (const x of ["sandbox", "sandbox:read", "storage:read", "storage:write"]) assert.ok(txt.includes(x), x);
  });
  await t("the consent page's screenshot is not blank (PNG, text drawn)", async () => {
    const sh = s.shot;
    console.log(`# screenshot oidc-consent.png: ${JSON.stringify(sh)}`);
    assert.ok(sh && sh.bytes > 3000 && sh.dark > 500 && sh.colours > 2, JSON.stringify(sh));
  });
  await t("Allow: the client's callback gets husk's code, its state and iss", async () => {
    const q = s.callback || {};
    assert.match(q.code || "", /^hac_[0-9a-f]{64}$/, s.error || JSON.stringify(q));
    assert.equal(q.state, p.state());
    assert.equal(q.iss, URL_);
  });
  if (!s.callback || !s.callback.code) return;
  await t("the SDK exchanges the code and connects with the token", async () => {
    const tr = transport();
    await tr.finishAuth(s.callback.code);
    c = new Client({ name: "husk-oidc-test", version: "1.0.0" });
    await c.connect(tr);
    assert.match(p.tokens().access_token, /^hat_/);
  });
  await t("tools/call run_code as the person who signed in with the provider", async () => {
    const r = await c.callTool({ name: "run_code", arguments: { language: "python", code: "print('sso', 6*7)" } },
                               undefined, { timeout: 120000 });
    assert.ok(!r.isError, JSON.stringify(r));
    assert.equal(sc(r).stdout, "sso 42\n");
  });
  await c.close().catch(() => {});
}

// ---- more people, without the SDK: a client registered once --------------------------
let client;
async function register() {
  const r = await fetch(`${URL_}/oauth/register`, { method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ redirect_uris: [cb.url], client_name: "husk OIDC test (by hand)" }) });
  client = (await r.json()).client_id;
  out.client = client;
}
async function person(org, login, action = "allow") {
  const verifier = randomBytes(32).toString("base64url");
  const challenge = createHash("sha256").update(verifier).digest("base64url");
  const state = randomBytes(12).toString("hex");
  const u = new URL(`${URL_}/oauth/authorize`);
  for (const [k, v] of Object.entries({ response_type: "code", client_id: client, redirect_uri: cb.url,
    code_challenge: challenge, code_challenge_method: "S256", state })) u.searchParams.set(k, v);
  const s = await ssoSignIn(u, { org, login, action, callback: cb });
  s.state_ok = s.callback ? s.callback.state === state : undefined;
  if (s.callback && s.callback.code) {
    const r = await fetch(`${URL_}/oauth/token`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "authorization_code", code: s.callback.code, redirect_uri: cb.url,
                                  code_verifier: verifier, client_id: client }) });
    s.token_status = r.status;
    const j = await r.json().catch(() => ({}));
    s.token_ok = r.status === 200 && /^hat_/.test(j.access_token || "");
    if (s.token_ok) {
      // One call with the token, so that the audit has a record made with it.
      const m = await fetch(`${URL_}/mcp`, { method: "POST", headers: { authorization: `Bearer ${j.access_token}`,
        "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "sandbox_list", arguments: {} } }) });
      s.mcp_status = m.status;
      await m.text().catch(() => {});
    }
  }
  return s;
}
const brief = (s) => JSON.stringify({ error: s.error, consent: s.consent_status, no_consent: s.no_consent,
  callback: s.callback && Object.keys(s.callback), token: s.token_status, text: (s.text || "").slice(0, 200) });

async function others() {
  await register();
  const again = await person(ORG, process.env.ALICE);
  out.again = { token_ok: again.token_ok, mcp_status: again.mcp_status };
  await t("the same person signs in a second time (a new browser, the provider's login again): a code, a token", async () => {
    assert.ok(again.token_ok, brief(again));
    assert.equal(again.state_ok, true);
  });
  const bob = await person(ORG_OPEN, process.env.BOB);
  out.bob = { token_ok: bob.token_ok, text: (bob.text || "").slice(0, 500) };
  await t(`create_users "member": a person the tenant does not have yet (${process.env.BOB}) is made and signed in`, async () => {
    assert.ok(bob.token_ok, brief(bob));
    assert.ok((bob.text || "").includes("Bob Example"), `the consent page shows the name claim: ${(bob.text || "").slice(0, 300)}`);
  });
  for (const [who, login, why] of [["carol", process.env.CAROL, "a person the tenant does not have (create_users null)"],
                                   ["dave", process.env.DAVE, "a disabled user"]]) {
    const s = await person(ORG, login);
    out[who] = { consent_status: s.consent_status, no_consent: s.no_consent, callback: s.callback ? Object.keys(s.callback) : null,
                 text: (s.text || "").slice(0, 500), error: s.error };
    await t(`${why} is refused: no consent page, no code for the client`, async () => {
      assert.ok(s.at_provider, brief(s));
      assert.ok(s.no_consent, brief(s));
      assert.ok(!s.callback || !s.callback.code, brief(s));
      console.log(`# ${who}: husk answered ${s.consent_status}: ${(s.text || "").replace(/\s+/g, " ").slice(0, 160)}`);
    });
  }
  // Deny on the consent page.
  const d = await person(ORG, process.env.ALICE, "deny");
  await t("Deny on the consent page: the client gets error=access_denied with its state, no code", async () => {
    assert.equal(d.callback && d.callback.error, "access_denied", brief(d));
    assert.ok(!d.callback.code);
    assert.equal(d.state_ok, true);
  });
}

try {
  await sdkFlow();
  await others();
} catch (e) {
  notOk("the driver ran to its end", e && e.stack || e);
} finally {
  if (process.env.OUT) writeFileSync(process.env.OUT, JSON.stringify(out));
  await closeBrowser();
  await cb.close();
}
process.exit(failures() ? 1 : 0);
