// Shared by the OAuth suites' drivers (sdk_flow.mjs, inspector.mjs): the
// pinned packages of tests/mcp and tests/browser loaded by path (one pin of
// each, no third install), a loopback callback server, a fetch that logs
// what an OAuth client does, and a person signing in on husk's page in
// Debian's Chromium (headless, playwright-core).
//
// Every address anything here is sent to is 127.0.0.1.
import http from "node:http";
import { readFileSync, writeFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { inflateSync } from "node:zlib";

const HERE = dirname(fileURLToPath(import.meta.url));
export const MCPDIR = process.env.MCPDIR || join(HERE, "..", "mcp");
export const BROWSER_DIR = process.env.BROWSER_DIR || join(HERE, "..", "browser");

// The ESM entry of PKG's export SUB ("." or "./client/index.js"), as its
// package.json says, under DIR/node_modules: Node resolves bare names from
// the importing file's directory, and tests/oauth has no node_modules.
function entry(dir, pkg, sub) {
  const root = join(dir, "node_modules", pkg);
  const exp = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).exports;
  let target = exp[sub];
  if (target === undefined) {
    for (const [k, v] of Object.entries(exp)) {
      if (k.endsWith("*") && sub.startsWith(k.slice(0, -1))) {
        const rest = sub.slice(k.length - 1);
        const imp = typeof v === "string" ? v : v.import;
        target = (typeof imp === "string" ? imp : imp.default).replace("*", rest);
        break;
      }
    }
  }
  if (target && typeof target === "object") target = target.import ?? target.default;
  if (target && typeof target === "object") target = target.default;
  if (typeof target !== "string") throw new Error(`no ESM export ${sub} in ${pkg}`);
  return pathToFileURL(join(root, target)).href;
}
export const importFrom = (dir, pkg, sub = ".") => import(entry(dir, pkg, sub));

// ---- TAP -------------------------------------------------------------------
let n = 0, failed = 0;
export let prefix = "";
export function setPrefix(p) { prefix = p; }
export function ok(name) { n++; console.log(`ok ${n} - ${prefix}${name}`); }
export function notOk(name, why) {
  n++; failed++;
  console.log(`not ok ${n} - ${prefix}${name}`);
  if (why) console.log("# " + String(why).split("\n").slice(0, 8).join("\n# "));
}
export async function t(name, fn) {
  try { await fn(); ok(name); } catch (e) { notOk(name, e && e.stack || e); }
}
export const failures = () => failed;

// ---- the client's loopback callback server ---------------------------------
// Serves GET /callback (and /oauth/callback); each hit resolves the next
// waiter with its query parameters.
export async function callbackServer() {
  const waiters = [], hits = [];
  const server = http.createServer((req, res) => {
    const u = new URL(req.url, "http://127.0.0.1");
    if (u.pathname !== "/callback") { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end("<!doctype html><title>signed in</title><p id=done>You may close this window.</p>");
    const p = u.searchParams;
    if (waiters.length) waiters.shift()(p); else hits.push(p);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: server.address().port,
    url: `http://127.0.0.1:${server.address().port}/callback`,
    next(ms = 60000) {
      if (hits.length) return Promise.resolve(hits.shift());
      return new Promise((resolve, reject) => {
        const tm = setTimeout(() => reject(new Error("no request at the callback")), ms);
        waiters.push((p) => { clearTimeout(tm); resolve(p); });
      });
    },
    close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); }),
  };
}

// ---- a fetch that records what the client does ------------------------------
// Each entry: method, path, status, www (WWW-Authenticate), grant (of a
// token request), and for JSON replies of the OAuth endpoints the reply
// with tokens and secrets masked.  Nothing secret is printed from it.
export function loggingFetch(log) {
  return async (url, init = {}) => {
    const r = await fetch(url, init);
    const u = new URL(String(url instanceof Request ? url.url : url));
    const e = { method: init.method || "GET", path: u.pathname, status: r.status,
                www: r.headers.get("www-authenticate"), cache: r.headers.get("cache-control") };
    if (u.pathname === "/oauth/token" || u.pathname === "/oauth/revoke") {
      const body = new URLSearchParams(init.body instanceof URLSearchParams ? init.body.toString() : String(init.body || ""));
      e.grant = body.get("grant_type");
      e.sent = Object.fromEntries([...body.keys()].map((k) => [k, true]));
      e.resource = body.get("resource");
    }
    if (u.pathname.startsWith("/oauth/") || u.pathname.startsWith("/.well-known/")) {
      try { e.reply = await r.clone().json(); } catch { e.reply = null; }
    }
    log.push(e);
    return r;
  };
}
// The token values of a reply, never logged: the caller compares them.
export const mask = (o) => o && Object.fromEntries(Object.entries(o).map(([k, v]) =>
  [k, /token|secret|code/.test(k) && typeof v === "string" ? `<${v.slice(0, 4)}…>` : v]));

// ---- a PNG decoder (as tests/browser/dashboard.mjs's: Chromium's
// screenshots are 8-bit RGB or RGBA, not interlaced) --------------------------
export function decodePng(buf) {
  const sig = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  if (!buf.subarray(0, 8).equals(sig)) throw new Error("not a PNG");
  let off = 8, width = 0, height = 0, depth = 0, type = 0, interlace = 0;
  const idat = [];
  while (off + 8 <= buf.length) {
    const len = buf.readUInt32BE(off);
    const kind = buf.toString("latin1", off + 4, off + 8);
    const data = buf.subarray(off + 8, off + 8 + len);
    if (kind === "IHDR") {
      width = data.readUInt32BE(0); height = data.readUInt32BE(4);
      depth = data[8]; type = data[9]; interlace = data[12];
    } else if (kind === "IDAT") idat.push(data);
    else if (kind === "IEND") break;
    off += 12 + len;
  }
  if (depth !== 8 || (type !== 2 && type !== 6) || interlace !== 0)
    throw new Error(`unsupported PNG: depth ${depth}, colour type ${type}, interlace ${interlace}`);
  const ch = type === 6 ? 4 : 3, stride = width * ch;
  const raw = inflateSync(Buffer.concat(idat));
  const px = Buffer.alloc(height * stride);
  for (let y = 0; y < height; y++) {
    const f = raw[y * (stride + 1)];
    const src = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const row = y * stride;
    for (let x = 0; x < stride; x++) {
      const a = x >= ch ? px[row + x - ch] : 0, b = y > 0 ? px[row - stride + x] : 0;
      const c = x >= ch && y > 0 ? px[row - stride + x - ch] : 0;
      let v;
      switch (f) {
        case 0: v = src[x]; break;
        case 1: v = src[x] + a; break;
        case 2: v = src[x] + b; break;
        case 3: v = src[x] + ((a + b) >> 1); break;
        case 4: { const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
          v = src[x] + (pa <= pb && pa <= pc ? a : pb <= pc ? b : c); break; }
        default: throw new Error(`bad PNG filter ${f} on row ${y}`);
      }
      px[row + x] = v & 0xff;
    }
  }
  return { width, height, channels: ch, pixels: px };
}
// How much is drawn: pixels darker than the page's light background, and
// the number of distinct colours (a blank page has one).
export function inked(png) {
  const img = decodePng(png);
  let dark = 0;
  const colours = new Set();
  for (let i = 0; i < img.width * img.height; i++) {
    const o = i * img.channels, r = img.pixels[o], g = img.pixels[o + 1], b = img.pixels[o + 2];
    if (r + g + b < 384) dark++;
    if (colours.size < 4096) colours.add((r << 16) | (g << 8) | b);
  }
  return { width: img.width, height: img.height, dark, colours: colours.size };
}

// ---- the browser -------------------------------------------------------------
let browser;
export async function launchBrowser() {
  if (browser) return browser;
  const { chromium } = await importFrom(BROWSER_DIR, "playwright-core");
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    chromiumSandbox: false,
    timeout: 60000,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--no-proxy-server"],
  });
  return browser;
}
export async function closeBrowser() {
  if (browser) await browser.close().catch(() => {});
  browser = undefined;
}

// The first visible element of several ways to find a field.
async function field(page, how) {
  for (const loc of how) {
    const l = loc.first();
    if (await l.count().catch(() => 0) && await l.isVisible().catch(() => false)) return l;
  }
  return null;
}
const orgField = (p) => field(p, [p.getByLabel(/organi[sz]ation|tenant/i),
  p.locator('input[name*="org" i], input[id*="org" i], input[name*="tenant" i]'),
  p.getByPlaceholder(/organi[sz]ation|tenant/i)]);
const userField = (p) => field(p, [p.getByLabel(/user ?name|^user$|login/i),
  p.locator('input[name="user" i], input[name*="username" i], input[name="name"], input[id*="user" i], input[autocomplete="username"]'),
  p.getByPlaceholder(/user/i)]);
const passField = (p) => field(p, [p.locator('input[type="password"]')]);
const button = (p, re) => field(p, [p.getByRole("button", { name: re }),
  p.locator(`input[type="submit"]`).filter({ hasText: re })]);

// signIn(authUrl, opts): a person on the authorization page.
//   opts: org, user, password, action ("allow" | "deny"), shot (PNG path),
//         callback (the client's callbackServer, to wait on; optional)
// Returns {status, headers (of the page), cookies, scripts, text (the
// consent page's), shot: {bytes, dark, colours, ...}, callback (params),
// final_url, error?}.
export async function signIn(authUrl, opts) {
  const r = { requests: [] };
  const b = await launchBrowser();
  const ctx = await b.newContext({ viewport: { width: 1000, height: 900 } });
  try {
    const page = await ctx.newPage();
    page.on("request", (q) => r.requests.push(`${q.method()} ${q.url().replace(/[?].*/, "")}`));
    page.on("console", (m) => { if (/Content.Security.Policy/i.test(m.text())) (r.csp_errors ||= []).push(m.text().slice(0, 300)); });
    const resp = await page.goto(String(authUrl), { waitUntil: "load", timeout: 30000 });
    r.status = resp ? resp.status() : null;
    r.headers = resp ? await resp.allHeaders() : {};
    if (r.status !== 200) {
      r.text = (await page.evaluate(() => document.body ? document.body.innerText : "")).slice(0, 2000);
      throw new Error(`the authorization page answered ${r.status}`);
    }
    r.cookies = await ctx.cookies();
    r.scripts = await page.locator("script").count();
    r.sign_in_text = await page.evaluate(() => document.body.innerText);
    const org = await orgField(page), user = await userField(page), pass = await passField(page);
    r.fields = { org: !!org, user: !!user, password: !!pass };
    if (!org || !user || !pass) throw new Error(`sign-in fields not found: ${JSON.stringify(r.fields)}`);
    await org.fill(opts.org);
    await user.fill(opts.user);
    await pass.fill(opts.password);
    const want = opts.action === "deny" ? /deny|cancel|decline|refuse/i : /allow|approve|authori[sz]e|accept/i;
    let btn = await button(page, want);
    if (!btn) {
      // Sign in first, consent on a second page.
      const next = await button(page, /sign ?in|log ?in|continue|next|submit/i);
      if (!next) throw new Error("neither an Allow/Deny nor a sign-in button on the page");
      await Promise.all([page.waitForLoadState("load"), next.click()]);
      await page.waitForLoadState("load");
      btn = await button(page, want);
      if (!btn) throw new Error(`no ${opts.action} button after signing in: ${(await page.evaluate(() => document.body.innerText)).slice(0, 300)}`);
    }
    r.text = await page.evaluate(() => document.body.innerText);
    if (opts.shot) {
      const png = await page.screenshot({ type: "png", fullPage: true });
      writeFileSync(opts.shot, png);
      r.shot = { bytes: png.length, ...inked(png) };
    }
    const cb = opts.callback ? opts.callback.next(40000) : null;
    cb?.catch(() => {});
    await Promise.all([page.waitForNavigation({ waitUntil: "load", timeout: 40000 }).catch(() => {}), btn.click()]);
    r.final_url = page.url();
    r.final_text = (await page.evaluate(() => document.body ? document.body.innerText : "").catch(() => "")).slice(0, 500);
    if (cb) {
      const late = new Promise((_, rej) => setTimeout(() => rej(new Error(
        `the browser did not come back to the client (at ${r.final_url.replace(/[?].*/, "")}: ${r.final_text.slice(0, 200)})`)), 5000));
      r.callback = Object.fromEntries(await Promise.race([cb, late]));
    }
  } catch (e) {
    r.error = String(e && e.message ? e.message : e).split("\n")[0];
  } finally {
    await ctx.close().catch(() => {});
  }
  return r;
}
