#!/usr/bin/env python3
"""The fetch_url suite's extra upstream: plain HTTP on ADDR:8080, run inside
the network namespace the suite makes (nothing leaves the machine).

  upstream.py DIR ADDR

  /random/N      N pseudo-random bytes (seeded by N), with Content-Length
  /stream/N      the same, without Content-Length (ends at the close)
  /stall         a head, one byte, then nothing for 60 s
  /to-ok         302 to /random/1000
  /to-denied     302 to http://denied.test:8080/x
  /to-ftp        302 to ftp://files.test/x
  /loop          302 to /loop
every request is logged as a JSON line to DIR/fetch.log."""
import json, os, random, socket, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIR, ADDR = sys.argv[1], sys.argv[2]


def body(n):
    return random.Random(n).randbytes(n)


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def redirect(self, to):
        self.send_response(302)
        self.send_header("Location", to)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        with open(os.path.join(DIR, "fetch.log"), "a") as f:
            f.write(json.dumps({"path": self.path, "headers": dict(self.headers.items())}) + "\n")
        p = self.path
        if p.startswith("/random/") or p.startswith("/stream/"):
            b = body(int(p.split("/")[2]))
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            if p.startswith("/random/"):
                self.send_header("Content-Length", str(len(b)))
            else:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(b)
        elif p == "/stall":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"x")
            self.wfile.flush()
            time.sleep(60)
        elif p == "/to-ok":
            self.redirect("/random/1000")
        elif p == "/to-denied":
            self.redirect("http://denied.test:8080/x")
        elif p == "/to-ftp":
            self.redirect("ftp://files.test/x")
        elif p == "/loop":
            self.redirect("/loop")
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()


srv = ThreadingHTTPServer((ADDR, 8080), H)
srv.daemon_threads = True
open(os.path.join(DIR, "fetch.ready"), "w").close()
srv.serve_forever()
