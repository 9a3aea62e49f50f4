// Opens a dashboard page served from a box through a preview URL in
// Debian's Chromium (headless, driven by playwright-core over CDP, no
// browser of its own), waits until the page has fetched its number and
// echoed a WebSocket message, takes a screenshot and reads its pixels.
// Prints one JSON line, for tests/serve/preview_browser.sh:
//   {"status", "value", "ws", "text", "center": [r,g,b], "outside": [r,g,b],
//    "text_pixels" (dark pixels where the text is drawn), "width", "height",
//    "requests": [urls the page asked for], "error"?}
//
//   node dashboard.mjs --url URL --out FILE.png [--host-rules RULES]
//                      [--credentials USER:PASSWORD] [--chromium PATH]
//
// Every address the browser is sent to is the preview's (127.0.0.1, or a
// host name that --host-rules maps to 127.0.0.1); background networking,
// component updates, sync and QUIC are off, and no proxy is used.
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inflateSync } from "node:zlib";

function args(argv) {
  const o = { chromium: "/usr/bin/chromium" };
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, "");
    if (i + 1 >= argv.length) throw new Error(`missing value of ${argv[i]}`);
    o[k] = argv[i + 1];
  }
  if (!o.url || !o.out) throw new Error("usage: dashboard.mjs --url URL --out FILE.png [...]");
  return o;
}

// A PNG decoder for what Chromium's screenshots are: 8-bit RGB or RGBA,
// not interlaced.  Returns {width, height, channels, pixels}.
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
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      depth = data[8];
      type = data[9];
      interlace = data[12];
    } else if (kind === "IDAT") {
      idat.push(data);
    } else if (kind === "IEND") {
      break;
    }
    off += 12 + len;
  }
  if (depth !== 8 || (type !== 2 && type !== 6) || interlace !== 0)
    throw new Error(`unsupported PNG: depth ${depth}, colour type ${type}, interlace ${interlace}`);
  const ch = type === 6 ? 4 : 3;
  const stride = width * ch;
  const raw = inflateSync(Buffer.concat(idat));
  if (raw.length < height * (stride + 1)) throw new Error("PNG data too short");
  const px = Buffer.alloc(height * stride);
  for (let y = 0; y < height; y++) {
    const f = raw[y * (stride + 1)];
    const src = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const row = y * stride;
    for (let x = 0; x < stride; x++) {
      const a = x >= ch ? px[row + x - ch] : 0;
      const b = y > 0 ? px[row - stride + x] : 0;
      const c = x >= ch && y > 0 ? px[row - stride + x - ch] : 0;
      let v;
      switch (f) {
        case 0: v = src[x]; break;
        case 1: v = src[x] + a; break;
        case 2: v = src[x] + b; break;
        case 3: v = src[x] + ((a + b) >> 1); break;
        case 4: {
          const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
          v = src[x] + (pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
          break;
        }
        default: throw new Error(`bad PNG filter ${f} on row ${y}`);
      }
      px[row + x] = v & 0xff;
    }
  }
  return { width, height, channels: ch, pixels: px };
}

function pixel(img, x, y) {
  const i = (y * img.width + x) * img.channels;
  return [img.pixels[i], img.pixels[i + 1], img.pixels[i + 2]];
}

async function main() {
  const o = args(process.argv.slice(2));
  const result = { requests: [] };
  const profile = mkdtempSync(join(tmpdir(), "husk-chromium-"));
  const flags = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-proxy-server",
  ];
  if (o["host-rules"]) flags.push(`--host-resolver-rules=${o["host-rules"]}`);
  const opts = {
    executablePath: o.chromium,
    headless: true,
    chromiumSandbox: false,
    args: flags,
    viewport: { width: 800, height: 600 },
    deviceScaleFactor: 1,
    timeout: 60000,
  };
  if (o.credentials) {
    const i = o.credentials.indexOf(":");
    opts.httpCredentials = { username: o.credentials.slice(0, i), password: o.credentials.slice(i + 1) };
  }
  let ctx;
  try {
    ctx = await chromium.launchPersistentContext(profile, opts);
    const page = ctx.pages()[0] || (await ctx.newPage());
    page.on("request", (r) => result.requests.push(r.url()));
    // The page's own answer, also when the navigation fails after it (a 401
    // that headless Chromium does not retry: ERR_INVALID_AUTH_CREDENTIALS).
    page.on("response", (r) => {
      if (r.url() === o.url) result.status = r.status();
    });
    const resp = await page.goto(o.url, { waitUntil: "load", timeout: 30000 });
    if (resp) result.status = resp.status();
    if (result.status === 200) await page.waitForFunction(
      () => {
        const v = document.getElementById("value");
        const w = document.getElementById("ws");
        return v && w && v.textContent !== "loading" && w.textContent !== "waiting";
      },
      null,
      { timeout: 20000 },
    ).catch(() => {});
    const texts = await page.evaluate(() => ({
      value: document.getElementById("value")?.textContent ?? null,
      ws: document.getElementById("ws")?.textContent ?? null,
      text: document.body ? document.body.innerText : "",
    }));
    result.value = texts.value;
    result.ws = texts.ws;
    result.text = texts.text.replace(/\s+/g, " ").trim();
    const png = await page.screenshot({ type: "png" });
    writeFileSync(o.out, png);
    const img = decodePng(png);
    result.width = img.width;
    result.height = img.height;
    result.center = pixel(img, 200, 150); // the middle of the 400x300 block at 0,0
    result.outside = pixel(img, 700, 100); // the page's white background
    // The text under the block: dark pixels where it is drawn.
    let dark = 0;
    for (let y = 315; y < 380 && y < img.height; y++)
      for (let x = 0; x < 400 && x < img.width; x++) {
        const [r, g, b] = pixel(img, x, y);
        if (r + g + b < 300) dark++;
      }
    result.text_pixels = dark;
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
