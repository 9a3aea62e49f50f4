#!/usr/bin/env python3
"""A flood of forged link fetches from many loopback addresses, with valid
fetches of the same link sent meanwhile, from a flooding address and from
one that floods nothing.
  link_flood.py FORGED_URL VALID_URL --sources N --per-source M
Sources are 127.0.0.10 .. 127.0.0.(9+N) (every 127/8 address is loopback);
the first of them alternates forged and valid fetches, the address
127.0.0.250 sends only valid ones while the others flood.  Prints
"forged_403 forged_429 forged_other valid_200 valid_other"."""
import argparse, http.client, threading, urllib.parse

ap = argparse.ArgumentParser()
ap.add_argument("forged")
ap.add_argument("valid")
ap.add_argument("--sources", type=int, default=30)
ap.add_argument("--per-source", type=int, default=50)
a = ap.parse_args()
lock = threading.Lock()
counts = {"f403": 0, "f429": 0, "fother": 0, "v200": 0, "vother": 0}


def fetch(conn, url):
    u = urllib.parse.urlsplit(url)
    conn.putrequest("GET", u.path + "?" + u.query, skip_host=True, skip_accept_encoding=True)
    conn.putheader("host", u.netloc)
    conn.endheaders()
    r = conn.getresponse()
    r.read()
    if r.getheader("connection", "").lower() == "close":
        conn.close()
    return r.status


def tally(kind, status):
    with lock:
        if kind == "f":
            counts["f403" if status == 403 else "f429" if status == 429 else "fother"] += 1
        else:
            counts["v200" if status == 200 else "vother"] += 1


def conn_from(addr):
    u = urllib.parse.urlsplit(a.forged)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=60, source_address=(addr, 0))


def flooder(i):
    c = conn_from(f"127.0.0.{10 + i}")
    for _ in range(a.per_source):
        tally("f", fetch(c, a.forged))
        if i == 0:
            tally("v", fetch(c, a.valid))
    c.close()


threads = [threading.Thread(target=flooder, args=(i,)) for i in range(a.sources)]
for t in threads:
    t.start()
bystander = conn_from("127.0.0.250")
n = 0
while n < 20 or any(t.is_alive() for t in threads):
    tally("v", fetch(bystander, a.valid))
    n += 1
for t in threads:
    t.join()
print(counts["f403"], counts["f429"], counts["fother"], counts["v200"], counts["vother"])
