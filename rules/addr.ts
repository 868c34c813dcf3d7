/**
 * IP address and CIDR parsing for the compiler, the lowering and the tracer. Pure, no I/O.
 *
 * Addresses become network-byte-order bytes (4 for IPv4, 16 for IPv6), exactly what a payload load of
 * `ip saddr`/`ip6 daddr` puts in a register. The address text codec itself is netlink/addr.ts (shared with
 * ctnetlink), re-exported here; this file adds canonical text, CIDRs and address classes.
 */
import type { TableFamily } from '../netlink/types.ts';

export { addrLen, isIPv4, isIPv6, parseAddr, writeAddr, formatAddr } from '../netlink/addr.ts';
import { addrLen, parseAddr, formatAddr } from '../netlink/addr.ts';

/**
 * True when `s` is an IPv4 address parseV4 accepts (the same checks, without allocating). Such a text is already
 * canonical: four decimal octets 0..255 without leading zeros, which is exactly what formatAddr prints.
 */
function isV4(s: string): boolean {
  let part = 0, val = 0, digits = 0;
  for (let i = 0; i <= s.length; i++) {
    const c = i < s.length ? s.charCodeAt(i) : 46;
    if (c === 46) {
      if (digits === 0 || part > 3) return false;
      part++;
      val = 0;
      digits = 0;
    } else if (c >= 48 && c <= 57) {
      if (digits > 0 && val === 0) return false;
      val = val * 10 + (c - 48);
      if (++digits > 3 || val > 255) return false;
    } else return false;
  }
  return part === 4;
}

/** Canonical text of an address of `family`. @throws like parseAddr. */
export function canonicalAddr(family: TableFamily, s: string, field = 'address'): string {
  if (family === 'ip' && typeof s === 'string' && isV4(s)) return s; // valid IPv4 text is canonical (see isV4)
  return formatAddr(parseAddr(family, s, field));
}

/** A parsed CIDR: network-order address bytes (host bits zero) and prefix length in bits. */
export interface Cidr {
  addr: Uint8Array;
  prefix: number;
}

/**
 * Parses `a.b.c.d/n`, `x::/n` or a bare address (= full-length prefix) of `family`.
 * @throws Error naming `field` when malformed, when the prefix is out of range, or when host bits are set
 *   (nft refuses such a value too).
 */
export function parseCidr(family: TableFamily, s: string, field = 'cidr'): Cidr {
  const slash = s.indexOf('/');
  const bits = addrLen(family) * 8;
  const addr = parseAddr(family, slash === -1 ? s : s.slice(0, slash), field);
  let prefix = bits;
  if (slash !== -1) {
    const p = s.slice(slash + 1);
    if (!/^\d{1,3}$/.test(p) || Number(p) > bits) throw new Error(`${field}: ${JSON.stringify(s)} has an invalid prefix length (0..${bits})`);
    prefix = Number(p);
  }
  const mask = prefixMask(addr.length, prefix);
  for (let i = 0; i < addr.length; i++) {
    if ((addr[i] & ~mask[i]) !== 0) throw new Error(`${field}: ${JSON.stringify(s)} has host bits set beyond /${prefix}`);
  }
  return { addr, prefix };
}

/** The netmask bytes of a prefix length. */
export function prefixMask(len: number, prefix: number): Uint8Array {
  const m = new Uint8Array(len);
  for (let i = 0; i < len; i++) {
    const b = Math.max(0, Math.min(8, prefix - 8 * i));
    m[i] = b === 0 ? 0 : (0xff << (8 - b)) & 0xff;
  }
  return m;
}

/** Canonical text of a CIDR (`addr` alone for a full-length prefix). */
export function formatCidr(c: Cidr): string {
  return c.prefix === c.addr.length * 8 ? formatAddr(c.addr) : `${formatAddr(c.addr)}/${c.prefix}`;
}

/** True when `addr` (same length) lies inside `c`. */
export function cidrContains(c: Cidr, addr: Uint8Array): boolean {
  if (addr.length !== c.addr.length) return false;
  const m = prefixMask(addr.length, c.prefix);
  for (let i = 0; i < addr.length; i++) if ((addr[i] & m[i]) !== c.addr[i]) return false;
  return true;
}

/** Loopback test: 127.0.0.0/8 or ::1. */
export function isLoopback(b: Uint8Array): boolean {
  if (b.length === 4) return b[0] === 127;
  return b.every((x, i) => (i === 15 ? x === 1 : x === 0));
}
