#!/usr/bin/env python3
"""The browser's and the client's side of husk's OAuth 2.1 flow, without a
browser (tests/serve/oauth_api.sh).  Each command prints one JSON object.

  pkce                                   {"verifier","challenge"}
  page BASE QUERY_JSON [COOKIE]          GET /oauth/authorize: status, headers,
                                         cookie, hidden fields, body
  post BASE FIELDS_JSON [COOKIE]         POST /oauth/authorize (no redirect followed)
  posts BASE FIELDS_JSON N               that form N times, without a cookie, at
                                         once from one process: {"statuses"}
  signin BASE CLIENT REDIRECT ORG USER PASSWORD [SCOPE] [RESOURCE] [ACTION]
                                         page + post: status, location, code,
                                         state_ok, iss, verifier, page_body
  token BASE FORM_JSON [BASIC_USER:PASS] POST /oauth/token: status, headers, json
  revoke BASE FORM_JSON                  POST /oauth/revoke
  mcp BASE TOKEN TOOL ARGS_JSON          POST /mcp tools/call: status, headers, json
  rpc BASE TOKEN METHOD PARAMS_JSON      POST /mcp of any method (tools/list...): the same
  raw BASE METHOD PATH BODY [CTYPE]      any request, the body as given: status,
                                         headers, json (or None), body
  race BASE CLIENT REDIRECT ORG USER N   one page, then N sign-ins with a wrong
                                         password posted at once: {"statuses"}

With HUSK_SRC set (a loopback address such as 127.0.0.7), requests come
from that address: a test can be two people at two addresses.  With
HUSK_XFF set, every request carries it as X-Forwarded-For (a proxy's).
"""
import base64
import hashlib
import html.parser
import http.client
import json
import os
import sys
import urllib.parse


def conn(base):
    u = urllib.parse.urlsplit(base)
    src = os.environ.get("HUSK_SRC")
    return http.client.HTTPConnection(u.hostname, u.port, timeout=60,
                                      source_address=(src, 0) if src else None)


def request(base, method, path, body=None, headers=None):
    c = conn(base)
    headers = dict(headers or {})
    if os.environ.get("HUSK_XFF"):
        headers["X-Forwarded-For"] = os.environ["HUSK_XFF"]
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    hdrs = {}
    for k, v in r.getheaders():
        k = k.lower()
        hdrs[k] = hdrs[k] + "\n" + v if k in hdrs else v
    c.close()
    return r.status, hdrs, data.decode("utf-8", "replace")


class Fields(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.fields = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "input" and a.get("type") == "hidden":
            self.fields[a.get("name")] = a.get("value", "")


def pkce():
    v = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
    ch = base64.urlsafe_b64encode(hashlib.sha256(v.encode()).digest()).rstrip(b"=").decode()
    return v, ch


def page(base, query, cookie=None):
    h = {"Accept": "text/html"}
    if cookie:
        h["Cookie"] = cookie
    st, hd, body = request(base, "GET", "/oauth/authorize?" + urllib.parse.urlencode(query), None, h)
    p = Fields()
    p.feed(body)
    ck = None
    sc = hd.get("set-cookie")
    if sc:
        ck = sc.split(";")[0]
    return {"status": st, "headers": hd, "cookie": ck or cookie, "fields": p.fields, "body": body}


def post(base, fields, cookie=None):
    h = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "text/html"}
    if cookie:
        h["Cookie"] = cookie
    st, hd, body = request(base, "POST", "/oauth/authorize", urllib.parse.urlencode(fields), h)
    return {"status": st, "headers": hd, "body": body}


def signin(base, client, redirect, org, user, pw, scope=None, resource=None, action="allow"):
    verifier, challenge = pkce()
    state = "st-" + base64.urlsafe_b64encode(os.urandom(9)).decode() + " &x=1"
    q = {"response_type": "code", "client_id": client, "redirect_uri": redirect,
         "code_challenge": challenge, "code_challenge_method": "S256", "state": state}
    if scope:
        q["scope"] = scope
    if resource:
        q["resource"] = resource
    pg = page(base, q)
    out = {"page_status": pg["status"], "verifier": verifier, "cookie": pg["cookie"],
           "page_headers": pg["headers"]}
    if pg["status"] != 200:
        out["status"] = pg["status"]
        out["location"] = pg["headers"].get("location")
        return out
    f = dict(pg["fields"])
    f.update({"organization": org, "username": user, "password": pw, "action": action})
    r = post(base, f, pg["cookie"])
    out["status"] = r["status"]
    out["page_body"] = r["body"]
    loc = r["headers"].get("location")
    out["location"] = loc
    if loc:
        qs = urllib.parse.parse_qs(urllib.parse.urlsplit(loc).query)
        out["code"] = (qs.get("code") or [None])[0]
        out["error"] = (qs.get("error") or [None])[0]
        out["state_ok"] = (qs.get("state") or [None])[0] == state
        out["iss"] = (qs.get("iss") or [None])[0]
    return out


def token(base, form, basic=None, path="/oauth/token"):
    h = {"Content-Type": "application/x-www-form-urlencoded"}
    if basic:
        h["Authorization"] = "Basic " + base64.b64encode(basic.encode()).decode()
    st, hd, body = request(base, "POST", path, urllib.parse.urlencode(form), h)
    try:
        j = json.loads(body) if body else None
    except ValueError:
        j = None
    return {"status": st, "headers": hd, "json": j, "body": body}


def mcp(base, tok, tool, args):
    return rpc(base, tok, "tools/call", {"name": tool, "arguments": args})


def rpc(base, tok, method, params):
    msg = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
         "Authorization": "Bearer " + tok, "MCP-Protocol-Version": "2025-11-25"}
    st, hd, body = request(base, "POST", "/mcp", json.dumps(msg), h)
    try:
        j = json.loads(body) if body else None
    except ValueError:
        j = None
        for line in body.splitlines():  # SSE: the last data line is the reply
            if line.startswith("data:"):
                try:
                    j = json.loads(line[5:])
                except ValueError:
                    pass
    return {"status": st, "headers": hd, "json": j}


def race(base, client, redirect, org, user, n):
    import threading
    verifier, challenge = pkce()
    q = {"response_type": "code", "client_id": client, "redirect_uri": redirect,
         "code_challenge": challenge, "code_challenge_method": "S256"}
    pg = page(base, q)
    f = dict(pg["fields"])
    statuses = []
    lock = threading.Lock()
    go = threading.Event()

    def one(i):
        ff = dict(f)
        ff.update({"organization": org, "username": user, "password": "wrong-password-%d" % i,
                   "action": "allow"})
        go.wait()
        try:
            st = post(base, ff, pg["cookie"])["status"]
        except Exception as e:  # a refused connection counts as what it is
            st = type(e).__name__
        with lock:
            statuses.append(st)

    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    go.set()
    for t in ts:
        t.join()
    return {"statuses": statuses}


def main():
    a = sys.argv[1:]
    cmd = a[0]
    if cmd == "pkce":
        v, c = pkce()
        out = {"verifier": v, "challenge": c}
    elif cmd == "page":
        out = page(a[1], json.loads(a[2]), a[3] if len(a) > 3 else None)
    elif cmd == "post":
        out = post(a[1], json.loads(a[2]), a[3] if len(a) > 3 else None)
    elif cmd == "posts":
        fields = json.loads(a[2])
        out = {"statuses": [post(a[1], fields)["status"] for _ in range(int(a[3]))]}
    elif cmd == "signin":
        opt = [x or None for x in a[7:9]] + [None] * (2 - len(a[7:9]))
        out = signin(*a[1:7], *opt, a[9] if len(a) > 9 and a[9] else "allow")
    elif cmd == "token":
        out = token(a[1], json.loads(a[2]), a[3] if len(a) > 3 else None)
    elif cmd == "revoke":
        out = token(a[1], json.loads(a[2]), None, "/oauth/revoke")
    elif cmd == "race":
        out = race(a[1], a[2], a[3], a[4], a[5], int(a[6]))
    elif cmd == "raw":
        h = {"Content-Type": a[5] if len(a) > 5 else "application/x-www-form-urlencoded"}
        st, hd, body = request(a[1], a[2], a[3], a[4] if a[2] != "GET" else None, h)
        try:
            j = json.loads(body) if body else None
        except ValueError:
            j = None
        out = {"status": st, "headers": hd, "json": j, "body": body}
    elif cmd == "mcp":
        out = mcp(a[1], a[2], a[3], json.loads(a[4]))
    elif cmd == "rpc":
        out = rpc(a[1], a[2], a[3], json.loads(a[4]))
    else:
        sys.exit("unknown command " + cmd)
    print(json.dumps(out))


main()
