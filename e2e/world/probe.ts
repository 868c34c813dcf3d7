/**
 * Reachability probe for e2e scenarios: connects over TCP (250 ms timeout per try) until a condition holds or the
 * time is up, and prints one JSON line `{ ok, ms, tries, last }` (`last`: the last few answers).
 * Usage: probe.ts HOST PORT reach|only|gone NAME[,NAME...]|- TIMEOUT_MS
 * - reach: an answer from one of the names; only: 12 answers in a row from the names, each name at least once;
 * - gone: a connection fails (refused or timed out).
 */
import { connect } from 'node:net';

const [host, portText, mode, namesText, timeoutText] = process.argv.slice(2);
const names = new Set(namesText === '-' ? [] : namesText.split(','));
const t0 = Date.now();
const deadline = t0 + Number(timeoutText);

function once(): Promise<string> {
  return new Promise((resolve) => {
    let data = '';
    const s = connect({ host, port: Number(portText) });
    const timer = setTimeout(() => { s.destroy(); resolve('error:TIMEOUT'); }, 250);
    s.on('data', (d) => { data += d.toString(); });
    s.on('end', () => { clearTimeout(timer); resolve(data.trim().split(' ')[0] || 'error:EMPTY'); });
    s.on('error', (e: NodeJS.ErrnoException) => { clearTimeout(timer); resolve(`error:${e.code ?? e.message}`); });
  });
}

const last: string[] = [];
let tries = 0;
let streak: string[] = [];
let ok = false;
while (Date.now() < deadline && !ok) {
  const a = await once();
  tries++;
  last.push(a);
  if (last.length > 12) last.shift();
  if (mode === 'reach') ok = names.has(a);
  else if (mode === 'gone') ok = a.startsWith('error:');
  else {
    streak = names.has(a) ? [...streak, a] : [];
    ok = streak.length >= 12 && [...names].every((n) => streak.includes(n));
  }
  if (!ok) await new Promise((r) => setTimeout(r, a.startsWith('error:') ? 20 : 5));
}
process.stdout.write(JSON.stringify({ ok, ms: Date.now() - t0, tries, last }) + '\n');
