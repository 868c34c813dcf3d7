/**
 * Test client: makes `count` TCP connections (or UDP request/replies) to HOST:PORT, one after the other, each with
 * a timeout, and prints a JSON array: `{ by, src }` for an answer (the endpoint's name and the source it saw), or
 * `{ err, ms }` for a failure (e.g. ECONNREFUSED, TIMEOUT) with the elapsed ms.
 * Usage: client.ts tcp|udp HOST PORT COUNT [TIMEOUT_MS] [UDP_SOURCE_PORT]
 */
import { connect } from 'node:net';
import { createSocket } from 'node:dgram';

const [proto, host, portText, countText, timeoutText = '2000', srcPortText] = process.argv.slice(2);
const port = Number(portText), count = Number(countText), timeoutMs = Number(timeoutText);
type Result = { by: string; src: string } | { err: string; ms: number };

function parse(line: string): Result {
  const [by, src] = line.trim().split(' ');
  return { by, src: src.replace(/:\d+$/, '') };
}

function tcpOnce(): Promise<Result> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    let data = '';
    const s = connect({ host, port });
    const timer = setTimeout(() => { s.destroy(); resolve({ err: 'TIMEOUT', ms: Date.now() - t0 }); }, timeoutMs);
    s.on('data', (d) => { data += d.toString(); });
    s.on('end', () => { clearTimeout(timer); resolve(data ? parse(data) : { err: 'EMPTY', ms: Date.now() - t0 }); });
    s.on('error', (e: NodeJS.ErrnoException) => { clearTimeout(timer); resolve({ err: e.code ?? e.message, ms: Date.now() - t0 }); });
  });
}

function udpOnce(): Promise<Result> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    const s = createSocket(host.includes(':') ? 'udp6' : 'udp4');
    const done = (r: Result) => { clearTimeout(timer); s.close(); resolve(r); };
    const timer = setTimeout(() => done({ err: 'TIMEOUT', ms: Date.now() - t0 }), timeoutMs);
    s.on('message', (m) => done(parse(m.toString())));
    s.on('error', (e: NodeJS.ErrnoException) => done({ err: e.code ?? e.message, ms: Date.now() - t0 }));
    const send = () => s.send('hello', port, host);
    if (srcPortText) s.bind(Number(srcPortText), send); else send();
  });
}

const results: Result[] = [];
for (let i = 0; i < count; i++) results.push(await (proto === 'udp' ? udpOnce() : tcpOnce()));
process.stdout.write(JSON.stringify(results) + '\n');
