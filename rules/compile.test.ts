import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compile } from './compile.ts';
import { SKELETON_KEY } from './model.ts';
import type { Ruleset } from './model.ts';
import { ruleText, elementText } from './render.ts';
import { ep, simpleSP, smallCluster, snapshot } from './testdata/fixtures.ts';
import type { ServicePortInput, SnapshotInput } from '../config-schema/snapshot.ts';

const snap = (servicePorts: ServicePortInput[], over: Partial<SnapshotInput> = {}) =>
  snapshot({ family: 'ipv4', localDetector: { mode: 'cidr', cidrs: ['10.244.0.0/16'] }, node: { name: 'n', ips: ['192.168.1.11'] }, servicePorts, ...over });

/** A fragment as text: chain name -> rule texts, and element texts per set. */
function fragText(rs: Ruleset, key: string) {
  const f = rs.fragments.get(key);
  assert.ok(f, `fragment ${key}`);
  return {
    chains: Object.fromEntries(f.chains.map((c) => [c.name, c.rules.map((r) => ruleText(rs.family, r))])),
    elements: f.elements.map((e) => `${e.set}: ${elementText(e)}`),
    sets: f.sets.map((s) => s.name),
  };
}

test('ClusterIP with endpoints: one service chain (one endpoint-map rule), cluster-ips, service-ips, hairpin for local endpoints, endpoint-map elements', () => {
  const rs = compile(snap([simpleSP({
    namespace: 'ns1', name: 'svc1', portName: 'p80', protocol: 'TCP', clusterIP: '172.30.0.41', port: 80,
    endpoints: [ep('10.180.0.9', 80), ep('10.180.0.10', 8080, true), ep('10.180.0.2', 80)],
  })]));
  assert.deepEqual(fragText(rs, 'ns1/svc1:p80/TCP'), {
    chains: {
      'service-ULMVA6XW-ns1/svc1/tcp/p80': ['meta l4proto tcp dnat ip to numgen random mod 3 map @endpoint-map-0'],
    },
    elements: [
      'cluster-ips: 172.30.0.41',
      'service-ips: 172.30.0.41 . tcp . 80 : goto service-ULMVA6XW-ns1/svc1/tcp/p80',
      'hairpin-connections: 10.180.0.10 . 10.180.0.10 . tcp . 8080',
      'endpoint-map-0: 0 comment "ns1/svc1:p80" : 10.180.0.10 . 8080',
      'endpoint-map-0: 1 comment "ns1/svc1:p80" : 10.180.0.2 . 80',
      'endpoint-map-0: 2 comment "ns1/svc1:p80" : 10.180.0.9 . 80',
    ],
    sets: [],
  });
});

test('ClusterIP without endpoints: reject via no-endpoint-services with the ns/svc:port comment, no chain', () => {
  const rs = compile(snap([
    simpleSP({ namespace: 'ns6', name: 'svc6', portName: 'p80', protocol: 'UDP', clusterIP: '172.30.0.46', port: 80, endpoints: [] }),
    simpleSP({ namespace: 'ns7', name: 'svc7', portName: '', protocol: 'TCP', clusterIP: '172.30.0.47', port: 80, endpoints: [] }),
  ]));
  assert.deepEqual(fragText(rs, 'ns6/svc6:p80/UDP'), {
    chains: {},
    elements: ['cluster-ips: 172.30.0.46', 'no-endpoint-services: 172.30.0.46 . udp . 80 comment "ns6/svc6:p80" : goto reject-chain'],
    sets: [],
  });
  assert.deepEqual(fragText(rs, 'ns7/svc7:/TCP').elements[1], 'no-endpoint-services: 172.30.0.47 . tcp . 80 comment "ns7/svc7" : goto reject-chain');
});

test('single endpoint: the same one-rule shape (mod 1), the endpoint in the map', () => {
  const rs = compile(snap([simpleSP({ namespace: 'a', name: 'b', portName: 'p', protocol: 'SCTP', clusterIP: '10.96.0.5', port: 9, endpoints: [ep('10.244.9.9', 99)] })]));
  assert.deepEqual(Object.values(fragText(rs, 'a/b:p/SCTP').chains), [['meta l4proto sctp dnat ip to numgen random mod 1 map @endpoint-map-0']]);
  assert.ok(fragText(rs, 'a/b:p/SCTP').elements.includes('endpoint-map-0: 0 comment "a/b:p" : 10.244.9.9 . 99'));
});

test('fragments: skeleton first, then ServicePorts sorted by key; fingerprints differ per content', () => {
  const rs = compile(smallCluster());
  const keys = [...rs.fragments.keys()];
  assert.equal(keys[0], SKELETON_KEY);
  assert.deepEqual(keys.slice(1), [...keys.slice(1)].sort());
  const fps = [...rs.fragments.values()].map((f) => f.fingerprint);
  assert.equal(new Set(fps).size, fps.length);
});

test('skeleton: masquerade rule by mode, mark bit, service CIDR drops, nodeport-ips by nodePortIPs', () => {
  const services = (over: Partial<SnapshotInput>) => fragText(compile(snap([], over)), SKELETON_KEY).chains.services;
  assert.equal(services({ masqueradeBit: 3 })[0], 'ip daddr @cluster-ips ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x00000008 comment "masquerade clusterIP traffic from outside cluster"');
  assert.equal(services({ masqueradeAll: true })[0], 'ip daddr @cluster-ips meta mark set meta mark | 0x00004000 comment "masquerade all clusterIP traffic"');
  assert.deepEqual(services({ localDetector: { mode: 'none' } }), [
    'ip daddr . meta l4proto . th dport vmap @service-ips',
    'fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports',
  ]);
  const withIPs = fragText(compile(snap([], { nodePortIPs: ['192.168.1.11', '127.0.0.1', '192.168.1.11'], serviceCIDRs: ['10.96.0.0/12', '10.100.0.0/16'] })), SKELETON_KEY);
  assert.equal(withIPs.chains.services[2], 'ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports');
  assert.deepEqual(withIPs.chains['nodeport-endpoints-check'], ['ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports']);
  assert.deepEqual(withIPs.elements, ['nodeport-ips: 192.168.1.11']);
  assert.ok(withIPs.sets.includes('nodeport-ips'));
  assert.deepEqual(withIPs.chains['cluster-ips-check'], [
    'ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"',
    'ip daddr 10.96.0.0/12 drop comment "Drop traffic to unallocated ClusterIPs"',
    'ip daddr 10.100.0.0/16 drop comment "Drop traffic to unallocated ClusterIPs"',
  ]);
  const plain = fragText(compile(snap([])), SKELETON_KEY);
  assert.ok(!plain.sets.includes('nodeport-ips'));
  assert.deepEqual(plain.chains['cluster-ips-check'], ['ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"']);
  assert.deepEqual(plain.chains['filter-input'], ['ct state new jump nodeport-endpoints-check', 'ct state new jump service-endpoints-check']);
  assert.deepEqual(plain.chains.masquerading, [
    'meta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random',
    'ct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random',
  ]);
});

test('IPv6 skeleton and ClusterIP', () => {
  const rs = compile(snapshot({
    family: 'ipv6', node: { name: 'n' }, localDetector: { mode: 'cidr', cidrs: ['fd00:10:244::/48'] },
    servicePorts: [simpleSP({ namespace: 'a', name: 'b', portName: 'p', protocol: 'TCP', clusterIP: 'FD00:10:96::0001', port: 80, endpoints: [ep('fd00:10:244:1::1', 8080)] })],
  }));
  assert.equal(rs.family, 'ip6');
  const sk = fragText(rs, SKELETON_KEY);
  assert.equal(sk.chains.services[2], 'fib daddr type local ip6 daddr != ::1 meta l4proto . th dport vmap @service-nodeports');
  assert.deepEqual(fragText(rs, 'a/b:p/TCP').elements, ['cluster-ips: fd00:10:96::1', 'service-ips: fd00:10:96::1 . tcp . 80 : goto service-Q2H2RTD4-a/b/tcp/p', 'endpoint-map-0: 0 comment "a/b:p" : fd00:10:244:1::1 . 8080']);
  assert.deepEqual(Object.values(fragText(rs, 'a/b:p/TCP').chains), [['meta l4proto tcp dnat ip6 to numgen random mod 1 map @endpoint-map-0']]);
});

test('eTP Local without local endpoints: service-ips to the external chain AND no-endpoint drop for the same key', () => {
  const rs = compile(snap([{
    namespace: 'a', name: 'lb', portName: 'http', protocol: 'TCP', clusterIP: '10.96.0.7', port: 80, nodePort: 30007,
    loadBalancerIPs: ['192.0.2.7'], externalPolicyLocal: true,
    clusterEndpoints: [ep('10.244.2.1', 80)], localEndpoints: [], allReachableEndpoints: [ep('10.244.2.1', 80)], hasEndpoints: true,
  }]));
  const f = fragText(rs, 'a/lb:http/TCP');
  const ext = Object.entries(f.chains).find(([n]) => n.startsWith('external-'))!;
  assert.deepEqual(ext[1], [
    'ip saddr 10.244.0.0/16 goto service-COW6M7C3-a/lb/tcp/http comment "short-circuit pod traffic"',
    'fib saddr type local meta mark set meta mark | 0x00004000 comment "masquerade local traffic"',
    'fib saddr type local goto service-COW6M7C3-a/lb/tcp/http comment "short-circuit local traffic"',
  ]);
  assert.ok(f.elements.includes('service-ips: 192.0.2.7 . tcp . 80 : goto external-COW6M7C3-a/lb/tcp/http'));
  assert.ok(f.elements.includes('no-endpoint-services: 192.0.2.7 . tcp . 80 comment "a/lb:http" : drop'));
  assert.ok(f.elements.includes('no-endpoint-nodeports: tcp . 30007 comment "a/lb:http" : drop'));
  assert.ok(f.elements.includes('service-ips: 10.96.0.7 . tcp . 80 : goto service-COW6M7C3-a/lb/tcp/http'));
});

test('firewall chain: source ranges in one rule, LB IPs allowed when a range holds the node IP', () => {
  const mk = (ranges: string[]) => compile(snap([simpleSP({
    namespace: 'a', name: 'fw', portName: 'p', protocol: 'TCP', clusterIP: '10.96.0.8', port: 80, nodePort: 30008,
    loadBalancerIPs: ['192.0.2.8'], loadBalancerSourceRanges: ranges, endpoints: [ep('10.244.2.1', 80)],
  })]));
  const fw = (rs: Ruleset) => Object.entries(fragText(rs, 'a/fw:p/TCP').chains).find(([n]) => n.startsWith('firewall-'))![1];
  assert.deepEqual(fw(mk(['203.0.113.0/24'])), ['ip saddr != 203.0.113.0/24 drop']);
  assert.deepEqual(fw(mk(['203.0.113.0/24', '192.168.0.0/16'])), ['ip saddr != 203.0.113.0/24 ip saddr != 192.168.0.0/16 ip saddr != 192.0.2.8 drop']);
});

test('invalid snapshots: errors name the field', () => {
  const sp = (over: Record<string, unknown>) => simpleSP({ namespace: 'a', name: 'b', portName: 'p', protocol: 'TCP', clusterIP: '10.96.0.1', port: 80, endpoints: [ep('10.0.0.1', 80)], ...over } as never);
  assert.throws(() => compile(snap([sp({ clusterIP: 'None' })])), /servicePorts\[0\]\.clusterIP: "None"/);
  assert.throws(() => compile(snap([sp({}), sp({})])), /servicePorts\[1\]: duplicate ServicePort a\/b:p\/TCP/);
  assert.throws(() => compile(snap([sp({ externalIPs: ['fd00::1'] })])), /servicePorts\[0\]\.externalIPs\[0\]/);
  assert.throws(() => compile(snap([sp({ endpoints: [ep('10.0.0.300', 80)] })])), /servicePorts\[0\]\.clusterEndpoints\[0\]\.ip/);
  assert.throws(() => compile(snap([], { serviceCIDRs: ['10.96.0.1/12'] })), /serviceCIDRs\[0\]/);
  assert.throws(() => compile(snap([], { localDetector: { mode: 'cidr', cidrs: ['fd00::/8'] } })), /localDetector\.cidrs\[0\]/);
});
