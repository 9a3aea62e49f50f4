// Drives husk's MCP server with an official TypeScript SDK client and prints
// TAP lines.  Environment:
//   SDK=v1|v2        @modelcontextprotocol/sdk (legacy era) or
//                    @modelcontextprotocol/client pinned to 2026-07-28
//   MODE=stdio|http
//   HUSK=path        (stdio) the husk binary; HUSK_DATA its --data
//   URL, KEY, KEY2   (http) the /mcp endpoint, a tenant key, another tenant's key
//   WAIT_S           the server's wait (the call that outlives it sleeps longer)
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
    console.log('# ' + String(e && e.stack || e).split('\n').slice(0, 6).join('\n# '));
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

// The result's JSON text block and structuredContent are the same object.
function structured(r) {
  assert.ok(r.content.length >= 1 && r.content[0].type === 'text', 'first block is text');
  const fromText = JSON.parse(r.content[0].text);
  assert.deepEqual(fromText, r.structuredContent);
  return r.structuredContent;
}

async function expectProtocolError(p, code) {
  try {
    await p;
  } catch (e) {
    assert.equal(e.code, code, `error code ${e.code} (${e.message})`);
    return e;
  }
  assert.fail(`expected a JSON-RPC error ${code}`);
}

const c = await connect();

await t('server identifies itself, tools without listChanged', async () => {
  assert.equal(c.getServerVersion().name, 'husk');
  const caps = c.getServerCapabilities();
  assert.ok(caps.tools, 'tools capability');
  assert.ok(!caps.tools.listChanged, 'no listChanged');
  if (SDK === 'v2') assert.equal(c.getProtocolEra(), 'modern');
});

await t('tools/list: every tool with input and output schemas', async () => {
  const { tools } = await c.listTools();
  const names = tools.map(x => x.name);
  for (const want of ['run_code', 'sandbox_create', 'sandbox_exec', 'sandbox_write_file',
                      'sandbox_read_file', 'sandbox_list_files', 'sandbox_destroy', 'sandbox_list',
                      'job_status', 'job_wait', 'job_cancel', 'template_list'])
    assert.ok(names.includes(want), `missing ${want}`);
  for (const tool of tools) {
    assert.equal(tool.inputSchema.type, 'object');
    assert.equal(tool.outputSchema.type, 'object');
    assert.match(tool.name, /^[A-Za-z0-9_.-]{1,64}$/);
    assert.ok(tool.description.length > 40);
  }
  const rc = tools.find(x => x.name === 'run_code');
  assert.deepEqual(rc.inputSchema.required, ['code']);
  assert.match(rc.description, /no network/i);
});

await t('run_code: a Python snippet', async () => {
  const r = await call(c, 'run_code', { language: 'python', code: 'import sys\nprint(6*7)\nprint("warn", file=sys.stderr)' });
  const s = structured(r);
  assert.ok(!r.isError, JSON.stringify(s));
  assert.equal(s.status, 'completed');
  assert.equal(s.exit_code, 0);
  assert.equal(s.stdout, '42\n');
  assert.equal(s.stderr, 'warn\n');
});

await t('run_code: a matplotlib chart comes back as a PNG image block that decodes', async () => {
  const code = [
    'import matplotlib.pyplot as plt',
    'plt.figure(figsize=(4, 3), dpi=50)',
    'plt.bar(["a", "b", "c"], [3, 1, 2])',
    'plt.savefig("/workspace/output/chart.png")',
    'open("/workspace/output/summary.txt", "w").write("3 bars")',
  ].join('\n');
  const r = await call(c, 'run_code', { language: 'python', code });
  const s = structured(r);
  assert.ok(!r.isError, JSON.stringify(s));
  const img = r.content.find(b => b.type === 'image');
  assert.ok(img, 'an image block');
  assert.equal(img.mimeType, 'image/png');
  const png = Buffer.from(img.data, 'base64');
  assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  assert.equal(png.subarray(12, 16).toString(), 'IHDR');
  assert.equal(png.readUInt32BE(16), 200); // 4 in * 50 dpi
  assert.equal(png.readUInt32BE(20), 150);
  const txt = s.files.find(f => f.path === '/workspace/output/summary.txt');
  assert.equal(txt.content, '3 bars');
});

await t('run_code: input files, bash, non-zero exit is an isError result with the output', async () => {
  const r = await call(c, 'run_code', { language: 'bash', code: 'cat data/in.txt; base64 -d < /dev/null; od -An -tx1 bin.dat; exit 3',
                                        files: { 'data/in.txt': 'hello\n' },
                                        files_base64: { 'bin.dat': Buffer.from([1, 2, 255]).toString('base64') } });
  const s = structured(r);
  assert.equal(r.isError, true);
  assert.equal(s.exit_code, 3);
  assert.match(s.stdout, /^hello\n 01 02 ff\n$/);
});

await t('run_code: a time limit ends the program with exit code 124', async () => {
  const r = await call(c, 'run_code', { language: 'bash', code: 'echo start; sleep 30', timeout_seconds: 1 });
  const s = structured(r);
  assert.equal(r.isError, true);
  assert.equal(s.exit_code, 124);
  assert.equal(s.timed_out, true);
  assert.equal(s.stdout, 'start\n');
});

await t('progress notifications while a call runs', async () => {
  const seen = [];
  const r = await call(c, 'run_code', { language: 'bash', code: 'sleep 2.5; echo ok' },
                       { onprogress: p => seen.push(p.progress) });
  assert.equal(structured(r).stdout, 'ok\n');
  assert.ok(seen.length >= 1, 'at least one progress notification');
  for (let i = 1; i < seen.length; i++) assert.ok(seen[i] > seen[i - 1], 'progress grows');
});

await t('progress notifications carry the new output lines as the call runs', async () => {
  const msgs = [];
  const r = await call(c, 'run_code',
                       { language: 'bash',
                         // within the suite's 3 s wait: notifications at 1 s and 2 s
                         code: 'echo "line 1"; echo "warn 1" >&2; sleep 1.4; echo "line 2"; sleep 1.1' },
                       { onprogress: p => msgs.push(p.message || '') });
  assert.equal(structured(r).stdout, 'line 1\nline 2\n');
  const text = msgs.join('\n');
  assert.ok(msgs.length >= 2, `at least two notifications (got ${JSON.stringify(msgs)})`);
  assert.match(text, /\[stdout\]\nline 1\n/, 'the first line, under [stdout]');
  assert.match(text, /\[stderr\]\nwarn 1\n/, 'stderr apart, under [stderr]');
  assert.match(text, /\[stdout\]\nline 2\n/, 'the next line, in a later notification');
  // Each line once: a notification shows only what came since the last.
  for (const l of ['line 1', 'line 2', 'warn 1'])
    assert.equal(text.split(l + '\n').length - 1, 1, `${l} shown once: ${JSON.stringify(msgs)}`);
});

let box;
await t('multi-step sandbox session: create, write, exec, read, list', async () => {
  const cr = structured(await call(c, 'sandbox_create', { ttl_seconds: 600 }));
  box = cr.sandbox_id;
  assert.match(box, /^b_[0-9a-f]{24}$/);
  assert.ok(Date.parse(cr.expires_at) > Date.now());
  let r = await call(c, 'sandbox_write_file', { sandbox_id: box, path: 'proj/data.csv', content: 'line,defects\nA,3\nB,5\n' });
  assert.ok(!r.isError);
  assert.equal(structured(r).size, 21);
  r = await call(c, 'sandbox_exec', { sandbox_id: box, command: 'cd proj && python3 -c "import csv; print(sum(int(r[\'defects\']) for r in csv.DictReader(open(\'data.csv\'))))" > total.txt && cat total.txt' });
  let s = structured(r);
  assert.ok(!r.isError, JSON.stringify(s));
  assert.equal(s.stdout, '8\n');
  assert.equal(s.sandbox_id, box);
  r = await call(c, 'sandbox_read_file', { sandbox_id: box, path: '/workspace/proj/total.txt' });
  s = structured(r);
  assert.equal(s.content, '8\n');
  assert.equal(s.encoding, 'utf-8');
  r = await call(c, 'sandbox_list_files', { sandbox_id: box });
  s = structured(r);
  const paths = s.entries.map(e => e.path);
  assert.ok(paths.includes('/workspace/proj/data.csv') && paths.includes('/workspace/proj/total.txt'), paths.join(','));
  r = await call(c, 'sandbox_exec', { sandbox_id: box, command: 'read x; echo "got $x"; exit 7', stdin: 'abc\n' });
  s = structured(r);
  assert.equal(r.isError, true);
  assert.equal(s.exit_code, 7);
  assert.equal(s.stdout, 'got abc\n');
  r = await call(c, 'sandbox_list', {});
  assert.ok(structured(r).sandboxes.some(b => b.sandbox_id === box));
});

await t('sandbox_read_file returns an image as image content', async () => {
  await call(c, 'sandbox_exec', { sandbox_id: box, command: 'python3 -c "import matplotlib.pyplot as p; p.plot([1,2]); p.savefig(\'/workspace/p.png\')"' });
  const r = await call(c, 'sandbox_read_file', { sandbox_id: box, path: 'p.png' });
  const img = r.content.find(b => b.type === 'image');
  assert.ok(img && img.mimeType === 'image/png');
  assert.equal(Buffer.from(img.data, 'base64').subarray(1, 4).toString(), 'PNG');
});

await t('long output is cut with a note and kept whole in the sandbox', async () => {
  const r = await call(c, 'sandbox_exec', { sandbox_id: box, command: 'seq 1 20000' });
  const s = structured(r);
  assert.equal(s.stdout_truncated, true);
  assert.equal(s.stdout_bytes, 108894);
  assert.ok(s.stdout.endsWith('19999\n20000\n'));
  assert.ok(s.notes.some(x => x.includes(s.stdout_file)));
  const w = structured(await call(c, 'sandbox_exec', { sandbox_id: box, command: `wc -l < ${s.stdout_file}` }));
  assert.equal(w.stdout.trim(), '20000');
});

let longJob;
await t('a call that outlives the wait returns a job_id with partial output; job_wait finishes it', async () => {
  const r = await call(c, 'sandbox_exec', { sandbox_id: box, command: `echo early; sleep ${WAIT_S + 3}; echo late` });
  const s = structured(r);
  assert.ok(!r.isError);
  assert.equal(s.status, 'running');
  assert.equal(s.exit_code, null);
  assert.equal(s.stdout, 'early\n');
  assert.match(s.job_id, /^j_[0-9a-f]{24}$/);
  longJob = s.job_id;
  const st = structured(await call(c, 'job_status', { job_id: s.job_id }));
  assert.equal(st.status, 'running');
  let w;
  for (let i = 0; i < 5; i++) {
    w = structured(await call(c, 'job_wait', { job_id: s.job_id }));
    if (w.status !== 'running') break;
  }
  assert.equal(w.status, 'completed');
  assert.equal(w.exit_code, 0);
  assert.equal(w.stdout, 'early\nlate\n');
  const again = await call(c, 'job_status', { job_id: s.job_id });
  assert.equal(structured(again).stdout, 'early\nlate\n');
});

await t('run_code that outlives the wait: job_wait returns its files and images', async () => {
  const r = await call(c, 'run_code', { language: 'python', code: `import time, matplotlib.pyplot as p\ntime.sleep(${WAIT_S + 2})\np.plot([1, 3]); p.savefig("/workspace/output/late.png")\nprint("done")` });
  const s = structured(r);
  assert.equal(s.status, 'running');
  let w, res;
  for (let i = 0; i < 5; i++) {
    res = await call(c, 'job_wait', { job_id: s.job_id });
    w = structured(res);
    if (w.status !== 'running') break;
  }
  assert.equal(w.stdout, 'done\n');
  assert.ok(res.content.some(b => b.type === 'image' && b.mimeType === 'image/png'));
});

await t('cancellation stops the running process', async () => {
  const ac = new AbortController();
  const p = call(c, 'sandbox_exec', { sandbox_id: box, command: 'echo $$ > /tmp/victim.pid; exec sleep 300' },
                 { signal: ac.signal });
  await new Promise(res => setTimeout(res, 1500));
  // Liveness from /proc: each program has its own Landlock domain, so
  // `kill -0` on another exec's process is refused whether it lives or not.
  const probe = 'test -d /proc/$(cat /tmp/victim.pid 2>/dev/null || echo none) && echo alive || echo gone';
  const before = structured(await call(c, 'sandbox_exec', { sandbox_id: box, command: probe }));
  assert.equal(before.stdout.trim(), 'alive', 'the command to cancel is not running');
  ac.abort('test');
  await assert.rejects(p);
  let alive = true;
  for (let i = 0; i < 20 && alive; i++) {
    await new Promise(res => setTimeout(res, 250));
    const r = structured(await call(c, 'sandbox_exec', { sandbox_id: box, command: probe }));
    alive = r.stdout.trim() === 'alive';
  }
  assert.equal(alive, false, 'the cancelled command still runs');
});

await t('job_cancel stops a job', async () => {
  const r = structured(await call(c, 'sandbox_exec', { sandbox_id: box, command: `sleep ${WAIT_S + 60}` }));
  assert.equal(r.status, 'running');
  const k = await call(c, 'job_cancel', { job_id: r.job_id });
  assert.equal(structured(k).status, 'cancelled');
  const st = structured(await call(c, 'job_status', { job_id: r.job_id }));
  assert.equal(st.status, 'cancelled');
  const again = await call(c, 'job_cancel', { job_id: r.job_id });
  assert.equal(again.isError, true);
  assert.match(again.content[0].text, /already ended/);
});

// ---- bad input -----------------------------------------------------------
await t('unknown tool is JSON-RPC error -32602', async () => {
  await expectProtocolError(call(c, 'no_such_tool', {}), -32602);
});

await t('wrong argument type is an isError result naming the argument', async () => {
  const r = await call(c, 'run_code', { language: 'python', code: 5 });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /`code` must be a string/);
});

await t('missing required argument is an isError result', async () => {
  const r = await call(c, 'sandbox_exec', { command: 'ls' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /missing required argument `sandbox_id`/);
});

await t('unknown argument and bad enum value are isError results', async () => {
  let r = await call(c, 'run_code', { language: 'python', code: 'print(1)', colour: 'red' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /unknown argument `colour`/);
  r = await call(c, 'run_code', { language: 'cobol', code: 'x' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /one of: python, bash, node/);
  r = await call(c, 'run_code', { language: 'python', code: 'x', timeout_seconds: 0 });
  assert.equal(r.isError, true);
  r = await call(c, 'run_code', { language: 'python', code: 'x', files: { '../escape': 'x' } });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /not allowed/);
});

await t('oversize argument is an isError result', async () => {
  const r = await call(c, 'run_code', { language: 'python', code: '#'.repeat(1024 * 1024 + 1) });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /too long/);
});

await t('unknown sandbox and job ids are isError results the model can act on', async () => {
  let r = await call(c, 'sandbox_exec', { sandbox_id: 'b_000000000000000000000000', command: 'true' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /not found.*sandbox_create/s);
  r = await call(c, 'sandbox_read_file', { sandbox_id: 'nonsense/../x', path: 'a' });
  assert.equal(r.isError, true);
  r = await call(c, 'job_wait', { job_id: 'j_000000000000000000000000' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /job .* not found/);
});

await t('a path outside the sandbox areas is refused', async () => {
  const r = await call(c, 'sandbox_read_file', { sandbox_id: box, path: '/etc/passwd' });
  assert.equal(r.isError, true);
});

if (MODE === 'http' && process.env.KEY2) {
  await t("another tenant's sandbox and job ids are not found, and not listed", async () => {
    const other = await connect(process.env.KEY2);
    let r = await call(other, 'sandbox_exec', { sandbox_id: box, command: 'cat /workspace/proj/data.csv' });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /not found/);
    assert.doesNotMatch(r.content[0].text, /defects/);
    r = await call(other, 'job_status', { job_id: longJob });
    assert.equal(r.isError, true);
    r = await call(other, 'sandbox_destroy', { sandbox_id: box });
    assert.equal(r.isError, true);
    r = await call(other, 'sandbox_list', {});
    assert.ok(!structured(r).sandboxes.some(b => b.sandbox_id === box));
    await other.close();
  });
}

// The storage plane (husk serve only; tests/mcp/storage.sh covers the rest):
// the SDK checks every structuredContent against the tool's outputSchema.
if (MODE === 'http') {
  await t('storage: run_code returns a large file as a resource_link whose URL gives the bytes', async () => {
    const r = await call(c, 'run_code', { language: 'python', code:
      'import os\nos.makedirs("output", exist_ok=True)\nopen("output/table.csv", "w").write("line,defects\\n" * 30000)' });
    const s = structured(r);
    assert.ok(!r.isError, JSON.stringify(s));
    const link = r.content.find(b => b.type === 'resource_link');
    assert.ok(link, 'a resource_link block');
    assert.equal(link.name, 'table.csv');
    assert.ok(r.content[0].text.includes(link.uri), 'the URL is in the text');
    assert.equal(s.files[0].returned_as, 'link');
    const res = await fetch(link.uri);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), 'line,defects\n'.repeat(30000));
  });

  await t('storage: store_file, list_objects, get_link, load_file', async () => {
    const key = `sdk/${SDK}/note.txt`;
    let r = await call(c, 'store_file', { content: `hello from ${SDK}\n`, key });
    let s = structured(r);
    assert.ok(!r.isError, JSON.stringify(s));
    assert.equal(s.bucket, 'husk-mcp');
    assert.equal(s.key, key);
    assert.equal(r.content.find(b => b.type === 'resource_link').uri, s.url);
    assert.equal(await (await fetch(s.url)).text(), `hello from ${SDK}\n`);
    r = await call(c, 'list_objects', { prefix: `sdk/${SDK}/` });
    assert.deepEqual(structured(r).objects.map(o => o.key), [key]);
    r = await call(c, 'get_link', { key, expires_in_seconds: 60 });
    s = structured(r);
    assert.equal(await (await fetch(s.url)).text(), `hello from ${SDK}\n`);
    const b = structured(await call(c, 'sandbox_create', {})).sandbox_id;
    r = await call(c, 'load_file', { sandbox_id: b, key, path: 'in/note.txt' });
    assert.equal(structured(r).size, `hello from ${SDK}\n`.length);
    r = await call(c, 'sandbox_read_file', { sandbox_id: b, path: 'in/note.txt' });
    assert.equal(structured(r).content, `hello from ${SDK}\n`);
    await call(c, 'sandbox_destroy', { sandbox_id: b });
    r = await call(c, 'get_link', { key: 'sdk/none/missing.txt' });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /not found/);
  });
}

await t('sandbox_destroy, then the id is reported expired/not found', async () => {
  const d = await call(c, 'sandbox_destroy', { sandbox_id: box });
  assert.equal(structured(d).state, 'stopped');
  const r = await call(c, 'sandbox_exec', { sandbox_id: box, command: 'true' });
  assert.equal(r.isError, true);
});

await c.close();
console.log(`# ${n - failed}/${n} passed`);
process.exit(failed ? 1 : 0);
