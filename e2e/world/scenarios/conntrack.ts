/**
 * E2E scenario (run by e2e/conntrack.test.ts through runInPrivateWorld): stale UDP flows and the agent.
 *
 * The lab, one-way UDP sinks in the three pods, `nftproxy run` on the node with a services file that has
 *   stats  UDP 10.96.0.50:8125 -> pod-a:8125             (a statsd sender keeps sending from ONE source port)
 *   dns    UDP 10.96.0.20:53   -> pod-a:5353, pod-b:5353  (another UDP Service with its own sender)
 *   hold   TCP 10.96.0.40:80   -> pod-a:8081             (a TCP connection held open)
 * Then the stats endpoint moves from pod-a to pod-c (the file is rewritten), the agent is restarted, and the dns
 * Service is deleted. `conntrack -L -o id` in the node namespace is read before and after each step. Prints one
 * JSON object; the test asserts.
 */
import { mkdtempSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runScenario, problemsOf, LAB, buildLab, inNs, poll, preparePrivateWorld, spawnInNs, type Background } from '../netns.ts';

const ROOT = new URL('../../..', import.meta.url).pathname;
const CLI = join(ROOT, 'agent/cli.ts');
const TOOLS = join(ROOT, 'e2e/world/flow-tools.ts');
const node = process.execPath;

/** One line of `conntrack -L -o id`, parsed. */
export interface CtLine { proto: string; src: string; dst: string; sport: number; dport: number; rsrc: string; rsport: number; id: number }
function conntrackL(): CtLine[] {
  const out = inNs(LAB.node, 'conntrack', ['-L', '-o', 'id'], { allowFail: true });
  const lines: CtLine[] = [];
  for (const l of out.split('\n')) {
    const proto = l.split(/\s+/)[0];
    const src = [...l.matchAll(/\bsrc=(\S+)/g)].map((m) => m[1]);
    const dst = [...l.matchAll(/\bdst=(\S+)/g)].map((m) => m[1]);
    const sport = [...l.matchAll(/\bsport=(\d+)/g)].map((m) => Number(m[1]));
    const dport = [...l.matchAll(/\bdport=(\d+)/g)].map((m) => Number(m[1]));
    const id = l.match(/\bid=(\d+)/);
    if (src.length < 2 || !id) continue;
    lines.push({ proto, src: src[0], dst: dst[0], sport: sport[0], dport: dport[0], rsrc: src[1], rsport: sport[1], id: Number(id[1]) });
  }
  return lines;
}

const svc = (name: string, ip: string, port: number, protocol: string, targetPort: number) => ({
  apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default', uid: `uid-${name}`, resourceVersion: '1' },
  spec: { type: 'ClusterIP', clusterIP: ip, clusterIPs: [ip], ipFamilies: ['IPv4'], ports: [{ name: 'p', port, protocol, targetPort }] },
});
const slice = (name: string, ips: string[], port: number, protocol: string) => ({
  apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', addressType: 'IPv4',
  metadata: { name: `${name}-1`, namespace: 'default', labels: { 'kubernetes.io/service-name': name }, resourceVersion: '1' },
  endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true, serving: true, terminating: false }, nodeName: 'node-1' })),
  ports: [{ name: 'p', port, protocol }],
});

preparePrivateWorld();
const hosts = buildLab();
const bg: Background[] = [];
const obs: Record<string, unknown> = {};
const [podA, podB, podC] = LAB.pods;
await runScenario(obs, bg, hosts, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nftproxy-ct-'));
  const sinkLog = join(dir, 'sink.log');
  writeFileSync(sinkLog, '');
  for (const p of LAB.pods) bg.push(spawnInNs(p.ns, node, [TOOLS, 'sink', p.ns, sinkLog, '8125,5353', '8081']));
  let items = [
    svc('stats', '10.96.0.50', 8125, 'UDP', 8125), slice('stats', [podA.ip], 8125, 'UDP'),
    svc('dns', '10.96.0.20', 53, 'UDP', 5353), slice('dns', [podA.ip, podB.ip], 5353, 'UDP'),
    svc('hold', '10.96.0.40', 80, 'TCP', 8081), slice('hold', [podA.ip], 8081, 'TCP'),
  ];
  const services = join(dir, 'services.json');
  const writeServices = () => {
    writeFileSync(`${services}.tmp`, JSON.stringify({ apiVersion: 'v1', kind: 'List', metadata: { resourceVersion: '' }, items }));
    renameSync(`${services}.tmp`, services); // an editor's atomic replace
  };
  writeServices();
  const config = {
    ...JSON.parse(readFileSync(join(ROOT, 'deploy/examples/config.json'), 'utf8')),
    healthzBindAddress: '', metricsBindAddress: '127.0.0.1:10249', source: { type: 'file', path: services },
  };
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  const startAgent = () => {
    const a = spawnInNs(LAB.node, node, [CLI, 'run', '--config', join(dir, 'config.json')]);
    bg.push(a);
    return a;
  };
  const logLines = (a: Background) => a.out.join('').split('\n').filter(Boolean).map((l) => { try { return JSON.parse(l); } catch { return { msg: l }; } });
  const reconciles = (a: Background) => logLines(a).filter((l) => typeof l.msg === 'string' && l.msg.startsWith('conntrack reconciled'));
  const metric = (name: string) => {
    const text = inNs(LAB.node, 'curl', ['-s', 'http://127.0.0.1:10249/metrics'], { allowFail: true });
    const m = text.match(new RegExp(`^${name}\\{ip_family="IPv4"\\} (\\S+)$`, 'm'));
    return m ? Number(m[1]) : null;
  };

  let agent = startAgent();
  const up = await poll(() => reconciles(agent).length > 0, 15_000, 100);
  if (!up) throw new Error(`agent did not sync and reconcile: ${agent.out.join('').slice(-2000)}`);
  obs.firstReconcile = reconciles(agent)[0];

  // statsd: 20 ms apart from port 40125 for up to 60 s; dns: 100 ms apart from port 40053; a TCP connection held.
  bg.push(spawnInNs(LAB.client, node, [TOOLS, 'send', '10.96.0.50', '8125', '40125', '20', '3000']));
  bg.push(spawnInNs(LAB.client, node, [TOOLS, 'send', '10.96.0.20', '53', '40053', '100', '600']));
  const hold = spawnInNs(LAB.client, node, [TOOLS, 'hold', '10.96.0.40', '80']);
  bg.push(hold);
  type Rx = { ms: number; pod: string; from: string; port: number; seq: number };
  const rx = (): Rx[] => readFileSync(sinkLog, 'utf8').split('\n').filter(Boolean).map((l) => {
    const [ms, pod, from, port, seq] = l.split(' ');
    return { ms: Number(ms), pod, from, port: Number(port), seq: Number(seq) };
  });
  const flowing = await poll(() => rx().some((r) => r.port === 8125) && rx().some((r) => r.port === 5353) && hold.out.join('').includes('connected'), 10_000, 50);
  if (!flowing) throw new Error(`traffic did not start: ${JSON.stringify(rx().slice(0, 5))} ${hold.out.join('')}`);
  await new Promise((r) => setTimeout(r, 500));
  obs.statsBefore = [...new Set(rx().filter((r) => r.port === 8125).map((r) => r.pod))];
  obs.ctBefore = conntrackL();

  // Step 1: the stats endpoint moves from pod-a to pod-c.
  items = items.map((i) => (i.kind === 'EndpointSlice' && i.metadata.name === 'stats-1' ? slice('stats', [podC.ip], 8125, 'UDP') : i));
  const t0 = Date.now();
  writeServices();
  const moved = await poll(() => rx().find((r) => r.port === 8125 && r.pod === podC.ns && r.ms >= t0), 8000, 20);
  obs.firstAtNewEndpointMs = moved ? moved.ms - t0 : null;
  await new Promise((r) => setTimeout(r, 1500));
  const afterMove = rx().filter((r) => r.port === 8125 && r.ms >= t0);
  const lastOld = afterMove.filter((r) => r.pod === podA.ns).at(-1);
  obs.lastAtOldEndpointMs = lastOld ? lastOld.ms - t0 : null;
  obs.statsAfterMovePods = [...new Set(afterMove.filter((r) => moved && r.ms > moved.ms).map((r) => r.pod))];
  obs.ctAfterMove = conntrackL();
  obs.reconcilesAfterMove = reconciles(agent).slice(1);
  obs.deletedMetricAfterMove = metric('kubeproxy_conntrack_reconciler_deleted_entries_total');

  // Step 2: restart the agent; nothing changed, nothing valid may go.
  agent.child.kill('SIGTERM');
  obs.agentExit = await Promise.race([agent.exited, new Promise((r) => setTimeout(() => r('timeout'), 6000))]);
  const tRestart = Date.now();
  agent = startAgent();
  const again = await poll(() => reconciles(agent).length > 0, 15_000, 100);
  obs.restartReconcile = again ? reconciles(agent)[0] : null;
  await new Promise((r) => setTimeout(r, 500));
  obs.ctAfterRestart = conntrackL();
  obs.statsPodsAfterRestart = [...new Set(rx().filter((r) => r.port === 8125 && r.ms >= tRestart).map((r) => r.pod))];
  obs.deletedMetricAfterRestart = metric('kubeproxy_conntrack_reconciler_deleted_entries_total');

  // Step 3: the dns Service is deleted: its flow goes (upstream PR #141371), the others stay.
  items = items.filter((i) => i.metadata.name !== 'dns' && i.metadata.name !== 'dns-1');
  writeServices();
  const gone = await poll(() => reconciles(agent).length > 1, 8000, 50);
  obs.reconcileAfterDelete = gone ? reconciles(agent)[1] : null;
  obs.ctAfterDelete = conntrackL();

  obs.warnings = problemsOf(agent).slice(0, 5);
});
