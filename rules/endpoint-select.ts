/**
 * Endpoint selection through shared endpoint maps (DESIGN.md §3, picked by the benchmark; one map per
 * SHARD_KEYS keys, see there why not one map for the whole table):
 *
 *   map endpoint-map-0 { typeof numgen random mod 1 : ip daddr . th dport ; }
 *   chain service-XXXX-ns/name/tcp/p { meta l4proto tcp dnat ip to numgen random mod N offset K map @endpoint-map-0 }
 *
 * Each endpoint list (a ServicePort's cluster endpoints, and separately its local endpoints) owns a block of keys
 * [K, K + cap) of the map; its N endpoints sit densely at keys K..K+N-1. The first packet costs one numgen, one
 * hash lookup and one NAT, whatever N and whatever the number of Services: no per-service set (the kernel's
 * anonymous-set naming is quadratic, reference nftables-netlink.md §6.3) and no rule cascade.
 *
 * Offsets are stable across syncs (an allocator keyed by owner = the element comment, see {@link ownerComment}):
 * - capacity is rounded up ({@link capacityFor}: 4, 8, 16, ...), so a list that grows within its capacity keeps
 *   its block; adding an endpoint changes one element and the one rule;
 * - removing an endpoint moves the last slot into the hole (keys stay dense), so it changes at most two elements
 *   and the rule;
 * - a list that outgrows its block moves to a new block (all its elements change, once per doubling);
 * - freed blocks are reused by lists of the same capacity.
 *
 * Element comments carry the owner (`ns/name:port`, `ns/name:port local` for the local list), so an agent that
 * adopts an existing table can rebuild the allocation from the map's elements ({@link rebuildEndpointAllocator}).
 * Pure (no I/O). The allocator is mutable; the compiler clones the previous ruleset's allocator before changing it.
 */
import type { Element, Fragment, L4Proto, Rule } from './model.ts';
import { S, rule } from './model.ts';

/** A block of consecutive map keys owned by one endpoint list. `slots[i]` is the endpoint identity at key offset+i. */
export interface EndpointBlock {
  /** First key (u32). */
  readonly offset: number;
  /** Number of keys reserved (a power of two, at least {@link MIN_CAPACITY}). */
  readonly cap: number;
  /** Endpoint identities (`ip:port`, `[ip]:port`) in key order; length = the number of endpoints N <= cap. */
  readonly slots: readonly string[];
}

/**
 * Keys per endpoint map ("shard"). The kernel checks every new map element against every rule bound to the map
 * (nf_tables_api.c nft_add_set_elem: a loop over set->bindings), so ONE map for the whole table makes a cold
 * load quadratic (measured: 18.7 s of kernel time at 10,000 Services × 10, 154 s at 30,000). Key range
 * [i·SHARD_KEYS, (i+1)·SHARD_KEYS) lives in map `endpoint-map-i`: at most SHARD_KEYS elements and SHARD_KEYS/4
 * rules per map, and the number of maps grows with the key high-water mark, so the cost stays linear. Blocks
 * never straddle a shard boundary (a block larger than a shard starts on a boundary and is alone in its map).
 */
export const SHARD_KEYS = 1024;

/** Name prefix of the endpoint maps. */
export const ENDPOINT_MAP_PREFIX = 'endpoint-map-';

/** The shard (map index) holding key `offset`. */
export function shardOf(offset: number): number {
  return Math.floor(offset / SHARD_KEYS);
}

/** The endpoint map holding key `offset`: `endpoint-map-<shard>`. */
export function endpointMapOf(offset: number): string {
  return `${ENDPOINT_MAP_PREFIX}${shardOf(offset)}`;
}

/** True for the name of an endpoint map. */
export function isEndpointMap(name: string): boolean {
  return name.startsWith(ENDPOINT_MAP_PREFIX);
}

/** The smallest block. */
export const MIN_CAPACITY = 4;
/** Keys are u32; the allocator refuses to go past this. */
const MAX_KEY = 0xffffffff;

/** The block capacity for `n` endpoints: the next power of two >= n, at least {@link MIN_CAPACITY}. */
export function capacityFor(n: number): number {
  let c = MIN_CAPACITY;
  while (c < n) c *= 2;
  return c;
}

/** The owner (and element comment) of an endpoint list: `ns/name:port` (cluster) or `ns/name:port local`. */
export function ownerComment(servicePortName: string, list: 'cluster' | 'local'): string {
  return list === 'cluster' ? servicePortName : `${servicePortName} local`;
}

/**
 * Stable slot assignment: endpoints already in `prev` at an index < N keep it; the others fill the holes in
 * [0, N) in the order given. Removing one endpoint therefore moves only the last one into its hole.
 */
export function assignSlots(prev: readonly string[], eps: readonly string[]): string[] {
  const n = eps.length;
  const out: (string | undefined)[] = new Array(n);
  const want = new Set(eps);
  const placed = new Set<string>();
  for (let i = 0; i < Math.min(prev.length, n); i++) {
    const e = prev[i];
    if (want.has(e)) { out[i] = e; placed.add(e); }
  }
  let hole = 0;
  for (const e of eps) {
    if (placed.has(e)) continue;
    while (out[hole] !== undefined) hole++;
    out[hole] = e;
  }
  return out as string[];
}

/** Allocates key blocks of the endpoint map to owners. */
export class EndpointAllocator {
  #blocks: Map<string, EndpointBlock>;
  #free: Map<number, number[]>;
  #next: number;

  constructor(blocks = new Map<string, EndpointBlock>(), free = new Map<number, number[]>(), next = 0) {
    this.#blocks = blocks;
    this.#free = free;
    this.#next = next;
  }

  /** An independent copy (blocks are immutable and shared). */
  clone(): EndpointAllocator {
    const free = new Map<number, number[]>();
    for (const [c, xs] of this.#free) free.set(c, xs.slice());
    return new EndpointAllocator(new Map(this.#blocks), free, this.#next);
  }

  /** The block of `owner`, if any. */
  get(owner: string): EndpointBlock | undefined {
    return this.#blocks.get(owner);
  }

  /** Number of owners. */
  get size(): number { return this.#blocks.size; }

  /** The first key never allocated (the high-water mark). */
  get highWater(): number { return this.#next; }

  /** How many endpoint maps the allocation needs (shards 0..n-1; at least 1). */
  get shards(): number { return Math.max(1, Math.ceil(this.#next / SHARD_KEYS)); }

  /** All owners and their blocks. */
  entries(): IterableIterator<[string, EndpointBlock]> {
    return this.#blocks.entries();
  }

  /**
   * Gives `owner` a block holding `eps` (identities, in preference order) with stable slots.
   * @throws Error when `eps` is empty or the u32 key space is exhausted.
   */
  assign(owner: string, eps: readonly string[]): EndpointBlock {
    if (eps.length === 0) throw new Error(`endpoint map: ${owner} has no endpoints to place`);
    const old = this.#blocks.get(owner);
    if (old && eps.length <= old.cap) {
      const slots = assignSlots(old.slots, eps);
      if (slots.length === old.slots.length && slots.every((s, i) => s === old.slots[i])) return old;
      const b = { offset: old.offset, cap: old.cap, slots };
      this.#blocks.set(owner, b);
      return b;
    }
    if (old) this.release(owner);
    const cap = capacityFor(eps.length);
    const b = { offset: this.#take(cap), cap, slots: assignSlots([], eps) };
    this.#blocks.set(owner, b);
    return b;
  }

  /** Frees the block of `owner` (no-op when it has none). */
  release(owner: string): void {
    const b = this.#blocks.get(owner);
    if (!b) return;
    this.#blocks.delete(owner);
    let xs = this.#free.get(b.cap);
    if (!xs) this.#free.set(b.cap, (xs = []));
    xs.push(b.offset);
  }

  /** Sets a block as found in the kernel (adoption). @throws Error when it overlaps the high-water mark rules. */
  adopt(owner: string, block: EndpointBlock): void {
    this.#blocks.set(owner, block);
    this.#next = Math.max(this.#next, block.offset + block.cap);
  }

  #take(cap: number): number {
    const xs = this.#free.get(cap);
    if (xs && xs.length) return xs.pop()!;
    let at = this.#next;
    // Never straddle a shard boundary (see SHARD_KEYS); the skipped keys stay unused.
    if (cap > SHARD_KEYS ? at % SHARD_KEYS !== 0 : shardOf(at) !== shardOf(at + cap - 1)) at = (shardOf(at) + 1) * SHARD_KEYS;
    if (at + cap > MAX_KEY) throw new Error(`endpoint map: the u32 key space is exhausted (${at} + ${cap})`);
    this.#next = at + cap;
    return at;
  }
}

/**
 * Rebuilds an allocator from the elements of an endpoint map as dumped from the kernel (restart adoption).
 * Elements are grouped by comment (the owner); a group's block starts at its smallest key and gets the capacity
 * for its size, bounded by the next group's first key. Slots are the endpoint identities in key order.
 * @param elements `key` the u32 index, `comment` the owner, `ip`/`port` the data (ip canonical for its family)
 * @throws Error when an element has no comment, or keys of one owner are not consecutive from its first key.
 */
export function rebuildEndpointAllocator(elements: Iterable<{ key: number; comment?: string; ip: string; port: number }>): EndpointAllocator {
  const groups = new Map<string, Array<{ key: number; id: string }>>();
  for (const e of elements) {
    if (e.comment === undefined) throw new Error(`endpoint map: element ${e.key} has no comment (owner)`);
    let g = groups.get(e.comment);
    if (!g) groups.set(e.comment, (g = []));
    g.push({ key: e.key, id: e.ip.includes(':') ? `[${e.ip}]:${e.port}` : `${e.ip}:${e.port}` });
  }
  const starts = [...groups.values()].map((g) => Math.min(...g.map((x) => x.key))).sort((a, b) => a - b);
  const a = new EndpointAllocator();
  for (const [owner, g] of groups) {
    g.sort((x, y) => x.key - y.key);
    const offset = g[0].key;
    g.forEach((x, i) => { if (x.key !== offset + i) throw new Error(`endpoint map: keys of ${owner} are not consecutive from ${offset} (found ${x.key})`); });
    const nextStart = starts.find((s) => s > offset) ?? Infinity;
    const cap = Math.max(g.length, Math.min(capacityFor(g.length), nextStart - offset));
    a.adopt(owner, { offset, cap, slots: g.map((x) => x.id) });
  }
  return a;
}

/** An endpoint to place: canonical address, port, and identity (`ip:port`, `[ip]:port`). */
export interface SelectEndpoint {
  ip: string;
  port: number;
  str: string;
}

/**
 * The selection rule and map elements of one endpoint list: `meta l4proto P dnat ip to numgen random mod N
 * offset K map @endpoint-map-S` and the N elements `K+i comment "owner" : ip . port` in that map (S = the shard
 * of K). Allocates (or keeps) the owner's block.
 * @param eps endpoints, non-empty, identities unique
 * @throws Error when `eps` is empty or the key space is exhausted.
 */
export function selectViaMap(
  alloc: EndpointAllocator, owner: string, proto: L4Proto, eps: readonly SelectEndpoint[],
): { rules: Rule[]; elements: Element[] } {
  const block = alloc.assign(owner, eps.map((e) => e.str));
  const map = endpointMapOf(block.offset);
  // A fresh block holds the endpoints in the given order: no lookup Map needed then.
  const inOrder = block.slots.length === eps.length && block.slots.every((id, i) => id === eps[i].str);
  const byStr = inOrder ? null : new Map(eps.map((e) => [e.str, e]));
  const elements: Element[] = block.slots.map((id, i) => {
    const ep = byStr ? byStr.get(id)! : eps[i];
    return { set: map, key: [{ type: 'numgen', value: block.offset + i }], endpoint: { ip: ep.ip, port: ep.port }, comment: owner };
  });
  const rules = [rule([S.l4proto(proto), { k: 'dnatMap', mod: eps.length, offset: block.offset, map }])];
  return { rules, elements };
}

/**
 * The fragment holding endpoint map `shard` (key `#endpoint-map-<shard>`; fragments whose key starts with '#'
 * are shared: any ServicePort fragment may reference their sets). Elements belong to the ServicePort fragments.
 */
export function shardFragment(shard: number): Fragment {
  const name = `${ENDPOINT_MAP_PREFIX}${shard}`;
  return {
    key: `#${name}`, fingerprint: name, chains: [], elements: [],
    sets: [{ name, key: ['numgen'], map: 'endpoint', comment: `endpoints: numgen index -> address . port (keys ${shard * SHARD_KEYS}..${(shard + 1) * SHARD_KEYS - 1})` }],
  };
}
