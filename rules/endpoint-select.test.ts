import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EndpointAllocator, assignSlots, capacityFor, rebuildEndpointAllocator } from './endpoint-select.ts';
import { compile } from './compile.ts';
import { plan } from './plan.ts';
import { trace } from './trace.ts';
import { ep, simpleSP, snapshot } from './testdata/fixtures.ts';
import type { BatchOp } from '../netlink/types.ts';

test('capacity rounds up to a power of two, at least 4', () => {
  assert.deepEqual([1, 4, 5, 10, 16, 17, 250].map(capacityFor), [4, 4, 8, 16, 16, 32, 256]);
});

test('slots are stable: kept endpoints keep their index, the last one moves into a hole', () => {
  assert.deepEqual(assignSlots([], ['a', 'b', 'c']), ['a', 'b', 'c']);
  assert.deepEqual(assignSlots(['a', 'b', 'c', 'd'], ['a', 'c', 'd']), ['a', 'd', 'c']);
  assert.deepEqual(assignSlots(['a', 'b', 'c'], ['a', 'b', 'c', 'x']), ['a', 'b', 'c', 'x']);
  assert.deepEqual(assignSlots(['a', 'b', 'c'], ['x', 'a', 'c']), ['a', 'x', 'c']);
});

test('allocator: blocks keep their offset while they fit, move when outgrown, freed blocks are reused', () => {
  const a = new EndpointAllocator();
  const b1 = a.assign('s1', ['a', 'b']);
  const b2 = a.assign('s2', ['x']);
  assert.deepEqual([b1.offset, b1.cap, b2.offset, b2.cap], [0, 4, 4, 4]);
  assert.equal(a.assign('s1', ['a', 'b', 'c', 'd']).offset, 0);
  const grown = a.assign('s1', ['a', 'b', 'c', 'd', 'e']);
  assert.deepEqual([grown.offset, grown.cap], [8, 8]);
  assert.equal(a.assign('s3', ['q']).offset, 0, 'the freed 4-block is reused');
  const c = a.clone();
  c.release('s2');
  assert.ok(a.get('s2'), 'a clone is independent');
  assert.throws(() => a.assign('s4', []), /s4 has no endpoints/);
});

test('rebuild from dumped elements (restart adoption) gives back the same blocks and slots', () => {
  const a = new EndpointAllocator();
  a.assign('ns/a:http', ['10.0.0.1:80', '10.0.0.2:80', '10.0.0.3:80']);
  a.assign('ns/b:dns', ['10.0.0.9:53']);
  const dumped = [...a.entries()].flatMap(([owner, b]) => b.slots.map((s, i) => {
    const [ip, port] = s.split(':');
    return { key: b.offset + i, comment: owner, ip, port: Number(port) };
  }));
  const r = rebuildEndpointAllocator(dumped.reverse());
  assert.deepEqual(r.get('ns/a:http'), a.get('ns/a:http'));
  assert.deepEqual(r.get('ns/b:dns'), a.get('ns/b:dns'));
  assert.equal(r.highWater, a.highWater);
  assert.throws(() => rebuildEndpointAllocator([{ key: 3, ip: '10.0.0.1', port: 1 }]), /element 3 has no comment/);
  assert.throws(() => rebuildEndpointAllocator([{ key: 3, comment: 'x', ip: '10.0.0.1', port: 1 }, { key: 5, comment: 'x', ip: '10.0.0.2', port: 1 }]), /not consecutive/);
});

const snap = (eps: ReturnType<typeof ep>[]) => snapshot({
  family: 'ipv4', localDetector: { mode: 'cidr', cidrs: ['10.244.0.0/16'] }, node: { name: 'n', ips: ['192.168.1.11'] },
  servicePorts: [
    simpleSP({ namespace: 'ns', name: 'a', portName: 'http', protocol: 'TCP', clusterIP: '10.96.0.10', port: 80, endpoints: eps }),
    simpleSP({ namespace: 'ns', name: 'b', portName: 'dns', protocol: 'UDP', clusterIP: '10.96.0.11', port: 53, endpoints: [ep('10.244.3.1', 5353)] }),
  ],
});

const summary = (ops: readonly BatchOp[]) => ops.map((o) => (o.kind === 'elements' ? `${o.op} ${o.elements.set} x${o.elements.elements.length}` : `${o.op} ${o.kind}`));

test('removing an endpoint changes the rule and at most two elements; adding one changes the rule and one element', () => {
  const eps = [1, 2, 3, 4, 5].map((i) => ep(`10.244.1.${i}`, 8080));
  const a = compile(snap(eps));
  const b = compile(snap(eps.filter((_, i) => i !== 1)), { previous: a });
  assert.deepEqual(summary(plan(a, b, { full: false, now: 0, stale: new Map() }).ops), [
    'flush chain', `delete endpoint-map-0 x2`, 'add rule', `add endpoint-map-0 x1`,
  ]);
  const c = compile(snap([...eps, ep('10.244.1.6', 8080)]), { previous: a });
  assert.deepEqual(summary(plan(a, c, { full: false, now: 0, stale: new Map() }).ops), ['flush chain', 'add rule', `add endpoint-map-0 x1`]);
  // The other Service's block did not move.
  const other = (rs: typeof a) => rs.fragments.get('ns/b:dns/UDP')!.elements.filter((e) => e.set === 'endpoint-map-0').map((e) => e.key[0]);
  assert.deepEqual(other(b), other(a));
  assert.deepEqual(other(c), other(a));
});

test('the tracer follows numgen offset + map lookup to every endpoint with equal probability', () => {
  const eps = [1, 2, 3].map((i) => ep(`10.244.1.${i}`, 8080));
  const rs = compile(snap(eps));
  const r = trace(rs, { family: 'ip', src: '10.244.9.9', dst: '10.96.0.10', proto: 'tcp', sport: 40000, dport: 80, path: 'prerouting', iifname: 'eth0' }, { localAddrs: ['192.168.1.11'] });
  const targets = r.dnatTargets.map((t) => `${t.ip}:${t.port}@${t.probability.toFixed(3)}`).sort();
  assert.deepEqual(targets, ['10.244.1.1:8080@0.333', '10.244.1.2:8080@0.333', '10.244.1.3:8080@0.333']);
});

test('endpoint maps are sharded by key range: blocks never straddle a shard, each rule names its block\'s map', async () => {
  const { SHARD_KEYS, endpointMapOf } = await import('./endpoint-select.ts');
  const a = new EndpointAllocator();
  const b1 = a.assign('x', Array.from({ length: 3 }, (_, i) => `e${i}`));
  for (let i = 0; i < SHARD_KEYS / 16 - 1; i++) a.assign(`f${i}`, Array.from({ length: 10 }, (_, k) => `e${k}`));
  const b2 = a.assign('y', Array.from({ length: 10 }, (_, i) => `e${i}`));
  assert.equal(b1.offset, 0);
  assert.equal(b2.offset, SHARD_KEYS, 'a 16-key block that would cross the boundary starts the next shard');
  const big = a.assign('z', Array.from({ length: SHARD_KEYS + 1 }, (_, i) => `e${i}`));
  assert.equal(big.offset % SHARD_KEYS, 0);
  assert.equal(a.shards, big.offset / SHARD_KEYS + 2);
  assert.equal(endpointMapOf(SHARD_KEYS - 1), 'endpoint-map-0');
  assert.equal(endpointMapOf(SHARD_KEYS), 'endpoint-map-1');
  // Compiled: 200 Services × 10 endpoints need 4 maps; every dnat rule names the map that holds its keys.
  const { syntheticCluster } = await import('./testdata/fixtures.ts');
  const rs = compile(syntheticCluster(200, (sps) => { for (const sp of sps) { const eps = Array.from({ length: 10 }, (_, k) => ep(`10.${200 + k}.0.${sps.indexOf(sp) % 250}`, 80)); sp.clusterEndpoints = eps; sp.allReachableEndpoints = eps; } }));
  const maps = [...rs.index.sets.keys()].filter((n) => n.startsWith('endpoint-map-'));
  assert.ok(maps.length >= 2, `${maps.length} maps`);
  for (const { chain } of rs.index.chains.values()) {
    for (const r of chain.rules) for (const st of r.stmts) if (st.k === 'dnatMap') assert.equal(st.map, endpointMapOf(st.offset));
  }
  for (const [set, els] of rs.index.elements) {
    if (!set.startsWith('endpoint-map-')) continue;
    for (const x of els.values()) assert.equal(endpointMapOf((x.element.key[0] as { value: number }).value), set);
  }
});
