#!/usr/bin/env python3
"""Single sign-on through a tenant's OpenID Connect provider, without a
browser, against a hostile provider (tests/oauth/idp/fake_idp.mjs):
docs/oauth.md, "Signing in with the organization's identity provider" is
the contract.  Prints TAP lines; run by tests/oauth/oidc.sh.

Every request goes to 127.0.0.1 (husk and the fake provider), from loopback
source addresses 127.0.0.x: a pending single sign-on counts per address
(20 in 15 minutes), so each scenario comes from its own address, as two
people would.  The cookie jar is kept by hand: the provider's redirect back
is a cross-site navigation, so the callback and the consent form carry only
the `husk_sso` cookie (SameSite=Lax), never the sign-in page's
SameSite=Strict `husk_oauth`.

Environment:
  URL      husk serve (http://127.0.0.1:PORT): the issuer
  ADMIN    the operator's admin key
  FAKE     the fake provider's base (http://127.0.0.1:PORT)
  SECRET   the client secret the fake provider expects (client husk-fake)
  OUT      a directory: bodies.txt (every reply body husk sent), hostile.json
           (the refusals' audit details)
  BROWSER_DONE  a file that appears when the browser's sign-ins are over
           (the test of fetches at once waits for it)
"""
import base64
import hashlib
import html
import html.parser
import http.client
import json
import os
import re
import sys
import time
import urllib.parse

URL = os.environ["URL"].rstrip("/")
ADMIN = os.environ["ADMIN"]
FAKE = os.environ["FAKE"].rstrip("/")
SECRET = os.environ["SECRET"]
OUT = os.environ.get("OUT", "/tmp")
FAKE_CLIENT = "husk-fake"
REDIRECT = "http://127.0.0.1:9/cb"  # the MCP client's; never connected to
BODIES = open(os.path.join(OUT, "bodies.txt"), "a")
T0 = time.time()

# ---- TAP ---------------------------------------------------------------------------
N = 0
FAILED = 0


def ok(name):
    global N
    N += 1
    print(f"ok {N} - oidc_hostile: {name}", flush=True)


def not_ok(name, why=None):
    global N, FAILED
    N += 1
    FAILED += 1
    print(f"not ok {N} - oidc_hostile: {name}", flush=True)
    if why:
        for line in str(why).splitlines()[:10]:
            print("#   " + line[:300], flush=True)


def check(name, cond, why=None):
    (ok if cond else not_ok)(name, *([] if cond else [why]))
    return cond


def section(name, fn):
    """One part of the run: an exception in it is a failure, not the end."""
    import traceback
    try:
        fn()
    except Exception:
        not_ok(f"{name}: ran to its end", traceback.format_exc()[-1500:])


def note(s):
    print("# " + str(s)[:600], flush=True)


# ---- HTTP ---------------------------------------------------------------------------
def keep_body(method, path, status, text):
    """Every reply body husk sends, for the search for secrets at the end:
    not the redirects, nor the page that starts a single sign-on (it is
    the authorization request to the provider, carrying state and nonce to
    the browser that asked, as a 303's Location would)."""
    BODIES.write(f"--- {method} {path.split('?')[0]} {status}\n{text}\n")


def request(base, method, path, body=None, headers=None, src=None, keep=True):
    u = urllib.parse.urlsplit(base)
    assert u.hostname == "127.0.0.1", base  # nothing but loopback, ever
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30,
                                   source_address=(src, 0) if src else None)
    c.request(method, path, body=body, headers=dict(headers or {}))
    r = c.getresponse()
    data = r.read()
    hdrs = {}
    for k, v in r.getheaders():
        k = k.lower()
        hdrs[k] = hdrs[k] + "\n" + v if k in hdrs else v
    c.close()
    text = data.decode("utf-8", "replace")
    if keep and base == URL and not 300 <= r.status < 400:
        keep_body(method, path, r.status, text)
    return r.status, hdrs, text


def api(method, path, body=None, key=ADMIN):
    h = {"Authorization": "Bearer " + key}
    if body is not None:
        h["Content-Type"] = "application/json"
        body = json.dumps(body)
    st, hd, text = request(URL, method, path, body, h)
    try:
        j = json.loads(text) if text else None
    except ValueError:
        j = None
    return st, j, text


def fake(method, path):
    st, hd, text = request(FAKE, method, path)
    return json.loads(text)


class Page(html.parser.HTMLParser):
    """The hidden fields, the buttons (name, value, text) and the forms' actions."""

    def __init__(self, text):
        super().__init__()
        self.fields, self.buttons, self.forms, self._btn = {}, [], [], None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "input" and a.get("type") == "hidden":
            self.fields[a.get("name")] = a.get("value", "")
        elif tag == "input" and a.get("type") == "submit":
            self.buttons.append({"name": a.get("name"), "value": a.get("value", ""), "text": a.get("value", "")})
        elif tag == "button":
            self._btn = {"name": a.get("name"), "value": a.get("value", ""), "text": ""}
            self.buttons.append(self._btn)
        elif tag == "form":
            self.forms.append((a.get("method") or "get").lower() + " " + (a.get("action") or ""))

    def handle_endtag(self, tag):
        if tag == "button":
            self._btn = None

    def handle_data(self, data):
        if self._btn is not None:
            self._btn["text"] += data


def cookie_of(hdrs, name):
    """NAME=VALUE of a Set-Cookie, and the whole header line."""
    for line in (hdrs.get("set-cookie") or "").split("\n"):
        if line.split("=", 1)[0].strip() == name:
            return line.split(";")[0].strip(), line
    return None, None


def qs(url):
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).items()}


def pkce():
    v = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
    return v, base64.urlsafe_b64encode(hashlib.sha256(v.encode()).digest()).rstrip(b"=").decode()


def text_of(body):
    return html.unescape(re.sub(r"<[^>]*>", " ", body))


# ---- one registered MCP client (public, PKCE) ---------------------------------------
st, hd, text = request(URL, "POST", "/oauth/register", json.dumps(
    {"redirect_uris": [REDIRECT], "client_name": "husk OIDC hostile test"}), {"Content-Type": "application/json"})
CLIENT = json.loads(text).get("client_id") if st == 201 else None
if not check("a client registers (POST /oauth/register 201)", CLIENT, f"{st} {text[:200]}"):
    sys.exit(1)


# ---- the steps of a single sign-on ---------------------------------------------------
def moves_on(st, hd, body):
    """Where a started single sign-on sends the browser: a 200 page that
    moves on at once (meta refresh, and a Continue link, docs/oauth.md), or
    a 303.  {started, location, refresh, continue}"""
    r = {"started": False, "location": hd.get("location") if st == 303 else None, "refresh": None, "continue": None}
    if st == 200:
        m = re.search(r'<a\b[^>]*\bid="continue"[^>]*>', body)
        h = re.search(r'\bhref="([^"]*)"', m.group(0)) if m else None
        r["continue"] = html.unescape(h.group(1)) if h else None
        mr = re.search(r'<meta\b[^>]*http-equiv="refresh"[^>]*>', body, re.I)
        c = re.search(r'content="0;\s*url=([^"]*)"', mr.group(0), re.I) if mr else None
        r["refresh"] = html.unescape(c.group(1)) if c else None
        r["location"] = r["continue"] or r["refresh"]
    r["started"] = bool(r["location"])
    return r


def start(org, src, scope=None, resource=None):
    """The sign-in page, then its form with action=sso: {status, location,
    sso (cookie), sso_line, verifier, state, body}."""
    verifier, challenge = pkce()
    state = "client-state-" + base64.urlsafe_b64encode(os.urandom(6)).decode()
    q = {"response_type": "code", "client_id": CLIENT, "redirect_uri": REDIRECT,
         "code_challenge": challenge, "code_challenge_method": "S256", "state": state}
    if scope:
        q["scope"] = scope
    if resource:
        q["resource"] = resource
    st, hd, body = request(URL, "GET", "/oauth/authorize?" + urllib.parse.urlencode(q), None,
                           {"Accept": "text/html"}, src)
    r = {"page_status": st, "verifier": verifier, "state": state}
    if st != 200:
        r.update(status=None, body=body)
        return r
    oauth_cookie = (hd.get("set-cookie") or "").split(";")[0]
    f = dict(Page(body).fields)
    f.update({"organization": org, "username": "", "password": "", "action": "sso"})
    st, hd, body = request(URL, "POST", "/oauth/authorize", urllib.parse.urlencode(f),
                           {"Content-Type": "application/x-www-form-urlencoded", "Accept": "text/html",
                            "Cookie": oauth_cookie}, src, keep=False)
    r.update(status=st, body=body, headers=hd, form=f, oauth_cookie=oauth_cookie)
    r.update(moves_on(st, hd, body))
    if not r["started"]:
        keep_body("POST", "/oauth/authorize", st, body)
    r["sso"], r["sso_line"] = cookie_of(hd, "husk_sso")
    if not r["sso"]:
        r["sso"], r["sso_line"] = cookie_of(hd, "__Host-husk_sso")
    return r


def at_provider(r):
    """The browser at the provider's authorization endpoint (only the fake
    one, on 127.0.0.1): its redirect back to husk."""
    loc = r.get("location") or ""
    if not loc.startswith(FAKE + "/"):
        raise AssertionError(f"not a redirect to the fake provider: {loc[:200]}")
    u = urllib.parse.urlsplit(loc)
    st, hd, body = request(FAKE, "GET", u.path + "?" + u.query)
    if st != 302:
        raise AssertionError(f"the provider refused the authorization request: {st} {body[:200]}")
    back = hd["location"]
    if not back.startswith(URL + "/oauth/callback/"):
        raise AssertionError(f"the provider sends the browser elsewhere: {back[:200]}")
    r["callback"] = back[len(URL):]
    return r["callback"]


def callback(path, cookie, src):
    h = {"Accept": "text/html"}
    if cookie:
        h["Cookie"] = cookie
    st, hd, body = request(URL, "GET", path, None, h, src)
    return {"status": st, "headers": hd, "body": body, "page": Page(body) if st == 200 else None}


def consent_form(page):
    """The consent form's fields, and the Allow/Deny buttons: (fields, allow, deny)."""
    allow = next((b for b in page.buttons if re.search(r"allow|approve|accept", b["text"], re.I)), None)
    deny = next((b for b in page.buttons if re.search(r"deny|decline|cancel", b["text"], re.I)), None)
    return dict(page.fields), allow, deny


def consent(fields, button, cookie, src):
    f = dict(fields)
    if button and button.get("name"):
        f[button["name"]] = button["value"]
    h = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "text/html"}
    if cookie:
        h["Cookie"] = cookie
    st, hd, body = request(URL, "POST", "/oauth/callback", urllib.parse.urlencode(f), h, src)
    return {"status": st, "location": hd.get("location"), "body": body}


def sso(org, src, action="allow", scope=None, resource=None):
    """A whole single sign-on: {start, cb, final, code, error, ...}."""
    r = {"org": org}
    s = start(org, src, scope, resource)
    r["start"] = s
    if not s.get("started"):
        r["fail"] = f"the sso form: {s.get('page_status')}/{s.get('status')} {text_of(s.get('body') or '')[:200]}"
        return r
    try:
        path = at_provider(s)
    except AssertionError as e:
        r["fail"] = str(e)
        return r
    cb = callback(path, s["sso"], src)
    r["cb"] = cb
    if cb["status"] != 200 or not cb["page"] or "post /oauth/callback" not in cb["page"].forms:
        r["fail"] = f"the callback: {cb['status']} {text_of(cb['body'])[:300]}"
        return r
    fields, allow, deny = consent_form(cb["page"])
    r["consent_fields"] = sorted(fields)
    fin = consent(fields, allow if action == "allow" else deny, s["sso"], src)
    r["final"] = fin
    loc = fin.get("location") or ""
    if fin["status"] in (302, 303) and loc.startswith(REDIRECT):
        q = qs(loc)
        r.update(code=q.get("code"), error=q.get("error"), state_ok=q.get("state") == s["state"], iss=q.get("iss"))
    else:
        r["fail"] = f"the consent form: {fin['status']} {loc[:100]} {text_of(fin['body'])[:200]}"
    return r


def token(code, verifier):
    st, hd, body = request(URL, "POST", "/oauth/token", urllib.parse.urlencode(
        {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
         "code_verifier": verifier, "client_id": CLIENT}), {"Content-Type": "application/x-www-form-urlencoded"})
    try:
        return st, json.loads(body)
    except ValueError:
        return st, None


def last_audit_id():
    st, j, _ = api("GET", "/v1/audit?newest_first=true&limit=1")
    return j["records"][0]["id"] if st == 200 and j and j["records"] else 0


def audit_since(after, action=None):
    st, j, _ = api("GET", f"/v1/audit?after={after}&limit=1000" + (f"&action={action}" if action else ""))
    return j["records"] if st == 200 and j else []


def users(tid):
    st, j, _ = api("GET", f"/v1/tenants/{tid}/users")
    return j["users"] if st == 200 and j else []


SRC_N = [20]


def new_src():
    SRC_N[0] += 1
    return f"127.0.0.{SRC_N[0]}"


def mode(tag, m, **kw):
    q = urllib.parse.urlencode({"mode": m, **kw})
    fake("POST", f"/_admin/{tag}?{q}")


# ---- tenants, each with the fake provider under its own issuer ------------------------
def tenant(name):
    st, j, _ = api("POST", "/v1/tenants", {"name": name})
    return j["id"] if st == 201 else None


def configure(tid, tag, secret=SECRET, **kw):
    body = {"issuer": f"{FAKE}/{tag}", "client_id": FAKE_CLIENT, "display_name": f"Fake {tag}", **kw}
    if secret is not None:
        body["client_secret"] = secret
    return api("PUT", f"/v1/tenants/{tid}/oidc", body)


TEN = {}
for name, tag, extra in (("fakeco", "h", {"create_users": "member"}),
                         ("postco", "post", {"create_users": "member"}),
                         ("pubco", "pub", {"create_users": "member", "secret": None}),
                         ("rotco", "rot", {"create_users": "member"})):
    tid = tenant(name)
    st, j, text = configure(tid, tag, **extra) if tid else (0, None, "no tenant")
    TEN[name] = tid
    check(f"PUT /v1/tenants/{{tid}}/oidc for {name} (issuer {FAKE}/{tag}): 200, the secret not shown",
          st == 200 and j and j.get("client_secret") is (extra.get("secret", SECRET) is not None)
          and SECRET not in text, f"{st} {text[:300]}")
NOSSO = tenant("nossoco")

# The rotation below needs the JWKS fetched more than a minute before.
rot0 = sso("rotco", new_src())
check("rotco: a first single sign-on (JWKS fetched)", rot0.get("code"), rot0.get("fail"))
ROT_T = time.time()

# ---- discovery documents refused when the operator configures them -------------------
for tag, why in (("wrongiss", "its issuer is not the configured one"),
                 ("plainhttp", "its endpoints are http:// on a host that is not loopback"),
                 ("bigdisc", "it is over 64 KiB"),
                 ("redirdisc", "it is a redirect (not followed)"),
                 ("nos256", "it does not support S256")):
    st, j, text = configure(NOSSO, tag)
    check(f"PUT …/oidc with a discovery document where {why}: 400 oidc_discovery_failed",
          st == 400 and j and (j.get("error") or {}).get("code") == "oidc_discovery_failed", f"{st} {text[:300]}")
st, j, _ = api("GET", f"/v1/tenants/{NOSSO}/oidc")
check("…and nossoco has no configuration (GET 404)", st == 404, st)

def to_callback(src):
    s = start("fakeco", src)
    path = at_provider(s)
    return s, path



def at_consent(src):
    s, path = to_callback(src)
    c = callback(path, s["sso"], src)
    if c["status"] != 200 or not c["page"]:
        raise AssertionError(f"no consent page: {c['status']} {text_of(c['body'])[:200]}")
    f, allow, deny = consent_form(c["page"])
    return s, f, allow



def handle_and_csrf(f):
    csrf = [k for k in f if "csrf" in (k or "").lower()]
    handle = [k for k in f if k not in csrf and k != "action"]
    return csrf, handle



# ---- the good sign-in, checked at every step ----------------------------------------
def sec0():
    global details, jwks_before
    src = new_src()
    a0 = last_audit_id()
    mode("h", "good", sub="fake-sub-fia", email="fia@fake.test", name="Fia Fake")
    g = sso("fakeco", src)
    s = g["start"]
    check("action=sso: 200, a page that moves on at once to the provider's authorization endpoint "
          "(meta refresh 0 and a Continue link, the same URL)", s.get("status") == 200 and
          (s.get("refresh") or "").startswith(f"{FAKE}/h/authorize?") and s.get("refresh") == s.get("continue"),
          f"{s.get('status')} refresh {s.get('refresh')} continue {s.get('continue')} location {(s.get('headers') or {}).get('location')}")
    check("…a page without script, sent no-store", "<script" not in (s.get("body") or "").lower()
          and "no-store" in ((s.get("headers") or {}).get("cache-control") or ""), (s.get("headers") or {}).get("cache-control"))
    line = s.get("sso_line") or ""
    check("…setting husk_sso (HttpOnly; SameSite=Lax; Path=/; Max-Age=600; not Secure over http), 64 hex digits",
          re.fullmatch(r"husk_sso=[0-9a-f]{64}", s.get("sso") or "") and re.search(r";\s*HttpOnly", line, re.I)
          and re.search(r";\s*Max-Age=600(;|$)", line, re.I)
          and re.search(r";\s*SameSite=Lax", line, re.I) and re.search(r";\s*Path=/(;|$)", line, re.I)
          and not re.search(r";\s*Secure", line, re.I), line)
    aq = qs(s.get("location") or "")
    check("…with response_type=code, client_id, redirect_uri=<issuer>/oauth/callback/<the tenant's id>, scope openid email profile",
          aq.get("response_type") == "code" and aq.get("client_id") == FAKE_CLIENT
          and aq.get("redirect_uri") == URL + "/oauth/callback/" + TEN["fakeco"] and aq.get("scope", "").split() == ["openid", "email", "profile"],
          json.dumps(aq))
    check("…state and nonce (random, 128 bits or more) and a PKCE challenge (S256)",
          len(aq.get("state", "")) >= 22 and len(aq.get("nonce", "")) >= 22 and aq.get("state") != aq.get("nonce")
          and aq.get("code_challenge_method") == "S256" and re.fullmatch(r"[A-Za-z0-9_-]{43}", aq.get("code_challenge", "")),
          json.dumps(aq))
    check("…the state is not the MCP client's state", aq.get("state") != s.get("state"))
    check("…and the client secret is not in that URL", SECRET not in (s.get("location") or ""))
    cb = g.get("cb") or {}
    check("the callback with the cookie: 200, husk's consent page posting to /oauth/callback",
          cb.get("status") == 200 and cb.get("page") and "post /oauth/callback" in cb["page"].forms, g.get("fail"))
    if cb.get("status") == 200:
        t = text_of(cb["body"])
        check("the consent page names the person (the name claim: Fia Fake) and the provider (via Fake h)",
              "Fia Fake" in t and re.search(r"via\s+Fake h", t), t[:400])
        check("…the client and its redirect host", "husk OIDC hostile test" in t and "127.0.0.1" in t, t[:400])
        hd = cb["headers"]
        check("…sent no-store, DENY framing, a CSP with form-action 'self' and the client's origin",
              "no-store" in (hd.get("cache-control") or "") and (hd.get("x-frame-options") or "").upper() == "DENY"
              and "form-action 'self'" in (hd.get("content-security-policy") or ""), json.dumps(hd)[:400])
        check("…and no script", "<script" not in cb["body"].lower())
    check("Allow: redirect to the client with a code, its state and iss", g.get("code") and g.get("state_ok")
          and g.get("iss") == URL, g.get("fail") or json.dumps({k: g.get(k) for k in ("error", "state_ok", "iss")}))
    if g.get("code"):
        st, j = token(g["code"], s["verifier"])
        check("the code is exchanged for tokens (hat_/hrt_)", st == 200 and j and j.get("access_token", "").startswith("hat_"), st)
    log = fake("GET", "/_admin/h")
    tr = log["token"][-1] if log["token"] else {}
    check("husk authenticated at the token endpoint with client_secret_basic, the right secret, the PKCE verifier "
          "and the same redirect_uri", tr.get("auth") == "basic" and not tr.get("errors"), json.dumps(tr))
    fia = next((u for u in users(TEN["fakeco"]) if u["name"] == "fia@fake.test"), None)
    check("create_users member: fia@fake.test was made, a member, displayed as the name claim, linked to the sub",
          fia and fia["role"] == "member" and fia["display_name"] == "Fia Fake" and fia.get("idp_subject") == "fake-sub-fia",
          json.dumps(fia))
    recs = audit_since(a0, "oauth.sign_in")
    okrec = [r for r in recs if r["outcome"] == "ok"]
    if okrec:
        note(f"the ok record: {json.dumps(okrec[-1])}")
    check("audited: oauth.sign_in ok, user fia, detail sso (its first word), idp_subject, the client",
          okrec and okrec[-1].get("user_id") == (fia or {}).get("id") and okrec[-1]["detail"].split(" ")[0] == "sso"
          and okrec[-1].get("idp_subject") == "fake-sub-fia" and okrec[-1].get("client_id") == CLIENT, json.dumps(recs)[:600])

    # A second sign-in finds the same user (by (issuer, sub)) even when the email changed.
    mode("h", "good", sub="fake-sub-fia", email="fia.renamed@fake.test", name="Fia Renamed")
    g2 = sso("fakeco", new_src())
    n_fia = [u for u in users(TEN["fakeco"]) if u.get("idp_subject") == "fake-sub-fia"]
    check("a second sign-in with the same sub (its email changed) finds the same user, no new user",
          g2.get("code") and len(n_fia) == 1 and fia and n_fia[0]["id"] == fia["id"], g2.get("fail") or json.dumps(n_fia))
    # Another sub claiming fia's email does not become fia (she is linked).
    mode("h", "good", sub="fake-sub-mallory", email="fia@fake.test", name="Mallory")
    a1 = last_audit_id()
    g3 = sso("fakeco", new_src())
    uu = users(TEN["fakeco"])
    check("another sub with fia's email does not sign in as fia (a linked user never signs in as another sub)",
          not any(u.get("idp_subject") == "fake-sub-mallory" and fia and u["id"] == fia["id"] for u in uu)
          and not (g3.get("code") and any(r.get("user_id") == (fia or {}).get("id")
                                          for r in audit_since(a1, "oauth.sign_in") if r["outcome"] == "ok")),
          json.dumps([(u["name"], u.get("idp_subject")) for u in uu]))
    check("…and no second user named fia@fake.test was made", [u["name"] for u in uu].count("fia@fake.test") == 1,
          json.dumps([(u["name"], u.get("idp_subject")) for u in uu]))
    note(f"another sub with a linked user's email: {'a code' if g3.get('code') else 'refused'}; "
         f"users now {[(u['name'], u.get('idp_subject')) for u in uu]}")

    # The authorization request's scope and resource go through the provider and back.
    mode("h", "good", sub="fake-sub-fia", email="fia@fake.test", name="Fia Fake")
    r = sso("fakeco", new_src(), scope="sandbox:read", resource=URL + "/v1")
    st, j = token(r["code"], r["start"]["verifier"]) if r.get("code") else (None, None)
    check("scope sandbox:read and resource <issuer>/v1 asked: the code's token has exactly that scope",
          st == 200 and j and j.get("scope") == "sandbox:read", r.get("fail") or f"{st} {json.dumps(j)[:200]}")
    if st == 200 and j:
        st1, _, _ = request(URL, "GET", "/v1/sandboxes", None, {"Authorization": "Bearer " + j["access_token"]})
        st2, _, _ = request(URL, "POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
                            {"Authorization": "Bearer " + j["access_token"], "Content-Type": "application/json",
                             "Accept": "application/json, text/event-stream"})
        check("…it works at /v1 (GET /v1/sandboxes 200) and not at /mcp (401)", (st1, st2) == (200, 401), (st1, st2))

    # The tenant admin unlinks a user: the next sign-in links it again, to the new sub.
    st, j, _ = api("POST", f"/v1/tenants/{TEN['fakeco']}/users", {"name": "uma@fake.test", "role": "viewer"})
    uma = (j or {}).get("id")
    mode("h", "good", sub="fake-sub-uma-1", email="uma@fake.test", name="Uma")
    u1 = sso("fakeco", new_src())
    st, j, _ = api("GET", f"/v1/tenants/{TEN['fakeco']}/users/{uma}")
    check("a user the operator made (uma, viewer) is linked at her first sign-in (create_users not used)",
          u1.get("code") and j and j.get("idp_subject") == "fake-sub-uma-1" and j.get("role") == "viewer",
          u1.get("fail") or json.dumps(j))
    uma_tok = token(u1["code"], u1["start"]["verifier"])[1] if u1.get("code") else None
    uma_at = (uma_tok or {}).get("access_token")
    check("uma, a viewer, is granted only what her role allows (sandbox:read storage:read)",
          uma_tok and sorted((uma_tok.get("scope") or "").split()) == ["sandbox:read", "storage:read"], json.dumps(uma_tok)[:200] if uma_tok else None)
    st, j, _ = api("PATCH", f"/v1/tenants/{TEN['fakeco']}/users/{uma}", {"idp_subject": "someone-else"})
    check("PATCH …/users/{uma} with an idp_subject other than null: 400 (a link is made only by a sign-in)", st == 400, st)
    st, j, _ = api("PATCH", f"/v1/tenants/{TEN['fakeco']}/users/{uma}", {"idp_subject": None})
    check("PATCH …/users/{uma} {\"idp_subject\":null}: 200, unlinked", st == 200 and j and j.get("idp_subject") is None,
          f"{st} {json.dumps(j)[:200]}")
    if uma_at:
        st, hd, body = request(URL, "POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
                               {"Authorization": "Bearer " + uma_at, "Content-Type": "application/json",
                                "Accept": "application/json, text/event-stream"})
        check("…and her tokens stop working (POST /mcp 401)", st == 401, st)
    mode("h", "good", sub="fake-sub-uma-2", email="uma@fake.test", name="Uma")
    u2 = sso("fakeco", new_src())
    st, j, _ = api("GET", f"/v1/tenants/{TEN['fakeco']}/users/{uma}")
    check("…then a sign-in with another sub and her email links her to that sub (the same user)",
          u2.get("code") and j and j.get("idp_subject") == "fake-sub-uma-2", u2.get("fail") or json.dumps(j))

    # client_secret_post when the discovery document lists only that; none for a public client.
    for tenant_name, tag, want in (("postco", "post", "post"), ("pubco", "pub", "none")):
        mode(tag, "good", sub=f"sub-{tag}", email=f"pat-{tag}@fake.test", name="Pat")
        r = sso(tenant_name, new_src())
        tr = (fake("GET", f"/_admin/{tag}")["token"] or [{}])[-1]
        check(f"{tenant_name}: the token endpoint is authenticated with {want} ({'client_secret_post listed alone' if want == 'post' else 'a public client'}), "
              "and the sign-in completes", r.get("code") and tr.get("auth") == want and not tr.get("errors"),
              r.get("fail") or json.dumps(tr))

# ---- ID tokens (and token replies) husk must refuse ------------------------------------
def sec1():
    global details, jwks_before
    REFUSE = [
        ("badsig", "a bad signature", r"signature"),
        ("none", "alg none", r"alg|none"),
        ("hs256", "HS256 keyed with the provider's RSA public key", r"alg|hs"),
        ("iss", "another iss", r"iss"),
        ("aud", "an aud without the client_id", r"aud"),
        ("azp-missing", "several audiences, no azp", r"azp|aud"),
        ("azp-wrong", "several audiences, azp another client", r"azp|aud"),
        ("expired", "expired 10 minutes ago", r"exp"),
        ("iat-future", "iat an hour ahead", r"iat|exp|time|future|clock"),
        ("nonce", "another nonce", r"nonce"),
        ("no-nonce", "no nonce", r"nonce"),
        ("kid-unknown", "a kid the JWKS does not have", r"kid|key|signature"),
        ("use-enc", "signed by a JWKS key whose use is enc", r"kid|key|use|signature"),
        ("alg-mismatch", "signed RS256 by a JWKS key whose alg says RS512", r"kid|key|alg|signature"),
        ("azp-single-wrong", "one audience, azp another client", r"azp|aud"),
        ("jku", "a header naming a key URL (jku)", r"token|header|jku|key"),
        ("jwk", "a header carrying its own key (jwk)", r"token|header|jwk|key"),
        ("x5u", "a header naming a certificate URL (x5u)", r"token|header|x5u|key"),
        ("crit", "a header with crit", r"token|header|crit"),
        ("rsa1024", "signed by a 1024-bit RSA key of the JWKS", r"key|signature"),
        ("private-jwk", "signed by a JWKS key published with its private parts", r"key|signature"),
        ("garbage", "an id_token that is not a JWS", r"token|format|malformed"),
        ("two-parts", "a JWS of two parts", r"token|format|malformed"),
        ("four-parts", "a JWS of four parts", r"token|format|malformed"),
        ("header-notjson", "a header that is not JSON", r"token|header|format|alg"),
        ("payload-notjson", "a payload that is not a JSON object (signed)", r"token|claims|format"),
        ("b64-bad-char", "a payload with characters outside base64url", r"token|format|base64"),
        ("b64-len1", "a signature whose length is 1 mod 4 (no base64)", r"token|format|base64|signature"),
        ("b64-padded", "parts with = padding", r"token|format|base64|signature"),
        ("empty-sig", "an empty signature", r"token|signature|format"),
        ("no-sub", "no sub", r"sub"),
        ("long-sub", "a sub of 256 bytes", r"sub"),
        ("unverified", "email_verified false (claim email)", r"email|verif"),
        ("no-verified", "no email_verified (claim email)", r"email|verif"),
        ("big", "an ID token over 16 KiB", r"size|large|big|long|16|bytes|token"),
        ("huge", "a token reply over 64 KiB", r"size|large|big|64|bytes|fetch|reply|token"),
        ("redirect", "a 302 from the token endpoint", r"redirect|302|3xx|status|token"),
        ("error500", "a 500 from the token endpoint", r"500|status|token"),
        ("notjson", "a token reply that is not JSON", r"json|parse|token|reply"),
    ]
    a_refuse = last_audit_id()
    for m, what, want in REFUSE:
        src = new_src()
        if m in ("unverified", "no-verified"):
            # A person not linked yet: the email claim is what names the user.
            mode("h", m, sub=f"fake-sub-{m}", email=f"{m}@fake.test", name="Unverified")
        else:
            mode("h", m, sub="fake-sub-fia", email="fia@fake.test", name="Fia Fake")
        if m == "kid-unknown":
            jwks_before = fake("GET", "/_admin/h")["jwks_fetches"]
        a = last_audit_id()
        s = start("fakeco", src)
        try:
            path = at_provider(s)
        except AssertionError as e:
            not_ok(f"{what}: the sign-in reaches the callback", e)
            continue
        cb = callback(path, s["sso"], src)
        t = text_of(cb["body"])
        tr = (fake("GET", "/_admin/h")["token"] or [{}])[-1]
        if tr.get("errors"):
            note(f"{m}: the fake provider refused husk's token request: {tr['errors']}")
        recs = [r for r in audit_since(a, "oauth.sign_in")]
        den = [r for r in recs if r["outcome"] == "denied"]
        detail = den[-1]["detail"] if den else None
        details[m] = detail
        check(f"{what}: the callback is an error page (400) saying the sign-in with the provider failed, no consent form",
              cb["status"] == 400 and "location" not in cb["headers"] and "/oauth/callback" not in cb["body"]
              and re.search(r"provider", t, re.I), f"{cb['status']} {cb['headers'].get('location')} {t[:300]}")
        check(f"{what}: audited oauth.sign_in denied, detail 'sso …' ({want}); no ok record",
              detail is not None and detail.startswith("sso") and re.search(want, detail[3:], re.I)
              and not any(r["outcome"] == "ok" for r in recs), json.dumps(recs)[:500])
    note("denied details: " + json.dumps(details))
    st, hd, body = request(URL, "GET", "/v1/health")
    check("the daemon is still up after every refused ID token (GET /v1/health 200)", st == 200, st)
    den = [r for r in audit_since(a_refuse, "oauth.sign_in") if r["outcome"] == "denied"]
    check("the refusals' records name the client (as a failed sign-in's record does) and no user",
          den and all(r.get("client_id") == CLIENT and not r.get("user_id") for r in den),
          json.dumps([{k: r.get(k) for k in ("detail", "client_id", "user_id")} for r in den][:3]))
    made = [u["name"] for u in users(TEN["fakeco"]) if u["name"] in ("unverified@fake.test", "no-verified@fake.test")]
    check("no user was made for an email the provider did not say was verified", not made, made)
    # A linked person whose token says email_verified false: the email is not what finds her.
    mode("h", "unverified", sub="fake-sub-fia", email="fia@fake.test", name="Fia Fake")
    r = sso("fakeco", new_src())
    note(f"a linked user's token with email_verified false: {'signed in' if r.get('code') else 'refused: ' + str(r.get('fail'))[:120]}")
    if jwks_before is not None:
        after = fake("GET", "/_admin/h")["jwks_fetches"]
        note(f"JWKS fetches of issuer h: {after} ({after - jwks_before} since the first unknown kid)")
        check("an unknown kid made husk fetch the JWKS again, at most once a minute (kid-unknown, use-enc and alg-mismatch "
              "within a minute: at most 1 more fetch)", after - jwks_before <= 1, f"{after - jwks_before} fetches")

    # Accepted at the edges: one more audience with azp, ES256, 60 s of clock skew.
    for m, what in (("azp-right", "several audiences with azp the client_id"),
                    ("no-kid", "no kid (any fitting key of the JWKS)"),
                    ("es256", "ES256"),
                    ("exp-skew", "exp 20 s ago (within the 60 s skew)"),
                    ("iat-skew", "iat 30 s ahead")):
        mode("h", m, sub="fake-sub-fia", email="fia@fake.test", name="Fia Fake")
        r = sso("fakeco", new_src())
        check(f"accepted: {what}", r.get("code"), r.get("fail"))

# ---- the callback and the consent form, attacked --------------------------------------
def sec2():
    global details, jwks_before
    mode("h", "good", sub="fake-sub-fia", email="fia@fake.test", name="Fia Fake")


    src = new_src()
    try:
        s, path = to_callback(src)
        first = callback(path, s["sso"], src)
        again = callback(path, s["sso"], src)
        check("the callback replayed (same state, same cookie) is refused (4xx, no consent form)",
              first["status"] == 200 and 400 <= again["status"] < 500 and "/oauth/callback" not in again["body"],
              f"first {first['status']}, again {again['status']} {text_of(again['body'])[:200]}")
    except AssertionError as e:
        not_ok("the callback replayed is refused", e)

    for how in ("without the husk_sso cookie", "with another browser's husk_sso cookie"):
        src = new_src()
        try:
            s, path = to_callback(src)
            other = None
            if "another" in how:
                s2 = start("fakeco", new_src())
                other = s2["sso"]
            r = callback(path, other, src)
            check(f"the callback {how} is refused (4xx, no consent form)",
                  400 <= r["status"] < 500 and "/oauth/callback" not in r["body"], f"{r['status']} {text_of(r['body'])[:200]}")
        except AssertionError as e:
            not_ok(f"the callback {how} is refused", e)

    src = new_src()
    s = start("fakeco", src)
    r = callback("/oauth/callback/" + TEN["fakeco"] + "?code=fic_madeup&state=" + base64.urlsafe_b64encode(os.urandom(24)).decode().rstrip("="),
                 s.get("sso"), src)
    check("an unknown state is refused (4xx, no consent form)", 400 <= r["status"] < 500 and "/oauth/callback" not in r["body"],
          f"{r['status']} {text_of(r['body'])[:200]}")
    r = callback("/oauth/callback/" + TEN["fakeco"], s.get("sso"), src)
    check("a callback with neither code nor state is refused (4xx)", 400 <= r["status"] < 500, r["status"])

    # Mix-up (RFC 9207): every tenant's provider answers at the one callback, so
    # a response whose iss names another provider (postco's, sent there by a
    # hostile provider with fakeco's state) must not reach fakeco's token endpoint.
    src = new_src()
    try:
        after = last_audit_id()
        s, path = to_callback(src)
        r = callback(path + "&iss=" + urllib.parse.quote(f"{FAKE}/post", safe=""), s["sso"], src)
        recs = audit_since(after, "oauth.sign_in")
        check("a callback whose iss is another tenant's provider (mix-up) is refused (4xx, no consent form, "
              "audit 'sso bad_issuer')",
              400 <= r["status"] < 500 and "/oauth/callback" not in r["body"]
              and any("bad_issuer" in (x.get("detail") or "") for x in recs),
              f"{r['status']} {text_of(r['body'])[:200]} {[x.get('detail') for x in recs]}")
        src = new_src()
        s, path = to_callback(src)
        r = callback(path + "&iss=" + urllib.parse.quote(f"{FAKE}/h", safe=""), s["sso"], src)
        check("…a callback whose iss is the tenant's own provider goes on to consent (200)",
              r["status"] == 200 and r["page"] and "post /oauth/callback" in r["page"].forms,
              f"{r['status']} {text_of(r['body'])[:200]}")
    except AssertionError as e:
        not_ok("a mix-up callback (iss of another provider) is refused", e)
    # Mix-up without iss (most providers send none): each tenant's provider
    # answers at that tenant's own callback, so fakeco's state arriving at
    # postco's callback (where a hostile postco provider would send it) is
    # refused before any code exchange.
    src = new_src()
    try:
        after = last_audit_id()
        s, path = to_callback(src)
        other = path.replace("/oauth/callback/" + TEN["fakeco"], "/oauth/callback/" + TEN["postco"], 1)
        r = callback(other, s["sso"], src)
        recs = audit_since(after, "oauth.sign_in")
        check("a callback at another tenant's callback address (mix-up, no iss) is refused (4xx, no consent form)",
              other != path and 400 <= r["status"] < 500 and "/oauth/callback" not in r["body"]
              and any((x.get("detail") or "").startswith("sso") and x.get("outcome") == "denied" for x in recs),
              f"{r['status']} {text_of(r['body'])[:200]} {[x.get('detail') for x in recs]}")
        r = callback(path, s["sso"], src)
        check("…and the pending sign-in was used up by it (the right callback after it is refused too)",
              400 <= r["status"] < 500, r["status"])
    except AssertionError as e:
        not_ok("a mix-up callback at another tenant's address is refused", e)

    for err, desc, shown, hidden in (
            ("access_denied", "<b>Evil Corp says</b> click http://evil.test", r"access_denied", ["Evil Corp", "evil.test", "<b>"]),
            ("<script>alert(1)</script>", "x", r"refused the sign-in", ["<script", "alert(1)"]),
            ("totally_custom_error", "please call +1 555", r"refused the sign-in", ["totally_custom_error", "555"])):
        src = new_src()
        s = start("fakeco", src)
        aq = qs(s.get("location") or "")
        r = callback("/oauth/callback/" + TEN["fakeco"] + "?" + urllib.parse.urlencode({"error": err, "error_description": desc,
                                                                  "state": aq.get("state", "")}), s.get("sso"), src)
        t = text_of(r["body"])
        check(f"error={err!r} from the provider: an error page ({r['status']}) showing {shown!r} and none of the provider's text",
              400 <= r["status"] < 500 and re.search(shown, t, re.I) and not any(h in r["body"] or h in t for h in hidden)
              and "location" not in r["headers"], f"{r['status']} {t[:300]}")

    # The consent form: without its CSRF token, with another pending sign-in's handle.
    try:
        srcA, srcB = new_src(), new_src()
        sA, fA, allowA = at_consent(srcA)
        sB, fB, allowB = at_consent(srcB)
        csrf, handle = handle_and_csrf(fA)
        note(f"the consent form's fields: {sorted(fA)}; buttons {allowA}")
        if not check("the consent form has a CSRF field and a handle field", csrf and handle, sorted(fA)):
            raise AssertionError("cannot tell the fields apart")
        nocsrf = {k: v for k, v in fA.items() if k not in csrf}
        r = consent(nocsrf, allowA, sA["sso"], srcA)
        check("the consent form without its CSRF token is refused (403, no code)",
              r["status"] == 403 and not (r.get("location") or "").startswith(REDIRECT), f"{r['status']} {r.get('location')}")
        mixed = dict(fA)
        for k in handle:
            mixed[k] = fB[k]
        r = consent(mixed, allowA, sA["sso"], srcA)
        check("the consent form with another pending sign-in's handle (this one's CSRF and cookie) is refused (403, no code)",
              r["status"] == 403 and not (r.get("location") or "").startswith(REDIRECT), f"{r['status']} {r.get('location')}")
        r = consent(fB, allowB, sA["sso"], srcA)
        check("another pending sign-in's whole form with this browser's cookie is refused (403, no code)",
              r["status"] == 403 and not (r.get("location") or "").startswith(REDIRECT), f"{r['status']} {r.get('location')}")
        r = consent(fB, allowB, sB["sso"], srcB)
        note(f"B's own form after those: {r['status']} {(r.get('location') or '')[:60]}")
    except AssertionError as e:
        not_ok("the consent form attacks ran", e)

    src = new_src()
    d = sso("fakeco", src, action="deny")
    check("Deny on the consent page: the client gets error=access_denied with its state and iss, no code",
          d.get("error") == "access_denied" and not d.get("code") and d.get("state_ok") and d.get("iss") == URL,
          d.get("fail") or json.dumps({k: d.get(k) for k in ("error", "code", "state_ok", "iss")}))

    # The consent form posted twice: the second is refused (the pending sign-in is gone).
    src = new_src()
    try:
        s, f, allow = at_consent(src)
        r1 = consent(f, allow, s["sso"], src)
        r2 = consent(f, allow, s["sso"], src)
        check("the consent form posted again after Allow is refused (400: the handle is used; no second code)",
              (r1.get("location") or "").startswith(REDIRECT) and r2["status"] == 400
              and not (r2.get("location") or "").startswith(REDIRECT), f"{r1['status']} then {r2['status']} {r2.get('location')}")
    except AssertionError as e:
        not_ok("the consent form posted again", e)

# ---- organizations without single sign-on ----------------------------------------------
def sec3():
    global details, jwks_before
    for org, what in (("nossoco", "a tenant without a provider"), ("no-such-org", "an unknown organization"),
                      ("FAKECO", "fakeco in the wrong case")):
        s = start(org, new_src())
        t = text_of(s.get("body") or "")
        check(f"action=sso for {what}: the page again (200), 'Single sign-on is not set up for this organization'",
              s.get("status") == 200 and re.search(r"single sign-on is not set up for this organization", t, re.I)
              and "husk_sso" not in (s.get("headers") or {}).get("set-cookie", ""), f"{s.get('status')} {t[:200]}")

# ---- pending sign-ins per address: 20 in 15 minutes, then 429 ------------------------
def sec4():
    global details, jwks_before
    src = new_src()
    s = start("fakeco", src)
    statuses = ["started" if s.get("started") else s.get("status")]
    f, ck = s.get("form"), s.get("oauth_cookie")
    last = (None, "")
    for _ in range(20):
        st, hd, body = request(URL, "POST", "/oauth/authorize", urllib.parse.urlencode(f),
                               {"Content-Type": "application/x-www-form-urlencoded", "Cookie": ck}, src, keep=False)
        started = moves_on(st, hd, body)["started"]
        statuses.append("started" if started else st)
        if not started:
            keep_body("POST", "/oauth/authorize", st, body)
        last = (st, body)
    note(f"sso starts from {src}: {statuses}")
    check("pending sign-ins from one address: the first 20 start, the 21st gets the 429 page ('too many sign-ins')",
          statuses[:20] == ["started"] * 20 and statuses[20] == 429
          and re.search(r"too many sign-ins", text_of(last[1]), re.I), f"{statuses} {text_of(last[1])[:200]}")
    s2 = start("fakeco", new_src())
    check("…while another address still starts one", s2.get("started"), s2.get("status"))

# ---- key rotation: a new kid in the JWKS is fetched (more than a minute later) ----------
def sec5():
    global details, jwks_before
    wait = 62 - (time.time() - ROT_T)
    if wait > 0:
        note(f"waiting {wait:.0f} s for the JWKS refetch interval")
        time.sleep(wait)
    mode("rot", "rotate", sub="sub-rot", email="rot@fake.test", name="Rot")
    r = sso("rotco", new_src())
    check("key rotation: an ID token signed by a key the JWKS shows only now is accepted (the JWKS fetched again)",
          r.get("code"), r.get("fail"))

# ---- broken JWKS documents ---------------------------------------------------------------
def sec_jwks():
    for what, desc in (("b64", "a key whose n is not base64url"), ("notjson", "not JSON"), ("big", "over 64 KiB"),
                       ("notarray", "keys not an array"), ("emptyn", "a key with an empty n"),
                       ("offcurve", "an EC key off its curve"), ("404", "a 404")):
        tag = f"badjwks-{what}"
        tid = tenant(f"jwks-{what}")
        st, j, text = configure(tid, tag, create_users="member")
        if st != 200:
            check(f"a broken JWKS ({desc}): refused when configured ({st})", st == 400, f"{st} {text[:200]}")
            continue
        mode(tag, "es256" if what == "offcurve" else "good", sub=f"sub-{what}", email=f"{what}@fake.test", name="J")
        a = last_audit_id()
        src = new_src()
        s = start(f"jwks-{what}", src)
        try:
            cb = callback(at_provider(s), s["sso"], src)
        except AssertionError as e:
            not_ok(f"a broken JWKS ({desc}): the sign-in reaches the callback", e)
            continue
        dets = [r["detail"] for r in audit_since(a, "oauth.sign_in") if r["outcome"] == "denied"]
        check(f"a broken JWKS ({desc}): the sign-in is refused (400 page, audited sso jwks_error/unknown_key)",
              cb["status"] == 400 and "/oauth/callback" not in cb["body"] and dets and re.search(r"jwks|key", dets[-1]),
              f"{cb['status']} {dets} {text_of(cb['body'])[:150]}")
    st, hd, body = request(URL, "GET", "/v1/health")
    check("the daemon is still up after the broken JWKS documents", st == 200, st)


# ---- the daemon's fetches to providers at once: 8, then a 503 page ------------------
def sec_busy():
    # Not while the browser's sign-ins fetch from the real provider (they count too).
    flag = os.environ.get("BROWSER_DONE")
    for _ in range(1200):
        if not flag or os.path.exists(flag):
            break
        time.sleep(0.1)
    import threading
    mode("h", "slow", sub="fake-sub-fia", email="fia@fake.test", name="Fia Fake")
    legs = []
    for _ in range(10):
        src = new_src()
        s = start("fakeco", src)
        legs.append((src, s, at_provider(s)))
    a = last_audit_id()
    out = [None] * len(legs)

    def one(i):
        src, s, path = legs[i]
        out[i] = callback(path, s["sso"], src)

    ts = [threading.Thread(target=one, args=(i,)) for i in range(len(legs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    sts = sorted(r["status"] for r in out)
    note(f"10 callbacks at once, the provider's token endpoint taking 3 s: {sts}")
    busy = [r for r in out if r["status"] == 503]
    check("more than 8 fetches to providers at once: the others get a 503 page saying to try again",
          busy and sts.count(200) <= 8 and all(re.search(r"try again", text_of(r["body"]), re.I) for r in busy),
          f"{sts} {text_of(busy[0]['body'])[:200] if busy else ''}")
    dets = [r["detail"] for r in audit_since(a, "oauth.sign_in")]
    note(f"their records: {sorted(set(dets))}")


# ---- claims other than email, and the scopes asked ------------------------------------
def sec_claims():
    tp, ts = tenant("prefco"), tenant("subco")
    st, j, text = configure(tp, "pref", claim="preferred_username", scopes="openid profile")
    check("prefco: PUT …/oidc with claim preferred_username, scopes 'openid profile': 200",
          st == 200 and j and j.get("claim") == "preferred_username" and j.get("scopes") == "openid profile", f"{st} {text[:200]}")
    st, j, _ = api("POST", f"/v1/tenants/{tp}/users", {"name": "pat", "role": "member"})
    pat = (j or {}).get("id")
    # The fake's preferred_username is the email's local part: PAT (matched in lower case).
    mode("pref", "good", sub="sub-pat", email="PAT@elsewhere.test", name="Pat")
    r = sso("prefco", new_src())
    az = (fake("GET", "/_admin/pref")["authorize"] or [{}])[-1]
    check("the provider is asked for the configured scopes only (openid profile)", az.get("scope") == "openid profile", az.get("scope"))
    st, j, _ = api("GET", f"/v1/tenants/{tp}/users/{pat}")
    check("claim preferred_username: PAT signs in as the user pat (matched in lower case) and is linked",
          r.get("code") and j and j.get("idp_subject") == "sub-pat", r.get("fail") or json.dumps(j))
    st, j, text = configure(ts, "subc", claim="sub", create_users="viewer")
    check("subco: PUT …/oidc with claim sub, create_users viewer: 200", st == 200, f"{st} {text[:200]}")
    mode("subc", "good", sub="Sub.User-1", email="whoever@fake.test", name="Sub User")
    r = sso("subco", new_src())
    made = [u for u in users(ts) if u.get("idp_subject") == "Sub.User-1"]
    check("claim sub, create_users viewer: a new person is made a viewer named by the sub in lower case",
          r.get("code") and len(made) == 1 and made[0]["name"] == "sub.user-1" and made[0]["role"] == "viewer",
          r.get("fail") or json.dumps(made))
    mode("subc", "good", sub="not a user name!", email="whoever2@fake.test", name="Bad Name")
    a = last_audit_id()
    r = sso("subco", new_src())
    cb = r.get("cb") or {}
    check("claim sub whose value is not a valid user name: refused (an error page, no user made)",
          not r.get("code") and not (cb.get("status") == 200 and cb.get("page") and "post /oauth/callback" in cb["page"].forms)
          and not any(u.get("idp_subject") == "not a user name!" for u in users(ts)),
          f"{cb.get('status')} {text_of(cb.get('body') or '')[:200]}")
    note(f"the refusal of an invalid name: {[r['detail'] for r in audit_since(a, 'oauth.sign_in')]}")
    # The name claim only displays: one with a bidi override or a newline is left
    # out (the user is made, displayed by nothing), never shown, never a refusal.
    mode("subc", "good", sub="bidi-1", email="whoever3@fake.test", name="Eve\u202egnp.exe\nadmin")
    r = sso("subco", new_src())
    made = [u for u in users(ts) if u.get("idp_subject") == "bidi-1"]
    check("a name claim with a bidi override and a newline: the person is made, displayed by nothing",
          r.get("code") and len(made) == 1 and not made[0].get("display_name"),
          r.get("fail") or json.dumps(made))


# ---- the operator ends single sign-on for a tenant --------------------------------------
def sec6():
    global details, jwks_before
    mode("h", "good", sub="fake-sub-fia", email="fia@fake.test", name="Fia Fake")
    psrc = new_src()
    ps = start("fakeco", psrc)
    ppath = at_provider(ps)
    a = last_audit_id()
    st, j, text = api("DELETE", f"/v1/tenants/{TEN['fakeco']}/oidc")
    check("DELETE /v1/tenants/{tid}/oidc: 200 {tenant_id, deleted: true}",
          st == 200 and j and j.get("deleted") is True and j.get("tenant_id") == TEN["fakeco"], f"{st} {text[:200]}")
    st, j, text = api("DELETE", f"/v1/tenants/{TEN['fakeco']}/oidc")
    check("…again: 404", st == 404, st)
    r = callback(ppath, ps["sso"], psrc)
    check("…a sign-in in progress when it was deleted is refused at its callback (4xx, no consent form)",
          400 <= r["status"] < 500 and "/oauth/callback" not in r["body"], f"{r['status']} {text_of(r['body'])[:200]}")
    st, j, text = api("GET", f"/v1/tenants/{TEN['fakeco']}/oidc")
    check("…then GET: 404", st == 404, st)
    s = start("fakeco", new_src())
    check("…and action=sso: 'Single sign-on is not set up for this organization' (200)",
          s.get("status") == 200 and re.search(r"single sign-on is not set up", text_of(s.get("body") or ""), re.I),
          f"{s.get('status')} {text_of(s.get('body') or '')[:200]}")
    fia2 = next((u for u in users(TEN["fakeco"]) if u["name"] == "fia@fake.test"), None)
    check("…users keep their link to the provider (idp_subject)", fia2 and fia2.get("idp_subject") == "fake-sub-fia", json.dumps(fia2))
    acts = [(r["action"], r["outcome"]) for r in audit_since(0, "oidc.configure") + audit_since(0, "oidc.delete")]
    check("oidc.configure and oidc.delete are audited", ("oidc.configure", "ok") in acts and ("oidc.delete", "ok") in acts, acts[-10:])


details, jwks_before = {}, None

section('the good sign-in, checked at every step', sec0)
section('ID tokens (and token replies) husk must refuse', sec1)
section('the callback and the consent form, attacked', sec2)
section('organizations without single sign-on', sec3)
section('pending sign-ins per address: 20 in 15 minutes, then 429', sec4)
section('key rotation: a new kid in the JWKS is fetched (more than a minute later)', sec5)
section("broken JWKS documents", sec_jwks)
section("the daemon's fetches to providers at once", sec_busy)
section("claims other than email, and the scopes asked", sec_claims)
section('the operator ends single sign-on for a tenant', sec6)

# ---- nothing secret in any reply body -------------------------------------------------
BODIES.flush()
seen = fake("GET", "/_admin/seen")
bodies = open(os.path.join(OUT, "bodies.txt")).read()
leaks = []
for k in ("states", "nonces", "codes", "id_tokens", "access_tokens"):
    for v in seen[k]:
        if v and v in bodies:
            leaks.append(f"{k}: {v[:12]}…")
        # An ID token's signature or payload alone
        if k == "id_tokens" and v and v.count(".") == 2:
            for part in v.split(".")[1:]:
                if len(part) > 40 and part in bodies:
                    leaks.append(f"id_token part {part[:12]}…")
if SECRET in bodies:
    leaks.append("the client secret")
check(f"no state, nonce, provider code, ID token, provider access token or client secret in any of husk's reply bodies "
      "but the page that sends the browser to the provider "
      f"({bodies.count('--- ')} bodies)", not leaks, "; ".join(sorted(set(leaks))[:10]))
json.dump({"details": details, "client": CLIENT, "tenants": TEN, "seconds": round(time.time() - T0)},
          open(os.path.join(OUT, "hostile.json"), "w"))
note(f"oidc_hostile.py: {time.time() - T0:.0f} s")
sys.exit(1 if FAILED else 0)
