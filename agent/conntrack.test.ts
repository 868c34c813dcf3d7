import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigSchema } from '../config-schema/config.ts';
import type { CtDeleteSpec, CtDumpFilter, CtFamily, CtFlow } from '../netlink/ctnetlink.ts';
import { ClusterState } from './cluster-state.ts';
import { SnapshotBuilder } from './snapshot.ts';
import { createProxyMetrics } from './metrics.ts';
import { ConntrackCleaner, udpServicePorts } from './conntrack.ts';

const logs: string[] = [];
const log = { info(_o: object, m: string) { logs.push(m); }, warn(_o: object, m: string) { logs.push(m); }, error(_o: object, m: string) { logs.push(`ERROR ${m}`); }, debug() {} };

function svc(name: string, ip: string, port: number, protocol = 'UDP', extra: Record<string, unknown> = {}) {
  return { kind: 'Service', metadata: { name, namespace: 'default' }, spec: { clusterIP: ip, ports: [{ name: 'p', port, protocol, ...extra }], ...(extra.nodePort ? { type: 'NodePort' } : {}) } };
}
function slice(name: string, eps: Array<{ ip: string; serving?: boolean; ready?: boolean; terminating?: boolean }>, port: number, protocol = 'UDP') {
  return { kind: 'EndpointSlice', metadata: { name: `${name}-x`, namespace: 'default', labels: { 'kubernetes.io/service-name': name } }, addressType: 'IPv4',
    endpoints: eps.map((e) => ({ addresses: [e.ip], conditions: { ready: e.ready ?? true, serving: e.serving ?? true, terminating: e.terminating ?? false }, nodeName: 'node-2' })),
    ports: [{ name: 'p', port, protocol }] };
}

/** A conntrack table in memory: dumps honour the family and the protocol filter; deletes check the id like the kernel. */
class FakeTable {
  flows: CtFlow[] = [];
  dumps: Array<{ family: CtFamily; filter?: CtDumpFilter }> = [];
  deletes: CtDeleteSpec[][] = [];
  failNext = false;
  #id = 100;
  add(proto: number, src: string, sport: number, dst: string, dport: number, replySrc: string, replySport: number): CtFlow {
    const f: CtFlow = { family: 'ipv4', orig: { src, dst, proto, sport, dport }, reply: { src: replySrc, dst: src, proto, sport: replySport, dport: sport }, id: this.#id++, status: 8, timeout: 30, mark: 0, zone: 0, use: 1 };
    this.flows.push(f);
    return f;
  }
  dump(family: CtFamily, filter?: CtDumpFilter): CtFlow[] {
    if (this.failNext) { this.failNext = false; throw new Error('EPERM from a fake kernel'); }
    this.dumps.push({ family, filter });
    return this.flows.filter((f) => f.family === family && (filter?.orig?.proto === undefined || f.orig.proto === filter.orig.proto));
  }
  deleteFlows(specs: readonly CtDeleteSpec[]) {
    this.deletes.push([...specs]);
    let deleted = 0, missing = 0;
    for (const s of specs) {
      const i = this.flows.findIndex((f) => f.id === s.id && f.orig.src === s.orig.src && f.orig.sport === s.orig.sport && f.orig.dst === s.orig.dst && f.orig.dport === s.orig.dport);
      if (i < 0) { missing++; continue; }
      this.flows.splice(i, 1);
      deleted++;
    }
    return { deleted, missing, failed: [] };
  }
  ids(): number[] { return this.flows.map((f) => f.id).sort(); }
}

function setup() {
  const state = new ClusterState('node-1', () => {});
  const cfg = ConfigSchema.parse({ clusterCIDR: '10.244.0.0/16', ipFamilies: ['IPv4'], source: { type: 'file', path: 'x' } });
  const builder = new SnapshotBuilder(cfg, () => {});
  const table = new FakeTable();
  const metrics = createProxyMetrics({ processMetrics: false });
  const sync = () => builder.invalidate(state.checkout()); // what the syncer does before it builds and commits
  const cleaner = () => new ConntrackCleaner({ families: ['IPv4'], state, table, log, metrics });
  state.upsert('Service', svc('stats', '10.96.0.50', 8125));
  state.upsert('EndpointSlice', slice('stats', [{ ip: '10.244.1.10' }], 8125));
  state.upsert('Service', svc('dns', '10.96.0.20', 53, 'UDP', { nodePort: 30053 }));
  state.upsert('EndpointSlice', slice('dns', [{ ip: '10.244.1.10' }, { ip: '10.244.1.11' }], 5353));
  state.upsert('Service', svc('web', '10.96.0.10', 80, 'TCP'));
  state.upsert('EndpointSlice', slice('web', [{ ip: '10.244.1.12' }], 8080, 'TCP'));
  sync();
  // statsd-like flow to pod-a, DNS flows to both pods and via the NodePort, a TCP flow.
  const stats = table.add(17, '192.168.50.2', 40125, '10.96.0.50', 8125, '10.244.1.10', 8125);
  const dnsA = table.add(17, '192.168.50.2', 40053, '10.96.0.20', 53, '10.244.1.10', 5353);
  const dnsB = table.add(17, '192.168.50.2', 40054, '10.96.0.20', 53, '10.244.1.11', 5353);
  const dnsNodePort = table.add(17, '192.168.50.2', 40055, '192.168.50.1', 30053, '10.244.1.11', 5353);
  const tcp = table.add(6, '192.168.50.2', 40080, '10.96.0.10', 80, '10.244.1.12', 8080);
  return { state, table, metrics, sync, cleaner, flows: { stats, dnsA, dnsB, dnsNodePort, tcp } };
}

const deletedTotal = async (m: ReturnType<typeof createProxyMetrics>) =>
  (await m.conntrackReconcilerDeletedEntriesTotal.get()).values.find((v) => v.labels.ip_family === 'IPv4')?.value ?? 0;

test('serving endpoints: ready or serving-terminating, never not-serving; TCP Services are not listed', () => {
  const { state, sync } = setup();
  state.upsert('EndpointSlice', slice('dns', [{ ip: '10.244.1.10' }, { ip: '10.244.1.11', ready: false, serving: true, terminating: true }, { ip: '10.244.1.12', ready: false, serving: false }], 5353));
  sync();
  const sps = udpServicePorts(state, 'IPv4');
  assert.deepEqual([...sps.keys()].sort(), ['default/dns:p/UDP', 'default/stats:p/UDP'], 'TCP Services are not listed');
  assert.deepEqual(sps.get('default/dns:p/UDP'), {
    frontends: [{ ip: '10.96.0.20', port: 53 }], nodePort: 30053,
    servingEndpoints: [{ ip: '10.244.1.10', port: 5353 }, { ip: '10.244.1.11', port: 5353 }],
  });
});

test('first reconcile after start deletes nothing valid; unchanged UDP services skip the dump', async () => {
  const { table, cleaner, metrics } = setup();
  const c = cleaner();
  const before = table.ids();
  const [r] = c.afterSync();
  assert.deepEqual({ udpFlows: r.udpFlows, stale: r.stale, deleted: r.deleted }, { udpFlows: 4, stale: 0, deleted: 0 });
  assert.deepEqual(table.ids(), before);
  assert.deepEqual(table.dumps, [{ family: 'ipv4', filter: { orig: { proto: 17 } } }], 'the kernel filters on UDP: TCP never comes back');
  assert.deepEqual(c.afterSync(), []);
  assert.equal(table.dumps.length, 1, 'nothing UDP changed: no second dump');
  assert.equal(await deletedTotal(metrics), 0);
  assert.equal((await metrics.conntrackReconcilerSyncDuration.get()).values.find((v) => v.metricName?.endsWith('_count'))?.value, 1);
});

test('endpoint replaced: only the flow to the removed endpoint goes, by tuple and id; other Services and TCP stay', async () => {
  const { state, table, sync, cleaner, metrics, flows } = setup();
  const c = cleaner();
  c.afterSync();
  state.upsert('EndpointSlice', slice('stats', [{ ip: '10.244.1.11' }], 8125));
  sync();
  const [r] = c.afterSync();
  assert.equal(r.deleted, 1);
  assert.deepEqual(table.deletes.at(-1), [{ family: 'ipv4', orig: flows.stats.orig, id: flows.stats.id, zone: 0 }]);
  assert.deepEqual(table.ids(), [flows.dnsA.id, flows.dnsB.id, flows.dnsNodePort.id, flows.tcp.id].sort());
  assert.equal(await deletedTotal(metrics), 1);
});

test('DNS endpoint removal cleans the ClusterIP flow and the NodePort flow that went to it', () => {
  const { state, table, sync, cleaner, flows } = setup();
  const c = cleaner();
  c.afterSync();
  state.upsert('EndpointSlice', slice('dns', [{ ip: '10.244.1.10' }], 5353));
  sync();
  assert.equal(c.afterSync()[0].deleted, 2);
  assert.deepEqual(table.ids(), [flows.stats.id, flows.dnsA.id, flows.tcp.id].sort());
});

test('scale to zero, then a Service deletion: their flows go (upstream #139628, PR #141371)', () => {
  const { state, table, sync, cleaner, flows } = setup();
  const c = cleaner();
  c.afterSync();
  state.upsert('EndpointSlice', slice('stats', [], 8125));
  sync();
  assert.equal(c.afterSync()[0].deleted, 1, 'scale to zero');
  assert.ok(!table.ids().includes(flows.stats.id));
  state.remove('Service', svc('dns', '10.96.0.20', 53));
  state.remove('EndpointSlice', slice('dns', [], 5353));
  sync();
  assert.equal(c.afterSync()[0].deleted, 3, 'deleted Service: ClusterIP and NodePort flows');
  assert.deepEqual(table.ids(), [flows.tcp.id]);
  // A flow reusing the deleted ClusterIP afterwards is not chased again (nothing UDP changed).
  table.add(17, '192.168.50.2', 40056, '10.96.0.20', 53, '10.96.0.20', 53);
  assert.deepEqual(c.afterSync(), []);
});

test('a restarted agent (new cleaner, same state) deletes no valid flow (upstream #122740)', () => {
  const { table, cleaner } = setup();
  cleaner().afterSync();
  const before = table.ids();
  const [r] = cleaner().afterSync();
  assert.equal(r.stale, 0);
  assert.deepEqual(table.ids(), before);
  assert.equal(table.deletes.length, 0);
});

test('a failed dump is logged and retried after the next sync', () => {
  const { state, table, sync, cleaner } = setup();
  const c = cleaner();
  table.failNext = true;
  logs.length = 0;
  assert.deepEqual(c.afterSync(), []);
  assert.ok(logs.some((l) => l.startsWith('ERROR conntrack reconcile failed')));
  state.upsert('EndpointSlice', slice('stats', [{ ip: '10.244.1.11' }], 8125));
  sync();
  assert.equal(c.afterSync()[0].deleted, 1);
});

test('a change that arrives while a sync is in flight waits for the next sync, whose rules have it', () => {
  const { state, table, sync, cleaner, flows } = setup();
  const c = cleaner();
  c.afterSync();
  c.beforeSync(); // the runner: right before syncer.sync()
  state.upsert('EndpointSlice', slice('stats', [{ ip: '10.244.1.11' }], 8125)); // arrives during the batch
  assert.deepEqual(c.afterSync(), [], 'the kernel does not have the change yet: nothing to reconcile');
  assert.ok(table.ids().includes(flows.stats.id));
  sync();
  c.beforeSync();
  assert.equal(c.afterSync()[0].deleted, 1, 'the next sync programs it, and its reconcile deletes the flow');
});
