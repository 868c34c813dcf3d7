import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ConfigSchema } from '../config-schema/config.ts';
import { ClusterState } from './cluster-state.ts';
import { SnapshotBuilder, collectEndpoints } from './snapshot.ts';
import type { EndpointSlice } from '../config-schema/kubernetes.ts';
import { readListFile } from './file-source.ts';

const FIXTURE = new URL('../e2e/testdata/cluster-small.kubectl.json', import.meta.url).pathname;

function load(cfgInput: object = {}) {
  const reports: string[] = [];
  const state = new ClusterState('node-1', (what, reason) => reports.push(`${what}: ${reason}`));
  const objs = readListFile(FIXTURE);
  state.replace('Node', objs.Node);
  state.replace('Service', objs.Service);
  state.replace('EndpointSlice', objs.EndpointSlice);
  const cfg = ConfigSchema.parse({ clusterCIDR: '10.244.0.0/16,fd00:10:244::/56', source: { type: 'file', path: 'x' }, ...cfgInput });
  const builder = new SnapshotBuilder(cfg, (what, reason) => reports.push(`${what}: ${reason}`));
  return { state, builder, reports };
}

const key = (sp: { namespace: string; name: string; portName: string; protocol: string }) => `${sp.namespace}/${sp.name}:${sp.portName}/${sp.protocol}`;

test('the fixture becomes the expected IPv4 ServicePorts; headless, ExternalName and other-proxy Services are ignored', () => {
  const { state, builder, reports } = load();
  const snap = builder.build(state, 'IPv4');
  assert.deepEqual(snap.servicePorts.map(key).sort(), [
    'default/api:grpc/TCP', 'default/api:web/TCP', 'default/dual:http/TCP', 'default/empty:http/TCP',
    'default/kubernetes:https/TCP', 'default/web:http/TCP',
    'kube-system/kube-dns:dns-tcp/TCP', 'kube-system/kube-dns:dns/UDP', 'kube-system/kube-dns:metrics/TCP',
  ]);
  assert.deepEqual(reports, []);
  assert.equal(snap.node.zone, 'zone-a');
  assert.deepEqual(snap.localDetector, { mode: 'cidr', cidrs: ['10.244.0.0/16'] });
});

test('two EndpointSlices merge; a named targetPort resolves through the slice port name (web -> 8081)', () => {
  const { state, builder } = load();
  const sps = builder.build(state, 'IPv4').servicePorts;
  const web = sps.find((s) => key(s) === 'default/api:web/TCP')!;
  assert.deepEqual(web.clusterEndpoints.map((e) => `${e.ip}:${e.port}`), ['10.244.1.20:8081', '10.244.2.22:8081', '10.244.3.21:8081']);
  assert.equal(web.affinityTimeoutSeconds, 600);
  assert.equal(web.nodePort, 32581);
  assert.deepEqual(web.localEndpoints, []);
  assert.deepEqual(web.allReachableEndpoints.map((e) => e.ip), ['10.244.1.20', '10.244.2.22', '10.244.3.21']);
});

test('eTP=Local LoadBalancer: ready local endpoint, terminating-but-serving remote one is not a cluster endpoint', () => {
  const { state, builder } = load();
  const web = builder.build(state, 'IPv4').servicePorts.find((s) => key(s) === 'default/web:http/TCP')!;
  assert.equal(web.externalPolicyLocal, true);
  assert.deepEqual(web.clusterEndpoints.map((e) => e.ip), ['10.244.1.10']);
  assert.deepEqual(web.localEndpoints.map((e) => e.ip), ['10.244.1.10']);
  assert.ok(web.healthCheckNodePort > 0);
  assert.deepEqual(web.loadBalancerSourceRanges.length > 0, true);
});

test('IPv6 snapshot holds only dual-stack Services, with IPv6 endpoints; no-endpoint Service has hasEndpoints false', () => {
  const { state, builder } = load();
  const v6 = builder.build(state, 'IPv6');
  assert.deepEqual(v6.servicePorts.map(key), ['default/dual:http/TCP']);
  assert.deepEqual(v6.servicePorts[0].localEndpoints.map((e) => e.ip), ['fd00:10:244:1::30']);
  const empty = builder.build(state, 'IPv4').servicePorts.find((s) => s.name === 'empty')!;
  assert.equal(empty.hasEndpoints, false);
});

test('no-op updates queue nothing; a real change names the Service; unchanged Services reuse their ServicePort objects', () => {
  const { state, builder } = load();
  builder.invalidate(state.checkout());
  const first = builder.build(state, 'IPv4');
  const objs = JSON.parse(readFileSync(FIXTURE, 'utf8')).items;
  state.replace('Service', objs.filter((o: any) => o.kind === 'Service'));
  assert.equal(state.hasPending, false, 'same objects: nothing pending');
  state.replace('EndpointSlice', objs.filter((o: any) => o.kind === 'EndpointSlice'));
  assert.equal(state.hasPending, false, 'same slices: nothing pending');
  const slice = objs.find((o: any) => o.metadata.name === 'kube-dns-7x2kq');
  slice.endpoints = slice.endpoints.slice(0, 1);
  state.upsert('EndpointSlice', slice);
  const changes = state.checkout();
  assert.deepEqual([...changes.services], ['kube-system/kube-dns']);
  state.upsert('EndpointSlice', structuredClone(slice));
  assert.equal(state.hasPending, false, 'the same change again: nothing pending');
  builder.invalidate(changes);
  const second = builder.build(state, 'IPv4');
  const api1 = first.servicePorts.find((s) => s.name === 'api')!;
  const api2 = second.servicePorts.find((s) => s.name === 'api')!;
  assert.equal(api1, api2, 'same object: the compiler can reuse the fragment');
  assert.deepEqual(second.servicePorts.find((s) => key(s) === 'kube-system/kube-dns:dns/UDP')!.clusterEndpoints.map((e) => e.ip), ['10.244.1.5']);
});

test('an invalid object is skipped with its name and field; the rest is still there', () => {
  const { state, builder, reports } = load();
  state.upsert('Service', { kind: 'Service', metadata: { name: 'bad', namespace: 'default' }, spec: { clusterIP: '10.96.1.1', ports: [{ port: 70000 }] } });
  assert.match(reports[0], /Service default\/bad: spec\.ports\[0\]\.port: .*70000/);
  assert.equal(builder.build(state, 'IPv4').servicePorts.some((s) => s.name === 'bad'), false);
  assert.equal(builder.build(state, 'IPv4').servicePorts.length, 9);
});

test('incremental builds equal a fresh build after every step: create, delete, a Service deleted before its EndpointSlice, re-create', () => {
  const { state, builder } = load();
  const fresh = (family: 'IPv4' | 'IPv6') => {
    const f = load();
    f.state.replace('Service', [...state.services.values()]);
    f.state.replace('EndpointSlice', [...state.slices.values()]);
    return f.builder.build(f.state, family).servicePorts.map(key).sort();
  };
  for (const f of ['IPv4', 'IPv6'] as const) builder.build(state, f);
  const objs = readListFile(FIXTURE) as unknown as { Service: Array<{ metadata: { name: string; namespace: string; uid?: string }; spec: Record<string, unknown> }>; EndpointSlice: Array<{ metadata: { name: string; labels: Record<string, string> } }> };
  const svc = objs.Service.find((s) => s.metadata.name === 'web')!;
  const slice = objs.EndpointSlice.find((s) => s.metadata.labels['kubernetes.io/service-name'] === 'web')!;
  const copy = structuredClone(svc);
  copy.metadata.name = 'web-copy';
  copy.spec = { ...copy.spec, clusterIP: '10.96.200.1', clusterIPs: ['10.96.200.1'] };
  const steps: Array<[string, () => void]> = [
    ['create a Service', () => state.upsert('Service', copy)],
    ['delete it', () => state.remove('Service', copy)],
    ['delete web', () => state.remove('Service', svc)],
    ['then delete web\'s EndpointSlice', () => state.remove('EndpointSlice', slice)],
    ['re-create web', () => state.upsert('Service', svc)],
    ['and its EndpointSlice', () => state.upsert('EndpointSlice', slice)],
  ];
  for (const [what, change] of steps) {
    change();
    builder.invalidate(state.checkout());
    for (const f of ['IPv4', 'IPv6'] as const) {
      assert.deepEqual(builder.build(state, f).servicePorts.map(key).sort(), fresh(f), `${what} (${f})`);
    }
  }
});

test('collectEndpoints: sorted by ip:port, duplicates merged (a later local copy wins over a non-local one, else the first stays)', () => {
  const slice = (name: string, eps: Array<[string, string | null, boolean]>) => ({
    metadata: { name }, addressType: 'IPv4', ports: [{ name: 'p', port: 80, protocol: 'TCP' }],
    endpoints: eps.map(([ip, nodeName, ready]) => ({ addresses: [ip], nodeName, conditions: { ready } })),
  }) as unknown as EndpointSlice;
  const got = collectEndpoints([
    slice('a', [['10.0.0.9', 'other', true], ['10.0.0.1', 'other', false], ['10.0.0.5', 'me', true]]),
    slice('b', [['10.0.0.1', 'me', true], ['10.0.0.5', 'other', false], ['10.0.0.10', null, true], ['10.0.0.1', 'me', false]]),
  ], 'p', 'TCP', 'me', 'ip', () => {});
  assert.deepEqual(got.map((e) => [e.ip, e.isLocal, e.ready]), [
    ['10.0.0.10', false, true], ['10.0.0.1', true, true], ['10.0.0.5', true, true], ['10.0.0.9', false, true], // string order of ip:port
  ]);
});
