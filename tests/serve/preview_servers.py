#!/usr/bin/env python3
"""Servers and clients for the preview URL suites (tests/serve/previews.sh,
tests/serve/preview_browser.sh).  Standard library only.

Servers (run INSIDE a box, in the background; they listen on 127.0.0.1):
  http PORT [--log FILE]
                 HTTP/1.1 (keep-alive) server (--log: each request's
                 method, path and headers, one JSON line, as it arrives):
                   any path     echoes the request as JSON: method, path,
                                headers, body length and SHA-256 (bodies
                                with Content-Length or chunked)
                   /big?n=N     N bytes of `big N` (below), Content-Length
                   /chunked?n=K K chunks (Transfer-Encoding: chunked), then
                                one line "end"
                   /sse?gate=F  text/event-stream: event "one", then waits
                                until file F exists (at most 60 s; without
                                gate: 1 s), then event "two", then the end
                   /tick?n=K    K events, one each 0.5 s, never idle
                   /cookie      sets cookies with Domain= and Path=
                   /cookie2     sets cookies whose attribute names have
                                tabs and spaces around them, in any case
                   /origin?code=C  status C (200) with the headers that act
                                on a whole origin (Service-Worker-Allowed,
                                Clear-Site-Data, Strict-Transport-Security,
                                WWW-Authenticate, Proxy-Authenticate) and
                                X-Kept
                   /hold?gate=F no answer at all until file F exists (at
                                most 60 s), then the echo
                   /status?code=C  replies status C
                   /dash/       the dashboard page of the browser suite;
                   /dash/data.json  the number it shows
  ws PORT        RFC 6455 echo server (text and binary, fragments, ping);
                 a text message "headers?" is answered with the handshake's
                 request headers as JSON
  smuggle PORT   raw server: every answer (body "real-N") is followed on
                 the same socket by bytes that look like another answer
                 ("HTTP/1.1 200 OK ... SMUGGLED")
  both PORT      raw server: answers with both Content-Length and
                 Transfer-Encoding: chunked; other broken answers by path:
                 /hugehead (1.1 MB of header), /switch (a 101 nobody asked
                 for), /garbage (not HTTP), /close (no answer), /badlength
                 (Content-Length: 5, 6)

  naive PORT     an ordinary app that ignores the body of POST /ping (a
                 webhook stub): POST /notes stores its body as a note,
                 GET /notes lists them (JSON), GET /home greets the Cookie
  retry PORT     counts POST /charge; one that comes on a connection that
                 already carried a request is counted, then the connection
                 dropped unanswered (a worker that crashes); GET /count says
                 how many; GET /warm answers (?close=1: then closes,
                 unannounced)
  early PORT     takes a request head, then answers at once, without
                 reading the body, and closes: /413 and /404 with that
                 status, /drop with nothing

Clients (run on the host, connect to loopback only):
  wsclient URL [--header 'K: V']... [--connect HOST:PORT]
                 handshake, a text and a binary message (and a 70000-byte
                 one) echoed back, a close; prints "handshake STATUS" then
                 "text ok" / "binary ok" / "large ok" / "close ok"; exit 0
                 when all of them went through.  --headers-too: also asks
                 "headers?" and prints the JSON line the server sent.
                 --hold S: instead of closing, prints "holding" and waits
                 up to S seconds for the other side to end the connection:
                 prints "cut" (exit 0) or "still open" (exit 1).
  slowloris HOST PORT PATH SECONDS [--conns N]
                 N connections (default 4) that send a request head one
                 byte a second for at most SECONDS; prints
                 "closed K of N" (the connections the server closed)
  raw HOST PORT [--timeout S]
                 sends stdin as it is, prints what comes back until the
                 server closes or S seconds (default 10) pass
  big N          the N bytes /big?n=N sends, on stdout
  reuse HOST PORT TOKEN
                 sequences of requests, each on one connection of its own,
                 to the http server through /p/TOKEN: prints JSON of the
                 status and peer_port (the box side's connection) of each
  frontshare HOST PORT TOKEN
                 a front proxy sharing one connection between two people:
                 POST /ping whose body is a request head, then another
                 person's GET /home with a secret cookie (naive server)
  slowbody HOST PORT PATH N SECONDS [--header 'K: V']...
                 N connections that send a POST head announcing 100000
                 bytes of body, then 3 of them, and hold for SECONDS;
                 prints "opened N", then "statuses ..." (what came back)
  flood HOST PORT N PATH...
                 N rounds of GETs of the PATHs, alternating, over one
                 keep-alive connection (a new one when it is closed); prints
                 JSON {status: count}
  wshold URL [--wait S] [--linger L]
                 a WebSocket handshake, then never a frame: prints
                 "holding", then "closed" once the other side ends the
                 connection (within S seconds, default 30; else "still
                 open"), and keeps its socket L more seconds (default 0)
  wsping URL --at T1,T2,...
                 a WebSocket handshake, then at each T seconds after it a
                 text message: prints "at T echo" / "at T no echo" /
                 "at T closed"; then waits at most 20 s for the end of the
                 connection: "eof" or "still open"
"""
import base64
import hashlib
import json
import os
import select
import socket
import struct
import sys
import threading
import time
import urllib.parse

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def big_bytes(n):
    """Deterministic content: SHA-256 blocks of a counter."""
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.sha256(b"husk-preview-%d" % i).digest()
        i += 1
    return bytes(out[:n])


# ---------------------------------------------------------------- http

DASHBOARD = """<!doctype html>
<html><head><meta charset="utf-8"><title>husk dashboard</title>
<style>
 html, body { margin: 0; background: #ffffff; font: 20px sans-serif; }
 #block { position: absolute; left: 0; top: 0; width: 400px; height: 300px;
          background: rgb(18, 160, 90); }
 #panel { position: absolute; left: 0; top: 320px; }
</style></head>
<body>
<div id="block"></div>
<div id="panel">
 <div>requests served: <span id="value">loading</span></div>
 <div>websocket: <span id="ws">waiting</span></div>
</div>
<script>
 // A relative URL: through /p/<token>/dash/ it must stay under the prefix.
 fetch("data.json").then(r => r.json()).then(j => {
   document.getElementById("value").textContent = String(j.value);
 }).catch(e => { document.getElementById("value").textContent = "error " + e; });
 const q = new URLSearchParams(location.search);
 const wsUrl = q.get("ws");
 if (wsUrl) {
   try {
     const ws = new WebSocket(wsUrl);
     ws.onopen = () => ws.send("ping-from-dashboard");
     ws.onmessage = ev => { document.getElementById("ws").textContent = "echo:" + ev.data; ws.close(); };
     ws.onerror = () => { document.getElementById("ws").textContent = "error"; };
   } catch (e) { document.getElementById("ws").textContent = "error " + e; }
 } else {
   document.getElementById("ws").textContent = "none";
 }
</script>
</body></html>
"""
DASH_VALUE = 4242


def http_server(port, log=None):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    log_lock = threading.Lock()

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "preview-test/1"

        def log_message(self, *a):
            pass

        def read_body(self):
            te = (self.headers.get("Transfer-Encoding") or "").lower()
            if "chunked" in te:
                body = bytearray()
                while True:
                    line = self.rfile.readline(65537)
                    if not line:
                        raise ValueError("short chunked body")
                    size = int(line.split(b";")[0].strip(), 16)
                    if size == 0:
                        while True:  # trailers
                            t = self.rfile.readline(65537)
                            if t in (b"\r\n", b"\n", b""):
                                break
                        break
                    body += self.rfile.read(size)
                    self.rfile.readline(3)
                return bytes(body), "chunked"
            n = int(self.headers.get("Content-Length") or 0)
            return (self.rfile.read(n) if n else b""), "length"

        def send(self, code, body, ctype="application/json", extra=()):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in extra:
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def chunk(self, data):
            self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
            self.wfile.flush()

        def handle_any(self):
            u = urllib.parse.urlsplit(self.path)
            q = urllib.parse.parse_qs(u.query)
            if log:
                with log_lock, open(log, "a") as f:
                    f.write(json.dumps({"method": self.command, "path": self.path,
                                        "headers": [[k, v] for k, v in self.headers.items()]}) + "\n")
            try:
                body, framing = self.read_body()
            except (ValueError, OSError):
                self.close_connection = True
                return
            if u.path == "/big":
                n = int(q.get("n", ["0"])[0])
                return self.send(200, big_bytes(n), "application/octet-stream")
            if u.path == "/chunked":
                k = int(q.get("n", ["5"])[0])
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                if self.command == "HEAD":
                    return
                for i in range(k):
                    self.chunk(b"chunk %d\n" % i)
                self.chunk(b"end\n")
                self.wfile.write(b"0\r\n\r\n")
                return
            if u.path in ("/sse", "/tick"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    if u.path == "/tick":
                        for i in range(int(q.get("n", ["120"])[0])):
                            self.chunk(b"event: tick\ndata: %d\n\n" % i)
                            time.sleep(0.5)
                    else:
                        self.chunk(b"event: one\ndata: first\n\n")
                        gate = q.get("gate", [None])[0]
                        if gate:
                            end = time.monotonic() + 60
                            while not os.path.exists(gate) and time.monotonic() < end:
                                time.sleep(0.05)
                        else:
                            time.sleep(1)
                        self.chunk(b"event: two\ndata: second\n\n")
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    self.close_connection = True
                return
            if u.path == "/cookie":
                return self.send(200, b"cookies\n", "text/plain", [
                    ("Set-Cookie", "a=1; Domain=evil.example; Path=/; HttpOnly"),
                    ("Set-Cookie", "b=2; path=/sub; domain=.preview.test; Secure"),
                    ("Set-Cookie", "c=3"),
                ])
            if u.path == "/cookie2":
                return self.send(200, b"cookies\n", "text/plain", [
                    ("Set-Cookie", "sess=evil; Domain\t=preview.test; Path\t=/x"),
                    ("Set-Cookie", "d1=1; Domain =x; HttpOnly"),
                    ("Set-Cookie", "d2=2;  DOMAIN=x"),
                    ("Set-Cookie", "d3=3;\tdomain\t\t= preview.test ;Secure"),
                ])
            if u.path == "/origin":
                code = int(q.get("code", ["200"])[0])
                return self.send(code, b"origin headers\n", "text/plain", [
                    ("Service-Worker-Allowed", "/"),
                    ("Clear-Site-Data", '"cache", "cookies", "storage"'),
                    ("Strict-Transport-Security", "max-age=31536000; includeSubDomains"),
                    ("WWW-Authenticate", 'Basic realm="husk preview", charset="UTF-8"'),
                    ("www-authenticate", 'Bearer realm="box"'),
                    ("Proxy-Authenticate", 'Basic realm="proxy"'),
                    ("X-Kept", "yes"),
                ])
            if u.path == "/hold":
                gate = q.get("gate", [""])[0]
                end = time.monotonic() + 60
                while gate and not os.path.exists(gate) and time.monotonic() < end:
                    time.sleep(0.05)
            if u.path == "/status":
                code = int(q.get("code", ["200"])[0])
                return self.send(code, b'{"status":%d}' % code)
            if u.path == "/dash" or u.path == "/dash/":
                return self.send(200, DASHBOARD.encode(), "text/html; charset=utf-8")
            if u.path == "/dash/data.json":
                return self.send(200, json.dumps({"value": DASH_VALUE}).encode())
            info = {
                "method": self.command,
                "path": self.path,
                "headers": [[k, v] for k, v in self.headers.items()],
                "body_len": len(body),
                "body_sha256": hashlib.sha256(body).hexdigest(),
                "framing": framing,
                "peer": self.client_address[0],
                "peer_port": self.client_address[1],
            }
            # ?close=1: the server closes the connection after this answer
            # without saying so (as one whose idle timeout struck would).
            if q.get("close"):
                self.close_connection = True
            self.send(200, (json.dumps(info) + "\n").encode())

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = handle_any

    class S(ThreadingHTTPServer):
        daemon_threads = True
        allow_reuse_address = True

    S(("127.0.0.1", port), H).serve_forever()


# ---------------------------------------------------------------- websocket

def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        b = sock.recv(n - len(buf))
        if not b:
            raise EOFError("closed")
        buf += b
    return bytes(buf)


def read_frame(sock):
    h = recv_exact(sock, 2)
    fin = h[0] & 0x80
    op = h[0] & 0x0F
    masked = h[1] & 0x80
    n = h[1] & 0x7F
    if n == 126:
        n = struct.unpack(">H", recv_exact(sock, 2))[0]
    elif n == 127:
        n = struct.unpack(">Q", recv_exact(sock, 8))[0]
    key = recv_exact(sock, 4) if masked else None
    data = recv_exact(sock, n) if n else b""
    if key:
        data = bytes(b ^ key[i % 4] for i, b in enumerate(data))
    return bool(fin), op, data, bool(masked)


def make_frame(op, data, mask):
    h = bytearray([0x80 | op])
    n = len(data)
    mbit = 0x80 if mask else 0
    if n < 126:
        h.append(mbit | n)
    elif n < 65536:
        h.append(mbit | 126)
        h += struct.pack(">H", n)
    else:
        h.append(mbit | 127)
        h += struct.pack(">Q", n)
    if mask:
        key = os.urandom(4)
        h += key
        data = bytes(b ^ key[i % 4] for i, b in enumerate(data))
    return bytes(h) + data


def read_head(sock, limit=65536):
    buf = bytearray()
    while b"\r\n\r\n" not in buf:
        b = sock.recv(4096)
        if not b:
            raise EOFError("closed before the end of the head")
        buf += b
        if len(buf) > limit:
            raise ValueError("head too large")
    i = buf.index(b"\r\n\r\n") + 4
    return bytes(buf[:i]), bytes(buf[i:])


def ws_conn(sock):
    try:
        head, _ = read_head(sock)
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        hlist = []
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
                hlist.append([k.strip(), v.strip()])
        key = headers.get("sec-websocket-key")
        if not key or "websocket" not in headers.get("upgrade", "").lower():
            body = b"not a websocket request\n"
            sock.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                         % len(body) + body)
            return
        acc = base64.b64encode(hashlib.sha1(key.encode() + WS_GUID).digest())
        sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + acc + b"\r\n\r\n")
        msg_op, parts = None, []
        while True:
            fin, op, data, _ = read_frame(sock)
            if op == 8:
                sock.sendall(make_frame(8, data[:2], False))
                return
            if op == 9:
                sock.sendall(make_frame(10, data, False))
                continue
            if op == 10:
                continue
            if op in (1, 2):
                msg_op, parts = op, [data]
            elif op == 0:
                parts.append(data)
            if fin and msg_op is not None:
                msg = b"".join(parts)
                if msg_op == 1 and msg == b"headers?":
                    msg = json.dumps(hlist).encode()
                sock.sendall(make_frame(msg_op, msg, False))
                msg_op, parts = None, []
    except (EOFError, OSError, ValueError):
        pass
    finally:
        sock.close()


def listen(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(64)
    return s


def serve_threads(port, fn):
    s = listen(port)
    while True:
        c, _ = s.accept()
        threading.Thread(target=fn, args=(c,), daemon=True).start()


# ---------------------------------------------------------------- raw servers

COUNTER = [0]
COUNTER_LOCK = threading.Lock()


def smuggle_conn(sock):
    try:
        rest = b""
        while True:
            buf = rest
            while b"\r\n\r\n" not in buf:
                b = sock.recv(4096)
                if not b:
                    return
                buf += b
            i = buf.index(b"\r\n\r\n") + 4
            rest = buf[i:]
            with COUNTER_LOCK:
                COUNTER[0] += 1
                n = COUNTER[0]
            body = b"real-%d" % n
            fake = b"SMUGGLED smuggled SMUGGLED"
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n"
                         % len(body) + body +
                         b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n"
                         % len(fake) + fake)
    except OSError:
        pass
    finally:
        sock.close()


def both_conn(sock):
    try:
        head, _ = read_head(sock)
        path = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b"/"
        if path.startswith(b"/hugehead"):
            # a reply head far bigger than any proxy should hold
            sock.sendall(b"HTTP/1.1 200 OK\r\n" +
                         b"".join(b"X-Big-%d: %s\r\n" % (i, b"b" * 1000) for i in range(1100)) +
                         b"Content-Length: 2\r\n\r\nok")
            return
        if path.startswith(b"/switch"):
            # switching protocols that nobody asked for
            sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                         b"Connection: Upgrade\r\n\r\nraw bytes after a 101")
            time.sleep(1)
            return
        if path.startswith(b"/garbage"):
            sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            return
        if path.startswith(b"/close"):
            return
        if path.startswith(b"/badlength"):
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello!")
            return
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n"
                     b"5\r\nhello\r\n0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUGGLED")
        time.sleep(1)
    except (OSError, EOFError, ValueError):
        pass
    finally:
        sock.close()


# ---------------------------------------------------------------- clients

def parse_ws_url(url):
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("ws", "http"):
        raise SystemExit("wsclient: only ws:// URLs")
    host = u.hostname
    port = u.port or 80
    path = u.path or "/"
    if u.query:
        path += "?" + u.query
    hosthdr = u.netloc.rsplit("@", 1)[-1]
    return host, port, path, hosthdr


def wsclient(argv):
    url = argv[0]
    headers = []
    connect = None
    headers_too = False
    hold = 0.0
    i = 1
    while i < len(argv):
        if argv[i] == "--header":
            headers.append(argv[i + 1])
            i += 2
        elif argv[i] == "--connect":
            connect = argv[i + 1]
            i += 2
        elif argv[i] == "--headers-too":
            headers_too = True
            i += 1
        elif argv[i] == "--hold":
            hold = float(argv[i + 1])
            i += 2
        else:
            raise SystemExit("wsclient: unknown argument " + argv[i])
    host, port, path, hosthdr = parse_ws_url(url)
    if connect:
        host, p = connect.rsplit(":", 1)
        port = int(p)
    if host not in ("127.0.0.1", "::1", "localhost"):
        raise SystemExit("wsclient: loopback only, not " + host)
    sock = socket.create_connection((host, port), timeout=20)
    key = base64.b64encode(os.urandom(16)).decode()
    req = ("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n" % (path, hosthdr, key))
    for h in headers:
        req += h + "\r\n"
    sock.sendall((req + "\r\n").encode())
    try:
        head, rest = read_head(sock)
    except (EOFError, ValueError, OSError) as e:
        print("handshake none (%s)" % e)
        return 1
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = status_line.split(" ")
    status = parts[1] if len(parts) > 1 else "?"
    print("handshake", status, flush=True)
    if status != "101":
        return 1
    want = base64.b64encode(hashlib.sha1(key.encode() + WS_GUID).digest()).decode()
    if ("sec-websocket-accept: " + want).lower() not in head.decode("latin-1").lower():
        print("bad Sec-WebSocket-Accept")
        return 1
    if rest:
        print("bytes before any frame: %r" % rest[:64])
        return 1
    good = 0
    cases = [("text", 1, "héllo through the preview ✓".encode()),
             ("binary", 2, bytes(range(256)) * 3 + b"\x00\xff"),
             ("large", 2, big_bytes(70000))]
    try:
        for name, op, data in cases:
            sock.sendall(make_frame(op, data, True))
            fin, rop, got, masked = read_frame(sock)
            if fin and rop == op and got == data and not masked:
                print(name, "ok", flush=True)
                good += 1
            else:
                print(name, "bad: op %d, %d bytes, masked %s" % (rop, len(got), masked), flush=True)
        if headers_too:
            sock.sendall(make_frame(1, b"headers?", True))
            _, _, got, _ = read_frame(sock)
            print("headers", got.decode(), flush=True)
        if hold:
            # Keep the connection open; say whether the other side ends it.
            print("holding", flush=True)
            sock.settimeout(hold)
            try:
                while True:
                    fin, rop, got, _ = read_frame(sock)
                    if rop == 8:
                        break
            except socket.timeout:
                print("still open")
                return 1
            except (EOFError, OSError):
                pass
            print("cut")
            return 0
        sock.sendall(make_frame(8, struct.pack(">H", 1000), True))
        _, rop, _, _ = read_frame(sock)
        if rop == 8:
            print("close ok")
            good += 1
    except (EOFError, OSError) as e:
        print("connection ended: %s" % e)
    return 0 if good == len(cases) + 1 else 1


def slowloris(argv):
    host, port, path, seconds = argv[0], int(argv[1]), argv[2], float(argv[3])
    n = 4
    if "--conns" in argv:
        n = int(argv[argv.index("--conns") + 1])
    if host not in ("127.0.0.1", "::1", "localhost"):
        raise SystemExit("slowloris: loopback only")
    head = ("GET %s HTTP/1.1\r\nHost: %s:%d\r\nX-Slow: %s\r\n\r\n"
            % (path, host, port, "a" * 200)).encode()
    socks = []
    for _ in range(n):
        try:
            socks.append(socket.create_connection((host, port), timeout=5))
        except OSError:
            pass
    print("opened %d" % len(socks), flush=True)
    closed = set()
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end and len(closed) < len(socks) and i < len(head) - 1:
        for k, s in enumerate(socks):
            if k in closed:
                continue
            try:
                r, _, _ = select.select([s], [], [], 0)
                if r and not s.recv(4096, socket.MSG_PEEK):
                    closed.add(k)
                    continue
                s.send(head[i:i + 1])
            except OSError:
                closed.add(k)
        i += 1
        time.sleep(1)
    for k, s in enumerate(socks):
        if k not in closed:
            try:
                r, _, _ = select.select([s], [], [], 0)
                if r and not s.recv(4096, socket.MSG_PEEK):
                    closed.add(k)
            except OSError:
                closed.add(k)
        s.close()
    print("closed %d of %d" % (len(closed), len(socks)), flush=True)
    return 0


def raw(argv):
    host, port = argv[0], int(argv[1])
    timeout = 10.0
    if "--timeout" in argv:
        timeout = float(argv[argv.index("--timeout") + 1])
    if host not in ("127.0.0.1", "::1", "localhost"):
        raise SystemExit("raw: loopback only")
    data = sys.stdin.buffer.read()
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        s.sendall(data)
    except OSError as e:
        print("send failed: %s" % e, file=sys.stderr)
    end = time.monotonic() + timeout
    out = sys.stdout.buffer
    while time.monotonic() < end:
        r, _, _ = select.select([s], [], [], max(0.0, end - time.monotonic()))
        if not r:
            break
        try:
            b = s.recv(65536)
        except OSError:
            break
        if not b:
            break
        out.write(b)
        out.flush()
    s.close()
    return 0


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "http":
        http_server(int(args[0]), args[args.index("--log") + 1] if "--log" in args else None)
    elif cmd == "naive":
        naive_server(int(args[0]))
    elif cmd == "retry":
        serve_threads(int(args[0]), retry_conn)
    elif cmd == "early":
        serve_threads(int(args[0]), early_conn)
    elif cmd == "reuse":
        return reuse(args)
    elif cmd == "frontshare":
        return frontshare(args)
    elif cmd == "slowbody":
        return slowbody(args)
    elif cmd == "flood":
        return flood(args)
    elif cmd == "wshold":
        return wshold(args)
    elif cmd == "wsping":
        return wsping(args)
    elif cmd == "ws":
        serve_threads(int(args[0]), ws_conn)
    elif cmd == "smuggle":
        serve_threads(int(args[0]), smuggle_conn)
    elif cmd == "both":
        serve_threads(int(args[0]), both_conn)
    elif cmd == "wsclient":
        return wsclient(args)
    elif cmd == "slowloris":
        return slowloris(args)
    elif cmd == "raw":
        return raw(args)
    elif cmd == "big":
        sys.stdout.buffer.write(big_bytes(int(args[0])))
    else:
        print("unknown subcommand " + cmd, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
