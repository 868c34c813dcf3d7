/**
 * Packet-flow rows that start from Kubernetes objects: Service + EndpointSlice (+ Node) → ClusterState →
 * SnapshotBuilder (CategorizeEndpoints, named ports, exclusions, bad input) → compile → packet tracer.
 * Each row states source, destination, port, protocol and the possible DNAT targets / drop / reject.
 * The ruleset-level rows (every Service type and policy, both families) are in rules/flow-table.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigSchema } from '../config-schema/config.ts';
import { compile, trace } from '../rules/index.ts';
import type { Ruleset, L4Proto } from '../rules/index.ts';
import { ClusterState } from './cluster-state.ts';
import { SnapshotBuilder, type IPFamily } from './snapshot.ts';

const NODE = 'node-1';
const NODE_IP = '192.168.1.11';
const NODE_IP6 = 'fd00:192:168:1::11';

type Obj = Record<string, unknown>;
function svc(name: string, spec: Obj, extra: Obj = {}): Obj {
  return { kind: 'Service', metadata: { name, namespace: 'ns', ...(extra.metadata as Obj ?? {}) }, spec: { type: 'ClusterIP', ...spec }, ...(extra.status ? { status: extra.status } : {}) };
}
interface EpSpec { ip: string; node?: string; ready?: boolean; serving?: boolean; terminating?: boolean; zones?: string[]; nodes?: string[] }
function slice(name: string, service: string, addressType: 'IPv4' | 'IPv6', eps: EpSpec[], ports: Array<{ name?: string | null; port: number; protocol?: string }>, labels: Obj = {}): Obj {
  return {
    kind: 'EndpointSlice', metadata: { name, namespace: 'ns', labels: { 'kubernetes.io/service-name': service, ...labels } }, addressType,
    endpoints: eps.map((e) => ({
      addresses: [e.ip], nodeName: e.node ?? 'node-2',
      conditions: { ready: e.ready ?? true, serving: e.serving ?? true, terminating: e.terminating ?? false },
      ...(e.zones || e.nodes ? { hints: { ...(e.zones ? { forZones: e.zones.map((z) => ({ name: z })) } : {}), ...(e.nodes ? { forNodes: e.nodes.map((n) => ({ name: n })) } : {}) } } : {}),
    })),
    ports,
  };
}

function build(objs: Obj[], cfgIn: Obj = {}) {
  const reports: string[] = [];
  const report = (what: string, reason: string) => reports.push(`${what}: ${reason}`);
  const state = new ClusterState(NODE, report);
  state.replace('Node', [{ kind: 'Node', metadata: { name: NODE, labels: { 'topology.kubernetes.io/zone': 'zone-a' } }, spec: { podCIDRs: ['10.244.1.0/24', 'fd00:10:244:1::/64'] }, status: { addresses: [{ type: 'InternalIP', address: NODE_IP }, { type: 'InternalIP', address: NODE_IP6 }] } }]);
  state.replace('Service', objs.filter((o) => o.kind === 'Service'));
  state.replace('EndpointSlice', objs.filter((o) => o.kind === 'EndpointSlice'));
  const cfg = ConfigSchema.parse({ clusterCIDR: '10.244.0.0/16,fd00:10:244::/56', source: { type: 'file', path: 'x' }, serviceCIDRs: ['10.96.0.0/16', 'fd00:10:96::/112'], ...cfgIn });
  const builder = new SnapshotBuilder(cfg, report);
  const rs = (f: IPFamily): Ruleset => compile(builder.build(state, f));
  return { rs, reports, builder, state };
}

/** Possible DNAT targets of a packet (`ip:port`, ` masq` when masqueraded), or the verdict when none. */
function flow(rs: Ruleset, src: string, dst: string, port: number, proto: L4Proto = 'tcp', from: 'pod' | 'outside' = 'pod'): string[] | string {
  const r = trace(rs, { family: rs.family, src, dst, proto, sport: 40000, dport: port, path: 'prerouting', iifname: from === 'pod' ? 'cni0' : 'eth0' },
    { localAddrs: rs.family === 'ip' ? [NODE_IP] : [NODE_IP6] });
  if (r.dnatTargets.length === 0) return r.verdict;
  return r.dnatTargets.map((t) => `${t.ip.includes(':') ? `[${t.ip}]` : t.ip}:${t.port}${t.masquerade ? ' masq' : ''}`).sort();
}

const POD = '10.244.1.77';
const http = [{ name: 'http', port: 8080, protocol: 'TCP' }];
const port80 = [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 'http' }];

test('CategorizeEndpoints: ready only; not-ready excluded (pod 10.244.1.77 → 10.96.1.1:80/tcp)', () => {
  const { rs } = build([svc('a', { clusterIP: '10.96.1.1', ports: port80 }), slice('a-1', 'a', 'IPv4', [{ ip: '10.244.2.1' }, { ip: '10.244.2.2', ready: false, serving: false }, { ip: '10.244.2.3', ready: false, terminating: true }], http)]);
  assert.deepEqual(flow(rs('IPv4'), POD, '10.96.1.1', 80), ['10.244.2.1:8080']);
});

test('CategorizeEndpoints: no ready endpoint → fallback to serving AND terminating ones (terminating-only)', () => {
  const { rs } = build([svc('a', { clusterIP: '10.96.1.1', ports: port80 }), slice('a-1', 'a', 'IPv4', [
    { ip: '10.244.2.1', ready: false, serving: true, terminating: true }, { ip: '10.244.2.2', ready: false, serving: false, terminating: true }, { ip: '10.244.2.3', ready: false, serving: true, terminating: false },
  ], http)]);
  assert.deepEqual(flow(rs('IPv4'), POD, '10.96.1.1', 80), ['10.244.2.1:8080']);
});

test('CategorizeEndpoints: nothing serving → reject (no endpoints)', () => {
  const { rs } = build([svc('a', { clusterIP: '10.96.1.1', ports: port80 }), slice('a-1', 'a', 'IPv4', [{ ip: '10.244.2.2', ready: false, serving: false, terminating: true }], http)]);
  assert.equal(flow(rs('IPv4'), POD, '10.96.1.1', 80), 'reject');
});

test('trafficDistribution PreferClose / PreferSameZone: zone hints for zone-a keep the zone-a endpoints', () => {
  for (const td of ['PreferClose', 'PreferSameZone']) {
    const { rs } = build([svc('a', { clusterIP: '10.96.1.1', ports: port80, trafficDistribution: td }), slice('a-1', 'a', 'IPv4', [
      { ip: '10.244.2.1', zones: ['zone-a'] }, { ip: '10.244.3.1', zones: ['zone-b'] }, { ip: '10.244.4.1', zones: ['zone-a', 'zone-c'] },
    ], http)]);
    assert.deepEqual(flow(rs('IPv4'), POD, '10.96.1.1', 80), ['10.244.2.1:8080', '10.244.4.1:8080'], td);
  }
});

test('trafficDistribution PreferSameNode: node hints for node-1 win over zone hints', () => {
  const { rs } = build([svc('a', { clusterIP: '10.96.1.1', ports: port80, trafficDistribution: 'PreferSameNode' }), slice('a-1', 'a', 'IPv4', [
    { ip: '10.244.1.5', node: NODE, nodes: [NODE], zones: ['zone-a'] }, { ip: '10.244.2.1', nodes: ['node-2'], zones: ['zone-a'] },
  ], http)]);
  assert.deepEqual(flow(rs('IPv4'), POD, '10.96.1.1', 80), ['10.244.1.5:8080']);
});

test('partial hints are ignored: one ready endpoint without hints → all endpoints', () => {
  const { rs } = build([svc('a', { clusterIP: '10.96.1.1', ports: port80, trafficDistribution: 'PreferClose' }), slice('a-1', 'a', 'IPv4', [
    { ip: '10.244.2.1', zones: ['zone-a'] }, { ip: '10.244.3.1', zones: ['zone-b'] }, { ip: '10.244.4.1' },
  ], http)]);
  assert.deepEqual(flow(rs('IPv4'), POD, '10.96.1.1', 80), ['10.244.2.1:8080', '10.244.3.1:8080', '10.244.4.1:8080']);
});

test('hints that name no zone of this node are ignored → all endpoints', () => {
  const { rs } = build([svc('a', { clusterIP: '10.96.1.1', ports: port80 }), slice('a-1', 'a', 'IPv4', [{ ip: '10.244.2.1', zones: ['zone-b'] }, { ip: '10.244.3.1', zones: ['zone-c'] }], http)]);
  assert.deepEqual(flow(rs('IPv4'), POD, '10.96.1.1', 80), ['10.244.2.1:8080', '10.244.3.1:8080']);
});

test('local endpoints (eTP Local NodePort): ready local ones; else local serving+terminating; outside 198.51.100.7 → node:30080', () => {
  const mk = (eps: EpSpec[]) => build([svc('a', { type: 'NodePort', clusterIP: '10.96.1.1', externalTrafficPolicy: 'Local', ports: [{ ...port80[0], nodePort: 30080 }] }), slice('a-1', 'a', 'IPv4', eps, http)]);
  assert.deepEqual(flow(mk([{ ip: '10.244.1.5', node: NODE }, { ip: '10.244.1.6', node: NODE, ready: false, terminating: true }, { ip: '10.244.2.1' }]).rs('IPv4'), '198.51.100.7', NODE_IP, 30080, 'tcp', 'outside'), ['10.244.1.5:8080']);
  assert.deepEqual(flow(mk([{ ip: '10.244.1.6', node: NODE, ready: false, terminating: true }, { ip: '10.244.2.1' }]).rs('IPv4'), '198.51.100.7', NODE_IP, 30080, 'tcp', 'outside'), ['10.244.1.6:8080'], 'fallback to local terminating');
  assert.equal(flow(mk([{ ip: '10.244.2.1' }]).rs('IPv4'), '198.51.100.7', NODE_IP, 30080, 'tcp', 'outside'), 'drop', 'no local endpoints: drop');
});

test('named targetPort: resolved per slice through the EndpointSlice port name (two slices, different numbers)', () => {
  const { rs } = build([
    svc('a', { clusterIP: '10.96.1.1', ports: [{ name: 'web', port: 80, targetPort: 'http' }, { name: 'admin', port: 9000, targetPort: 'admin' }] }),
    slice('a-1', 'a', 'IPv4', [{ ip: '10.244.2.1' }], [{ name: 'web', port: 8080 }, { name: 'admin', port: 9100 }]),
    slice('a-2', 'a', 'IPv4', [{ ip: '10.244.3.1' }], [{ name: 'web', port: 8081 }, { name: 'admin', port: 9101 }]),
  ]);
  assert.deepEqual(flow(rs('IPv4'), POD, '10.96.1.1', 80), ['10.244.2.1:8080', '10.244.3.1:8081']);
  assert.deepEqual(flow(rs('IPv4'), POD, '10.96.1.1', 9000), ['10.244.2.1:9100', '10.244.3.1:9101']);
});

test('exclusions: service-proxy-name label, headless and ExternalName Services are ignored (no rule; the IP is unallocated → drop)', () => {
  const { rs, reports } = build([
    svc('other-proxy', { clusterIP: '10.96.1.1', ports: port80 }, { metadata: { labels: { 'service.kubernetes.io/service-proxy-name': 'foo' } } }),
    slice('op-1', 'other-proxy', 'IPv4', [{ ip: '10.244.2.1' }], http),
    svc('headless', { clusterIP: 'None', ports: port80 }),
    slice('h-1', 'headless', 'IPv4', [{ ip: '10.244.2.2' }], http, { 'service.kubernetes.io/headless': '' }),
    svc('extname', { type: 'ExternalName', externalName: 'example.com', ports: port80 }),
    svc('ok', { clusterIP: '10.96.1.9', ports: port80 }), slice('ok-1', 'ok', 'IPv4', [{ ip: '10.244.2.9' }], http),
  ]);
  const r = rs('IPv4');
  assert.equal(flow(r, POD, '10.96.1.1', 80), 'drop', 'other proxy: not ours (unallocated in the service CIDR)');
  assert.deepEqual(flow(r, POD, '10.96.1.9', 80), ['10.244.2.9:8080']);
  assert.deepEqual([...r.fragments.keys()].filter((k) => !k.startsWith('#')), ['ns/ok:http/TCP']); // '#…': skeleton and endpoint-map shards
  assert.deepEqual(reports, []);
});

test('bad input: a port without a name in a multi-port Service is skipped and named; the other port still works', () => {
  const { rs, reports } = build([
    svc('a', { clusterIP: '10.96.1.1', ports: [{ name: 'web', port: 80 }, { port: 81 }] }),
    slice('a-1', 'a', 'IPv4', [{ ip: '10.244.2.1' }], [{ name: 'web', port: 8080 }, { name: '', port: 8081 }]),
  ]);
  assert.deepEqual(flow(rs('IPv4'), POD, '10.96.1.1', 80), ['10.244.2.1:8080']);
  assert.equal(flow(rs('IPv4'), POD, '10.96.1.1', 81), 'reject');
  assert.ok(reports.some((r) => r.includes('Service ns/a') && r.includes('spec.ports[1].name')), reports.join('\n'));
});

test('bad input: a bad CIDR in loadBalancerSourceRanges skips that Service (fail closed) and names the field; others still programmed', () => {
  const lb = (name: string, ip: string, vip: string, ranges: string[]) => svc(name, { type: 'LoadBalancer', clusterIP: ip, ports: [{ ...port80[0], nodePort: 0 }], loadBalancerSourceRanges: ranges }, { status: { loadBalancer: { ingress: [{ ip: vip }] } } });
  const { rs, reports } = build([
    lb('bad', '10.96.1.1', '192.0.2.1', ['203.0.113.0/24', '300.1.2.3/8']), slice('bad-1', 'bad', 'IPv4', [{ ip: '10.244.2.1' }], http),
    lb('padded', '10.96.1.2', '192.0.2.2', ['  203.0.113.0/24 ']), slice('padded-1', 'padded', 'IPv4', [{ ip: '10.244.2.2' }], http),
    lb('hostbits', '10.96.1.3', '192.0.2.3', ['203.0.113.7/24']), slice('hostbits-1', 'hostbits', 'IPv4', [{ ip: '10.244.2.3' }], http),
  ]);
  const r = rs('IPv4');
  assert.equal(flow(r, '203.0.113.5', '192.0.2.1', 80, 'tcp', 'outside'), 'accept', 'bad: not programmed at all');
  assert.deepEqual(flow(r, '203.0.113.5', '192.0.2.2', 80, 'tcp', 'outside'), ['10.244.2.2:8080 masq'], 'padded range trimmed (upstream TrimSpace)');
  assert.equal(flow(r, '198.51.100.7', '192.0.2.2', 80, 'tcp', 'outside'), 'drop');
  assert.deepEqual(flow(r, '203.0.113.5', '192.0.2.3', 80, 'tcp', 'outside'), ['10.244.2.3:8080 masq'], 'host bits masked like net.ParseCIDR');
  assert.ok(reports.some((x) => x.includes('Service ns/bad') && x.includes('spec.loadBalancerSourceRanges[1]') && x.includes('300.1.2.3/8')), reports.join('\n'));
});

test('bad input: wrong-family IPs are named and ignored; the Service is still programmed', () => {
  const { rs, reports } = build([
    svc('a', { type: 'LoadBalancer', clusterIP: '10.96.1.1', clusterIPs: ['10.96.1.1'], externalIPs: ['203.0.113.50', '2001:db8::50', 'not-an-ip'], ports: port80 },
      { status: { loadBalancer: { ingress: [{ ip: '192.0.2.50' }, { ip: '2001:db8::51' }, { ip: '192.0.2.99', ipMode: 'Proxy' }] } } }),
    slice('a-1', 'a', 'IPv4', [{ ip: '10.244.2.1' }], http),
  ]);
  const r = rs('IPv4');
  assert.deepEqual(flow(r, '198.51.100.7', '203.0.113.50', 80, 'tcp', 'outside'), ['10.244.2.1:8080 masq']);
  assert.deepEqual(flow(r, '198.51.100.7', '192.0.2.50', 80, 'tcp', 'outside'), ['10.244.2.1:8080 masq']);
  assert.equal(flow(r, '198.51.100.7', '192.0.2.99', 80, 'tcp', 'outside'), 'accept', 'ipMode Proxy: not programmed');
  assert.equal(rs('IPv6').index.chains.size > 0, true);
  assert.ok(reports.some((x) => x.includes('spec.externalIPs[1]') && x.includes('2001:db8::50')), reports.join('\n'));
  assert.ok(reports.some((x) => x.includes('spec.externalIPs[2]') && x.includes('not-an-ip')), reports.join('\n'));
  assert.ok(reports.some((x) => x.includes('status.loadBalancer.ingress[].ip') && x.includes('2001:db8::51')), reports.join('\n'));
});

test('dual stack: a dual-stack Service gets a rule in each family table from the slices of that family', () => {
  const { rs, reports } = build([
    svc('d', { type: 'NodePort', clusterIP: '10.96.1.1', clusterIPs: ['10.96.1.1', 'fd00:10:96::11'], ipFamilies: ['IPv4', 'IPv6'], externalIPs: ['203.0.113.50', '2001:db8::50'], ports: [{ ...port80[0], nodePort: 30080 }] }),
    slice('d-4', 'd', 'IPv4', [{ ip: '10.244.2.1' }], http),
    slice('d-6', 'd', 'IPv6', [{ ip: 'fd00:10:244:2::1' }], http),
  ]);
  assert.deepEqual(reports, []);
  assert.deepEqual(flow(rs('IPv4'), POD, '10.96.1.1', 80), ['10.244.2.1:8080']);
  assert.deepEqual(flow(rs('IPv6'), 'fd00:10:244:1::77', 'fd00:10:96::11', 80), ['[fd00:10:244:2::1]:8080']);
  assert.deepEqual(flow(rs('IPv6'), '2001:db8::9', '2001:db8::50', 80, 'tcp', 'outside'), ['[fd00:10:244:2::1]:8080 masq']);
  assert.deepEqual(flow(rs('IPv6'), '2001:db8::9', NODE_IP6, 30080, 'tcp', 'outside'), ['[fd00:10:244:2::1]:8080 masq']);
  assert.equal(rs('IPv4').family, 'ip');
  assert.equal(rs('IPv6').family, 'ip6');
});

test('ClientIP affinity: timeoutSeconds honoured, default 10800', () => {
  const { builder, state } = build([
    svc('d', { clusterIP: '10.96.1.1', sessionAffinity: 'ClientIP', ports: port80 }), slice('d-1', 'd', 'IPv4', [{ ip: '10.244.2.1' }], http),
    svc('t', { clusterIP: '10.96.1.2', sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 5 } }, ports: port80 }), slice('t-1', 't', 'IPv4', [{ ip: '10.244.2.2' }], http),
  ]);
  const snap = builder.build(state, 'IPv4');
  assert.deepEqual(snap.servicePorts.map((s) => [s.name, s.affinityTimeoutSeconds]), [['d', 10800], ['t', 5]]);
  const sets = [...compile(snap).index.sets.values()].map((s) => s.set).filter((s) => s.name.startsWith('affinity-')).map((s) => s.timeoutSec).sort();
  assert.deepEqual(sets, [10800, 5].sort());
});

test('detectLocalMode from the config: ClusterCIDR, NodeCIDR (node.spec.podCIDRs), BridgeInterface, InterfaceNamePrefix', () => {
  const objs = [svc('a', { clusterIP: '10.96.1.1', ports: port80 }), slice('a-1', 'a', 'IPv4', [{ ip: '10.244.2.1' }], http)];
  const remotePod = '10.244.2.50';
  assert.deepEqual(flow(build(objs, { detectLocalMode: 'ClusterCIDR' }).rs('IPv4'), remotePod, '10.96.1.1', 80, 'tcp', 'outside'), ['10.244.2.1:8080']);
  assert.deepEqual(flow(build(objs, { detectLocalMode: 'NodeCIDR' }).rs('IPv4'), remotePod, '10.96.1.1', 80, 'tcp', 'outside'), ['10.244.2.1:8080 masq']);
  assert.deepEqual(flow(build(objs, { detectLocalMode: 'NodeCIDR' }).rs('IPv4'), POD, '10.96.1.1', 80, 'tcp', 'outside'), ['10.244.2.1:8080']);
  assert.deepEqual(flow(build(objs, { detectLocalMode: 'BridgeInterface', detectLocal: { bridgeInterface: 'cni0' } }).rs('IPv4'), POD, '10.96.1.1', 80, 'tcp', 'pod'), ['10.244.2.1:8080']);
  assert.deepEqual(flow(build(objs, { detectLocalMode: 'BridgeInterface', detectLocal: { bridgeInterface: 'cni0' } }).rs('IPv4'), POD, '10.96.1.1', 80, 'tcp', 'outside'), ['10.244.2.1:8080 masq']);
  const pre = build(objs, { detectLocalMode: 'InterfaceNamePrefix', detectLocal: { interfaceNamePrefix: 'veth' } }).rs('IPv4');
  const viaVeth = trace(pre, { family: 'ip', src: POD, dst: '10.96.1.1', proto: 'tcp', sport: 1, dport: 80, path: 'prerouting', iifname: 'vethabc' }, { localAddrs: [NODE_IP] });
  assert.equal(viaVeth.masquerade, false);
  assert.equal(flow(pre, POD, '10.96.1.1', 80, 'tcp', 'pod')[0], '10.244.2.1:8080 masq', 'cni0 does not match veth*');
});

test('SCTP NodePort from Kubernetes objects', () => {
  const { rs } = build([
    svc('s', { type: 'NodePort', clusterIP: '10.96.1.1', ports: [{ name: 'a', port: 9999, protocol: 'SCTP', nodePort: 30999 }] }),
    slice('s-1', 's', 'IPv4', [{ ip: '10.244.2.1' }], [{ name: 'a', port: 9999, protocol: 'SCTP' }]),
  ]);
  assert.deepEqual(flow(rs('IPv4'), '198.51.100.7', NODE_IP, 30999, 'sctp', 'outside'), ['10.244.2.1:9999 masq']);
});

test('e2e/testdata/every-feature.json (the oracle case) really uses every feature, in both families, without reports', async () => {
  const { readListFile } = await import('./file-source.ts');
  const objs = readListFile(new URL('../e2e/testdata/every-feature.json', import.meta.url).pathname);
  const { rs, reports } = build([...objs.Service, ...objs.EndpointSlice] as Obj[]);
  assert.deepEqual(reports, []);
  for (const fam of ['IPv4', 'IPv6'] as const) {
    const r = rs(fam);
    const chains = [...r.index.chains.keys()];
    const sets = [...r.index.sets.keys()];
    const els = (set: string) => [...(r.index.elements.get(set)?.values() ?? [])].map((x) => JSON.stringify(x.element));
    for (const prefix of ['service-', 'local-', 'external-', 'firewall-', 'endpoint-']) assert.ok(chains.some((c) => c.startsWith(prefix)), `${fam}: a ${prefix} chain`);
    assert.ok(sets.some((s) => s.startsWith('affinity-')), `${fam}: affinity sets`);
    for (const set of ['service-ips', 'service-nodeports', 'no-endpoint-services', 'no-endpoint-nodeports', 'firewall-ips', 'hairpin-connections', 'cluster-ips']) {
      assert.ok(els(set).length > 0, `${fam}: ${set} has elements`);
    }
    for (const proto of ['tcp', 'udp', 'sctp']) assert.ok(els('service-ips').some((e) => e.includes(`"${proto}"`)), `${fam}: ${proto}`);
    assert.ok(els('no-endpoint-services').some((e) => e.includes('"drop"')) && els('no-endpoint-services').some((e) => e.includes('reject-chain')), `${fam}: drop and reject`);
    assert.ok(!chains.some((c) => /other-proxy|headless|extname/.test(c)), `${fam}: exclusions`);
  }
});

test('iTP Local on a LoadBalancer without nodePort or ingress is not externally accessible: local endpoints only (upstream ExternallyAccessible())', () => {
  const { builder, state } = build([
    svc('a', { type: 'LoadBalancer', allocateLoadBalancerNodePorts: false, clusterIP: '10.96.1.1', internalTrafficPolicy: 'Local', ports: port80 }),
    slice('a-1', 'a', 'IPv4', [{ ip: '10.244.1.5', node: NODE }, { ip: '10.244.2.1' }], http),
  ]);
  const sp = builder.build(state, 'IPv4').servicePorts[0];
  assert.deepEqual(sp.clusterEndpoints, []);
  assert.deepEqual(sp.allReachableEndpoints.map((e) => e.ip), ['10.244.1.5']);
  assert.deepEqual(flow(compile(builder.build(state, 'IPv4')), '10.244.2.50', '10.96.1.1', 80, 'tcp', 'outside'), ['10.244.1.5:8080'], 'a pod of another node: not masqueraded (ClusterCIDR)');
});

test('bad CIDRs from the Node (podCIDRs) or the config are normalised or skipped with a report; the sync still compiles', () => {
  const reports: string[] = [];
  const state = new ClusterState(NODE, (w, r) => reports.push(`${w}: ${r}`));
  state.replace('Node', [{ kind: 'Node', metadata: { name: NODE }, spec: { podCIDRs: ['garbage', '10.244.1.9/24'] } }]);
  state.replace('Service', [svc('a', { clusterIP: '10.96.1.1', ports: port80 })]);
  state.replace('EndpointSlice', [slice('a-1', 'a', 'IPv4', [{ ip: '10.244.2.1' }], http)]);
  const cfg = ConfigSchema.parse({ detectLocalMode: 'NodeCIDR', serviceCIDRs: ['10.96.0.1/16'], source: { type: 'file', path: 'x' } });
  const snap = new SnapshotBuilder(cfg, (w, r) => reports.push(`${w}: ${r}`)).build(state, 'IPv4');
  assert.deepEqual(snap.localDetector, { mode: 'cidr', cidrs: ['10.244.1.0/24'] });
  assert.deepEqual(snap.serviceCIDRs, ['10.96.0.0/16']);
  assert.ok(reports.some((r) => r.includes('Node node-1') && r.includes('spec.podCIDRs[0]') && r.includes('garbage')), reports.join('\n'));
  assert.deepEqual(flow(compile(snap), POD, '10.96.1.1', 80), ['10.244.2.1:8080']);
});

test('ipFamilies in the config decides which tables are rendered (ip, ip6, or both)', async () => {
  const { spawnSync } = await import('node:child_process');
  const { mkdtempSync, writeFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const dir = mkdtempSync(join(tmpdir(), 'nftproxy-fam-'));
  const every = new URL('../e2e/testdata/every-feature.json', import.meta.url).pathname;
  const cli = new URL('./cli.ts', import.meta.url).pathname;
  const tables = (ipFamilies: string[]) => {
    writeFileSync(join(dir, 'c.json'), JSON.stringify({ hostnameOverride: 'node-1', ipFamilies, clusterCIDR: '10.244.0.0/16,fd00:10:244::/56', source: { type: 'file', path: every } }));
    const r = spawnSync(process.execPath, [cli, 'render', '--config', join(dir, 'c.json')], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    return [...new Set([...r.stdout.matchAll(/^add table (ip6?) nftproxy/gm)].map((m) => m[1]))];
  };
  assert.deepEqual(tables(['IPv4']), ['ip']);
  assert.deepEqual(tables(['IPv6']), ['ip6']);
  assert.deepEqual(tables(['IPv4', 'IPv6']), ['ip', 'ip6']);
});
