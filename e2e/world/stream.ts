/**
 * A bounded stream of TCP connections for e2e scenarios: connects to HOST:PORT one after the other (each with a
 * 1 s timeout, 5 ms apart) for DURATION_MS or at most MAX connections, then prints one JSON line
 * `{ total, failed, byPod, errors, firstMs, lastMs }` (`errors`: up to 10 failures with their time since start).
 * Usage: stream.ts HOST PORT DURATION_MS MAX
 */
import { connect } from 'node:net';

const [host, portText, durationText, maxText] = process.argv.slice(2);
const t0 = Date.now();
const end = t0 + Number(durationText);
const byPod: Record<string, number> = {};
const errors: Array<{ atMs: number; err: string }> = [];
let total = 0, failed = 0;

function once(): Promise<string> {
  return new Promise((resolve) => {
    let data = '';
    const s = connect({ host, port: Number(portText) });
    const timer = setTimeout(() => { s.destroy(); resolve('error:TIMEOUT'); }, 1000);
    s.on('data', (d) => { data += d.toString(); });
    s.on('end', () => { clearTimeout(timer); resolve(data.trim().split(' ')[0] || 'error:EMPTY'); });
    s.on('error', (e: NodeJS.ErrnoException) => { clearTimeout(timer); resolve(`error:${e.code ?? e.message}`); });
  });
}

while (Date.now() < end && total < Number(maxText)) {
  const a = await once();
  total++;
  if (a.startsWith('error:')) { failed++; if (errors.length < 10) errors.push({ atMs: Date.now() - t0, err: a }); }
  else byPod[a] = (byPod[a] ?? 0) + 1;
  await new Promise((r) => setTimeout(r, 5));
}
process.stdout.write(JSON.stringify({ total, failed, byPod, errors, ms: Date.now() - t0 }) + '\n');
