import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compile } from './compile.ts';
import { plan, toBatchOps } from './plan.ts';
import type { SyncPlan } from './plan.ts';
import type { Ruleset } from './model.ts';
import { servicePortNames } from './names.ts';
import { renderSteps } from './render.ts';
import { FakeKernel } from './testdata/fake-kernel.ts';
import { clusterIPServices, ep, simpleSP, smallCluster, snapshot, syntheticCluster } from './testdata/fixtures.ts';
import type { BatchOp } from '../netlink/types.ts';
import type { ServicePortInput, SnapshotInput } from '../config-schema/snapshot.ts';

const NO_STALE = new Map<string, number>();

function opSummary(ops: readonly BatchOp[]): string[] {
  return ops.map((o) => {
    switch (o.kind) {
      case 'table': return `${o.op} table`;
      case 'chain': return `${o.op} chain ${o.chain.name}`;
      case 'rule': return `${o.op} rule ${o.rule.chain}`;
      case 'set': return `${o.op} set ${o.set.name}`;
      case 'elements': return `${o.op} elements ${o.elements.set} x${o.elements.elements.length}`;
    }
  });
}

/** Applies a fresh full plan of `rs` to an empty fake kernel and dumps it. */
function fresh(rs: Ruleset): unknown {
  const k = new FakeKernel();
  k.apply(toBatchOps(rs));
  return k.dump();
}

test('full plan: table dance, then every chain, set, rule and element; set ids unique and referenced', () => {
  const rs = compile(smallCluster());
  const p = plan(null, rs, { full: false, now: 0, stale: new Map([['old', 0]]) });
  assert.equal(p.full, true);
  assert.equal(p.stale.size, 0, 'the table is recreated, stale chains go with it');
  assert.deepEqual(opSummary(p.ops.slice(0, 3)), ['add table', 'delete table', 'add table']);
  let chains = 0, rules = 0, sets = 0;
  for (const f of rs.fragments.values()) { chains += f.chains.length; sets += f.sets.length; for (const c of f.chains) rules += c.rules.length; }
  const count = (pre: string) => opSummary(p.ops).filter((s) => s.startsWith(pre)).length;
  assert.equal(count('add chain'), chains);
  assert.equal(count('add set'), sets);
  assert.equal(count('add rule'), rules);
  const ids = p.ops.flatMap((o) => (o.kind === 'set' ? [o.set.id] : []));
  assert.equal(new Set(ids).size, ids.length);
  assert.ok(ids.every((id) => typeof id === 'number' && id > 0));
  const idOf = new Map(p.ops.flatMap((o) => (o.kind === 'set' ? [[o.set.name, o.set.id] as const] : [])));
  for (const o of p.ops) {
    if (o.kind === 'rule') for (const e of o.rule.exprs) if (e.type === 'lookup' || e.type === 'dynset') assert.equal(e.setId, idOf.get(e.set), `setId of ${e.set}`);
    if (o.kind === 'elements') assert.equal(o.elements.setId, idOf.get(o.elements.set));
  }
  assert.deepEqual(p.changedFragments, [...rs.fragments.keys()]);
  // It applies cleanly and a full plan over a non-empty kernel gives the same table.
  const k = new FakeKernel();
  k.apply(p.ops);
  k.apply(plan(rs, rs, { full: true, now: 0, stale: NO_STALE }).ops);
  assert.deepEqual(k.dump(), fresh(rs));
});

test('no-op sync: zero ops', () => {
  const a = compile(smallCluster());
  const b = compile(smallCluster());
  const p = plan(a, b, { full: false, now: 0, stale: NO_STALE });
  assert.deepEqual(p.ops, []);
  assert.deepEqual(p.changedFragments, []);
  assert.equal(p.full, false);
});

test('compile reuses unchanged fragments of a previous ruleset', () => {
  const a = compile(smallCluster());
  const b = compile(smallCluster(), { previous: a });
  for (const [k, f] of b.fragments) assert.equal(f, a.fragments.get(k));
});

function endpointChange(n: number): SyncPlan {
  const before = compile(syntheticCluster(n));
  const after = compile(syntheticCluster(n, (sps) => {
    // svc3 has 2 endpoints (3 % 3 == 0 -> 2): replace the non-local one.
    sps[3] = { ...sps[3], clusterEndpoints: [sps[3].clusterEndpoints![0], ep('10.200.0.3', 8080)], allReachableEndpoints: [sps[3].clusterEndpoints![0], ep('10.200.0.3', 8080)] };
  }), { previous: before });
  return plan(before, after, { full: false, now: 0, stale: NO_STALE });
}

test('one endpoint change: a small op list touching only that ServicePort, same size at 10 and 1000 services', () => {
  const small = endpointChange(10);
  const big = endpointChange(1000);
  const chain = servicePortNames({ namespace: 'ns3', name: 'svc3', protocol: 'tcp', portName: 'http' }).clusterChain;
  // The endpoint map: the replaced endpoint's slot changes value; the chain (same N, same block) is untouched.
  assert.ok(chain);
  assert.deepEqual(opSummary(small.ops), ['delete elements endpoint-map-0 x1', 'add elements endpoint-map-0 x1']);
  assert.deepEqual(opSummary(big.ops), opSummary(small.ops));
  assert.deepEqual(big.changedFragments, ['ns3/svc3:http/TCP']);
  assert.match(renderSteps('ip', 'nftproxy', 'c', big.steps), /add element ip nftproxy endpoint-map-0 \{ \d+ comment "ns3\/svc3:http" : 10\.200\.0\.3 \. 8080 \}/);
});

test('removed service: elements deleted and chain flushed now, chain deleted by a plan >= 1 s later', () => {
  const all = clusterIPServices();
  const a = compile(snapshot({ family: 'ipv4', node: { name: 'n' }, servicePorts: all }));
  const b = compile(snapshot({ family: 'ipv4', node: { name: 'n' }, servicePorts: all.filter((sp) => sp.name !== 'three') }), { previous: a });
  const chain = servicePortNames({ namespace: 'default', name: 'three', protocol: 'tcp', portName: '' }).clusterChain;
  const p1 = plan(a, b, { full: false, now: 10_000, stale: NO_STALE });
  assert.deepEqual(opSummary(p1.ops), [
    `flush chain ${chain}`,
    'delete elements cluster-ips x1',
    'delete elements service-ips x1',
    'delete elements hairpin-connections x1',
    'delete elements endpoint-map-0 x3',
  ]);
  assert.deepEqual([...p1.stale], [[chain, 10_000]]);
  const k = new FakeKernel();
  k.apply(toBatchOps(a));
  k.apply(p1.ops);
  // 999 ms later: still waiting.
  const p2 = plan(b, b, { full: false, now: 10_999, stale: p1.stale });
  assert.deepEqual(p2.ops, []);
  assert.equal(p2.stale.size, 1);
  // 1 s later: deleted.
  const p3 = plan(b, b, { full: false, now: 11_000, stale: p2.stale });
  assert.deepEqual(opSummary(p3.ops), [`delete chain ${chain}`]);
  assert.equal(p3.stale.size, 0);
  k.apply(p3.ops);
  assert.deepEqual(k.dump(), fresh(b));
});

test('a stale chain that becomes desired again leaves the stale map and is refilled', () => {
  const all = clusterIPServices();
  const a = compile(snapshot({ family: 'ipv4', node: { name: 'n' }, servicePorts: all }));
  const b = compile(snapshot({ family: 'ipv4', node: { name: 'n' }, servicePorts: all.filter((sp) => sp.name !== 'three') }));
  const k = new FakeKernel();
  k.apply(toBatchOps(a));
  const p1 = plan(a, b, { full: false, now: 0, stale: NO_STALE });
  k.apply(p1.ops);
  const p2 = plan(b, a, { full: false, now: 5000, stale: p1.stale });
  assert.equal(p2.stale.size, 0);
  assert.ok(!opSummary(p2.ops).some((s) => s.startsWith('delete chain')));
  k.apply(p2.ops);
  assert.deepEqual(k.dump(), fresh(a));
});

test('an element shared by several ServicePorts (the ClusterIP of a multi-port Service) is deleted with the last one', () => {
  const all = clusterIPServices();
  const mk = (drop: string[]) => compile(snapshot({ family: 'ipv4', node: { name: 'n' }, servicePorts: all.filter((sp) => !(sp.name === 'kube-dns' && drop.includes(sp.portName))) }));
  const full = mk([]);
  const k = new FakeKernel();
  k.apply(toBatchOps(full));
  const two = mk(['metrics']);
  const p1 = plan(full, two, { full: false, now: 0, stale: NO_STALE });
  assert.ok(!opSummary(p1.ops).includes('delete elements cluster-ips x1'), 'cluster-ips 10.96.0.10 still used by dns, dns-tcp');
  k.apply(p1.ops);
  const none = mk(['metrics', 'dns', 'dns-tcp']);
  const p2 = plan(two, none, { full: false, now: 0, stale: p1.stale });
  assert.ok(opSummary(p2.ops).includes('delete elements cluster-ips x1'));
  k.apply(p2.ops);
  assert.deepEqual(k.dump(p2.stale.keys()), fresh(none));
});

test('service losing its endpoints: service-ips -> no-endpoint-services, chain flushed and stale', () => {
  const withEps = compile(smallCluster());
  const sps = smallCluster().servicePorts.map((sp) => (sp.name === 'kubernetes' ? { ...sp, clusterEndpoints: [], allReachableEndpoints: [], hasEndpoints: false } : sp));
  const without = compile(smallCluster({ servicePorts: sps }), { previous: withEps });
  const p = plan(withEps, without, { full: false, now: 0, stale: NO_STALE });
  const chain = servicePortNames({ namespace: 'default', name: 'kubernetes', protocol: 'tcp', portName: 'https' }).clusterChain;
  assert.deepEqual(opSummary(p.ops), [`flush chain ${chain}`, 'delete elements service-ips x1', 'delete elements endpoint-map-0 x1', 'add elements no-endpoint-services x1']);
  const k = new FakeKernel();
  k.apply(toBatchOps(withEps));
  k.apply(p.ops);
  assert.deepEqual(k.dump(p.stale.keys()), fresh(without));
});

test('affinity service added and removed: sets created with ids and deleted after their chains are flushed', () => {
  const base = smallCluster();
  const noApi = compile(smallCluster({ servicePorts: base.servicePorts.filter((sp) => sp.name !== 'api') }));
  const withApi = compile(base);
  const k = new FakeKernel();
  k.apply(toBatchOps(noApi));
  const add = plan(noApi, withApi, { full: false, now: 0, stale: NO_STALE });
  const s = opSummary(add.ops);
  assert.ok(s.indexOf('add set affinity-RTPX3IYJ-default/api/tcp/grpc__10.244.1.20/9000') < s.findIndex((x) => x.startsWith('add rule')));
  for (const o of add.ops) if (o.kind === 'rule') for (const e of o.rule.exprs) if ((e.type === 'lookup' || e.type === 'dynset') && e.set.startsWith('affinity-')) assert.ok(e.setId! > 0);
  k.apply(add.ops);
  assert.deepEqual(k.dump(), fresh(withApi));
  const del = plan(withApi, noApi, { full: false, now: 0, stale: NO_STALE });
  const d = opSummary(del.ops);
  assert.ok(d.lastIndexOf(d.find((x) => x.startsWith('flush chain'))!) < d.indexOf('delete set affinity-RTPX3IYJ-default/api/tcp/grpc__10.244.1.20/9000'));
  k.apply(del.ops);
  assert.deepEqual(k.dump(del.stale.keys()), fresh(noApi));
});

test('affinity timeout change: sets re-created, referencing chains flushed and refilled', () => {
  const a = compile(smallCluster());
  const sps = smallCluster().servicePorts.map((sp) => (sp.name === 'api' ? { ...sp, affinityTimeoutSeconds: 30 } : sp));
  const b = compile(smallCluster({ servicePorts: sps }));
  const k = new FakeKernel();
  k.apply(toBatchOps(a));
  const p = plan(a, b, { full: false, now: 0, stale: NO_STALE });
  k.apply(p.ops);
  assert.deepEqual(k.dump(), fresh(b));
});

test('skeleton change (masqueradeAll): only the services chain is rewritten', () => {
  const a = compile(smallCluster());
  const b = compile(smallCluster({ masqueradeAll: true }), { previous: a });
  const p = plan(a, b, { full: false, now: 0, stale: NO_STALE });
  assert.deepEqual(opSummary(p.ops), ['flush chain services', 'add rule services', 'add rule services', 'add rule services']);
});

test('nodePortAddresses switching to explicit IPs adds nodeport-ips and rewrites the rules that use it', () => {
  const a = compile(smallCluster());
  const b = compile(smallCluster({ nodePortIPs: ['192.168.1.11'] }));
  const k = new FakeKernel();
  k.apply(toBatchOps(a));
  const p = plan(a, b, { full: false, now: 0, stale: NO_STALE });
  k.apply(p.ops);
  assert.deepEqual(k.dump(), fresh(b));
  const back = plan(b, a, { full: false, now: 0, stale: NO_STALE });
  k.apply(back.ops);
  assert.deepEqual(k.dump(), fresh(a));
});

test('a base chain or table change forces a full plan', () => {
  const a = compile(smallCluster());
  const b = compile(smallCluster({ tableName: 'other' }));
  assert.equal(plan(a, b, { full: false, now: 0, stale: NO_STALE }).full, true);
});

test('random partial syncs leave the same table as a fresh full load', () => {
  let seed = 42;
  const rnd = (n: number) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
  const mk = (sps: ServicePortInput[], over: Partial<SnapshotInput> = {}) => snapshot({ family: 'ipv4', localDetector: { mode: 'cidr', cidrs: ['10.0.0.0/8'] }, node: { name: 'n', ips: ['192.168.0.1'] }, servicePorts: sps, ...over });
  let sps: ServicePortInput[] = syntheticCluster(30).servicePorts;
  let committed = compile(mk(sps));
  const k = new FakeKernel();
  k.apply(toBatchOps(committed));
  let stale = new Map<string, number>();
  let now = 0;
  for (let step = 0; step < 150; step++) {
    now += rnd(1500);
    sps = sps.map((sp) => ({ ...sp }));
    const i = rnd(sps.length);
    switch (rnd(6)) {
      case 0: sps.splice(i, 1); break; // remove a service
      case 1: { // add one, sometimes with affinity or a NodePort
        const id = 1000 + step;
        const next = simpleSP({ namespace: 'r', name: `s${id}`, portName: 'p', protocol: rnd(2) ? 'TCP' : 'UDP', clusterIP: `10.97.${id >> 8}.${id & 255}`, port: 80, nodePort: rnd(3) === 0 ? 30000 + id : 0, affinityTimeoutSeconds: rnd(3) === 0 ? 60 : null, endpoints: [ep(`10.50.${rnd(4)}.${rnd(4)}`, 80, rnd(2) === 0)] });
        sps.push(next);
        break;
      }
      case 2: { // endpoints change
        const n = rnd(4);
        const eps = Array.from({ length: n }, () => ep(`10.60.${rnd(3)}.${rnd(5)}`, 8080, rnd(3) === 0));
        sps[i] = simpleSP({ ...sps[i], endpoints: eps } as never);
        break;
      }
      case 3: sps[i] = { ...sps[i], port: 81 + rnd(3) }; break;
      case 4: sps[i] = { ...sps[i], affinityTimeoutSeconds: rnd(2) ? null : 30 + rnd(2) }; break;
      case 5: if (sps.length > 1) sps[i] = { ...sps[i], clusterIP: sps[(i + 1) % sps.length].clusterIP }; break; // shared ClusterIP
    }
    const desired = compile(mk(sps), { previous: committed });
    const p = plan(committed, desired, { full: false, now, stale });
    try {
      k.apply(p.ops);
    } catch (e) {
      assert.fail(`step ${step}: ${(e as Error).message}\n${renderSteps('ip', 'nftproxy', 'c', p.steps)}`);
    }
    committed = desired;
    stale = p.stale;
    assert.deepEqual(k.dump(stale.keys()), fresh(desired), `step ${step}`);
  }
});

test('large element lists are split into operations that fit a netlink attribute', () => {
  const rs = compile(syntheticCluster(3000));
  const ops = toBatchOps(rs).filter((o) => o.kind === 'elements');
  const bySet = new Map<string, number>();
  for (const o of ops) {
    if (o.kind !== 'elements') continue;
    bySet.set(o.elements.set, (bySet.get(o.elements.set) ?? 0) + o.elements.elements.length);
    assert.ok(o.elements.elements.length <= 1000);
    // key + verdict chain name + nest overhead must stay well below 64 KB
    const bytes = o.elements.elements.reduce((n, e) => n + 24 + e.key.length + (e.data && 'verdict' in e.data && 'chain' in e.data.verdict ? e.data.verdict.chain.length + 24 : 0), 0);
    assert.ok(bytes < 65535, `${o.elements.set}: ${bytes} bytes`);
  }
  assert.equal(bySet.get('cluster-ips'), 3000);
  assert.equal(bySet.get('service-ips'), 3000);
  assert.ok(ops.filter((o) => o.kind === 'elements' && o.elements.set === 'service-ips').length >= 5);
});
