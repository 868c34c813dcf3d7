/**
 * The planner: from the committed ruleset (what the kernel acknowledged last) and the desired one, the ordered
 * operations of ONE batch (DESIGN.md §4).
 *
 * - Full plan (opts.full, or nothing committed, or the table identity/base chains changed): `add table`,
 *   `delete table`, `add table`, then every chain, set, rule and element. The kernel ends with exactly the desired
 *   table, atomically, whatever it held before.
 * - Partial plan: only fragments whose fingerprint differs are looked at (cost O(changed fragments) plus one
 *   string comparison per fragment). Within them: new chains are added with their rules; chains whose rules changed
 *   are flushed and refilled; removed chains are flushed now and recorded in `stale`, and deleted by a later plan
 *   once `now - flushedAt >= 1000 ms` (kernels before 6.2 report EBUSY for a chain that a just-deleted map element
 *   pointed to: upstream proxier.go staleChains, kubernetes#122604). Elements are diffed per key against the
 *   ruleset-wide element index, so a key that several fragments share (e.g. the ClusterIP of a multi-port Service
 *   in `cluster-ips`) is deleted only when no desired fragment holds it any more.
 *
 * Order inside a batch: new sets, new chains, flushes, element deletes, set deletes, re-created sets, rules,
 * element adds, stale chain deletes. Chains exist before the rules and elements that point to them; elements go
 * before the chains they pointed to.
 *
 * NFTA_SET_ID: every `add set` gets an id unique within the batch (1, 2, ...), and rules/elements in the same batch
 * that reference that set carry it too (as nft does).
 */
import type { BatchOp, ElementsSpec, Expr } from '../netlink/types.ts';
import { ByteArena, chainSpec, elementSpec, ruleSpec, setSpec, tableSpec } from './lower.ts';
import type { Chain, Element, Fragment, Rule, Ruleset, SetDef } from './model.ts';
import { SKELETON_KEY, elementKeyText, elementValueText, stmtSetRefs } from './model.ts';
import { committedView } from './incremental.ts';

/** How long a flushed chain stays before a later plan deletes it (proxier.go: "more than 1 s ago"). */
export const STALE_CHAIN_DELAY_MS = 1000;
/** At most this many elements per `elements` operation (nft: one NEWSETELEM per statement of up to 1000). */
export const ELEMENTS_PER_OP = 1000;
/**
 * And at most about this many encoded bytes per operation: NFTA_SET_ELEM_LIST_ELEMENTS is one attribute, and an
 * attribute's 16-bit nla_len caps it at 65535 bytes (reference/nftables-netlink.md §2).
 */
export const ELEMENT_BYTES_PER_OP = 48_000;

/** A generous estimate of an element's encoded size in NEWSETELEM (nests, key, verdict, comment). */
function elementBytes(e: Element, commentBytes: (c: string) => number = Buffer.byteLength): number {
  let n = 32 + e.key.length * 16;
  if (e.verdict) n += 32 + (e.verdict.kind === 'goto' || e.verdict.kind === 'jump' ? e.verdict.chain.length : 0);
  if (e.comment !== undefined) n += 8 + commentBytes(e.comment);
  return n;
}

/** One operation at the model level (before lowering). `render.ts` prints it; `stepsToOps` lowers it. */
export type PlanStep =
  | { op: 'add' | 'delete'; kind: 'table' }
  | { op: 'add'; kind: 'chain'; chain: Chain }
  | { op: 'flush' | 'delete'; kind: 'chain'; name: string }
  | { op: 'add'; kind: 'set'; set: SetDef }
  | { op: 'delete'; kind: 'set'; name: string; isMap: boolean }
  | { op: 'add'; kind: 'rule'; chain: string; rule: Rule }
  | { op: 'add' | 'delete'; kind: 'elements'; set: string; elements: readonly Element[] };

/** Planner inputs besides the rulesets. */
export interface PlanOptions {
  /** Force a full plan (first sync, after a failure, hourly resync). */
  full: boolean;
  /** Current time in ms (any monotonic origin; only differences with `stale` values matter). */
  now: number;
  /** Chains flushed by earlier plans and not yet deleted: name -> `now` of the plan that flushed them (ms). */
  stale: ReadonlyMap<string, number>;
}

/** The result of {@link plan}. */
export interface SyncPlan {
  /** The batch, in order. Empty for a no-op sync. */
  ops: BatchOp[];
  /** The same operations at model level (for `renderSteps` debug text). */
  steps: PlanStep[];
  /** The stale-chain map to keep if the batch is acknowledged (name -> ms when it was flushed). */
  stale: Map<string, number>;
  /** Fragment keys whose content changed (all desired fragments for a full plan). */
  changedFragments: string[];
  /** True when this is a full plan. */
  full: boolean;
}

function pushElements(steps: PlanStep[], op: 'add' | 'delete', set: string, elements: readonly Element[]): void {
  let cur: Element[] = [];
  let bytes = 0;
  // Consecutive elements usually share their comment (one owner's endpoint-map block): its byte length once.
  let lastComment: string | undefined, lastCommentBytes = 0;
  const commentBytes = (c: string) => (c === lastComment ? lastCommentBytes : (lastCommentBytes = Buffer.byteLength((lastComment = c))));
  for (const e of elements) {
    const b = elementBytes(e, commentBytes);
    if (cur.length && (cur.length >= ELEMENTS_PER_OP || bytes + b > ELEMENT_BYTES_PER_OP)) {
      steps.push({ op, kind: 'elements', set, elements: cur });
      cur = [];
      bytes = 0;
    }
    cur.push(e);
    bytes += b;
  }
  if (cur.length) steps.push({ op, kind: 'elements', set, elements: cur });
}

/**
 * The steps that build `rs` in an empty table (without the table steps): all chains, all sets, all rules (chain
 * by chain), then the elements of each set (deduplicated by key through the index).
 */
export function creationSteps(rs: Ruleset): PlanStep[] {
  const steps: PlanStep[] = [];
  for (const f of rs.fragments.values()) for (const c of f.chains) steps.push({ op: 'add', kind: 'chain', chain: c });
  for (const f of rs.fragments.values()) for (const s of f.sets) steps.push({ op: 'add', kind: 'set', set: s });
  for (const f of rs.fragments.values()) for (const c of f.chains) for (const r of c.rules) steps.push({ op: 'add', kind: 'rule', chain: c.name, rule: r });
  for (const [set, byKey] of rs.index.elements) {
    if (byKey.size === 0) continue;
    const els: Element[] = [];
    for (const x of byKey.values()) els.push(x.element);
    pushElements(steps, 'add', set, els);
  }
  return steps;
}

/** `add table`, `delete table`, `add table`, then {@link creationSteps}. */
export function fullSteps(rs: Ruleset): PlanStep[] {
  return [{ op: 'add', kind: 'table' }, { op: 'delete', kind: 'table' }, { op: 'add', kind: 'table' }, ...creationSteps(rs)];
}

function withSetId(exprs: Expr[], ids: ReadonlyMap<string, number>): Expr[] {
  if (ids.size === 0) return exprs;
  for (const e of exprs) {
    if ((e.type === 'lookup' || e.type === 'dynset') && ids.has(e.set)) e.setId = ids.get(e.set);
  }
  return exprs;
}

/**
 * Lowers steps to batch operations for `rs`'s table. Set ids count from 1 within this call.
 * @throws Error when an element or rule cannot be lowered (bad address, port, ...).
 */
export function stepsToOps(rs: Pick<Ruleset, 'family' | 'table' | 'comment'>, steps: readonly PlanStep[]): BatchOp[] {
  const { family, table } = rs;
  const ids = new Map<string, number>();
  let nextId = 1;
  const ops: BatchOp[] = [];
  const arena = new ByteArena(); // element bytes as views of shared blocks (lower.ts)
  for (const st of steps) {
    switch (st.kind) {
      case 'table':
        ops.push({ op: st.op, kind: 'table', table: st.op === 'add' ? tableSpec(family, table, rs.comment) : tableSpec(family, table) });
        if (st.op === 'delete') ids.clear();
        break;
      case 'chain':
        ops.push(st.op === 'add'
          ? { op: 'add', kind: 'chain', chain: chainSpec(family, table, st.chain) }
          : { op: st.op, kind: 'chain', chain: { family, table, name: st.name } });
        break;
      case 'set':
        if (st.op === 'add') {
          const spec = setSpec(family, table, st.set);
          spec.id = nextId++;
          ids.set(st.set.name, spec.id);
          ops.push({ op: 'add', kind: 'set', set: spec });
        } else {
          ids.delete(st.name);
          ops.push({ op: 'delete', kind: 'set', set: { family, table, name: st.name, flags: 0, keyType: 0, keyLen: 0 } });
        }
        break;
      case 'rule': {
        const spec = ruleSpec(family, table, st.chain, st.rule);
        withSetId(spec.exprs, ids);
        ops.push({ op: 'add', kind: 'rule', rule: spec });
        break;
      }
      case 'elements': {
        if (st.elements.length === 0) break;
        const spec: ElementsSpec = {
          family, table, set: st.set,
          elements: st.elements.map((e) => (st.op === 'add' ? elementSpec(family, e, arena) : { key: elementSpec(family, e, arena).key })),
        };
        const id = ids.get(st.set);
        if (id !== undefined) spec.setId = id;
        ops.push({ op: st.op, kind: 'elements', elements: spec });
        break;
      }
    }
  }
  return ops;
}

/** The batch that replaces the kernel's table with `rs` (the ops of a full plan). */
export function toBatchOps(rs: Ruleset): BatchOp[] {
  return stepsToOps(rs, fullSteps(rs));
}

function fullPlan(desired: Ruleset): SyncPlan {
  const steps = fullSteps(desired);
  return { ops: stepsToOps(desired, steps), steps, stale: new Map(), changedFragments: [...desired.fragments.keys()], full: true };
}

function sameHook(a: Chain, b: Chain): boolean {
  return JSON.stringify(a.hook ?? null) === JSON.stringify(b.hook ?? null) && (a.comment ?? null) === (b.comment ?? null);
}

/** True when base chains (hooks) differ between the two skeletons: only a full plan can change those. */
function baseChainsDiffer(c: Fragment | undefined, d: Fragment | undefined): boolean {
  const base = (f: Fragment | undefined) => new Map((f?.chains ?? []).filter((x) => x.hook).map((x) => [x.name, x]));
  const cb = base(c);
  const db = base(d);
  if (cb.size !== db.size) return true;
  for (const [n, x] of db) {
    const y = cb.get(n);
    if (!y || !sameHook(x, y)) return true;
  }
  return false;
}

/**
 * Plans one sync. See the file comment for semantics and ordering.
 * @param committed the ruleset the kernel holds (null when unknown: forces a full plan)
 * @param desired the compiled ruleset
 * @throws Error only when lowering fails (invalid values that the compiler let through).
 */
export function plan(committed: Ruleset | null, desired: Ruleset, opts: PlanOptions): SyncPlan {
  if (opts.full || !committed || committed.family !== desired.family || committed.table !== desired.table || committed.comment !== desired.comment) {
    return fullPlan(desired);
  }
  let changed: string[];
  if (desired.delta && desired.delta.base === committed) {
    // An in-place compile (incremental.ts): the changed keys are known, and the committed state is read through
    // the journal. O(changed fragments), whatever the cluster size.
    changed = desired.delta.changed;
    committed = committedView(desired.delta);
  } else {
    changed = [];
    for (const [k, d] of desired.fragments) {
      const c = committed.fragments.get(k);
      if (!c || c.fingerprint !== d.fingerprint) changed.push(k);
    }
    for (const k of committed.fragments.keys()) if (!desired.fragments.has(k)) changed.push(k);
    if (changed.includes(SKELETON_KEY) && baseChainsDiffer(committed.fragments.get(SKELETON_KEY), desired.fragments.get(SKELETON_KEY))) {
      return fullPlan(desired);
    }
  }

  const stale = new Map(opts.stale);
  const addSets: SetDef[] = [];
  const recreateSets: SetDef[] = [];
  const deleteSets: SetDef[] = [];
  const newChains: Chain[] = [];
  const refillChains: Chain[] = [];
  const flushChains: string[] = [];
  const elemTouched = new Map<string, Set<string>>();
  const touchAll = (f: Fragment | undefined) => {
    if (!f) return;
    f.elements.forEach((e, i) => {
      let s = elemTouched.get(e.set);
      if (!s) elemTouched.set(e.set, (s = new Set()));
      s.add(f.elementKeys?.[i] ?? elementKeyText(e));
    });
  };

  for (const key of changed) {
    const cF = committed.fragments.get(key);
    const dF = desired.fragments.get(key);
    // Sets.
    const recreatedHere = new Set<string>();
    for (const s of dF?.sets ?? []) {
      const old = committed.index.sets.get(s.name)?.set;
      if (!old) addSets.push(s);
      else if (JSON.stringify(old) !== JSON.stringify(s)) { recreateSets.push(s); recreatedHere.add(s.name); }
    }
    for (const s of cF?.sets ?? []) if (!desired.index.sets.has(s.name)) deleteSets.push(s);
    // Chains.
    for (const c of dF?.chains ?? []) {
      const old = committed.index.chains.get(c.name)?.chain;
      if (!old) {
        newChains.push(c);
        stale.delete(c.name);
      } else if (
        JSON.stringify(old.rules) !== JSON.stringify(c.rules) ||
        c.rules.some((r) => r.stmts.some((st) => stmtSetRefs(st).some((n) => recreatedHere.has(n))))
      ) {
        flushChains.push(c.name);
        refillChains.push(c);
      }
    }
    for (const c of cF?.chains ?? []) {
      if (!desired.index.chains.has(c.name)) {
        flushChains.push(c.name);
        stale.set(c.name, opts.now);
      }
    }
    // Elements.
    touchAll(cF);
    touchAll(dF);
  }

  const gone = new Set([...deleteSets, ...recreateSets].map((s) => s.name));
  const elemDeletes = new Map<string, Element[]>();
  const elemAdds = new Map<string, Element[]>();
  const push = (m: Map<string, Element[]>, set: string, e: Element) => {
    let xs = m.get(set);
    if (!xs) m.set(set, (xs = []));
    xs.push(e);
  };
  for (const [set, keys] of elemTouched) {
    const cIdx = committed.index.elements.get(set);
    const dIdx = desired.index.elements.get(set);
    for (const k of keys) {
      const cv = cIdx?.get(k);
      const dv = dIdx?.get(k);
      if (gone.has(set)) continue; // deleted with its set; re-created sets are refilled below
      const same = !!cv && !!dv && (cv.element === dv.element || elementValueText(cv.element) === elementValueText(dv.element));
      if (cv && !same) push(elemDeletes, set, cv.element);
      if (dv && !same) push(elemAdds, set, dv.element);
    }
  }
  for (const s of recreateSets) {
    const all = desired.index.elements.get(s.name);
    if (all) for (const x of all.values()) push(elemAdds, s.name, x.element);
  }

  const flushed = new Set(flushChains);
  const deleteNow: string[] = [];
  for (const [name, t] of stale) {
    if (opts.now - t >= STALE_CHAIN_DELAY_MS && !flushed.has(name)) deleteNow.push(name);
  }
  for (const n of deleteNow) stale.delete(n);

  const steps: PlanStep[] = [];
  for (const s of addSets) steps.push({ op: 'add', kind: 'set', set: s });
  for (const c of newChains) steps.push({ op: 'add', kind: 'chain', chain: c });
  for (const n of flushChains) steps.push({ op: 'flush', kind: 'chain', name: n });
  for (const [set, es] of elemDeletes) pushElements(steps, 'delete', set, es);
  for (const s of [...deleteSets, ...recreateSets]) steps.push({ op: 'delete', kind: 'set', name: s.name, isMap: !!s.map });
  for (const s of recreateSets) steps.push({ op: 'add', kind: 'set', set: s });
  for (const c of [...newChains, ...refillChains]) for (const r of c.rules) steps.push({ op: 'add', kind: 'rule', chain: c.name, rule: r });
  for (const [set, es] of elemAdds) pushElements(steps, 'add', set, es);
  for (const n of deleteNow) steps.push({ op: 'delete', kind: 'chain', name: n });

  return { ops: stepsToOps(desired, steps), steps, stale, changedFragments: changed, full: false };
}
