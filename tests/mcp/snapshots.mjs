// Pause, resume and snapshots over MCP with an official TypeScript SDK
// client (which checks every structuredContent against the tool's
// outputSchema): sandbox_pause freezes a sandbox (tools on it fail naming
// the state, sandbox_list shows it paused), sandbox_resume goes on;
// sandbox_snapshot saves its files and sandbox_create with snapshot makes
// independent copies of them; keep_memory false pauses to disk; without an
// object store (husk mcp) a snapshot or a pause to disk is a clear tool
// error.  Prints TAP lines.  Environment as
// clients.mjs's (SDK, MODE, HUSK, HUSK_DATA, URL, KEY, KEY2, WAIT_S).
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

const c = await connect();
const boxes = [];
const text = r => r.content.map(b => b.text || '').join('\n');
const sh = (box, cmd) => call(c, 'sandbox_exec', { sandbox_id: box, command: cmd });
async function create(args) {
  const r = await call(c, 'sandbox_create', args || {});
  const s = structured(r);
  assert.ok(!r.isError, JSON.stringify(s));
  boxes.push(s.sandbox_id);
  return s;
}

await t('tools/list: sandbox_pause, sandbox_resume, sandbox_snapshot; sandbox_create takes a snapshot', async () => {
  const { tools } = await c.listTools();
  const by = Object.fromEntries(tools.map(x => [x.name, x]));
  for (const name of ['sandbox_pause', 'sandbox_resume', 'sandbox_snapshot']) {
    assert.ok(by[name], `missing ${name}`);
    assert.deepEqual(by[name].inputSchema.required, ['sandbox_id']);
    assert.equal(by[name].outputSchema.type, 'object');
  }
  assert.equal(by.sandbox_snapshot.inputSchema.properties.metadata.type, 'object');
  assert.match(by.sandbox_snapshot.description, /processes/);
  assert.match(by.sandbox_pause.description, /TTL/);
  assert.equal(by.sandbox_create.inputSchema.properties.snapshot.type, 'string');
  assert.equal(by.sandbox_create.inputSchema.properties.rebase.type, 'boolean');
});

let box;
await t('sandbox_pause: the sandbox is paused, its TTL stopped', async () => {
  box = (await create({ ttl_seconds: 900 })).sandbox_id;
  let r = await sh(box, 'echo kept > /workspace/state.txt; sleep 1000 >/dev/null 2>&1 & echo started');
  assert.ok(!r.isError, text(r));
  r = await call(c, 'sandbox_pause', { sandbox_id: box });
  const s = structured(r);
  assert.ok(!r.isError, JSON.stringify(s));
  assert.equal(s.state, 'paused');
  assert.ok(s.paused_at && s.paused_until, JSON.stringify(s));
  assert.equal(s.expires_at, undefined);
  assert.ok(s.remaining_seconds > 800 && s.remaining_seconds <= 900, JSON.stringify(s));
});

await t('a paused sandbox: exec, files and run_code fail naming the state; sandbox_list shows it', async () => {
  for (const [name, args] of [['sandbox_exec', { sandbox_id: box, command: 'true' }],
                              ['sandbox_read_file', { sandbox_id: box, path: 'state.txt' }],
                              ['run_code', { sandbox_id: box, code: '1' }],
                              ['sandbox_pause', { sandbox_id: box }]]) {
    const r = await call(c, name, args);
    assert.equal(r.isError, true, name);
    assert.match(text(r), /paused/, name);
  }
  const s = structured(await call(c, 'sandbox_list', {}));
  const mine = s.sandboxes.find(x => x.sandbox_id === box);
  assert.ok(mine, 'listed');
  assert.equal(mine.state, 'paused');
});

await t('sandbox_resume: running again, with its files and processes', async () => {
  let r = await call(c, 'sandbox_resume', { sandbox_id: box });
  const s = structured(r);
  assert.ok(!r.isError, JSON.stringify(s));
  assert.equal(s.state, 'running');
  assert.ok(s.expires_at, JSON.stringify(s));
  assert.equal(s.paused_at, undefined);
  r = await sh(box, 'cat /workspace/state.txt; pgrep -c sleep');
  assert.equal(structured(r).stdout, 'kept\n1\n');
  r = await call(c, 'sandbox_resume', { sandbox_id: box });
  assert.equal(r.isError, true);
  assert.match(text(r), /not paused|running/);
});

await t('errors: an unknown sandbox, rebase without snapshot', async () => {
  let r = await call(c, 'sandbox_pause', { sandbox_id: 'b_000000000000000000000000' });
  assert.equal(r.isError, true);
  assert.match(text(r), /not found/);
  r = await call(c, 'sandbox_create', { rebase: true });
  assert.equal(r.isError, true);
  assert.match(text(r), /rebase applies only with snapshot/);
});

if (MODE === 'stdio') {
  await t('husk mcp has no object store: sandbox_snapshot says snapshots are not available', async () => {
    const r = await call(c, 'sandbox_snapshot', { sandbox_id: box });
    assert.equal(r.isError, true);
    assert.match(text(r), /not available on this server/);
    assert.equal(r.structuredContent, undefined);
  });
} else {
  let snap;
  await t('sandbox_snapshot: an id, its size, its metadata', async () => {
    const r = await call(c, 'sandbox_snapshot', { sandbox_id: box, metadata: { step: 'one' } });
    const s = structured(r);
    assert.ok(!r.isError, JSON.stringify(s));
    assert.match(s.snapshot_id, /^s_[0-9a-f]{24}$/);
    assert.equal(s.sandbox_id, box);
    assert.ok(s.size > 0 && s.entries > 0 && s.sha256.length === 64, JSON.stringify(s));
    assert.deepEqual(s.metadata, { step: 'one' });
    snap = s.snapshot_id;
    assert.equal(structured(await sh(box, 'echo alive')).stdout, 'alive\n');
  });

  await t('sandbox_create with snapshot: two independent copies of its files', async () => {
    const a = await create({ snapshot: snap });
    const b = await create({ snapshot: snap });
    assert.equal(a.snapshot_id, snap);
    assert.equal(a.ttl_seconds, 900, 'the snapshot\'s lifetime');
    assert.equal(structured(await sh(a.sandbox_id, 'cat /workspace/state.txt; pgrep -c sleep || true')).stdout,
                 'kept\n0\n', 'files kept, processes not');
    await sh(a.sandbox_id, 'echo forked > /workspace/state.txt');
    assert.equal(structured(await sh(b.sandbox_id, 'cat /workspace/state.txt')).stdout, 'kept\n');
  });

  await t('a snapshot of a paused sandbox keeps it paused', async () => {
    assert.ok(!(await call(c, 'sandbox_pause', { sandbox_id: box })).isError);
    const r = await call(c, 'sandbox_snapshot', { sandbox_id: box });
    assert.ok(!r.isError, text(r));
    const s = structured(await call(c, 'sandbox_list', {}));
    assert.equal(s.sandboxes.find(x => x.sandbox_id === box).state, 'paused');
    assert.ok(!(await call(c, 'sandbox_resume', { sandbox_id: box })).isError);
  });

  await t('sandbox_snapshots: list them, refuse to delete one a live sandbox was made from', async () => {
    let r = await call(c, 'sandbox_snapshots', { action: 'list', sandbox_id: box });
    let s = structured(r);
    assert.ok(!r.isError, JSON.stringify(s));
    const mine = s.snapshots.find(x => x.snapshot_id === snap);
    assert.ok(mine, JSON.stringify(s));
    assert.equal(mine.sandbox_id, box);
    assert.equal(mine.sandboxes, 2, 'the two copies made from it');
    assert.deepEqual(mine.metadata, { step: 'one' });
    assert.match(mine.created_at, /^\d{4}-\d\d-\d\dT/);
    r = await call(c, 'sandbox_snapshots', { action: 'list', sandbox_id: 'b_000000000000000000000000' });
    assert.equal(structured(r).snapshots.length, 0);
    r = await call(c, 'sandbox_snapshots', { action: 'delete', snapshot_id: snap });
    assert.equal(r.isError, true);
    assert.match(text(r), /in use.*destroy the sandboxes made from it first/);
    r = await call(c, 'sandbox_snapshots', { action: 'delete' });
    assert.equal(r.isError, true);
    assert.match(text(r), /needs snapshot_id/);
    r = await call(c, 'sandbox_snapshots', { action: 'drop' });
    assert.equal(r.isError, true);
  });

  await t('sandbox_snapshots delete: a snapshot nothing uses goes', async () => {
    let r = await call(c, 'sandbox_snapshot', { sandbox_id: box });
    const id = structured(r).snapshot_id;
    r = await call(c, 'sandbox_snapshots', { action: 'delete', snapshot_id: id });
    assert.ok(!r.isError, text(r));
    assert.equal(structured(r).snapshot_id, id);
    r = await call(c, 'sandbox_snapshots', { action: 'list' });
    assert.ok(!structured(r).snapshots.some(x => x.snapshot_id === id));
    r = await call(c, 'sandbox_snapshots', { action: 'delete', snapshot_id: id });
    assert.equal(r.isError, true);
    assert.match(text(r), /not found/);
  });

  await t('an unknown snapshot is a tool error', async () => {
    const r = await call(c, 'sandbox_create', { snapshot: 's_000000000000000000000000' });
    assert.equal(r.isError, true);
    assert.match(text(r), /snapshot `s_000000000000000000000000` not found/);
  });

  if (process.env.KEY2) {
    await t('another tenant can neither restore the snapshot nor pause the sandbox', async () => {
      const other = await connect(process.env.KEY2);
      let r = await call(other, 'sandbox_create', { snapshot: snap });
      assert.equal(r.isError, true);
      assert.match(text(r), /not found/);
      r = await call(other, 'sandbox_pause', { sandbox_id: box });
      assert.equal(r.isError, true);
      assert.match(text(r), /not found/);
      await other.close();
    });
  }
}

if (MODE === 'stdio') {
  await t('keep_memory false needs the object store: a tool error naming keep_memory true', async () => {
    const r = await call(c, 'sandbox_pause', { sandbox_id: box, keep_memory: false });
    assert.equal(r.isError, true);
    assert.match(text(r), /cannot pause sandboxes to disk.*keep_memory true/);
  });
} else {
  await t('keep_memory false: paused to disk, resumed with its files and without its processes', async () => {
    const d = (await create({ ttl_seconds: 900 })).sandbox_id;
    let r = await sh(d, 'echo on-disk > /workspace/kept.txt; sleep 1000 >/dev/null 2>&1 & echo started');
    assert.ok(!r.isError, text(r));
    r = await call(c, 'sandbox_pause', { sandbox_id: d, keep_memory: false });
    let s = structured(r);
    assert.ok(!r.isError, JSON.stringify(s));
    assert.equal(s.state, 'paused');
    assert.equal(s.keep_memory, false);
    r = await sh(d, 'true');
    assert.equal(r.isError, true);
    assert.match(text(r), /paused/);
    s = structured(await call(c, 'sandbox_list', {}));
    assert.equal(s.sandboxes.find(x => x.sandbox_id === d).keep_memory, false);
    r = await call(c, 'sandbox_resume', { sandbox_id: d });
    s = structured(r);
    assert.ok(!r.isError, JSON.stringify(s));
    assert.equal(s.state, 'running');
    assert.equal(structured(await sh(d, 'cat /workspace/kept.txt; pgrep -c sleep || true')).stdout,
                 'on-disk\n0\n');
  });
}

await t('sandbox_destroy ends them all, a paused one too', async () => {
  assert.ok(!(await call(c, 'sandbox_pause', { sandbox_id: box })).isError);
  for (const b of boxes)
    assert.equal(structured(await call(c, 'sandbox_destroy', { sandbox_id: b })).state, 'stopped');
});

await c.close();
console.log(`# ${n - failed}/${n} passed`);
process.exit(failed ? 1 : 0);
