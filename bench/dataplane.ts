/**
 * Data-plane bench (issue 6): the first-packet cost of our endpoint selection. Run by bench/run.ts through
 * `runInPrivateWorld` (e2e/world/netns.ts): everything happens in a private network namespace ("node", where this
 * process runs and the table lives) and one pod namespace created here; nothing touches the host.
 *
 * Setup: a pod namespace behind a veth pair holds 250 endpoint addresses (10.244.1.1-250/32) and one TCP server
 * on 0.0.0.0:8080 that accepts and closes. Four target Services (ClusterIPs 10.97.0.1-4, port 80) have 1, 10, 100
 * and 250 of those endpoints. Filler Services (bench/upstream-layout.ts syntheticServices, × 10 endpoints that are
 * never contacted) make the table hold 100, then 30,000 Services in total (quick mode: 100 and 3,000).
 *
 * Measure: sequential TCP connects from the node to each target ClusterIP (the output hook: nat-output → services
 * → service-ips vmap → service chain → numgen + endpoint-map lookup → DNAT), time from connect() to the
 * 'connect' event (SYN → SYN-ACK through DNAT), `CONNECTS` per target, p50 and p99 in µs. Bounded: a fixed
 * number of connects, each with a 2 s timeout. Every connect must succeed (the quick mode's correctness check:
 * the table routes to live endpoints), and the set of endpoints reached is counted.
 *
 * Prints one JSON object on stdout. Usage (inside the private world): dataplane.ts [--quick]
 */
import { connect } from 'node:net';
import { fullSyncOps } from './full-sync.ts';
import { NftSocket } from '../netlink/socket.ts';
import { inNs, preparePrivateWorld, sh, spawnInNs } from '../e2e/world/netns.ts';
import { syntheticServices } from './upstream-layout.ts';

const quick = process.argv.includes('--quick');
const CONNECTS = quick ? 60 : 400;
const TOTALS = quick ? [100, 3000] : [100, 30_000];
const TARGETS = [1, 10, 100, 250];
const POD = 'dp-pod';

preparePrivateWorld();
sh('ip', ['netns', 'add', POD]);
inNs(POD, 'ip', ['link', 'set', 'lo', 'up']);
sh('ip', ['link', 'add', 'veth-dp', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', POD]);
sh('ip', ['addr', 'add', '10.244.0.1/32', 'dev', 'veth-dp']);
sh('ip', ['link', 'set', 'veth-dp', 'up']);
sh('ip', ['route', 'add', '10.244.1.0/24', 'dev', 'veth-dp']);
sh('ip', ['route', 'add', '10.97.0.0/24', 'dev', 'veth-dp']); // ClusterIPs must route somewhere before DNAT
inNs(POD, 'ip', ['link', 'set', 'eth0', 'up']);
inNs(POD, 'sh', ['-c', Array.from({ length: 250 }, (_, i) => `ip addr add 10.244.1.${i + 1}/32 dev eth0`).join(' && ')]);
inNs(POD, 'ip', ['route', 'add', '10.244.0.1/32', 'dev', 'eth0']);
inNs(POD, 'ip', ['route', 'add', 'default', 'via', '10.244.0.1', 'dev', 'eth0', 'onlink']);
// The echo server: accept and close (the client measures until the handshake completes).
const server = spawnInNs(POD, process.execPath, ['-e', "require('net').createServer((s)=>s.end(s.localAddress)).listen(8080,'0.0.0.0',()=>console.log('up'))"]);
for (let i = 0; i < 100 && !server.out.join('').includes('up'); i++) await new Promise((r) => setTimeout(r, 50));

function objects(fillers: number) {
  const services: unknown[] = [];
  const slices: unknown[] = [];
  const add = (ns: string, name: string, clusterIP: string, eps: string[]) => {
    services.push({ kind: 'Service', metadata: { name, namespace: ns }, spec: { clusterIP, ports: [{ name: 'http', port: 80, protocol: 'TCP' }] } });
    slices.push({
      kind: 'EndpointSlice', metadata: { name: `${name}-x`, namespace: ns, labels: { 'kubernetes.io/service-name': name } }, addressType: 'IPv4',
      endpoints: eps.map((ip) => ({ addresses: [ip], conditions: { ready: true }, nodeName: 'node-2' })), ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    });
  };
  TARGETS.forEach((n, i) => add('bench', `target-${n}`, `10.97.0.${i + 1}`, Array.from({ length: n }, (_, k) => `10.244.1.${k + 1}`)));
  for (const s of syntheticServices(fillers, 10)) add(s.namespace, s.name, s.clusterIP, s.endpoints);
  return { services, slices };
}

/** One connect: µs from connect() to the handshake's completion, and the endpoint address the server saw. */
function connectOnce(host: string): Promise<{ us: number; ok: boolean; by?: string }> {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const s = connect({ host, port: 80 });
    let us = 0;
    let data = '';
    const timer = setTimeout(() => { s.destroy(); resolve({ us: 2e6, ok: false }); }, 2000);
    s.on('connect', () => { us = Number(process.hrtime.bigint() - t0) / 1000; });
    s.on('data', (d) => { data += d.toString(); });
    s.on('end', () => {
      clearTimeout(timer);
      s.destroy();
      resolve({ us, ok: us > 0 && data.length > 0, by: data.replace(/^::ffff:/, '') });
    });
    s.on('error', () => { clearTimeout(timer); resolve({ us: Number(process.hrtime.bigint() - t0) / 1000, ok: false }); });
  });
}

const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]; };

const rows: Array<{ services: number; endpoints: number; p50us: number; p99us: number; failures: number; endpointsReached: number; wrongEndpoint: number }> = [];
for (const total of TOTALS) {
  const { services, slices } = objects(total - TARGETS.length);
  const sock = NftSocket.open();
  await sock.sendBatch(fullSyncOps({ services, slices }, '10.244.0.0/16'));
  sock.close();
  // Warm-up (ARP, neighbour entries, JIT).
  for (const [i] of TARGETS.entries()) for (let k = 0; k < 20; k++) await connectOnce(`10.97.0.${i + 1}`);
  // Round robin over the targets, so that drift in machine load hits all of them alike.
  const acc = TARGETS.map(() => ({ times: [] as number[], failures: 0, reached: new Set<string>(), wrong: 0 }));
  for (let k = 0; k < CONNECTS; k++) {
    for (const [i, n] of TARGETS.entries()) {
      const r = await connectOnce(`10.97.0.${i + 1}`);
      const a = acc[i];
      if (!r.ok) { a.failures++; continue; }
      a.times.push(r.us);
      a.reached.add(r.by!);
      const last = Number(r.by!.split('.')[3]);
      if (!r.by!.startsWith('10.244.1.') || last < 1 || last > n) a.wrong++;
    }
  }
  TARGETS.forEach((n, i) => {
    const a = acc[i];
    rows.push({
      services: total, endpoints: n, p50us: a.times.length ? pct(a.times, 50) : NaN, p99us: a.times.length ? pct(a.times, 99) : NaN,
      failures: a.failures, endpointsReached: a.reached.size, wrongEndpoint: a.wrong,
    });
  });
}
server.child.kill('SIGKILL');
sh('ip', ['netns', 'del', POD], { allowFail: true });
process.stdout.write(JSON.stringify({ connectsPerTarget: CONNECTS, rows }) + '\n');
process.exit(0);
