"""husk's Python code-context runner: a persistent interpreter in a box.

One runner is one context.  It keeps a namespace across executions and
answers each with what a notebook shows: the streams as they come, the
value of the last expression, display data in several representations,
matplotlib figures (without the code saving them), and errors as name,
value and a traceback of the user's own lines.  Standard library only: it
runs on any template that has a python3, with no network and nothing
fetched.

Started as `python3 -u husk_ctx.py [REQ_FD EV_FD]` (default fds 3 and 4):

  fd 0      /dev/null for the user's code (input() sees end of file)
  fd 1, 2   the user's stdout and stderr, unframed: whatever the code or
            its subprocesses write, as they write it
  REQ_FD    requests, one JSON object a line:
              {"op":"execute","id":"...","code":"...","env":{"N":"V"}}
            (env: set for this execution, restored after it)
  EV_FD     events, one JSON object a line:
              {"type":"ready","language":"python","version":"3.11.2","pid":N}
              {"type":"result","id":..,"is_main_result":bool,"data":{MIME:..},
               "truncated":[MIME..]?}
              {"type":"error","id":..,"name":..,"value":..,"traceback":".."}
              {"type":"end","id":..,"execution_count":N,
               "status":"ok"|"error"|"interrupted","duration_ms":F}
            Binary representations (image/png, image/jpeg, application/pdf)
            are base64; the others are text.  A bad request line gets an
            error and an end with its id (or null), and the runner goes on.

Before each "end" the runner flushes stdout and stderr, so a reader that
drains both pipes after reading "end" has every byte the execution's own
process wrote.  SIGINT interrupts the execution (KeyboardInterrupt in the
user's code, status "interrupted"); between executions it is ignored.  Code
that ignores it is the caller's to kill.  Everything this process receives
and prints is the box's: the caller treats events as untrusted input.
"""

import ast
import base64
import builtins
import importlib.abc
import importlib.machinery
import io
import json
import linecache
import os
import signal
import sys
import threading
import time
import traceback
import types
import warnings

# The largest representation sent, after base64 (HUSK_CTX_REPR_MAX); a
# larger one is left out and named in "truncated".
REPR_MAX = int(os.environ.get("HUSK_CTX_REPR_MAX", str(8 * 1024 * 1024)))

BINARY_MIMES = ("image/png", "image/jpeg", "application/pdf")
# _repr_*_ methods, in the order a notebook looks for them.
REPR_METHODS = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("image/svg+xml", "_repr_svg_"),
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("text/latex", "_repr_latex_"),
    ("application/json", "_repr_json_"),
    ("application/javascript", "_repr_javascript_"),
    ("application/pdf", "_repr_pdf_"),
)
RUNNER_FILE = os.path.abspath(__file__)


class Channel:
    """The event fd: whole lines, one writer at a time."""

    def __init__(self, fd):
        self.fd = fd
        self.lock = threading.Lock()

    def send(self, obj):
        # Lone surrogates (from bytes decoded with surrogateescape) become
        # "?": every line is valid UTF-8 JSON.
        line = (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode(
            "utf-8", "replace")
        with self.lock:
            view = memoryview(line)
            while view:
                try:
                    n = os.write(self.fd, view)
                except InterruptedError:
                    continue
                view = view[n:]


class Runner:
    def __init__(self, req_fd, ev_fd):
        self.req = os.fdopen(req_fd, "rb", buffering=1 << 16)
        self.ev = Channel(ev_fd)
        self.count = 0
        self.executing = False
        self.current = None  # id of the execution in progress
        self.ns = {"__name__": "__main__", "__builtins__": builtins, "display": self.display}
        builtins.display = self.display  # what IPython code calls without importing it

    # ---- results ----------------------------------------------------------------

    def bundle(self, obj):
        """The representations of obj, as a notebook would show it."""
        data = {}
        if _is_mpl_figure(obj):
            png = _figure_png(obj)
            if png is not None:
                data["image/png"] = png
        mb = getattr(obj, "_repr_mimebundle_", None)
        if callable(mb) and not isinstance(obj, type):
            try:
                got = mb()
                if isinstance(got, tuple):
                    got = got[0]
                if isinstance(got, dict):
                    for k, v in got.items():
                        if isinstance(k, str) and v is not None:
                            data.setdefault(k, v)
            except Exception:
                pass
        for mime, name in REPR_METHODS:
            if mime in data or isinstance(obj, type):
                continue
            fn = getattr(obj, name, None)
            if not callable(fn):
                continue
            try:
                v = fn()
            except Exception:
                continue
            if isinstance(v, tuple):  # (data, metadata)
                v = v[0]
            if v is not None:
                data[mime] = v
        if "text/plain" not in data:
            try:
                data["text/plain"] = repr(obj)
            except Exception as e:
                data["text/plain"] = "<repr failed: %s: %s>" % (type(e).__name__, e)
        return data

    def send_result(self, obj, main):
        out, truncated = {}, []
        for mime, v in self.bundle(obj).items():
            if mime in BINARY_MIMES and isinstance(v, (bytes, bytearray)):
                v = base64.b64encode(bytes(v)).decode("ascii")
            elif isinstance(v, (bytes, bytearray)):
                v = bytes(v).decode("utf-8", "replace")
            elif mime == "application/json" and not isinstance(v, str):
                try:
                    v = json.dumps(v)
                except Exception:
                    continue
            elif not isinstance(v, str):
                v = str(v)
            if len(v) > REPR_MAX:
                truncated.append(mime)
                continue
            out[mime] = v
        ev = {"type": "result", "id": self.current, "is_main_result": main, "data": out}
        if truncated:
            ev["truncated"] = truncated
        self.ev.send(ev)

    def display(self, *objs, **kwargs):
        """IPython's display(): each object as a result that is not the main one."""
        _flush()
        for obj in objs:
            self.send_result(obj, False)

    def show_figures(self):
        """Each open matplotlib figure becomes a PNG result; then they are closed."""
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            nums = list(plt.get_fignums())
        except Exception:
            return
        for num in nums:
            try:
                fig = plt.figure(num)
            except Exception:
                continue
            _flush()
            self.send_result(fig, False)
        try:
            plt.close("all")
        except Exception:
            pass

    # ---- one execution ------------------------------------------------------------

    def error_event(self, etype, value, tb):
        frames = [f for f in traceback.extract_tb(tb) if os.path.abspath(f.filename) != RUNNER_FILE]
        text = ""
        if frames:
            text = "Traceback (most recent call last):\n" + "".join(traceback.format_list(frames))
        text += "".join(traceback.format_exception_only(etype, value))
        try:
            val = str(value)
        except Exception:
            val = "<str failed>"
        self.ev.send({"type": "error", "id": self.current, "name": etype.__name__,
                      "value": val, "traceback": text})

    def run_code(self, code):
        """Returns "ok", "error" or "interrupted"."""
        name = "<cell %d>" % self.count
        try:
            tree = ast.parse(code, name, "exec")
        except SyntaxError as e:
            self.error_event(type(e), e, None)
            return "error"
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        status = "ok"
        value = None
        try:
            body = compile(tree, name, "exec")
            expr = compile(last, name, "eval") if last is not None else None
            self.executing = True
            try:
                exec(body, self.ns)
                if expr is not None:
                    value = eval(expr, self.ns)
            finally:
                self.executing = False
        except KeyboardInterrupt:
            self.error_event(*sys.exc_info())
            status = "interrupted"
        except SystemExit as e:
            # exit() ends the code, not the context (as in a notebook).
            if e.code not in (None, 0):
                self.error_event(*sys.exc_info())
                status = "error"
        except BaseException:
            self.error_event(*sys.exc_info())
            status = "error"
        _flush()
        if status == "ok" and value is not None:
            self.ns["_"] = value
            self.send_result(value, True)
        self.show_figures()
        return status

    def execute(self, req):
        self.count += 1
        self.current = req.get("id")
        t0 = time.monotonic()
        code = req.get("code")
        env = req.get("env") or {}
        status = "error"
        if not isinstance(code, str) or not isinstance(env, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            self.ev.send({"type": "error", "id": self.current, "name": "ValueError",
                          "value": "code must be a string and env an object of strings",
                          "traceback": ""})
        else:
            saved = {k: os.environ.get(k) for k in env}
            try:
                for k, v in env.items():
                    os.environ[k] = v
            except (ValueError, OSError) as e:
                self.ev.send({"type": "error", "id": self.current, "name": type(e).__name__,
                              "value": str(e), "traceback": ""})
            else:
                status = self.run_code(code)
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        _flush()
        self.ev.send({"type": "end", "id": self.current, "execution_count": self.count,
                      "status": status, "duration_ms": round((time.monotonic() - t0) * 1000, 3)})
        self.current = None

    def serve(self):
        pid = os.getpid()
        self.ev.send({"type": "ready", "language": "python",
                      "version": "%d.%d.%d" % sys.version_info[:3], "pid": os.getpid()})
        while True:
            try:
                line = self.req.readline()
            except KeyboardInterrupt:
                continue
            if not line:
                return
            try:
                req = json.loads(line)
                if not isinstance(req, dict) or req.get("op") != "execute":
                    raise ValueError("a request is {\"op\":\"execute\",\"id\":...,\"code\":...}")
            except (ValueError, UnicodeDecodeError) as e:
                self.count += 1
                self.ev.send({"type": "error", "id": None, "name": "ValueError",
                              "value": "bad request: %s" % e, "traceback": ""})
                self.ev.send({"type": "end", "id": None, "execution_count": self.count,
                              "status": "error", "duration_ms": 0})
                continue
            try:
                self.execute(req)
                if os.getpid() != pid:
                    os._exit(0)  # a fork of the user's code: only one runner reads requests
            except KeyboardInterrupt:
                # An interrupt that arrived after the code ended: the
                # execution still gets its end.
                self.ev.send({"type": "end", "id": self.current, "execution_count": self.count,
                              "status": "interrupted", "duration_ms": 0})
                self.current = None


def _flush():
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except Exception:
            pass


def _is_mpl_figure(obj):
    fig_mod = sys.modules.get("matplotlib.figure")
    return fig_mod is not None and isinstance(obj, getattr(fig_mod, "Figure", ()))


def _figure_png(fig):
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", bbox_inches="tight")
    except Exception:
        return None
    return buf.getvalue()


class _PyplotHook(importlib.abc.MetaPathFinder):
    """Once matplotlib.pyplot is imported, its show() sends the open figures."""

    def __init__(self, runner):
        self.runner = runner

    def find_spec(self, fullname, path, target=None):
        if fullname != "matplotlib.pyplot":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, runner = spec.loader, self.runner

        class Loader(importlib.abc.Loader):
            def create_module(self, s):
                return loader.create_module(s)

            def exec_module(self, module):
                loader.exec_module(module)

                def show(*args, **kwargs):
                    runner.show_figures()

                module.show = show

        spec.loader = Loader()
        return spec


def _sigint(signum, frame):
    if RUNNER is not None and RUNNER.executing:
        raise KeyboardInterrupt


RUNNER = None


def main(argv):
    global RUNNER
    req_fd = int(argv[1]) if len(argv) > 1 else 3
    ev_fd = int(argv[2]) if len(argv) > 2 else 4
    for fd in (req_fd, ev_fd):
        os.set_inheritable(fd, False)  # the user's subprocesses do not get them
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.environ.setdefault("MPLBACKEND", "Agg")
    warnings.filterwarnings("ignore", message=".*non-interactive.*cannot be shown")
    sys.argv = [""]
    # The user's modules come from the working directory, as in a notebook,
    # not from where the runner was read.
    if sys.path and sys.path[0] == os.path.dirname(RUNNER_FILE):
        sys.path[0] = ""
    RUNNER = Runner(req_fd, ev_fd)
    sys.meta_path.insert(0, _PyplotHook(RUNNER))
    signal.signal(signal.SIGINT, _sigint)
    # The runner's own module is not the user's __main__.
    sys.modules["__main__"] = types.ModuleType("__main__")
    sys.modules["__main__"].__dict__.update(RUNNER.ns)
    RUNNER.ns = sys.modules["__main__"].__dict__
    RUNNER.ns["display"] = RUNNER.display
    RUNNER.serve()


if __name__ == "__main__":
    main(sys.argv)
