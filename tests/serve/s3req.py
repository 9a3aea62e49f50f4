#!/usr/bin/env python3
"""One S3 request signed with SigV4 by this script (Python's hmac and
hashlib only): an independent signer for the storage suites, able to send
what real clients would not (wrong hashes, odd dates, aws-chunked bodies).

  s3req.py METHOD URL [-H 'Name: value']... [--data STR | --data-file F]
           [--payload HASH|UNSIGNED-PAYLOAD] [--date YYYYMMDDTHHMMSSZ]
           [--chunked SIZE [--bad-chunk]] [--out FILE] [--headers FILE]
           [--raw] [--repeat N] [--kill PID] [--trickle SECONDS]

Credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.  Prints the
status code.  --raw sends the URL as it is, unsigned (a presigned link);
--repeat sends the request N times on one connection and prints every
status; --kill SIGKILLs PID the moment the (last) reply is read;
--trickle sends the body one byte every SECONDS (a slow upload)."""
import argparse, datetime, hashlib, hmac, http.client, os, sys, urllib.parse

ap = argparse.ArgumentParser()
ap.add_argument("method")
ap.add_argument("url")
ap.add_argument("-H", action="append", default=[])
ap.add_argument("--data")
ap.add_argument("--data-file")
ap.add_argument("--payload")
ap.add_argument("--date")
ap.add_argument("--chunked", type=int)
ap.add_argument("--bad-chunk", action="store_true")
ap.add_argument("--trailer", choices=["signed", "unsigned"])
ap.add_argument("--bad-trailer", action="store_true")
ap.add_argument("--region", default="us-east-1")
ap.add_argument("--out", default=os.devnull)
ap.add_argument("--headers", default=os.devnull)
ap.add_argument("--raw", action="store_true")
ap.add_argument("--repeat", type=int, default=1)
ap.add_argument("--kill", type=int)
ap.add_argument("--trickle", type=float)
a = ap.parse_args()

ak = os.environ.get("AWS_ACCESS_KEY_ID", "")
sk = os.environ.get("AWS_SECRET_ACCESS_KEY", "")
u = urllib.parse.urlsplit(a.url)
body = b""
if a.data is not None:
    body = a.data.encode()
if a.data_file:
    body = open(a.data_file, "rb").read()
amz_date = a.date or datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
date = amz_date[:8]
scope = f"{date}/{a.region}/s3/aws4_request"

def q(s, safe):
    """Decode once (as bytes: keys need not be UTF-8), encode once."""
    return urllib.parse.quote_from_bytes(urllib.parse.unquote_to_bytes(s), safe=safe)

def canon_query(raw):
    pairs = []
    for part in raw.split("&") if raw else []:
        if not part:
            continue
        k, _, v = part.partition("=")
        pairs.append((q(k, "-_.~"), q(v, "-_.~")))
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))

def hm(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()

kdate = hm(("AWS4" + sk).encode(), date)
kreg = hm(kdate, a.region)
ksvc = hm(kreg, "s3")
ksign = hm(ksvc, "aws4_request")

headers = {"host": u.netloc, "x-amz-date": amz_date}
wire = body
import base64, zlib
crc = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
# --bad-trailer sends another value than the one signed (signed trailer)
# or than the body's (unsigned trailer).
trailer_signed = f"x-amz-checksum-crc32:{crc}"
trailer_line = "x-amz-checksum-crc32:AAAAAA==" if a.bad_trailer else trailer_signed
if a.chunked:
    payload = {None: "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
               "signed": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
               "unsigned": "STREAMING-UNSIGNED-PAYLOAD-TRAILER"}[a.trailer]
    headers["content-encoding"] = "aws-chunked"
    headers["x-amz-decoded-content-length"] = str(len(body))
    if a.trailer:
        headers["x-amz-trailer"] = "x-amz-checksum-crc32"
else:
    payload = a.payload or hashlib.sha256(body).hexdigest()
headers["x-amz-content-sha256"] = payload
# Headers given with -H come last: they may override the ones above.
for h in a.H:
    n, _, v = h.partition(":")
    headers[n.strip().lower()] = v.strip()

def sign_headers(extra_len=None):
    hs = dict(headers)
    if extra_len is not None:
        hs["content-length"] = str(extra_len)
    names = sorted(hs)
    canon = "\n".join([
        a.method,
        q(u.path or "/", "/-_.~"),
        canon_query(u.query),
        "".join(f"{n}:{' '.join(hs[n].split())}\n" for n in names),
        ";".join(names),
        payload,
    ])
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canon.encode()).hexdigest()])
    sig = hmac.new(ksign, sts.encode(), hashlib.sha256).hexdigest()
    hs["authorization"] = (f"AWS4-HMAC-SHA256 Credential={ak}/{scope}, "
                           f"SignedHeaders={';'.join(names)}, Signature={sig}")
    return hs, sig

if a.chunked:
    # The framed length depends only on the sizes: sign the request with
    # it, then sign the chunks (chained from the request's signature).
    sizes = []
    rest = len(body)
    while rest > 0:
        sizes.append(min(a.chunked, rest))
        rest -= sizes[-1]
    sizes.append(0)
    signed = a.trailer != "unsigned"
    ext = lambda n: f"{n:x};chunk-signature=" + "0" * 64 if signed else f"{n:x}"
    framed_len = sum(len(ext(n)) + 2 + n + 2 for n in sizes)
    if a.trailer:
        framed_len += -2 + len(trailer_line) + 2 + (len("x-amz-trailer-signature:") + 64 + 2 if signed else 0) + 2
    hs, prev = sign_headers(framed_len)
    out, off = [], 0
    empty = hashlib.sha256(b"").hexdigest()
    for i, n in enumerate(sizes):
        data = body[off:off + n]
        off += n
        if signed:
            sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, prev, empty,
                             hashlib.sha256(data).hexdigest()])
            prev = hmac.new(ksign, sts.encode(), hashlib.sha256).hexdigest()
            head = f"{n:x};chunk-signature={prev}\r\n"
        else:
            head = f"{n:x}\r\n"
        if a.bad_chunk and i == 1:
            # Flip a bit, so the byte differs whatever it was (an empty
            # chunk gains one).
            data = bytes([data[0] ^ 0x01]) + data[1:] if data else b"X"
        if n == 0 and a.trailer:
            t = trailer_line + "\r\n"
            if signed:
                sts = "\n".join(["AWS4-HMAC-SHA256-TRAILER", amz_date, scope, prev,
                                 hashlib.sha256((trailer_signed + "\n").encode()).hexdigest()])
                t += "x-amz-trailer-signature:" + hmac.new(ksign, sts.encode(), hashlib.sha256).hexdigest() + "\r\n"
            out.append(head.encode() + t.encode() + b"\r\n")
        else:
            out.append(head.encode() + data + b"\r\n")
    wire = b"".join(out)
    assert len(wire) == framed_len, (len(wire), framed_len)
elif a.raw:
    hs = {"host": u.netloc}
    for h in a.H:
        n, _, v = h.partition(":")
        hs[n.strip().lower()] = v.strip()
else:
    hs, _ = sign_headers()

c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
path = u.path + ("?" + u.query if u.query else "")
codes = []
for i in range(a.repeat):
    c.putrequest(a.method, path, skip_host=True, skip_accept_encoding=True)
    for n, v in hs.items():
        c.putheader(n, v)
    if "content-length" not in hs:
        c.putheader("content-length", str(len(wire)))
    c.endheaders()
    if a.trickle:
        import time
        for j in range(len(wire)):
            c.send(wire[j:j + 1])
            time.sleep(a.trickle)
    else:
        c.send(wire)
    r = c.getresponse()
    data = r.read()
    codes.append(str(r.status))
    if r.getheader("connection", "").lower() == "close":
        c.close()
if a.kill:
    import signal
    os.kill(a.kill, signal.SIGKILL)
open(a.out, "wb").write(data)
with open(a.headers, "w") as f:
    for n, v in r.getheaders():
        f.write(f"{n}: {v}\n")
print(" ".join(codes))
