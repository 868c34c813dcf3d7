/**
 * Restart adoption: pure comparison tests, and the real kernel in a throwaway network namespace
 * (testdata/adopt-scenario.ts: the kubectl fixture synced by one syncer, then "restarted" syncers with adoption).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import type { BatchOp, ChainSpec, RuleSpec, SetSpec, TableFamily } from '../netlink/types.ts';
import { contentOf, planAdoption, readTable, type TableReader } from './adopt.ts';

const base = { family: 'ip' as const, table: 'nftproxy' };
const jump = (chain: string): RuleSpec => ({ ...base, chain: 'services', exprs: [{ type: 'immediate', dreg: 0, data: { verdict: { kind: 'jump', chain } } }] });
const desiredOps: BatchOp[] = [
  { op: 'add', kind: 'table', table: { family: 'ip', name: 'nftproxy', flags: 0, comment: 'rules for nftproxy' } },
  { op: 'delete', kind: 'table', table: { family: 'ip', name: 'nftproxy' } },
  { op: 'add', kind: 'table', table: { family: 'ip', name: 'nftproxy', flags: 0, comment: 'rules for nftproxy' } },
  { op: 'add', kind: 'chain', chain: { ...base, name: 'nat-output', hook: { type: 'nat', hooknum: 3, priority: -100 } } },
  { op: 'add', kind: 'chain', chain: { ...base, name: 'services' } },
  { op: 'add', kind: 'chain', chain: { ...base, name: 'svc-a' } },
  { op: 'add', kind: 'set', set: { ...base, name: 'ips', flags: 0, keyType: 7, keyLen: 4, id: 1 } },
  { op: 'add', kind: 'set', set: { ...base, name: 'vmap', flags: 8, keyType: 7, keyLen: 4, dataType: 0xffffff00, dataLen: 0, id: 2 } },
  { op: 'add', kind: 'rule', rule: { ...base, chain: 'nat-output', exprs: [{ type: 'lookup', sreg: 1, set: 'ips', setId: 1 }, { type: 'immediate', dreg: 0, data: { verdict: { kind: 'jump', chain: 'services' } } }] } },
  { op: 'add', kind: 'rule', rule: jump('svc-a') },
  { op: 'add', kind: 'elements', elements: { ...base, set: 'ips', setId: 1, elements: [{ key: new Uint8Array([10, 96, 0, 1]) }] } },
  { op: 'add', kind: 'elements', elements: { ...base, set: 'vmap', setId: 2, elements: [{ key: new Uint8Array([10, 96, 0, 1]), data: { verdict: { kind: 'goto', chain: 'svc-a' } } }] } },
];

/** A fake kernel that answers dumps from ops, with the kernel's own additions (handles, policy, verdict dataLen). */
function kernelOf(ops: BatchOp[]): TableReader {
  const c = contentOf(ops)!;
  let h = 1n;
  return {
    listTables: async (f?: TableFamily) => (f === 'ip' ? [{ ...c.table, handle: h++ }] : []),
    listChains: async () => [...c.chains.values()].map((x): ChainSpec => ({ ...x, handle: h++, hook: x.hook ? { ...x.hook, policy: 'accept' } : undefined })),
    listSets: async () => [...c.sets.values()].map((s): SetSpec => ({ ...s, id: undefined, handle: h++, dataLen: s.dataType ? 16 : s.dataLen })),
    listRules: async () => [...c.rules.values()].flat().map((r) => ({ ...r, handle: h++, exprs: r.exprs.map((e) => (e.type === 'lookup' ? { ...e, setId: undefined } : e)) })),
    listElements: async (_f, _t, set) => ({ ...base, set, elements: [...(c.elements.get(set)?.values() ?? [])] }),
  };
}

test('an identical table is adopted with no operations; kernel-only fields are not differences', async () => {
  const p = planAdoption(await readTable(kernelOf(desiredOps), 'ip', 'nftproxy'), contentOf(desiredOps)!);
  assert.equal(p.kind, 'adopt');
  assert.deepEqual(p.ops, []);
  assert.deepEqual(p.compared, { chains: 3, sets: 2, rules: 2, elements: 2 });
});

test('a missing table, a changed set definition or a changed base chain needs a full sync', async () => {
  assert.equal(planAdoption(null, contentOf(desiredOps)!).kind, 'full');
  const otherSet = desiredOps.map((o) => (o.kind === 'set' && o.set.name === 'ips' ? { ...o, set: { ...o.set, keyType: 8, keyLen: 16 } } : o));
  const p1 = planAdoption(await readTable(kernelOf(otherSet), 'ip', 'nftproxy'), contentOf(desiredOps)!);
  assert.deepEqual([p1.kind, p1.reason], ['full', 'set ips has a different definition']);
  const otherHook = desiredOps.map((o) => (o.kind === 'chain' && o.chain.hook ? { ...o, chain: { ...o.chain, hook: { ...o.chain.hook, priority: 0 } } } : o));
  const p2 = planAdoption(await readTable(kernelOf(otherHook), 'ip', 'nftproxy'), contentOf(desiredOps)!);
  assert.equal(p2.kind, 'full');
  assert.match(p2.reason, /base chain nat-output/);
});

test('differences in regular chains and elements are repaired object by object, in one batch', async () => {
  // The kernel: svc-a has an extra rule, a stray chain and element exist, the ips element is missing.
  const kernelOps: BatchOp[] = [
    ...desiredOps.filter((o) => !(o.kind === 'elements' && o.elements.set === 'ips')),
    { op: 'add', kind: 'chain', chain: { ...base, name: 'stray' } },
    { op: 'add', kind: 'rule', rule: { ...base, chain: 'svc-a', exprs: [{ type: 'counter' }] } },
    { op: 'add', kind: 'elements', elements: { ...base, set: 'vmap', elements: [{ key: new Uint8Array([10, 96, 0, 9]), data: { verdict: { kind: 'goto', chain: 'stray' } } }] } },
  ];
  const p = planAdoption(await readTable(kernelOf(kernelOps), 'ip', 'nftproxy'), contentOf(desiredOps)!);
  assert.equal(p.kind, 'adopt');
  assert.deepEqual(p.ops.map((o) => `${o.op} ${o.kind} ${o.kind === 'chain' ? o.chain.name : o.kind === 'elements' ? o.elements.set : o.kind === 'rule' ? o.rule.chain : ''}`), [
    'flush chain svc-a', 'flush chain stray', 'delete elements vmap', 'add elements ips', 'delete chain stray',
  ]);
  assert.deepEqual(p.mismatches, ['chain svc-a: rules differ', 'chain stray: not ours any more', 'set ips: 1 element(s) to add', 'set vmap: 1 element(s) to delete']);
});

test('a running syncer\'s check can ignore empty extra chains (stale chains awaiting deletion)', async () => {
  const kernelOps: BatchOp[] = [...desiredOps, { op: 'add', kind: 'chain', chain: { ...base, name: 'stale' } }];
  const kernel = await readTable(kernelOf(kernelOps), 'ip', 'nftproxy');
  assert.deepEqual(planAdoption(kernel, contentOf(desiredOps)!, { ignoreEmptyExtraChains: true }).ops, []);
  assert.deepEqual(planAdoption(kernel, contentOf(desiredOps)!).ops.map((o) => `${o.op} ${o.kind}`), ['flush chain', 'delete chain']);
  const withRule: BatchOp[] = [...kernelOps, { op: 'add', kind: 'rule', rule: { ...base, chain: 'stale', exprs: [{ type: 'counter' }] } }];
  assert.equal(planAdoption(await readTable(kernelOf(withRule), 'ip', 'nftproxy'), contentOf(desiredOps)!, { ignoreEmptyExtraChains: true }).ops.length, 2);
});

const probe = spawnSync('unshare', ['-n', 'true']);
const skip = probe.status !== 0 ? `network namespaces unavailable (unshare -n: ${probe.stderr?.toString().trim() || probe.error?.message})` : false;
if (skip && process.env.CI) throw new Error(`CI must run kernel tests: ${skip}`);
if (skip) console.log(`# SKIP adopt.test.ts kernel test: ${skip}`);

test('kernel: a restarted syncer adopts the real fixture with 0 ops; tampering is repaired per object; notifications name the tamperer', { skip }, () => {
  const r = spawnSync('unshare', ['-n', process.execPath, new URL('./testdata/adopt-scenario.ts', import.meta.url).pathname], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  const o = JSON.parse(r.stdout);
  assert.deepEqual(o.first.map((x: { full: boolean }) => x.full), [true, true]);
  // Identical: nothing sent at all, and the comparison covered every object of the fixture.
  assert.deepEqual(o.identical.results, [{ family: 'IPv4', full: false, ops: 0 }, { family: 'IPv6', full: false, ops: 0 }]);
  assert.equal(o.identical.batches, 0);
  assert.ok(o.identical.plans.IPv4.compared.rules > 50 && o.identical.plans.IPv4.compared.elements > 20, JSON.stringify(o.identical.plans.IPv4.compared));
  // Tampered (flushed chain, stray chain, deleted element): only those objects are replaced, in one batch.
  assert.equal(o.tampered.batches, 1);
  assert.equal(o.tampered.plans.IPv4.kind, 'adopt');
  assert.equal(o.tampered.plans.IPv4.mismatches.length, 3, JSON.stringify(o.tampered.plans.IPv4.mismatches));
  assert.ok(o.tampered.results[0].ops <= 6, `repair sent ${o.tampered.results[0].ops} ops`);
  assert.deepEqual(o.tampered.results[1], { family: 'IPv6', full: false, ops: 0 });
  assert.deepEqual(o.tampered.equalAfter, { IPv4: true, IPv6: true });
  // A missing table or a changed base chain: a full sync, and the kernel ends up equal to the desired ruleset.
  assert.equal(o.ip6Missing.plans.IPv6.kind, 'full');
  assert.equal(o.ip6Missing.results[1].full, true);
  assert.equal(o.baseChainChanged.plans.IPv4.kind, 'full');
  assert.deepEqual(o.baseChainChanged.equalAfter, { IPv4: true, IPv6: true });
  // After an endpoint change the kernel's allocation differs from a cold compile: seeded from the kernel's
  // endpoint maps, the restarted syncer sends nothing; unseeded, it rewrites the moved endpoint elements.
  assert.deepEqual(o.history.seeded.change, [4, 0], 'the change was an incremental sync');
  assert.deepEqual(o.history.seeded.results, [{ family: 'IPv4', full: false, ops: 0 }, { family: 'IPv6', full: false, ops: 0 }]);
  assert.equal(o.history.seeded.batches, 0);
  assert.ok(o.history.unseeded.results[0].ops > 0, JSON.stringify(o.history.unseeded));
  // Our own syncer's notifications are ignored; nft's are reported with its process name.
  assert.equal(o.firstNotifications, 0);
  assert.deepEqual(o.tamper.map((c: { op: string }) => c.op), ['DELRULE', 'NEWCHAIN', 'DELSETELEM']);
  assert.ok(o.tamper.every((c: { procName: string; family: string }) => c.procName === 'nft' && c.family === 'ip'));
  assert.equal(o.tamperIp6Only, 0);
  assert.equal(o.tamperOtherTable, 0);
  // around(): no notifications for our own batch; nft's commit inside the window is counted through the generation.
  assert.deepEqual(o.around, { afterOwn: 0, afterForeign: 0, unseen: [1], ownOutside: 2, ownOutsideForeign: 0 });
});
