// A transparent HTTP proxy that adds `Authorization: Bearer $KEY` to every
// request it forwards to $TARGET (an origin such as http://127.0.0.1:7070):
// the conformance suite cannot send a tenant key itself.  Everything else
// (method, path, Host, Origin, body, the streamed response) passes as is.
// Prints the port it listens on, then serves until killed.
import http from 'node:http';

const target = new URL(process.env.TARGET);
const key = process.env.KEY;
const server = http.createServer((req, res) => {
  const headers = { ...req.headers };
  if (!headers.authorization) headers.authorization = `Bearer ${key}`;
  const up = http.request({ host: target.hostname, port: target.port, method: req.method,
                            path: req.url, headers }, ur => {
    res.writeHead(ur.statusCode, ur.rawHeaders);
    ur.pipe(res);
  });
  up.on('error', e => { res.writeHead(502); res.end(String(e)); });
  req.pipe(up);
  res.on('close', () => up.destroy());
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
