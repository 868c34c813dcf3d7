/**
 * Restart adoption (DESIGN.md "dumped only at startup, to adopt what is there"): when the agent starts and finds
 * its table already in the kernel (a previous instance left it in place on SIGTERM), it dumps the table, compares
 * it object by object with what it would program, and sends only the difference. When everything matches it sends
 * nothing, and the syncer continues from the desired ruleset as if it had committed it itself.
 *
 * Comparison is on decoded objects (netlink/objects.ts decoders versus rules/lower.ts encoders), with kernel-only
 * fields removed: handles, set ids in lookups/dynsets, counter values, set ids of NEWSET, verdict-map data lengths,
 * and the default
 * base-chain policy (`accept`, NF_ACCEPT, which the kernel reports even when nft sent none). Elements of timeout
 * sets (affinity sets filled by the datapath) are not compared. Per object:
 * - table: missing → nothing to adopt (the normal full sync creates it); comment differs → full sync;
 * - base chains: hook differs or missing → full sync (hooks cannot be changed in place);
 * - sets: definition differs or missing → full sync; extra → deleted;
 * - regular chains: missing → added with its rules; rules differ (list of expressions and comments, in order) →
 *   flushed and refilled; extra → flushed and deleted at the end of the batch;
 * - elements: per key; extra → deleted; missing or with a different verdict/comment → (deleted and) added.
 *
 * The repair is ONE batch (all or nothing). The caller falls back to a full sync when it fails.
 * This module does no I/O beyond the {@link TableReader} it is given.
 */
import type { BatchOp, ChainSpec, ElementSpec, ElementsSpec, Expr, RuleSpec, SetSpec, TableFamily, TableSpec } from '../netlink/types.ts';
import { NAT_FLAG, NFT_DATA_VERDICT, SET_FLAG } from '../netlink/types.ts';
import { EndpointAllocator, isEndpointMap, rebuildEndpointAllocator } from '../rules/index.ts';
import { formatAddr } from '../rules/addr.ts';

/** The dump calls adoption needs (NftSocket has them). */
export interface TableReader {
  listTables(family?: TableFamily): Promise<TableSpec[]>;
  listChains(family: TableFamily, table: string): Promise<ChainSpec[]>;
  listSets(family: TableFamily, table: string): Promise<SetSpec[]>;
  listRules(family: TableFamily, table: string, chain?: string): Promise<RuleSpec[]>;
  listElements(family: TableFamily, table: string, set: string): Promise<ElementsSpec>;
}

/** One table's objects as the kernel holds them (or as we would create them). */
export interface TableContent {
  table: TableSpec;
  chains: Map<string, ChainSpec>;
  sets: Map<string, SetSpec>;
  /** chain name → rules in order. */
  rules: Map<string, RuleSpec[]>;
  /** set name → element key (hex) → element. */
  elements: Map<string, Map<string, ElementSpec>>;
}

/** The outcome of comparing the kernel's table with the desired one. */
export interface AdoptionPlan {
  /**
   * 'adopt': `ops` (possibly empty) turn the kernel's table into the desired one; 'full': something cannot be
   * changed in place (or the table is missing), use a full sync; `reason` says why.
   */
  kind: 'adopt' | 'full';
  reason: string;
  ops: BatchOp[];
  /** Human-readable differences, e.g. `chain service-X: rules differ` (at most 20 listed). */
  mismatches: string[];
  /** Objects compared: chains, sets, rules, elements (for logs and tests). */
  compared: { chains: number; sets: number; rules: number; elements: number };
}

const hex = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');

/** A stable text of a value with Uint8Array as hex and bigint as decimal (for comparisons). */
export function stableText(v: unknown): string {
  return JSON.stringify(v, (_k, x) => {
    if (x instanceof Uint8Array) return `0x${hex(x)}`;
    if (typeof x === 'bigint') return `${x}n`;
    if (x && typeof x === 'object' && !Array.isArray(x)) {
      const o: Record<string, unknown> = {};
      for (const k of Object.keys(x).sort()) if ((x as Record<string, unknown>)[k] !== undefined) o[k] = (x as Record<string, unknown>)[k];
      return o;
    }
    return x;
  });
}

/** Drops fields that only the kernel fills in or that only exist inside one batch. */
function normExpr(e: Expr): unknown {
  switch (e.type) {
    case 'lookup': return { ...e, setId: undefined, flags: e.flags || undefined };
    case 'dynset': return { ...e, setId: undefined, flags: e.flags || undefined };
    case 'counter': return { type: 'counter' };
    // The kernel reports the default NFT_BITWISE_MASK_XOR (0) even when it was not sent.
    case 'bitwise': return { ...e, op: e.op ?? 0 };
    // nft_nat_dump(): a max register defaults to the min one; address registers imply NF_NAT_RANGE_MAP_IPS and
    // proto registers NF_NAT_RANGE_PROTO_SPECIFIED (nft_nat_init sets both flags).
    case 'nat': return {
      ...e,
      regAddrMax: e.regAddrMax ?? e.regAddrMin, regProtoMax: e.regProtoMax ?? e.regProtoMin,
      flags: (e.flags ?? 0) | (e.regAddrMin !== undefined ? NAT_FLAG.MAP_IPS : 0) | (e.regProtoMin !== undefined ? NAT_FLAG.PROTO_SPECIFIED : 0),
    };
    case 'masq': return { ...e, regProtoMax: e.regProtoMax ?? e.regProtoMin, flags: e.flags || undefined };
    default: return e;
  }
}

/** The comparable text of a rule: expressions and comment. */
export function ruleText(r: RuleSpec): string {
  return stableText({ exprs: r.exprs.map(normExpr), comment: r.comment });
}

function chainText(c: ChainSpec): string {
  return stableText({ hook: c.hook ? { ...c.hook, policy: c.hook.policy ?? 'accept' } : null, comment: c.comment });
}

export function setText(s: SetSpec): string {
  // The kernel reports a verdict map's data length as sizeof(struct nft_verdict) (16); nft sends 0.
  const dataLen = s.dataType === NFT_DATA_VERDICT ? undefined : s.dataLen;
  return stableText({ ...s, dataLen, id: undefined, handle: undefined, family: undefined, table: undefined });
}

function elementValueText(e: ElementSpec): string {
  return stableText({ data: e.data, comment: e.comment, flags: e.flags || undefined });
}

/**
 * Reads our table of `family` from the kernel; null when it does not exist.
 * @throws what the reader throws (NetlinkSocketError).
 */
export async function readTable(reader: TableReader, family: TableFamily, name: string): Promise<TableContent | null> {
  const table = (await reader.listTables(family)).find((t) => t.name === name);
  if (!table) return null;
  const chains = new Map((await reader.listChains(family, name)).map((c) => [c.name, c]));
  const sets = new Map((await reader.listSets(family, name)).map((s) => [s.name, s]));
  const rules = new Map<string, RuleSpec[]>();
  for (const c of chains.keys()) rules.set(c, []);
  for (const r of await reader.listRules(family, name)) {
    if (!rules.has(r.chain)) rules.set(r.chain, []);
    rules.get(r.chain)!.push(r);
  }
  const elements = new Map<string, Map<string, ElementSpec>>();
  for (const s of sets.values()) {
    if (s.flags & SET_FLAG.TIMEOUT) continue; // filled by the datapath
    const es = await reader.listElements(family, name, s.name);
    elements.set(s.name, new Map(es.elements.map((e) => [hex(e.key), e])));
  }
  return { table, chains, sets, rules, elements };
}

/**
 * The content a batch would create: the `add` operations of a full plan (rules/plan.ts toBatchOps), collected
 * per object. Only `add` operations are used (the full plan's `delete table` is skipped).
 */
export function contentOf(ops: readonly BatchOp[]): TableContent | null {
  let table: TableSpec | null = null;
  const chains = new Map<string, ChainSpec>();
  const sets = new Map<string, SetSpec>();
  const rules = new Map<string, RuleSpec[]>();
  const elements = new Map<string, Map<string, ElementSpec>>();
  for (const o of ops) {
    if (o.op !== 'add') continue;
    switch (o.kind) {
      case 'table': table = o.table; break;
      case 'chain': chains.set(o.chain.name, o.chain); if (!rules.has(o.chain.name)) rules.set(o.chain.name, []); break;
      case 'set': sets.set(o.set.name, o.set); if (!(o.set.flags & SET_FLAG.TIMEOUT)) elements.set(o.set.name, new Map()); break;
      case 'rule': {
        if (!rules.has(o.rule.chain)) rules.set(o.rule.chain, []);
        rules.get(o.rule.chain)!.push(o.rule);
        break;
      }
      case 'elements': {
        if (!elements.has(o.elements.set)) elements.set(o.elements.set, new Map());
        const m = elements.get(o.elements.set)!;
        for (const e of o.elements.elements) m.set(hex(e.key), e);
        break;
      }
    }
  }
  return table ? { table, chains, sets, rules, elements } : null;
}

/**
 * Compares the kernel's table with the desired content and plans the repair batch.
 * @param kernel the dump (null: the table does not exist)
 * @param desired the content of the desired ruleset ({@link contentOf} of its full-plan ops)
 * @param opts.ignoreEmptyExtraChains do not count extra chains without rules (a running syncer's stale chains,
 *   flushed and awaiting deletion: rules/plan.ts STALE_CHAIN_DELAY_MS)
 */
export function planAdoption(kernel: TableContent | null, desired: TableContent, opts: { ignoreEmptyExtraChains?: boolean } = {}): AdoptionPlan {
  const compared = { chains: 0, sets: 0, rules: 0, elements: 0 };
  const mismatches: string[] = [];
  const note = (m: string) => { if (mismatches.length < 20) mismatches.push(m); };
  const full = (reason: string): AdoptionPlan => ({ kind: 'full', reason, ops: [], mismatches, compared });
  if (!kernel) return full('the table does not exist');
  const { family, name: table } = desired.table;
  if ((kernel.table.comment ?? null) !== (desired.table.comment ?? null)) return full(`table comment differs (${JSON.stringify(kernel.table.comment)})`);

  // Sets: definitions must match; extra sets are deleted.
  const extraSets: string[] = [];
  for (const [n, s] of desired.sets) {
    compared.sets++;
    const k = kernel.sets.get(n);
    if (!k) return full(`set ${n} is missing`);
    // Without a size from us, the kernel reports its own default (65535 for dynamic sets): not a difference.
    if (setText(s.size === undefined ? { ...k, size: undefined } : k) !== setText(s)) return full(`set ${n} has a different definition`);
  }
  for (const n of kernel.sets.keys()) if (!desired.sets.has(n)) { extraSets.push(n); note(`set ${n}: not ours any more`); }

  // Chains.
  const addChains: ChainSpec[] = [];
  const refill: string[] = [];
  const extraChains: string[] = [];
  for (const [n, c] of desired.chains) {
    compared.chains++;
    const k = kernel.chains.get(n);
    if (c.hook || k?.hook) {
      if (!k || chainText(k) !== chainText(c)) return full(`base chain ${n} is missing or has a different hook`);
    } else if (!k) {
      addChains.push(c);
      note(`chain ${n}: missing`);
      continue;
    } else if (chainText(k) !== chainText(c)) {
      return full(`chain ${n}: comment differs`);
    }
    const want = desired.rules.get(n) ?? [];
    const have = kernel.rules.get(n) ?? [];
    compared.rules += want.length;
    if (want.length !== have.length || want.some((r, i) => ruleText(r) !== ruleText(have[i]))) {
      if (c.hook) return full(`base chain ${n}: rules differ`);
      refill.push(n);
      note(`chain ${n}: rules differ`);
    }
  }
  for (const [n, k] of kernel.chains) {
    if (desired.chains.has(n)) continue;
    if (k.hook) return full(`base chain ${n} is not ours`);
    if (opts.ignoreEmptyExtraChains && (kernel.rules.get(n)?.length ?? 0) === 0) continue;
    extraChains.push(n);
    note(`chain ${n}: not ours any more`);
  }

  // Elements, per key.
  const delElems: ElementsSpec[] = [];
  const addElems: ElementsSpec[] = [];
  for (const [set, want] of desired.elements) {
    const have = kernel.elements.get(set) ?? new Map<string, ElementSpec>();
    const del: ElementSpec[] = [];
    const add: ElementSpec[] = [];
    for (const [key, e] of want) {
      compared.elements++;
      const k = have.get(key);
      if (!k) add.push(e);
      else if (elementValueText(k) !== elementValueText(e)) { del.push({ key: e.key }); add.push(e); }
    }
    for (const [key, k] of have) if (!want.has(key)) del.push({ key: k.key });
    if (del.length) { delElems.push({ family, table, set, elements: del }); note(`set ${set}: ${del.length} element(s) to delete`); }
    if (add.length) { addElems.push({ family, table, set, elements: add }); note(`set ${set}: ${add.length} element(s) to add`); }
  }

  const ops: BatchOp[] = [];
  for (const c of addChains) ops.push({ op: 'add', kind: 'chain', chain: c });
  for (const n of [...refill, ...extraChains]) ops.push({ op: 'flush', kind: 'chain', chain: { family, table, name: n } });
  for (const e of delElems) ops.push({ op: 'delete', kind: 'elements', elements: e });
  for (const n of extraSets) ops.push({ op: 'delete', kind: 'set', set: { family, table, name: n, flags: 0, keyType: 0, keyLen: 0 } });
  for (const n of [...addChains.map((c) => c.name), ...refill]) {
    for (const r of desired.rules.get(n) ?? []) ops.push({ op: 'add', kind: 'rule', rule: { ...r, exprs: r.exprs.map(stripSetId) } });
  }
  for (const e of addElems) ops.push({ op: 'add', kind: 'elements', elements: e });
  for (const n of extraChains) ops.push({ op: 'delete', kind: 'chain', chain: { family, table, name: n } });
  return { kind: 'adopt', reason: ops.length ? `${mismatches.length} difference(s)` : 'identical', ops, mismatches, compared };
}

/** Sets are not created in a repair batch, so rules reference them by name only. */
function stripSetId(e: Expr): Expr {
  return (e.type === 'lookup' || e.type === 'dynset') && e.setId !== undefined ? { ...e, setId: undefined } : e;
}

/**
 * The endpoint allocation held by the kernel's endpoint maps (`endpoint-map-<i>`, rules/endpoint-select.ts), so a
 * restarted agent compiles the same `numgen ... offset K` blocks and element keys and changes nothing that is
 * already right. Keys are host-order (little-endian) u32 numgen values; data is the address (4 or 16 bytes,
 * network order) then the port (2 bytes, network order) padded to 4; comments name the owner.
 * @returns null when the table has no endpoint map elements.
 * @throws Error when an element is malformed (rebuildEndpointAllocator: no comment, keys not consecutive).
 */
export function allocatorFromTable(content: TableContent | null): EndpointAllocator | null {
  if (!content) return null;
  const found: Array<{ key: number; comment?: string; ip: string; port: number }> = [];
  for (const [set, elems] of content.elements) {
    if (!isEndpointMap(set)) continue;
    for (const e of elems.values()) {
      const d = e.data && 'value' in e.data ? e.data.value : null;
      if (e.key.length !== 4 || !d || (d.length !== 8 && d.length !== 20)) throw new Error(`endpoint map ${set}: malformed element (key ${e.key.length} bytes, data ${d?.length ?? 0} bytes)`);
      const addrLen = d.length - 4;
      found.push({
        key: Buffer.from(e.key).readUInt32LE(0), comment: e.comment,
        ip: formatAddr(d.subarray(0, addrLen)), port: (d[addrLen] << 8) | d[addrLen + 1],
      });
    }
  }
  return found.length ? rebuildEndpointAllocator(found) : null;
}
