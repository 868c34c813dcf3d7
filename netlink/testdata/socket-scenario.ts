/**
 * Kernel scenario for socket.test.ts. Run it ONLY inside a throwaway network namespace (`unshare -n`): it programs
 * nf_tables. Prints one JSON object with what it observed.
 */
import { execFileSync } from 'node:child_process';
import { BatchError, NftSocket } from '../socket.ts';
import type { BatchOp } from '../types.ts';

const T = { family: 'ip' as const, name: 'nftproxy-test', comment: 'socket test' };
const base = { family: 'ip' as const, table: T.name };
const out: Record<string, unknown> = {};
const sock = NftSocket.open();
const gen0 = await sock.getGeneration();

const good: BatchOp[] = [
  { op: 'add', kind: 'table', table: T },
  { op: 'add', kind: 'chain', chain: { ...base, name: 'nat-output', hook: { type: 'nat', hooknum: 3, priority: -100, policy: 'accept' } } },
  { op: 'add', kind: 'chain', chain: { ...base, name: 'svc', comment: 'a chain' } },
  { op: 'add', kind: 'set', set: { ...base, name: 'ips', flags: 0, keyType: 7, keyLen: 4, id: 1, comment: 'some IPs' } },
  { op: 'add', kind: 'rule', rule: { ...base, chain: 'nat-output', exprs: [{ type: 'immediate', dreg: 0, data: { verdict: { kind: 'jump', chain: 'svc' } } }], comment: 'to svc' } },
  { op: 'add', kind: 'elements', elements: { ...base, set: 'ips', elements: [{ key: new Uint8Array([10, 96, 0, 1]), comment: 'one' }] } },
];
out.good = await sock.sendBatch(good);
out.gen1 = (await sock.getGeneration()) - gen0;
out.nftJson = JSON.parse(execFileSync('nft', ['-j', 'list', 'table', 'ip', T.name], { encoding: 'utf8' }));

try {
  await sock.sendBatch([
    { op: 'add', kind: 'chain', chain: { ...base, name: 'new-chain' } },
    { op: 'add', kind: 'rule', rule: { ...base, chain: 'missing', exprs: [{ type: 'counter' }] } },
  ]);
  out.bad = 'accepted?!';
} catch (err) {
  const e = err as BatchError;
  out.bad = { name: e.name, message: e.message, errors: e.errors.map((x) => ({ opIndex: x.opIndex, errnoName: x.errnoName })) };
}
out.genAfterBad = (await sock.getGeneration()) - gen0;
out.chainsAfterBad = (await sock.listChains('ip', T.name)).map((c) => c.name).sort();

try {
  await sock.sendBatch([{ op: 'add', kind: 'chain', chain: { ...base, name: 'x' } }], { genId: gen0 });
  out.stale = 'accepted?!';
} catch (err) {
  out.stale = (err as BatchError).errors.map((x) => ({ opIndex: x.opIndex, errnoName: x.errnoName }));
}

const rules = await sock.listRules('ip', T.name);
out.dump = {
  tables: (await sock.listTables('ip')).map((t) => ({ name: t.name, comment: t.comment, hasHandle: typeof t.handle === 'bigint' })),
  chains: (await sock.listChains('ip', T.name)).map((c) => ({ name: c.name, hook: c.hook, comment: c.comment })),
  rules: rules.map((r) => ({ chain: r.chain, exprs: r.exprs, comment: r.comment, hasHandle: typeof r.handle === 'bigint' })),
  sets: (await sock.listSets('ip', T.name)).map((s) => ({ name: s.name, keyLen: s.keyLen, comment: s.comment })),
  elements: (await sock.listElements('ip', T.name, 'ips')).elements.map((e) => ({ key: [...e.key], comment: e.comment })),
};

const many = Array.from({ length: 80_000 }, (_, i) => ({ key: new Uint8Array([10, 100 + (i >> 16), (i >> 8) & 255, i & 255]) }));
out.big = await sock.sendBatch([{ op: 'add', kind: 'elements', elements: { ...base, set: 'ips', elements: many } }]);
out.bigCount = (await sock.listElements('ip', T.name, 'ips')).elements.length;
out.sndbuf = sock.sendBufferBytes;
sock.close();
console.log(JSON.stringify(out, (_k, v) => (typeof v === 'bigint' ? String(v) : v instanceof Uint8Array ? [...v] : v)));
