// A real OpenID Connect provider for tests/oauth/oidc.sh: panva's
// oidc-provider on 127.0.0.1 (a free port), issuer http://127.0.0.1:PORT,
// with its development interactions (a login page that takes any login and
// any password) and one confidential client.  The person's account is the
// login typed: `alice@acme.test` gets
//   sub                 idp-<first 20 hex digits of SHA-256("alice@acme.test")>
//   email               alice@acme.test, email_verified true
//   name                "Alice Example" (the local part, capitalized)
//   preferred_username  alice
// in the ID token itself (conformIdTokenClaims off), and consent to
// `openid email profile` is given without a page, so the person sees only
// the login form.
//
// Environment:
//   CLIENT_ID, CLIENT_SECRET  the client husk is (client_secret_basic)
//   REDIRECT_URIS             space-separated: <husk issuer>/oauth/callback
// Prints one JSON line {"issuer","port"} on stdout once it listens.
// GET /_test/seen: what passed through (states, nonces, codes, ID tokens
// of the husk client), for the suite to look for in husk's log, replies
// and audit: they must never be there.
import http from "node:http";
import { createHash, randomBytes } from "node:crypto";
import { generateKeyPair, exportJWK } from "jose";
import Provider from "oidc-provider";

const CLIENT_ID = process.env.CLIENT_ID || "husk";
const CLIENT_SECRET = process.env.CLIENT_SECRET;
const REDIRECT_URIS = (process.env.REDIRECT_URIS || "").split(/\s+/).filter(Boolean);
if (!CLIENT_SECRET || !REDIRECT_URIS.length) {
  console.error("idp.mjs: CLIENT_SECRET and REDIRECT_URIS are needed");
  process.exit(2);
}

export const subOf = (id) => "idp-" + createHash("sha256").update(id).digest("hex").slice(0, 20);
const nameOf = (id) => {
  const l = id.split("@")[0];
  return l.charAt(0).toUpperCase() + l.slice(1) + " Example";
};

const seen = { states: [], nonces: [], codes: [], id_tokens: [], token_requests: [] };
let provider;
const server = http.createServer((req, res) => {
  const u = new URL(req.url, "http://127.0.0.1");
  if (u.pathname === "/_test/seen") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(seen));
    return;
  }
  if (u.pathname === "/auth") {
    const q = u.searchParams;
    if (q.get("state")) seen.states.push(q.get("state"));
    if (q.get("nonce")) seen.nonces.push(q.get("nonce"));
  }
  // The code, where the provider sends the browser back to husk.
  const setHeader = res.setHeader.bind(res);
  res.setHeader = (k, v) => {
    if (String(k).toLowerCase() === "location") {
      try {
        const c = new URL(String(v)).searchParams.get("code");
        if (c) seen.codes.push(c);
      } catch {}
    }
    return setHeader(k, v);
  };
  // The ID tokens the token endpoint sends.
  if (u.pathname === "/token" && req.method === "POST") {
    const parts = [];
    const write = res.write.bind(res), end = res.end.bind(res);
    res.write = (c, ...a) => { if (c) parts.push(Buffer.from(c)); return write(c, ...a); };
    res.end = (c, ...a) => {
      if (c && typeof c !== "function") parts.push(Buffer.from(c));
      try {
        const j = JSON.parse(Buffer.concat(parts).toString());
        if (j.id_token) seen.id_tokens.push(j.id_token);
      } catch {}
      return end(c, ...a);
    };
  }
  provider.callback()(req, res);
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const port = server.address().port;
const issuer = `http://127.0.0.1:${port}`;

const { privateKey } = await generateKeyPair("RS256", { extractable: true });
const jwk = { ...(await exportJWK(privateKey)), kid: "idp-rs256", alg: "RS256", use: "sig" };

provider = new Provider(issuer, {
  clients: [{
    client_id: CLIENT_ID,
    client_secret: CLIENT_SECRET,
    redirect_uris: REDIRECT_URIS,
    grant_types: ["authorization_code"],
    response_types: ["code"],
    token_endpoint_auth_method: "client_secret_basic",
    subject_type: "pairwise",
  }],
  jwks: { keys: [jwk] },
  cookies: { keys: [randomBytes(32).toString("hex")] },
  claims: {
    openid: ["sub"],
    email: ["email", "email_verified"],
    profile: ["name", "preferred_username"],
  },
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  features: { devInteractions: { enabled: true } },
  // The account id is the login typed; the client sees sub = subOf(login)
  // (a "pairwise" subject: not the email, so that a relying party that
  // mixed them up would show it).
  subjectTypes: ["public", "pairwise"],
  async pairwiseIdentifier(ctx, accountId) { return subOf(accountId); },
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        return { sub: id, email: id, email_verified: true, name: nameOf(id),
                 preferred_username: id.split("@")[0] };
      },
    };
  },
  // Consent without a page: the person sees only the login form.
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId,
                                                 accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope("openid email profile");
    await grant.save();
    return grant;
  },
});
// How husk authenticated and what it sent, for each code exchanged.
provider.on("grant.success", (ctx) => {
  const b = ctx.oidc.body || {};
  seen.token_requests.push({ basic: /^Basic /i.test(ctx.headers.authorization || ""),
    has_verifier: !!b.code_verifier, secret_in_body: "client_secret" in b, grant_type: b.grant_type,
    redirect_uri: b.redirect_uri });
});
provider.on("server_error", (ctx, err) => console.error("idp.mjs: server_error", err));
// Say why a request was refused (on stderr, for the suite's diagnostics).
for (const ev of ["authorization.error", "grant.error", "introspection.error"])
  provider.on(ev, (ctx, err) => console.error(`idp.mjs: ${ev}: ${err.message} ${err.error_description || ""}`));

console.log(JSON.stringify({ issuer, port }));
for (const s of ["SIGTERM", "SIGINT"]) process.on(s, () => process.exit(0));
