import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigSchema } from '../config-schema/config.ts';
import type { BatchOp } from '../netlink/types.ts';
import { ClusterState } from './cluster-state.ts';
import { SnapshotBuilder } from './snapshot.ts';
import { Syncer, FULL_SYNC_PERIOD_MS } from './syncer.ts';
import { createProxyMetrics } from './metrics.ts';

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

function service(i: number) {
  return { kind: 'Service', metadata: { name: `s${i}`, namespace: 'default' }, spec: { clusterIP: `10.96.${i >> 8}.${i & 255}`, ports: [{ name: 'http', port: 80, protocol: 'TCP' }] } };
}
function slice(i: number, ips: string[]) {
  return { kind: 'EndpointSlice', metadata: { name: `s${i}-x`, namespace: 'default', labels: { 'kubernetes.io/service-name': `s${i}` } }, addressType: 'IPv4',
    endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true }, nodeName: 'node-2' })), ports: [{ name: 'http', port: 8080, protocol: 'TCP' }] };
}

function setup(n: number, fail: () => boolean = () => false) {
  let now = 1_000_000;
  const batches: BatchOp[][] = [];
  const state = new ClusterState('node-1', () => {});
  for (let i = 1; i <= n; i++) { state.upsert('Service', service(i)); state.upsert('EndpointSlice', slice(i, [`10.244.${i >> 8}.${i & 255}`, `10.245.${i >> 8}.${i & 255}`])); }
  const cfg = ConfigSchema.parse({ clusterCIDR: '10.244.0.0/14', ipFamilies: ['IPv4'], source: { type: 'file', path: 'x' } });
  const metrics = createProxyMetrics({ processMetrics: false });
  const sender = { async sendBatch(ops: readonly BatchOp[]) { if (fail()) throw new Error('EINVAL from a fake kernel'); batches.push([...ops]); return { bytes: ops.length * 100, messages: ops.length, kernelMs: 1 }; } };
  const syncer = new Syncer({ families: ['IPv4'], state, builder: new SnapshotBuilder(cfg, () => {}), sender, now: () => now, log: quiet, metrics });
  return { state, syncer, batches, metrics, advance: (ms: number) => { now += ms; } };
}

test('the first sync is full and replaces the table atomically; a no-op sync sends nothing', async () => {
  const { syncer, batches } = setup(5);
  const [r] = await syncer.sync();
  assert.equal(r.full, true);
  assert.deepEqual(batches[0].slice(0, 3).map((o) => `${o.op} ${o.kind}`), ['add table', 'delete table', 'add table']);
  const [r2] = await syncer.sync();
  assert.equal(r2.full, false);
  assert.equal(r2.ops, 0);
  assert.equal(batches.length, 1);
});

test('one endpoint change sends only that ServicePort, the same size at 10 and 1000 Services', async () => {
  const sizes: number[] = [];
  for (const n of [10, 1000]) {
    const { state, syncer, batches } = setup(n);
    await syncer.sync();
    state.upsert('EndpointSlice', slice(7, ['10.244.0.7']));
    const [r] = await syncer.sync();
    assert.equal(r.full, false);
    assert.equal(r.changedFragments, 1);
    const ops = batches[1];
    assert.ok(ops.every((o) => o.kind !== 'table'), 'no table-level operation in a partial sync');
    sizes.push(ops.length);
  }
  assert.equal(sizes[0], sizes[1]);
  assert.ok(sizes[0] <= 4, `small batch: ${sizes[0]} ops`);
});

test('a rejected batch keeps the committed ruleset, counts a failure and makes the next sync full', async () => {
  let failNext = false;
  const { state, syncer, batches, metrics } = setup(3, () => failNext);
  await syncer.sync();
  const committed = syncer.committed('IPv4');
  state.upsert('EndpointSlice', slice(1, ['10.244.9.9']));
  failNext = true;
  await assert.rejects(syncer.sync(), /fake kernel/);
  assert.equal(syncer.committed('IPv4'), committed, 'committed model unchanged');
  assert.match(await metrics.registry.metrics(), /kubeproxy_sync_proxy_rules_nftables_sync_failures_total\{ip_family="IPv4"\} 1/);
  failNext = false;
  const [r] = await syncer.sync();
  assert.equal(r.full, true);
  assert.equal(batches.length, 2);
  const text = JSON.stringify(batches[1], (_k, v) => (v instanceof Uint8Array ? [...v] : typeof v === 'bigint' ? String(v) : v));
  assert.ok(text.includes('[10,244,9,9,'), 'the full sync carries the change that failed before (endpoint-map data: addr . port)');
});

test('a full resync runs when an hour has passed', async () => {
  const { syncer, advance } = setup(2);
  await syncer.sync();
  advance(FULL_SYNC_PERIOD_MS - 1);
  assert.equal((await syncer.sync())[0].full, false);
  advance(1);
  assert.equal((await syncer.sync())[0].full, true);
});
