// husk's JavaScript code-context runner: a persistent Node interpreter in
// a box.  The same protocol as the Python runner (src/ctx/husk_ctx.py,
// whose header describes it): requests on REQ_FD, events on EV_FD, JSON
// lines; the user's stdout and stderr are the process's own (on Linux,
// Node writes pipes synchronously, so every byte written before "end" is
// in the pipe when "end" is sent).
//
//   node husk_ctx.js [REQ_FD EV_FD]      (default 3 and 4)
//
// Globals declared by one execution (var, function, let, const, class)
// stay for the next; `require` resolves from the working directory.  The completion value of the code is the main result
// (a Promise is awaited first); `display(x)` sends further results.  An
// object's _repr_html_, _repr_svg_, _repr_markdown_, _repr_json_ and
// _repr_png_ (base64 or a Buffer) methods give its other representations,
// as in Python.  SIGINT interrupts synchronous code (status "interrupted");
// between executions it is ignored.  Node built-ins only.
'use strict';

const fs = require('fs');
const vm = require('vm');
const util = require('util');
const readline = require('readline');

const REPR_MAX = Number(process.env.HUSK_CTX_REPR_MAX || 8 * 1024 * 1024);
const REPR_METHODS = [
  ['text/html', '_repr_html_'],
  ['text/markdown', '_repr_markdown_'],
  ['image/svg+xml', '_repr_svg_'],
  ['image/png', '_repr_png_'],
  ['image/jpeg', '_repr_jpeg_'],
  ['text/latex', '_repr_latex_'],
  ['application/json', '_repr_json_'],
];
const BINARY = new Set(['image/png', 'image/jpeg', 'application/pdf']);

// The protocol fds, reopened close-on-exec (libuv opens with O_CLOEXEC) so
// that the user's child processes do not inherit them; the originals closed.
function reopen(fd, flags) {
  const copy = fs.openSync('/proc/self/fd/' + fd, flags);
  fs.closeSync(fd);
  return copy;
}

const reqFd = reopen(Number(process.argv[2] || 3), 'r');
const evFd = reopen(Number(process.argv[3] || 4), 'w');

function send(obj) {
  const buf = Buffer.from(JSON.stringify(obj) + '\n', 'utf8');
  let off = 0;
  while (off < buf.length) {
    try {
      off += fs.writeSync(evFd, buf, off, buf.length - off);
    } catch (e) {
      if (e.code !== 'EAGAIN' && e.code !== 'EINTR') throw e;
    }
  }
}

let current = null;
let count = 0;

function bundle(value) {
  const data = {};
  if (value !== null && (typeof value === 'object' || typeof value === 'function')) {
    for (const [mime, name] of REPR_METHODS) {
      let fn;
      try {
        fn = value[name];
      } catch (e) {
        continue;
      }
      if (typeof fn !== 'function') continue;
      try {
        let v = fn.call(value);
        if (v === undefined || v === null) continue;
        if (Buffer.isBuffer(v)) v = BINARY.has(mime) ? v.toString('base64') : v.toString('utf8');
        else if (mime === 'application/json' && typeof v !== 'string') v = JSON.stringify(v);
        else v = String(v);
        data[mime] = v;
      } catch (e) {
        // a representation that fails is left out
      }
    }
  }
  try {
    data['text/plain'] = typeof value === 'string' ? util.inspect(value) : util.inspect(value, {depth: 4});
  } catch (e) {
    data['text/plain'] = '<inspect failed: ' + e + '>';
  }
  return data;
}

function sendResult(value, main) {
  const data = {};
  const truncated = [];
  for (const [mime, v] of Object.entries(bundle(value))) {
    if (v.length > REPR_MAX) truncated.push(mime);
    else data[mime] = v;
  }
  const ev = {type: 'result', id: current, is_main_result: main, data};
  if (truncated.length) ev.truncated = truncated;
  send(ev);
}

function display(...values) {
  for (const v of values) sendResult(v, false);
}
globalThis.display = display;
// require() as in a script of the context's working directory (its
// node_modules, then the global ones).
globalThis.require = require('module').createRequire(process.cwd() + '/');

function sendError(e) {
  let name = 'Error';
  let value = '';
  let tb = '';
  if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e)) {
    name = String(e.name || 'Error');
    value = String(e.message === undefined ? '' : e.message);
    // The user's frames only: none of the runner's or Node's internals.
    tb = String(e.stack || '')
      .split('\n')
      .filter((l) => !/^\s+at /.test(l) || (l.includes('<cell ') && !l.includes(__filename)))
      .join('\n');
  } else {
    name = 'Thrown';
    try {
      value = util.inspect(e);
    } catch (x) {
      value = '<uninspectable>';
    }
    tb = 'Uncaught ' + value;
  }
  send({type: 'error', id: current, name, value, traceback: tb});
}

async function execute(req) {
  count += 1;
  current = req.id === undefined ? null : req.id;
  const t0 = process.hrtime.bigint();
  const env = req.env || {};
  let status = 'ok';
  const saved = {};
  if (typeof req.code !== 'string' || typeof env !== 'object' || Array.isArray(env) ||
      !Object.values(env).every((v) => typeof v === 'string')) {
    send({type: 'error', id: current, name: 'TypeError',
      value: 'code must be a string and env an object of strings', traceback: ''});
    status = 'error';
  } else {
    for (const k of Object.keys(env)) {
      saved[k] = process.env[k];
      process.env[k] = env[k];
    }
    try {
      const script = new vm.Script(req.code, {filename: '<cell ' + count + '>'});
      let value = script.runInThisContext({breakOnSigint: true, displayErrors: false});
      if (value && typeof value.then === 'function') value = await value;
      if (value !== undefined) sendResult(value, true);
    } catch (e) {
      const interrupted = e && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED';
      sendError(e);
      status = interrupted ? 'interrupted' : 'error';
    } finally {
      for (const k of Object.keys(saved)) {
        if (saved[k] === undefined) delete process.env[k];
        else process.env[k] = saved[k];
      }
    }
  }
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  send({type: 'end', id: current, execution_count: count, status,
    duration_ms: Math.round(ms * 1000) / 1000});
  current = null;
}

// Between executions, SIGINT is ignored; during one, breakOnSigint turns
// it into the script's interruption.
process.on('SIGINT', () => {});
// A rejection nobody awaited is the user's error, not the runner's end.
process.on('unhandledRejection', (e) => {
  try {
    process.stderr.write('Unhandled rejection: ' + util.inspect(e) + '\n');
  } catch (x) {
    // nothing to report to
  }
});

const queue = [];
let busy = false;

async function pump() {
  if (busy) return;
  busy = true;
  while (queue.length) {
    const line = queue.shift();
    let req;
    try {
      req = JSON.parse(line);
      if (!req || typeof req !== 'object' || req.op !== 'execute')
        throw new Error('a request is {"op":"execute","id":...,"code":...}');
    } catch (e) {
      count += 1;
      send({type: 'error', id: null, name: 'ValueError', value: 'bad request: ' + e.message, traceback: ''});
      send({type: 'end', id: null, execution_count: count, status: 'error', duration_ms: 0});
      continue;
    }
    await execute(req);
  }
  busy = false;
}

const rl = readline.createInterface({input: fs.createReadStream(null, {fd: reqFd}), crlfDelay: Infinity});
rl.on('line', (line) => {
  queue.push(line);
  pump();
});
rl.on('close', () => {
  const done = () => (busy ? setTimeout(done, 10) : process.exit(0));
  done();
});

send({type: 'ready', language: 'javascript', version: process.versions.node, pid: process.pid});
