/**
 * IP address text <-> network-order bytes (4 for IPv4, 16 for IPv6), shared by the nf_tables lowering, the
 * compiler and ctnetlink. Pure, no I/O. Text output is canonical: IPv4 dotted quad, IPv6 RFC 5952 (lowercase,
 * longest run of two or more zero groups compressed, leftmost on ties, IPv4-mapped tails as a dotted quad).
 */
import type { TableFamily } from './types.ts';

/** Address length in bytes for a table family: ip 4, ip6 16. */
export function addrLen(family: TableFamily): 4 | 16 {
  return family === 'ip' ? 4 : 16;
}

/** IPv4 dotted quad (no leading zeros) to 4 bytes, or null. */
export function parseV4(s: string): Uint8Array | null {
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

/** IPv6 text (RFC 4291 forms, no zone) to 16 bytes, or null. */
export function parseV6(s: string): Uint8Array | null {
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
