/**
 * nf_tables objects — tables, chains, rules, sets and set elements — encoded as the payload of NEW and DEL messages
 * and decoded from the kernel's dump replies. Attribute numbers are from linux/netfilter/nf_tables.h (6.18);
 * the write order is libnftnl 1.2.4's, verified byte for byte in reference nftables-netlink.md §3.
 * Userdata TLVs (u8 type, u8 len, value) follow libnftnl's `udata.h`: comment is type 0 for tables, chains, rules and
 * elements; sets use KEYBYTEORDER 0, DATABYTEORDER 1 (u32 host order) and COMMENT 7.
 */
import type { ChainSpec, ElementSpec, ElementsSpec, RuleSpec, SetSpec, TableFamily, TableSpec } from './types.ts';
import { FAMILY_NUMBER, NFPROTO } from './types.ts';
import type { NetlinkWriter } from './attrs.ts';
import { attrMap, iterAttrs, read } from './attrs.ts';
import { decodeExprList, encodeExpr, readData, writeData } from './expr.ts';

/** nf_tables.h enum nft_table_attributes. */
export const NFTA_TABLE = { NAME: 1, FLAGS: 2, USE: 3, HANDLE: 4, USERDATA: 6, OWNER: 7 } as const;
/** nf_tables.h enum nft_chain_attributes and enum nft_hook_attributes. */
export const NFTA_CHAIN = { TABLE: 1, HANDLE: 2, NAME: 3, HOOK: 4, POLICY: 5, USE: 6, TYPE: 7, COUNTERS: 8, FLAGS: 10, ID: 11, USERDATA: 12 } as const;
export const NFTA_HOOK = { HOOKNUM: 1, PRIORITY: 2, DEV: 3 } as const;
/** nf_tables.h enum nft_rule_attributes. */
export const NFTA_RULE = { TABLE: 1, CHAIN: 2, HANDLE: 3, EXPRESSIONS: 4, POSITION: 6, USERDATA: 7, ID: 9, POSITION_ID: 10, CHAIN_ID: 11 } as const;
/** nf_tables.h enum nft_set_attributes and nft_set_desc_attributes, nft_set_field_attributes. */
export const NFTA_SET = {
  TABLE: 1, NAME: 2, FLAGS: 3, KEY_TYPE: 4, KEY_LEN: 5, DATA_TYPE: 6, DATA_LEN: 7, POLICY: 8, DESC: 9, ID: 10,
  TIMEOUT: 11, GC_INTERVAL: 12, USERDATA: 13, HANDLE: 16, EXPR: 17, EXPRESSIONS: 18, TYPE: 19, COUNT: 20,
} as const;
export const NFTA_SET_DESC = { SIZE: 1, CONCAT: 2 } as const;
export const NFTA_SET_FIELD_LEN = 1;
/** nf_tables.h enum nft_set_elem_list_attributes and nft_set_elem_attributes. */
export const NFTA_SET_ELEM_LIST = { TABLE: 1, SET: 2, ELEMENTS: 3, SET_ID: 4 } as const;
export const NFTA_SET_ELEM = { KEY: 1, DATA: 2, FLAGS: 3, TIMEOUT: 4, EXPIRATION: 5, USERDATA: 6, EXPR: 7, OBJREF: 9, KEY_END: 10, EXPRESSIONS: 11 } as const;
/** libnftnl udata.h: NFTNL_UDATA_SET_KEYBYTEORDER / DATABYTEORDER / COMMENT; NFTNL_UDATA_*_COMMENT = 0 elsewhere. */
export const UDATA_SET = { KEYBYTEORDER: 0, DATABYTEORDER: 1, KEY_TYPEOF: 3, DATA_TYPEOF: 4, COMMENT: 7 } as const;
export const UDATA_COMMENT = 0;
/** linux/netfilter.h NF_DROP / NF_ACCEPT as chain policies. */
const POLICY_NUM = { drop: 0, accept: 1 } as const;
/** Largest NFTA_SET_ELEM_LIST_ELEMENTS payload we pack in one message (an attribute holds at most 64 KiB). */
export const MAX_ELEMENTS_BYTES = 60_000;

const utf8 = new TextEncoder();

/** A single comment TLV `00 <len> text\0`, as libnftnl writes table, chain, rule and element comments. */
export function commentUdata(comment: string, type = UDATA_COMMENT): Uint8Array {
  const text = utf8.encode(comment);
  if (text.length + 1 > 255) throw new RangeError(`comment ${JSON.stringify(comment)} is ${text.length} bytes; at most 254 fit in userdata`);
  const out = new Uint8Array(text.length + 3);
  out[0] = type; out[1] = text.length + 1; out.set(text, 2);
  return out;
}

/** Reads the TLV of `type` from userdata, as a string (comment) or a host-order u32. */
function udataGet(b: Buffer, type: number): Buffer | undefined {
  let p = 0;
  while (p + 2 <= b.length) {
    const t = b[p], len = b[p + 1];
    if (p + 2 + len > b.length) return undefined;
    if (t === type) return b.subarray(p + 2, p + 2 + len);
    p += 2 + len;
  }
  return undefined;
}
/** The raw TLVs (header included) of the given types, concatenated in their order in `b`, or undefined. */
function udataTlvs(b: Buffer, ...types: number[]): Uint8Array | undefined {
  const out: Buffer[] = [];
  let p = 0;
  while (p + 2 <= b.length) {
    const len = b[p + 1];
    if (p + 2 + len > b.length) break;
    if (types.includes(b[p])) out.push(b.subarray(p, p + 2 + len));
    p += 2 + len;
  }
  return out.length ? new Uint8Array(Buffer.concat(out)) : undefined;
}
const udataStr = (b: Buffer | undefined, type: number) => { const v = b && udataGet(b, type); return v ? read.str(v) : undefined; };

/** Set userdata: KEYBYTEORDER, DATABYTEORDER (u32 host order), the raw typeof TLVs and COMMENT, each only when given. */
export function setUdata(s: Pick<SetSpec, 'keyByteOrder' | 'dataByteOrder' | 'typeofUdata' | 'comment'>): Uint8Array | null {
  const parts: number[] = [];
  const u32 = (type: number, v: number) => parts.push(type, 4, v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, (v >>> 24) & 0xff);
  if (s.keyByteOrder !== undefined) u32(UDATA_SET.KEYBYTEORDER, s.keyByteOrder);
  if (s.dataByteOrder !== undefined) u32(UDATA_SET.DATABYTEORDER, s.dataByteOrder);
  if (s.typeofUdata !== undefined) for (const b of s.typeofUdata) parts.push(b);
  if (s.comment !== undefined) parts.push(...commentUdata(s.comment, UDATA_SET.COMMENT));
  return parts.length ? new Uint8Array(parts) : null;
}

// ----- encoders (payload after nfgenmsg) ---------------------------------------------------------------------

/** NEWTABLE payload: NAME, FLAGS, [USERDATA]. DEL/DESTROY: NAME only (`forDelete`). */
export function encodeTable(w: NetlinkWriter, t: TableSpec, forDelete = false): void {
  w.attrStr(NFTA_TABLE.NAME, t.name);
  if (forDelete) return;
  w.attrU32be(NFTA_TABLE.FLAGS, t.flags ?? 0);
  if (t.comment !== undefined) w.attrBytes(NFTA_TABLE.USERDATA, commentUdata(t.comment));
}

/** NEWCHAIN payload: TABLE, NAME, [TYPE, POLICY, HOOK{HOOKNUM, PRIORITY}], [USERDATA]. DEL/flush: TABLE, NAME. */
export function encodeChain(w: NetlinkWriter, c: ChainSpec, forDelete = false): void {
  w.attrStr(NFTA_CHAIN.TABLE, c.table);
  w.attrStr(NFTA_CHAIN.NAME, c.name);
  if (forDelete) return;
  if (c.hook) {
    w.attrStr(NFTA_CHAIN.TYPE, c.hook.type);
    if (c.hook.policy !== undefined) w.attrU32be(NFTA_CHAIN.POLICY, POLICY_NUM[c.hook.policy]);
    const h = w.nest(NFTA_CHAIN.HOOK);
    w.attrU32be(NFTA_HOOK.HOOKNUM, c.hook.hooknum);
    w.attrU32be(NFTA_HOOK.PRIORITY, c.hook.priority);
    w.end(h);
  }
  if (c.comment !== undefined) w.attrBytes(NFTA_CHAIN.USERDATA, commentUdata(c.comment));
}

/** Flush chain = DELRULE with NFTA_RULE_TABLE and NFTA_RULE_CHAIN only (as nft sends it). */
export function encodeChainFlush(w: NetlinkWriter, c: Pick<ChainSpec, 'table' | 'name'>): void {
  w.attrStr(NFTA_RULE.TABLE, c.table);
  w.attrStr(NFTA_RULE.CHAIN, c.name);
}

/** NEWRULE payload: TABLE, CHAIN, [HANDLE], [POSITION], EXPRESSIONS, [USERDATA]. DEL: TABLE, CHAIN, HANDLE. */
export function encodeRule(w: NetlinkWriter, r: RuleSpec, forDelete = false): void {
  w.attrStr(NFTA_RULE.TABLE, r.table);
  w.attrStr(NFTA_RULE.CHAIN, r.chain);
  if (r.handle !== undefined) w.attrU64be(NFTA_RULE.HANDLE, r.handle);
  if (forDelete) return;
  if (r.position !== undefined) w.attrU64be(NFTA_RULE.POSITION, r.position);
  const ex = w.nest(NFTA_RULE.EXPRESSIONS);
  for (const e of r.exprs) encodeExpr(w, e);
  w.end(ex);
  if (r.comment !== undefined) w.attrBytes(NFTA_RULE.USERDATA, commentUdata(r.comment));
}

/**
 * NEWSET payload: TABLE, NAME, FLAGS, KEY_TYPE, KEY_LEN, [DATA_TYPE, DATA_LEN], ID, [DESC{SIZE, CONCAT}], [TIMEOUT],
 * [USERDATA]. DEL/flush: TABLE, NAME.
 * @throws Error when `id` is missing for a NEWSET (the kernel requires NFTA_SET_ID: EINVAL otherwise).
 */
export function encodeSet(w: NetlinkWriter, s: SetSpec, forDelete = false): void {
  w.attrStr(NFTA_SET.TABLE, s.table);
  w.attrStr(NFTA_SET.NAME, s.name);
  if (forDelete) return;
  if (s.id === undefined) throw new Error(`set ${s.name}: NFTA_SET_ID is mandatory in NEWSET`);
  w.attrU32be(NFTA_SET.FLAGS, s.flags);
  w.attrU32be(NFTA_SET.KEY_TYPE, s.keyType);
  w.attrU32be(NFTA_SET.KEY_LEN, s.keyLen);
  if (s.dataType !== undefined) {
    w.attrU32be(NFTA_SET.DATA_TYPE, s.dataType);
    w.attrU32be(NFTA_SET.DATA_LEN, s.dataLen ?? 0);
  }
  w.attrU32be(NFTA_SET.ID, s.id);
  if (s.size !== undefined || s.concatFieldLens) {
    const d = w.nest(NFTA_SET.DESC);
    if (s.size !== undefined) w.attrU32be(NFTA_SET_DESC.SIZE, s.size);
    if (s.concatFieldLens) {
      const c = w.nest(NFTA_SET_DESC.CONCAT);
      for (const len of s.concatFieldLens) {
        const e = w.nest(1);
        w.attrU32be(NFTA_SET_FIELD_LEN, len);
        w.end(e);
      }
      w.end(c);
    }
    w.end(d);
  }
  if (s.timeoutMs !== undefined) w.attrU64be(NFTA_SET.TIMEOUT, s.timeoutMs);
  const ud = setUdata(s);
  if (ud) w.attrBytes(NFTA_SET.USERDATA, ud);
}

/** One element nest body: FLAGS, TIMEOUT, KEY, KEY_END, DATA, USERDATA (libnftnl order). */
export function encodeElement(w: NetlinkWriter, e: ElementSpec, forDelete: boolean): void {
  if (e.flags) w.attrU32be(NFTA_SET_ELEM.FLAGS, e.flags);
  if (!forDelete && e.timeoutMs !== undefined) w.attrU64be(NFTA_SET_ELEM.TIMEOUT, e.timeoutMs);
  const k = w.nest(NFTA_SET_ELEM.KEY);
  w.attrBytes(1, e.key);
  w.end(k);
  if (e.keyEnd) {
    const ke = w.nest(NFTA_SET_ELEM.KEY_END);
    w.attrBytes(1, e.keyEnd);
    w.end(ke);
  }
  if (forDelete) return;
  if (e.data) {
    const d = w.nest(NFTA_SET_ELEM.DATA);
    writeData(w, e.data);
    w.end(d);
  }
  if (e.comment !== undefined) w.attrBytes(NFTA_SET_ELEM.USERDATA, w.derived(`comment\0${e.comment}`, () => commentUdata(e.comment!))); // encoded once per batch
}

/**
 * Splits the elements of `spec` into chunks whose encoded ELEMENTS nest stays under {@link MAX_ELEMENTS_BYTES}.
 * Returns index ranges `[start, end)`; an empty list gives one empty range (a flush, for DELSETELEM).
 */
export function chunkElements(w: NetlinkWriter, spec: ElementsSpec, forDelete: boolean): Array<[number, number]> {
  const n = spec.elements.length;
  if (n === 0) return [[0, 0]];
  // Encode each element once into scratch space to learn its size; cheap compared with the kernel's work.
  const ranges: Array<[number, number]> = [];
  const mark = w.pos;
  let start = 0, bytes = 0;
  for (let i = 0; i < n; i++) {
    const s = w.pos;
    const nest = w.nest((i - start + 1) & 0x7fff);
    encodeElement(w, spec.elements[i], forDelete);
    w.end(nest);
    const size = w.pos - s;
    w.pos = mark;
    if (bytes + size > MAX_ELEMENTS_BYTES && i > start) {
      ranges.push([start, i]);
      start = i;
      bytes = 0;
    }
    bytes += size;
  }
  ranges.push([start, n]);
  return ranges;
}

/**
 * NEWSETELEM/DELSETELEM payload for `elements[from, to)`: TABLE, SET, [SET_ID], ELEMENTS{1: {...}, 2: {...}}.
 * A DELSETELEM without elements (flush) writes SET then TABLE, as nft does.
 */
export function encodeElements(w: NetlinkWriter, spec: ElementsSpec, from: number, to: number, forDelete: boolean): void {
  if (to === from && forDelete) {
    w.attrStr(NFTA_SET_ELEM_LIST.SET, spec.set);
    w.attrStr(NFTA_SET_ELEM_LIST.TABLE, spec.table);
    return;
  }
  w.attrStr(NFTA_SET_ELEM_LIST.TABLE, spec.table);
  w.attrStr(NFTA_SET_ELEM_LIST.SET, spec.set);
  if (!forDelete && spec.setId !== undefined) w.attrU32be(NFTA_SET_ELEM_LIST.SET_ID, spec.setId);
  const list = w.nest(NFTA_SET_ELEM_LIST.ELEMENTS);
  for (let i = from; i < to; i++) {
    const nest = w.nest((i - from + 1) & 0x7fff);
    encodeElement(w, spec.elements[i], forDelete);
    w.end(nest);
  }
  w.end(list);
}

// ----- decoders (kernel dump replies) ------------------------------------------------------------------------

/** nfgenmsg family → our table family; null for families we do not program. */
export function tableFamilyOf(nfproto: number): TableFamily | null {
  return nfproto === NFPROTO.IPV4 ? 'ip' : nfproto === NFPROTO.IPV6 ? 'ip6' : null;
}

/** Decodes a NEWTABLE (dump) payload. */
export function decodeTable(family: TableFamily, b: Buffer): TableSpec {
  const m = attrMap(b);
  const t: TableSpec = { family, name: read.str(m.get(NFTA_TABLE.NAME)!) };
  if (m.has(NFTA_TABLE.FLAGS)) t.flags = read.u32be(m.get(NFTA_TABLE.FLAGS)!);
  if (m.has(NFTA_TABLE.HANDLE)) t.handle = read.u64be(m.get(NFTA_TABLE.HANDLE)!);
  const comment = udataStr(m.get(NFTA_TABLE.USERDATA), UDATA_COMMENT);
  if (comment !== undefined) t.comment = comment;
  return t;
}

/** Decodes a NEWCHAIN (dump) payload. @throws Error on an unknown chain type. */
export function decodeChain(family: TableFamily, b: Buffer): ChainSpec {
  const m = attrMap(b);
  const c: ChainSpec = { family, table: read.str(m.get(NFTA_CHAIN.TABLE)!), name: read.str(m.get(NFTA_CHAIN.NAME)!) };
  if (m.has(NFTA_CHAIN.HANDLE)) c.handle = read.u64be(m.get(NFTA_CHAIN.HANDLE)!);
  const hook = m.get(NFTA_CHAIN.HOOK);
  if (hook) {
    const h = attrMap(hook);
    const type = read.str(m.get(NFTA_CHAIN.TYPE)!);
    if (type !== 'filter' && type !== 'nat' && type !== 'route') throw new Error(`chain ${c.name}: unknown chain type ${JSON.stringify(type)}`);
    c.hook = { type, hooknum: read.u32be(h.get(NFTA_HOOK.HOOKNUM)!), priority: read.s32be(h.get(NFTA_HOOK.PRIORITY)!) };
    if (m.has(NFTA_CHAIN.POLICY)) c.hook.policy = read.u32be(m.get(NFTA_CHAIN.POLICY)!) === 0 ? 'drop' : 'accept';
  }
  const comment = udataStr(m.get(NFTA_CHAIN.USERDATA), UDATA_COMMENT);
  if (comment !== undefined) c.comment = comment;
  return c;
}

/** Decodes a NEWRULE (dump) payload. */
export function decodeRule(family: TableFamily, b: Buffer): RuleSpec {
  const m = attrMap(b);
  const r: RuleSpec = {
    family, table: read.str(m.get(NFTA_RULE.TABLE)!), chain: read.str(m.get(NFTA_RULE.CHAIN)!),
    exprs: m.has(NFTA_RULE.EXPRESSIONS) ? decodeExprList(m.get(NFTA_RULE.EXPRESSIONS)!) : [],
  };
  if (m.has(NFTA_RULE.HANDLE)) r.handle = read.u64be(m.get(NFTA_RULE.HANDLE)!);
  if (m.has(NFTA_RULE.POSITION)) r.position = read.u64be(m.get(NFTA_RULE.POSITION)!);
  const comment = udataStr(m.get(NFTA_RULE.USERDATA), UDATA_COMMENT);
  if (comment !== undefined) r.comment = comment;
  return r;
}

/** Decodes a NEWSET (dump) payload. */
export function decodeSet(family: TableFamily, b: Buffer): SetSpec {
  const m = attrMap(b);
  const s: SetSpec = {
    family, table: read.str(m.get(NFTA_SET.TABLE)!), name: read.str(m.get(NFTA_SET.NAME)!),
    flags: read.u32be(m.get(NFTA_SET.FLAGS) ?? Buffer.alloc(4)),
    keyType: read.u32be(m.get(NFTA_SET.KEY_TYPE) ?? Buffer.alloc(4)),
    keyLen: read.u32be(m.get(NFTA_SET.KEY_LEN)!),
  };
  if (m.has(NFTA_SET.DATA_TYPE)) s.dataType = read.u32be(m.get(NFTA_SET.DATA_TYPE)!);
  if (m.has(NFTA_SET.DATA_LEN)) s.dataLen = read.u32be(m.get(NFTA_SET.DATA_LEN)!);
  if (m.has(NFTA_SET.ID)) s.id = read.u32be(m.get(NFTA_SET.ID)!);
  if (m.has(NFTA_SET.TIMEOUT)) s.timeoutMs = read.u64be(m.get(NFTA_SET.TIMEOUT)!);
  if (m.has(NFTA_SET.HANDLE)) s.handle = read.u64be(m.get(NFTA_SET.HANDLE)!);
  const desc = m.get(NFTA_SET.DESC);
  if (desc) {
    const d = attrMap(desc);
    if (d.has(NFTA_SET_DESC.SIZE)) s.size = read.u32be(d.get(NFTA_SET_DESC.SIZE)!);
    const concat = d.get(NFTA_SET_DESC.CONCAT);
    if (concat) s.concatFieldLens = [...iterAttrs(concat)].map((f) => read.u32be(attrMap(f.data).get(NFTA_SET_FIELD_LEN)!));
  }
  const ud = m.get(NFTA_SET.USERDATA);
  if (ud) {
    const k = udataGet(ud, UDATA_SET.KEYBYTEORDER); if (k) s.keyByteOrder = k.readUInt32LE(0);
    const d = udataGet(ud, UDATA_SET.DATABYTEORDER); if (d) s.dataByteOrder = d.readUInt32LE(0);
    const t = udataTlvs(ud, 2, UDATA_SET.KEY_TYPEOF, UDATA_SET.DATA_TYPEOF, 5, 6); if (t) s.typeofUdata = t; // MERGE_ELEMENTS, TYPEOFs, EXPR, DATA_INTERVAL
    const c = udataStr(ud, UDATA_SET.COMMENT); if (c !== undefined) s.comment = c;
  }
  return s;
}

/** Decodes a NEWSETELEM (dump) payload into its list spec. */
export function decodeElements(family: TableFamily, b: Buffer): ElementsSpec {
  const m = attrMap(b);
  const spec: ElementsSpec = { family, table: read.str(m.get(NFTA_SET_ELEM_LIST.TABLE)!), set: read.str(m.get(NFTA_SET_ELEM_LIST.SET)!), elements: [] };
  if (m.has(NFTA_SET_ELEM_LIST.SET_ID)) spec.setId = read.u32be(m.get(NFTA_SET_ELEM_LIST.SET_ID)!);
  const list = m.get(NFTA_SET_ELEM_LIST.ELEMENTS);
  if (list) {
    for (const el of iterAttrs(list)) {
      const a = attrMap(el.data);
      const keyData = readData(a.get(NFTA_SET_ELEM.KEY)!);
      if (!('value' in keyData)) throw new Error(`set ${spec.set}: element key is a verdict`);
      const e: ElementSpec = { key: keyData.value };
      const ke = a.get(NFTA_SET_ELEM.KEY_END);
      if (ke) { const v = readData(ke); if ('value' in v) e.keyEnd = v.value; }
      if (a.has(NFTA_SET_ELEM.DATA)) e.data = readData(a.get(NFTA_SET_ELEM.DATA)!);
      if (a.has(NFTA_SET_ELEM.FLAGS)) { const f = read.u32be(a.get(NFTA_SET_ELEM.FLAGS)!); if (f) e.flags = f; }
      if (a.has(NFTA_SET_ELEM.TIMEOUT)) e.timeoutMs = read.u64be(a.get(NFTA_SET_ELEM.TIMEOUT)!);
      if (a.has(NFTA_SET_ELEM.EXPIRATION)) e.expirationMs = read.u64be(a.get(NFTA_SET_ELEM.EXPIRATION)!);
      const c = udataStr(a.get(NFTA_SET_ELEM.USERDATA), UDATA_COMMENT);
      if (c !== undefined) e.comment = c;
      spec.elements.push(e);
    }
  }
  return spec;
}

/** nfgenmsg family number of a table family. */
export const familyNumber = (f: TableFamily): number => FAMILY_NUMBER[f];
