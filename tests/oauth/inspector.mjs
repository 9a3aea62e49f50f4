// MCP Inspector's CLI (@modelcontextprotocol/inspector --cli, as
// tests/mcp pins it) signing a person in to husk serve with OAuth, with no
// terminal: MCP_AUTO_OPEN_ENABLED=true lets it run its interactive flow
// without a TTY; it prints "Please navigate to: <authorization URL>" on
// stderr and waits at its loopback --callback-url.  This driver opens that
// URL in headless Chromium (tests/oauth/lib.mjs), signs in and allows; the
// browser comes back to the Inspector's listener, which redeems the code
// and makes the call.  A second run uses only what the first stored
// (--stored-auth-only).  Prints TAP lines.
//
// Environment: URL (husk serve's base), ORG, PASSWORD, MEMBER, HOME (the
// Inspector's store lives under it), CHROMIUM, MCPDIR, BROWSER_DIR.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import net from "node:net";
import { join } from "node:path";
import { MCPDIR, t, notOk, setPrefix, failures, signIn, closeBrowser } from "./lib.mjs";

const URL_ = process.env.URL.replace(/\/$/, "");
const MCP_URL = `${URL_}/mcp`;
setPrefix("[inspector] ");
setTimeout(() => { notOk("the driver finished within 170 s"); process.exit(1); }, 170000).unref();

async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, "127.0.0.1", r));
  const p = s.address().port;
  await new Promise((r) => s.close(r));
  return p;
}
const CB = `http://127.0.0.1:${await freePort()}/oauth/callback`;
const BIN = join(MCPDIR, "node_modules", ".bin");

// inspector(ARGS, onUrl): runs the CLI; onUrl(url) is called when it asks
// the person to navigate.  Resolves {code, stdout, stderr, json}.
function inspector(args, onUrl) {
  return new Promise((resolve) => {
    const child = spawn(join(BIN, "mcp-inspector"), ["--cli", "--server-url", MCP_URL, "--callback-url", CB,
      "--format", "json", ...args], {
      env: { ...process.env, PATH: `${BIN}:${process.env.PATH}`, MCP_AUTO_OPEN_ENABLED: "true",
             MCP_INSPECTOR_SECRET_STORE: "file", NO_COLOR: "1",
             // What it runs to open the URL (xdg-open honours $BROWSER): nothing.
             BROWSER: "/bin/true" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "", stderr = "", asked = false;
    const pending = [];
    child.stdout.on("data", (d) => { stdout += d; });
    child.stderr.on("data", (d) => {
      stderr += d;
      const m = /Please navigate to: (\S+)/.exec(stderr);
      if (m && !asked) { asked = true; pending.push(onUrl ? onUrl(m[1]) : Promise.resolve()); }
    });
    const kill = setTimeout(() => child.kill("SIGKILL"), 120000);
    child.on("close", async (code) => {
      clearTimeout(kill);
      const signed = (await Promise.all(pending))[0];
      let json = null;
      try { json = JSON.parse(stdout); } catch {}
      resolve({ code, stdout, stderr, json, asked, signed });
    });
  });
}
const resultOf = (j) => (j && (j.result ?? j)) || {};

let first;
await t("tools/list: the Inspector asks the person to sign in; Chromium signs in and allows", async () => {
  first = await inspector(["--method", "tools/list"], (url) =>
    signIn(url, { org: process.env.ORG, user: process.env.MEMBER, password: process.env.PASSWORD, action: "allow" }));
  assert.ok(first.asked, `no "Please navigate to" on stderr: ${first.stderr.slice(0, 600)}`);
  assert.equal(first.signed.error, undefined, first.signed.error);
});
if (first && first.asked) {
  await t("the authorization URL is husk's, with PKCE S256, the Inspector's loopback callback and resource <issuer>/mcp", async () => {
    const u = new URL(/Please navigate to: (\S+)/.exec(first.stderr)[1]);
    assert.equal(`${u.origin}${u.pathname}`, `${URL_}/oauth/authorize`);
    assert.equal(u.searchParams.get("code_challenge_method"), "S256");
    assert.equal(u.searchParams.get("redirect_uri"), CB);
    assert.equal(u.searchParams.get("resource"), MCP_URL);
    assert.match(u.searchParams.get("client_id") || "", /^oc_/);
  });
  await t("the browser came back to the Inspector's callback with a code and iss", async () => {
    const f = new URL(first.signed.final_url);
    assert.equal(`${f.origin}${f.pathname}`, CB);
    assert.match(f.searchParams.get("code") || "", /^hac_/);
    assert.equal(f.searchParams.get("iss"), URL_);
  });
}
await t("tools/list: exit 0 and the tools", async () => {
  assert.equal(first.code, 0, first.stderr.slice(-800));
  const names = (resultOf(first.json).tools || []).map((x) => x.name);
  assert.ok(names.includes("run_code") && names.includes("sandbox_create"), names.join(","));
});
// Past the access token's life (--oauth-access-ttl): the stored refresh
// token must serve.
const TTL = Number(process.env.ACCESS_TTL || 0);
if (TTL) await new Promise((r) => setTimeout(r, TTL * 1000 + 1500));
await t(`tools/call run_code with --stored-auth-only${TTL ? `, ${TTL} s later (a refresh)` : ""}: no sign-in`, async () => {
  const r = await inspector(["--stored-auth-only", "--method", "tools/call", "--tool-name", "run_code",
    "--tool-args-json", JSON.stringify({ language: "python", code: "print('inspector', 6*7)" })]);
  assert.equal(r.asked, false, "it asked to sign in again");
  assert.equal(r.code, 0, r.stderr.slice(-800));
  assert.equal(resultOf(r.json).structuredContent.stdout, "inspector 42\n", r.stdout.slice(0, 400));
});
await closeBrowser();
process.exit(failures() ? 1 : 0);
