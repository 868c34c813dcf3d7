/**
 * A tiny in-memory model of one nf_tables table, applying BatchOps with the kernel's checks that matter for plan
 * ordering (ENOENT for missing objects, EBUSY for deleting referenced chains/sets, EEXIST for an element re-added
 * with different data, unknown jump targets and sets). Tests only.
 */
import type { BatchOp, Expr } from '../../netlink/types.ts';
import { formatExprs } from '../lower.ts';

interface KChain { hook: string; rules: Array<{ text: string; chains: string[]; sets: string[] }> }
interface KSet { spec: string; elements: Map<string, { data: string; chain?: string }> }

export class FakeKernel {
  table: { comment?: string } | null = null;
  chains = new Map<string, KChain>();
  sets = new Map<string, KSet>();
  /** Number of operations applied. */
  applied = 0;

  private refs(chain: string): number {
    let n = 0;
    for (const c of this.chains.values()) for (const r of c.rules) if (r.chains.includes(chain)) n++;
    for (const s of this.sets.values()) for (const e of s.elements.values()) if (e.chain === chain) n++;
    return n;
  }

  private setRefs(set: string): number {
    let n = 0;
    for (const c of this.chains.values()) for (const r of c.rules) if (r.sets.includes(set)) n++;
    return n;
  }

  /** Applies a batch atomically: on error nothing changes and the error is thrown. */
  apply(ops: readonly BatchOp[]): void {
    const saved = { table: this.table, chains: structuredClone(this.chains), sets: structuredClone(this.sets) };
    try {
      for (const op of ops) this.one(op);
      this.applied += ops.length;
    } catch (e) {
      this.table = saved.table;
      this.chains = saved.chains;
      this.sets = saved.sets;
      throw e;
    }
  }

  private one(op: BatchOp): void {
    const fail = (code: string, what: string) => { throw new Error(`${code}: ${op.op} ${op.kind} ${what}`); };
    if (op.kind === 'table') {
      if (op.op === 'add') { if (!this.table) this.table = { comment: op.table.comment }; return; }
      if (op.op === 'delete') {
        if (!this.table) fail('ENOENT', op.table.name);
        this.table = null; this.chains.clear(); this.sets.clear();
        return;
      }
      fail('EOPNOTSUPP', '');
    }
    if (!this.table) fail('ENOENT', 'table');
    switch (op.kind) {
      case 'chain': {
        const name = op.chain.name;
        const c = this.chains.get(name);
        if (op.op === 'add') {
          const hook = JSON.stringify(op.chain.hook ?? null);
          if (c && c.hook !== hook) fail('EEXIST', `${name} with another hook`);
          if (!c) this.chains.set(name, { hook, rules: [] });
        } else if (op.op === 'flush') {
          if (!c) fail('ENOENT', name);
          c!.rules = [];
        } else if (op.op === 'delete') {
          if (!c) fail('ENOENT', name);
          if (this.refs(name) > 0) fail('EBUSY', name);
          this.chains.delete(name);
        } else fail('EOPNOTSUPP', name);
        return;
      }
      case 'rule': {
        const c = this.chains.get(op.rule.chain);
        if (!c) fail('ENOENT', `chain ${op.rule.chain}`);
        const chains: string[] = [];
        const sets: string[] = [];
        for (const e of op.rule.exprs as Expr[]) {
          if (e.type === 'immediate' && 'verdict' in e.data && (e.data.verdict.kind === 'jump' || e.data.verdict.kind === 'goto')) chains.push(e.data.verdict.chain);
          if (e.type === 'lookup' || e.type === 'dynset') sets.push(e.set);
        }
        for (const x of chains) if (!this.chains.has(x)) fail('ENOENT', `jump target ${x}`);
        for (const x of sets) if (!this.sets.has(x)) fail('ENOENT', `set ${x}`);
        c!.rules.push({ text: formatExprs(op.rule.exprs) + (op.rule.comment ? `\n  # ${op.rule.comment}` : ''), chains, sets });
        return;
      }
      case 'set': {
        const name = op.set.name;
        if (op.op === 'add') {
          if (op.set.id === undefined) fail('EINVAL', `${name} without NFTA_SET_ID`);
          const { id: _id, ...rest } = op.set;
          void _id;
          const spec = JSON.stringify(rest, (_k, v) => (typeof v === 'bigint' ? String(v) : v));
          const s = this.sets.get(name);
          if (s && s.spec !== spec) fail('EEXIST', `${name} with another definition`);
          if (!s) this.sets.set(name, { spec, elements: new Map() });
        } else if (op.op === 'delete') {
          if (!this.sets.has(name)) fail('ENOENT', name);
          if (this.setRefs(name) > 0) fail('EBUSY', name);
          this.sets.delete(name);
        } else fail('EOPNOTSUPP', name);
        return;
      }
      case 'elements': {
        const s = this.sets.get(op.elements.set);
        if (!s) fail('ENOENT', `set ${op.elements.set}`);
        for (const e of op.elements.elements) {
          const key = Buffer.from(e.key).toString('hex');
          if (op.op === 'add') {
            const v = e.data && 'verdict' in e.data ? e.data.verdict : undefined;
            const chain = v && (v.kind === 'goto' || v.kind === 'jump') ? v.chain : undefined;
            if (chain && !this.chains.has(chain)) fail('ENOENT', `element target ${chain}`);
            const data = JSON.stringify([v ?? null, e.comment ?? null]);
            const prev = s!.elements.get(key);
            if (prev && prev.data !== data) fail('EEXIST', `element ${key} with other data`);
            s!.elements.set(key, { data, chain });
          } else if (op.op === 'delete') {
            if (!s!.elements.has(key)) fail('ENOENT', `element ${key} of ${op.elements.set}`);
            s!.elements.delete(key);
          } else fail('EOPNOTSUPP', '');
        }
        return;
      }
    }
  }

  /** A comparable dump, ignoring the chains named in `ignoreEmpty` when they are empty (flushed stale chains). */
  dump(ignoreEmpty: Iterable<string> = []): unknown {
    const ign = new Set(ignoreEmpty);
    const chains: Record<string, unknown> = {};
    for (const [n, c] of [...this.chains].sort(([a], [b]) => (a < b ? -1 : 1))) {
      if (ign.has(n) && c.rules.length === 0) continue;
      chains[n] = { hook: c.hook, rules: c.rules.map((r) => r.text) };
    }
    const sets: Record<string, unknown> = {};
    for (const [n, s] of [...this.sets].sort(([a], [b]) => (a < b ? -1 : 1))) {
      sets[n] = { spec: s.spec, elements: Object.fromEntries([...s.elements].sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => [k, v.data])) };
    }
    return { table: this.table, chains, sets };
  }
}
