#!/usr/bin/env python3
"""A whole single sign-on against a small fake provider on loopback, without
a browser (tests/serve/oidc_config.sh): the provider's discovery document,
JWKS, authorization and token endpoints, and ID tokens it signs (RS256,
python3-cryptography) -- right ones, and ones husk must refuse.

  oidc_smoke.py URL ADMIN_KEY TENANT_ID TENANT_NAME TENANT_KEY

Prints one JSON object: {"check name": true|false, ..., "_notes": [...]}.
The real provider (oidc-provider) and a hostile one are tests/oauth/'s."""
import base64
import hashlib
import html
import http.client
import http.server
import json
import os
import re
import sys
import threading
import time
import urllib.parse

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

URL, ADMIN, TID, TNAME, TKEY = sys.argv[1:6]
SECRET = "smoke-secret-" + os.urandom(8).hex()
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER = rsa.generate_private_key(public_exponent=65537, key_size=2048)
results = {}
notes = []


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def jwk(k, kid):
    n = k.public_key().public_numbers()
    return {"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
            "n": b64u(n.n.to_bytes((n.n.bit_length() + 7) // 8, "big")),
            "e": b64u(n.e.to_bytes(3, "big"))}


def sign(claims, key=KEY, kid="k1", alg="RS256"):
    h = b64u(json.dumps({"alg": alg, "kid": kid, "typ": "JWT"}).encode())
    p = b64u(json.dumps(claims).encode())
    if alg == "none":
        return h + "." + p + "."
    sig = key.sign((h + "." + p).encode(), padding.PKCS1v15(), hashes.SHA256())
    return h + "." + p + "." + b64u(sig)


# What the next token endpoint call answers: a function of (claims) -> id_token.
MODE = {"token": lambda c: sign(c)}
CODES = {}
SEEN = {"basic": None, "form": None}


class IdP(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def reply(self, status, body, ctype="application/json", headers=()):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        if u.path == "/.well-known/openid-configuration":
            self.reply(200, json.dumps({
                "issuer": ISS, "authorization_endpoint": ISS + "/auth",
                "token_endpoint": ISS + "/token", "jwks_uri": ISS + "/jwks",
                "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic"]}))
        elif u.path == "/jwks":
            self.reply(200, json.dumps({"keys": [jwk(KEY, "k1")]}))
        elif u.path == "/auth":
            q = dict(urllib.parse.parse_qsl(u.query))
            code = "code-" + os.urandom(8).hex()
            CODES[code] = q
            loc = q["redirect_uri"] + "?" + urllib.parse.urlencode({"code": code, "state": q["state"]})
            self.reply(302, "", headers=[("Location", loc)])
        else:
            self.reply(404, "{}")

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        form = dict(urllib.parse.parse_qsl(self.rfile.read(n).decode()))
        SEEN["basic"] = self.headers.get("Authorization")
        SEEN["form"] = form
        q = CODES.pop(form.get("code"), None)
        want_basic = "Basic " + base64.b64encode(b"husk-rp:" + urllib.parse.quote(SECRET, safe="").encode()).decode()
        if not q or SEEN["basic"] != want_basic:
            self.reply(400, json.dumps({"error": "invalid_grant"}))
            return
        ch = b64u(hashlib.sha256(form.get("code_verifier", "").encode()).digest())
        if ch != q.get("code_challenge") or form.get("redirect_uri") != q.get("redirect_uri"):
            self.reply(400, json.dumps({"error": "invalid_grant"}))
            return
        now = int(time.time())
        claims = {"iss": ISS, "sub": "sub-jane-1", "aud": "husk-rp", "exp": now + 300, "iat": now,
                  "nonce": q.get("nonce"), "email": "Jane@Example.com", "email_verified": True,
                  "name": "Jane Doe"}
        self.reply(200, json.dumps({"access_token": "at", "token_type": "Bearer",
                                    "id_token": MODE["token"](claims)}))


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), IdP)
ISS = "http://127.0.0.1:%d" % srv.server_address[1]
threading.Thread(target=srv.serve_forever, daemon=True).start()

hu = urllib.parse.urlsplit(URL)


def req(method, path, body=None, headers=None, base=None):
    u = urllib.parse.urlsplit(base) if base else hu
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read().decode(errors="replace")
    return r.status, {k.lower(): v for k, v in r.getheaders()}, data


def api(method, path, key, body=None):
    st, hd, data = req(method, path, json.dumps(body) if body is not None else None,
                       {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    try:
        return st, json.loads(data)
    except ValueError:
        return st, None


def fields(html):
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', html))


st, j = api("PUT", "/v1/tenants/%s/oidc" % TID, ADMIN,
            {"issuer": ISS, "client_id": "husk-rp", "client_secret": SECRET, "display_name": "Smoke IdP"})
results["configured"] = st == 200
st, u = api("POST", "/v1/users", TKEY, {"name": "jane@example.com", "role": "member", "display_name": "Jane"})
results["user made"] = st == 201
JANE = u["id"] if u else ""
st, _, data = req("POST", "/oauth/register", json.dumps(
    {"client_name": "Smoke client", "redirect_uris": ["http://127.0.0.1:9/cb"], "token_endpoint_auth_method": "none"}),
    {"Content-Type": "application/json"})
CLIENT = json.loads(data)["client_id"]
VERIFIER = b64u(os.urandom(32))
CHALLENGE = b64u(hashlib.sha256(VERIFIER.encode()).digest())


def start():
    """The sign-in page, then action=sso: (provider URL, binding cookie)."""
    q = {"response_type": "code", "client_id": CLIENT, "redirect_uri": "http://127.0.0.1:9/cb",
         "code_challenge": CHALLENGE, "code_challenge_method": "S256", "state": "client-state",
         "scope": "sandbox sandbox:read storage:read", "resource": URL + "/v1"}
    st, hd, body = req("GET", "/oauth/authorize?" + urllib.parse.urlencode(q), headers={"Accept": "text/html"})
    ck = hd.get("set-cookie", "").split(";")[0]
    f = fields(body)
    f.update({"organization": TNAME, "action": "sso"})
    st, hd, body = req("POST", "/oauth/authorize", urllib.parse.urlencode(f),
                       {"Content-Type": "application/x-www-form-urlencoded", "Cookie": ck})
    m = re.search(r'http-equiv="refresh" content="0;url=([^"]+)"', body)
    loc = html.unescape(m.group(1)) if m else ""
    return st, loc, hd.get("set-cookie", "").split(";")[0]


def provider(loc):
    """The provider's /auth: where it sends the browser back."""
    p = urllib.parse.urlsplit(loc)
    st, hd, _ = req("GET", p.path + "?" + p.query, base=ISS)
    return hd.get("location", "")


def callback(back, cookie):
    p = urllib.parse.urlsplit(back)
    return req("GET", p.path + "?" + p.query, headers={"Cookie": cookie} if cookie else {})


# ---- the whole flow -----------------------------------------------------------------------
st, loc, cookie = start()
results["sso start: a page that moves on to the provider"] = st == 200 and loc.startswith(ISS + "/auth?")
back = provider(loc)
results["the provider sends the browser to the tenant's /oauth/callback/<id>"] = back.startswith(URL + "/oauth/callback/t_")
st, hd, page = callback(back, cookie)
results["callback: the consent page (200)"] = st == 200 and "Allow" in page
if st != 200:
    notes.append("callback: %d %s" % (st, page[:300]))
results["consent page names the person and the provider"] = "Jane" in page and "Smoke IdP" in page
results["the secret went to the token endpoint as Basic"] = (SEEN["basic"] or "").startswith("Basic ")
results["the code_verifier went to the token endpoint"] = bool((SEEN["form"] or {}).get("code_verifier"))
f = fields(page)
st2, hd2, _ = req("POST", "/oauth/callback", urllib.parse.urlencode({**f, "action": "allow"}),
                  {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie})
cb = hd2.get("location", "")
results["Allow: 302 to the client with a code"] = st2 == 302 and cb.startswith("http://127.0.0.1:9/cb?code=")
results["... with the client's state and iss"] = "state=client-state" in cb and "iss=" in cb
code = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(cb).query)).get("code", "")
st3, _, data = req("POST", "/oauth/token", urllib.parse.urlencode({
    "grant_type": "authorization_code", "code": code, "redirect_uri": "http://127.0.0.1:9/cb",
    "client_id": CLIENT, "code_verifier": VERIFIER}), {"Content-Type": "application/x-www-form-urlencoded"})
tok = json.loads(data).get("access_token", "") if st3 == 200 else ""
results["the code is exchanged for tokens"] = bool(tok)
st, u = api("GET", "/v1/users/%s" % JANE, TKEY)
results["the user is linked (idp_subject)"] = st == 200 and u.get("idp_subject") == "sub-jane-1"
st, _ = api("GET", "/v1/sandboxes", tok)
results["the token works"] = st == 200
st2, _, _ = req("POST", "/oauth/callback", urllib.parse.urlencode({**f, "action": "allow"}),
                {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie})
results["the consent cannot be used twice"] = st2 == 400
st, _, _ = callback(back, cookie)
results["the same callback again: refused"] = st == 400


# ---- refusals ------------------------------------------------------------------------------
def refused(name, token_fn, want_reason, cookie_fn=None):
    MODE["token"] = token_fn
    st, loc, ck = start()
    back = provider(loc)
    st, _, page = callback(back, cookie_fn(ck) if cookie_fn else ck)
    results[name + ": 400"] = st == 400 and "Allow" not in page
    REASONS.append(want_reason)


REASONS = []
refused("alg none", lambda c: sign(c, alg="none"), "sso bad_alg")
refused("a key not in the JWKS, under its kid", lambda c: sign(c, key=OTHER), "sso bad_signature")
refused("an unknown kid", lambda c: sign(c, kid="k9"), "sso unknown_key")
refused("another nonce", lambda c: sign({**c, "nonce": "x"}), "sso bad_nonce")
refused("another issuer", lambda c: sign({**c, "iss": ISS + "/x"}), "sso bad_issuer")
refused("another audience", lambda c: sign({**c, "aud": "other"}), "sso bad_audience")
refused("expired", lambda c: sign({**c, "exp": int(time.time()) - 120}), "sso expired")
refused("email not verified", lambda c: sign({**c, "email_verified": False, "sub": "sub-2"}),
        "sso unverified_email")
refused("nobody of that name", lambda c: sign({**c, "email": "nobody@example.com", "sub": "sub-3"}),
        "sso no_user")
refused("another subject for a linked user's email",
        lambda c: sign({**c, "sub": "sub-intruder"}), "sso no_user")
MODE["token"] = lambda c: sign(c)
refused("another browser's callback (no cookie)", lambda c: sign(c), "sso bad_binding", lambda ck: "")
refused("another browser's callback (its own cookie)", lambda c: sign(c), "sso bad_binding",
        lambda ck: ck.split("=")[0] + "=" + "ab" * 32)

st, a = api("GET", "/v1/audit?limit=500", ADMIN)
recs = a.get("audit", a.get("records", [])) if isinstance(a, dict) else []
text = json.dumps(a)
for r in REASONS:
    results["audited: " + r] = r in text
results["audited: oauth.sign_in ok sso"] = any(
    x.get("action") == "oauth.sign_in" and x.get("outcome") == "ok" and x.get("detail", "").startswith("sso")
    for x in recs)
st, _ = api("DELETE", "/v1/sandboxes/sb_none", tok)
st, a = api("GET", "/v1/audit?limit=500", ADMIN)
recs = a.get("audit", a.get("records", [])) if isinstance(a, dict) else []
results["a linked user's token's records carry idp_subject"] = any(
    x.get("idp_subject") == "sub-jane-1" and x.get("action") == "sandbox.delete" for x in recs)
results["the secret is in no audit record"] = SECRET not in json.dumps(a)
results["_notes"] = notes
results["_secret"] = SECRET
print(json.dumps(results))
