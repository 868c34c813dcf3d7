/**
 * Issue 4 must-show 2 (and issue 6's incremental target, in bytes): one endpoint change in a cluster of 1,000
 * Services sends a batch under 4 KB, and the very same change in a cluster of 10 Services sends a batch of the
 * same size. The kernel is a fake sender that encodes each batch exactly as the socket would (encodeBatch) and
 * records its bytes; no root needed. No timings are asserted.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigSchema } from '../config-schema/config.ts';
import type { BatchOp } from '../netlink/types.ts';
import { encodeBatch } from '../netlink/batch.ts';
import { ClusterState } from './cluster-state.ts';
import { SnapshotBuilder } from './snapshot.ts';
import { Syncer } from './syncer.ts';

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

function service(i: number) {
  return { kind: 'Service', metadata: { name: `svc-${String(i).padStart(5, '0')}`, namespace: 'bench' }, spec: { clusterIP: `10.96.${i >> 8}.${i & 255}`, ports: [{ name: 'http', port: 80, protocol: 'TCP' }] } };
}
function slice(i: number, ips: string[]) {
  return {
    kind: 'EndpointSlice', metadata: { name: `svc-${String(i).padStart(5, '0')}-x`, namespace: 'bench', labels: { 'kubernetes.io/service-name': `svc-${String(i).padStart(5, '0')}` } },
    addressType: 'IPv4', endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true }, nodeName: 'node-2' })),
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  };
}
const epsOf = (i: number) => Array.from({ length: 10 }, (_, k) => `10.${128 + k}.${i >> 8}.${i & 255}`);

/** A cluster of `n` Services × 10 endpoints behind a Syncer whose fake kernel records every batch's encoded bytes. */
async function cluster(n: number) {
  const sent: Array<{ bytes: number; ops: readonly BatchOp[] }> = [];
  const state = new ClusterState('node-1', () => {});
  for (let i = 1; i <= n; i++) { state.upsert('Service', service(i)); state.upsert('EndpointSlice', slice(i, epsOf(i))); }
  const cfg = ConfigSchema.parse({ clusterCIDR: '10.128.0.0/9', ipFamilies: ['IPv4'], source: { type: 'file', path: 'x' } });
  let seq = 1;
  const sender = {
    async sendBatch(ops: readonly BatchOp[]) {
      const enc = encodeBatch(ops, { seqStart: seq });
      seq += enc.messages + 2;
      sent.push({ bytes: enc.bytes, ops });
      return { bytes: enc.bytes, messages: enc.messages, kernelMs: 0 };
    },
  };
  const syncer = new Syncer({ families: ['IPv4'], state, builder: new SnapshotBuilder(cfg, () => {}), sender, now: () => 0, log: quiet });
  await syncer.sync();
  return { state, syncer, sent };
}

/** Service 7's changes: replace one endpoint; add one; remove two. Returns the bytes of each change's batch. */
async function changes(n: number): Promise<number[]> {
  const { state, syncer, sent } = await cluster(n);
  const eps = epsOf(7);
  const steps = [
    [...eps.slice(0, 9), '10.200.0.7'],
    [...eps.slice(0, 9), '10.200.0.7', '10.201.0.7'],
    [...eps.slice(2, 9), '10.200.0.7', '10.201.0.7'],
  ];
  const bytes: number[] = [];
  for (const ips of steps) {
    const before = sent.length;
    state.upsert('EndpointSlice', slice(7, ips));
    const [r] = await syncer.sync();
    assert.equal(r.full, false);
    assert.equal(r.changedFragments, 1);
    assert.equal(sent.length, before + 1, 'one batch per change');
    const last = sent[sent.length - 1];
    assert.ok(last.ops.every((o) => o.kind !== 'table'), 'no table-level operation in a partial sync');
    bytes.push(last.bytes);
  }
  return bytes;
}

test('one endpoint change: < 4 KB sent at 1,000 Services, and exactly the same bytes at 10 Services', async () => {
  const small = await changes(10);
  const big = await changes(1000);
  console.log(`bytes per change (replace, add, remove two): ${big.join(", ")}`);
  assert.deepEqual(big, small, 'the batch does not grow with the cluster');
  for (const b of big) assert.ok(b > 0 && b < 4096, `batch of ${b} bytes`);
  // Replacing one endpoint only rewrites one element of the endpoint map: well under 1 KB.
  assert.ok(big[0] < 1024, `replace: ${big[0]} bytes`);
});

test('the cold sync of 1,000 Services is one batch that carries every endpoint', async () => {
  const { sent } = await cluster(1000);
  assert.equal(sent.length, 1);
  const mapElements = sent[0].ops.filter((o) => o.kind === 'elements' && o.elements.set.startsWith('endpoint-map-'))
    .reduce((n, o) => n + (o.kind === 'elements' ? o.elements.elements.length : 0), 0);
  assert.equal(mapElements, 10_000);
});

test('incremental syncs (snapshot delta hint + in-place compile) track adds, removals and edits exactly', async () => {
  const { FakeKernel } = await import('../rules/testdata/fake-kernel.ts');
  const { compile, toBatchOps } = await import('../rules/index.ts');
  const k = new FakeKernel();
  const state = new ClusterState('node-1', () => {});
  for (let i = 1; i <= 50; i++) { state.upsert('Service', service(i)); state.upsert('EndpointSlice', slice(i, epsOf(i))); }
  const cfg = ConfigSchema.parse({ clusterCIDR: '10.128.0.0/9', ipFamilies: ['IPv4'], source: { type: 'file', path: 'x' } });
  let fail = false;
  let now = 0;
  const sender = { async sendBatch(ops: readonly BatchOp[]) { if (fail) throw new Error('EINVAL from a fake kernel'); k.apply(ops); return { bytes: 0, messages: ops.length, kernelMs: 0 }; } };
  const syncer = new Syncer({ families: ['IPv4'], state, builder: new SnapshotBuilder(cfg, () => {}), sender, now: () => now, log: quiet });
  await syncer.sync();
  const edits: Array<() => void> = [
    () => state.remove('Service', { metadata: { namespace: 'bench', name: 'svc-00003' } }),
    () => { state.upsert('Service', service(77)); state.upsert('EndpointSlice', slice(77, epsOf(77))); },
    () => { state.upsert('EndpointSlice', slice(5, epsOf(5).slice(3))); state.upsert('EndpointSlice', slice(6, [...epsOf(6), '10.250.0.6'])); },
    () => { fail = true; state.upsert('EndpointSlice', slice(8, ['10.250.0.8'])); },
    () => { fail = false; state.upsert('EndpointSlice', slice(9, [])); },
    () => state.upsert('Service', { ...service(10), spec: { ...service(10).spec, ports: [{ name: 'http', port: 81, protocol: 'TCP' }] } }),
    () => state.remove('EndpointSlice', { metadata: { namespace: 'bench', name: 'svc-00011-x' } }),
  ];
  for (const [step, e] of edits.entries()) {
    e();
    now += 2000;
    try { await syncer.sync(); } catch { assert.equal(step, 3, 'only the failing step throws'); continue; }
    const committed = syncer.committed('IPv4')!;
    // The kernel holds exactly the committed ruleset...
    const fresh = new FakeKernel();
    fresh.apply(toBatchOps(committed));
    assert.deepEqual(k.dump(syncer.staleChains('IPv4')), fresh.dump(), `step ${step}: kernel = committed`);
    // ...and the committed ruleset holds what a from-scratch compile of the state gives (same ServicePorts, same inputs).
    const b = new SnapshotBuilder(cfg, () => {});
    b.invalidate({ services: new Set(state.services.keys()), node: true, triggerTimes: [] });
    const scratch = compile(b.build(state, 'IPv4'));
    assert.deepEqual([...committed.fragments.keys()].sort(), [...scratch.fragments.keys()].sort(), `step ${step}: fragment keys`);
    for (const [key, f] of scratch.fragments) {
      const c = committed.fragments.get(key)!;
      assert.equal(c.inputFingerprint ?? c.fingerprint, f.inputFingerprint ?? f.fingerprint, `step ${step}: ${key}`);
    }
  }
});
