#!/usr/bin/env python3
"""Write a container image for husk's template tests, from directories.

  mkimage.py OUT [--format oci-archive|docker-archive|oci-dir]
             --layer DIR[:gzip|:zstd|:plain] ...      base layer first
             [--env K=V ...] [--workdir DIR] [--user U] [--entrypoint JSON]
             [--cmd JSON] [--label K=V ...] [--arch amd64]
             [--tamper blob|diffid|config] [--compress gzip|zstd]

Each layer is the tree under DIR as a tar (owners root unless --owner
PATH=UID:GID); a file named .wh.NAME in DIR is written as that whiteout, and
a file named .wh..wh..opq marks its directory opaque, as image builders do.
--raw-layer TARFILE[:gzip|:zstd|:plain] adds a tar as it is (hostile layers).
zstd layers (application/vnd.oci.image.layer.v1.tar+zstd) are compressed
by the zstd program; --compress compresses the whole archive (.tar.gz,
.tar.zst).
--tamper: blob (a layer blob no longer matches its digest), diffid (the
config's diff_id for the last layer is wrong), config (the config blob does
not match its digest).  Uses the standard library, and the zstd program
for zstd."""
import argparse, gzip, hashlib, io, json, os, subprocess, tarfile

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--format", default="oci-archive",
                choices=["oci-archive", "docker-archive", "oci-dir"])
ap.add_argument("--layer", action="append", default=[])
ap.add_argument("--raw-layer", action="append", default=[])
ap.add_argument("--owner", action="append", default=[])
ap.add_argument("--env", action="append", default=[])
ap.add_argument("--workdir", default="")
ap.add_argument("--user", default="")
ap.add_argument("--entrypoint")
ap.add_argument("--cmd")
ap.add_argument("--label", action="append", default=[])
ap.add_argument("--arch", default="amd64")
ap.add_argument("--tamper", choices=["blob", "diffid", "config"])
ap.add_argument("--compress", choices=["gzip", "zstd"])
a = ap.parse_args()

owners = {}
for o in a.owner:
    p, ids = o.split("=", 1)
    u, g = ids.split(":")
    owners[p.strip("/")] = (int(u), int(g))


def tar_of(d):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for root, dirs, files in os.walk(d):
            dirs.sort()
            rel_root = os.path.relpath(root, d)
            names = sorted(dirs + files)
            for n in names:
                full = os.path.join(root, n)
                rel = os.path.normpath(os.path.join(rel_root, n))
                ti = t.gettarinfo(full, arcname=rel)
                ti.uid, ti.gid = owners.get(rel, (0, 0))
                ti.uname = ti.gname = ""
                ti.mtime = 1700000000
                if ti.isreg():
                    with open(full, "rb") as f:
                        t.addfile(ti, f)
                else:
                    t.addfile(ti)
    return buf.getvalue()


layers = []  # (blob bytes, diff_id, media type)
for spec in a.layer:
    d, _, comp = spec.partition(":")
    raw = tar_of(d)
    layers.append((raw, comp or "gzip"))
for spec in a.raw_layer:
    f, _, comp = spec.partition(":")
    layers.append((open(f, "rb").read(), comp or "plain"))

blobs = {}


def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def compress(raw, how):
    if how == "gzip":
        return gzip.compress(raw, mtime=0)
    if how == "zstd":
        return subprocess.run(["zstd", "-q", "-c", "-3"], input=raw, stdout=subprocess.PIPE,
                              check=True).stdout
    assert how == "plain", how
    return raw


descs, diff_ids, docker_layers = [], [], []
for raw, comp in layers:
    diff_ids.append(sha(raw))
    blob = compress(raw, comp)
    mt = "application/vnd.oci.image.layer.v1.tar" + ("+" + comp if comp != "plain" else "")
    descs.append({"mediaType": mt, "digest": sha(blob), "size": len(blob)})
    blobs[sha(blob)] = blob
if a.tamper == "diffid" and diff_ids:
    diff_ids[-1] = "sha256:" + "0" * 64

cfg = {"architecture": a.arch, "os": "linux",
       "config": {"Env": a.env or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
       "rootfs": {"type": "layers", "diff_ids": diff_ids}}
if a.workdir:
    cfg["config"]["WorkingDir"] = a.workdir
if a.user:
    cfg["config"]["User"] = a.user
if a.entrypoint:
    cfg["config"]["Entrypoint"] = json.loads(a.entrypoint)
if a.cmd:
    cfg["config"]["Cmd"] = json.loads(a.cmd)
if a.label:
    cfg["config"]["Labels"] = dict(l.split("=", 1) for l in a.label)
cfg_b = json.dumps(cfg, sort_keys=True).encode()
blobs[sha(cfg_b)] = cfg_b
manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": sha(cfg_b), "size": len(cfg_b)},
            "layers": descs}
man_b = json.dumps(manifest, sort_keys=True).encode()
blobs[sha(man_b)] = man_b
index = {"schemaVersion": 2, "manifests": [
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": sha(man_b),
     "size": len(man_b), "platform": {"os": "linux", "architecture": a.arch}}]}

if a.tamper == "blob" and descs:
    d = descs[-1]["digest"]
    blobs[d] = blobs[d][:-1] + bytes([blobs[d][-1] ^ 1])
if a.tamper == "config":
    blobs[sha(cfg_b)] = cfg_b.replace(b'"linux"', b'"linuX"')

files = {}
if a.format in ("oci-archive", "oci-dir"):
    files["oci-layout"] = json.dumps({"imageLayoutVersion": "1.0.0"}).encode()
    files["index.json"] = json.dumps(index).encode()
    for d, b in blobs.items():
        files["blobs/sha256/" + d[7:]] = b
else:
    names = []
    for i, (raw, comp) in enumerate(layers):
        n = "%02d/layer.tar" % i
        files[n] = blobs[descs[i]["digest"]]
        names.append(n)
    cname = sha(cfg_b)[7:] + ".json"
    files[cname] = blobs[sha(cfg_b)]
    files["manifest.json"] = json.dumps(
        [{"Config": cname, "RepoTags": ["husk-test:latest"], "Layers": names}]).encode()

if a.format == "oci-dir":
    for n, b in files.items():
        p = os.path.join(a.out, n)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(b)
else:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for n in sorted(files):
            ti = tarfile.TarInfo(n)
            ti.size = len(files[n])
            ti.mtime = 1700000000
            t.addfile(ti, io.BytesIO(files[n]))
    with open(a.out, "wb") as f:
        f.write(compress(buf.getvalue(), a.compress or "plain"))
