#!/usr/bin/env python3
"""Chaos run of `husk serve`: mixed load from several clients while the
daemon is SIGKILLed at random moments (some of them while it re-adopts its
boxes after a restart) and restarted on the same data directory; then every
acknowledged operation is checked, and the host is checked for what the
run's daemon may have leaked.

  chaos.py [--husk build/husk] [--duration S] [--kills N] [--clients N]
           [--idle-boxes N] [--seed N] [--tap]

Acknowledged means the client got a success reply: a timeout or a reset
connection is not an acknowledgement, so whatever it may have done is not
checked.  Checks (each a TAP line with --tap; a summary of losses always):

  boxes       every created box not deleted is still there, and running
  files       every file written reads back byte-identical (the last write)
  processes   every background process has its true state: exited with
              the exit code it chose (not "lost" or still "running": its
              box kept running, the daemon must learn how it ended, across
              crashes).  Before each kill the driver starts five more
              that end around the kill or while no daemon runs.
  objects     every S3 object put reads back byte-identical
  buckets     every bucket created exists
  links       every link created can be read back
  audit       every acknowledged state change has its audit record
  leaks       after deleting every box and stopping the daemon: no cgroup
              of this data directory (box-<hash>-*), no mount under it,
              no process in those cgroups, no runtime directory left, no
              temporary file of the object store (DATA/storage/tmp)
  re-adoption every other kill, the restart is killed again while it
              re-adopts its boxes: the moment its log says re-adoption
              started, and the kill counts as landing there only if the
              log has no line saying it ended (--idle-boxes idle boxes
              make it last); the daemon started after such a kill must
              have every acknowledged box running, no cgroup of a box it
              does not list as live, no store temporary file

Every acknowledged operation is also written, one JSON line each, to
acked.jsonl in the run's directory (kept with --keep), and every loss found
to losses.txt.  The seed is
printed; the same seed gives the same operation mix and kill times (not
the same interleaving: the daemon's threads are not replayed).

Python 3 stdlib only; S3 requests are signed here (SigV4)."""
import argparse, datetime, hashlib, hmac, http.client, json, os, random, re, shutil, signal
import subprocess, sys, tempfile, threading, time, urllib.parse

ap = argparse.ArgumentParser()
ap.add_argument("--husk", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                               "../../build/husk"))
ap.add_argument("--duration", type=float, default=30, help="seconds of load (at least)")
ap.add_argument("--kills", type=int, default=4, help="SIGKILLs of the daemon")
ap.add_argument("--clients", type=int, default=4)
ap.add_argument("--idle-boxes", type=int, default=24,
                help="boxes created at the start and left idle: re-adoption lasts longer")
ap.add_argument("--seed", type=int, default=None)
ap.add_argument("--tap", action="store_true")
ap.add_argument("--keep", action="store_true", help="keep the run's directory")
args = ap.parse_args()

seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
print(f"# chaos: seed {seed}, {args.kills} kills, {args.duration:.0f} s, {args.clients} clients",
      flush=True)
master = random.Random(seed)

ADMIN = "adm_" + os.urandom(12).hex()
run_dir = tempfile.mkdtemp(prefix="husk-chaos-", dir=os.environ.get("TMPDIR", "/tmp"))
DATA = os.path.join(run_dir, "data")
LOG = os.path.join(run_dir, "serve.log")
acked_file = open(os.path.join(run_dir, "acked.jsonl"), "w")
acked_lock = threading.Lock()
acked = []


def ack(kind, **kw):
    rec = dict(kind=kind, t=time.time(), **kw)
    with acked_lock:
        acked.append(rec)
        acked_file.write(json.dumps(rec) + "\n")
        acked_file.flush()


# ---- the daemon ----

daemon = None
api_url = None
s3_url = None
url_lock = threading.Lock()
up = threading.Event()
restarts = 0


def spawn_daemon():
    """A daemon on DATA, its stderr appended to LOG: (process, log offset)."""
    logf = open(LOG, "ab")
    start = logf.tell()
    env = dict(os.environ, HUSK_ADMIN_KEY=ADMIN)
    p = subprocess.Popen([args.husk, "serve", "--listen", "127.0.0.1:0", "--s3-listen",
                          "127.0.0.1:0", "--data", DATA, "--quiet"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=logf,
                         env=env)
    logf.close()
    return p, start


def log_since(start):
    with open(LOG, "rb") as f:
        f.seek(start)
        return f.read().decode(errors="replace")


READOPT_START = re.compile(r"^husk: re-adoption: (\d+) live box", re.M)
READOPT_END = re.compile(r"^husk: re-adoption done: .* in (\d+) ms$", re.M)


def kill_during_readoption():
    """Start a daemon and SIGKILL it once its log says re-adoption started
    and a random number of its boxes (fewer than all) were re-adopted.
    (landed, boxes, adopted): landed when, the daemon dead, the log still
    has no line saying re-adoption ended: the kill provably interrupted it."""
    p, start = spawn_daemon()
    deadline = time.time() + 60
    landed, n, k = False, 0, None
    while time.time() < deadline and p.poll() is None:
        text = log_since(start)
        m = READOPT_START.search(text)
        if m:
            n = int(m.group(1))
            if k is None:
                k = master.randrange(0, max(n, 1))
            if text.count(" re-adopted\n", m.end()) >= k or READOPT_END.search(text):
                p.kill()
                p.wait()
                landed = not READOPT_END.search(log_since(start))
                break
        time.sleep(0.001)
    if p.poll() is None:
        p.kill()
        p.wait()
    return landed, n, k or 0


def start_daemon(release=True):
    """Start and wait for its listening lines; returns False if it died.
    The clients resume only when `release` (else once up is set)."""
    global daemon, api_url, s3_url
    daemon, start = spawn_daemon()
    deadline = time.time() + 60
    while time.time() < deadline:
        text = log_since(start)
        a = re.findall(r"^husk: listening on (http://127\.0\.0\.1:\d+)$", text, re.M)
        s = re.findall(r"^husk: S3 listening on (http://127\.0\.0\.1:\d+) ", text, re.M)
        if a and s:
            with url_lock:
                api_url, s3_url = a[-1], s[-1]
            if release:
                up.set()
            return True
        if daemon.poll() is not None:
            return False
        time.sleep(0.02)
    return False


def kill_daemon():
    up.clear()
    if daemon and daemon.poll() is None:
        daemon.kill()
        daemon.wait()


# ---- HTTP ----

class NotAcked(Exception):
    pass


def request(method, path, body=None, key=None, base=None, headers=None, timeout=30):
    """(status, body bytes, headers); NotAcked when there was no reply."""
    with url_lock:
        u = urllib.parse.urlsplit(base or api_url)
    h = dict(headers or {})
    if key:
        h["Authorization"] = "Bearer " + key
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        h.setdefault("Content-Type", "application/json")
    try:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data, dict(r.getheaders())
    except (OSError, http.client.HTTPException) as e:
        raise NotAcked(str(e))


def jreq(method, path, body=None, key=None, ok=(200, 201, 204)):
    st, data, _ = request(method, path, body, key)
    if st not in ok:
        raise NotAcked(f"{method} {path}: {st} {data[:200]!r}")
    return json.loads(data) if data else {}


def sign_s3(method, url, body, ak, sk, region="us-east-1"):
    u = urllib.parse.urlsplit(url)
    now = datetime.datetime.now(datetime.timezone.utc)
    amz = now.strftime("%Y%m%dT%H%M%SZ")
    date = amz[:8]
    ph = hashlib.sha256(body).hexdigest()
    hdrs = {"host": u.netloc, "x-amz-content-sha256": ph, "x-amz-date": amz}
    names = sorted(hdrs)
    canon_q = "&".join(sorted(
        f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
        for k, v in urllib.parse.parse_qsl(u.query, keep_blank_values=True)))
    creq = "\n".join([method, urllib.parse.quote(u.path or "/", safe="/-_.~"), canon_q,
                      "".join(f"{n}:{hdrs[n]}\n" for n in names), ";".join(names), ph])
    scope = f"{date}/{region}/s3/aws4_request"
    sts = "\n".join(["AWS4-HMAC-SHA256", amz, scope, hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4" + sk).encode()
    for part in (date, region, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    out = {n: hdrs[n] for n in names if n != "host"}
    out["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={ak}/{scope}, "
                            f"SignedHeaders={';'.join(names)}, Signature={sig}")
    return out


def s3(method, path, body=b"", creds=None):
    with url_lock:
        base = s3_url
    h = sign_s3(method, base + path, body, *creds)
    return request(method, path, body, base=base, headers=h)


# ---- the tenant every client works for ----

def until_acked(fn, tries=200):
    for _ in range(tries):
        up.wait(60)
        try:
            return fn()
        except NotAcked:
            time.sleep(0.1)
    raise SystemExit("Bail out! setup never acknowledged")


# ---- clients ----

stop = threading.Event()
attempts = {"acked": 0, "not_acked": 0}
att_lock = threading.Lock()


class Client(threading.Thread):
    def __init__(self, n, key, creds):
        super().__init__(daemon=True)
        self.rnd = random.Random(seed * 1000 + n)
        self.n, self.key, self.creds = n, key, creds
        self.boxes = []    # live boxes this client created
        self.objects = []  # (bucket, key)
        self.buckets = []
        self.seq = 0

    def run(self):
        ops = [(self.box_create, 2), (self.file_write, 5), (self.exec_sync, 3),
               (self.background, 3), (self.s3_bucket, 1), (self.s3_put, 4), (self.link, 2),
               (self.box_delete, 1)]
        weights = [w for _, w in ops]
        while not stop.is_set():
            if not up.wait(0.5):
                continue
            op = self.rnd.choices([o for o, _ in ops], weights)[0]
            try:
                op()
                with att_lock:
                    attempts["acked"] += 1
            except NotAcked:
                with att_lock:
                    attempts["not_acked"] += 1
                time.sleep(0.05)

    def name(self):
        self.seq += 1
        return f"c{self.n}-{self.seq}"

    def box(self):
        if not self.boxes:
            self.box_create()
        return self.rnd.choice(self.boxes)

    def box_create(self):
        if len(self.boxes) >= 3:
            return self.file_write()
        j = jreq("POST", "/v1/sandboxes", {"memory": "128M", "timeout": 3600}, self.key)
        self.boxes.append(j["id"])
        ack("box", box=j["id"], audit="sandbox.create")

    def box_delete(self):
        if len(self.boxes) < 2:
            return self.exec_sync()
        b = self.boxes.pop(self.rnd.randrange(len(self.boxes)))
        check_box_items(self.key, b, before_delete=True)
        try:
            jreq("DELETE", f"/v1/sandboxes/{b}", key=self.key)
        except NotAcked:
            # It may or may not be gone: no longer used nor checked.
            ack("box_maybe_deleted", box=b)
            raise
        ack("box_deleted", box=b, audit="sandbox.delete")

    def file_write(self):
        b = self.box()
        path = f"/workspace/{self.name()}.bin"
        data = self.rnd.randbytes(self.rnd.choice([1, 100, 4096, 65536, 300000]))
        q = urllib.parse.urlencode({"path": path})
        st, body, _ = request("PUT", f"/v1/sandboxes/{b}/files?{q}", data, self.key)
        if st != 201:
            raise NotAcked(f"file {st}")
        ack("file", box=b, path=path, sha=hashlib.sha256(data).hexdigest(), size=len(data),
            audit="files.write")

    def exec_sync(self):
        b = self.box()
        tok = self.name()
        j = jreq("POST", f"/v1/sandboxes/{b}/exec", {"cmd": ["sh", "-c", f"echo {tok}"]},
                 self.key)
        if j.get("stdout") != tok + "\n" or j.get("exit_code") != 0:
            raise NotAcked(f"exec answered {j}")
        ack("exec", box=b, audit="sandbox.exec")

    def background(self):
        b = self.box()
        code = self.rnd.randrange(0, 100)
        secs = self.rnd.choice([0, 0.3, 1, 2, 4])
        j = jreq("POST", f"/v1/sandboxes/{b}/exec",
                 {"cmd": ["sh", "-c", f"sleep {secs}; exit {code}"], "background": True},
                 self.key)
        ack("process", box=b, pid=j["pid"], code=code, secs=secs, audit="sandbox.exec")

    def s3_bucket(self):
        name = f"bk-{self.n}-{self.seq}-{self.rnd.randrange(10**6)}"
        self.seq += 1
        st, body, _ = s3("PUT", f"/{name}", creds=self.creds)
        if st != 200:
            raise NotAcked(f"bucket {st} {body[:100]!r}")
        self.buckets.append(name)
        ack("bucket", bucket=name, audit="s3.bucket_create")

    def s3_put(self):
        if not self.buckets:
            return self.s3_bucket()
        bk = self.rnd.choice(self.buckets)
        key = f"o/{self.name()}"
        data = self.rnd.randbytes(self.rnd.choice([0, 10, 5000, 200000]))
        st, body, _ = s3("PUT", f"/{bk}/{urllib.parse.quote(key)}", data, self.creds)
        if st != 200:
            raise NotAcked(f"put {st} {body[:100]!r}")
        self.objects.append((bk, key))
        ack("object", bucket=bk, key=key, sha=hashlib.sha256(data).hexdigest(), size=len(data))

    def link(self):
        if not self.objects:
            return self.s3_put()
        bk, key = self.rnd.choice(self.objects)
        j = jreq("POST", "/v1/links", {"bucket": bk, "key": key}, self.key)
        ack("link", link=j["id"], bucket=bk, key=key, audit="link.create")


# ---- checking acknowledged items ----

def file_verdict(key, r):
    """True: intact; False: lost; None: no reply (not counted)."""
    q = urllib.parse.urlencode({"path": r["path"]})
    try:
        st, data, _ = request("GET", f"/v1/sandboxes/{r['box']}/files?{q}", key=key, timeout=60)
    except NotAcked:
        return None, ""
    if st == 200 and hashlib.sha256(data).hexdigest() == r["sha"]:
        return True, ""
    return False, f"{r['box']}:{r['path']}: {st}, {len(data)} of {r['size']} bytes"


def proc_verdict(key, r):
    try:
        st, data, _ = request("GET", f"/v1/sandboxes/{r['box']}/processes/{r['pid']}", key=key)
    except NotAcked:
        return None, ""
    j = json.loads(data) if st == 200 else {}
    if st == 200 and j.get("state") == "exited" and j.get("exit_code") == r["code"]:
        return True, ""
    return False, (f"{r['box']} pid {r['pid']}: {st} state {j.get('state')} "
                   f"exit {j.get('exit_code')}, want exited {r['code']}")


# Verdicts on the files and processes of boxes, taken just before a client
# deletes the box (after that they cannot be read): (kind, box, id) -> verdict.
early = {}
early_lock = threading.Lock()


def box_items(b):
    with acked_lock:
        mine = [r for r in acked if r.get("box") == b]
    files = {}
    for r in mine:
        if r["kind"] == "file":
            files[r["path"]] = r
    return list(files.values()), [r for r in mine if r["kind"] == "process"]


def check_box_items(key, b, before_delete=False):
    """Verdicts on a box's files (the last write of each) and processes.
    Early (before a delete, with the daemon running and crashing): only
    processes that ended more than 3 s ago; no reply means no verdict."""
    files, procs = box_items(b)
    out = []
    for r in files:
        out.append((("file", b, r["path"]), file_verdict(key, r)))
    for r in procs:
        if before_delete and time.time() - r["t"] < r["secs"] + 3:
            continue
        out.append((("process", b, r["pid"]), proc_verdict(key, r)))
    if before_delete:
        with early_lock:
            for k, v in out:
                if v[0] is not None:
                    early[k] = v
    return out


# ---- the run ----

def main():
    global restarts
    os.makedirs(DATA, mode=0o700)
    if not start_daemon():
        raise SystemExit("Bail out! the daemon did not start:\n" + open(LOG).read()[-2000:])
    tid = until_acked(lambda: jreq("POST", "/v1/tenants", {"name": "chaos"}, ADMIN))["id"]
    key = until_acked(lambda: jreq("POST", f"/v1/tenants/{tid}/keys", None, ADMIN))["key"]
    k = until_acked(lambda: jreq("POST", "/v1/s3-keys", None, key))
    creds = (k["access_key_id"], k["secret_access_key"])
    # The killer's own box: before each kill it starts processes that end
    # as the daemon dies or while it is down, the cases a restart must not
    # lose.
    probe_box = until_acked(lambda: jreq("POST", "/v1/sandboxes",
                                         {"memory": "64M", "timeout": 3600}, key))["id"]
    ack("box", box=probe_box, audit="sandbox.create")
    probe_bucket = "probe-" + os.urandom(4).hex()

    def make_bucket():
        st, body, _ = s3("PUT", f"/{probe_bucket}", creds=creds)
        if st != 200:
            raise NotAcked(f"bucket {st}")

    until_acked(make_bucket)
    ack("bucket", bucket=probe_bucket, audit="s3.bucket_create")

    def put_object():
        st, _, _ = s3("PUT", f"/{probe_bucket}/obj", b"probe", creds)
        if st != 200:
            raise NotAcked(f"put {st}")

    until_acked(put_object)
    ack("object", bucket=probe_bucket, key="obj", sha=hashlib.sha256(b"probe").hexdigest(), size=5)
    # Idle boxes, so that re-adoption takes long enough for a kill to land
    # in it.
    idle_boxes = []
    for _ in range(args.idle_boxes):
        b = until_acked(lambda: jreq("POST", "/v1/sandboxes",
                                     {"memory": "32M", "timeout": 3600}, key))["id"]
        ack("box", box=b, audit="sandbox.create")
        idle_boxes.append(b)
    clients = [Client(i, key, creds) for i in range(args.clients)]
    for c in clients:
        c.start()

    # Kill times spread over the duration, each at a random moment; every
    # other restart is killed again the moment it starts re-adopting, and
    # about a third of the others at a random moment of their start.
    kills = readoption_kills = early_kills = 0
    readopt_boxes = []
    t_end = time.time() + args.duration
    gap = args.duration / max(args.kills, 1)
    while kills < args.kills:
        time.sleep(master.uniform(0.3 * gap, 1.0 * gap))
        # Probes: background processes ending around the kill (their exit
        # on its way to the daemon as it dies) and after it (while no
        # daemon runs).
        t0 = time.time()
        for secs in (0.1, 0.2, 0.3, 0.4, 1.0):
            code = master.randrange(1, 100)
            try:
                j = jreq("POST", f"/v1/sandboxes/{probe_box}/exec",
                         {"cmd": ["sh", "-c", f"sleep {secs}; exit {code}"],
                          "background": True}, key)
                ack("process", box=probe_box, pid=j["pid"], code=code, secs=secs,
                    audit="sandbox.exec", probe=True)
            except NotAcked:
                pass
        time.sleep(max(0.0, t0 + master.uniform(0.1, 0.5) - time.time()))
        # A record probe: a bucket or a link created, and the kill the
        # moment its reply arrives (a record committed after its reply is
        # then lost).
        try:
            if kills % 2 == 0:
                name = f"probe-{kills}-{os.urandom(3).hex()}"
                st, body, _ = s3("PUT", f"/{name}", creds=creds)
                if st == 200:
                    kill_daemon()
                    ack("bucket", bucket=name, audit="s3.bucket_create", probe=True)
            else:
                j = jreq("POST", "/v1/links", {"bucket": probe_bucket, "key": "obj"}, key)
                kill_daemon()
                ack("link", link=j["id"], bucket=probe_bucket, key="obj", audit="link.create",
                    probe=True)
        except NotAcked:
            pass
        kill_daemon()
        time.sleep(1.0)
        kills += 1
        landed = False
        if kills % 2 == 0:
            # Up to three tries: one whose re-adoption ended before the
            # kill is an early kill like the others.
            for _ in range(3):
                landed, n, k = kill_during_readoption()
                if landed:
                    break
            if landed:
                readoption_kills += 1
                readopt_boxes.append(f"{k} of {n}")
        elif master.random() < 0.35:
            # Started, then killed at a random moment of its start.
            p, _ = spawn_daemon()
            time.sleep(master.uniform(0.0, 0.4))
            p.kill()
            p.wait()
            early_kills += 1
        # Down for a while, as after a real crash: background processes
        # that end meanwhile must still get their true exit status.
        time.sleep(master.uniform(0.0, 1.5))
        restarts += 1
        if not start_daemon(release=not landed):
            raise SystemExit("Bail out! the daemon did not restart:\n" +
                             open(LOG).read()[-2000:])
        if landed:
            # The clients are held until the state after the interrupted
            # re-adoption is checked.
            after_readoption(key, [probe_box] + idle_boxes, clients)
            up.set()
    while time.time() < t_end:
        time.sleep(0.2)
    stop.set()
    for c in clients:
        c.join(60)

    # Background processes end within their sleeps; give them time.
    longest = max([r["secs"] for r in acked if r["kind"] == "process"] + [0])
    time.sleep(longest + 2)
    verify(key, creds, kills, readoption_kills, early_kills, readopt_boxes)


results = []
readoption_losses = []


def after_readoption(key, fixed_boxes, clients):
    """The daemon started after a kill during re-adoption: every box
    acknowledged and not being deleted is running, no cgroup of this data
    directory belongs to a box it does not list as live, and the store
    has no temporary file left (its sweep ran at start)."""
    def mine():
        return set(fixed_boxes) | {b for c in clients for b in list(c.boxes)}
    for b in sorted(mine()):
        try:
            st, data, _ = request("GET", f"/v1/sandboxes/{b}", key=key)
        except NotAcked as e:
            readoption_losses.append(f"{b}: no reply ({e})")
            continue
        state = json.loads(data).get("state") if st == 200 else f"http {st}"
        # A box a client took out of its list meanwhile is being deleted.
        if state != "running" and b in mine():
            readoption_losses.append(f"{b}: {state}")
    try:
        st, data, _ = request("GET", "/v1/sandboxes?state=live&limit=1000", key=key)
        live = {b["id"] for b in json.loads(data)["sandboxes"]} if st == 200 else None
    except NotAcked:
        live = None
    if live is None:
        readoption_losses.append("cannot list the live boxes")
    else:
        prefix = cg_prefix()
        for cg in box_cgroups():
            if os.path.basename(cg)[len(prefix):] not in live:
                readoption_losses.append(f"cgroup of no live box: {cg}")
    for f in store_tmp_files():
        readoption_losses.append(f"store temporary file {f}")


def check(name, ok, detail=""):
    results.append((name, ok, detail))


def verify(key, creds, kills, readoption_kills, early_kills, readopt_boxes):
    deleted = {r["box"] for r in acked if r["kind"] in ("box_deleted", "box_maybe_deleted")}
    boxes = {r["box"] for r in acked if r["kind"] == "box"} - deleted
    losses = {}

    def lose(what, detail):
        losses.setdefault(what, []).append(detail)

    box_state = {}
    for b in sorted(boxes):
        st, data, _ = request("GET", f"/v1/sandboxes/{b}", key=key)
        box_state[b] = json.loads(data).get("state") if st == 200 else f"http {st}"
        if box_state[b] != "running":
            lose("boxes", f"{b}: {box_state[b]}")
    live = {b for b in boxes if box_state.get(b) == "running"}

    # Files and processes: of live boxes now, of deleted ones the verdicts
    # taken before their delete; the rest (no verdict) are not counted.
    verdicts = dict(early)
    for b in sorted(live):
        for k, v in check_box_items(key, b):
            verdicts[k] = v
    counted = {"file": 0, "process": 0}
    for (kind, b, _), (ok, detail) in sorted(verdicts.items(), key=str):
        if ok is None:
            continue
        counted[kind] += 1
        if not ok:
            lose("files" if kind == "file" else "processes", detail)

    for r in acked:
        if r["kind"] == "bucket":
            st, _, _ = s3("HEAD", f"/{r['bucket']}", creds=creds)
            if st != 200:
                lose("buckets", f"{r['bucket']}: {st}")
        elif r["kind"] == "object":
            st, data, _ = s3("GET", f"/{r['bucket']}/{urllib.parse.quote(r['key'])}",
                             creds=creds)
            if st != 200 or hashlib.sha256(data).hexdigest() != r["sha"]:
                lose("objects", f"{r['bucket']}/{r['key']}: {st}, {len(data)} of "
                     f"{r['size']} bytes")
        elif r["kind"] == "link":
            st, _, _ = request("GET", f"/v1/links/{r['link']}", key=key)
            if st != 200:
                lose("links", f"{r['link']}: {st}")

    # Audit: the records of each (action, box) at least as many as acked.
    want = {}
    for r in acked:
        if r.get("audit"):
            k = (r["audit"], r.get("box", ""))
            want[k] = want.get(k, 0) + 1
    have = {}
    after = 0
    while True:
        st, data, _ = request("GET", f"/v1/audit?limit=1000&after={after}", key=key)
        if st != 200:
            lose("audit", f"listing: {st}")
            break
        j = json.loads(data)
        for rec in j["records"]:
            if rec["outcome"] == "ok":
                k = (rec["action"], rec["box_id"])
                have[k] = have.get(k, 0) + 1
        if not j.get("next_after"):
            break
        after = j["next_after"]
    for k, n in sorted(want.items()):
        for _ in range(n - have.get(k, 0)):  # one loss per missing record
            lose("audit", f"{k[0]} {k[1]}: {have.get(k, 0)} records, {n} acknowledged")

    for what in ("boxes", "files", "processes", "objects", "buckets", "links", "audit"):
        n = len(losses.get(what, []))
        total = {"boxes": len(boxes), "files": counted["file"],
                 "processes": counted["process"],
                 "objects": sum(r["kind"] == "object" for r in acked),
                 "buckets": sum(r["kind"] == "bucket" for r in acked),
                 "links": sum(r["kind"] == "link" for r in acked),
                 "audit": sum(want.values())}[what]
        detail = "; ".join(list(dict.fromkeys(losses.get(what, [])))[:5])
        check(f"{what}: {total - n} of {total} acknowledged intact", n == 0, detail)

    # Leaks: delete every box, stop the daemon, look at the host.
    st, data, _ = request("GET", "/v1/sandboxes?state=live&limit=1000", key=key)
    for b in json.loads(data)["sandboxes"] if st == 200 else []:
        request("DELETE", f"/v1/sandboxes/{b['id']}?kill=1", key=key, timeout=60)
    daemon.send_signal(signal.SIGTERM)
    try:
        daemon.wait(60)
    except subprocess.TimeoutExpired:
        daemon.kill()
    # What the kills tear down may take a moment to go (processes being
    # reaped): only what is still there after 15 s is a leak.
    for _ in range(150):
        leaks = find_leaks()
        if not leaks:
            break
        time.sleep(0.1)
    check("leaks: no cgroup, mount, process, runtime directory or store temporary file left",
          not leaks, "; ".join(leaks[:8]))
    tried = kills // 2
    check(f"re-adoption: {readoption_kills} of {tried} kills landed during it "
          f"(at least {', '.join(readopt_boxes) or 'no'} boxes re-adopted at the kill)",
          tried == 0 or readoption_kills > 0,
          "the log said re-adoption had ended before every such kill")
    check(f"re-adoption: after each of the {readoption_kills} kills, every box running, "
          f"nothing left over", not readoption_losses, "; ".join(readoption_losses[:8]))

    print(f"# chaos: {kills} kills ({readoption_kills} more during re-adoption, "
          f"{early_kills} more early in a start), "
          f"{attempts['acked']} operations acknowledged, {attempts['not_acked']} not",
          flush=True)
    with open(os.path.join(run_dir, "losses.txt"), "w") as f:
        for what in sorted(losses):
            print(f"# lost {what}: {len(losses[what])}", flush=True)
            for d in losses[what]:
                f.write(f"{what}: {d}\n")
    n = 0
    for name, ok, detail in results:
        n += 1
        if args.tap:
            print(f"{'ok' if ok else 'not ok'} {n} - chaos: {name}"
                  + (f" ({detail})" if detail and not ok else ""), flush=True)
        elif not ok:
            print(f"# FAILED {name}: {detail}", flush=True)


def cg_prefix():
    h = 2166136261
    for c in os.path.realpath(DATA).encode():
        h = ((h ^ c) * 16777619) & 0xffffffff
    return "box-%08x-" % h


def box_cgroups():
    out = []
    prefix = cg_prefix()
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        if root.count("/") > 7:
            dirs[:] = []
            continue
        for d in dirs:
            if d.startswith(prefix):
                out.append(os.path.join(root, d))
    return out


def store_tmp_files():
    """Named temporary files of the object store (its writer's, renamed
    into place on commit or unlinked on failure)."""
    tmp = os.path.join(DATA, "storage", "tmp")
    try:
        return sorted(os.listdir(tmp))
    except FileNotFoundError:
        return []


def find_leaks():
    out = ["cgroup " + cg for cg in box_cgroups()]
    prefix = cg_prefix()
    real = os.path.realpath(DATA)
    try:
        for line in open("/proc/self/mountinfo"):
            if real in line.split()[4]:
                out.append("mount " + line.split()[4])
    except OSError:
        pass
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cg = open(f"/proc/{pid}/cgroup").read()
        except OSError:
            continue
        if prefix in cg:
            out.append(f"process {pid}")
    boxes_dir = os.path.join(DATA, "boxes")
    if os.path.isdir(boxes_dir):
        left = os.listdir(boxes_dir)
        if left:
            out.append(f"{len(left)} entries in DATA/boxes: {' '.join(sorted(left)[:4])}")
    tmp = store_tmp_files()
    if tmp:
        out.append(f"{len(tmp)} store temporary files: {' '.join(tmp[:4])}")
    return out


if __name__ == "__main__":
    try:
        main()
    finally:
        stop.set()
        if daemon and daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        if not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)
        else:
            print(f"# chaos: run directory {run_dir}")
    sys.exit(0 if all(ok for _, ok, _ in results) and results else 1)
