/**
 * Netlink attribute (TLV) writer and reader.
 *
 * `struct nlattr { u16 nla_len; u16 nla_type; }` in host byte order (linux/netlink.h); `nla_len` counts the 4-byte
 * header and the payload but not the padding to 4 bytes. Bit 15 of nla_type is NLA_F_NESTED, bit 14
 * NLA_F_NET_BYTEORDER. libnftnl sets NLA_F_NESTED on every nest it sends; the kernel does not set it in replies,
 * so the reader takes the schema's word for what is a nest. nf_tables numeric attributes are big-endian
 * (reference nftables-netlink.md §2).
 */

/** linux/netlink.h */
export const NLA_F_NESTED = 0x8000;
export const NLA_F_NET_BYTEORDER = 0x4000;
export const NLA_TYPE_MASK = ~(NLA_F_NESTED | NLA_F_NET_BYTEORDER) & 0xffff;
/** An attribute's length field is 16 bits: one attribute, nests included, is at most 65535 bytes. */
export const NLA_MAX_LEN = 0xffff;

const align4 = (n: number) => (n + 3) & ~3;
const utf8 = new TextEncoder();

/**
 * A growable buffer that writes netlink messages and attributes. All numeric writers named `*be` write big-endian
 * (network order); `u16le`/`u32le` write host order (little-endian, x86/arm64).
 */
export class NetlinkWriter {
  buf: Buffer;
  pos = 0;
  /** NUL-terminated UTF-8 encodings of strings seen before (table, chain and set names repeat a lot). */
  readonly #strings = new Map<string, Buffer>();
  /** Encoded values derived from a string key (element comment TLVs repeat per owner), see {@link derived}. */
  readonly #derived = new Map<string, Uint8Array>();

  constructor(initialBytes = 64 * 1024) {
    this.buf = Buffer.allocUnsafe(initialBytes);
  }

  /**
   * Bytes derived from `key` by `make`, computed once per writer (a writer encodes one batch, so the memo lives as
   * long as the batch). Keys are namespaced by the caller (e.g. `comment\0<text>`). The returned bytes are shared:
   * callers must not modify them.
   */
  derived(key: string, make: () => Uint8Array): Uint8Array {
    let b = this.#derived.get(key);
    if (b === undefined) this.#derived.set(key, (b = make()));
    return b;
  }

  /** Makes room for `n` more bytes. */
  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  /** Zero padding up to the next multiple of 4. */
  pad(): void {
    const p = align4(this.pos);
    if (p > this.pos) {
      // At most 3 bytes: a byte loop (Buffer.fill has a per-call cost that dominated small pads).
      this.ensure(p - this.pos);
      const buf = this.buf;
      while (this.pos < p) buf[this.pos++] = 0;
    }
  }

  u8raw(v: number): void { this.ensure(1); this.buf[this.pos++] = v & 0xff; }
  u16le(v: number): void { this.ensure(2); this.buf.writeUInt16LE(v & 0xffff, this.pos); this.pos += 2; }
  u32le(v: number): void { this.ensure(4); this.buf.writeUInt32LE(v >>> 0, this.pos); this.pos += 4; }
  u16be(v: number): void { this.ensure(2); const b = this.buf, o = this.pos; b[o] = (v >>> 8) & 0xff; b[o + 1] = v & 0xff; this.pos = o + 2; }
  u32be(v: number): void {
    this.ensure(4);
    const b = this.buf, o = this.pos;
    b[o] = (v >>> 24) & 0xff; b[o + 1] = (v >>> 16) & 0xff; b[o + 2] = (v >>> 8) & 0xff; b[o + 3] = v & 0xff;
    this.pos = o + 4;
  }
  raw(b: Uint8Array): void { this.ensure(b.length); this.buf.set(b, this.pos); this.pos += b.length; }

  /** Starts an attribute header; returns its offset for {@link end}. */
  begin(type: number): number {
    this.pad();
    const start = this.pos;
    this.ensure(4);
    // nla_type, host order (little-endian); nla_len is written by end().
    this.buf[start + 2] = type & 0xff;
    this.buf[start + 3] = (type >>> 8) & 0xff;
    this.pos += 4;
    return start;
  }

  /**
   * Ends the attribute started at `start`: writes its length and pads.
   * @throws RangeError when the attribute exceeds 65535 bytes (nla_len is 16 bits).
   */
  end(start: number): void {
    const len = this.pos - start;
    if (len > NLA_MAX_LEN) throw new RangeError(`netlink attribute type ${this.buf.readUInt16LE(start + 2) & NLA_TYPE_MASK} is ${len} bytes; at most ${NLA_MAX_LEN} fit in nla_len`);
    this.buf[start] = len & 0xff;
    this.buf[start + 1] = len >>> 8;
    this.pad();
  }

  /** Starts a nest (type | NLA_F_NESTED, as libnftnl sends it). */
  nest(type: number): number { return this.begin(type | NLA_F_NESTED); }

  /** A u8 attribute (e.g. NFTA_CT_DIRECTION, NFTA_REJECT_ICMP_CODE). */
  attrU8(type: number, v: number): void { const s = this.begin(type); this.u8raw(v); this.end(s); }
  /** A big-endian u16 attribute. */
  attrU16be(type: number, v: number): void { const s = this.begin(type); this.u16be(v); this.end(s); }
  /** A big-endian u32 attribute (also s32: pass the signed value). */
  attrU32be(type: number, v: number): void { const s = this.begin(type); this.u32be(v); this.end(s); }
  /** A host-order u32 attribute (ctnetlink CTA_FILTER flags). */
  attrU32le(type: number, v: number): void { const s = this.begin(type); this.u32le(v); this.end(s); }
  /** A big-endian u64 attribute (handles, timeouts in ms, counters). */
  attrU64be(type: number, v: bigint): void {
    const s = this.begin(type);
    this.ensure(8);
    this.buf.writeBigUInt64BE(BigInt.asUintN(64, v), this.pos);
    this.pos += 8;
    this.end(s);
  }
  /** A binary attribute. */
  attrBytes(type: number, b: Uint8Array): void { const s = this.begin(type); this.raw(b); this.end(s); }
  /** A NUL-terminated string attribute (the NUL counts in nla_len). */
  attrStr(type: number, str: string): void {
    let enc = this.#strings.get(str);
    if (enc === undefined) {
      const b = utf8.encode(str);
      enc = Buffer.allocUnsafe(b.length + 1);
      enc.set(b, 0);
      enc[b.length] = 0;
      if (this.#strings.size < 100_000) this.#strings.set(str, enc);
    }
    const s = this.begin(type);
    this.raw(enc);
    this.end(s);
  }

  /** The bytes written so far (a view, not a copy). */
  bytes(): Buffer { return this.buf.subarray(0, this.pos); }
}

/** One attribute as read: its type (flags stripped), whether NLA_F_NESTED was set, and its payload (a view). */
export interface Attr {
  type: number;
  nested: boolean;
  data: Buffer;
}

/**
 * Iterates the attributes in `buf[start, end)`.
 * @throws Error on a truncated or malformed attribute, naming the offset.
 */
export function* iterAttrs(buf: Buffer, start = 0, end = buf.length): Generator<Attr> {
  let p = start;
  while (p + 4 <= end) {
    const len = buf.readUInt16LE(p);
    const rawType = buf.readUInt16LE(p + 2);
    if (len < 4 || p + len > end) throw new Error(`malformed netlink attribute at offset ${p}: nla_len ${len}, ${end - p} bytes left`);
    yield { type: rawType & NLA_TYPE_MASK, nested: (rawType & NLA_F_NESTED) !== 0, data: buf.subarray(p + 4, p + len) };
    p += align4(len);
  }
}

/** Attributes of `buf` by type (the last one wins; use {@link iterAttrs} for lists). */
export function attrMap(buf: Buffer): Map<number, Buffer> {
  const m = new Map<number, Buffer>();
  for (const a of iterAttrs(buf)) m.set(a.type, a.data);
  return m;
}

/** Readers for attribute payloads. Strings drop the trailing NUL. */
export const read = {
  u8: (b: Buffer): number => b.readUInt8(0),
  u16be: (b: Buffer): number => b.readUInt16BE(0),
  u32be: (b: Buffer): number => b.readUInt32BE(0),
  s32be: (b: Buffer): number => b.readInt32BE(0),
  u32le: (b: Buffer): number => b.readUInt32LE(0),
  u64be: (b: Buffer): bigint => b.readBigUInt64BE(0),
  str: (b: Buffer): string => {
    const nul = b.indexOf(0);
    return b.toString('utf8', 0, nul >= 0 ? nul : b.length);
  },
  bytes: (b: Buffer): Uint8Array => new Uint8Array(b),
};
