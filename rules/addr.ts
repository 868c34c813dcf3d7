/**
 * IP address and CIDR parsing for the compiler, the lowering and the tracer. Pure, no I/O.
 *
 * Addresses become network-byte-order bytes (4 for IPv4, 16 for IPv6), exactly what a payload load of
 * `ip saddr`/`ip6 daddr` puts in a register. Text output is canonical: IPv4 dotted quad, IPv6 RFC 5952
 * (lowercase, longest run of two or more zero groups compressed, leftmost on ties).
 */
import type { TableFamily } from '../netlink/types.ts';

/** Address length in bytes for a table family: ip 4, ip6 16. */
export function addrLen(family: TableFamily): 4 | 16 {
  return family === 'ip' ? 4 : 16;
}

function parseV4(s: string): Uint8Array | null {
  const out = new Uint8Array(4);
  let part = 0;
  let val = 0;
  let digits = 0;
  for (let i = 0; i <= s.length; i++) {
    const c = i < s.length ? s.charCodeAt(i) : 46; // '.' terminates the last octet
    if (c === 46) {
      if (digits === 0 || part > 3) return null;
      out[part++] = val;
      val = 0;
      digits = 0;
    } else if (c >= 48 && c <= 57) {
      if (digits > 0 && val === 0) return null; // leading zero
      val = val * 10 + (c - 48);
      if (++digits > 3 || val > 255) return null;
    } else return null;
  }
  return part === 4 ? out : null;
}

function parseV6(s: string): Uint8Array | null {
  if (s.length < 2 || s.length > 45 || s.includes('%')) return null;
  let tail4: Uint8Array | null = null;
  let str = s;
  const lastColon = str.lastIndexOf(':');
  if (str.includes('.', lastColon)) {
    tail4 = parseV4(str.slice(lastColon + 1));
    if (!tail4) return null;
    str = str.slice(0, lastColon + 1) + '0:0';
  }
  const dbl = str.indexOf('::');
  if (dbl !== -1 && str.indexOf('::', dbl + 1) !== -1) return null;
  const groupsOf = (part: string): number[] | null => {
    if (part === '') return [];
    const gs = part.split(':');
    const out: number[] = [];
    for (const g of gs) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null;
      out.push(parseInt(g, 16));
    }
    return out;
  };
  let groups: number[];
  if (dbl !== -1) {
    const head = groupsOf(str.slice(0, dbl));
    const tail = groupsOf(str.slice(dbl + 2));
    if (!head || !tail || head.length + tail.length > 7) return null;
    groups = [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
  } else {
    const g = groupsOf(str);
    if (!g || g.length !== 8) return null;
    groups = g;
  }
  const out = new Uint8Array(16);
  for (let i = 0; i < 8; i++) {
    out[2 * i] = groups[i] >> 8;
    out[2 * i + 1] = groups[i] & 0xff;
  }
  if (tail4) out.set(tail4, 12);
  return out;
}

/** True when `s` is an IPv4 dotted quad (no leading zeros). */
export function isIPv4(s: string): boolean {
  return parseV4(s) !== null;
}

/** True when `s` is an IPv6 address in any RFC 4291 text form (no zone). */
export function isIPv6(s: string): boolean {
  return parseV6(s) !== null;
}

/**
 * Parses an address of the given family into network-order bytes.
 * @throws Error naming `field` and the value when `s` is not an address of that family.
 */
export function parseAddr(family: TableFamily, s: string, field = 'address'): Uint8Array {
  const b = family === 'ip' ? parseV4(s) : parseV6(s);
  if (!b) throw new Error(`${field}: ${JSON.stringify(s)} is not an ${family === 'ip' ? 'IPv4' : 'IPv6'} address`);
  return b;
}

/**
 * Writes the network-order bytes of an address of `family` into `out` at `off` (4 or 16 bytes), as
 * {@link parseAddr} parses it, without allocating for IPv4.
 * @throws like parseAddr (the same message).
 */
export function writeAddr(family: TableFamily, s: string, out: Uint8Array, off: number, field = 'address'): void {
  if (family === 'ip' && typeof s === 'string') {
    let part = 0, val = 0, digits = 0, ok = true;
    for (let i = 0; i <= s.length; i++) {
      const c = i < s.length ? s.charCodeAt(i) : 46;
      if (c === 46) {
        if (digits === 0 || part > 3) { ok = false; break; }
        out[off + part++] = val;
        val = 0;
        digits = 0;
      } else if (c >= 48 && c <= 57) {
        if (digits > 0 && val === 0) { ok = false; break; }
        val = val * 10 + (c - 48);
        if (++digits > 3 || val > 255) { ok = false; break; }
      } else { ok = false; break; }
    }
    if (ok && part === 4) return;
  }
  out.set(parseAddr(family, s, field), off);
}

/** Formats network-order bytes (4 or 16) as canonical text. */
export function formatAddr(b: Uint8Array): string {
  if (b.length === 4) return `${b[0]}.${b[1]}.${b[2]}.${b[3]}`;
  if (b.length !== 16) throw new Error(`formatAddr: ${b.length} bytes is neither IPv4 nor IPv6`);
  const g: number[] = [];
  for (let i = 0; i < 8; i++) g.push((b[2 * i] << 8) | b[2 * i + 1]);
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (g[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) { bestStart = i; bestLen = j - i; }
    i = j;
  }
  // IPv4-mapped addresses print their tail as a dotted quad, as inet_ntop does.
  if (bestStart === 0 && bestLen === 5 && g[5] === 0xffff) return `::ffff:${b[12]}.${b[13]}.${b[14]}.${b[15]}`;
  const hex = (xs: number[]) => xs.map((x) => x.toString(16)).join(':');
  if (bestStart < 0) return hex(g);
  return `${hex(g.slice(0, bestStart))}::${hex(g.slice(bestStart + bestLen))}`;
}

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
