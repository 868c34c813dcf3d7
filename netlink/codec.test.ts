import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NetlinkWriter, attrMap, iterAttrs, read } from './attrs.ts';
import { decodeExprList, encodeExpr } from './expr.ts';
import { encodeBatch } from './batch.ts';
import { NLM_F, NLMSG, parseError, parseMessages, errnoText } from './message.ts';
import { decodeElements, decodeRule, decodeSet, encodeElements, encodeRule, encodeSet, MAX_ELEMENTS_BYTES } from './objects.ts';
import type { BatchOp, ElementsSpec, Expr, RuleSpec, SetSpec } from './types.ts';

const b = (...xs: number[]) => new Uint8Array(xs);

/** One instance of every Expr variant, with every optional field exercised somewhere. */
const EVERY_EXPR: Expr[] = [
  { type: 'payload', dreg: 1, base: 1, offset: 16, len: 4 },
  { type: 'meta', key: 16, dreg: 9 },
  { type: 'meta_set', key: 3, sreg: 1 },
  { type: 'cmp', sreg: 1, op: 1, data: b(0x7f) },
  { type: 'range', sreg: 1, op: 0, from: b(0, 80), to: b(0, 90) },
  { type: 'bitwise', sreg: 1, dreg: 1, len: 4, mask: b(0xff, 0xbf, 0xff, 0xff), xor: b(0, 0x40, 0, 0) },
  { type: 'bitwise', sreg: 1, dreg: 1, len: 4, mask: b(0, 0x40, 0, 0), xor: b(0, 0, 0, 0), op: 0 },
  { type: 'lookup', sreg: 1, set: 'cluster-cidrs', setId: 2, flags: 1 },
  { type: 'lookup', sreg: 1, set: 'service-ips', dreg: 0 },
  { type: 'immediate', dreg: 0, data: { verdict: { kind: 'goto', chain: 'endpoint-A' } } },
  { type: 'immediate', dreg: 0, data: { verdict: { kind: 'jump', chain: 'mark-for-masquerade' } } },
  { type: 'immediate', dreg: 0, data: { verdict: { kind: 'drop' } } },
  { type: 'immediate', dreg: 0, data: { verdict: { kind: 'accept' } } },
  { type: 'immediate', dreg: 0, data: { verdict: { kind: 'return' } } },
  { type: 'immediate', dreg: 0, data: { verdict: { kind: 'continue' } } },
  { type: 'immediate', dreg: 1, data: { value: b(10, 0, 0, 1) } },
  { type: 'nat', natType: 1, family: 2, regAddrMin: 1, regProtoMin: 2, flags: 2 },
  { type: 'nat', natType: 0, family: 10, regAddrMin: 1, regAddrMax: 1, regProtoMin: 9, regProtoMax: 9, flags: 3 },
  { type: 'masq', flags: 16 },
  { type: 'masq', regProtoMin: 1, regProtoMax: 2 },
  { type: 'numgen', dreg: 1, modulus: 3, ngType: 1, offset: 0 },
  { type: 'numgen', dreg: 1, modulus: 2, ngType: 0 },
  { type: 'numgen', dreg: 1, modulus: 250, ngType: 1, offset: 65536 },
  { type: 'lookup', sreg: 1, set: 'endpoint-map-3', setId: 4, dreg: 1 },
  { type: 'nat', natType: 1, family: 2, regAddrMin: 1, regProtoMin: 9 },
  { type: 'ct', key: 0, dreg: 1 },
  { type: 'ct', key: 20, dreg: 1, direction: 0 },
  { type: 'ct_set', key: 3, sreg: 1 },
  { type: 'fib', dreg: 1, result: 3, flags: 2 },
  { type: 'reject', rejectType: 0, icmpCode: 3 },
  { type: 'reject', rejectType: 1, icmpCode: 0 },
  { type: 'counter' },
  { type: 'counter', bytes: 1234n, packets: 5n },
  { type: 'dynset', op: 1, set: 'affinity-A', setId: 1, sregKey: 1 },
  { type: 'dynset', op: 0, set: 'm', sregKey: 1, sregData: 2, timeoutMs: 10_800_000n, flags: 1 },
  { type: 'opaque', name: 'quota', data: b(0x0c, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0x10, 0) },
];

test('every expression variant round-trips through encode and decode', () => {
  const types = new Set(EVERY_EXPR.map((e) => e.type));
  for (const t of ['payload', 'meta', 'meta_set', 'cmp', 'range', 'bitwise', 'lookup', 'immediate', 'nat', 'masq', 'numgen', 'ct', 'ct_set', 'fib', 'reject', 'counter', 'dynset', 'opaque'] as const) {
    assert.ok(types.has(t), `no sample of ${t}`);
  }
  for (const e of EVERY_EXPR) {
    const w = new NetlinkWriter(256);
    encodeExpr(w, e);
    const [decoded] = decodeExprList(w.bytes());
    assert.deepEqual(decoded, e, `round trip of ${JSON.stringify(e, (_k, v) => (typeof v === 'bigint' ? String(v) : v))}`);
  }
});

test('rules, sets and elements round-trip', () => {
  const rule: RuleSpec = { family: 'ip6', table: 'nftproxy', chain: 'services', exprs: EVERY_EXPR.slice(0, 8), comment: 'masquerade all clusterIP traffic', handle: 42n };
  const w = new NetlinkWriter();
  encodeRule(w, rule);
  assert.deepEqual(decodeRule('ip6', w.bytes()), rule);
  const set: SetSpec = { family: 'ip', table: 'nftproxy', name: 'affinity-x', flags: 0x30, keyType: 7, keyLen: 4, id: 3, timeoutMs: 10_800_000n, size: 65535, keyByteOrder: 2, comment: 'c' };
  const w2 = new NetlinkWriter();
  encodeSet(w2, set);
  assert.deepEqual(decodeSet('ip', w2.bytes()), set);
  const els: ElementsSpec = { family: 'ip', table: 'nftproxy', set: 'service-ips', setId: 5, elements: [
    { key: b(10, 96, 0, 10, 6, 0, 0, 0, 0, 80, 0, 0), data: { verdict: { kind: 'goto', chain: 'service-X' } }, comment: 'default/web:http' },
    { key: b(1, 2, 3, 4), timeoutMs: 30_000n },
    { key: b(10, 0, 0, 0, 0, 80, 0, 0), keyEnd: b(10, 255, 255, 255, 0, 90, 0, 0), flags: 1 },
  ] };
  const w3 = new NetlinkWriter();
  encodeElements(w3, els, 0, els.elements.length, false);
  assert.deepEqual(decodeElements('ip', w3.bytes()), els);
});

test('an endpoint map (typeof userdata) and its addr . port elements round-trip', async () => {
  const { setSpec, elementSpec } = await import('../rules/lower.ts');
  for (const family of ['ip', 'ip6'] as const) {
    const set = { ...setSpec(family, 'nftproxy', { name: 'endpoint-map-0', key: ['numgen'], map: 'endpoint', comment: 'e' }), id: 1 };
    assert.ok(set.typeofUdata && set.typeofUdata.length > 0);
    const w = new NetlinkWriter();
    encodeSet(w, set);
    assert.deepEqual(decodeSet(family, w.bytes()), set);
    const ip = family === 'ip' ? '10.244.1.7' : 'fd00::7';
    const els: ElementsSpec = { family, table: 'nftproxy', set: 'endpoint-map-0', elements: [elementSpec(family, { set: 'endpoint-map-0', key: [{ type: 'numgen', value: 1025 }], endpoint: { ip, port: 8080 }, comment: 'ns/web:http' })] };
    assert.deepEqual([...els.elements[0].key], [1, 4, 0, 0], 'host-order u32 key');
    const w2 = new NetlinkWriter();
    encodeElements(w2, els, 0, 1, false);
    assert.deepEqual(decodeElements(family, w2.bytes()), els);
  }
});

test('a batch is BEGIN, messages, END with NLM_F_ACK only on the last message; big element lists are split under 64 KiB', () => {
  const elements = Array.from({ length: 5000 }, (_, i) => ({ key: b(10, 96, i >> 8, i & 255, 6, 0, 0, 0, 0, 80, 0, 0), data: { verdict: { kind: 'goto' as const, chain: `service-${i}` } } }));
  const ops: BatchOp[] = [
    { op: 'add', kind: 'table', table: { family: 'ip', name: 'nftproxy' } },
    { op: 'add', kind: 'elements', elements: { family: 'ip', table: 'nftproxy', set: 'service-ips', elements } },
    { op: 'flush', kind: 'chain', chain: { family: 'ip', table: 'nftproxy', name: 'services' } },
  ];
  const batch = encodeBatch(ops, { seqStart: 100, genId: 7 });
  const msgs = parseMessages(batch.buffer);
  assert.equal(msgs[0].type, 0x10);
  assert.equal(read.u32be(attrMap(msgs[0].payload).get(1)!), 7, 'NFNL_BATCH_GENID');
  assert.equal(msgs.at(-1)!.type, 0x11);
  const body = msgs.slice(1, -1);
  assert.equal(body.length, batch.messages);
  assert.ok(body.length > 4, 'elements split across several NEWSETELEM messages');
  for (const m of body.slice(0, -1)) assert.equal(m.flags & NLM_F.ACK, 0);
  assert.equal(body.at(-1)!.flags & NLM_F.ACK, NLM_F.ACK);
  for (const m of body.filter((m) => m.type === 0x0a0c)) {
    const list = [...iterAttrs(m.payload)].find((a) => a.type === 3)!;
    assert.ok(list.data.length <= MAX_ELEMENTS_BYTES + 200);
  }
  const total = body.filter((m) => m.type === 0x0a0c).reduce((n, m) => n + decodeElements('ip', m.payload).elements.length, 0);
  assert.equal(total, 5000);
  assert.equal(batch.opIndexBySeq.get(body.at(-1)!.seq), 2);
  assert.equal(batch.lastSeq, body.at(-1)!.seq);
});

test('NLMSG_ERROR replies: ACK, capped error with extended-ACK message and offset, uncapped error', () => {
  const mk = (flags: number, error: number, tail: Buffer) => {
    const h = Buffer.alloc(16 + 4 + 16);
    h.writeUInt32LE(16 + 4 + 16 + tail.length, 0); h.writeUInt16LE(NLMSG.ERROR, 4); h.writeUInt16LE(flags, 6); h.writeUInt32LE(9, 8);
    h.writeInt32LE(error, 16); h.writeUInt32LE(64, 20); h.writeUInt16LE(0x0a06, 24); h.writeUInt32LE(9, 28);
    return Buffer.concat([h, tail]);
  };
  const ack = parseError(parseMessages(mk(NLM_F.CAPPED, 0, Buffer.alloc(0)))[0]);
  assert.equal(ack.error, 0);
  const w = new NetlinkWriter(64);
  w.attrStr(1, 'Attribute failed policy validation');
  w.attrU32le(2, 36);
  const capped = parseError(parseMessages(mk(NLM_F.CAPPED | NLM_F.ACK_TLVS, -34, Buffer.from(w.bytes())))[0]);
  assert.equal(capped.error, -34);
  assert.equal(capped.extAckMessage, 'Attribute failed policy validation');
  assert.equal(capped.attrOffset, 36);
  assert.equal(capped.requestType, 0x0a06);
  const uncapped = parseError(parseMessages(mk(0, -2, Buffer.alloc(48)))[0]);
  assert.equal(uncapped.error, -2);
  assert.equal(errnoText(-2), 'ENOENT (No such file or directory)');
});
