// Opens an upload link's page (GET /u/<token>) in Debian's Chromium
// (headless, driven by playwright-core over CDP), chooses files in its
// file input, submits, and reads what the page says.  With --nojs the
// browser runs no script: the form posts by itself and the reply page
// must say it.  Prints one JSON line, for tests/serve/upload_browser.sh:
//   {"status" (the page's), "result" (the status text after the upload),
//    "post_status" (the POST's), "progress" ([value, max] of the progress
//    bar), "csp_errors" (console messages about the CSP), "error"?}
//
//   node upload.mjs --url URL --files PATH[,PATH...] [--nojs 1] [--chromium PATH]
//
// Every address the browser is sent to is the daemon's (127.0.0.1);
// background networking, component updates, sync and QUIC are off.
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

function args(argv) {
  const o = { chromium: "/usr/bin/chromium" };
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, "");
    if (i + 1 >= argv.length) throw new Error(`missing value of ${argv[i]}`);
    o[k] = argv[i + 1];
  }
  if (!o.url || !o.files) throw new Error("usage: upload.mjs --url URL --files PATH[,PATH...]");
  return o;
}

async function main() {
  const o = args(process.argv.slice(2));
  const result = { csp_errors: [] };
  const profile = mkdtempSync(join(tmpdir(), "husk-chromium-"));
  const flags = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-proxy-server",
  ];
  let ctx;
  try {
    ctx = await chromium.launchPersistentContext(profile, {
      executablePath: o.chromium,
      headless: true,
      chromiumSandbox: false,
      args: flags,
      javaScriptEnabled: !o.nojs,
      timeout: 60000,
    });
    const page = ctx.pages()[0] || (await ctx.newPage());
    page.on("console", (m) => {
      if (/Content.Security.Policy/i.test(m.text())) result.csp_errors.push(m.text().slice(0, 300));
    });
    page.on("response", (r) => {
      if (r.request().method() === "POST") result.post_status = r.status();
    });
    const resp = await page.goto(o.url, { waitUntil: "load", timeout: 30000 });
    result.status = resp ? resp.status() : null;
    if (result.status !== 200) throw new Error(`the page answered ${result.status}`);
    await page.setInputFiles('input[type="file"]', o.files.split(","));
    if (o.nojs) {
      await Promise.all([
        page.waitForNavigation({ waitUntil: "load", timeout: 60000 }),
        page.click('button[type="submit"]'),
      ]);
    } else {
      await page.click('button[type="submit"]');
      await page.waitForFunction(
        () => /^Upload (complete|failed)/.test(document.getElementById("status")?.textContent ?? ""),
        null,
        { timeout: 60000 },
      );
      result.progress = await page.evaluate(() => {
        const p = document.getElementById("p");
        return p ? [p.value, p.max] : null;
      });
    }
    result.result = await page.evaluate(() => document.getElementById("status")?.textContent ?? "");
  } catch (e) {
    result.error = String(e && e.message ? e.message : e).split("\n")[0];
  } finally {
    if (ctx) await ctx.close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
  }
  console.log(JSON.stringify(result));
  process.exit(result.error ? 1 : 0);
}

main();
