#!/usr/bin/env python3
"""The Python context runner (src/ctx/husk_ctx.py) driven through its fds,
outside a box: the protocol, state, results, errors, interrupts.  TAP out.

  tests/ctx/runner.py [PYTHON]     (default /usr/bin/python3)
"""

import base64
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNNER = os.path.join(ROOT, "src", "ctx", "husk_ctx.py")
JS_RUNNER = os.path.join(ROOT, "src", "ctx", "husk_ctx.js")
SH_RUNNER = os.path.join(ROOT, "src", "ctx", "husk_ctx.sh")
PYTHON = sys.argv[1] if len(sys.argv) > 1 else "/usr/bin/python3"

n = 0
failed = 0


def ok(cond, name, detail=""):
    global n, failed
    n += 1
    if cond:
        print("ok %d - %s" % (n, name))
    else:
        failed += 1
        print("not ok %d - %s" % (n, name))
        if detail:
            for line in str(detail).splitlines()[:40]:
                print("#   " + line)
    sys.stdout.flush()


class Ctx:
    """One runner process: its request and event pipes, stdout/stderr pipes."""

    def __init__(self, env=None, argv=None):
        req_r, self.req_w = os.pipe()
        self.ev_r, ev_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        e = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
        e.update(env or {})
        self.p = subprocess.Popen(
            (argv or [PYTHON, "-u", RUNNER]) + [str(req_r), str(ev_w)], stdin=subprocess.DEVNULL,
            stdout=out_w, stderr=err_w, pass_fds=(req_r, ev_w), env=e, start_new_session=True)
        for fd in (req_r, ev_w, out_w, err_w):
            os.close(fd)
        self.buf = b""
        self.out = b""
        self.err = b""
        self.seq = 0
        self.ready = self.event(30)
        if not self.ready:
            print("# runner did not start: " + self.err.decode(errors="replace").replace("\n", "\n# "))

    def _drain(self, fd, timeout):
        r, _, _ = select.select([fd], [], [], timeout)
        if not r:
            return b""
        try:
            return os.read(fd, 1 << 16)
        except OSError:
            return b""

    def event(self, timeout=30):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.ev_r, self.out_r, self.err_r], [], [], left)
            for fd in r:
                try:
                    b = os.read(fd, 1 << 16)
                except OSError:
                    b = b""
                if fd == self.ev_r:
                    if not b:
                        return None
                    self.buf += b
                elif fd == self.out_r:
                    self.out += b
                else:
                    self.err += b
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def send_raw(self, data):
        os.write(self.req_w, data)

    def execute(self, code, env=None, timeout=60, before_end=None):
        """Events of one execution up to its end, and the streams it wrote."""
        self.seq += 1
        rid = "x%d" % self.seq
        self.out = self.err = b""
        req = {"op": "execute", "id": rid, "code": code}
        if env is not None:
            req["env"] = env
        self.send_raw((json.dumps(req) + "\n").encode())
        if before_end:
            before_end(self)
        return self.events_to_end(timeout)

    def events_to_end(self, timeout):
        """Events up to "end" (None last if they stop), then the streams."""
        evs = []
        while True:
            ev = self.event(timeout)
            evs.append(ev)
            if ev is None or ev.get("type") == "end":
                break
        self.drain_streams()
        return evs

    def drain_streams(self):
        """What was written before "end" is in the pipes now: read it."""
        for fd, attr in ((self.out_r, "out"), (self.err_r, "err")):
            while True:
                b = self._drain(fd, 0.05)
                if not b:
                    break
                setattr(self, attr, getattr(self, attr) + b)

    def close(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.wait()
        for fd in (self.req_w, self.ev_r, self.out_r, self.err_r):
            os.close(fd)


def end_of(evs):
    return evs[-1] if evs and evs[-1] and evs[-1].get("type") == "end" else None


def results(evs):
    return [e for e in evs if e and e.get("type") == "result"]


def error_of(evs):
    es = [e for e in evs if e and e.get("type") == "error"]
    return es[0] if es else None


def javascript():
    node = shutil.which("node")
    if not node:
        print("ok %d - # SKIP javascript: no node on this machine" % (n + 1))
        return
    c = Ctx(argv=[node, JS_RUNNER])
    ok(c.ready and c.ready.get("language") == "javascript", "js: ready", c.ready)
    evs = c.execute("1+1")
    rs = results(evs)
    ok(rs and rs[0]["is_main_result"] and rs[0]["data"]["text/plain"] == "2", "js: 1+1 is 2", evs)
    evs = c.execute("let a = 40; const b = 2; function f() { return a + b }\nconsole.log('hi')")
    ok(c.out == b"hi\n" and end_of(evs)["status"] == "ok", "js: console.log to stdout", (c.out, evs))
    evs = c.execute("f()")
    ok(results(evs) and results(evs)[0]["data"]["text/plain"] == "42", "js: state kept", evs)
    evs = c.execute("\nnull.x")
    er = error_of(evs)
    ok(er and er["name"] == "TypeError" and "<cell 4>:2" in er["traceback"] and
       "husk_ctx" not in er["traceback"], "js: an error with the user's line", er)
    evs = c.execute("Promise.resolve(7)")
    ok(results(evs) and results(evs)[0]["data"]["text/plain"] == "7", "js: a promise is awaited", evs)
    evs = c.execute("({_repr_html_() { return '<i>x</i>' }})")
    ok(results(evs) and results(evs)[0]["data"].get("text/html") == "<i>x</i>", "js: _repr_html_", evs)
    evs = c.execute("display('a'); 1")
    ok(len(results(evs)) == 2 and not results(evs)[0]["is_main_result"], "js: display()", evs)

    def interrupt(ctx):
        time.sleep(0.5)
        os.kill(ctx.p.pid, signal.SIGINT)

    evs = c.execute("while (true) {}", before_end=interrupt)
    ok(end_of(evs) and end_of(evs)["status"] == "interrupted", "js: SIGINT interrupts a loop", evs)
    evs = c.execute("a")
    ok(results(evs) and results(evs)[0]["data"]["text/plain"] == "40", "js: alive after it", evs)
    evs = c.execute("require('child_process').execSync('ls /proc/self/fd').toString().split('\\n').filter(Boolean).length")
    ok(results(evs) and results(evs)[0]["data"]["text/plain"] == "4",
       "js: a child does not inherit the protocol fds", (evs, c.err))
    evs = c.execute("process.env.HUSK_T", env={"HUSK_T": "v"})
    ok(results(evs) and results(evs)[0]["data"]["text/plain"] == "'v'", "js: env for one execution")
    evs = c.execute("process.env.HUSK_T")
    ok(not results(evs), "js: env restored", evs)
    c.close()


class BashCtx(Ctx):
    """The bash runner: command lines on stdin, bytes on the code fd."""

    def __init__(self):
        cmd_r, self.cmd_w = os.pipe()
        code_r, self.code_w = os.pipe()
        self.ev_r, ev_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        e = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
             "HUSK_CODE_FD": str(code_r), "HUSK_EV_FD": str(ev_w)}
        self.p = subprocess.Popen(
            ["bash", "--rcfile", SH_RUNNER, "--noediting", "-i"], stdin=cmd_r, stdout=out_w,
            stderr=err_w, pass_fds=(code_r, ev_w), env=e, start_new_session=True)
        for fd in (cmd_r, code_r, ev_w, out_w, err_w):
            os.close(fd)
        self.buf = self.out = self.err = b""
        self.seq = 0
        self.req_w = self.cmd_w
        self.ready = self.event(30)

    def execute(self, code, env=None, timeout=60, before_end=None, rid=None):
        self.seq += 1
        rid = rid or "x%d" % self.seq
        self.out = self.err = b""
        b = code.encode()
        lines = b""
        for k, v in (env or {}).items():
            vb = v.encode()
            os.write(self.code_w, vb)
            lines += b"__husk_env %s %d\n" % (k.encode(), len(vb))
        os.write(self.code_w, b)
        os.write(self.cmd_w, lines + b"__husk_read %s %d\n__husk_eval\n" % (rid.encode(), len(b)))
        if before_end:
            before_end(self)
        return self.events_to_end(timeout)

    def close(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.wait()
        for fd in (self.cmd_w, self.code_w, self.ev_r, self.out_r, self.err_r):
            os.close(fd)


def bash():
    c = BashCtx()
    ok(c.ready and c.ready.get("language") == "bash" and c.ready.get("version", "").count(".") >= 2,
       "bash: ready", c.ready)
    evs = c.execute("declare x=5; y='h\u00e9llo'; f() { echo \"fn $1\"; }; cd /tmp; echo \"$y\"")
    e = end_of(evs)
    ok(e and e["status"] == "ok" and e["exit_code"] == 0 and e["id"] == "x1" and
       e["execution_count"] == 1 and c.out == "h\u00e9llo\n".encode(), "bash: runs, UTF-8 code", (evs, c.out))
    evs = c.execute("f $x; pwd")
    ok(c.out == b"fn 5\n/tmp\n", "bash: variables (declare too), functions and cwd are kept", c.out)
    evs = c.execute("false")
    ok(end_of(evs)["status"] == "error" and end_of(evs)["exit_code"] == 1, "bash: a failure's status")
    evs = c.execute("cat; read -r l; echo \"read=$?\"")
    ok(end_of(evs) and c.out == b"read=1\n", "bash: stdin is empty: no hang, no protocol bytes",
       (evs, c.out))
    evs = c.execute("ls /proc/self/fd | tr '\\n' ' '")
    ok(c.out == b"0 1 2 3 ", "bash: the code's children get no protocol fd", c.out)

    def interrupt(ctx):
        time.sleep(0.5)
        os.killpg(ctx.p.pid, signal.SIGINT)

    evs = c.execute("i=0; while true; do i=$((i+1)); done; echo notreached", before_end=interrupt)
    ok(end_of(evs) and end_of(evs)["exit_code"] == 130 and b"notreached" not in c.out,
       "bash: SIGINT aborts a builtin loop", (evs, c.out))
    evs = c.execute("echo alive $x")
    ok(c.out == b"alive 5\n", "bash: alive after it, its state intact", c.out)
    evs = c.execute("sleep 30; echo after", before_end=interrupt)
    ok(end_of(evs) and end_of(evs)["exit_code"] == 130 and b"after" not in c.out,
       "bash: SIGINT ends a running program and the rest of the code", (evs, c.out))
    evs = c.execute('echo "$HUSK_T"', env={"HUSK_T": "a b\nc"})
    ok(c.out == b"a b\nc\n", "bash: env for one execution", c.out)
    evs = c.execute('echo "${HUSK_T-unset} $HOME"', env={"HOME": "/x"})
    ok(c.out == b"unset /x\n", "bash: ... restored after it", c.out)
    evs = c.execute('echo "$HOME"')
    ok(c.out == b"/tmp\n", "bash: a variable that was set is restored", c.out)
    evs = c.execute("echo no", rid="a/b")
    ok(end_of(evs) and end_of(evs)["id"] is None and end_of(evs)["status"] == "error" and
       c.out == b"", "bash: a bad id runs nothing", (evs, c.out))
    evs = c.execute("")
    ok(end_of(evs) and end_of(evs)["status"] == "ok", "bash: empty code", evs)
    evs = c.execute("exit 4")
    ok(end_of(evs) is None and c.p.wait(5) == 4, "bash: exit ends the context", evs)
    c.close()


def main():
    c = Ctx()
    ok(c.ready and c.ready.get("type") == "ready" and c.ready.get("language") == "python",
       "ready event names the language", c.ready)

    evs = c.execute("1+1")
    rs = results(evs)
    ok(len(rs) == 1 and rs[0]["is_main_result"] and rs[0]["data"].get("text/plain") == "2",
       "the last expression is the main result", evs)
    e = end_of(evs)
    ok(e and e["status"] == "ok" and e["execution_count"] == 1 and e["id"] == "x1",
       "end: status, execution count, the request's id", e)

    evs = c.execute("x = 41\nprint('hello')")
    ok(c.out == b"hello\n" and not results(evs), "print goes to stdout; no result", (c.out, evs))
    evs = c.execute("x + 1")
    ok(results(evs) and results(evs)[0]["data"]["text/plain"] == "42",
       "state is kept between executions", evs)

    evs = c.execute("import sys, os\nprint('to err', file=sys.stderr)\nos.system('echo from a child')")
    ok(c.err == b"to err\n" and b"from a child\n" in c.out,
       "stderr and a child's output reach the streams", (c.out, c.err))

    evs = c.execute("def f():\n    return 1/0\n\nx = 2\nf()")
    er = error_of(evs)
    ok(er and er["name"] == "ZeroDivisionError" and er["value"] == "division by zero",
       "an exception gives its name and value", er)
    tb = (er or {}).get("traceback", "")
    ok('File "<cell 5>", line 5' in tb and 'line 2, in f' in tb and "return 1/0" in tb,
       "the traceback names the user's lines", tb)
    ok("husk_ctx" not in tb, "the traceback has no frame of the runner", tb)
    ok(end_of(evs)["status"] == "error", "an exception ends with status error")

    evs = c.execute("def g(:\n  pass")
    er = error_of(evs)
    ok(er and er["name"] == "SyntaxError" and "line 1" in er["traceback"],
       "a syntax error is an error with its line", er)

    evs = c.execute("class H:\n  def _repr_html_(self): return '<b>hi</b>'\n"
                    "  def _repr_svg_(self): return '<svg xmlns=\"http://www.w3.org/2000/svg\"/>'\n"
                    "  def __repr__(self): return 'H()'\nH()")
    d = results(evs)[0]["data"] if results(evs) else {}
    ok(d.get("text/html") == "<b>hi</b>" and d.get("image/svg+xml", "").startswith("<svg")
       and d.get("text/plain") == "H()", "_repr_html_, _repr_svg_ and text/plain", d)

    evs = c.execute("class M:\n  def _repr_mimebundle_(self, **kw):\n"
                    "    return {'text/markdown': '# t', 'application/json': {'a': 1}}\nM()")
    d = results(evs)[0]["data"] if results(evs) else {}
    ok(d.get("text/markdown") == "# t" and json.loads(d.get("application/json", "null")) == {"a": 1},
       "_repr_mimebundle_ with markdown and json", d)

    evs = c.execute("display(1, 'two')\n3")
    rs = results(evs)
    ok(len(rs) == 3 and not rs[0]["is_main_result"] and rs[1]["data"]["text/plain"] == "'two'"
       and rs[2]["is_main_result"], "display() sends results that are not the main one", rs)

    evs = c.execute("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 1, 9])\n"
                    "plt.title('t')\nNone", timeout=120)
    figs = [r for r in results(evs) if "image/png" in r["data"]]
    png = base64.b64decode(figs[0]["data"]["image/png"]) if figs else b""
    ok(len(figs) == 1 and png.startswith(b"\x89PNG\r\n\x1a\n"),
       "a figure left open becomes a PNG result without savefig", evs)
    evs = c.execute("len(plt.get_fignums())")
    ok(results(evs) and results(evs)[0]["data"]["text/plain"] == "0",
       "figures shown are closed", evs)
    evs = c.execute("plt.figure(); plt.plot([1]); plt.show(); print('after')\n"
                    "plt.figure(); plt.plot([2])")
    figs = [r for r in results(evs) if "image/png" in r["data"]]
    ok(len(figs) == 2, "plt.show() sends the figure then; the next one at the end", evs)
    evs = c.execute("fig = plt.figure(); fig.gca().plot([3]); plt.close(fig); fig")
    rs = results(evs)
    ok(len(rs) == 1 and rs[0]["is_main_result"] and "image/png" in rs[0]["data"],
       "a Figure as the last expression is a PNG", rs)

    evs = c.execute("import pandas as pd\npd.DataFrame({'line': ['a', 'b'], 'defects': [3, 5]})",
                    timeout=120)
    d = results(evs)[0]["data"] if results(evs) else {}
    ok("<table" in d.get("text/html", "") and "defects" in d.get("text/plain", ""),
       "a DataFrame gives HTML and text", evs)

    evs = c.execute("import os\nos.environ.get('HUSK_T')", env={"HUSK_T": "set"})
    ok(results(evs) and results(evs)[0]["data"]["text/plain"] == "'set'", "env for one execution")
    evs = c.execute("os.environ.get('HUSK_T')")
    ok(not results(evs), "env is restored after it", evs)

    evs = c.execute("input()")
    er = error_of(evs)
    ok(er and er["name"] == "EOFError", "code that reads stdin gets end of file, no hang", evs)

    evs = c.execute("exit(0)")
    ok(end_of(evs)["status"] == "ok" and c.p.poll() is None, "exit() ends the code, not the context")
    evs = c.execute("import sys; sys.exit(3)")
    ok(end_of(evs)["status"] == "error" and error_of(evs)["name"] == "SystemExit",
       "exit(3) is an error", evs)

    def interrupt(ctx):
        time.sleep(0.5)
        os.kill(ctx.p.pid, signal.SIGINT)

    evs = c.execute("while True:\n    pass", before_end=interrupt)
    ok(end_of(evs) and end_of(evs)["status"] == "interrupted" and
       error_of(evs)["name"] == "KeyboardInterrupt", "SIGINT interrupts a loop", evs)
    evs = c.execute("x")
    ok(results(evs) and results(evs)[0]["data"]["text/plain"] == "2",
       "the context answers after the interrupt, its state intact", evs)
    os.kill(c.p.pid, signal.SIGINT)  # between executions: ignored
    time.sleep(0.2)
    evs = c.execute("x")
    ok(results(evs) and c.p.poll() is None, "an interrupt between executions is ignored", evs)

    c.send_raw(b"this is not json\n")
    evs = []
    while True:
        ev = c.event(10)
        evs.append(ev)
        if ev is None or ev.get("type") == "end":
            break
    ok(error_of(evs) and end_of(evs) and end_of(evs)["id"] is None, "a bad request line is refused",
       evs)
    evs = c.execute('{"op": 1}')
    ok(end_of(evs)["status"] == "ok", "and the runner goes on")

    evs = c.execute("'a' * (9 * 1024 * 1024)")
    rs = results(evs)
    ok(rs and rs[0].get("truncated") == ["text/plain"] and "text/plain" not in rs[0]["data"],
       "a representation over the limit is left out and named", [len(json.dumps(r)) for r in rs])

    big = "y = '" + "z" * (4 * 1024 * 1024) + "'\nlen(y)"
    evs = c.execute(big)
    ok(results(evs) and results(evs)[0]["data"]["text/plain"] == str(4 * 1024 * 1024),
       "a 4 MiB input", end_of(evs))

    c.close()

    c = Ctx()
    evs = c.execute("import subprocess\nsubprocess.run(['ls', '/proc/self/fd'], capture_output=True).stdout.split()")
    r = results(evs)
    fds = r[0]["data"]["text/plain"] if r else ""
    # ls's own directory is its fd 3: a child has nothing but its streams.
    ok(fds == "[b'0', b'1', b'2', b'3']", "a child does not inherit the protocol fds", fds)

    c2 = Ctx()
    c2.execute("secret = 1")
    evs = c.execute("'secret' in globals()")
    ok(results(evs) and results(evs)[0]["data"]["text/plain"] == "False",
       "two runners share no variables", evs)
    c2.close()

    evs = c.execute("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    ok(end_of(evs) is None and c.p.wait(5) == -9, "a program that kills its interpreter: the events end",
       evs)
    c.close()

    javascript()
    bash()
    print("# %d passed, %d failed" % (n - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
