/**
 * nf_tables expressions: encoder and decoder side by side, one entry per `Expr['type']`.
 *
 * Wire form (linux/netfilter/nf_tables.h): each expression is
 *   NFTA_LIST_ELEM(1) { NFTA_EXPR_NAME(1) = "<name>\0", NFTA_EXPR_DATA(2) = { expression attributes } }
 * inside NFTA_RULE_EXPRESSIONS. Attribute numbers below are from nf_tables.h (6.18); the order written is
 * libnftnl's, so our bytes equal nft 1.0.6's (reference nftables-netlink.md §4). All numbers are big-endian u32
 * unless noted. Register values are as in NFT_REG (types.ts).
 */
import type { Expr, NftData, Verdict } from './types.ts';
import type { NetlinkWriter } from './attrs.ts';
import { attrMap, iterAttrs, read } from './attrs.ts';

/** nf_tables.h enum nft_list_attributes / nft_expr_attributes. */
export const NFTA_LIST_ELEM = 1;
export const NFTA_EXPR = { NAME: 1, DATA: 2 } as const;
/** nf_tables.h enum nft_data_attributes / nft_verdict_attributes. */
export const NFTA_DATA = { VALUE: 1, VERDICT: 2 } as const;
export const NFTA_VERDICT = { CODE: 1, CHAIN: 2, CHAIN_ID: 3 } as const;
/** linux/netfilter.h NF_DROP 0, NF_ACCEPT 1; nf_tables.h enum nft_verdicts. */
export const VERDICT_CODE = { drop: 0, accept: 1, continue: -1, break: -2, jump: -3, goto: -4, return: -5 } as const;

/** Attribute numbers of each expression (nf_tables.h enum nft_<expr>_attributes). */
const A = {
  payload: { DREG: 1, BASE: 2, OFFSET: 3, LEN: 4 },
  meta: { DREG: 1, KEY: 2, SREG: 3 },
  cmp: { SREG: 1, OP: 2, DATA: 3 },
  range: { SREG: 1, OP: 2, FROM_DATA: 3, TO_DATA: 4 },
  bitwise: { SREG: 1, DREG: 2, LEN: 3, MASK: 4, XOR: 5, OP: 6 },
  lookup: { SET: 1, SREG: 2, DREG: 3, SET_ID: 4, FLAGS: 5 },
  immediate: { DREG: 1, DATA: 2 },
  nat: { TYPE: 1, FAMILY: 2, REG_ADDR_MIN: 3, REG_ADDR_MAX: 4, REG_PROTO_MIN: 5, REG_PROTO_MAX: 6, FLAGS: 7 },
  masq: { FLAGS: 1, REG_PROTO_MIN: 2, REG_PROTO_MAX: 3 },
  numgen: { DREG: 1, MODULUS: 2, TYPE: 3, OFFSET: 4 },
  ct: { DREG: 1, KEY: 2, DIRECTION: 3, SREG: 4 },
  fib: { DREG: 1, RESULT: 2, FLAGS: 3 },
  reject: { TYPE: 1, ICMP_CODE: 2 },
  counter: { BYTES: 1, PACKETS: 2 },
  dynset: { SET_NAME: 1, SET_ID: 2, OP: 3, SREG_KEY: 4, SREG_DATA: 5, TIMEOUT: 6, FLAGS: 9 },
} as const;

/** Writes NFTA_DATA_* for a value or a verdict, inside an already-open nest. */
export function writeData(w: NetlinkWriter, d: NftData): void {
  if ('value' in d) {
    w.attrBytes(NFTA_DATA.VALUE, d.value);
    return;
  }
  const v = w.nest(NFTA_DATA.VERDICT);
  w.attrU32be(NFTA_VERDICT.CODE, VERDICT_CODE[d.verdict.kind]);
  if (d.verdict.kind === 'jump' || d.verdict.kind === 'goto') w.attrStr(NFTA_VERDICT.CHAIN, d.verdict.chain);
  w.end(v);
}

/** Reads an NFTA_DATA_* nest payload. @throws Error on an unknown verdict code. */
export function readData(b: Buffer): NftData {
  const m = attrMap(b);
  const value = m.get(NFTA_DATA.VALUE);
  if (value) return { value: read.bytes(value) };
  const verdict = m.get(NFTA_DATA.VERDICT);
  if (!verdict) throw new Error('NFTA_DATA has neither VALUE nor VERDICT');
  return { verdict: readVerdict(verdict) };
}

/** Reads an NFTA_DATA_VERDICT payload. @throws Error on an unknown code. */
export function readVerdict(b: Buffer): Verdict {
  const m = attrMap(b);
  const code = read.s32be(m.get(NFTA_VERDICT.CODE)!);
  const chain = m.has(NFTA_VERDICT.CHAIN) ? read.str(m.get(NFTA_VERDICT.CHAIN)!) : '';
  switch (code) {
    case 0: return { kind: 'drop' };
    case 1: return { kind: 'accept' };
    case -1: return { kind: 'continue' };
    case -2: return { kind: 'break' };
    case -5: return { kind: 'return' };
    case -3: return { kind: 'jump', chain };
    case -4: return { kind: 'goto', chain };
    default: throw new Error(`unknown verdict code ${code}`);
  }
}

function dataAttr(w: NetlinkWriter, type: number, d: NftData): void {
  const s = w.nest(type);
  writeData(w, d);
  w.end(s);
}

const opt = (w: NetlinkWriter, type: number, v: number | undefined) => { if (v !== undefined) w.attrU32be(type, v); };
const u32 = (m: Map<number, Buffer>, t: number): number => read.u32be(m.get(t)!);
const u32opt = (m: Map<number, Buffer>, t: number): number | undefined => (m.has(t) ? read.u32be(m.get(t)!) : undefined);
const value = (m: Map<number, Buffer>, t: number): Uint8Array => {
  const d = readData(m.get(t)!);
  if (!('value' in d)) throw new Error(`attribute ${t}: expected a value, got a verdict`);
  return d.value;
};

type Codec<T extends Expr['type']> = {
  name: string;
  encode(w: NetlinkWriter, e: Extract<Expr, { type: T }>): void;
  decode(m: Map<number, Buffer>): Extract<Expr, { type: T }>;
};

/** One codec per expression type; exhaustive by construction (`Record` over the union). */
const CODECS: { [T in Exclude<Expr['type'], 'opaque'>]: Codec<T> } = {
  // payload: DREG, BASE, OFFSET, LEN
  payload: {
    name: 'payload',
    encode(w, e) { w.attrU32be(A.payload.DREG, e.dreg); w.attrU32be(A.payload.BASE, e.base); w.attrU32be(A.payload.OFFSET, e.offset); w.attrU32be(A.payload.LEN, e.len); },
    decode: (m) => ({ type: 'payload', dreg: u32(m, A.payload.DREG), base: u32(m, A.payload.BASE), offset: u32(m, A.payload.OFFSET), len: u32(m, A.payload.LEN) }),
  },
  // meta (load): KEY, DREG
  meta: {
    name: 'meta',
    encode(w, e) { w.attrU32be(A.meta.KEY, e.key); w.attrU32be(A.meta.DREG, e.dreg); },
    decode: (m) => ({ type: 'meta', key: u32(m, A.meta.KEY), dreg: u32(m, A.meta.DREG) }),
  },
  // meta (set): KEY, SREG
  meta_set: {
    name: 'meta',
    encode(w, e) { w.attrU32be(A.meta.KEY, e.key); w.attrU32be(A.meta.SREG, e.sreg); },
    decode: (m) => ({ type: 'meta_set', key: u32(m, A.meta.KEY), sreg: u32(m, A.meta.SREG) }),
  },
  // cmp: SREG, OP, DATA{VALUE}
  cmp: {
    name: 'cmp',
    encode(w, e) { w.attrU32be(A.cmp.SREG, e.sreg); w.attrU32be(A.cmp.OP, e.op); dataAttr(w, A.cmp.DATA, { value: e.data }); },
    decode: (m) => ({ type: 'cmp', sreg: u32(m, A.cmp.SREG), op: u32(m, A.cmp.OP), data: value(m, A.cmp.DATA) }),
  },
  // range: SREG, OP, FROM_DATA{VALUE}, TO_DATA{VALUE}
  range: {
    name: 'range',
    encode(w, e) { w.attrU32be(A.range.SREG, e.sreg); w.attrU32be(A.range.OP, e.op); dataAttr(w, A.range.FROM_DATA, { value: e.from }); dataAttr(w, A.range.TO_DATA, { value: e.to }); },
    decode: (m) => ({ type: 'range', sreg: u32(m, A.range.SREG), op: u32(m, A.range.OP), from: value(m, A.range.FROM_DATA), to: value(m, A.range.TO_DATA) }),
  },
  // bitwise: SREG, DREG, [OP], LEN, MASK{VALUE}, XOR{VALUE}
  bitwise: {
    name: 'bitwise',
    encode(w, e) {
      w.attrU32be(A.bitwise.SREG, e.sreg); w.attrU32be(A.bitwise.DREG, e.dreg); opt(w, A.bitwise.OP, e.op);
      w.attrU32be(A.bitwise.LEN, e.len); dataAttr(w, A.bitwise.MASK, { value: e.mask }); dataAttr(w, A.bitwise.XOR, { value: e.xor });
    },
    decode: (m) => {
      const e: Extract<Expr, { type: 'bitwise' }> = { type: 'bitwise', sreg: u32(m, A.bitwise.SREG), dreg: u32(m, A.bitwise.DREG), len: u32(m, A.bitwise.LEN), mask: value(m, A.bitwise.MASK), xor: value(m, A.bitwise.XOR) };
      const op = u32opt(m, A.bitwise.OP);
      if (op !== undefined) e.op = op;
      return e;
    },
  },
  // lookup: SREG, [DREG], SET, [SET_ID], [FLAGS]
  lookup: {
    name: 'lookup',
    encode(w, e) {
      w.attrU32be(A.lookup.SREG, e.sreg); opt(w, A.lookup.DREG, e.dreg); w.attrStr(A.lookup.SET, e.set);
      opt(w, A.lookup.SET_ID, e.setId); if (e.flags) w.attrU32be(A.lookup.FLAGS, e.flags);
    },
    decode: (m) => {
      const e: Extract<Expr, { type: 'lookup' }> = { type: 'lookup', sreg: u32(m, A.lookup.SREG), set: read.str(m.get(A.lookup.SET)!) };
      const dreg = u32opt(m, A.lookup.DREG); if (dreg !== undefined) e.dreg = dreg;
      const id = u32opt(m, A.lookup.SET_ID); if (id !== undefined) e.setId = id;
      const flags = u32opt(m, A.lookup.FLAGS); if (flags) e.flags = flags;
      return e;
    },
  },
  // immediate: DREG, DATA{VALUE | VERDICT{CODE, [CHAIN]}}
  immediate: {
    name: 'immediate',
    encode(w, e) { w.attrU32be(A.immediate.DREG, e.dreg); dataAttr(w, A.immediate.DATA, e.data); },
    decode: (m) => ({ type: 'immediate', dreg: u32(m, A.immediate.DREG), data: readData(m.get(A.immediate.DATA)!) }),
  },
  // nat: TYPE, FAMILY, [REG_ADDR_MIN], [REG_ADDR_MAX], [REG_PROTO_MIN], [REG_PROTO_MAX], [FLAGS]
  nat: {
    name: 'nat',
    encode(w, e) {
      w.attrU32be(A.nat.TYPE, e.natType); w.attrU32be(A.nat.FAMILY, e.family);
      opt(w, A.nat.REG_ADDR_MIN, e.regAddrMin); opt(w, A.nat.REG_ADDR_MAX, e.regAddrMax);
      opt(w, A.nat.REG_PROTO_MIN, e.regProtoMin); opt(w, A.nat.REG_PROTO_MAX, e.regProtoMax); opt(w, A.nat.FLAGS, e.flags);
    },
    decode: (m) => {
      const e: Extract<Expr, { type: 'nat' }> = { type: 'nat', natType: u32(m, A.nat.TYPE), family: u32(m, A.nat.FAMILY) };
      const f: Array<[keyof typeof e, number]> = [['regAddrMin', A.nat.REG_ADDR_MIN], ['regAddrMax', A.nat.REG_ADDR_MAX], ['regProtoMin', A.nat.REG_PROTO_MIN], ['regProtoMax', A.nat.REG_PROTO_MAX], ['flags', A.nat.FLAGS]];
      for (const [k, t] of f) { const v = u32opt(m, t); if (v !== undefined) (e as Record<string, unknown>)[k] = v; }
      return e;
    },
  },
  // masq: [FLAGS], [REG_PROTO_MIN], [REG_PROTO_MAX]
  masq: {
    name: 'masq',
    encode(w, e) { opt(w, A.masq.FLAGS, e.flags); opt(w, A.masq.REG_PROTO_MIN, e.regProtoMin); opt(w, A.masq.REG_PROTO_MAX, e.regProtoMax); },
    decode: (m) => {
      const e: Extract<Expr, { type: 'masq' }> = { type: 'masq' };
      const flags = u32opt(m, A.masq.FLAGS); if (flags) e.flags = flags;
      const a = u32opt(m, A.masq.REG_PROTO_MIN); if (a !== undefined) e.regProtoMin = a;
      const b = u32opt(m, A.masq.REG_PROTO_MAX); if (b !== undefined) e.regProtoMax = b;
      return e;
    },
  },
  // numgen: DREG, MODULUS, TYPE, [OFFSET]
  numgen: {
    name: 'numgen',
    encode(w, e) { w.attrU32be(A.numgen.DREG, e.dreg); w.attrU32be(A.numgen.MODULUS, e.modulus); w.attrU32be(A.numgen.TYPE, e.ngType); opt(w, A.numgen.OFFSET, e.offset); },
    decode: (m) => {
      const e: Extract<Expr, { type: 'numgen' }> = { type: 'numgen', dreg: u32(m, A.numgen.DREG), modulus: u32(m, A.numgen.MODULUS), ngType: u32(m, A.numgen.TYPE) };
      const off = u32opt(m, A.numgen.OFFSET); if (off !== undefined) e.offset = off;
      return e;
    },
  },
  // ct (load): KEY, DREG, [DIRECTION u8]
  ct: {
    name: 'ct',
    encode(w, e) { w.attrU32be(A.ct.KEY, e.key); w.attrU32be(A.ct.DREG, e.dreg); if (e.direction !== undefined) w.attrU8(A.ct.DIRECTION, e.direction); },
    decode: (m) => {
      const e: Extract<Expr, { type: 'ct' }> = { type: 'ct', key: u32(m, A.ct.KEY), dreg: u32(m, A.ct.DREG) };
      if (m.has(A.ct.DIRECTION)) e.direction = read.u8(m.get(A.ct.DIRECTION)!);
      return e;
    },
  },
  // ct (set): KEY, [DIRECTION u8], SREG
  ct_set: {
    name: 'ct',
    encode(w, e) { w.attrU32be(A.ct.KEY, e.key); if (e.direction !== undefined) w.attrU8(A.ct.DIRECTION, e.direction); w.attrU32be(A.ct.SREG, e.sreg); },
    decode: (m) => {
      const e: Extract<Expr, { type: 'ct_set' }> = { type: 'ct_set', key: u32(m, A.ct.KEY), sreg: u32(m, A.ct.SREG) };
      if (m.has(A.ct.DIRECTION)) e.direction = read.u8(m.get(A.ct.DIRECTION)!);
      return e;
    },
  },
  // fib: FLAGS, RESULT, DREG
  fib: {
    name: 'fib',
    encode(w, e) { w.attrU32be(A.fib.FLAGS, e.flags); w.attrU32be(A.fib.RESULT, e.result); w.attrU32be(A.fib.DREG, e.dreg); },
    decode: (m) => ({ type: 'fib', flags: u32(m, A.fib.FLAGS), result: u32(m, A.fib.RESULT), dreg: u32(m, A.fib.DREG) }),
  },
  // reject: TYPE, ICMP_CODE (u8)
  reject: {
    name: 'reject',
    encode(w, e) { w.attrU32be(A.reject.TYPE, e.rejectType); w.attrU8(A.reject.ICMP_CODE, e.icmpCode); },
    decode: (m) => ({ type: 'reject', rejectType: u32(m, A.reject.TYPE), icmpCode: m.has(A.reject.ICMP_CODE) ? read.u8(m.get(A.reject.ICMP_CODE)!) : 0 }),
  },
  // counter: [BYTES u64], [PACKETS u64]; nft sends an empty nest
  counter: {
    name: 'counter',
    encode(w, e) { if (e.bytes !== undefined) w.attrU64be(A.counter.BYTES, e.bytes); if (e.packets !== undefined) w.attrU64be(A.counter.PACKETS, e.packets); },
    decode: (m) => {
      const e: Extract<Expr, { type: 'counter' }> = { type: 'counter' };
      if (m.has(A.counter.BYTES)) e.bytes = read.u64be(m.get(A.counter.BYTES)!);
      if (m.has(A.counter.PACKETS)) e.packets = read.u64be(m.get(A.counter.PACKETS)!);
      return e;
    },
  },
  // dynset: SREG_KEY, [SREG_DATA], OP, [TIMEOUT u64 ms], SET_NAME, [SET_ID], [FLAGS]
  dynset: {
    name: 'dynset',
    encode(w, e) {
      w.attrU32be(A.dynset.SREG_KEY, e.sregKey); opt(w, A.dynset.SREG_DATA, e.sregData); w.attrU32be(A.dynset.OP, e.op);
      if (e.timeoutMs !== undefined) w.attrU64be(A.dynset.TIMEOUT, e.timeoutMs);
      w.attrStr(A.dynset.SET_NAME, e.set); opt(w, A.dynset.SET_ID, e.setId); if (e.flags) w.attrU32be(A.dynset.FLAGS, e.flags);
    },
    decode: (m) => {
      const e: Extract<Expr, { type: 'dynset' }> = { type: 'dynset', op: u32(m, A.dynset.OP), set: read.str(m.get(A.dynset.SET_NAME)!), sregKey: u32(m, A.dynset.SREG_KEY) };
      const sd = u32opt(m, A.dynset.SREG_DATA); if (sd !== undefined) e.sregData = sd;
      const id = u32opt(m, A.dynset.SET_ID); if (id !== undefined) e.setId = id;
      if (m.has(A.dynset.TIMEOUT)) { const t = read.u64be(m.get(A.dynset.TIMEOUT)!); if (t !== 0n) e.timeoutMs = t; }
      const flags = u32opt(m, A.dynset.FLAGS); if (flags) e.flags = flags;
      return e;
    },
  },
};

/** Writes one NFTA_LIST_ELEM{NAME, DATA} for `e`. Opaque expressions are written back byte for byte. */
export function encodeExpr(w: NetlinkWriter, e: Expr): void {
  const elem = w.nest(NFTA_LIST_ELEM);
  if (e.type === 'opaque') {
    w.attrStr(NFTA_EXPR.NAME, e.name);
    w.attrBytes(NFTA_EXPR.DATA | 0x8000, e.data);
  } else {
    const codec = CODECS[e.type] as Codec<typeof e.type>;
    w.attrStr(NFTA_EXPR.NAME, codec.name);
    const d = w.nest(NFTA_EXPR.DATA);
    codec.encode(w, e as never);
    w.end(d);
  }
  w.end(elem);
}

/**
 * Decodes one expression from its name and NFTA_EXPR_DATA payload. Names we do not know, and known names whose
 * attributes we cannot read, become `{ type: 'opaque' }` so they are never dropped.
 */
export function decodeExpr(name: string, data: Buffer): Expr {
  try {
    const m = attrMap(data);
    switch (name) {
      case 'payload': return m.has(A.payload.DREG) ? CODECS.payload.decode(m) : opaque(name, data);
      case 'meta': return m.has(A.meta.SREG) ? CODECS.meta_set.decode(m) : CODECS.meta.decode(m);
      case 'ct': return m.has(A.ct.SREG) ? CODECS.ct_set.decode(m) : CODECS.ct.decode(m);
      case 'cmp': case 'range': case 'bitwise': case 'lookup': case 'immediate': case 'nat': case 'masq':
      case 'numgen': case 'fib': case 'reject': case 'counter': case 'dynset':
        return (CODECS[name] as Codec<Exclude<Expr['type'], 'opaque'>>).decode(m);
      default: return opaque(name, data);
    }
  } catch {
    return opaque(name, data);
  }
}

function opaque(name: string, data: Buffer): Expr {
  return { type: 'opaque', name, data: new Uint8Array(data) };
}

/** Decodes NFTA_RULE_EXPRESSIONS' payload (a list of NFTA_LIST_ELEM). */
export function decodeExprList(b: Buffer): Expr[] {
  const out: Expr[] = [];
  for (const elem of iterAttrs(b)) {
    const m = attrMap(elem.data);
    const name = read.str(m.get(NFTA_EXPR.NAME)!);
    out.push(decodeExpr(name, m.get(NFTA_EXPR.DATA) ?? Buffer.alloc(0)));
  }
  return out;
}
