/**
 * Lowering of the ruleset model (model.ts) to the netlink model (netlink/types.ts).
 *
 * Every statement lowers to exactly the expressions nft 1.0.6 generates for its rendered text (render.ts), with
 * the same registers, dependency expressions and byte orders. The golden tests (lower.test.ts) compare against
 * `nft --debug=netlink` captures in testdata/. Facts this file reproduces (nftables src/netlink_linearize.c):
 * - Register allocation: each statement starts at NFT_REG_1 and allocates ceil(len/4) 32-bit units per value;
 *   unit u is named NFT_REG_1 + u/4 when u % 4 == 0 (a 16-byte register), else NFT_REG32_00 + u. So
 *   `ip daddr . meta l4proto . th dport` loads into 1, 9, 10 and `ip6 daddr . meta l4proto . th dport` into 1, 2, 13.
 *   NAT statements use whole 16-byte registers: address in NFT_REG_1, port in NFT_REG_2.
 * - Prefix matches: a byte-aligned non-zero prefix loads only prefix/8 bytes (`ip daddr != 127.0.0.0/8` = payload
 *   len 1 + cmp neq); other prefixes load the whole address, then bitwise AND with the mask, then cmp.
 * - Host-order values (little-endian u32): meta mark, ct state, ct status, fib address type, numgen output.
 *   Network-order values: addresses and ports. meta l4proto is one byte.
 * - Single-bit flag tests (`ct state new`, `ct status dnat`) are bitwise AND + cmp neq 0.
 *
 * Pure: no I/O.
 */
import {
  BYTEORDER, CMP_OP, CT_KEY, CT_STATE_BIT, CT_STATUS_BIT, DATATYPE, DYNSET_OP, FAMILY_NUMBER, FIB_FLAG,
  FIB_RESULT, HOOK, ICMP_CODE, ICMPV6_CODE, LOOKUP_FLAG, META_KEY, NAT_FLAG, NAT_TYPE, NFT_DATA_VERDICT, NUMGEN_TYPE,
  PAYLOAD_BASE, REJECT_TYPE, RTN, SET_FLAG,
} from '../netlink/types.ts';
import type { ChainSpec, ElementSpec, Expr, RuleSpec, SetSpec, TableFamily, TableSpec, Verdict } from '../netlink/types.ts';
import { addrLen, parseAddr, parseCidr, prefixMask, writeAddr } from './addr.ts';
import type { Chain, Element, KeyField, KeyPart, KeyType, Rule, SetDef, Stmt } from './model.ts';
import { L4PROTO_NUMBER } from './model.ts';

/** Register name of 32-bit unit `u` counted from NFT_REG_1 (nft's netlink_put_register). */
export function regOfUnit(u: number): number {
  return u % 4 === 0 ? 1 + u / 4 : 8 + u;
}

/** Byte offset, within the 64-byte data register file, of register `reg` (1..4 or 8..23). */
export function regOffset(reg: number): number {
  if (reg >= 1 && reg <= 4) return (reg - 1) * 16;
  if (reg >= 8 && reg <= 23) return (reg - 8) * 4;
  throw new Error(`regOffset: ${reg} is not a data register`);
}

/** Little-endian u32 bytes (host order on x86/arm64), as the kernel holds meta mark, ct state, numgen values. */
export function hostU32(n: number): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n >>> 0, true);
  return b;
}

/** Big-endian u16 bytes (network order), as ports are in packets and registers. */
export function beU16(n: number): Uint8Array {
  return new Uint8Array([(n >> 8) & 0xff, n & 0xff]);
}

/** Length in bytes of a key type's value (unpadded). */
export function keyTypeLen(t: KeyType): number {
  switch (t) {
    case 'ipv4_addr': return 4;
    case 'ipv6_addr': return 16;
    case 'inet_proto': return 1;
    case 'inet_service': return 2;
    case 'numgen': return 4;
  }
}

const DATATYPE_OF: Record<KeyType, number> = {
  ipv4_addr: DATATYPE.IPADDR, ipv6_addr: DATATYPE.IP6ADDR, inet_proto: DATATYPE.INET_PROTOCOL, inet_service: DATATYPE.INET_SERVICE,
  numgen: DATATYPE.INTEGER,
};

/**
 * The userdata nft 1.0.6 writes for `typeof numgen random mod 1 : ip daddr . th dport` (and `ip6 daddr`): the
 * NFTNL_UDATA_SET_KEY_TYPEOF (3) and DATA_TYPEOF (4) TLVs, captured with `nft --debug=mnl` (nftables
 * src/expression.c / payload.c / numgen.c build_udata). nft needs them to print the map with `typeof` and its
 * elements as plain numbers.
 */
const ENDPOINT_MAP_TYPEOF_HEX: Record<TableFamily, string> = {
  ip: '031a0004170000000112000401000000010401000000020400000000043400040d000000012c0014000407000000010c00040c00000001040c0000000114000407000000010c00040b000000010402000000060400000000',
  ip6: '031a0004170000000112000401000000010401000000020400000000043400040d000000012c0014000407000000010c00040d0000000104090000000114000407000000010c00040b000000010402000000060400000000',
};

/** Register (32-bit unit) of the port after an address in NFT_REG_1 (ip: NFT_REG32_01 = 9; ip6: NFT_REG_2 = 2). */
export function endpointPortReg(family: TableFamily): number {
  return family === 'ip' ? 9 : 2;
}

/** Padded (4-byte units) total key length of a set key: concatenations pad every component; a single key does not. */
export function keyLen(types: readonly KeyType[]): number {
  if (types.length === 1) return keyTypeLen(types[0]);
  return types.reduce((n, t) => n + Math.ceil(keyTypeLen(t) / 4) * 4, 0);
}

function fieldLen(family: TableFamily, f: KeyField): number {
  return f === 'l4proto' ? 1 : f === 'dport' ? 2 : addrLen(family);
}

function addrOffset(family: TableFamily, f: 'saddr' | 'daddr'): number {
  // struct iphdr: saddr at 12, daddr at 16; struct ipv6hdr: saddr at 8, daddr at 24.
  if (family === 'ip') return f === 'saddr' ? 12 : 16;
  return f === 'saddr' ? 8 : 24;
}

function loadField(family: TableFamily, f: KeyField, dreg: number): Expr {
  switch (f) {
    case 'l4proto': return { type: 'meta', key: META_KEY.L4PROTO, dreg };
    case 'dport': return { type: 'payload', dreg, base: PAYLOAD_BASE.TRANSPORT, offset: 2, len: 2 };
    default: return { type: 'payload', dreg, base: PAYLOAD_BASE.NETWORK, offset: addrOffset(family, f), len: addrLen(family) };
  }
}

/** Loads a (concatenated) key into consecutive registers from NFT_REG_1; returns the expressions. */
function loadKey(family: TableFamily, key: readonly KeyField[]): Expr[] {
  const out: Expr[] = [];
  let unit = 0;
  for (const f of key) {
    out.push(loadField(family, f, regOfUnit(unit)));
    unit += Math.ceil(fieldLen(family, f) / 4);
  }
  return out;
}

const CT_STATE_BITS: Record<string, number> = {
  invalid: CT_STATE_BIT.INVALID, established: CT_STATE_BIT.ESTABLISHED, related: CT_STATE_BIT.RELATED,
  new: CT_STATE_BIT.NEW, untracked: CT_STATE_BIT.UNTRACKED,
};

/** IFNAMSIZ (linux/if.h). */
const IFNAMSIZ = 16;

function cmp(op: number, data: Uint8Array): Expr {
  return { type: 'cmp', sreg: 1, op, data };
}

/**
 * Lowers one statement to expressions (nft 1.0.6's exact encoding).
 * @throws Error on invalid values (address of the wrong family, bad CIDR, interface name too long, mod < 1, ...).
 */
export function lowerStmt(family: TableFamily, s: Stmt): Expr[] {
  switch (s.k) {
    case 'addr': {
      const c = parseCidr(family, s.cidr, `${s.field} match`);
      const full = addrLen(family);
      const op = s.neg ? CMP_OP.NEQ : CMP_OP.EQ;
      const offset = addrOffset(family, s.field);
      if (c.prefix === full * 8 || (c.prefix > 0 && c.prefix % 8 === 0)) {
        const len = c.prefix / 8;
        return [
          { type: 'payload', dreg: 1, base: PAYLOAD_BASE.NETWORK, offset, len },
          cmp(op, c.addr.slice(0, len)),
        ];
      }
      return [
        { type: 'payload', dreg: 1, base: PAYLOAD_BASE.NETWORK, offset, len: full },
        { type: 'bitwise', sreg: 1, dreg: 1, len: full, mask: prefixMask(full, c.prefix), xor: new Uint8Array(full) },
        cmp(op, c.addr),
      ];
    }
    case 'lookup': {
      const e: Expr = s.neg
        ? { type: 'lookup', sreg: 1, set: s.set, flags: LOOKUP_FLAG.INV }
        : { type: 'lookup', sreg: 1, set: s.set };
      return [...loadKey(family, s.key), e];
    }
    case 'vmap':
      return [...loadKey(family, s.key), { type: 'lookup', sreg: 1, set: s.map, dreg: 0 }];
    case 'l4proto':
      return [{ type: 'meta', key: META_KEY.L4PROTO, dreg: 1 }, cmp(CMP_OP.EQ, new Uint8Array([L4PROTO_NUMBER[s.proto]]))];
    case 'ctState':
    case 'ctStatus': {
      const bit = s.k === 'ctState' ? CT_STATE_BITS[s.state] : s.status === 'dnat' ? CT_STATUS_BIT.DST_NAT : CT_STATUS_BIT.SRC_NAT;
      return [
        { type: 'ct', key: s.k === 'ctState' ? CT_KEY.STATE : CT_KEY.STATUS, dreg: 1 },
        { type: 'bitwise', sreg: 1, dreg: 1, len: 4, mask: hostU32(bit), xor: hostU32(0) },
        cmp(CMP_OP.NEQ, hostU32(0)),
      ];
    }
    case 'fibLocal':
      return [
        { type: 'fib', dreg: 1, result: FIB_RESULT.ADDRTYPE, flags: s.addr === 'saddr' ? FIB_FLAG.SADDR : FIB_FLAG.DADDR },
        cmp(CMP_OP.EQ, hostU32(RTN.LOCAL)),
      ];
    case 'iifname': {
      const prefix = s.name.endsWith('*');
      const name = prefix ? s.name.slice(0, -1) : s.name;
      const bytes = new TextEncoder().encode(name);
      if (bytes.length >= IFNAMSIZ || bytes.length === 0 || name.includes('*')) throw new Error(`iifname: ${JSON.stringify(s.name)} is not a valid interface name (1..15 bytes, optional trailing *)`);
      let data: Uint8Array;
      if (prefix) data = bytes;
      else { data = new Uint8Array(IFNAMSIZ); data.set(bytes); }
      return [{ type: 'meta', key: META_KEY.IIFNAME, dreg: 1 }, cmp(s.neg ? CMP_OP.NEQ : CMP_OP.EQ, data)];
    }
    case 'markTest':
      return [
        { type: 'meta', key: META_KEY.MARK, dreg: 1 },
        { type: 'bitwise', sreg: 1, dreg: 1, len: 4, mask: hostU32(s.mask), xor: hostU32(0) },
        cmp(s.neg ? CMP_OP.NEQ : CMP_OP.EQ, hostU32(s.value)),
      ];
    case 'numgen':
      if (!Number.isInteger(s.mod) || s.mod < 1 || !Number.isInteger(s.value) || s.value < 0 || s.value >= s.mod) {
        throw new Error(`numgen: mod ${s.mod} value ${s.value} is invalid (need 0 <= value < mod)`);
      }
      return [
        { type: 'numgen', dreg: 1, modulus: s.mod, ngType: NUMGEN_TYPE.RANDOM, offset: 0 },
        cmp(CMP_OP.EQ, hostU32(s.value)),
      ];
    case 'markSet':
      return [
        { type: 'meta', key: META_KEY.MARK, dreg: 1 },
        s.op === 'or'
          ? { type: 'bitwise', sreg: 1, dreg: 1, len: 4, mask: hostU32(~s.bits), xor: hostU32(s.bits) }
          : { type: 'bitwise', sreg: 1, dreg: 1, len: 4, mask: hostU32(0xffffffff), xor: hostU32(s.bits) },
        { type: 'meta_set', key: META_KEY.MARK, sreg: 1 },
      ];
    case 'dnatMap':
      if (!Number.isInteger(s.mod) || s.mod < 1 || !Number.isInteger(s.offset) || s.offset < 0 || s.offset + s.mod > 0xffffffff) {
        throw new Error(`dnat map: mod ${s.mod} offset ${s.offset} is invalid (need mod >= 1, offset >= 0)`);
      }
      // nft 1.0.6: `[ numgen reg 1 = random mod N offset K ] [ lookup reg 1 set M dreg 1 ]
      // [ nat dnat ip addr_min reg 1 proto_min reg 9 ]` (ip6: proto_min reg 2); no NFTA_NAT_FLAGS.
      return [
        { type: 'numgen', dreg: 1, modulus: s.mod, ngType: NUMGEN_TYPE.RANDOM, offset: s.offset },
        { type: 'lookup', sreg: 1, set: s.map, dreg: 1 },
        { type: 'nat', natType: NAT_TYPE.DNAT, family: FAMILY_NUMBER[family], regAddrMin: 1, regProtoMin: endpointPortReg(family) },
      ];
    case 'dnat': {
      if (!Number.isInteger(s.port) || s.port < 1 || s.port > 65535) throw new Error(`dnat: port ${s.port} is out of range 1..65535`);
      return [
        { type: 'immediate', dreg: 1, data: { value: parseAddr(family, s.addr, 'dnat address') } },
        { type: 'immediate', dreg: 2, data: { value: beU16(s.port) } },
        { type: 'nat', natType: NAT_TYPE.DNAT, family: FAMILY_NUMBER[family], regAddrMin: 1, regProtoMin: 2, flags: NAT_FLAG.PROTO_SPECIFIED },
      ];
    }
    case 'masquerade':
      return [s.fullyRandom ? { type: 'masq', flags: NAT_FLAG.PROTO_RANDOM_FULLY } : { type: 'masq' }];
    case 'update':
      return [loadField(family, s.field, 1), { type: 'dynset', op: DYNSET_OP.UPDATE, set: s.set, sregKey: 1 }];
    case 'counter':
      return [{ type: 'counter' }];
    case 'reject':
      return [family === 'ip'
        ? { type: 'reject', rejectType: REJECT_TYPE.ICMP_UNREACH, icmpCode: ICMP_CODE.PORT_UNREACH }
        : { type: 'reject', rejectType: REJECT_TYPE.ICMP_UNREACH, icmpCode: ICMPV6_CODE.PORT_UNREACH }];
    case 'verdict':
      return [{ type: 'immediate', dreg: 0, data: { verdict: s.verdict } }];
  }
}

/** Lowers a rule's statements. */
export function lowerRule(family: TableFamily, r: Rule): Expr[] {
  const out: Expr[] = [];
  for (const s of r.stmts) for (const e of lowerStmt(family, s)) out.push(e);
  return out;
}

/** The RuleSpec (append) of a rule in `chain`. */
export function ruleSpec(family: TableFamily, table: string, chain: string, r: Rule): RuleSpec {
  const spec: RuleSpec = { family, table, chain, exprs: lowerRule(family, r) };
  if (r.comment !== undefined) spec.comment = r.comment;
  return spec;
}

const HOOK_NUM: Record<string, number> = {
  prerouting: HOOK.PREROUTING, input: HOOK.INPUT, forward: HOOK.FORWARD, output: HOOK.OUTPUT, postrouting: HOOK.POSTROUTING,
};

/** The ChainSpec of a chain (nft sends no policy when the text gives none). */
export function chainSpec(family: TableFamily, table: string, c: Chain): ChainSpec {
  const spec: ChainSpec = { family, table, name: c.name };
  if (c.hook) spec.hook = { type: c.hook.type, hooknum: HOOK_NUM[c.hook.hook], priority: c.hook.priority };
  if (c.comment !== undefined) spec.comment = c.comment;
  return spec;
}

/** The TableSpec of `add table` (nft sends NFTA_TABLE_FLAGS = 0 and the comment) or, without a comment, of `delete`. */
export function tableSpec(family: TableFamily, name: string, comment?: string): TableSpec {
  return comment === undefined ? { family, name } : { family, name, flags: 0, comment };
}

/**
 * The SetSpec of a set definition, as nft 1.0.6 sends it for `type ...` declarations: flags MAP for verdict maps,
 * TIMEOUT|EVAL (`dynamic,timeout`) for timeout sets; key type id (concatenations `(t1 << 6 | t2) << 6 | ...`);
 * padded key length; userdata KEYBYTEORDER (2 = big endian for a single address/port key, 0 for a
 * concatenation), DATABYTEORDER (maps: 0) and COMMENT. `id` is left for the planner (NFTA_SET_ID).
 */
export function setSpec(family: TableFamily, table: string, s: SetDef): SetSpec {
  let flags = 0;
  if (s.map) flags |= SET_FLAG.MAP;
  if (s.timeoutSec !== undefined) flags |= SET_FLAG.TIMEOUT | SET_FLAG.EVAL;
  const keyType = s.key.reduce((acc, t) => (acc << 6) | DATATYPE_OF[t], 0);
  const spec: SetSpec = { family, table, name: s.name, flags, keyType, keyLen: keyLen(s.key) };
  if (s.map === 'endpoint') {
    // typeof numgen random mod 1 : ip daddr . th dport -- as nft 1.0.6 sends it.
    const addr: KeyType = family === 'ip' ? 'ipv4_addr' : 'ipv6_addr';
    spec.dataType = (DATATYPE_OF[addr] << 6) | DATATYPE.INET_SERVICE;
    spec.dataLen = keyLen([addr, 'inet_service']);
    spec.keyByteOrder = BYTEORDER.HOST;
    spec.dataByteOrder = BYTEORDER.INVALID;
    spec.typeofUdata = new Uint8Array(Buffer.from(ENDPOINT_MAP_TYPEOF_HEX[family], 'hex'));
    if (s.comment !== undefined) spec.comment = s.comment;
    return spec;
  }
  if (s.map) { spec.dataType = NFT_DATA_VERDICT; spec.dataLen = 0; }
  if (s.timeoutSec !== undefined) spec.timeoutMs = BigInt(s.timeoutSec) * 1000n;
  spec.keyByteOrder = s.key.length > 1 ? BYTEORDER.INVALID : BYTEORDER.BIG;
  if (s.map) spec.dataByteOrder = BYTEORDER.INVALID;
  if (s.comment !== undefined) spec.comment = s.comment;
  return spec;
}

/** Length in bytes of a key part's value (unpadded). */
function keyPartLen(p: KeyPart): number {
  switch (p.type) {
    case 'ipv4_addr': return 4;
    case 'ipv6_addr': return 16;
    case 'inet_proto': return 1;
    case 'inet_service': return 2;
    case 'numgen': return 4;
  }
}

/** Writes a key part's value at `out[off]` (validated; the same errors as before). */
function writeKeyPart(p: KeyPart, out: Uint8Array, off: number): void {
  switch (p.type) {
    case 'ipv4_addr': writeAddr('ip', p.ip, out, off, 'element address'); return;
    case 'ipv6_addr': writeAddr('ip6', p.ip, out, off, 'element address'); return;
    case 'inet_proto': out[off] = L4PROTO_NUMBER[p.proto]; return;
    case 'inet_service':
      if (!Number.isInteger(p.port) || p.port < 0 || p.port > 65535) throw new Error(`element port ${p.port} is out of range 0..65535`);
      out[off] = (p.port >> 8) & 0xff; out[off + 1] = p.port & 0xff;
      return;
    case 'numgen': {
      if (!Number.isInteger(p.value) || p.value < 0 || p.value > 0xffffffff) throw new Error(`element index ${p.value} is out of range 0..2^32-1`);
      const v = p.value >>> 0;
      out[off] = v & 0xff; out[off + 1] = (v >>> 8) & 0xff; out[off + 2] = (v >>> 16) & 0xff; out[off + 3] = (v >>> 24) & 0xff;
      return;
    }
  }
}

/**
 * Hands out zero-filled byte ranges (views) of shared 64 KiB blocks: the element keys and values of a full plan
 * (hundreds of thousands of 4- and 8-byte arrays) then cost one view each instead of one array buffer each.
 * Ranges are never reused; a block is freed when no view of it is left.
 */
export class ByteArena {
  #block = new Uint8Array(0);
  #pos = 0;

  /** A fresh zero-filled view of `n` bytes. */
  take(n: number): Uint8Array {
    if (n > 4096) return new Uint8Array(n);
    if (this.#pos + n > this.#block.length) { this.#block = new Uint8Array(64 * 1024); this.#pos = 0; }
    const out = this.#block.subarray(this.#pos, this.#pos + n);
    this.#pos += n;
    return out;
  }
}

const newBytes = (n: number, arena?: ByteArena) => (arena ? arena.take(n) : new Uint8Array(n));

/**
 * Register bytes of an element key: each component zero-padded to 4 bytes in a concatenation. With `arena`, the
 * bytes are a view into one of its blocks.
 */
export function elementKeyBytes(family: TableFamily, key: readonly KeyPart[], arena?: ByteArena): Uint8Array {
  if (key.length === 1) {
    const out = newBytes(keyPartLen(key[0]), arena);
    writeKeyPart(key[0], out, 0);
    return out;
  }
  let size = 0;
  for (const p of key) size += Math.ceil(keyPartLen(p) / 4) * 4;
  const out = newBytes(size, arena); // zero-filled: the padding
  let off = 0;
  for (const p of key) { writeKeyPart(p, out, off); off += Math.ceil(keyPartLen(p) / 4) * 4; }
  return out;
}

/**
 * Register bytes of an endpoint-map value `addr . port`: the address, then the port (network order) padded to
 * 4 bytes (ip: 8 bytes, ip6: 20 bytes).
 * @throws Error on an address of the wrong family or a port outside 1..65535.
 */
export function endpointDataBytes(family: TableFamily, ep: { ip: string; port: number }, arena?: ByteArena): Uint8Array {
  if (!Number.isInteger(ep.port) || ep.port < 1 || ep.port > 65535) throw new Error(`endpoint port ${ep.port} is out of range 1..65535`);
  const n = addrLen(family);
  const out = newBytes(n + 4, arena);
  writeAddr(family, ep.ip, out, 0, 'endpoint address');
  out[n] = (ep.port >> 8) & 0xff; out[n + 1] = ep.port & 0xff;
  return out;
}

/** The ElementSpec of an element (its byte arrays views into `arena` when given). */
export function elementSpec(family: TableFamily, e: Element, arena?: ByteArena): ElementSpec {
  const spec: ElementSpec = { key: elementKeyBytes(family, e.key, arena) };
  if (e.verdict) spec.data = { verdict: e.verdict };
  if (e.endpoint) spec.data = { value: endpointDataBytes(family, e.endpoint, arena) };
  if (e.comment !== undefined) spec.comment = e.comment;
  return spec;
}

// ---------------------------------------------------------------------------------------------------------------
// libnftnl's debug text of expressions (`nft --debug=netlink`), for golden tests and debug logs.

function words(b: Uint8Array): string {
  const out: string[] = [];
  for (let i = 0; i < b.length; i += 4) {
    let v = 0;
    for (let j = 3; j >= 0; j--) v = v * 256 + (b[i + j] ?? 0);
    out.push('0x' + v.toString(16).padStart(8, '0'));
  }
  return out.join(' ');
}

const META_NAMES: Record<number, string> = {
  0: 'len', 1: 'protocol', 2: 'priority', 3: 'mark', 4: 'iif', 5: 'oif', 6: 'iifname', 7: 'oifname', 8: 'iiftype',
  9: 'oiftype', 15: 'nfproto', 16: 'l4proto', 19: 'pkttype',
};
const CT_NAMES: Record<number, string> = { 0: 'state', 1: 'direction', 2: 'status', 3: 'mark', 7: 'l3protocol', 10: 'protocol', 11: 'proto-src', 12: 'proto-dst', 19: 'src_ip', 20: 'dst_ip', 21: 'src_ip6', 22: 'dst_ip6' };
const CMP_NAMES = ['eq', 'neq', 'lt', 'lte', 'gt', 'gte'];
const BASE_NAMES = ['link', 'network', 'transport', 'inner'];

function verdictDebug(v: Verdict): string {
  return v.kind === 'jump' || v.kind === 'goto' ? `${v.kind} -> ${v.chain}` : v.kind;
}

/**
 * One expression as libnftnl prints it (`[ payload load 4b @ network header + 16 => reg 1 ]`). Data words are
 * the register bytes read as little-endian u32s, as libnftnl prints them on x86.
 */
export function formatExpr(e: Expr): string {
  const body = ((): string => {
    switch (e.type) {
      case 'payload': return `payload load ${e.len}b @ ${BASE_NAMES[e.base] ?? e.base} header + ${e.offset} => reg ${e.dreg}`;
      case 'meta': return `meta load ${META_NAMES[e.key] ?? e.key} => reg ${e.dreg}`;
      case 'meta_set': return `meta set ${META_NAMES[e.key] ?? e.key} with reg ${e.sreg}`;
      case 'cmp': return `cmp ${CMP_NAMES[e.op]} reg ${e.sreg} ${words(e.data)}`;
      case 'range': return `range ${CMP_NAMES[e.op]} reg ${e.sreg} ${words(e.from)} ${words(e.to)}`;
      case 'bitwise': return `bitwise reg ${e.dreg} = ( reg ${e.sreg} & ${words(e.mask)} ) ^ ${words(e.xor)}`;
      case 'lookup': return `lookup reg ${e.sreg} set ${e.set}${e.dreg !== undefined ? ` dreg ${e.dreg}` : ''}${e.flags ? ` 0x${e.flags.toString(16)}` : ''}`;
      case 'immediate': return `immediate reg ${e.dreg} ${'value' in e.data ? words(e.data.value) : verdictDebug(e.data.verdict)}`;
      case 'nat': {
        let s = `nat ${e.natType === NAT_TYPE.DNAT ? 'dnat' : 'snat'} ${e.family === FAMILY_NUMBER.ip6 ? 'ip6' : 'ip'}`;
        if (e.regAddrMin !== undefined) s += ` addr_min reg ${e.regAddrMin}`;
        if (e.regAddrMax !== undefined) s += ` addr_max reg ${e.regAddrMax}`;
        if (e.regProtoMin !== undefined) s += ` proto_min reg ${e.regProtoMin}`;
        if (e.regProtoMax !== undefined) s += ` proto_max reg ${e.regProtoMax}`;
        if (e.flags) s += ` flags 0x${e.flags.toString(16)}`;
        return s;
      }
      case 'masq': {
        let s = 'masq';
        if (e.regProtoMin !== undefined) s += ` proto_min reg ${e.regProtoMin}`;
        if (e.regProtoMax !== undefined) s += ` proto_max reg ${e.regProtoMax}`;
        if (e.flags) s += ` flags 0x${e.flags.toString(16)}`;
        return s;
      }
      case 'numgen': return `numgen reg ${e.dreg} = ${e.ngType === NUMGEN_TYPE.RANDOM ? 'random' : 'inc'} mod ${e.modulus}${e.offset ? ` offset ${e.offset}` : ''}`;
      case 'ct': return `ct load ${CT_NAMES[e.key] ?? e.key} => reg ${e.dreg}${e.direction !== undefined ? `, dir ${e.direction === 0 ? 'original' : 'reply'}` : ''}`;
      case 'ct_set': return `ct set ${CT_NAMES[e.key] ?? e.key} with reg ${e.sreg}`;
      case 'fib': {
        const fl: string[] = [];
        if (e.flags & FIB_FLAG.SADDR) fl.push('saddr');
        if (e.flags & FIB_FLAG.DADDR) fl.push('daddr');
        if (e.flags & FIB_FLAG.MARK) fl.push('mark');
        if (e.flags & FIB_FLAG.IIF) fl.push('iif');
        if (e.flags & FIB_FLAG.OIF) fl.push('oif');
        const res = e.result === FIB_RESULT.ADDRTYPE ? 'type' : e.result === FIB_RESULT.OIF ? 'oif' : 'oifname';
        return `fib ${fl.join(' . ')} ${res} => reg ${e.dreg}`;
      }
      case 'reject': return `reject type ${e.rejectType} code ${e.icmpCode}`;
      case 'counter': return `counter pkts ${e.packets ?? 0n} bytes ${e.bytes ?? 0n}`;
      case 'dynset': {
        const op = ['add', 'update', 'delete'][e.op] ?? String(e.op);
        let s = `dynset ${op} reg_key ${e.sregKey} set ${e.set}`;
        if (e.sregData !== undefined) s += ` sreg_data ${e.sregData}`;
        if (e.timeoutMs !== undefined) s += ` timeout ${e.timeoutMs}ms`;
        return s;
      }
      case 'opaque': return `${e.name} (opaque)`;
    }
  })();
  return `[ ${body} ]`;
}

/** All expressions of a rule, one libnftnl line each (two-space indent, as `nft --debug=netlink` prints them). */
export function formatExprs(exprs: readonly Expr[]): string {
  return exprs.map((e) => `  ${formatExpr(e)}`).join('\n');
}

/** An element key as libnftnl prints it in `element ...` lines: little-endian u32 words. */
export function formatKeyWords(b: Uint8Array): string {
  return words(b).replace(/0x/g, '');
}
