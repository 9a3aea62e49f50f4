#!/usr/bin/env python3
"""Run inside a test box: hostile and raw clients of the egress proxy.

  boxclient.py raw PROXY_HOST PORT PYTHON_BYTES   send, print the status line
  boxclient.py sni PROXY_HOST HOST:PORT SNI|-      CONNECT, then TLS with SNI
  boxclient.py plain PROXY_HOST HOST:PORT          CONNECT, then plain HTTP inside
  boxclient.py hold PROXY_HOST N                  N idle connections, then one
                                                  request: print its status
  boxclient.py halfhello PROXY_HOST N [hold]      N partial TLS hellos on the
                                                  transparent port, closed (then
                                                  a CONNECT's status) or held
  boxclient.py idle PROXY_HOST                    print "closed" when the proxy
                                                  hangs up on an idle connection
  boxclient.py tcp HOST PORT                      direct TCP connect
  boxclient.py udp HOST PORT NAME                 one DNS A query
  boxclient.py dns HOST N NAME...                 N A queries for each NAME, one
                                                  at a time: print sent= answered=
  boxclient.py dnsflood HOST N SUFFIX             the same for N distinct names
                                                  d<i>.SUFFIX, one query each
"""
import ast, os, socket, ssl, struct, sys, time

cmd = sys.argv[1]


def status_line(s):
    s.settimeout(15)
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError as e:
        return "error %s" % e.__class__.__name__
    return data.split(b"\r\n")[0].decode("latin-1") or "closed"


if cmd == "raw":
    s = socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=10)
    s.sendall(eval(sys.argv[4]))  # test input: bytes expressions
    print(status_line(s))
elif cmd == "sni":
    s = socket.create_connection((sys.argv[2], 3128), timeout=10)
    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (sys.argv[3].encode(), sys.argv[3].encode()))
    print(status_line(s))
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    sni = None if sys.argv[4] == "-" else sys.argv[4]
    try:
        t = ctx.wrap_socket(s, server_hostname=sni)
        t.sendall(b"GET /sni-test HTTP/1.1\r\nHost: x\r\n\r\n")
        print("tls ok", t.recv(100)[:12])
    except (OSError, ssl.SSLError) as e:
        print("tls refused", e.__class__.__name__)
elif cmd == "plain":
    # CONNECT, wait for the 200, then speak plain HTTP inside the tunnel.
    s = socket.create_connection((sys.argv[2], 3128), timeout=10)
    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (sys.argv[3].encode(), sys.argv[3].encode()))
    print(status_line(s))
    try:
        s.sendall(b"GET /not-tls HTTP/1.1\r\nHost: x\r\n\r\n")
        print("inner:", status_line(s))
    except OSError as e:
        print("inner: error", e.__class__.__name__)
elif cmd == "hold":
    n = int(sys.argv[3])
    held = [socket.create_connection((sys.argv[2], 3128), timeout=10) for _ in range(n)]
    time.sleep(0.5)
    s = socket.create_connection((sys.argv[2], 3128), timeout=10)
    s.sendall(b"CONNECT api.ex.test:443 HTTP/1.1\r\nHost: api.ex.test:443\r\n\r\n")
    print(status_line(s))
elif cmd == "halfhello":
    # N connections to the transparent TLS port, each with the first bytes
    # of a ClientHello that announces more, then closed (or, with "hold",
    # kept open); then a CONNECT, retried while it gets 429: print its status.
    n, hold = int(sys.argv[3]), len(sys.argv) > 4 and sys.argv[4] == "hold"
    partial = b"\x16\x03\x01" + struct.pack(">H", 200) + b"\x01\x00\x00\xc4\x03"
    held = []
    for _ in range(n):
        c = socket.create_connection((sys.argv[2], 3443), timeout=10)
        c.sendall(partial)
        held.append(c)
    if hold:
        print("holding", flush=True)
        time.sleep(120)
        sys.exit(0)
    for c in held:
        c.close()
    line = ""
    for _ in range(20):
        time.sleep(0.5)
        s = socket.create_connection((sys.argv[2], 3128), timeout=10)
        s.sendall(b"CONNECT api.ex.test:443 HTTP/1.1\r\nHost: api.ex.test:443\r\n\r\n")
        line = status_line(s)
        s.close()
        if " 429 " not in line:
            break
    print(line)
elif cmd == "idle":
    s = socket.create_connection((sys.argv[2], 3128), timeout=60)
    try:
        print("closed" if s.recv(10) == b"" else "data")
    except OSError as e:
        print("error", e.__class__.__name__)
elif cmd == "tcp":
    try:
        socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=3)
        print("connected")
    except OSError as e:
        print("error", e.__class__.__name__, e.errno)
elif cmd == "udp":
    q = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    for l in sys.argv[4].split("."):
        q += bytes([len(l)]) + l.encode()
    q += b"\0" + struct.pack("!HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    try:
        s.sendto(q, (sys.argv[2], int(sys.argv[3])))
        r = s.recv(1500)
        print("rcode", r[3] & 15, "answers", struct.unpack("!H", r[6:8])[0])
    except OSError as e:
        print("error", e.__class__.__name__)
elif cmd in ("dns", "dnsflood"):
    n = int(sys.argv[3])
    if cmd == "dns":
        names = [name for _ in range(n) for name in sys.argv[4:]]
    else:
        names = ["d%d.%s" % (i, sys.argv[4]) for i in range(n)]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    sent = answered = 0
    for i, name in enumerate(names):
        qid = i & 0xffff
        q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
        for l in name.split("."):
            q += bytes([len(l)]) + l.encode()
        q += b"\0" + struct.pack("!HH", 1, 1)
        s.sendto(q, (sys.argv[2], 53))
        sent += 1
        try:
            while True:  # no retry: each question is asked once
                r = s.recv(1500)
                if struct.unpack("!H", r[:2])[0] == qid:
                    answered += 1
                    break
        except OSError:
            pass
    print("sent=%d answered=%d" % (sent, answered))
