#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz harnesses (tests/fuzz/corpus/TARGET/):
small valid inputs, in each harness's input format (see its header).
Run from anywhere; the output is committed, so this only needs running
again when a harness's input format changes."""
import gzip
import hashlib
import hmac
import io
import json
import os
import shutil
import ssl
import struct
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")


def put(target, name, data, keep=False):
    d = os.path.join(OUT, target)
    if keep and os.path.exists(os.path.join(d, name)):
        return
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def egress_http():
    put("egress_http", "get", b"\0GET http://example.com/a?b=c HTTP/1.1\r\nHost: example.com\r\n"
        b"User-Agent: t\r\nProxy-Authorization: Basic eDp5\r\n\r\n")
    put("egress_http", "connect", b"\0CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
    put("egress_http", "post", b"\0POST /up HTTP/1.1\r\nHost: a.example\r\nContent-Length: 3\r\n"
        b"Connection: close\r\n\r\nabc")
    put("egress_http", "chunked", b"\0PUT /x HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: chunked\r\n\r\n")
    put("egress_http", "response", b"\1HTTP/1.1 200 OK\r\nContent-Length: 0\r\nServer: s\r\n\r\n")
    put("egress_http", "response-chunked", b"\1HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n")


def client_hello(name):
    ctx = ssl.create_default_context()
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=name)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def egress_sni():
    # Random bytes in each hello: committed ones are kept.
    put("egress_sni", "hello-example.com", client_hello("example.com"), keep=True)
    put("egress_sni", "hello-long-name", client_hello("a-b.c-d.sub.example.org"), keep=True)
    put("egress_sni", "hello-ip", client_hello("192.0.2.1"), keep=True)  # no SNI for an address


def dns_name(n):
    return b"".join(bytes([len(l)]) + l.encode() for l in n.split(".")) + b"\0"


def dns_query(qid, name, qtype):
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + dns_name(name) + struct.pack(">HH", qtype, 1)


def egress_dns():
    put("egress_dns", "query-a", b"\0" + dns_query(7, "example.com", 1))
    put("egress_dns", "query-aaaa", b"\x08" + dns_query(8, "www.example.org", 28))
    put("egress_dns", "query-txt", b"\x06" + dns_query(9, "x.example", 16))
    q = dns_query(0x1234, "example.com", 1)
    ans = bytearray(q)
    ans[2] = 0x81
    ans[3] = 0x80
    ans[7] = 2
    rr = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + bytes([93, 184, 216, 34])
    cname = b"\xc0\x0c" + struct.pack(">HHIH", 5, 1, 60, 4) + b"\x01a\xc0\x0c"
    put("egress_dns", "answer-a", b"\1" + bytes(ans) + cname + rr)
    q6 = dns_query(0x1234, "example.com", 28)
    a6 = bytearray(q6)
    a6[2], a6[3], a6[7] = 0x81, 0x80, 1
    rr6 = b"\xc0\x0c" + struct.pack(">HHIH", 28, 1, 60, 16) + bytes(range(16))
    put("egress_dns", "answer-aaaa", b"\3" + bytes(a6) + rr6)
    nx = bytearray(q)
    nx[2], nx[3] = 0x81, 0x83
    put("egress_dns", "answer-nxdomain", b"\1" + bytes(nx))


def egress_host():
    for i, s in enumerate([b"\0Example.COM.", b"\x08[2001:db8::1]", b"\0127.1", b"\x000x7f.1",
                           b"\1example.com:443", b"\x09example.com", b"\x09[::1]:8080",
                           b"\2" + b"0177.0.0.1", b"\x0310.0.0.0/8", b"\x032001:db8::/32",
                           b"\x041.1.1.1", b"\x04[2606:4700::1111]:53", b"\0xn--bcher-kva.example"]):
        put("egress_host", "s%02d" % i, s)


def api_json():
    bodies = [
        (0, {"name": "acme", "max_boxes": 10, "max_memory": "4G"}),
        (1, {"max_boxes": None, "max_memory": -1}),
        (2, {}),
        (3, {"template": "python", "memory": "512M", "cpus": 1.5, "pids": 64, "disk": "1G",
             "timeout": 30.5, "env": {"A": "1", "B": "x"}, "metadata": {"k": "v"},
             "network": "egress",
             "egress": {"allow": [{"host": "api.example.com", "ports": [443]}, "*.example.org"],
                        "secrets": [{"name": "TOKEN", "hosts": ["api.example.com"],
                                     "header": "Authorization"}]}}),
        (4, {"timeout": 600}),
        (5, {"value": "s3cr\u00e9t"}),
        (6, {"network": "none"}),
        (6, {"network": "egress", "egress": {"allow": ["example.com:443"]}}),
        (7, {"cmd": ["python3", "-c", "print(1)"], "env": {"X": "y"}, "cwd": "/workspace",
             "timeout": 5, "stdin": "in", "stream": False, "background": False,
             "output_limit": "1M"}),
        (8, {"signal": "TERM", "group": True}),
        (8, {"signal": 9}),
        (9, {"path": "a/b", "parents": True}),
        (10, {"from": "a", "to": "b", "overwrite": False}),
        (11, {"bucket": "b", "key": "k/x.txt", "expires_in": 3600, "filename": "x.txt"}),
        (12, {"path": "out.txt", "bucket": "b", "key": "k", "link": True, "expires_in": 60}),
        (13, {"path": "in", "bucket": "b", "key": "k.tar", "extract": True}),
    ]
    for i, (r, b) in enumerate(bodies):
        put("api_json", "r%02d" % i, bytes([r]) + json.dumps(b, ensure_ascii=False).encode())
    put("api_json", "empty", b"\3 \r\n")


def mcp():
    caps = {"io.modelcontextprotocol/protocolVersion": "2026-06-18",
            "io.modelcontextprotocol/clientCapabilities": {}}
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "c", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "a", "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "run_code", "arguments": {"code": "print(1)", "language": "python"},
                    "_meta": {"progressToken": 5}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
         "params": {"name": "sandbox_exec", "arguments": {"sandbox_id": "b-1", "cmd": ["ls"]}}},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
         "params": {"name": "sandbox_write_file",
                    "arguments": {"sandbox_id": "b-1", "path": "a.txt", "content": "x"}}},
        {"jsonrpc": "2.0", "id": 6, "method": "tools/call",
         "params": {"name": "job_wait", "arguments": {"job_id": "j-1", "timeout": 1}}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}},
        {"jsonrpc": "2.0", "id": 7, "method": "server/discover", "params": {"_meta": caps}},
        {"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {"_meta": caps}},
        {"jsonrpc": "2.0", "id": 9, "method": "resources/read", "params": {"uri": "x://y"}},
        {"jsonrpc": "2.0", "id": 10, "result": {}},
    ]
    for i, m in enumerate(msgs):
        put("mcp", "m%02d" % i, json.dumps(m))


def s3_xml():
    put("s3_xml", "complete", b"\0<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        b"<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        b"<Part><PartNumber>1</PartNumber><ETag>\"0cc175b9c0f1b6a831c399e269772661\"</ETag></Part>"
        b"<Part><ETag>92eb5ffee6ae2fec3ad71c777531578f</ETag><PartNumber>2</PartNumber>"
        b"<ChecksumCRC32>AAAAAA==</ChecksumCRC32></Part></CompleteMultipartUpload>")
    put("s3_xml", "delete", b"\1<Delete><Quiet>true</Quiet><Object><Key>a/b.txt</Key></Object>"
        b"<Object><Key>c&amp;d</Key><VersionId>null</VersionId></Object></Delete>")
    put("s3_xml", "create-bucket", b"\2<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        b"<LocationConstraint>eu-west-1</LocationConstraint></CreateBucketConfiguration>")


SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def enc(s, keep_slash):
    safe = b"-._~" + (b"/" if keep_slash else b"")
    out = ""
    for c in s.encode():
        if chr(c).isalnum() and c < 128 or c in safe:
            out += chr(c)
        else:
            out += "%%%02X" % c
    return out


def skey(date, region="us-east-1", service="s3"):
    k = ("AWS4" + SECRET).encode()
    for m in (date, region, service, "aws4_request"):
        k = hmac.new(k, m.encode(), hashlib.sha256).digest()
    return k


def canonical(method, path, query, headers, signed, payload):
    q = sorted((enc(k, False), enc(v, False)) for k, v in query if k != "X-Amz-Signature")
    qs = "&".join("%s=%s" % kv for kv in q)
    hs = "".join("%s:%s\n" % (h, headers[h]) for h in signed.split(";"))
    return "\n".join([method, enc(path, True), qs, hs, signed, payload])


def sign(amz_date, scope, canon):
    sts = "AWS4-HMAC-SHA256\n%s\n%s\n%s" % (amz_date, scope, hashlib.sha256(canon.encode()).hexdigest())
    return hmac.new(skey(amz_date[:8]), sts.encode(), hashlib.sha256).hexdigest()


def sigv4():
    amz = "20130524T000000Z"
    scope = "20130524/us-east-1/s3/aws4_request"
    payload = hashlib.sha256(b"").hexdigest()
    headers = {"host": "examplebucket.s3.amazonaws.com", "x-amz-date": amz,
               "x-amz-content-sha256": payload, "range": "bytes=0-9"}
    signed = "host;range;x-amz-content-sha256;x-amz-date"
    c = canonical("GET", "/test.txt", [], headers, signed, payload)
    sig = sign(amz, scope, c)
    authz = "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/%s, SignedHeaders=%s, Signature=%s" % (
        scope, signed, sig)
    lines = ["GET", "/test.txt", ""] + ["%s:%s" % (k, v) for k, v in headers.items()] + [
        "Authorization:" + authz]
    put("sigv4", "header-auth", "\n".join(lines))
    q = [("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
         ("X-Amz-Credential", "AKIAIOSFODNN7EXAMPLE/" + scope),
         ("X-Amz-Date", amz), ("X-Amz-Expires", "86400"), ("X-Amz-SignedHeaders", "host"),
         ("x-husk-link", "l-1")]
    c = canonical("GET", "/b/a file+%.txt", q, {"host": "h:7071"}, "host", "UNSIGNED-PAYLOAD")
    q.append(("X-Amz-Signature", sign(amz, scope, c)))
    qs = "&".join("%s=%s" % (enc(k, False), enc(v, False)) for k, v in q)
    put("sigv4", "presigned", "\n".join(["GET", enc("/b/a file+%.txt", True), qs, "host:h:7071"]))
    put("sigv4", "streaming", "\n".join([
        "PUT", "/b/k", "partNumber=1&uploadId=u",
        "host:h", "x-amz-date:" + amz, "x-amz-content-sha256:STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
        "x-amz-decoded-content-length:5",
        "authorization:AWS4-HMAC-SHA256 Credential=AK/%s,SignedHeaders=host;x-amz-content-sha256;"
        "x-amz-date,Signature=%s" % (scope, "0" * 64)]))


def chunked():
    key = bytes([1, 2, 3]) + bytes(29)
    amz = "20130524T000000Z"
    scope = "20130524/us-east-1/s3/aws4_request"
    empty = hashlib.sha256(b"").hexdigest()
    prev = "0" * 64
    body = b""
    for data in (b"hello ", b"world", b""):
        sts = "AWS4-HMAC-SHA256-PAYLOAD\n%s\n%s\n%s\n%s\n%s" % (
            amz, scope, prev, empty, hashlib.sha256(data).hexdigest())
        prev = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
        body += b"%x;chunk-signature=%s\r\n" % (len(data), prev.encode()) + data + (b"\r\n" if data else b"")
    put("chunked", "signed", b"\1\x07" + body + b"\r\n")
    trailer = "x-amz-checksum-crc32:DUoRhQ==\n"
    sts = "AWS4-HMAC-SHA256-TRAILER\n%s\n%s\n%s\n%s" % (amz, scope, prev, hashlib.sha256(trailer.encode()).hexdigest())
    tsig = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
    put("chunked", "signed-trailer", b"\3\x20" + body + b"x-amz-checksum-crc32:DUoRhQ==\r\n"
        b"x-amz-trailer-signature:" + tsig.encode() + b"\r\n\r\n")
    put("chunked", "unsigned-trailer", b"\2\x03" + b"5\r\nhello\r\n0\r\nX-Amz-Checksum-Crc32: NhCmhg==\r\n\r\n")


def tar_bytes(fmt, gz=False):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        def add(name, typ, data=b"", **kw):
            ti = tarfile.TarInfo(name)
            ti.type = typ
            ti.size = len(data)
            ti.mode = kw.get("mode", 0o644)
            ti.mtime = 1700000000
            for k, v in kw.items():
                setattr(ti, k, v)
            t.addfile(ti, io.BytesIO(data) if data else None)
        add("dir", tarfile.DIRTYPE, mode=0o755)
        add("dir/a.txt", tarfile.REGTYPE, b"hello\n")
        add("dir/link", tarfile.SYMTYPE, linkname="a.txt")
        add("dir/hard", tarfile.LNKTYPE, linkname="dir/a.txt")
        add("x" * 120 + "/long-name.txt", tarfile.REGTYPE, b"long")
        add("../escape", tarfile.REGTYPE, b"no")
        add("/abs/b", tarfile.REGTYPE, b"stripped", mode=0o4755)
        add("fifo", tarfile.FIFOTYPE)
    raw = buf.getvalue()
    return gzip.compress(raw, mtime=0) if gz else raw


def tar():
    put("tar", "ustar", b"\x07" + tar_bytes(tarfile.USTAR_FORMAT))
    put("tar", "pax", b"\x00" + tar_bytes(tarfile.PAX_FORMAT))
    put("tar", "gnu-gz", b"\x03" + tar_bytes(tarfile.GNU_FORMAT, gz=True))
    put("tar", "empty", b"\x00" + bytes(1024))


def snapshot_tar(fmt, hostile=False):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        def add(name, typ, data=b"", **kw):
            ti = tarfile.TarInfo(name)
            ti.type = typ
            ti.size = len(data)
            ti.mode = kw.pop("mode", 0o644)
            ti.mtime = 1700000000
            ti.uid = ti.gid = kw.pop("uid", 1000)
            for k, v in kw.items():
                setattr(ti, k, v)
            t.addfile(ti, io.BytesIO(data) if data else None)
        add("workspace/", tarfile.DIRTYPE, mode=0o755)
        add("workspace/a.txt", tarfile.REGTYPE, b"hello\n")
        add("workspace/link", tarfile.SYMTYPE, linkname="/etc/passwd")
        add("workspace/hard", tarfile.LNKTYPE, linkname="workspace/a.txt")
        add("workspace/fifo", tarfile.FIFOTYPE)
        add("tmp/", tarfile.DIRTYPE, mode=0o1777, uid=0)
        add("tmp/t", tarfile.REGTYPE, b"t")
        add("upper/", tarfile.DIRTYPE, mode=0o755, uid=0)
        ti = tarfile.TarInfo("upper/etc")
        ti.type = tarfile.DIRTYPE
        ti.mode = 0o755
        ti.pax_headers = {"SCHILY.xattr.trusted.overlay.opaque": "y"}
        t.addfile(ti)
        add("upper/etc/motd", tarfile.CHRTYPE, devmajor=0, devminor=0, mode=0)
        if hostile:
            add("workspace/link/passwd", tarfile.REGTYPE, b"owned")
            add("workspace/../../x", tarfile.REGTYPE, b"no")
            add("etc/x", tarfile.REGTYPE, b"no")
            add("workspace/dev", tarfile.CHRTYPE, devmajor=1, devminor=3)
    return buf.getvalue()


def snapshot():
    put("snapshot", "pax", b"\x00" + snapshot_tar(tarfile.PAX_FORMAT))
    put("snapshot", "ustar-small-reads", b"\x01" + snapshot_tar(tarfile.USTAR_FORMAT))
    put("snapshot", "hostile", b"\x03" + snapshot_tar(tarfile.PAX_FORMAT, hostile=True))
    zstd = shutil.which("zstd")
    if zstd:
        import subprocess
        z = subprocess.run([zstd, "-3", "-q", "-c"], input=snapshot_tar(tarfile.PAX_FORMAT),
                           stdout=subprocess.PIPE, check=True).stdout
        put("snapshot", "pax-zstd", b"\x07" + z)
    put("snapshot", "empty", b"\x00" + bytes(1024))


def multipart():
    mib5 = 5 << 20
    x = hashlib.md5(b"x" * mib5).hexdigest()
    y = hashlib.md5(b"y" * mib5).hexdigest()
    c = hashlib.md5(b"c").hexdigest()
    def doc(parts):
        return ("<CompleteMultipartUpload>" + "".join(
            "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % p for p in parts) +
            "</CompleteMultipartUpload>")
    put("multipart", "all", doc([(1, '"%s"' % x), (2, y), (3, '"%s"' % c)]))
    put("multipart", "first-two", doc([(1, x), (2, y)]))
    put("multipart", "last-only", doc([(3, c)]))
    put("multipart", "too-small", doc([(1, x), (3, c), (2, y)]))


def s3_request():
    for i, (size, fields) in enumerate([
        (4, ["partNumber=3&uploadId=u-1", "bytes=0-99", '"0cc175b9c0f1b6a831c399e269772661"',
             "Sun, 06 Nov 1994 08:49:37 GMT", "612f622e747874", "1B2M2Y8AsgTpgAmY7PhCfg=="]),
        (3, ["list-type=2&prefix=a%2Fb&delimiter=%2F&max-keys=10&continuation-token=6162",
             "bytes=-5", 'W/"x", *', "Mon, 31 Dec 2029 23:59:59 GMT", "6162", "AAAAAAAAAAAAAAAAAAAAAA=="]),
        (5, ["uploads&x-husk-link=l-1&X-Amz-Signature=00", "bytes=7-", "a, b ,c",
             "Thu, 01 Jan 1970 00:00:00 GMT", "", ""]),
        (1, ["delete=", "bytes=0-0", "", "", "zz", ""]),
    ]):
        put("s3_request", "r%d" % i, bytes([size]) + "\n".join(fields).encode())


def ctl():
    def exec_msg(argv, env, cwd):
        s = b"".join(x.encode() + b"\0" for x in [cwd] + argv + env)
        hdr = 40
        return struct.pack("<IIQIIIII4x", 3, hdr + len(s), 42, len(argv), len(env), len(s), 3, 1) + s
    put("ctl", "exec", b"\x06" + exec_msg(["/bin/sh", "-c", "echo hi"], ["PATH=/usr/bin", "HOME=/"], "/workspace"))
    put("ctl", "exec-nofds", b"\x00" + exec_msg(["true"], [], "/"))
    put("ctl", "signal", b"\x00" + struct.pack("<IIiiI", 6, 20, 12, 15, 1))
    put("ctl", "watch", b"\x00" + struct.pack("<II", 7, 8))
    put("ctl", "ready", b"\x01" + struct.pack("<II", 1, 8))
    put("ctl", "started", b"\x01" + struct.pack("<IIQiii4x", 4, 32, 42, 7, 0, 0))
    put("ctl", "exited", b"\x01" + struct.pack("<IIQii", 5, 24, 42, 7, 0))
    put("ctl", "setup-error", b"\x01" + struct.pack("<IIi", 2, 524, 2) + b"mount failed".ljust(512, b"\0"))
    put("ctl", "fs", b"\x03" + struct.pack("<II", 9, 8))


def inject():
    # flags: bit 0 HEAD, bits 1-4 the bound secrets; then the piece size.
    secret = "ghp_Z9yX8wV7uT6sR5qP4oN3"
    odd = "s3cr3t/+=\"\\ &?%:x"
    b64 = __import__("base64").b64encode(("x" + secret).encode()).decode()
    all4 = 0x1e
    put("inject", "sized", bytes([all4, 0]) +
        ("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Echo: %s\r\n\r\n%s"
         % (len(secret) + 2, secret, "<" + secret + ">")).encode())
    put("inject", "chunked-split", bytes([all4, 7]) +
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nghp_Z\r\n13;ext=1\r\n9yX8wV7uT6sR5qP4oN3\r\n0\r\nTrailer: t\r\n\r\n")
    put("inject", "interim", bytes([all4, 0]) +
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    put("inject", "close-delimited", bytes([all4, 3]) +
        ('HTTP/1.0 200 OK\r\n\r\n{"t":"%s","b":"%s","u":"%s"}'
         % (odd.replace("\\", "\\\\").replace('"', '\\"'), b64,
            __import__("urllib.parse").parse.quote(odd, safe=""))).encode())
    put("inject", "head", bytes([all4 | 1, 0]) +
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
    put("inject", "no-content", bytes([0x04, 0]) + b"HTTP/1.1 204 No Content\r\n\r\n")
    put("inject", "unbound", bytes([0, 0]) +
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n")


GENERATORS = (egress_http, egress_sni, egress_dns, egress_host, api_json, mcp, s3_xml, sigv4,
              chunked, tar, snapshot, multipart, s3_request, ctl, inject)

if __name__ == "__main__":
    # Only the corpora written here are replaced (egress_sni keeps what
    # it has: its hellos are random); image, layer and dockerfile seeds
    # are written by hand.
    for g in GENERATORS:
        d = os.path.join(OUT, g.__name__)
        if g.__name__ != "egress_sni" and os.path.isdir(d):
            shutil.rmtree(d)
    for g in GENERATORS:
        g()
