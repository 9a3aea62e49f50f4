#!/usr/bin/env python3
"""A forwarding HTTP proxy on loopback for tests/template/debian.sh: that
debootstrap is given husk's http_proxy shows in its log.

  fwdproxy.py LOG   prints its port, then serves until killed; every request
                    (absolute-form GET/HEAD, or CONNECT) is one line of LOG.
"""
import http.client, select, socket, sys, threading, urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = sys.argv[1]
lock = threading.Lock()


def log(line):
    with lock, open(LOG, "a") as f:
        f.write(line + "\n")


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        log("%s %s" % (self.command, self.path))
        if u.scheme != "http" or not u.hostname:
            self.send_error(400)
            return
        c = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=60)
        hdrs = {k: v for k, v in self.headers.items()
                if k.lower() not in ("proxy-connection", "connection", "keep-alive")}
        c.request(self.command, (u.path or "/") + ("?" + u.query if u.query else ""), headers=hdrs)
        r = c.getresponse()
        body = r.read()
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_HEAD = do_GET

    def do_CONNECT(self):
        log("CONNECT %s" % self.path)
        host, _, port = self.path.rpartition(":")
        try:
            up = socket.create_connection((host, int(port)), timeout=60)
        except OSError:
            self.send_error(502)
            return
        self.send_response(200)
        self.end_headers()
        a, b = self.connection, up
        while True:
            r, _, _ = select.select([a, b], [], [], 120)
            if not r:
                break
            for s in r:
                d = s.recv(65536)
                if not d:
                    return
                (b if s is a else a).sendall(d)


srv = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
srv.daemon_threads = True
print(srv.server_address[1], flush=True)
srv.serve_forever()
