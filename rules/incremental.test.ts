import { test } from 'node:test';
import assert from 'node:assert/strict';
import { allocatorOf, compile } from './compile.ts';
import { commitDelta, rollbackDelta } from './incremental.ts';
import { plan, toBatchOps } from './plan.ts';
import type { Ruleset } from './model.ts';
import { FakeKernel } from './testdata/fake-kernel.ts';
import { ep, syntheticCluster } from './testdata/fixtures.ts';
import type { ServicePortInput } from '../config-schema/snapshot.ts';

function dumpOf(rs: Ruleset): unknown {
  const k = new FakeKernel();
  k.apply(toBatchOps(rs));
  return k.dump();
}

/** A deterministic sequence of cluster edits: endpoint swaps, additions, removals, Service removals and additions. */
function edit(step: number): (sps: ServicePortInput[]) => void {
  return (sps) => {
    const i = (step * 7) % 40;
    const sp = sps[i];
    switch (step % 5) {
      case 0: sps[i] = { ...sp, clusterEndpoints: [...sp.clusterEndpoints!, ep(`10.150.${step}.1`, 8080)], allReachableEndpoints: [...sp.allReachableEndpoints!, ep(`10.150.${step}.1`, 8080)] }; break;
      case 1: sps[i] = { ...sp, clusterEndpoints: sp.clusterEndpoints!.slice(1), allReachableEndpoints: sp.allReachableEndpoints!.slice(1) }; break;
      case 2: sps.splice(i, 1); break;
      case 3: sps[i] = { ...sp, clusterEndpoints: [], allReachableEndpoints: [], hasEndpoints: false }; break;
      case 4: sps[i] = { ...sp, clusterEndpoints: Array.from({ length: 9 }, (_, k) => ep(`10.160.${step}.${k + 1}`, 9090)), allReachableEndpoints: [] }; break;
    }
  };
}

test('in-place compiles + O(change) plans keep the kernel equal to a fresh full load, step after step', () => {
  let committed = compile(syntheticCluster(60), { inPlace: true });
  const k = new FakeKernel();
  k.apply(plan(null, committed, { full: true, now: 0, stale: new Map() }).ops);
  const mutations: Array<(sps: ServicePortInput[]) => void> = [];
  let stale = new Map<string, number>();
  for (let step = 0; step < 15; step++) {
    mutations.push(edit(step));
    const snap = syntheticCluster(60, (sps) => { for (const m of mutations) m(sps); });
    const desired = compile(snap, { previous: committed, inPlace: true });
    assert.ok(desired.delta, 'an in-place compile carries a delta');
    assert.ok(desired.delta.changed.length <= 2, `step ${step}: ${desired.delta.changed.length} fragments changed`);
    const p = plan(committed, desired, { full: false, now: step * 2000, stale });
    k.apply(p.ops);
    commitDelta(desired);
    committed = desired;
    stale = p.stale;
    // The same content as compiling this snapshot from scratch would give, modulo endpoint-map key placement:
    // compare with a fresh load of the committed ruleset, and check the allocation has no overlaps.
    assert.deepEqual(k.dump(stale.keys()), dumpOf(committed), `step ${step}`);
    const blocks = [...committed.endpointAlloc!.entries()].map(([, b]) => b).sort((a, b) => a.offset - b.offset);
    for (let i = 1; i < blocks.length; i++) assert.ok(blocks[i - 1].offset + blocks[i - 1].cap <= blocks[i].offset, 'blocks do not overlap');
  }
});

test('a rolled-back in-place compile leaves the previous ruleset exactly as it was (index, fragments, allocation)', () => {
  const a = compile(syntheticCluster(30), { inPlace: true });
  const before = dumpOf(a);
  const fragsBefore = new Map(a.fragments);
  const allocBefore = JSON.stringify([...a.endpointAlloc!.entries()].sort());
  const b = compile(syntheticCluster(30, (sps) => { edit(0)(sps); edit(2)(sps); edit(4)(sps); }), { previous: a, inPlace: true });
  assert.notDeepEqual(dumpOf(b), before);
  rollbackDelta(b);
  assert.deepEqual(dumpOf(a), before);
  assert.deepEqual([...a.fragments].sort(), [...fragsBefore].sort());
  assert.equal(JSON.stringify([...a.endpointAlloc!.entries()].sort()), allocBefore);
  assert.equal(JSON.stringify([...allocatorOf(a).entries()].sort()), allocBefore);
  // And it can be patched again.
  const c = compile(syntheticCluster(30, edit(1)), { previous: a, inPlace: true });
  assert.equal(c.delta?.changed.length, 1);
});

test('an invalid ServicePort in an in-place compile throws and leaves the previous ruleset intact', () => {
  const a = compile(syntheticCluster(10), { inPlace: true });
  const before = dumpOf(a);
  assert.throws(() => compile(syntheticCluster(10, (sps) => { sps[3] = { ...sps[3], clusterIP: '10.96.0.999' }; }), { previous: a, inPlace: true }), /servicePorts\[3\]\.clusterIP/);
  assert.deepEqual(dumpOf(a), before);
  assert.equal(a.delta, undefined);
});

test('in-place compiles over every feature of the fixtures (affinity, eTP Local, LB, NodePort, IPv6) match a fresh load', async () => {
  const { smallCluster, smallClusterV6 } = await import('./testdata/fixtures.ts');
  for (const make of [smallCluster, smallClusterV6]) {
    const base = make();
    let committed = compile(base, { inPlace: true });
    const k = new FakeKernel();
    k.apply(plan(null, committed, { full: true, now: 0, stale: new Map() }).ops);
    let stale = new Map<string, number>();
    const variants = [
      // every ServicePort loses its first endpoint, then gets them back, then half the Services go away
      base.servicePorts.map((sp) => ({ ...sp, clusterEndpoints: sp.clusterEndpoints.slice(1), localEndpoints: sp.localEndpoints.slice(1), allReachableEndpoints: sp.allReachableEndpoints.slice(1) })),
      base.servicePorts,
      base.servicePorts.filter((_, i) => i % 2 === 0),
      base.servicePorts,
    ];
    for (const [step, sps] of variants.entries()) {
      const desired = compile(make({ servicePorts: sps }), { previous: committed, inPlace: true });
      const p = plan(committed, desired, { full: false, now: (step + 1) * 5000, stale });
      k.apply(p.ops);
      commitDelta(desired);
      committed = desired;
      stale = p.stale;
      assert.deepEqual(k.dump(stale.keys()), dumpOf(committed), `${make.name} step ${step}`);
    }
  }
});
