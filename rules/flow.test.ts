/**
 * Packet-flow tables: compiled rulesets executed by the tracer (lowered expressions, i.e. what the kernel runs).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compile } from './compile.ts';
import { trace } from './trace.ts';
import type { TracePacket, TraceContext, TraceResult } from './trace.ts';
import type { Ruleset } from './model.ts';
import { clusterIPServices, ep, simpleSP, smallCluster, smallClusterV6, snapshot } from './testdata/fixtures.ts';
import type { SnapshotInput } from '../config-schema/snapshot.ts';

const NODE_IP = '192.168.1.11';
const ctx: TraceContext = { localAddrs: [NODE_IP] };

function clusterIPSnapshot(over: Partial<SnapshotInput> = {}) {
  return snapshot({
    family: 'ipv4',
    localDetector: { mode: 'cidr', cidrs: ['10.244.0.0/16'] },
    serviceCIDRs: ['10.96.0.0/12'],
    node: { name: 'node-1', ips: [NODE_IP] },
    servicePorts: clusterIPServices(),
    ...over,
  });
}

interface Expect {
  verdict: TraceResult['verdict'];
  /** Expected DNAT targets `ip:port` -> [probability, masquerade]. */
  targets?: Record<string, [number, boolean]>;
  /** Masquerade for outcomes without DNAT (default false). */
  masquerade?: boolean;
}

interface Case {
  name: string;
  rs: () => Ruleset;
  pkt: Omit<TracePacket, 'family' | 'sport' | 'path'> & Partial<Pick<TracePacket, 'path' | 'sport' | 'family'>>;
  ctx?: Partial<TraceContext>;
  want: Expect;
}

function check(c: Case): void {
  const rs = c.rs();
  const r = trace(rs, { family: rs.family, sport: 40000, path: 'prerouting', iifname: 'eth0', ...c.pkt }, { ...ctx, ...c.ctx });
  const total = r.outcomes.reduce((n, o) => n + o.probability, 0);
  assert.ok(Math.abs(total - 1) < 1e-9, `probabilities sum to ${total}`);
  assert.equal(r.verdict, c.want.verdict, `verdict (chains ${r.chainsVisited.join(', ')})`);
  const got: Record<string, [number, boolean]> = {};
  for (const t of r.dnatTargets) got[`${t.ip.includes(':') ? `[${t.ip}]` : t.ip}:${t.port}`] = [Math.round(t.probability * 1e6) / 1e6, t.masquerade];
  const want: Record<string, [number, boolean]> = {};
  for (const [k, [p, m]] of Object.entries(c.want.targets ?? {})) want[k] = [Math.round(p * 1e6) / 1e6, m];
  assert.deepEqual(got, want, 'DNAT targets');
  if (!c.want.targets) assert.equal(r.masquerade, c.want.masquerade ?? false, 'masquerade');
}

const cip = () => compile(clusterIPSnapshot());
const third = 1 / 3;

const CLUSTER_IP_CASES: Case[] = [
  { name: 'ClusterIP from a pod: DNAT, no masquerade', rs: cip, pkt: { src: '10.244.1.7', dst: '10.96.0.1', proto: 'tcp', dport: 443, iifname: 'cni0' }, want: { verdict: 'accept', targets: { '192.168.1.10:6443': [1, false] } } },
  { name: 'ClusterIP from outside the cluster CIDR: masquerade', rs: cip, pkt: { src: '192.168.1.50', dst: '10.96.0.1', proto: 'tcp', dport: 443 }, want: { verdict: 'accept', targets: { '192.168.1.10:6443': [1, true] } } },
  { name: 'ClusterIP from the host (output path): masquerade', rs: cip, pkt: { src: NODE_IP, dst: '10.96.0.1', proto: 'tcp', dport: 443, path: 'output' }, want: { verdict: 'accept', targets: { '192.168.1.10:6443': [1, true] } } },
  { name: 'masqueradeAll: a pod is masqueraded too', rs: () => compile(clusterIPSnapshot({ masqueradeAll: true })), pkt: { src: '10.244.1.7', dst: '10.96.0.1', proto: 'tcp', dport: 443 }, want: { verdict: 'accept', targets: { '192.168.1.10:6443': [1, true] } } },
  { name: 'no local detector and no masqueradeAll: outside traffic is not masqueraded', rs: () => compile(clusterIPSnapshot({ localDetector: { mode: 'none' } })), pkt: { src: '192.168.1.50', dst: '10.96.0.1', proto: 'tcp', dport: 443 }, want: { verdict: 'accept', targets: { '192.168.1.10:6443': [1, false] } } },
  { name: 'interface detector: traffic not from cni0 is masqueraded', rs: () => compile(clusterIPSnapshot({ localDetector: { mode: 'interface', name: 'cni0' } })), pkt: { src: '10.244.1.7', dst: '10.96.0.1', proto: 'tcp', dport: 443, iifname: 'eth0' }, want: { verdict: 'accept', targets: { '192.168.1.10:6443': [1, true] } } },
  { name: 'interface prefix detector: traffic from veth* is not masqueraded', rs: () => compile(clusterIPSnapshot({ localDetector: { mode: 'interfacePrefix', prefix: 'veth' } })), pkt: { src: '10.244.1.7', dst: '10.96.0.1', proto: 'tcp', dport: 443, iifname: 'veth1234' }, want: { verdict: 'accept', targets: { '192.168.1.10:6443': [1, false] } } },
  {
    name: 'hairpin: a pod reaching itself through the service is masqueraded (hairpin set), the other endpoint is not',
    rs: cip, pkt: { src: '10.244.1.5', dst: '10.96.0.10', proto: 'udp', dport: 53, iifname: 'cni0' },
    want: { verdict: 'accept', targets: { '10.244.1.5:53': [0.5, true], '10.244.2.7:53': [0.5, false] } },
  },
  { name: 'UDP ClusterIP with 2 endpoints: uniform', rs: cip, pkt: { src: '10.244.2.9', dst: '10.96.0.10', proto: 'udp', dport: 53 }, want: { verdict: 'accept', targets: { '10.244.1.5:53': [0.5, false], '10.244.2.7:53': [0.5, false] } } },
  { name: 'same IP, TCP port: its own service chain', rs: cip, pkt: { src: '10.244.2.9', dst: '10.96.0.10', proto: 'tcp', dport: 9153 }, want: { verdict: 'accept', targets: { '10.244.1.5:9153': [0.5, false], '10.244.2.7:9153': [0.5, false] } } },
  { name: '3 endpoints: all reachable with 1/3 each', rs: cip, pkt: { src: '10.244.2.9', dst: '10.96.3.3', proto: 'tcp', dport: 8000 }, want: { verdict: 'accept', targets: { '10.244.1.31:8000': [third, false], '10.244.2.33:8000': [third, false], '10.244.3.32:8000': [third, false] } } },
  { name: 'SCTP ClusterIP', rs: cip, pkt: { src: '10.244.2.9', dst: '10.96.9.9', proto: 'sctp', dport: 9999 }, want: { verdict: 'accept', targets: { '10.244.2.99:9999': [1, false] } } },
  { name: 'no endpoints: reject', rs: cip, pkt: { src: '10.244.1.7', dst: '10.96.40.54', proto: 'tcp', dport: 80 }, want: { verdict: 'reject' } },
  { name: 'no endpoints, from the host: reject in output', rs: cip, pkt: { src: NODE_IP, dst: '10.96.40.54', proto: 'tcp', dport: 80, path: 'output' }, want: { verdict: 'reject' } },
  { name: 'undefined port of an active ClusterIP: reject', rs: cip, pkt: { src: '10.244.1.7', dst: '10.96.0.1', proto: 'tcp', dport: 80 }, want: { verdict: 'reject' } },
  { name: 'wrong protocol on a defined port: reject', rs: cip, pkt: { src: '10.244.1.7', dst: '10.96.0.1', proto: 'udp', dport: 443 }, want: { verdict: 'reject' } },
  { name: 'unallocated IP inside the service CIDR: drop', rs: cip, pkt: { src: '10.244.1.7', dst: '10.96.200.1', proto: 'tcp', dport: 80 }, want: { verdict: 'drop' } },
  { name: 'unknown IP outside the service CIDRs: untouched', rs: cip, pkt: { src: '10.244.1.7', dst: '8.8.8.8', proto: 'udp', dport: 53 }, want: { verdict: 'accept' } },
  { name: 'traffic to the node itself: untouched', rs: cip, pkt: { src: '192.168.1.50', dst: NODE_IP, proto: 'tcp', dport: 22 }, want: { verdict: 'accept' } },
  { name: 'established packet to an undefined port: no reject, no NAT (checks apply to ct state new)', rs: cip, pkt: { src: '10.244.1.7', dst: '10.96.0.1', proto: 'tcp', dport: 80 }, ctx: { ctState: 'established' }, want: { verdict: 'accept' } },
  {
    name: 'removed endpoint is no longer reachable',
    rs: () => compile(clusterIPSnapshot({
      servicePorts: clusterIPServices().map((sp) => (sp.name === 'three'
        ? simpleSP({ namespace: 'default', name: 'three', portName: '', protocol: 'TCP', clusterIP: '10.96.3.3', port: 8000, endpoints: [ep('10.244.1.31', 8000, true), ep('10.244.3.32', 8000)] })
        : sp)),
    })),
    pkt: { src: '10.244.2.9', dst: '10.96.3.3', proto: 'tcp', dport: 8000 },
    want: { verdict: 'accept', targets: { '10.244.1.31:8000': [0.5, false], '10.244.3.32:8000': [0.5, false] } },
  },
];

for (const c of CLUSTER_IP_CASES) test(`ClusterIP flow: ${c.name}`, () => check(c));

const full = () => compile(smallCluster());
const EXTERNAL_CASES: Case[] = [
  { name: 'NodePort (eTP Cluster, affinity) from outside: masquerade, 3 endpoints', rs: full, pkt: { src: '198.51.100.7', dst: NODE_IP, proto: 'tcp', dport: 30985 }, want: { verdict: 'accept', targets: { '10.244.1.20:9000': [third, true], '10.244.2.22:9000': [third, true], '10.244.3.21:9000': [third, true] } } },
  { name: 'affinity: a client in an affinity set sticks to its endpoint', rs: full, pkt: { src: '10.244.2.9', dst: '10.96.77.254', proto: 'tcp', dport: 9000 }, ctx: { dynamicSets: new Map([['affinity-OOEADG7F-default/api/tcp/grpc__10.244.3.21/9000', ['10.244.2.9']]]) }, want: { verdict: 'accept', targets: { '10.244.3.21:9000': [1, false] } } },
  { name: 'NodePort on an unknown port: untouched', rs: full, pkt: { src: '198.51.100.7', dst: NODE_IP, proto: 'tcp', dport: 31111 }, want: { verdict: 'accept' } },
  { name: 'NodePort to localhost is not a NodePort (127.0.0.0/8 excluded)', rs: full, pkt: { src: '127.0.0.1', dst: '127.0.0.1', proto: 'tcp', dport: 30985, path: 'output' }, want: { verdict: 'accept' } },
  { name: 'LB IP (eTP Local) from an allowed source: local endpoint, source kept', rs: full, pkt: { src: '203.0.113.5', dst: '192.0.2.10', proto: 'tcp', dport: 80 }, want: { verdict: 'accept', targets: { '10.244.1.10:8080': [1, false] } } },
  { name: 'LB IP from a source outside loadBalancerSourceRanges: drop', rs: full, pkt: { src: '198.51.100.9', dst: '192.0.2.10', proto: 'tcp', dport: 80 }, want: { verdict: 'drop' } },
  { name: 'LB NodePort (eTP Local) from outside: local endpoint, no masquerade', rs: full, pkt: { src: '198.51.100.9', dst: NODE_IP, proto: 'tcp', dport: 32399 }, want: { verdict: 'accept', targets: { '10.244.1.10:8080': [1, false] } } },
  { name: 'ExternalIP (eTP Cluster) from outside: masquerade, cluster endpoints', rs: full, pkt: { src: '198.51.100.9', dst: '198.51.100.20', proto: 'tcp', dport: 80 }, want: { verdict: 'accept', targets: { '10.244.1.30:8080': [0.5, true], '10.244.2.31:8080': [0.5, true] } } },
  { name: 'iTP Local ClusterIP: local endpoint only', rs: full, pkt: { src: '10.244.2.9', dst: '10.96.45.131', proto: 'tcp', dport: 80 }, want: { verdict: 'accept', targets: { '10.244.1.30:8080': [1, false] } } },
  {
    name: 'iTP Local without local endpoints: ClusterIP traffic dropped',
    rs: () => compile(smallCluster({
      servicePorts: [{
        namespace: 'default', name: 'dual', portName: 'http', protocol: 'TCP', clusterIP: '10.96.45.131', port: 80, internalPolicyLocal: true,
        clusterEndpoints: [], localEndpoints: [], allReachableEndpoints: [], hasEndpoints: true,
      }],
    })),
    pkt: { src: '10.244.2.9', dst: '10.96.45.131', proto: 'tcp', dport: 80 },
    want: { verdict: 'drop' },
  },
];
for (const c of EXTERNAL_CASES) test(`external flow: ${c.name}`, () => check(c));

const v6 = () => compile(smallClusterV6());
const V6_CASES: Case[] = [
  { name: 'IPv6 ClusterIP from a pod', rs: v6, pkt: { src: 'fd00:10:244:2::9', dst: 'fd00:10:96::48b3', proto: 'tcp', dport: 80 }, want: { verdict: 'accept', targets: { '[fd00:10:244:1::30]:8080': [0.5, false], '[fd00:10:244:2::31]:8080': [0.5, false] } } },
  { name: 'IPv6 ClusterIP from outside: masquerade', rs: v6, pkt: { src: '2001:db8::1', dst: 'fd00:10:96::48b3', proto: 'tcp', dport: 80 }, want: { verdict: 'accept', targets: { '[fd00:10:244:1::30]:8080': [0.5, true], '[fd00:10:244:2::31]:8080': [0.5, true] } } },
  { name: 'IPv6 hairpin', rs: v6, pkt: { src: 'fd00:10:244:1::30', dst: 'fd00:10:96::48b3', proto: 'tcp', dport: 80 }, want: { verdict: 'accept', targets: { '[fd00:10:244:1::30]:8080': [0.5, true], '[fd00:10:244:2::31]:8080': [0.5, false] } } },
  { name: 'IPv6 UDP NodePort on a nodeport-ips address', rs: v6, pkt: { src: '2001:db8::1', dst: 'fd00:192:168:1::11', proto: 'udp', dport: 30053 }, ctx: { localAddrs: ['fd00:192:168:1::11'] }, want: { verdict: 'accept', targets: { '[fd00:10:244:2::53]:5353': [1, true] } } },
  { name: 'IPv6 no endpoints: reject', rs: v6, pkt: { src: 'fd00:10:244:2::9', dst: 'fd00:10:96::5', proto: 'tcp', dport: 80 }, want: { verdict: 'reject' } },
  { name: 'IPv6 unallocated service IP: drop', rs: v6, pkt: { src: 'fd00:10:244:2::9', dst: 'fd00:10:96::77', proto: 'tcp', dport: 80 }, want: { verdict: 'drop' } },
];
for (const c of V6_CASES) test(`IPv6 flow: ${c.name}`, () => check(c));

test('a cascade of N endpoints is uniform for N = 1..12', () => {
  for (let n = 1; n <= 12; n++) {
    const eps = Array.from({ length: n }, (_, i) => ep(`10.244.${i}.1`, 80));
    const rs = compile(clusterIPSnapshot({ servicePorts: [simpleSP({ namespace: 'a', name: 'b', portName: 'p', protocol: 'TCP', clusterIP: '10.96.1.1', port: 80, endpoints: eps })] }));
    const r = trace(rs, { family: 'ip', src: '10.244.99.1', dst: '10.96.1.1', proto: 'tcp', sport: 1, dport: 80, path: 'prerouting' }, ctx);
    assert.equal(r.dnatTargets.length, n);
    for (const t of r.dnatTargets) assert.ok(Math.abs(t.probability - 1 / n) < 1e-9, `n=${n} ${t.ip} p=${t.probability}`);
  }
});
