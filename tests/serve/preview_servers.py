#!/usr/bin/env python3
"""Servers and clients for the preview URL suites (tests/serve/previews.sh,
tests/serve/preview_browser.sh).  Standard library only.

Servers (run INSIDE a box, in the background; they listen on 127.0.0.1):
  http PORT [--log FILE]
                 HTTP/1.1 (keep-alive) server (--log: each request's
                 method, path and headers, one JSON line, as it arrives):
                   any path     echoes the request as JSON: method, path,
                                headers, body length and SHA-256 (bodies
                                with Content-Length or chunked), and the
                                connection's peer port (which connection
                                of the proxy's it came on)
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
  slowbody HOST PORT PATH N SECONDS [--header 'K: V']... [--until FILE]
           [--finish]
                 N connections that send a POST head announcing 100000
                 bytes of body, then 3 of them, and hold for SECONDS (or
                 until FILE exists); --finish: then the rest of the bodies.
                 Prints "opened N", "answered K" as replies come, "held",
                 then "statuses ..." (each one's status, or none)
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


# ---------------------------------------------------------------- hostile-path servers

def naive_server(port):
    """An ordinary app (no hostile intent) that does not read the body of
    POST /ping: on a kept connection, that body is read as the next
    request's head."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    notes = []
    lock = threading.Lock()

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def reply(self, body, ctype="text/plain"):
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            if self.path == "/notes":
                n = int(self.headers.get("Content-Length") or 0)
                note = self.rfile.read(n).decode("latin-1")
                with lock:
                    notes.append(note)
                return self.reply(b"stored\n")
            return self.reply(b"pong\n")  # the body is never read

        def do_GET(self):
            if self.path == "/notes":
                with lock:
                    return self.reply(json.dumps(notes).encode(), "application/json")
            return self.reply(("hello %s\n" % self.headers.get("Cookie")).encode())

    class S(ThreadingHTTPServer):
        daemon_threads = True
        allow_reuse_address = True

    S(("127.0.0.1", port), H).serve_forever()


CHARGES = [0]


def retry_conn(sock):
    """POST /charge acts (counts) at once; on a connection that already
    carried a request it then drops the connection unanswered."""
    try:
        buf = b""
        n = 0
        while True:
            while b"\r\n\r\n" not in buf:
                d = sock.recv(4096)
                if not d:
                    return
                buf += d
                if len(buf) > 65536:
                    return
            head, _, buf = buf.partition(b"\r\n\r\n")
            cl = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    cl = int(v.strip())
            while len(buf) < cl:
                d = sock.recv(65536)
                if not d:
                    return
                buf += d
            buf = buf[cl:]
            n += 1
            parts = head.split(b"\r\n", 1)[0].split(b" ")
            method, target = parts[0], parts[1] if len(parts) > 1 else b"/"
            close = False
            if method == b"POST" and target.startswith(b"/charge"):
                with COUNTER_LOCK:
                    CHARGES[0] += 1
                    c = CHARGES[0]
                if n > 1:
                    return  # acted, then the worker died before answering
                body = b"charged %d\n" % c
            elif target.startswith(b"/count"):
                with COUNTER_LOCK:
                    body = b"charges=%d\n" % CHARGES[0]
            else:
                body = b"warm\n"
                close = b"close=1" in target
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n"
                         % len(body) + body)
            if close:
                return
    except (OSError, ValueError):
        pass
    finally:
        sock.close()


def early_conn(sock):
    """Answers before the request body is read (a server refusing an
    upload), then closes."""
    try:
        head, rest = read_head(sock)
        path = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b"/"
        # a little of the body, as a server that looks at its start would
        got = len(rest)
        sock.settimeout(2)
        try:
            while got < 65536:
                d = sock.recv(65536)
                if not d:
                    break
                got += len(d)
        except OSError:
            pass
        if path.startswith(b"/drop"):
            return
        code = 404 if path.startswith(b"/404") else 413
        body = b"refused by the box: %d\n" % code
        sock.sendall(b"HTTP/1.1 %d Refused\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n" % (code, len(body)) + body)
        time.sleep(0.2)
    except (OSError, EOFError, ValueError):
        pass
    finally:
        sock.close()


# ---------------------------------------------------------------- attack clients

def loopback_only(host, what):
    if host not in ("127.0.0.1", "::1", "localhost"):
        raise SystemExit(what + ": loopback only, not " + host)


class RawConn:
    """One client connection; requests written byte for byte."""

    def __init__(self, host, port, timeout=20):
        loopback_only(host, "client")
        self.host, self.port = host, port
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def fill(self):
        d = self.sock.recv(65536)
        if not d:
            raise EOFError("closed")
        self.buf += d

    def send(self, method, target, headers=(), body=None, length=True):
        req = "%s %s HTTP/1.1\r\nHost: %s:%d\r\n" % (method, target, self.host, self.port)
        for h in headers:
            req += h + "\r\n"
        if body is not None and length:
            req += "Content-Length: %d\r\n" % len(body)
        self.sock.sendall(req.encode("latin-1") + b"\r\n" + (body or b""))

    def reply(self, method="GET"):
        while b"\r\n\r\n" not in self.buf:
            self.fill()
        i = self.buf.index(b"\r\n\r\n")
        head, self.buf = self.buf[:i].decode("latin-1"), self.buf[i + 4:]
        lines = head.split("\r\n")
        status = int(lines[0].split(" ")[1])
        hdrs = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            hdrs.setdefault(k.strip().lower(), []).append(v.strip())
        if method == "HEAD" or status in (204, 304) or status < 200:
            return status, hdrs, b""
        if "chunked" in ",".join(hdrs.get("transfer-encoding", [])).lower():
            body = b""
            while True:
                while b"\r\n" not in self.buf:
                    self.fill()
                line, _, self.buf = self.buf.partition(b"\r\n")
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while True:  # trailers, then the empty line
                        while b"\r\n" not in self.buf:
                            self.fill()
                        t, _, self.buf = self.buf.partition(b"\r\n")
                        if not t:
                            break
                    return status, hdrs, body
                while len(self.buf) < size + 2:
                    self.fill()
                body += self.buf[:size]
                self.buf = self.buf[size + 2:]
        if "content-length" in hdrs:
            n = int(hdrs["content-length"][0])
            while len(self.buf) < n:
                self.fill()
            body, self.buf = self.buf[:n], self.buf[n:]
            return status, hdrs, body
        while True:
            try:
                self.fill()
            except EOFError:
                break
        body, self.buf = self.buf, b""
        return status, hdrs, body

    def close(self):
        self.sock.close()


def reuse(argv):
    """Which box-side connection each request of a client connection used
    (the http server's peer_port)."""
    host, port, tok = argv[0], int(argv[1]), argv[2]
    seqs = [
        ("get_get", [("GET", "/a", None), ("GET", "/b", None)]),
        ("post_body_get", [("GET", "/a", None), ("POST", "/b", b"x" * 100), ("GET", "/c", None)]),
        ("post_nobody_get", [("POST", "/a", None), ("GET", "/b", None)]),
        ("post_len0_get", [("POST", "/a", b""), ("GET", "/b", None)]),
        ("put_body_get", [("PUT", "/a", b"data"), ("GET", "/b", None)]),
        ("get_body_get", [("GET", "/a", b"hello"), ("GET", "/b", None)]),
        ("delete_get", [("DELETE", "/a", None), ("GET", "/b", None)]),
        ("options_get", [("OPTIONS", "/a", None), ("GET", "/b", None)]),
    ]
    out = {}
    for name, reqs in seqs:
        c = RawConn(host, port)
        res = []
        try:
            for method, path, body in reqs:
                c.send(method, "/p/%s/%s%s" % (tok, name, path), body=body)
                status, _, rb = c.reply(method)
                peer = None
                if status == 200:
                    try:
                        peer = json.loads(rb)["peer_port"]
                    except ValueError:
                        pass
                res.append([status, peer])
        except (OSError, EOFError, ValueError) as e:
            res.append(["error", str(e)])
        c.close()
        out[name] = res
    print(json.dumps(out))
    return 0


def frontshare(argv):
    """Two people's requests, one after the other, on one client
    connection, as a front proxy that shares its connections sends them:
    the first POSTs a body that is a request head to an endpoint that
    ignores bodies, the second carries a secret cookie."""
    host, port, tok = argv[0], int(argv[1]), argv[2]
    secret = argv[3] if len(argv) > 3 else "VICTIM-SECRET-42"
    # its body: "note=" and the first 75 bytes of what follows on the
    # connection to the box (the next request's head, if it came there)
    smuggled = b"POST /notes HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 80\r\n\r\nnote="
    c = RawConn(host, port, timeout=10)
    out = {}
    try:
        c.send("POST", "/p/%s/ping" % tok, body=smuggled)
        st, _, b = c.reply()
        out["first"] = [st, b.decode("latin-1")]
        time.sleep(0.2)
        c.sock.sendall(("GET /p/%s/home HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: session=%s\r\n"
                        "User-Agent: another-person\r\n\r\n" % (tok, secret)).encode())
        st, _, b = c.reply()
        out["second"] = [st, b.decode("latin-1")]
    except (OSError, EOFError, ValueError) as e:
        out.setdefault("first", ["error", str(e)])
        out.setdefault("second", ["error", str(e)])
    c.close()
    print(json.dumps(out))
    return 0


def slowbody(argv):
    """Requests whose body does not come: N connections, each a POST head
    announcing 100000 bytes, then 3 of them, held for SECONDS (or until
    the file of --until exists); with --finish, then the rest of each
    body, and at most 10 s for the answers."""
    host, port, path, n, seconds = argv[0], int(argv[1]), argv[2], int(argv[3]), float(argv[4])
    loopback_only(host, "slowbody")
    headers = ""
    until = None
    finish = False
    i = 5
    while i < len(argv):
        if argv[i] == "--header":
            headers += argv[i + 1] + "\r\n"
            i += 2
        elif argv[i] == "--until":
            until = argv[i + 1]
            i += 2
        elif argv[i] == "--finish":
            finish = True
            i += 1
        else:
            raise SystemExit("slowbody: unknown argument " + argv[i])
    total = 100000
    head = ("POST %s HTTP/1.1\r\nHost: %s:%d\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n"
            % (path, host, port, headers, total)).encode()
    socks = []
    for _ in range(n):
        try:
            s = socket.create_connection((host, port), timeout=5)
            s.sendall(head + b"abc")
            socks.append(s)
        except OSError:
            pass
    print("opened %d" % len(socks), flush=True)
    got = {}
    closed = set()

    def watch(end, stop=lambda: False):
        while time.monotonic() < end and len(closed) < len(socks) and not stop():
            live = [s for s in socks if s not in closed]
            r, _, _ = select.select(live, [], [], max(0.0, min(0.2, end - time.monotonic())))
            for s in r:
                try:
                    d = s.recv(65536)
                except OSError:
                    d = b""
                if not d:
                    closed.add(s)
                    continue
                if s not in got:
                    got[s] = d
                    print("answered %d" % len(got), flush=True)
                else:
                    got[s] += d

    watch(time.monotonic() + seconds, lambda: until is not None and os.path.exists(until))
    print("held", flush=True)
    if finish:
        for s in socks:
            if s in closed or s in got:
                continue
            try:
                s.sendall(b"x" * (total - 3))
            except OSError:
                pass
        watch(time.monotonic() + 10, lambda: all(s in got or s in closed for s in socks))
    statuses = []
    for s in socks:
        first = got.get(s, b"").split(b"\r\n", 1)[0].split(b" ")
        statuses.append(first[1].decode() if len(first) > 1 else "none")
        s.close()
    print("statuses " + " ".join(sorted(statuses)), flush=True)
    return 0


def flood(argv):
    """N rounds of a GET of each PATH, alternating, over one keep-alive
    connection (another when the server closes it)."""
    import http.client
    host, port, n, paths = argv[0], int(argv[1]), int(argv[2]), argv[3:]
    loopback_only(host, "flood")
    codes = {}
    conns = 1
    c = http.client.HTTPConnection(host, port, timeout=30)
    for _ in range(n):
        for p in paths:
            for attempt in range(2):
                try:
                    c.request("GET", p)
                    r = c.getresponse()
                    r.read()
                    codes[r.status] = codes.get(r.status, 0) + 1
                    break
                except (OSError, http.client.HTTPException):
                    c.close()
                    c = http.client.HTTPConnection(host, port, timeout=30)
                    conns += 1
    c.close()
    print(json.dumps({"codes": codes, "connections": conns}))
    return 0


def ws_open(url, headers=()):
    """A WebSocket handshake; returns (socket, status) -- the socket is
    None when it failed."""
    host, port, path, hosthdr = parse_ws_url(url)
    loopback_only(host, "websocket client")
    sock = socket.create_connection((host, port), timeout=20)
    key = base64.b64encode(os.urandom(16)).decode()
    req = ("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n" % (path, hosthdr, key))
    for h in headers:
        req += h + "\r\n"
    sock.sendall((req + "\r\n").encode())
    try:
        head, _ = read_head(sock)
    except (EOFError, ValueError, OSError) as e:
        sock.close()
        return None, "none (%s)" % e
    parts = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
    status = parts[1] if len(parts) > 1 else "?"
    if status != "101":
        sock.close()
        return None, status
    return sock, status


def wait_eof(sock, seconds):
    """Reads (and drops) what comes until the other side ends the
    connection (True) or SECONDS pass (False)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        r, _, _ = select.select([sock], [], [], max(0.0, end - time.monotonic()))
        if not r:
            break
        try:
            if not sock.recv(65536):
                return True
        except OSError:
            return True
    return False


def wshold(argv):
    url = argv[0]
    wait = float(argv[argv.index("--wait") + 1]) if "--wait" in argv else 30.0
    linger = float(argv[argv.index("--linger") + 1]) if "--linger" in argv else 0.0
    sock, status = ws_open(url)
    print("handshake", status, flush=True)
    if not sock:
        return 1
    print("holding", flush=True)
    cut = wait_eof(sock, wait)
    print("closed" if cut else "still open", flush=True)
    if cut and linger > 0:
        # the socket stays open on this side: the other must not spin on it
        print("lingering", flush=True)
        time.sleep(linger)
    sock.close()
    print("done", flush=True)
    return 0 if cut else 1


def wsping(argv):
    url = argv[0]
    at = [float(x) for x in argv[argv.index("--at") + 1].split(",")]
    sock, status = ws_open(url)
    print("handshake", status, flush=True)
    if not sock:
        return 1
    t0 = time.monotonic()
    closed = False
    for t in at:
        time.sleep(max(0.0, t0 + t - time.monotonic()))
        msg = b"ping-%g" % t
        try:
            sock.sendall(make_frame(1, msg, True))
            sock.settimeout(3)
            fin, op, data, _ = read_frame(sock)
            ok = op == 1 and data == msg
            print("at %g %s" % (t, "echo" if ok else "other"), flush=True)
        except socket.timeout:
            print("at %g no echo" % t, flush=True)
        except (EOFError, OSError):
            print("at %g closed" % t, flush=True)
            closed = True
            break
    if not closed:
        closed = wait_eof(sock, 20)
    print("eof" if closed else "still open", flush=True)
    sock.close()
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
