#!/usr/bin/env python3
"""An https server of OAuth clients' metadata documents for
tests/oauth/cimd.sh: `cimd_server.py CERT KEY DIR` listens on 127.0.0.1
(a free port, printed as the first line of DIR/port) and answers
GET /NAME from DIR/NAME.json, a JSON object {"status", "headers", "body"}
("body" a string, or any JSON value, which is sent as JSON text, with
"@URL@" replaced by the document's own URL, https://localhost:PORT/NAME;
"delay": seconds to wait before answering, a slow server), read at each
request; 404 without one.  Each request's path is appended
to DIR/hits."""
import http.server
import json
import os
import ssl
import sys
import time

CERT, KEY, DIR = sys.argv[1:4]


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        name = self.path.lstrip("/").split("?")[0]
        with open(os.path.join(DIR, "hits"), "a") as f:
            f.write(self.path + "\n")
        spec = None
        if name and "/" not in name and not name.startswith("."):
            try:
                with open(os.path.join(DIR, name + ".json")) as f:
                    spec = json.load(f)
            except OSError:
                spec = None
        if spec is None:
            spec = {"status": 404, "body": ""}
        if spec.get("delay"):
            time.sleep(float(spec["delay"]))
        body = spec.get("body", "")
        if not isinstance(body, str):
            body = json.dumps(body)
        url = "https://localhost:%d/%s" % (self.server.server_address[1], name)
        data = body.replace("@URL@", url).encode()
        self.send_response(spec.get("status", 200))
        for k, v in spec.get("headers", {"Content-Type": "application/json"}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(CERT, KEY)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
with open(os.path.join(DIR, "port.tmp"), "w") as f:
    f.write("%d\n" % srv.server_address[1])
os.rename(os.path.join(DIR, "port.tmp"), os.path.join(DIR, "port"))
srv.serve_forever()
