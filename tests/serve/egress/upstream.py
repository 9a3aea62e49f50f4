#!/usr/bin/env python3
"""Upstream test servers for the egress suite, run inside a network
namespace the suite creates (nothing leaves the machine).

  upstream.py DIR ADDR

serves, until killed:
  - HTTP on ADDR:80 and HTTPS on ADDR:443 (DIR/server.pem, DIR/server.key),
    HTTPS also on ADDR:8443 (and on ADDR:9443 with a self-signed
    certificate nobody trusts): every request is logged as one JSON line to
    DIR/requests.log (method, path, headers, body) and answered with the
    same JSON (an echo server); /redirect answers 302 to
    https://other.test/landing;
  - DNS on ADDR:53 (UDP): answers from DIR/zone.json, re-read at every
    query: {"name": ["1.2.3.4", ...]} or {"name": [[first answers], [later
    answers]]} (rebinding: the first query of a name gets the first list,
    every later one the second); every question is logged to DIR/dns.log.
  - a stateful endpoint: /store keeps the request's Authorization header,
    /recall (on any host and port) answers it back in a header and in the
    body raw, base64 and percent-encoded; /recall-chunked the same in
    chunks of 3 bytes (a value split across chunks).
  - an upstream that ignores Accept-Encoding: /coded/CODING/REST answers as
    REST would (/echo: the echo), its body gzip-compressed and sent with
    Content-Encoding: CODING.
"""
import base64, gzip, json, os, socket, ssl, struct, sys, threading, urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIR, ADDR = sys.argv[1], sys.argv[2]
lock = threading.Lock()
seen = {}
stored = {}


def log(name, obj):
    with lock, open(os.path.join(DIR, name), "a") as f:
        f.write(json.dumps(obj) + "\n")


class Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def setup(self):
        super().setup()
        # Small replies go out at once (no Nagle + delayed-ACK stalls).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode("latin-1") if n else ""
        rec = {"method": self.command, "path": self.path, "headers": dict(self.headers.items()),
               "body": body, "port": self.server.server_address[1]}
        log("requests.log", rec)
        coding = None
        if self.path.startswith("/coded/"):
            _, _, coding, rest = (self.path + "/").split("/", 3)
            self.path = "/" + rest.rstrip("/")
            rec["path"] = self.path

        def send_body(out):
            if coding:
                out = gzip.compress(out)
                self.send_header("Content-Encoding", coding)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
        if self.path.startswith("/bytes/"):
            # A large body for throughput benchmarks (bench/egress.sh).
            n = int(self.path.split("/")[2])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            block = b"x" * 65536
            while n > 0:
                k = min(n, len(block))
                self.wfile.write(block[:k])
                n -= k
            return
        if self.path.startswith("/store"):
            with lock:
                stored["auth"] = self.headers.get("Authorization") or ""
        if self.path.startswith("/recall"):
            with lock:
                v = stored.get("auth", "")
            out = json.dumps({"stored": v, "b64": base64.b64encode(v.encode()).decode(),
                              "pct": urllib.parse.quote(v, safe="")}).encode()
            self.send_response(200)
            self.send_header("X-Stored", v)
            if self.path.startswith("/recall-chunked"):
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for i in range(0, len(out), 3):
                    part = out[i:i + 3]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.write(b"0\r\n\r\n")
                return
            send_body(out)
            return
        if self.path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", "https://other.test/landing")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        out = json.dumps(rec).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if self.path.startswith("/chunked"):
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(out), 7):
                part = out[i:i + 7]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        send_body(out)

    do_GET = do_POST = do_PUT = do_HEAD = handle_any


def serve_http(port, tls, cert="server"):
    srv = ThreadingHTTPServer((ADDR, port), Echo)
    srv.daemon_threads = True
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(DIR, cert + ".pem"), os.path.join(DIR, cert + ".key"))
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.serve_forever()


def dns_name(pkt, off):
    labels = []
    while pkt[off]:
        l = pkt[off]
        labels.append(pkt[off + 1:off + 1 + l].decode("ascii", "replace"))
        off += 1 + l
    return ".".join(labels).lower(), off + 1


def serve_dns():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((ADDR, 53))
    while True:
        pkt, peer = s.recvfrom(1500)
        try:
            name, off = dns_name(pkt, 12)
            qtype, = struct.unpack("!H", pkt[off:off + 2])
        except Exception:
            continue
        log("dns.log", {"name": name, "type": qtype})
        try:
            zone = json.load(open(os.path.join(DIR, "zone.json")))
        except Exception:
            zone = {}
        ans = zone.get(name)
        rcode = 0 if ans is not None else 3
        addrs = []
        if ans is not None:
            if ans and isinstance(ans[0], list):
                with lock:
                    k = (name, qtype)
                    n = seen.get(k, 0)
                    seen[k] = n + 1
                ans = ans[0] if n == 0 else ans[1]
            fam = socket.AF_INET if qtype == 1 else socket.AF_INET6
            for a in ans:
                try:
                    addrs.append(socket.inet_pton(fam, a))
                except OSError:
                    pass
        hdr = struct.pack("!HHHHHH", struct.unpack("!H", pkt[:2])[0], 0x8180 | rcode, 1, len(addrs), 0, 0)
        body = pkt[12:off + 4]
        for a in addrs:
            body += struct.pack("!HHHIH", 0xc00c, qtype, 1, 5, len(a)) + a
        s.sendto(hdr + body, peer)


for target, args in ((serve_http, (80, False)), (serve_http, (443, True)), (serve_http, (8443, True)),
                     (serve_http, (9443, True, "self")),
                     (serve_dns, ())):
    threading.Thread(target=target, args=args, daemon=True).start()
open(os.path.join(DIR, "ready"), "w").close()
threading.Event().wait()
