// Resources and prompts with an official TypeScript SDK client (v1 in the
// legacy era, v2 pinned to 2026-07-28), which checks every result against
// the protocol's schemas: resources listed over every page and read (a
// document as text, a binary one as a blob of its bytes, a stored object,
// a sandbox file by the template), a missing one an error; on stdio in the
// legacy era a subscription notified when the document changes; prompts
// listed and filled, a missing argument refused.  Prints TAP lines.
// Environment: SDK (v1|v2), MODE (stdio|http|remote: husk mcp --server), HUSK, HUSK_DATA, URL, KEY,
// DOCS (the --resources directory), PROMPTS (the --prompts directory).
import assert from 'node:assert/strict';
import { appendFileSync, readFileSync } from 'node:fs';

const SDK = process.env.SDK || 'v1';
const MODE = process.env.MODE || 'stdio';

let n = 0;
async function t(name, fn) {
  n++;
  try {
    await fn();
    console.log(`ok ${n} - [${SDK} ${MODE}] ${name}`);
  } catch (e) {
    console.log(`not ok ${n} - [${SDK} ${MODE}] ${name}`);
    console.log('# ' + String(e && e.stack || e).split('\n').slice(0, 8).join('\n# '));
  }
}

async function load() {
  if (SDK === 'v1') {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const { ResourceUpdatedNotificationSchema } = await import('@modelcontextprotocol/sdk/types.js');
    return { Client, StdioClientTransport, StreamableHTTPClientTransport, ResourceUpdatedNotificationSchema, opts: {} };
  }
  const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
  const { StdioClientTransport } = await import('@modelcontextprotocol/client/stdio');
  return { Client, StdioClientTransport, StreamableHTTPClientTransport,
           opts: { versionNegotiation: { mode: { pin: '2026-07-28' } } } };
}

const lib = await load();
// remote: `husk mcp --server` forwarding stdio to the daemon's /mcp.
const transport = MODE === 'http'
  ? new lib.StreamableHTTPClientTransport(new URL(process.env.URL),
      { requestInit: { headers: { Authorization: `Bearer ${process.env.KEY}` } } })
  : MODE === 'remote'
  ? new lib.StdioClientTransport({ command: process.env.HUSK,
      args: ['mcp', '--server', process.env.URL, '--quiet'],
      env: { ...process.env, HUSK_MCP_KEY: process.env.KEY }, stderr: 'inherit' })
  : new lib.StdioClientTransport({ command: process.env.HUSK,
      args: ['mcp', '--data', process.env.HUSK_DATA, '--quiet', '--resources', process.env.DOCS,
             '--prompts', process.env.PROMPTS],
      stderr: 'inherit' });
const client = new lib.Client({ name: 'husk-test', version: '1.0.0' }, lib.opts);
await client.connect(transport);

await t('resources/list: every page, each URI once, the documents among them', async () => {
  const uris = [];
  let cursor;
  for (let i = 0; i < 20; i++) {
    const r = await client.listResources(cursor ? { cursor } : {});
    uris.push(...r.resources.map((x) => x.uri));
    cursor = r.nextCursor;
    if (!cursor) break;
  }
  assert.equal(new Set(uris).size, uris.length);
  assert.ok(uris.includes('husk://docs/guide.md'), uris.slice(0, 5).join(' '));
  assert.ok(uris.includes('husk://docs/sub/data.json'));
  assert.ok(uris.length > 100, `${uris.length} resources`);
});

await t('resources/templates/list: the sandbox-file template', async () => {
  const r = await client.listResourceTemplates();
  assert.ok(r.resourceTemplates.some((x) => x.uriTemplate === 'husk://sandbox/{sandbox_id}/files/{+path}'));
});

await t('resources/read: a document as text', async () => {
  const r = await client.readResource({ uri: 'husk://docs/guide.md' });
  assert.equal(r.contents[0].mimeType, 'text/markdown');
  assert.ok(r.contents[0].text.startsWith('# Guide\n'));
});

await t('resources/read: a binary document as a blob of its bytes', async () => {
  const r = await client.readResource({ uri: 'husk://docs/blob.bin' });
  assert.deepEqual(Buffer.from(r.contents[0].blob, 'base64'),
                   readFileSync(`${process.env.DOCS}/blob.bin`));
});

await t('resources/read: a missing resource is an error', async () => {
  await assert.rejects(client.readResource({ uri: 'husk://docs/nope.md' }), /not found/i);
});

await t('resources/read: a sandbox file by the template', async () => {
  const c = await client.callTool({ name: 'sandbox_create', arguments: {} });
  const id = c.structuredContent.sandbox_id;
  await client.callTool({ name: 'sandbox_write_file',
                          arguments: { sandbox_id: id, path: 'hello.txt', content: 'hi from the box' } });
  const r = await client.readResource({ uri: `husk://sandbox/${id}/files/workspace/hello.txt` });
  assert.equal(r.contents[0].text, 'hi from the box');
  await client.callTool({ name: 'sandbox_destroy', arguments: { sandbox_id: id } });
});

if (MODE !== 'stdio') {
  await t('resources/read: a stored object', async () => {
    await client.callTool({ name: 'store_file', arguments: { content: 'stored text', key: `sdk/${SDK}.txt` } });
    const r = await client.readResource({ uri: `husk://store/husk-mcp/sdk/${SDK}.txt` });
    assert.equal(r.contents[0].text, 'stored text');
  });
  await t('resources/read: a long URI, not ASCII (its Mcp-Name header as base64)', async () => {
    const key = `sdk/${'é'.repeat(150)}/${MODE}-${SDK}.txt`;
    await client.callTool({ name: 'store_file', arguments: { content: 'long', key } });
    const uri = 'husk://store/husk-mcp/' + key.split('/').map(encodeURIComponent).join('/');
    assert.ok(uri.length > 900);
    const r = await client.readResource({ uri });
    assert.equal(r.contents[0].text, 'long');
  });
} else {
  await t('capabilities: resources.subscribe only in the legacy era', async () => {
    assert.equal(client.getServerCapabilities().resources.subscribe, SDK === 'v1' ? true : undefined);
  });
}

if (SDK === 'v1' && MODE === 'stdio') {
  await t('resources/subscribe: a change to the document is notified', async () => {
    const seen = new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no notification in 10 s')), 10000);
      client.setNotificationHandler(lib.ResourceUpdatedNotificationSchema, (m) => {
        clearTimeout(timer);
        resolve(m.params.uri);
      });
    });
    await client.subscribeResource({ uri: 'husk://docs/guide.md' });
    appendFileSync(`${process.env.DOCS}/guide.md`, 'more\n');
    assert.equal(await seen, 'husk://docs/guide.md');
    await client.unsubscribeResource({ uri: 'husk://docs/guide.md' });
  });
}

await t('prompts/list and prompts/get', async () => {
  const l = await client.listPrompts();
  assert.deepEqual(l.prompts.map((p) => p.name), ['plain-note', 'summarize-deck']);
  const g = await client.getPrompt({ name: 'summarize-deck', arguments: { key: 'decks/a.pptx' } });
  assert.equal(g.messages[0].role, 'user');
  assert.match(g.messages[0].content.text, /^Load decks\/a\.pptx into a sandbox/);
});

await t('prompts/get: a missing required argument is refused', async () => {
  await assert.rejects(client.getPrompt({ name: 'summarize-deck', arguments: {} }), /needs the argument `key`/);
});

await client.close();
