/**
 * E2E scenario (run by e2e/conntrack.test.ts): the stale-flow cleanup in the IPv6 family. The lab gets IPv6
 * addresses (pods fd00:244:1::10-12 behind the node's bridge, the client at fd00:50::2), the agent runs dual-stack,
 * and a statsd-like sender sends from ONE source port to the IPv6 ClusterIP fd00:96::50 of a Service whose endpoint
 * then moves from pod-a to pod-c. Prints one JSON object; the test asserts.
 */
import { mkdtempSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runScenario, problemsOf, LAB, buildLab, inNs, poll, preparePrivateWorld, spawnInNs, type Background } from '../netns.ts';

const ROOT = new URL('../../..', import.meta.url).pathname;
const CLI = join(ROOT, 'agent/cli.ts');
const TOOLS = join(ROOT, 'e2e/world/flow-tools.ts');
const node = process.execPath;
const V6 = { bridge: 'fd00:244:1::1', pods: ['fd00:244:1::10', 'fd00:244:1::11', 'fd00:244:1::12'], node: 'fd00:50::1', client: 'fd00:50::2', svc: 'fd00:96::50' };

function conntrackL6(): Array<{ src: string; dst: string; sport: number; dport: number; rsrc: string; id: number }> {
  return inNs(LAB.node, 'conntrack', ['-L', '-f', 'ipv6', '-o', 'id'], { allowFail: true }).split('\n').flatMap((l) => {
    const src = [...l.matchAll(/\bsrc=(\S+)/g)].map((m) => m[1]);
    const dst = [...l.matchAll(/\bdst=(\S+)/g)].map((m) => m[1]);
    const sport = [...l.matchAll(/\bsport=(\d+)/g)].map((m) => Number(m[1]));
    const dport = [...l.matchAll(/\bdport=(\d+)/g)].map((m) => Number(m[1]));
    const id = l.match(/\bid=(\d+)/);
    return l.startsWith('udp') && src.length >= 2 && id ? [{ src: src[0], dst: dst[0], sport: sport[0], dport: dport[0], rsrc: src[1], id: Number(id[1]) }] : [];
  });
}

const svc = { apiVersion: 'v1', kind: 'Service', metadata: { name: 'stats', namespace: 'default', uid: 'uid-stats', resourceVersion: '1' },
  spec: { type: 'ClusterIP', clusterIP: V6.svc, clusterIPs: [V6.svc], ipFamilies: ['IPv6'], ports: [{ name: 'p', port: 8125, protocol: 'UDP', targetPort: 8125 }] } };
const slice = (ip: string) => ({ apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', addressType: 'IPv6',
  metadata: { name: 'stats-1', namespace: 'default', labels: { 'kubernetes.io/service-name': 'stats' }, resourceVersion: '1' },
  endpoints: [{ addresses: [ip], conditions: { ready: true, serving: true, terminating: false }, nodeName: 'node-1' }],
  ports: [{ name: 'p', port: 8125, protocol: 'UDP' }] });

preparePrivateWorld();
const hosts = buildLab();
const bg: Background[] = [];
const obs: Record<string, unknown> = {};
await runScenario(obs, bg, hosts, async () => {
  inNs(LAB.node, 'sysctl', ['-qw', 'net.ipv6.conf.all.forwarding=1']);
  inNs(LAB.node, 'ip', ['-6', 'addr', 'add', `${V6.bridge}/64`, 'dev', 'cni0', 'nodad']);
  for (const [i, p] of LAB.pods.entries()) {
    inNs(p.ns, 'ip', ['-6', 'addr', 'add', `${V6.pods[i]}/64`, 'dev', 'eth0', 'nodad']);
    inNs(p.ns, 'ip', ['-6', 'route', 'add', 'default', 'via', V6.bridge]);
  }
  inNs(LAB.node, 'ip', ['-6', 'addr', 'add', `${V6.node}/64`, 'dev', 'eth-client', 'nodad']);
  inNs(LAB.client, 'ip', ['-6', 'addr', 'add', `${V6.client}/64`, 'dev', 'eth0', 'nodad']);
  inNs(LAB.client, 'ip', ['-6', 'route', 'add', 'fd00:96::/112', 'via', V6.node]);

  const dir = mkdtempSync(join(tmpdir(), 'nftproxy-ct6-'));
  const sinkLog = join(dir, 'sink.log');
  writeFileSync(sinkLog, '');
  for (const p of LAB.pods) bg.push(spawnInNs(p.ns, node, [TOOLS, 'sink', p.ns, sinkLog, '8125']));
  const services = join(dir, 'services.json');
  const write = (ip: string) => {
    writeFileSync(`${services}.tmp`, JSON.stringify({ apiVersion: 'v1', kind: 'List', metadata: { resourceVersion: '' }, items: [svc, slice(ip)] }));
    renameSync(`${services}.tmp`, services);
  };
  write(V6.pods[0]);
  const config = {
    ...JSON.parse(readFileSync(join(ROOT, 'deploy/examples/config.json'), 'utf8')),
    clusterCIDR: '10.244.0.0/16,fd00:244::/48', ipFamilies: ['IPv4', 'IPv6'], healthzBindAddress: '', metricsBindAddress: '',
    source: { type: 'file', path: services },
  };
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  const agent = spawnInNs(LAB.node, node, [CLI, 'run', '--config', join(dir, 'config.json')]);
  bg.push(agent);
  const reconciles = () => agent.out.join('').split('\n').filter((l) => l.includes('"msg":"conntrack reconciled')).map((l) => JSON.parse(l));
  if (!await poll(() => reconciles().some((r) => r.family === 'IPv6'), 15_000, 100)) throw new Error(`agent did not reconcile IPv6: ${agent.out.join('').slice(-2000)}`);

  bg.push(spawnInNs(LAB.client, node, [TOOLS, 'send', V6.svc, '8125', '40125', '20', '2000']));
  const rx = () => readFileSync(sinkLog, 'utf8').split('\n').filter(Boolean).map((l) => { const [ms, pod] = l.split(' '); return { ms: Number(ms), pod }; });
  if (!await poll(() => rx().length > 5, 10_000, 50)) throw new Error(`no IPv6 traffic reached a pod: ${agent.out.join('').slice(-1500)}`);
  obs.before = [...new Set(rx().map((r) => r.pod))];
  obs.ctBefore = conntrackL6();
  const n = reconciles().length;
  const t0 = Date.now();
  write(V6.pods[2]);
  const moved = await poll(() => rx().find((r) => r.pod === 'pod-c' && r.ms >= t0), 8000, 20);
  obs.firstAtNewEndpointMs = moved ? moved.ms - t0 : null;
  await new Promise((r) => setTimeout(r, 1000));
  obs.podsAfterMove = [...new Set(rx().filter((r) => moved && r.ms > moved.ms).map((r) => r.pod))];
  obs.ctAfter = conntrackL6();
  obs.reconcilesAfterMove = reconciles().slice(n).map((r) => ({ family: r.family, udpFlows: r.udpFlows, deleted: r.deleted }));
  obs.warnings = problemsOf(agent).slice(0, 5);
});
