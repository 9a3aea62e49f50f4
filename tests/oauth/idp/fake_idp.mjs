// A hostile OpenID Connect provider for tests/oauth/oidc.sh (node:http and
// jose), on 127.0.0.1 (a free port).  Each path prefix is a provider of its
// own: the issuer http://127.0.0.1:PORT/<tag> serves
//   GET  /<tag>/.well-known/openid-configuration
//   GET  /<tag>/jwks
//   GET  /<tag>/authorize   checks the request, redirects straight back to
//                           redirect_uri with a code and the state
//   POST /<tag>/token       checks the code, redirect_uri, PKCE verifier and
//                           the client's authentication; then answers as the
//                           tag's mode says (below)
// and is controlled with
//   POST /_admin/<tag>?mode=M[&sub=..&email=..&name=..]   the token mode
//   GET  /_admin/<tag>      what the tag saw (authorize and token requests,
//                           JWKS and discovery fetches)
//   GET  /_admin/seen       every state, nonce, code, ID token and access
//                           token that passed, and the client secret: none
//                           may reach husk's log, replies or audit
//
// The discovery document depends on the tag's name:
//   wrongiss*   its issuer is another one
//   plainhttp*  its endpoints are http:// URLs on a host that is not a
//               loopback name (http://[::ffff:7f00:1]:PORT: an IPv4-mapped
//               address, so that whatever connects still stays on this host)
//   bigdisc*    over 64 KiB
//   redirdisc*  a 302 to a good document
//   nos256*     code_challenge_methods_supported: ["plain"]
//   post*       token_endpoint_auth_methods_supported: ["client_secret_post"]
//   pub*        a public client: the token endpoint wants no secret
//   badjwks-X   its JWKS is broken: X = b64 (an n that is not base64url),
//               notjson, big (over 64 KiB), notarray, emptyn, offcurve (an
//               EC key off its curve; the token is signed ES256), 404
// Token modes (the ID token unless said):
//   good slow (3 s before the reply) es256 no-kid rotate (signed by a key the JWKS shows only from now on)
//   azp-right exp-skew (20 s expired) iat-skew (30 s ahead)     -- accepted
//   badsig none hs256 (HS256 keyed with the RSA public key's PEM) iss aud
//   azp-missing azp-wrong expired iat-future nonce no-nonce kid-unknown
//   use-enc alg-mismatch (kid of a JWKS key whose alg is RS512) no-sub
//   long-sub (256 bytes) unverified no-verified big (over 16 KiB)
//   azp-single-wrong (one aud, azp another client) jku jwk (the signing
//   key embedded in the header) x5u crit rsa1024 (a 1024-bit JWKS key)
//   private-jwk (a JWKS key published with its private parts)
//   garbage two-parts four-parts header-notjson payload-notjson
//   b64-bad-char b64-len1 (a part whose length is 1 mod 4) b64-padded
//   empty-sig                                    -- malformed, refused
//   huge (the token reply over 64 KiB) redirect (302 from the token
//   endpoint) error500 notjson                                 -- refused
//
// Environment: FAKE_SECRET (the client secret it expects), FAKE_CLIENT_ID
// (default husk-fake).  Prints {"port"} once it listens.
import http from "node:http";
import { createHash, randomBytes, generateKeyPairSync, KeyObject, sign as nodeSign } from "node:crypto";
import { SignJWT, generateKeyPair, exportJWK, exportSPKI } from "jose";

const SECRET = process.env.FAKE_SECRET || "fake-client-secret";
const CLIENT_ID = process.env.FAKE_CLIENT_ID || "husk-fake";
const rnd = (n = 18) => randomBytes(n).toString("base64url");
const now = () => Math.floor(Date.now() / 1000);

async function key(alg, kid, extra = {}) {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
  const pub = { ...(await exportJWK(publicKey)), kid, use: "sig", alg, ...extra };
  for (const k of Object.keys(pub)) if (pub[k] === undefined) delete pub[k];
  return { alg, kid, publicKey, privateKey, pub };
}
const K = {
  k1: await key("RS256", "k1"),
  e1: await key("ES256", "e1"),
  x1: await key("RS256", "x1", { use: "enc", alg: "RSA-OAEP" }), // an encryption key
  a1: await key("RS256", "a1", { alg: "RS512" }),                // says RS512
  k2: await key("RS256", "k2"),                                  // shown after rotate
  k9: await key("RS256", "k9"),                                  // never shown
};
const k1pem = await exportSPKI(K.k1.publicKey);
// Keys the JWKS shows that husk must not use: RSA of 1024 bits, and one
// published with its private parts.
function nodeKey(kid, bits, priv) {
  const { publicKey, privateKey } = generateKeyPairSync("rsa", { modulusLength: bits });
  const pub = { ...(priv ? privateKey : publicKey).export({ format: "jwk" }), kid, alg: "RS256", use: "sig" };
  return { kid, privateKey, pub };
}
K.w1 = nodeKey("w1", 1024, false);
K.p1 = nodeKey("p1", 2048, true);
// An RS256 JWS with any header, signed by any RSA key (jose would refuse
// some of these headers, or small keys).
function rawSign(header, payload, key) {
  const data = `${b64(header)}.${b64(payload)}`;
  const ko = key instanceof KeyObject ? key : KeyObject.from(key);
  return `${data}.${nodeSign("sha256", Buffer.from(data), ko).toString("base64url")}`;
}

const seen = { states: [], nonces: [], codes: [], id_tokens: [], access_tokens: [], secret: SECRET };
const tags = new Map();
function tagOf(t) {
  if (!tags.has(t)) tags.set(t, { mode: "good", sub: "fake-sub-1", email: "fia@fake.test", name: "Fia Fake",
    rotated: false, authorize: [], token: [], jwks_fetches: 0, discovery_fetches: 0, codes: new Map() });
  return tags.get(t);
}

const server = http.createServer((req, res) => {
  handle(req, res).catch((e) => {
    console.error("fake_idp.mjs:", e);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  });
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const PORT = server.address().port;
const BASE = `http://127.0.0.1:${PORT}`;

function send(res, status, body, headers = {}) {
  const b = typeof body === "string" ? body : JSON.stringify(body);
  res.writeHead(status, { "content-type": typeof body === "string" ? "text/plain" : "application/json",
    "cache-control": "no-store", ...headers });
  res.end(b);
}
const readBody = (req) => new Promise((r) => {
  const c = [];
  req.on("data", (x) => c.push(x));
  req.on("end", () => r(Buffer.concat(c).toString()));
});

function discovery(tag) {
  const iss = `${BASE}/${tag}`;
  const ep = tag.startsWith("plainhttp") ? `http://[::ffff:7f00:1]:${PORT}/${tag}` : iss;
  const d = {
    issuer: tag.startsWith("wrongiss") ? `${BASE}/someone-else` : iss,
    authorization_endpoint: `${ep}/authorize`,
    token_endpoint: `${ep}/token`,
    jwks_uri: `${ep}/jwks`,
    response_types_supported: ["code"],
    subject_types_supported: ["public"],
    id_token_signing_alg_values_supported: ["RS256", "ES256"],
    code_challenge_methods_supported: tag.startsWith("nos256") ? ["plain"] : ["S256"],
    token_endpoint_auth_methods_supported: tag.startsWith("post") ? ["client_secret_post"]
      : tag.startsWith("pub") ? ["none"] : ["client_secret_basic", "client_secret_post"],
    scopes_supported: ["openid", "email", "profile"],
  };
  if (tag.startsWith("bigdisc")) d.padding = "x".repeat(70 * 1024);
  return d;
}

async function sign(payload, k, alg = k.alg, kid = k.kid) {
  return new SignJWT(payload).setProtectedHeader({ alg, kid, typ: "JWT" }).sign(k.privateKey);
}
const b64 = (o) => Buffer.from(JSON.stringify(o)).toString("base64url");

async function idToken(tag, T, code) {
  const t = now();
  const p = { iss: `${BASE}/${tag}`, sub: T.sub, aud: code.client_id, iat: t, exp: t + 300,
              nonce: code.nonce, email: T.email, email_verified: true, name: T.name,
              preferred_username: T.email.split("@")[0] };
  switch (T.mode) {
    case "good": return sign(p, K.k1);
    case "es256": return sign(p, K.e1);
    case "rotate": T.rotated = true; return sign(p, K.k2);
    case "azp-right": return sign({ ...p, aud: [code.client_id, "other-client"], azp: code.client_id }, K.k1);
    case "exp-skew": return sign({ ...p, iat: t - 300, exp: t - 20 }, K.k1);
    case "iat-skew": return sign({ ...p, iat: t + 30 }, K.k1);
    case "badsig": {
      const j = await sign(p, K.k1);
      const [h, pl, s] = j.split(".");
      const sb = Buffer.from(s, "base64url");
      sb[10] ^= 0x55;
      return `${h}.${pl}.${sb.toString("base64url")}`;
    }
    case "none": return `${b64({ alg: "none", kid: "k1", typ: "JWT" })}.${b64(p)}.`;
    case "hs256":
      return new SignJWT(p).setProtectedHeader({ alg: "HS256", kid: "k1", typ: "JWT" })
        .sign(new TextEncoder().encode(k1pem));
    case "iss": return sign({ ...p, iss: `${BASE}/someone-else` }, K.k1);
    case "aud": return sign({ ...p, aud: "other-client" }, K.k1);
    case "azp-missing": return sign({ ...p, aud: [code.client_id, "other-client"] }, K.k1);
    case "azp-wrong": return sign({ ...p, aud: [code.client_id, "other-client"], azp: "other-client" }, K.k1);
    case "expired": return sign({ ...p, iat: t - 900, exp: t - 600 }, K.k1);
    case "iat-future": return sign({ ...p, iat: t + 3600, exp: t + 7200 }, K.k1);
    case "nonce": return sign({ ...p, nonce: "not-" + rnd(8) }, K.k1);
    case "no-nonce": { const q = { ...p }; delete q.nonce; return sign(q, K.k1); }
    case "kid-unknown": return sign(p, K.k9);
    case "use-enc": return sign(p, K.x1, "RS256");
    case "alg-mismatch": return sign(p, K.a1, "RS256");
    case "no-sub": { const q = { ...p }; delete q.sub; return sign(q, K.k1); }
    case "long-sub": return sign({ ...p, sub: "s".repeat(256) }, K.k1);
    case "unverified": return sign({ ...p, email_verified: false }, K.k1);
    case "no-verified": { const q = { ...p }; delete q.email_verified; return sign(q, K.k1); }
    case "azp-single-wrong": return sign({ ...p, azp: "other-client" }, K.k1);
    case "no-kid": return rawSign({ alg: "RS256", typ: "JWT" }, p, K.k1.privateKey);
    case "jku": return rawSign({ alg: "RS256", kid: "k1", jku: `${BASE}/${tag}/jwks` }, p, K.k1.privateKey);
    case "jwk": return rawSign({ alg: "RS256", kid: "k9", jwk: K.k9.pub }, p, K.k9.privateKey);
    case "x5u": return rawSign({ alg: "RS256", kid: "k1", x5u: `${BASE}/${tag}/cert.pem` }, p, K.k1.privateKey);
    case "crit": return rawSign({ alg: "RS256", kid: "k1", crit: ["x-husk"], "x-husk": 1 }, p, K.k1.privateKey);
    case "rsa1024": return rawSign({ alg: "RS256", kid: "w1" }, p, K.w1.privateKey);
    case "private-jwk": return rawSign({ alg: "RS256", kid: "p1" }, p, K.p1.privateKey);
    // Malformed: husk must refuse them without falling over.
    case "garbage": return "not-a-jwt";
    case "two-parts": return `${b64({ alg: "RS256", kid: "k1" })}.${b64(p)}`;
    case "four-parts": return `${await sign(p, K.k1)}.${b64({})}`;
    case "header-notjson": { const j = (await sign(p, K.k1)).split("."); return `${Buffer.from("not json").toString("base64url")}.${j[1]}.${j[2]}`; }
    case "payload-notjson": {
      const data = `${b64({ alg: "RS256", kid: "k1" })}.${Buffer.from("[1,2").toString("base64url")}`;
      return `${data}.${nodeSign("sha256", Buffer.from(data), KeyObject.from(K.k1.privateKey)).toString("base64url")}`;
    }
    case "b64-bad-char": { const j = (await sign(p, K.k1)).split("."); return `${j[0]}.${j[1].slice(0, 10)}*%$${j[1].slice(10)}.${j[2]}`; }
    case "b64-len1": { const j = (await sign(p, K.k1)).split("."); let x = j[2]; while (x.length % 4 !== 1) x += "A"; return `${j[0]}.${j[1]}.${x}`; }
    case "b64-padded": { const j = (await sign(p, K.k1)).split("."); return `${j[0]}==.${j[1]}=.${j[2]}==`; }
    case "empty-sig": { const j = (await sign(p, K.k1)).split("."); return `${j[0]}.${j[1]}.`; }
    case "big": return sign({ ...p, groups: Array.from({ length: 600 }, (_, i) => `group-number-${i}-of-many`) }, K.k1);
    default: return sign(p, K.k1);
  }
}

// JWKS documents husk must refuse without falling over (tags badjwks-<what>).
function badJwks(res, what) {
  const k1 = K.k1.pub, e1 = K.e1.pub;
  switch (what) {
    case "b64": return send(res, 200, { keys: [{ ...k1, n: k1.n.slice(0, 20) + "+/=" + k1.n.slice(20) }] });
    case "notjson": return send(res, 200, "{\"keys\": [ {");
    case "big": return send(res, 200, { keys: [k1], padding: "z".repeat(70 * 1024) });
    case "notarray": return send(res, 200, { keys: { k1 } });
    case "emptyn": return send(res, 200, { keys: [{ ...k1, n: "" }] });
    case "offcurve": return send(res, 200, { keys: [{ ...e1, x: randomBytes(32).toString("base64url"), y: randomBytes(32).toString("base64url") }] });
    case "404": return send(res, 404, { error: "not_found" });
    default: return send(res, 200, { keys: [] });
  }
}

async function handle(req, res) {
  const u = new URL(req.url, BASE);
  const parts = u.pathname.split("/").filter(Boolean);
  if (parts[0] === "_admin") {
    if (parts[1] === "seen") return send(res, 200, seen);
    const T = tagOf(parts[1]);
    if (req.method === "POST") {
      for (const k of ["mode", "sub", "email", "name"]) if (u.searchParams.has(k)) T[k] = u.searchParams.get(k);
      return send(res, 200, { mode: T.mode });
    }
    const { codes, ...rest } = T;
    return send(res, 200, rest);
  }
  const tag = parts[0], rest = "/" + parts.slice(1).join("/");
  if (!tag || !/^[a-z0-9-]+$/.test(tag)) return send(res, 404, { error: "not_found" });
  const T = tagOf(tag);

  if (req.method === "GET" && rest === "/.well-known/openid-configuration") {
    T.discovery_fetches++;
    if (tag.startsWith("redirdisc")) {
      res.writeHead(302, { location: `${BASE}/good/.well-known/openid-configuration` });
      return res.end();
    }
    return send(res, 200, discovery(tag));
  }
  if (req.method === "GET" && rest === "/jwks") {
    T.jwks_fetches++;
    if (tag.startsWith("badjwks-")) return badJwks(res, tag.slice(8));
    const keys = [K.k1.pub, K.e1.pub, K.x1.pub, K.a1.pub, K.w1.pub, K.p1.pub];
    if (T.rotated || T.mode === "rotate") keys.push(K.k2.pub);
    return send(res, 200, { keys });
  }
  if (req.method === "GET" && rest === "/authorize") {
    const q = Object.fromEntries(u.searchParams);
    const bad = [];
    if (q.response_type !== "code") bad.push("response_type");
    if (q.client_id !== CLIENT_ID) bad.push("client_id");
    if (!q.redirect_uri) bad.push("redirect_uri");
    if (!q.state) bad.push("state");
    if (!q.nonce) bad.push("nonce");
    if (!/^[A-Za-z0-9_-]{43}$/.test(q.code_challenge || "")) bad.push("code_challenge");
    if (q.code_challenge_method !== "S256") bad.push("code_challenge_method");
    if (!(q.scope || "").split(" ").includes("openid")) bad.push("scope");
    T.authorize.push({ ...q, bad });
    if (q.state) seen.states.push(q.state);
    if (q.nonce) seen.nonces.push(q.nonce);
    if (bad.length || !q.redirect_uri) return send(res, 400, `bad authorization request: ${bad.join(" ")}`);
    const code = "fic_" + rnd();
    seen.codes.push(code);
    T.codes.set(code, { ...q, used: false });
    const to = new URL(q.redirect_uri);
    to.searchParams.set("code", code);
    to.searchParams.set("state", q.state);
    res.writeHead(302, { location: to.href, "cache-control": "no-store" });
    return res.end();
  }
  if (req.method === "POST" && (rest === "/token" || rest === "/token2")) {
    const f = new URLSearchParams(await readBody(req));
    const rec = { auth: "none", grant_type: f.get("grant_type"), errors: [], mode: T.mode, at: rest };
    T.token.push(rec);
    const ah = req.headers.authorization || "";
    let cid = f.get("client_id"), csec = f.get("client_secret");
    if (/^Basic /i.test(ah)) {
      rec.auth = "basic";
      const [a, b] = Buffer.from(ah.slice(6), "base64").toString().split(":");
      cid = decodeURIComponent(a.replace(/\+/g, " "));
      csec = decodeURIComponent((b || "").replace(/\+/g, " "));
      if (f.has("client_secret")) rec.errors.push("secret in the body too");
    } else if (csec !== null) rec.auth = "post";
    const wantAuth = tag.startsWith("pub") ? "none" : tag.startsWith("post") ? "post" : "basic";
    if (rec.auth !== wantAuth) rec.errors.push(`auth ${rec.auth}, wanted ${wantAuth}`);
    if (cid !== CLIENT_ID) rec.errors.push("client_id");
    if (wantAuth !== "none" && csec !== SECRET) rec.errors.push("client_secret");
    const code = T.codes.get(f.get("code") || "");
    if (f.get("grant_type") !== "authorization_code") rec.errors.push("grant_type");
    if (!code) rec.errors.push("unknown code");
    else {
      if (code.used) rec.errors.push("code used twice");
      code.used = true;
      if (f.get("redirect_uri") !== code.redirect_uri) rec.errors.push("redirect_uri");
      const v = f.get("code_verifier") || "";
      if (createHash("sha256").update(v).digest("base64url") !== code.code_challenge) rec.errors.push("code_verifier");
    }
    if (rec.errors.length) return send(res, rec.errors.some((e) => /auth|client/.test(e)) ? 401 : 400,
      { error: rec.errors.some((e) => /auth|client/.test(e)) ? "invalid_client" : "invalid_grant" });
    if (T.mode === "redirect" && rest === "/token") {
      res.writeHead(302, { location: `${BASE}/${tag}/token2` });
      return res.end();
    }
    if (T.mode === "error500") return send(res, 500, { error: "server_error" });
    if (T.mode === "slow") await new Promise((r) => setTimeout(r, 3000));
    if (T.mode === "notjson") return send(res, 200, "<html>not json</html>");
    const id_token = await idToken(tag, T, code);
    const access_token = "fat_" + rnd();
    seen.id_tokens.push(id_token);
    seen.access_tokens.push(access_token);
    rec.id_token_bytes = id_token.length;
    const body = { access_token, token_type: "Bearer", expires_in: 300, id_token };
    if (T.mode === "huge") body.padding = "y".repeat(70 * 1024);
    return send(res, 200, body);
  }
  return send(res, 404, { error: "not_found" });
}

console.log(JSON.stringify({ port: PORT }));
for (const s of ["SIGTERM", "SIGINT"]) process.on(s, () => process.exit(0));
