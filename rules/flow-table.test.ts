/**
 * The packet-flow table of issue 3: every Service type and traffic policy kube-proxy's nftables mode supports,
 * compiled and executed by the packet tracer (lowered expressions: what the kernel runs), in IPv4 AND IPv6.
 *
 * Each row states source, destination, port, protocol and where the packet enters (a pod via cni0, an outside
 * client via eth0, or the host itself), and expects: accept / drop / reject, the POSSIBLE DNAT targets (a set,
 * independent of the endpoint-selection encoding: probabilities are not asserted here) and, per target, whether the
 * connection is masqueraded (`ip:port masq`). Upstream's semantics: shared/reference/kube-proxy-nftables.md §2, §5.
 *
 * The IPv6 table is the same world with every address mapped a.b.c.d -> fd00::a:b:c:d (prefix /n -> /64+2n).
 * Endpoint categorisation from Kubernetes objects (hints, terminating, named ports, exclusions, bad input) is in
 * agent/flow-k8s.test.ts, which runs the agent's snapshot builder into the same tracer.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compile } from './compile.ts';
import { trace } from './trace.ts';
import type { TraceContext } from './trace.ts';
import type { L4Proto, Ruleset } from './model.ts';
import { canonicalAddr } from './addr.ts';
import { SnapshotSchema, type EndpointSchema, type LocalDetector, type ServicePortInput, type SnapshotInput } from '../config-schema/snapshot.ts';
import type { z } from 'zod';

type Fam = 'ip' | 'ip6';
type EpIn = z.input<typeof EndpointSchema>;

/** a.b.c.d[/n] -> fd00::a:b:c:d[/64+2n] for the IPv6 world (127.0.0.1 -> ::1). */
function v6(a: string): string {
  if (a === '127.0.0.1') return '::1';
  const [ip, n] = a.split('/');
  const mapped = canonicalAddr('ip6', `fd00:0:0:0:${ip.split('.').join(':')}`);
  return n === undefined ? mapped : `${mapped}/${64 + 2 * Number(n)}`;
}
const A = (fam: Fam, a: string) => (fam === 'ip' ? a : v6(a));

const NODE_IP = '192.168.1.11';      // primary node IP (eth0)
const NODE_IP2 = '192.168.2.11';     // second node address (eth1)
const BRIDGE_IP = '10.244.1.1';      // cni0
const LOCAL_POD = '10.244.1.77';     // a pod on this node
const REMOTE_POD = '10.244.2.9';     // a pod on another node (arrives on eth0)
const OUTSIDE = '198.51.100.7';      // an outside client
const ALLOWED = '203.0.113.5';       // inside the LB source ranges

const ep = (ip: string, port: number, isLocal = false, extra: Partial<EpIn> = {}): EpIn => ({ ip, port, isLocal, ready: true, serving: true, terminating: false, ...extra });

/** A ServicePort as CategorizeEndpoints leaves it when every endpoint is ready (agent/endpoints.ts semantics). */
function sp(p: Omit<ServicePortInput, 'clusterEndpoints' | 'localEndpoints' | 'allReachableEndpoints' | 'hasEndpoints' | 'namespace'> & { eps: EpIn[]; namespace?: string }): ServicePortInput {
  const { eps, ...rest } = p;
  const ext = !!(p.nodePort || p.externalIPs?.length || p.loadBalancerIPs?.length);
  const usesCluster = !p.internalPolicyLocal || ext;
  const usesLocal = !!p.internalPolicyLocal || (!!p.externalPolicyLocal && ext);
  const cluster = usesCluster ? eps : [];
  const local = usesLocal ? eps.filter((e) => e.isLocal) : [];
  const reach = new Map([...cluster, ...local].map((e) => [`${e.ip}:${e.port}`, e]));
  return { namespace: 'ns', ...rest, clusterEndpoints: cluster, localEndpoints: local, allReachableEndpoints: [...reach.values()], hasEndpoints: eps.length > 0 };
}

/** The world's Services (IPv4 text; mapped for IPv6). */
function services(): ServicePortInput[] {
  return [
    sp({ name: 'np', portName: 'http', protocol: 'TCP', clusterIP: '10.96.0.10', port: 80, nodePort: 30080, eps: [ep('10.244.1.10', 8080, true), ep('10.244.2.10', 8080)] }),
    sp({ name: 'np-udp', portName: 'dns', protocol: 'UDP', clusterIP: '10.96.0.11', port: 53, nodePort: 30053, eps: [ep('10.244.2.11', 5353)] }),
    sp({ name: 'ext', portName: 'http', protocol: 'TCP', clusterIP: '10.96.0.20', port: 80, externalIPs: ['203.0.113.100'], eps: [ep('10.244.2.20', 8080)] }),
    sp({ name: 'lb', portName: 'http', protocol: 'TCP', clusterIP: '10.96.0.30', port: 80, nodePort: 30100, loadBalancerIPs: ['192.0.2.10'], loadBalancerSourceRanges: ['203.0.113.0/24'], eps: [ep('10.244.2.30', 8080)] }),
    sp({ name: 'lb-self', portName: 'http', protocol: 'TCP', clusterIP: '10.96.0.31', port: 80, nodePort: 30101, loadBalancerIPs: ['192.0.2.11'], loadBalancerSourceRanges: ['192.168.1.0/24'], eps: [ep('10.244.2.31', 8080)] }),
    sp({ name: 'lb-open', portName: 'http', protocol: 'UDP', clusterIP: '10.96.0.32', port: 53, loadBalancerIPs: ['192.0.2.12'], eps: [ep('10.244.2.32', 5353)] }),
    sp({
      name: 'local', portName: 'http', protocol: 'TCP', clusterIP: '10.96.0.40', port: 80, nodePort: 30200, externalPolicyLocal: true, healthCheckNodePort: 32000,
      loadBalancerIPs: ['192.0.2.20'], externalIPs: ['203.0.113.120'], eps: [ep('10.244.1.40', 8080, true), ep('10.244.2.40', 8080)],
    }),
    sp({
      name: 'local-none', portName: 'http', protocol: 'TCP', clusterIP: '10.96.0.41', port: 80, nodePort: 30201, externalPolicyLocal: true, healthCheckNodePort: 32001,
      loadBalancerIPs: ['192.0.2.21'], externalIPs: ['203.0.113.121'], eps: [ep('10.244.2.41', 8080)],
    }),
    sp({ name: 'itp', portName: 'http', protocol: 'TCP', clusterIP: '10.96.0.50', port: 80, internalPolicyLocal: true, eps: [ep('10.244.1.50', 8080, true), ep('10.244.2.50', 8080)] }),
    sp({ name: 'itp-none', portName: 'http', protocol: 'TCP', clusterIP: '10.96.0.51', port: 80, internalPolicyLocal: true, eps: [ep('10.244.2.51', 8080)] }),
    sp({
      name: 'itp-np', portName: 'http', protocol: 'TCP', clusterIP: '10.96.0.52', port: 80, nodePort: 30252, internalPolicyLocal: true,
      eps: [ep('10.244.1.52', 8080, true), ep('10.244.2.52', 8080)],
    }),
    sp({
      name: 'aff', portName: 'http', protocol: 'TCP', clusterIP: '10.96.0.60', port: 80, nodePort: 30300, externalIPs: ['203.0.113.160'], affinityTimeoutSeconds: 10800,
      eps: [ep('10.244.2.60', 8080), ep('10.244.3.60', 8080)],
    }),
    sp({ name: 'multi', portName: 'http', protocol: 'TCP', clusterIP: '10.96.0.70', port: 80, eps: [ep('10.244.2.70', 8080), ep('10.244.3.70', 8080)] }),
    sp({ name: 'multi', portName: 'metrics', protocol: 'TCP', clusterIP: '10.96.0.70', port: 9090, eps: [ep('10.244.2.70', 9100), ep('10.244.3.70', 9100)] }),
    sp({ name: 'multi', portName: 'dns', protocol: 'UDP', clusterIP: '10.96.0.70', port: 80, eps: [ep('10.244.2.70', 5353)] }),
    sp({ name: 'sctp', portName: 'assoc', protocol: 'SCTP', clusterIP: '10.96.0.80', port: 9999, nodePort: 30400, eps: [ep('10.244.2.80', 9999)] }),
    sp({ name: 'empty', portName: 'http', protocol: 'TCP', clusterIP: '10.96.0.90', port: 80, nodePort: 30500, externalIPs: ['203.0.113.190'], eps: [] }),
    // Terminating-only endpoints: CategorizeEndpoints falls back to serving+terminating (agent/endpoints.ts).
    {
      namespace: 'ns', name: 'term', portName: 'http', protocol: 'TCP', clusterIP: '10.96.0.91', port: 80,
      clusterEndpoints: [ep('10.244.2.91', 8080, false, { ready: false, terminating: true })],
      allReachableEndpoints: [ep('10.244.2.91', 8080, false, { ready: false, terminating: true })], hasEndpoints: true,
    },
  ];
}

function mapSP(fam: Fam, s: ServicePortInput): ServicePortInput {
  if (fam === 'ip') return s;
  const m = (e: EpIn): EpIn => ({ ...e, ip: v6(e.ip) });
  return {
    ...s, clusterIP: v6(s.clusterIP), externalIPs: s.externalIPs?.map(v6), loadBalancerIPs: s.loadBalancerIPs?.map(v6),
    loadBalancerSourceRanges: s.loadBalancerSourceRanges?.map(v6),
    clusterEndpoints: s.clusterEndpoints?.map(m), localEndpoints: s.localEndpoints?.map(m), allReachableEndpoints: s.allReachableEndpoints?.map(m),
  };
}

interface World {
  nodePortIPs?: string[] | null;
  localDetector?: LocalDetector;
  masqueradeAll?: boolean;
  serviceCIDRs?: string[];
}

const cache = new Map<string, Ruleset>();
function world(fam: Fam, w: World = {}): Ruleset {
  const key = JSON.stringify([fam, w]);
  let rs = cache.get(key);
  if (rs) return rs;
  const det = w.localDetector ?? { mode: 'cidr', cidrs: ['10.244.0.0/16'] };
  const input: SnapshotInput = {
    family: fam === 'ip' ? 'ipv4' : 'ipv6',
    masqueradeAll: w.masqueradeAll ?? false,
    localDetector: det.mode === 'cidr' ? { mode: 'cidr', cidrs: det.cidrs.map((c) => A(fam, c)) } : det,
    nodePortIPs: w.nodePortIPs === undefined ? [A(fam, NODE_IP)] : w.nodePortIPs === null ? null : w.nodePortIPs.map((a) => A(fam, a)),
    serviceCIDRs: (w.serviceCIDRs ?? ['10.96.0.0/16']).map((c) => A(fam, c)),
    node: { name: 'node-1', zone: 'zone-a', ips: [A(fam, NODE_IP), A(fam, NODE_IP2)] },
    servicePorts: services().map((s) => mapSP(fam, s)),
  };
  rs = compile(SnapshotSchema.parse(input));
  cache.set(key, rs);
  return rs;
}

type From = 'pod' | 'outside' | 'host' | 'remote-pod';
interface Row {
  bullet: string;
  /** Where the packet comes from: a local pod via cni0, an outside client / a remote pod via eth0, or the host. */
  from: From;
  src?: string;
  dst: string;
  port: number;
  proto: L4Proto;
  iif?: string;
  world?: World;
  /** Client addresses already in affinity sets: set-name suffix (`…__ip/port`) -> clients. */
  affinity?: Record<string, string[]>;
  /** accept (default when DNAT targets are given), drop or reject. */
  verdict?: 'accept' | 'drop' | 'reject';
  /** Possible DNAT targets, `ip:port` with ` masq` when that connection is masqueraded. */
  to?: string[];
  /** For packets left un-DNATed: masqueraded? (default false) */
  masq?: boolean;
  /** Every outcome updates an affinity set. */
  affinityUpdate?: boolean;
}

const DEFAULT_SRC: Record<From, string> = { pod: LOCAL_POD, outside: OUTSIDE, host: NODE_IP, 'remote-pod': REMOTE_POD };

function run(fam: Fam, r: Row): void {
  const rs = world(fam, r.world);
  const src = A(fam, r.src ?? DEFAULT_SRC[r.from]);
  const iifname = r.iif ?? (r.from === 'pod' ? 'cni0' : r.from === 'host' ? '' : 'eth0');
  const dyn = new Map<string, string[]>();
  for (const [suffix, clients] of Object.entries(r.affinity ?? {})) {
    const sfx = fam === 'ip' ? suffix : suffix.replace(/__(.*)\//, (_m, ip: string) => `__${v6(ip).replaceAll(':', '.')}/`);
    const names = [...rs.index.sets.keys()].filter((n) => n.startsWith('affinity-') && n.endsWith(sfx));
    assert.equal(names.length, 1, `affinity set *${sfx}: ${names.join(', ')}`);
    dyn.set(names[0], clients.map((c) => A(fam, c)));
  }
  const ctx: TraceContext = { localAddrs: [A(fam, NODE_IP), A(fam, NODE_IP2), A(fam, BRIDGE_IP)], dynamicSets: dyn };
  const res = trace(rs, {
    family: fam, src, dst: A(fam, r.dst), proto: r.proto, sport: 40000, dport: r.port,
    path: r.from === 'host' ? 'output' : 'prerouting', iifname,
  }, ctx);
  const why = `chains: ${res.chainsVisited.join(' > ')}`;
  const wantVerdict = r.verdict ?? 'accept';
  assert.equal(res.verdict, wantVerdict, `verdict; ${why}`);
  const fmt = (ip: string, port: number) => (ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`);
  const got = res.dnatTargets.map((t) => `${fmt(t.ip, t.port)}${t.masquerade ? ' masq' : ''}`).sort();
  const want = (r.to ?? []).map((t) => {
    const [hp, m] = t.split(' ');
    const i = hp.lastIndexOf(':');
    return `${fmt(A(fam, hp.slice(0, i)), Number(hp.slice(i + 1)))}${m ? ` ${m}` : ''}`;
  }).sort();
  assert.deepEqual(got, want, `DNAT targets; ${why}`);
  if (!r.to?.length) assert.equal(res.masquerade, r.masq ?? false, `masquerade; ${why}`);
  if (r.affinityUpdate !== undefined) {
    assert.equal(res.outcomes.every((o) => o.updates.some((u) => u.set.startsWith('affinity-'))), r.affinityUpdate, 'affinity update');
  }
}

const PRIMARY = { nodePortIPs: [NODE_IP] };
const CIDRS = { nodePortIPs: [NODE_IP, NODE_IP2] }; // nodePortAddresses 192.168.0.0/16: every node address inside
const ALL = { nodePortIPs: null };
const LOCALHOST = { nodePortIPs: ['127.0.0.1'] };

const ROWS: Row[] = [
  // NodePort and nodePortAddresses
  { bullet: 'NodePort primary', from: 'outside', dst: NODE_IP, port: 30080, proto: 'tcp', world: PRIMARY, to: ['10.244.1.10:8080 masq', '10.244.2.10:8080 masq'] },
  { bullet: 'NodePort primary: not on the second node address', from: 'outside', dst: NODE_IP2, port: 30080, proto: 'tcp', world: PRIMARY, verdict: 'accept' },
  { bullet: 'NodePort primary: not on the bridge address', from: 'pod', dst: BRIDGE_IP, port: 30080, proto: 'tcp', world: PRIMARY, verdict: 'accept' },
  { bullet: 'NodePort primary UDP', from: 'outside', dst: NODE_IP, port: 30053, proto: 'udp', world: PRIMARY, to: ['10.244.2.11:5353 masq'] },
  { bullet: 'NodePort primary from a pod', from: 'pod', dst: NODE_IP, port: 30080, proto: 'tcp', world: PRIMARY, to: ['10.244.1.10:8080 masq', '10.244.2.10:8080 masq'] },
  { bullet: 'NodePort primary from the host', from: 'host', dst: NODE_IP, port: 30080, proto: 'tcp', world: PRIMARY, to: ['10.244.1.10:8080 masq', '10.244.2.10:8080 masq'] },
  { bullet: 'NodePort CIDRs: first address', from: 'outside', dst: NODE_IP, port: 30080, proto: 'tcp', world: CIDRS, to: ['10.244.1.10:8080 masq', '10.244.2.10:8080 masq'] },
  { bullet: 'NodePort CIDRs: second address', from: 'outside', dst: NODE_IP2, port: 30080, proto: 'tcp', world: CIDRS, to: ['10.244.1.10:8080 masq', '10.244.2.10:8080 masq'] },
  { bullet: 'NodePort CIDRs: not on an address outside them', from: 'pod', dst: BRIDGE_IP, port: 30080, proto: 'tcp', world: CIDRS, verdict: 'accept' },
  { bullet: 'NodePort all (fib daddr type local): bridge address', from: 'pod', dst: BRIDGE_IP, port: 30080, proto: 'tcp', world: ALL, to: ['10.244.1.10:8080 masq', '10.244.2.10:8080 masq'] },
  { bullet: 'NodePort all: second address', from: 'outside', dst: NODE_IP2, port: 30080, proto: 'tcp', world: ALL, to: ['10.244.1.10:8080 masq', '10.244.2.10:8080 masq'] },
  { bullet: 'NodePort all: a non-local address is not a NodePort', from: 'outside', dst: '192.168.1.99', port: 30080, proto: 'tcp', world: ALL, verdict: 'accept' },
  { bullet: 'NodePort all: localhost excluded', from: 'host', src: '127.0.0.1', dst: '127.0.0.1', port: 30080, proto: 'tcp', world: ALL, verdict: 'accept' },
  { bullet: 'NodePort localhost: loopback is never in nodeport-ips (no route_localnet)', from: 'host', src: '127.0.0.1', dst: '127.0.0.1', port: 30080, proto: 'tcp', world: LOCALHOST, verdict: 'accept' },
  { bullet: 'NodePort localhost only: the node IP is no NodePort address', from: 'outside', dst: NODE_IP, port: 30080, proto: 'tcp', world: LOCALHOST, verdict: 'accept' },
  { bullet: 'NodePort without endpoints: reject', from: 'outside', dst: NODE_IP, port: 30500, proto: 'tcp', world: PRIMARY, verdict: 'reject' },
  { bullet: 'NodePort without endpoints on a non-NodePort address: untouched', from: 'outside', dst: NODE_IP2, port: 30500, proto: 'tcp', world: PRIMARY, verdict: 'accept' },
  { bullet: 'NodePort without endpoints, all: reject on any local address', from: 'outside', dst: NODE_IP2, port: 30500, proto: 'tcp', world: ALL, verdict: 'reject' },
  { bullet: 'NodePort unknown port: untouched', from: 'outside', dst: NODE_IP, port: 31999, proto: 'tcp', verdict: 'accept' },
  { bullet: 'NodePort wrong protocol: untouched', from: 'outside', dst: NODE_IP, port: 30080, proto: 'udp', verdict: 'accept' },

  // ExternalIPs
  { bullet: 'ExternalIP from outside', from: 'outside', dst: '203.0.113.100', port: 80, proto: 'tcp', to: ['10.244.2.20:8080 masq'] },
  { bullet: 'ExternalIP from a pod', from: 'pod', dst: '203.0.113.100', port: 80, proto: 'tcp', to: ['10.244.2.20:8080 masq'] },
  { bullet: 'ExternalIP from the host', from: 'host', dst: '203.0.113.100', port: 80, proto: 'tcp', to: ['10.244.2.20:8080 masq'] },
  { bullet: 'ExternalIP other port: untouched', from: 'outside', dst: '203.0.113.100', port: 81, proto: 'tcp', verdict: 'accept' },
  { bullet: 'ExternalIP without endpoints: reject', from: 'outside', dst: '203.0.113.190', port: 80, proto: 'tcp', verdict: 'reject' },

  // LoadBalancer ingress and loadBalancerSourceRanges (firewall at dstnat-10)
  { bullet: 'LB ingress without source ranges (UDP)', from: 'outside', dst: '192.0.2.12', port: 53, proto: 'udp', to: ['10.244.2.32:5353 masq'] },
  { bullet: 'LB source ranges: allowed source', from: 'outside', src: ALLOWED, dst: '192.0.2.10', port: 80, proto: 'tcp', to: ['10.244.2.30:8080 masq'] },
  { bullet: 'LB source ranges: denied source dropped', from: 'outside', dst: '192.0.2.10', port: 80, proto: 'tcp', verdict: 'drop' },
  { bullet: 'LB source ranges: a pod outside the ranges is dropped too', from: 'pod', dst: '192.0.2.10', port: 80, proto: 'tcp', verdict: 'drop' },
  { bullet: 'LB source ranges do not apply to the NodePort', from: 'outside', dst: NODE_IP, port: 30100, proto: 'tcp', to: ['10.244.2.30:8080 masq'] },
  { bullet: 'LB source ranges do not apply to the ClusterIP', from: 'pod', dst: '10.96.0.30', port: 80, proto: 'tcp', to: ['10.244.2.30:8080'] },
  { bullet: 'LB source ranges: VIP as source denied when the node IP is outside the ranges', from: 'outside', src: '192.0.2.10', dst: '192.0.2.10', port: 80, proto: 'tcp', verdict: 'drop' },
  { bullet: 'LB node-IP self-allow: VIP as source allowed (ranges contain the node IP)', from: 'outside', src: '192.0.2.11', dst: '192.0.2.11', port: 80, proto: 'tcp', to: ['10.244.2.31:8080 masq'] },
  { bullet: 'LB node-IP self-allow: a source inside the ranges', from: 'outside', src: '192.168.1.50', dst: '192.0.2.11', port: 80, proto: 'tcp', to: ['10.244.2.31:8080 masq'] },
  { bullet: 'LB node-IP self-allow: a source outside the ranges dropped', from: 'outside', dst: '192.0.2.11', port: 80, proto: 'tcp', verdict: 'drop' },

  // externalTrafficPolicy Local, with local endpoints
  { bullet: 'eTP Local: outside → LB: local endpoint only, source kept', from: 'outside', dst: '192.0.2.20', port: 80, proto: 'tcp', to: ['10.244.1.40:8080'] },
  { bullet: 'eTP Local: outside → ExternalIP: local endpoint only', from: 'outside', dst: '203.0.113.120', port: 80, proto: 'tcp', to: ['10.244.1.40:8080'] },
  { bullet: 'eTP Local: outside → NodePort: local endpoint only', from: 'outside', dst: NODE_IP, port: 30200, proto: 'tcp', to: ['10.244.1.40:8080'] },
  { bullet: 'eTP Local: pod → LB short-circuits to the cluster endpoints', from: 'pod', dst: '192.0.2.20', port: 80, proto: 'tcp', to: ['10.244.1.40:8080', '10.244.2.40:8080'] },
  { bullet: 'eTP Local: host → LB short-circuits, masqueraded', from: 'host', dst: '192.0.2.20', port: 80, proto: 'tcp', to: ['10.244.1.40:8080 masq', '10.244.2.40:8080 masq'] },
  { bullet: 'eTP Local: host → NodePort short-circuits, masqueraded', from: 'host', dst: NODE_IP, port: 30200, proto: 'tcp', to: ['10.244.1.40:8080 masq', '10.244.2.40:8080 masq'] },
  { bullet: 'eTP Local: ClusterIP is not affected (cluster endpoints)', from: 'pod', dst: '10.96.0.40', port: 80, proto: 'tcp', to: ['10.244.1.40:8080', '10.244.2.40:8080'] },
  // eTP Local WITHOUT local endpoints (upstream #131765)
  { bullet: 'eTP Local, no local endpoints: outside → LB dropped', from: 'outside', dst: '192.0.2.21', port: 80, proto: 'tcp', verdict: 'drop' },
  { bullet: 'eTP Local, no local endpoints: outside → ExternalIP dropped', from: 'outside', dst: '203.0.113.121', port: 80, proto: 'tcp', verdict: 'drop' },
  { bullet: 'eTP Local, no local endpoints: outside → NodePort dropped', from: 'outside', dst: NODE_IP, port: 30201, proto: 'tcp', verdict: 'drop' },
  { bullet: 'eTP Local, no local endpoints: remote pod (not local) → LB dropped', from: 'remote-pod', dst: '192.0.2.21', port: 80, proto: 'tcp', world: { localDetector: { mode: 'cidr', cidrs: ['10.244.1.0/24'] } }, verdict: 'drop' },
  { bullet: 'eTP Local, no local endpoints: pod → LB NOT dropped (#131765)', from: 'pod', dst: '192.0.2.21', port: 80, proto: 'tcp', to: ['10.244.2.41:8080'] },
  { bullet: 'eTP Local, no local endpoints: pod → ExternalIP NOT dropped (#131765)', from: 'pod', dst: '203.0.113.121', port: 80, proto: 'tcp', to: ['10.244.2.41:8080'] },
  { bullet: 'eTP Local, no local endpoints: host → LB NOT dropped, masqueraded', from: 'host', dst: '192.0.2.21', port: 80, proto: 'tcp', to: ['10.244.2.41:8080 masq'] },
  { bullet: 'eTP Local, no local endpoints: host → NodePort NOT dropped', from: 'host', dst: NODE_IP, port: 30201, proto: 'tcp', to: ['10.244.2.41:8080 masq'] },
  { bullet: 'eTP Local, no local endpoints: ClusterIP still works', from: 'pod', dst: '10.96.0.41', port: 80, proto: 'tcp', to: ['10.244.2.41:8080'] },

  // internalTrafficPolicy Local
  { bullet: 'iTP Local: ClusterIP → local endpoint only', from: 'remote-pod', dst: '10.96.0.50', port: 80, proto: 'tcp', to: ['10.244.1.50:8080'] },
  { bullet: 'iTP Local, no local endpoints: ClusterIP dropped', from: 'pod', dst: '10.96.0.51', port: 80, proto: 'tcp', verdict: 'drop' },
  { bullet: 'iTP Local + NodePort: ClusterIP local only', from: 'pod', dst: '10.96.0.52', port: 80, proto: 'tcp', to: ['10.244.1.52:8080'] },
  { bullet: 'iTP Local + NodePort: NodePort uses cluster endpoints (eTP Cluster)', from: 'outside', dst: NODE_IP, port: 30252, proto: 'tcp', to: ['10.244.1.52:8080 masq', '10.244.2.52:8080 masq'] },

  // Session affinity ClientIP
  { bullet: 'affinity: a new client may reach any endpoint and is recorded', from: 'pod', dst: '10.96.0.60', port: 80, proto: 'tcp', to: ['10.244.2.60:8080', '10.244.3.60:8080'], affinityUpdate: true },
  { bullet: 'affinity: a known client sticks (ClusterIP)', from: 'pod', dst: '10.96.0.60', port: 80, proto: 'tcp', affinity: { '__10.244.3.60/8080': [LOCAL_POD] }, to: ['10.244.3.60:8080'], affinityUpdate: true },
  { bullet: 'affinity across service IPs: the same client via the ExternalIP', from: 'pod', dst: '203.0.113.160', port: 80, proto: 'tcp', affinity: { '__10.244.3.60/8080': [LOCAL_POD] }, to: ['10.244.3.60:8080 masq'] },
  { bullet: 'affinity across service IPs: the same client via the NodePort', from: 'pod', dst: NODE_IP, port: 30300, proto: 'tcp', affinity: { '__10.244.3.60/8080': [LOCAL_POD] }, to: ['10.244.3.60:8080 masq'] },
  { bullet: 'affinity is per client: another client is free', from: 'remote-pod', dst: '10.96.0.60', port: 80, proto: 'tcp', affinity: { '__10.244.3.60/8080': [LOCAL_POD] }, to: ['10.244.2.60:8080', '10.244.3.60:8080'] },

  // detectLocalMode
  { bullet: 'ClusterCIDR: a pod of any node is not masqueraded', from: 'remote-pod', dst: '10.96.0.10', port: 80, proto: 'tcp', to: ['10.244.1.10:8080', '10.244.2.10:8080'] },
  { bullet: 'ClusterCIDR: outside traffic to a ClusterIP is masqueraded', from: 'outside', dst: '10.96.0.10', port: 80, proto: 'tcp', to: ['10.244.1.10:8080 masq', '10.244.2.10:8080 masq'] },
  { bullet: 'ClusterCIDR: host traffic to a ClusterIP is masqueraded', from: 'host', dst: '10.96.0.10', port: 80, proto: 'tcp', to: ['10.244.1.10:8080 masq', '10.244.2.10:8080 masq'] },
  { bullet: 'NodeCIDR: a pod of this node is not masqueraded', from: 'pod', dst: '10.96.0.20', port: 80, proto: 'tcp', world: { localDetector: { mode: 'cidr', cidrs: ['10.244.1.0/24'] } }, to: ['10.244.2.20:8080'] },
  { bullet: 'NodeCIDR: a pod of another node is masqueraded', from: 'remote-pod', dst: '10.96.0.20', port: 80, proto: 'tcp', world: { localDetector: { mode: 'cidr', cidrs: ['10.244.1.0/24'] } }, to: ['10.244.2.20:8080 masq'] },
  { bullet: 'BridgeInterface: iifname cni0 is local', from: 'pod', dst: '10.96.0.20', port: 80, proto: 'tcp', world: { localDetector: { mode: 'interface', name: 'cni0' } }, to: ['10.244.2.20:8080'] },
  { bullet: 'BridgeInterface: another interface is not', from: 'remote-pod', dst: '10.96.0.20', port: 80, proto: 'tcp', world: { localDetector: { mode: 'interface', name: 'cni0' } }, to: ['10.244.2.20:8080 masq'] },
  { bullet: 'BridgeInterface: eTP Local short-circuit by iifname', from: 'pod', dst: '192.0.2.21', port: 80, proto: 'tcp', world: { localDetector: { mode: 'interface', name: 'cni0' } }, to: ['10.244.2.41:8080'] },
  { bullet: 'InterfaceNamePrefix: iifname veth* is local', from: 'pod', iif: 'veth1a2b', dst: '10.96.0.20', port: 80, proto: 'tcp', world: { localDetector: { mode: 'interfacePrefix', prefix: 'veth' } }, to: ['10.244.2.20:8080'] },
  { bullet: 'InterfaceNamePrefix: eth0 is not', from: 'pod', iif: 'eth0', dst: '10.96.0.20', port: 80, proto: 'tcp', world: { localDetector: { mode: 'interfacePrefix', prefix: 'veth' } }, to: ['10.244.2.20:8080 masq'] },
  { bullet: 'InterfaceNamePrefix: eTP Local short-circuit by iifname prefix', from: 'pod', iif: 'veth1a2b', dst: '192.0.2.21', port: 80, proto: 'tcp', world: { localDetector: { mode: 'interfacePrefix', prefix: 'veth' } }, to: ['10.244.2.41:8080'] },
  { bullet: 'no detector: no pod short-circuit, pod → eTP Local LB without local endpoints dropped', from: 'pod', dst: '192.0.2.21', port: 80, proto: 'tcp', world: { localDetector: { mode: 'none' } }, verdict: 'drop' },
  { bullet: 'masqueradeAll: a pod is masqueraded to a ClusterIP', from: 'pod', dst: '10.96.0.20', port: 80, proto: 'tcp', world: { masqueradeAll: true }, to: ['10.244.2.20:8080 masq'] },

  // Ports and protocols
  { bullet: 'multi-port: port http', from: 'pod', dst: '10.96.0.70', port: 80, proto: 'tcp', to: ['10.244.2.70:8080', '10.244.3.70:8080'] },
  { bullet: 'multi-port: port metrics (other target port)', from: 'pod', dst: '10.96.0.70', port: 9090, proto: 'tcp', to: ['10.244.2.70:9100', '10.244.3.70:9100'] },
  { bullet: 'multi-port: same port number, UDP', from: 'pod', dst: '10.96.0.70', port: 80, proto: 'udp', to: ['10.244.2.70:5353'] },
  { bullet: 'multi-port: undefined port of the ClusterIP rejected', from: 'pod', dst: '10.96.0.70', port: 81, proto: 'tcp', verdict: 'reject' },
  { bullet: 'SCTP ClusterIP', from: 'pod', dst: '10.96.0.80', port: 9999, proto: 'sctp', to: ['10.244.2.80:9999'] },
  { bullet: 'SCTP NodePort', from: 'outside', dst: NODE_IP, port: 30400, proto: 'sctp', to: ['10.244.2.80:9999 masq'] },
  { bullet: 'SCTP wrong protocol on the ClusterIP: reject', from: 'pod', dst: '10.96.0.80', port: 9999, proto: 'tcp', verdict: 'reject' },

  // serviceCIDRs, no endpoints, terminating-only, hairpin
  { bullet: 'serviceCIDRs: unallocated IP dropped', from: 'pod', dst: '10.96.200.1', port: 80, proto: 'tcp', verdict: 'drop' },
  { bullet: 'serviceCIDRs: unallocated IP dropped from the host', from: 'host', dst: '10.96.200.1', port: 80, proto: 'udp', verdict: 'drop' },
  { bullet: 'serviceCIDRs: outside them untouched', from: 'pod', dst: '10.97.0.1', port: 80, proto: 'tcp', verdict: 'accept' },
  { bullet: 'serviceCIDRs empty: no drop rule', from: 'pod', dst: '10.96.200.1', port: 80, proto: 'tcp', world: { serviceCIDRs: [] }, verdict: 'accept' },
  { bullet: 'no endpoints: ClusterIP rejected', from: 'pod', dst: '10.96.0.90', port: 80, proto: 'tcp', verdict: 'reject' },
  { bullet: 'terminating-only endpoints still serve', from: 'pod', dst: '10.96.0.91', port: 80, proto: 'tcp', to: ['10.244.2.91:8080'] },
  { bullet: 'hairpin: a pod reaching itself is masqueraded, the other endpoint is not', from: 'pod', src: '10.244.1.10', dst: '10.96.0.10', port: 80, proto: 'tcp', to: ['10.244.1.10:8080 masq', '10.244.2.10:8080'] },
  { bullet: 'hairpin via the NodePort', from: 'pod', src: '10.244.1.10', dst: NODE_IP, port: 30080, proto: 'tcp', to: ['10.244.1.10:8080 masq', '10.244.2.10:8080 masq'] },
];

for (const fam of ['ip', 'ip6'] as const) {
  for (const r of ROWS) {
    const what = r.to?.length ? `DNAT {${r.to.join(', ')}}` : `${r.verdict ?? 'accept'}${r.masq ? ' masq' : ''}`;
    test(`${fam} flow: ${r.bullet}: ${r.from} ${A(fam, r.src ?? DEFAULT_SRC[r.from])} → ${A(fam, r.dst)}:${r.port}/${r.proto} ⇒ ${what}`, () => run(fam, r));
  }
}

test('established packets are not re-checked: no firewall drop, no reject (ct state new only)', () => {
  for (const fam of ['ip', 'ip6'] as const) {
    for (const [dst, port] of [['192.0.2.10', 80], ['10.96.0.90', 80], ['10.96.200.1', 80]] as const) {
      const r = trace(world(fam), { family: fam, src: A(fam, OUTSIDE), dst: A(fam, dst), proto: 'tcp', sport: 1, dport: port, path: 'prerouting', iifname: 'eth0' },
        { localAddrs: [A(fam, NODE_IP)], ctState: 'established' });
      assert.equal(r.verdict, 'accept', `${fam} ${dst}`);
      assert.deepEqual(r.dnatTargets, []);
    }
  }
});

test('affinity sets carry the ClientIP timeout (10800 s here) and belong to the affinity Service only', () => {
  for (const fam of ['ip', 'ip6'] as const) {
    const sets = [...world(fam).index.sets.values()].map((s) => s.set).filter((s) => s.name.startsWith('affinity-'));
    assert.ok(sets.length > 0);
    for (const s of sets) {
      assert.equal(s.timeoutSec, 10800);
      assert.match(s.name, /ns\/aff\/tcp\/http/);
    }
  }
});

test('dual stack: one table per family, each with only its family\'s addresses', () => {
  const v4 = world('ip'), v6t = world('ip6');
  assert.equal(v4.family, 'ip');
  assert.equal(v6t.family, 'ip6');
  assert.equal(v4.table, v6t.table);
  for (const [rs, bad] of [[v4, /fd00:/], [v6t, /\b10\.244\./]] as const) {
    for (const set of rs.index.elements.values()) for (const e of set.values()) assert.doesNotMatch(JSON.stringify(e.element.key), bad);
  }
});

test('every row of the table has a case in both families, and the table covers every issue bullet', () => {
  const bullets = ROWS.map((r) => r.bullet).join('\n');
  for (const needle of ['NodePort primary', 'NodePort CIDRs', 'NodePort all', 'NodePort localhost', 'ExternalIP', 'LB ingress', 'LB source ranges', 'self-allow',
    'eTP Local', '#131765', 'iTP Local', 'affinity across service IPs', 'ClusterCIDR', 'NodeCIDR', 'BridgeInterface', 'InterfaceNamePrefix', 'multi-port', 'SCTP',
    'serviceCIDRs', 'hairpin', 'terminating-only']) {
    assert.ok(bullets.includes(needle), needle);
  }
});
