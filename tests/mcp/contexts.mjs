// Code contexts over MCP with an official TypeScript SDK client (which
// checks every structuredContent against the tool's outputSchema): run_code
// with a sandbox_id keeps state between calls and answers with notebook
// results as content blocks; the contexts tool lists, creates, restarts,
// interrupts and deletes them; run_code without sandbox_id is unchanged.
// Prints TAP lines.  Environment as clients.mjs's (SDK, MODE, HUSK,
// HUSK_DATA, URL, KEY, KEY2, WAIT_S).
import assert from 'node:assert/strict';

const SDK = process.env.SDK || 'v1';
const MODE = process.env.MODE || 'stdio';
const WAIT_S = Number(process.env.WAIT_S || 3);

let n = 0, failed = 0;
async function t(name, fn) {
  n++;
  try {
    await fn();
    console.log(`ok ${n} - [${SDK} ${MODE}] ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok ${n} - [${SDK} ${MODE}] ${name}`);
    console.log('# ' + String(e && e.stack || e).split('\n').slice(0, 8).join('\n# '));
  }
}

async function load() {
  if (SDK === 'v1') {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    return { Client, StdioClientTransport, StreamableHTTPClientTransport, opts: {} };
  }
  const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
  const { StdioClientTransport } = await import('@modelcontextprotocol/client/stdio');
  return { Client, StdioClientTransport, StreamableHTTPClientTransport,
           opts: { versionNegotiation: { mode: { pin: '2026-07-28' } } } };
}

const lib = await load();

async function connect(key) {
  const transport = MODE === 'http'
    ? new lib.StreamableHTTPClientTransport(new URL(process.env.URL),
        { requestInit: { headers: { Authorization: `Bearer ${key || process.env.KEY}` } } })
    : new lib.StdioClientTransport({ command: process.env.HUSK,
        args: ['mcp', '--data', process.env.HUSK_DATA, '--wait', String(WAIT_S), '--quiet'],
        stderr: 'inherit' });
  const client = new lib.Client({ name: 'husk-test', version: '1.0.0' }, lib.opts);
  await client.connect(transport);
  return client;
}

const call = (c, name, args, opts) =>
  c.callTool({ name, arguments: args }, ...(SDK === 'v1' ? [undefined] : []),
             { timeout: 120000, ...(opts || {}) });

function structured(r) {
  assert.ok(r.content.length >= 1 && r.content[0].type === 'text', 'first block is text');
  assert.deepEqual(JSON.parse(r.content[0].text), r.structuredContent);
  return r.structuredContent;
}
// The content blocks after the structured result's JSON text.
const blocks = r => r.content.slice(1);
const texts = r => blocks(r).filter(b => b.type === 'text').map(b => b.text);

const c = await connect();
let box;
const run = (code, more) => call(c, 'run_code', { sandbox_id: box, code, ...(more || {}) });

await t('tools/list: run_code takes sandbox_id and context_id; the contexts tool', async () => {
  const { tools } = await c.listTools();
  const rc = tools.find(x => x.name === 'run_code');
  assert.ok(rc.inputSchema.properties.sandbox_id && rc.inputSchema.properties.context_id);
  assert.deepEqual(rc.inputSchema.properties.language.enum, ['python', 'bash', 'node', 'javascript']);
  assert.deepEqual(rc.inputSchema.required, ['code']);
  assert.match(rc.description, /notebook/);
  const cx = tools.find(x => x.name === 'contexts');
  assert.ok(cx, 'a contexts tool');
  assert.deepEqual(cx.inputSchema.properties.action.enum, ['list', 'create', 'restart', 'interrupt', 'delete']);
  assert.deepEqual(cx.inputSchema.required.sort(), ['action', 'sandbox_id']);
  assert.equal(cx.outputSchema.type, 'object');
});

await t('run_code without sandbox_id: a one-shot run as before (language defaults to python)', async () => {
  let r = await call(c, 'run_code', { language: 'python', code: 'print(6*7)' });
  let s = structured(r);
  assert.ok(!r.isError, JSON.stringify(s));
  assert.equal(s.status, 'completed');
  assert.equal(s.exit_code, 0);
  assert.equal(s.stdout, '42\n');
  assert.match(s.job_id, /^j_/);
  assert.equal(s.sandbox_id, undefined);
  r = await call(c, 'run_code', { code: 'import sys; print(sys.version_info[0])' });
  s = structured(r);
  assert.equal(s.stdout, '3\n');
  r = await call(c, 'run_code', { context_id: 'default-python', code: 'x' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /context_id needs sandbox_id/);
});

await t('sandbox_create for the session', async () => {
  const s = structured(await call(c, 'sandbox_create', { ttl_seconds: 900 }));
  box = s.sandbox_id;
  assert.match(box, /^b_[0-9a-f]{24}$/);
});

await t('a two-step stateful session: the chart as a PNG image block and the value as text', async () => {
  let r = await run('import matplotlib.pyplot as plt; xs=[1,2,3]');
  let s = structured(r);
  assert.ok(!r.isError, JSON.stringify(s));
  assert.equal(s.status, 'ok');
  assert.equal(s.context_id, 'default-python');
  assert.equal(s.language, 'python');
  assert.equal(s.sandbox_id, box);
  assert.deepEqual(s.outputs, []);
  assert.deepEqual(blocks(r), []);
  const first = s.execution_count;
  r = await run('plt.plot(xs); xs[-1]');
  s = structured(r);
  assert.ok(!r.isError, JSON.stringify(s));
  assert.equal(s.execution_count, first + 1);
  const img = blocks(r).find(b => b.type === 'image');
  assert.ok(img, 'an image block: ' + JSON.stringify(blocks(r).map(b => b.type)));
  assert.equal(img.mimeType, 'image/png');
  const png = Buffer.from(img.data, 'base64');
  assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  assert.equal(png.subarray(12, 16).toString(), 'IHDR');
  assert.ok(texts(r).includes('3'), JSON.stringify(texts(r)));
  const main = s.outputs.find(o => o.main_result);
  assert.equal(main.text, '3');
  assert.equal(main.returned_as, 'text');
  assert.ok(s.outputs.some(o => o.mime_type === 'image/png' && o.returned_as === 'image'));
});

await t('an exception: isError with "Name: value" and the traceback; the state survives', async () => {
  const r = await run('def f(d):\n    return 1 / d\nf(0)');
  const s = structured(r);
  assert.equal(r.isError, true);
  assert.equal(s.status, 'error');
  assert.equal(s.error.name, 'ZeroDivisionError');
  assert.match(s.error.value, /division by zero/);
  const t1 = texts(r).find(x => x.startsWith('ZeroDivisionError: '));
  assert.ok(t1, JSON.stringify(texts(r)));
  assert.match(t1, /return 1 \/ d/);   // the user's own line is in the traceback
  const again = structured(await run('sum(xs)'));
  assert.equal(again.outputs[0].text, '6');
});

await t('stdout and stderr as text blocks, in the structured result too', async () => {
  const r = await run('import sys\nprint("hi")\nprint("oops", file=sys.stderr)');
  const s = structured(r);
  assert.ok(!r.isError);
  assert.equal(s.stdout, 'hi\n');
  assert.equal(s.stderr, 'oops\n');
  assert.deepEqual(texts(r), ['hi\n', '[stderr]\noops\n']);
});

await t('HTML as an embedded resource with its text/plain; SVG as an image block', async () => {
  let r = await run('class T:\n    def _repr_html_(self): return "<b>bold</b>"\n    def __repr__(self): return "T()"\nT()');
  let s = structured(r);
  assert.ok(!r.isError, JSON.stringify(s));
  const res = blocks(r).find(b => b.type === 'resource');
  assert.ok(res, JSON.stringify(blocks(r)));
  assert.equal(res.resource.mimeType, 'text/html');
  assert.equal(res.resource.text, '<b>bold</b>');
  assert.match(res.resource.uri, /^husk:\/\//);
  assert.ok(texts(r).includes('T()'));
  r = await run('class S:\n    def _repr_svg_(self): return \'<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>\'\nS()');
  s = structured(r);
  const img = blocks(r).find(b => b.type === 'image');
  assert.ok(img, JSON.stringify(blocks(r)));
  assert.equal(img.mimeType, 'image/svg+xml');
  assert.match(Buffer.from(img.data, 'base64').toString(), /^<svg /);
});

await t('long output: the tail inline, the whole kept in the sandbox', async () => {
  const r = await run('for i in range(30000): print(i)');
  const s = structured(r);
  assert.equal(s.stdout_truncated, true);
  assert.ok(s.stdout.endsWith('29998\n29999\n'));
  assert.ok(s.stdout.length <= 20000);
  assert.ok(s.notes.some(x => x.includes(s.stdout_file)));
  const w = structured(await call(c, 'sandbox_exec', { sandbox_id: box, command: `wc -l < ${s.stdout_file}` }));
  assert.equal(w.stdout.trim(), '30000');
});

await t('contexts list shows the default context', async () => {
  const r = await call(c, 'contexts', { action: 'list', sandbox_id: box });
  const s = structured(r);
  assert.ok(!r.isError, JSON.stringify(s));
  const d = s.contexts.find(x => x.context_id === 'default-python');
  assert.ok(d, JSON.stringify(s));
  assert.equal(d.language, 'python');
  assert.equal(d.state, 'idle');
  assert.ok(d.execution_count >= 6, JSON.stringify(d));
});

await t('a timeout interrupts the execution and keeps the state', async () => {
  const r = await run('import time\nkept = 7\ntime.sleep(30)', { timeout_seconds: 1 });
  const s = structured(r);
  assert.equal(r.isError, true);
  assert.equal(s.status, 'timeout');
  assert.ok(texts(r).some(x => /time limit/.test(x)));
  assert.equal(structured(await run('kept')).outputs[0].text, '7');
});

await t('interrupt stops a running execution; a second one meanwhile is refused', async () => {
  const p = run('import time\ntime.sleep(60)', { timeout_seconds: 90 });
  await new Promise(res => setTimeout(res, 1500));
  const busy = await run('1');
  assert.equal(busy.isError, true);
  assert.match(busy.content[0].text, /running another execution/);
  const k = await call(c, 'contexts', { action: 'interrupt', sandbox_id: box, context_id: 'default-python' });
  assert.ok(!k.isError, k.content[0].text);
  const r = await p;
  const s = structured(r);
  assert.equal(r.isError, true);
  assert.equal(s.status, 'interrupted');
  assert.equal(structured(await run('kept')).outputs[0].text, '7');
});

await t('restart clears the state: the next use of a name is a NameError', async () => {
  const k = await call(c, 'contexts', { action: 'restart', sandbox_id: box, context_id: 'default-python' });
  const ks = structured(k);
  assert.ok(!k.isError, JSON.stringify(ks));
  assert.equal(ks.context.context_id, 'default-python');
  const r = await run('xs');
  const s = structured(r);
  assert.equal(r.isError, true);
  assert.equal(s.error.name, 'NameError');
  assert.ok(texts(r).some(x => x.startsWith('NameError: ')), JSON.stringify(texts(r)));
});

await t('the interpreter dying is reported, and the context starts again', async () => {
  const r = await run('import os\nos._exit(3)');
  const s = structured(r);
  assert.equal(r.isError, true);
  assert.equal(s.status, 'died');
  assert.equal(s.context_restarted, true);
  assert.ok(texts(r).some(x => /state .* is gone/.test(x)));
  assert.equal(structured(await run('2+2')).outputs[0].text, '4');
});

let bashCtx;
await t('a created bash context with its own cwd: state kept through context_id, then deleted', async () => {
  let r = await call(c, 'contexts', { action: 'create', sandbox_id: box, language: 'bash', cwd: '/tmp', env: { GREETING: 'hello' } });
  let s = structured(r);
  assert.ok(!r.isError, JSON.stringify(s));
  bashCtx = s.context_id;
  assert.equal(s.context.language, 'bash');
  assert.equal(s.context.cwd, '/tmp');
  r = await run('X=5; cd /dev/shm', { context_id: bashCtx });
  assert.ok(!r.isError, r.content[0].text);
  r = await run('echo "$GREETING $X"; pwd', { context_id: bashCtx });
  s = structured(r);
  assert.equal(s.stdout, 'hello 5\n/dev/shm\n');
  assert.equal(s.language, 'bash');
  r = await run('false', { context_id: bashCtx });
  assert.equal(r.isError, true);
  r = await run('x', { context_id: bashCtx, language: 'python' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /is a bash context/);
  const l = structured(await call(c, 'contexts', { action: 'list', sandbox_id: box }));
  assert.deepEqual(l.contexts.map(x => x.context_id).sort(), [bashCtx, 'default-python'].sort());
  r = await call(c, 'contexts', { action: 'delete', sandbox_id: box, context_id: bashCtx });
  assert.equal(structured(r).deleted, true);
  r = await run('echo', { context_id: bashCtx });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /does not exist/);
});

await t('bad calls are isError results the model can act on', async () => {
  let r = await run('1', { template: 'default' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /template does not apply/);
  r = await call(c, 'contexts', { action: 'restart', sandbox_id: box, context_id: 'c_nope' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /does not exist/);
  r = await call(c, 'contexts', { action: 'list', sandbox_id: 'b_000000000000000000000000' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /not found.*sandbox_create/s);
  r = await call(c, 'run_code', { sandbox_id: 'b_000000000000000000000000', code: '1' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /not found.*sandbox_create/s);
  r = await call(c, 'contexts', { action: 'create', sandbox_id: box, cwd: 'relative' });
  assert.equal(r.isError, true);
  r = await call(c, 'contexts', { action: 'list', sandbox_id: box, context_id: 'default-python' });
  assert.equal(r.isError, true);
  r = await call(c, 'contexts', { action: 'frobnicate', sandbox_id: box });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /one of: list, create/);
});

if (MODE === 'http' && process.env.KEY2) {
  await t("another tenant's sandbox: its contexts are not found", async () => {
    const other = await connect(process.env.KEY2);
    let r = await call(other, 'contexts', { action: 'list', sandbox_id: box });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /not found/);
    r = await call(other, 'run_code', { sandbox_id: box, code: 'kept' });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /not found/);
    await other.close();
  });
}

await t('sandbox_destroy ends the contexts with it', async () => {
  assert.equal(structured(await call(c, 'sandbox_destroy', { sandbox_id: box })).state, 'stopped');
  const r = await run('1');
  assert.equal(r.isError, true);
});

await c.close();
console.log(`# ${n - failed}/${n} passed`);
process.exit(failed ? 1 : 0);
