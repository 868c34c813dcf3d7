/**
 * O(change) ruleset updates (DESIGN.md §1: "A partial sync costs O(changes), not O(cluster)").
 *
 * A full compile builds a new {@link Ruleset} and indexes every chain, set and element: O(cluster). For a sync
 * where a few ServicePorts changed, `compile(snapshot, { previous, inPlace: true })` instead patches the previous
 * ruleset's maps (fragments, chain/set/element index) IN PLACE, recording every overwritten entry in a
 * {@link Journal}. The returned ruleset shares those maps and carries a {@link RulesetDelta}: the changed fragment
 * keys and the journal. The planner then diffs only the changed fragments, reading the committed state through
 * the journal ({@link committedView}). After the kernel ACKs the batch the owner calls {@link commitDelta}; if the
 * batch fails, {@link rollbackDelta} restores the previous ruleset exactly (values; map iteration order may
 * differ, which only affects the order of a later full dump, never its content).
 *
 * Pure (no I/O); mutation is confined to rulesets passed with `inPlace`.
 */
import type { Chain, Fragment, IndexedElement, Ruleset, SetDef } from './model.ts';
import { checkFragmentRefs, elementKeyText } from './model.ts';

/** Remembers the first overwritten value of every (map, key) so a patch can be rolled back or looked through. */
export class Journal {
  readonly #old = new Map<Map<unknown, unknown>, Map<unknown, { had: boolean; v: unknown }>>();

  #note<K, V>(m: Map<K, V>, k: K): void {
    let o = this.#old.get(m as Map<unknown, unknown>);
    if (!o) this.#old.set(m as Map<unknown, unknown>, (o = new Map()));
    if (!o.has(k)) o.set(k, { had: m.has(k), v: m.get(k) });
  }

  /** `m.set(k, v)`, journaled. */
  set<K, V>(m: Map<K, V>, k: K, v: V): void { this.#note(m, k); m.set(k, v); }

  /** `m.delete(k)`, journaled. */
  delete<K, V>(m: Map<K, V>, k: K): void { this.#note(m, k); m.delete(k); }

  /** The value `m` held for `k` before this journal's changes. */
  old<K, V>(m: ReadonlyMap<K, V>, k: K): V | undefined {
    const e = this.#old.get(m as Map<unknown, unknown>)?.get(k);
    return e ? (e.had ? (e.v as V) : undefined) : m.get(k);
  }

  /** Whether `m` held `k` before this journal's changes. */
  oldHas<K, V>(m: ReadonlyMap<K, V>, k: K): boolean {
    const e = this.#old.get(m as Map<unknown, unknown>)?.get(k);
    return e ? e.had : m.has(k);
  }

  /** Restores every journaled entry, then forgets them. */
  rollback(): void {
    for (const [m, o] of this.#old) for (const [k, e] of o) { if (e.had) m.set(k, e.v); else m.delete(k); }
    this.#old.clear();
  }

  /** Forgets the journaled entries (the patch becomes permanent). */
  clear(): void { this.#old.clear(); }
}

/** What an in-place compile changed. */
export interface RulesetDelta {
  /** The ruleset object whose maps were patched (the planner's `committed` must be this very object). */
  base: Ruleset;
  /** Fragment keys added, replaced or removed. */
  changed: string[];
  journal: Journal;
  /** Called by {@link rollbackDelta} after the maps are restored (the compiler restores the allocator). */
  onRollback?: () => void;
}

/** A read-only map view of `m` as it was before `j`'s changes. Supports get/has only. */
class OldView<K, V> implements ReadonlyMap<K, V> {
  readonly #m: ReadonlyMap<K, V>;
  readonly #j: Journal;
  constructor(m: ReadonlyMap<K, V>, j: Journal) { this.#m = m; this.#j = j; }
  get(k: K): V | undefined { return this.#j.old(this.#m, k); }
  has(k: K): boolean { return this.#j.oldHas(this.#m, k); }
  get size(): number { throw new Error('committed view: size is not available'); }
  forEach(): void { throw new Error('committed view: iteration is not available'); }
  entries(): MapIterator<[K, V]> { throw new Error('committed view: iteration is not available'); }
  keys(): MapIterator<K> { throw new Error('committed view: iteration is not available'); }
  values(): MapIterator<V> { throw new Error('committed view: iteration is not available'); }
  [Symbol.iterator](): MapIterator<[K, V]> { throw new Error('committed view: iteration is not available'); }
}

/**
 * The committed ruleset as it was before `delta` (lookups only: fragments.get, index.*.get/has and
 * index.elements.get(set)?.get(key)). For the planner.
 */
export function committedView(delta: RulesetDelta): Ruleset {
  const { base, journal: j } = delta;
  const elements = new Map<string, ReadonlyMap<string, IndexedElement>>();
  const elementsView: ReadonlyMap<string, ReadonlyMap<string, IndexedElement>> = {
    get: (set: string) => {
      let v = elements.get(set);
      if (!v) {
        const inner = j.old(base.index.elements, set);
        if (!inner) return undefined;
        v = new OldView(inner, j);
        elements.set(set, v);
      }
      return v;
    },
    has: (set: string) => j.oldHas(base.index.elements, set),
  } as ReadonlyMap<string, ReadonlyMap<string, IndexedElement>>;
  return {
    family: base.family, table: base.table, comment: base.comment,
    fragments: new OldView(base.fragments, j),
    index: { chains: new OldView(base.index.chains, j), sets: new OldView(base.index.sets, j), elements: elementsView },
  };
}

/** Makes the patch permanent (after the kernel acknowledged it). */
export function commitDelta(rs: Ruleset): void {
  rs.delta?.journal.clear();
  rs.delta = undefined;
}

/** Undoes the patch (the batch failed): the base ruleset is as before the compile. */
export function rollbackDelta(rs: Ruleset): void {
  const d = rs.delta;
  if (!d) return;
  d.journal.rollback();
  d.onRollback?.();
  rs.delta = undefined;
}

/**
 * Patches `rs`'s maps: removes the contribution of `removed` fragments (old versions), adds `added` ones (new
 * versions), journaling every change in `j`. Shared element keys keep an owner count, as buildRuleset does.
 * @throws Error on duplicate chain/set names or bad references in an added fragment (after which the caller
 *   must roll the journal back).
 */
export function patchRuleset(rs: Ruleset, j: Journal, removed: readonly Fragment[], added: readonly Fragment[]): void {
  const frags = rs.fragments as Map<string, Fragment>;
  const chains = rs.index.chains as Map<string, { chain: Chain; fragment: string }>;
  const sets = rs.index.sets as Map<string, { set: SetDef; fragment: string }>;
  const elements = rs.index.elements as Map<string, Map<string, IndexedElement>>;
  for (const f of removed) {
    if (frags.get(f.key) === f) j.delete(frags, f.key);
    for (const c of f.chains) if (chains.get(c.name)?.fragment === f.key) j.delete(chains, c.name);
    for (const s of f.sets) {
      if (sets.get(s.name)?.fragment === f.key) {
        j.delete(sets, s.name);
        j.delete(elements, s.name);
      }
    }
    f.elements.forEach((e, i) => {
      const bySet = elements.get(e.set);
      if (!bySet) return;
      const k = f.elementKeys?.[i] ?? elementKeyText(e);
      const x = bySet.get(k);
      if (!x) return;
      if (x.owners > 1) j.set(bySet, k, { ...x, owners: x.owners - 1 });
      else j.delete(bySet, k);
    });
  }
  for (const f of added) {
    if (frags.has(f.key)) throw new Error(`ruleset: duplicate fragment ${JSON.stringify(f.key)}`);
    j.set(frags, f.key, f);
    for (const c of f.chains) {
      const prev = chains.get(c.name);
      if (prev) throw new Error(`ruleset: chain ${JSON.stringify(c.name)} defined by ${prev.fragment} and ${f.key}`);
      j.set(chains, c.name, { chain: c, fragment: f.key });
    }
    for (const s of f.sets) {
      const prev = sets.get(s.name);
      if (prev) throw new Error(`ruleset: set ${JSON.stringify(s.name)} defined by ${prev.fragment} and ${f.key}`);
      if (s.key.length === 0) throw new Error(`ruleset: set ${JSON.stringify(s.name)} has no key type`);
      j.set(sets, s.name, { set: s, fragment: f.key });
      j.set(elements, s.name, new Map());
    }
  }
  for (const f of added) {
    checkFragmentRefs(rs.family, f, chains, sets);
    f.elements.forEach((e, i) => {
      const bySet = elements.get(e.set)!;
      const k = f.elementKeys?.[i] ?? elementKeyText(e);
      const x = bySet.get(k);
      if (x) j.set(bySet, k, { ...x, owners: x.owners + 1 });
      else j.set(bySet, k, { element: e, fragment: f.key, keyText: k, owners: 1 });
    });
  }
}
