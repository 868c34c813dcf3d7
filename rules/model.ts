/**
 * The typed ruleset model: what the compiler produces, the planner diffs, the renderer prints, the lowering turns
 * into netlink expressions and the tracer executes. Plain data, no I/O.
 *
 * A {@link Ruleset} describes ONE table (`ip nftproxy` or `ip6 nftproxy`). Its content is grouped into
 * {@link Fragment}s: the skeleton (key {@link SKELETON_KEY}: base chains, fixed chains and their rules, fixed
 * sets/maps and their constant elements) and one fragment per ServicePort (key = `servicePortKey()` of
 * config-schema/snapshot.ts) holding that ServicePort's chains and its elements in the shared maps/sets.
 *
 * Rules are lists of high-level statements ({@link Stmt}). Each statement has exactly one lowering to netlink
 * `Expr[]` (lower.ts, byte-identical to what nft 1.0.6 generates for the rendered text) and one rendering to nft
 * text (render.ts).
 *
 * Invariants checked by {@link buildRuleset} (the planner relies on them):
 * - chain and set names are unique in the table; every element's set exists and its key matches the set's types;
 * - a rule or element of a ServicePort fragment references only chains/sets of its own fragment or of the
 *   skeleton; skeleton rules and elements reference only the skeleton.
 */
import { hash } from 'node:crypto';
import type { TableFamily, Verdict } from '../netlink/types.ts';
import { canonicalAddr } from './addr.ts';
import type { EndpointAllocator } from './endpoint-select.ts';
import type { RulesetDelta } from './incremental.ts';

/** The fragment key of the skeleton. Not a valid `servicePortKey()` (those contain '/' and ':'). */
export const SKELETON_KEY = '#skeleton';

/** L4 protocols of Services. Numbers are IPPROTO_* from linux/in.h (tcp 6, udp 17, sctp 132). */
export type L4Proto = 'tcp' | 'udp' | 'sctp';
export const L4PROTO_NUMBER: Record<L4Proto, number> = { tcp: 6, udp: 17, sctp: 132 };

/** Packet fields usable as (components of) set keys: `ip saddr`, `ip daddr`, `meta l4proto`, `th dport`. */
export type KeyField = 'saddr' | 'daddr' | 'l4proto' | 'dport';

/**
 * nft datatypes of set keys we use (nftables include/datatype.h: ipv4_addr 7, ipv6_addr 8, inet_proto 12,
 * inet_service 13). `numgen` is nft's `integer` (4) as `typeof numgen random mod 1` declares it: a u32 in host
 * byte order (the endpoint map's key).
 */
export type KeyType = 'ipv4_addr' | 'ipv6_addr' | 'inet_proto' | 'inet_service' | 'numgen';

/** The key type a packet field has in a table of `family`. */
export function keyTypeOf(family: TableFamily, f: KeyField): KeyType {
  if (f === 'l4proto') return 'inet_proto';
  if (f === 'dport') return 'inet_service';
  return family === 'ip' ? 'ipv4_addr' : 'ipv6_addr';
}

/** Conntrack states `ct state` can test (bits from linux/netfilter/nf_conntrack_common.h). */
export type CtStateName = 'invalid' | 'established' | 'related' | 'new' | 'untracked';

/**
 * One high-level statement of a rule. Matches come first in a rule, then at most one terminal action.
 * The nft text of each variant is given in its comment (as `nft list ruleset` prints it).
 */
export type Stmt =
  /** `ip saddr 10.0.0.0/8`, `ip daddr != 127.0.0.0/8`, `ip6 daddr fd00::1`: address or prefix (CIDR) match. */
  | { k: 'addr'; field: 'saddr' | 'daddr'; neg: boolean; cidr: string }
  /** `ip daddr @cluster-ips`, `ip saddr . ip daddr . meta l4proto . th dport @hairpin-connections`, `!= @set`. */
  | { k: 'lookup'; key: readonly KeyField[]; set: string; neg: boolean }
  /** `ip daddr . meta l4proto . th dport vmap @service-ips`: verdict-map lookup (a miss continues). */
  | { k: 'vmap'; key: readonly KeyField[]; map: string }
  /** `meta l4proto tcp`. */
  | { k: 'l4proto'; proto: L4Proto }
  /** `ct state new`. */
  | { k: 'ctState'; state: CtStateName }
  /** `ct status dnat` / `ct status snat`. */
  | { k: 'ctStatus'; status: 'dnat' | 'snat' }
  /** `fib daddr type local` / `fib saddr type local`. */
  | { k: 'fibLocal'; addr: 'saddr' | 'daddr' }
  /** `iifname "cni0"`, `iifname != "veth*"` (a trailing `*` is a prefix match). */
  | { k: 'iifname'; neg: boolean; name: string }
  /** `meta mark & 0x00004000 != 0x00000000` (values are u32, host order in the register). */
  | { k: 'markTest'; mask: number; neg: boolean; value: number }
  /** `numgen random mod 3 0`: true with probability 1/mod (value in 0..mod-1). */
  | { k: 'numgen'; mod: number; value: number }
  /** `meta mark set meta mark | 0x00004000` (or) / `meta mark set meta mark ^ 0x00004000` (xor). */
  | { k: 'markSet'; op: 'or' | 'xor'; bits: number }
  /**
   * `dnat ip to numgen random mod 3 offset 5 map @endpoint-map` (`offset 0` is not printed): picks one of the
   * keys offset..offset+mod-1 of an endpoint map (addr . port data) at random and DNATs to it. Needs a preceding
   * `meta l4proto` match.
   */
  | { k: 'dnatMap'; mod: number; offset: number; map: string }
  /** `dnat to 10.0.0.1:80` / `dnat to [fd00::1]:80`. Needs a preceding `meta l4proto` match (nft requires it). */
  | { k: 'dnat'; addr: string; port: number }
  /** `masquerade fully-random` / `masquerade`. */
  | { k: 'masquerade'; fullyRandom: boolean }
  /** `update @affinity-X { ip saddr }`. */
  | { k: 'update'; set: string; field: 'saddr' | 'daddr' }
  /** `counter`. */
  | { k: 'counter' }
  /** `reject` (ICMP port unreachable / ICMPv6 port unreachable). */
  | { k: 'reject' }
  /** `accept`, `drop`, `return`, `jump X`, `goto X`. */
  | { k: 'verdict'; verdict: Verdict };

/** A rule: statements plus an optional comment (at most 128 bytes, nft's limit). */
export interface Rule {
  stmts: readonly Stmt[];
  comment?: string;
}

export type HookName = 'prerouting' | 'input' | 'forward' | 'output' | 'postrouting';

/** The hook of a base chain. `priority` is the number (dstnat -100, filter 0, srcnat 100). No policy: accept. */
export interface BaseHook {
  type: 'filter' | 'nat';
  hook: HookName;
  priority: number;
}

/** A chain with its rules, in order. Base chains have a hook. */
export interface Chain {
  name: string;
  hook?: BaseHook;
  comment?: string;
  rules: readonly Rule[];
}

/**
 * A named set or map. `key` has one type, or several for a concatenation. `map: 'verdict'` makes it a verdict
 * map; `map: 'endpoint'` an endpoint map (`typeof numgen random mod 1 : ip daddr . th dport`: key a u32 index,
 * data `addr . inet_service`). `timeoutSec` makes it a `flags dynamic,timeout` set with that default timeout (seconds).
 */
export interface SetDef {
  name: string;
  key: readonly KeyType[];
  map?: 'verdict' | 'endpoint';
  timeoutSec?: number;
  comment?: string;
}

/** One typed component of an element key, matching the set's KeyType at that position. */
export type KeyPart =
  | { type: 'ipv4_addr'; ip: string }
  | { type: 'ipv6_addr'; ip: string }
  | { type: 'inet_proto'; proto: L4Proto }
  | { type: 'inet_service'; port: number }
  /** A u32 (0..2^32-1), host byte order in the register. */
  | { type: 'numgen'; value: number };

/** An element of a named set (no verdict), verdict map (with one) or endpoint map (with `endpoint`). */
export interface Element {
  set: string;
  key: readonly KeyPart[];
  verdict?: Verdict;
  /** Endpoint maps: the DNAT target (address canonical for the family; port 1..65535). */
  endpoint?: { ip: string; port: number };
  comment?: string;
}

/** A unit of incremental sync: the skeleton, or one ServicePort. */
export interface Fragment {
  key: string;
  /**
   * Equal fingerprints imply equal content. Read-only; a compiled ServicePort fragment computes it on first read
   * (from its immutable inputs: the ServicePort, the globals digest, its endpoint-map blocks) and caches it.
   */
  readonly fingerprint: string;
  /** The fingerprint of the compiler's input (ServicePort + globals) when it differs from `fingerprint`. */
  readonly inputFingerprint?: string;
  chains: readonly Chain[];
  sets: readonly SetDef[];
  elements: readonly Element[];
  /** Optional cache: `elementKeyText()` of each element, same order (saves re-parsing addresses on re-index). */
  elementKeys?: readonly string[];
  /**
   * Optional: the input object this fragment was compiled from (a ServicePort). compile() reuses the fragment
   * when the next snapshot holds the very same object (snapshots are treated as immutable).
   */
  source?: unknown;
  /** Owners (element comments) of the endpoint-map blocks this fragment holds (endpoint-select.ts). */
  endpointOwners?: readonly string[];
}

/**
 * An element as the ruleset index holds it: `keyText` is its identity; its value identity is
 * `elementValueText(element)` (computed where compared, not stored: a full sync never compares).
 */
export interface IndexedElement {
  element: Element;
  /** Fragment that wrote it first (in fragment order); others holding the same key count in `owners`. */
  fragment: string;
  keyText: string;
  owners: number;
}

/** Lookup structures over a ruleset, built once by {@link buildRuleset}. */
export interface RulesetIndex {
  chains: ReadonlyMap<string, { chain: Chain; fragment: string }>;
  sets: ReadonlyMap<string, { set: SetDef; fragment: string }>;
  /** set name -> element key text -> element. */
  elements: ReadonlyMap<string, ReadonlyMap<string, IndexedElement>>;
}

/** The desired (or committed) content of one table. */
export interface Ruleset {
  family: TableFamily;
  table: string;
  comment: string;
  /** Skeleton first, then ServicePort fragments (sorted by key). */
  fragments: ReadonlyMap<string, Fragment>;
  index: RulesetIndex;
  /** The endpoint-map key allocation of this ruleset (set by compile(); endpoint-select.ts). */
  endpointAlloc?: EndpointAllocator;
  /** Set by an in-place compile until committed or rolled back (incremental.ts). */
  delta?: RulesetDelta;
}

// ---------------------------------------------------------------------------------------------------------------
// Statement builders (short, for the compiler and tests)

/** Terse constructors of {@link Stmt}s. */
export const S = {
  saddr: (cidr: string, neg = false): Stmt => ({ k: 'addr', field: 'saddr', neg, cidr }),
  daddr: (cidr: string, neg = false): Stmt => ({ k: 'addr', field: 'daddr', neg, cidr }),
  lookup: (key: readonly KeyField[], set: string, neg = false): Stmt => ({ k: 'lookup', key, set, neg }),
  vmap: (key: readonly KeyField[], map: string): Stmt => ({ k: 'vmap', key, map }),
  l4proto: (proto: L4Proto): Stmt => ({ k: 'l4proto', proto }),
  ctState: (state: CtStateName): Stmt => ({ k: 'ctState', state }),
  ctStatus: (status: 'dnat' | 'snat'): Stmt => ({ k: 'ctStatus', status }),
  fibLocal: (addr: 'saddr' | 'daddr'): Stmt => ({ k: 'fibLocal', addr }),
  iifname: (name: string, neg = false): Stmt => ({ k: 'iifname', neg, name }),
  markTest: (mask: number, neg: boolean, value: number): Stmt => ({ k: 'markTest', mask, neg, value }),
  numgen: (mod: number, value: number): Stmt => ({ k: 'numgen', mod, value }),
  markOr: (bits: number): Stmt => ({ k: 'markSet', op: 'or', bits }),
  markXor: (bits: number): Stmt => ({ k: 'markSet', op: 'xor', bits }),
  dnat: (addr: string, port: number): Stmt => ({ k: 'dnat', addr, port }),
  masquerade: (fullyRandom = true): Stmt => ({ k: 'masquerade', fullyRandom }),
  update: (set: string, field: 'saddr' | 'daddr' = 'saddr'): Stmt => ({ k: 'update', set, field }),
  counter: (): Stmt => ({ k: 'counter' }),
  reject: (): Stmt => ({ k: 'reject' }),
  accept: (): Stmt => ({ k: 'verdict', verdict: { kind: 'accept' } }),
  drop: (): Stmt => ({ k: 'verdict', verdict: { kind: 'drop' } }),
  ret: (): Stmt => ({ k: 'verdict', verdict: { kind: 'return' } }),
  jump: (chain: string): Stmt => ({ k: 'verdict', verdict: { kind: 'jump', chain } }),
  goto: (chain: string): Stmt => ({ k: 'verdict', verdict: { kind: 'goto', chain } }),
} as const;

/** A rule from statements and an optional comment. */
export function rule(stmts: readonly Stmt[], comment?: string): Rule {
  return comment === undefined ? { stmts } : { stmts, comment };
}

// ---------------------------------------------------------------------------------------------------------------
// Element texts (identity and value), shared by the index, the planner and the renderer

/** nft text of a verdict: `accept`, `drop`, `goto X`, ... */
export function verdictText(v: Verdict): string {
  return v.kind === 'jump' || v.kind === 'goto' ? `${v.kind} ${v.chain}` : v.kind;
}

/** nft text of one key component. IPv6 addresses are bare (`fd00::1`), as in nft element syntax. */
export function keyPartText(p: KeyPart): string {
  switch (p.type) {
    case 'ipv4_addr': return canonicalAddr('ip', p.ip);
    case 'ipv6_addr': return canonicalAddr('ip6', p.ip);
    case 'inet_proto': return p.proto;
    case 'inet_service': return String(p.port);
    case 'numgen': return String(p.value);
  }
}

/** nft text of an element key: `10.96.0.1 . tcp . 80`. This string is the element's identity in its set. */
export function elementKeyText(e: Pick<Element, 'key'>): string {
  const k = e.key;
  if (k.length <= 1) return k.length ? keyPartText(k[0]) : '';
  let out = keyPartText(k[0]);
  for (let i = 1; i < k.length; i++) out += ' . ' + keyPartText(k[i]);
  return out;
}

/** The value identity of an element: verdict text and comment (a change of either is a change of the element). */
export function elementValueText(e: Pick<Element, 'verdict' | 'comment' | 'endpoint'>): string {
  return `${e.verdict ? verdictText(e.verdict) : ''}|${e.comment ?? ''}${e.endpoint ? `|${e.endpoint.ip}.${e.endpoint.port}` : ''}`;
}

/** Names of the chains a statement jumps or goes to. */
export function stmtChainRefs(s: Stmt): string[] {
  return s.k === 'verdict' && (s.verdict.kind === 'jump' || s.verdict.kind === 'goto') ? [s.verdict.chain] : [];
}

/** Names of the sets/maps a statement references. */
export function stmtSetRefs(s: Stmt): string[] {
  if (s.k === 'lookup') return [s.set];
  if (s.k === 'vmap') return [s.map];
  if (s.k === 'update') return [s.set];
  if (s.k === 'dnatMap') return [s.map];
  return [];
}

/**
 * A digest of a string for change detection: SHA-1 (node:crypto one-shot `hash()`, native, about 3x faster than a
 * JavaScript hash loop over the ~1 KB JSON of a ServicePort), base64, 28 characters. Only compared in memory, never
 * stored or sent: a collision would only delay a change until the next full resync.
 */
export function hashString(str: string): string {
  return hash('sha1', str, 'base64');
}

/** A short stable digest of a JSON-able value: {@link hashString} of its JSON (equal values, equal digests). */
export function fingerprintOf(value: unknown): string {
  return hashString(JSON.stringify(value));
}

const KEY_PART_TYPES: Record<KeyPart['type'], true> = { ipv4_addr: true, ipv6_addr: true, inet_proto: true, inet_service: true, numgen: true };

/**
 * Checks one fragment against the table's chains and sets: references to unknown chains/sets or to another
 * ServicePort's objects, statement/set kind and key-type mismatches, and its elements' sets, key types, verdicts
 * and endpoint data.
 * @throws Error naming the chain or element and the fragment.
 */
export function checkFragmentRefs(
  family: TableFamily, f: Fragment,
  chains: ReadonlyMap<string, { chain: Chain; fragment: string }>, sets: ReadonlyMap<string, { set: SetDef; fragment: string }>,
): void {
  // The skeleton and other shared fragments (keys starting with '#', e.g. the endpoint maps) are visible to all.
  const visible = (owner: string, refFragment: string) => refFragment === owner || refFragment.startsWith('#');
  for (const c of f.chains) {
    for (const r of c.rules) {
      for (const st of r.stmts) {
        // At most one chain and one set reference per statement (stmtChainRefs/stmtSetRefs), without arrays.
        const cref = st.k === 'verdict' && (st.verdict.kind === 'jump' || st.verdict.kind === 'goto') ? st.verdict.chain : undefined;
        if (cref !== undefined) {
          const ref = cref;
          const t = chains.get(ref);
          if (!t) throw new Error(`ruleset: chain ${c.name} references unknown chain ${JSON.stringify(ref)}`);
          if (!visible(f.key, t.fragment)) throw new Error(`ruleset: chain ${c.name} (${f.key}) references chain ${ref} of ${t.fragment}`);
        }
        const sref = st.k === 'lookup' || st.k === 'update' ? st.set : st.k === 'vmap' || st.k === 'dnatMap' ? st.map : undefined;
        if (sref !== undefined) {
          const ref = sref;
          const t = sets.get(ref);
          if (!t) throw new Error(`ruleset: chain ${c.name} references unknown set ${JSON.stringify(ref)}`);
          if (!visible(f.key, t.fragment)) throw new Error(`ruleset: chain ${c.name} (${f.key}) references set ${ref} of ${t.fragment}`);
          if (st.k === 'vmap' && t.set.map !== 'verdict') throw new Error(`ruleset: chain ${c.name}: vmap on ${ref}, which is not a verdict map`);
          if (st.k === 'lookup' && t.set.map) throw new Error(`ruleset: chain ${c.name}: set lookup on map ${ref}`);
          if (st.k === 'dnatMap' && t.set.map !== 'endpoint') throw new Error(`ruleset: chain ${c.name}: dnat map on ${ref}, which is not an endpoint map`);
          if (st.k === 'vmap' || st.k === 'lookup') {
            const want = st.key.map((k) => keyTypeOf(family, k)).join(' . ');
            if (want !== t.set.key.join(' . ')) throw new Error(`ruleset: chain ${c.name}: key ${want} does not match ${ref} (${t.set.key.join(' . ')})`);
          }
        }
      }
    }
  }
  for (const e of f.elements) {
    const t = sets.get(e.set);
    if (!t) throw new Error(`ruleset: element of unknown set ${JSON.stringify(e.set)} in ${f.key}`);
    if (!visible(f.key, t.fragment)) throw new Error(`ruleset: element of set ${e.set} (${t.fragment}) in ${f.key}`);
    let keyOk = e.key.length === t.set.key.length;
    for (let i = 0; keyOk && i < e.key.length; i++) { const p = e.key[i]; keyOk = !!KEY_PART_TYPES[p.type] && p.type === t.set.key[i]; }
    if (!keyOk) {
      throw new Error(`ruleset: element ${JSON.stringify(e.key)} of ${f.key} does not match the key type ${t.set.key.join(' . ')} of ${e.set}`);
    }
    if (!!e.verdict !== (t.set.map === 'verdict')) throw new Error(`ruleset: element of ${e.set} in ${f.key}: ${t.set.map === 'verdict' ? 'missing' : 'unexpected'} verdict`);
    if (!!e.endpoint !== (t.set.map === 'endpoint')) throw new Error(`ruleset: element of ${e.set} in ${f.key}: ${t.set.map === 'endpoint' ? 'missing' : 'unexpected'} endpoint data`);
    if (e.verdict && (e.verdict.kind === 'goto' || e.verdict.kind === 'jump')) {
      const c = chains.get(e.verdict.chain);
      if (!c) throw new Error(`ruleset: element of ${e.set} in ${f.key} points to unknown chain ${JSON.stringify(e.verdict.chain)}`);
      if (!visible(f.key, c.fragment)) throw new Error(`ruleset: element of ${e.set} in ${f.key} points to chain ${e.verdict.chain} of ${c.fragment}`);
    }
  }
}

/**
 * Assembles a ruleset from fragments (skeleton first) and builds its index. `opts.trusted` fragments (already
 * validated in a ruleset with the same skeleton) skip the reference checks.
 * @throws Error on duplicate chain/set names, elements of unknown sets or with mistyped keys, references to
 *   unknown chains/sets, references across ServicePort fragments, or a vmap statement on a non-map.
 */
export function buildRuleset(
  family: TableFamily, table: string, comment: string, fragments: readonly Fragment[],
  opts: { trusted?: ReadonlySet<Fragment> } = {},
): Ruleset {
  const fragMap = new Map<string, Fragment>();
  const chains = new Map<string, { chain: Chain; fragment: string }>();
  const sets = new Map<string, { set: SetDef; fragment: string }>();
  for (const f of fragments) {
    if (fragMap.has(f.key)) throw new Error(`ruleset: duplicate fragment ${JSON.stringify(f.key)}`);
    fragMap.set(f.key, f);
    for (const c of f.chains) {
      const prev = chains.get(c.name);
      if (prev) throw new Error(`ruleset: chain ${JSON.stringify(c.name)} defined by ${prev.fragment} and ${f.key}`);
      chains.set(c.name, { chain: c, fragment: f.key });
    }
    for (const s of f.sets) {
      const prev = sets.get(s.name);
      if (prev) throw new Error(`ruleset: set ${JSON.stringify(s.name)} defined by ${prev.fragment} and ${f.key}`);
      if (s.key.length === 0) throw new Error(`ruleset: set ${JSON.stringify(s.name)} has no key type`);
      sets.set(s.name, { set: s, fragment: f.key });
    }
  }
  const elements = new Map<string, Map<string, IndexedElement>>();
  for (const s of sets.keys()) elements.set(s, new Map());
  // Consecutive elements are often of one set: its index Map looked up once per run.
  let lastSet: string | undefined, lastBySet: Map<string, IndexedElement> | undefined;
  for (const f of fragments) {
    if (!opts.trusted?.has(f)) checkFragmentRefs(family, f, chains, sets);
    for (let ei = 0; ei < f.elements.length; ei++) {
      const e = f.elements[ei];
      const bySet = e.set === lastSet ? lastBySet : (lastBySet = elements.get((lastSet = e.set)));
      if (!bySet) throw new Error(`ruleset: element of unknown set ${JSON.stringify(e.set)} in ${f.key}`);
      const keyText = f.elementKeys?.[ei] ?? elementKeyText(e);
      const prev = bySet.get(keyText);
      if (prev) prev.owners++;
      else bySet.set(keyText, { element: e, fragment: f.key, keyText, owners: 1 });
    }
  }
  return { family, table, comment, fragments: fragMap, index: { chains, sets, elements } };
}
