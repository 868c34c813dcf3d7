/**
 * One sync: for each IP family, snapshot → compile → plan → one netlink batch (reference kube-proxy-nftables.md §3;
 * DESIGN §1, §4). The committed ruleset of a family changes only after the kernel acknowledged its batch. Any
 * failure leaves the kernel as it was (a batch is all or nothing) and makes the next sync of that family full.
 * A full sync happens first, after a failure, and when an hour has passed since the last one (FullSyncPeriod,
 * kubernetes `pkg/proxy/util`).
 */
import type { BatchOp } from '../netlink/types.ts';
import { commitDelta, compile, plan, renderPlan, rollbackDelta, type Ruleset, type EndpointAllocator } from '../rules/index.ts';
import type { ClusterState } from './cluster-state.ts';
import type { IPFamily, SnapshotBuilder } from './snapshot.ts';
import type { ProxyMetrics } from './metrics.ts';
import type { ProxyHealth } from './health.ts';
import type { Snapshot } from '../config-schema/snapshot.ts';

/** Upstream's FullSyncPeriod: a full resync at least every hour (ms). */
export const FULL_SYNC_PERIOD_MS = 3_600_000;

/** What the syncer needs of the netlink socket. */
export interface BatchSender {
  sendBatch(ops: readonly BatchOp[]): Promise<{ bytes: number; messages: number; kernelMs: number }>;
}

/** Structured logger (pino fits). */
export interface SyncLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
  isLevelEnabled?(level: string): boolean;
}

/** The outcome of one family's sync, for logs and tests. */
export interface FamilySyncResult {
  family: IPFamily;
  full: boolean;
  ops: number;
  bytes: number;
  changedFragments: number;
  compileMs: number;
  planMs: number;
  kernelMs: number;
}

export interface SyncerOptions {
  families: IPFamily[];
  state: ClusterState;
  builder: SnapshotBuilder;
  sender: BatchSender;
  now: () => number;
  log: SyncLogger;
  metrics?: ProxyMetrics;
  health?: ProxyHealth;
  /** Called after a family's batch was acknowledged, with the snapshot it programmed (health-check servers). */
  onSynced?: (family: IPFamily, snapshot: Snapshot) => void;
  /**
   * Restart adoption (agent/adopt.ts): asked once per family while nothing is committed yet. Returns the ops that
   * turn the kernel's table into `desired` (possibly none), or null to do a normal full sync.
   */
  adopt?: (family: IPFamily, desired: Ruleset) => Promise<BatchOp[] | null>;
  /**
   * Restart adoption: the endpoint allocation found in the kernel (agent/adopt.ts allocatorFromTable), asked before
   * the first compile of a family so the restarted agent keeps every `numgen ... offset K` block; null: allocate anew.
   */
  seedAllocator?: (family: IPFamily) => Promise<EndpointAllocator | null>;
}

interface FamilyState {
  committed: Ruleset | null;
  stale: Map<string, number>;
  needFull: boolean;
  lastFull: number;
}

/** Runs syncs. Not re-entrant: the runner never overlaps runs. */
export class Syncer {
  readonly #o: SyncerOptions;
  readonly #fam = new Map<IPFamily, FamilyState>();
  /** Results of the last sync (for tests and the apply command). */
  last: FamilySyncResult[] = [];

  constructor(opts: SyncerOptions) {
    this.#o = opts;
    for (const f of opts.families) this.#fam.set(f, { committed: null, stale: new Map(), needFull: true, lastFull: -Infinity });
  }

  /** The last committed ruleset of a family (null before the first successful sync). */
  committed(family: IPFamily): Ruleset | null {
    return this.#fam.get(family)?.committed ?? null;
  }

  /** Chains of a family flushed by a sync and not yet deleted (they exist, empty, in the kernel). */
  staleChains(family: IPFamily): string[] {
    return [...(this.#fam.get(family)?.stale.keys() ?? [])];
  }

  /** Forces the next sync of every family to be full (tamper repair, node zone change). */
  requestFull(): void {
    for (const s of this.#fam.values()) s.needFull = true;
  }

  /**
   * Syncs every family. Families are independent: one failing does not stop the others.
   * @throws the first family's error after all families were attempted (the runner then retries).
   */
  async sync(): Promise<FamilySyncResult[]> {
    const { state, builder, log, metrics, health } = this.#o;
    const started = this.#o.now();
    const changes = state.checkout();
    builder.invalidate(changes);
    metrics?.serviceChangesPending.set(0);
    metrics?.endpointChangesPending.set(0);
    const results: FamilySyncResult[] = [];
    let firstError: unknown = null;
    for (const family of this.#o.families) {
      const fs = this.#fam.get(family)!;
      const now = this.#o.now();
      let full = fs.needFull || fs.committed === null || now - fs.lastFull >= FULL_SYNC_PERIOD_MS;
      const t0 = performance.now();
      let desired: Ruleset | null = null;
      try {
        const snapshot = builder.build(state, family);
        // In place: O(changed ServicePorts); committed after the ACK, rolled back on failure (rules/incremental.ts).
        const allocator = fs.committed === null && this.#o.seedAllocator ? (await this.#o.seedAllocator(family)) ?? undefined : undefined;
        desired = compile(snapshot, { previous: fs.committed, inPlace: true, changed: full ? null : builder.lastDelta(family), allocator });
        const t1 = performance.now();
        const adopted = fs.committed === null && this.#o.adopt ? await this.#o.adopt(family, desired) : null;
        if (adopted) full = false;
        const p = adopted ? { ops: adopted, stale: new Map<string, number>(), changedFragments: [] as string[] } : plan(fs.committed, desired, { full, now, stale: fs.stale });
        const t2 = performance.now();
        let sent = { bytes: 0, messages: 0, kernelMs: 0 };
        if (p.ops.length > 0) {
          if ('steps' in p && log.isLevelEnabled?.('debug')) log.debug({ family, nft: renderPlan(desired, p) }, 'sync delta');
          sent = await this.#o.sender.sendBatch(p.ops);
        }
        commitDelta(desired);
        fs.committed = desired;
        fs.stale = p.stale;
        fs.needFull = false;
        if (full || adopted) fs.lastFull = now;
        const r: FamilySyncResult = {
          family, full, ops: p.ops.length, bytes: sent.bytes, changedFragments: p.changedFragments.length,
          compileMs: round(t1 - t0), planMs: round(t2 - t1), kernelMs: round(sent.kernelMs),
        };
        results.push(r);
        const seconds = (performance.now() - t0) / 1000;
        metrics?.syncProxyRulesDuration.observe({ ip_family: family }, seconds);
        (full ? metrics?.syncFullProxyRulesDuration : metrics?.syncPartialProxyRulesDuration)?.observe({ ip_family: family }, seconds);
        metrics?.syncProxyRulesLastTimestamp.set({ ip_family: family }, this.#o.now() / 1000);
        for (const t of changes.triggerTimes) metrics?.networkProgrammingDuration.observe({ ip_family: family }, Math.max(0, (this.#o.now() - t) / 1000));
        this.#noLocalEndpoints(family, snapshot.servicePorts);
        health?.updated(family);
        this.#o.onSynced?.(family, snapshot);
        log.info({ ...r, totalMs: round(performance.now() - t0) }, 'synced');
      } catch (err) {
        if (desired) rollbackDelta(desired);
        fs.needFull = true;
        metrics?.nftablesSyncFailuresTotal.inc({ ip_family: family });
        log.error({ family, full, err: err instanceof Error ? err.message : String(err) }, 'sync failed; the last good ruleset stays in place and the next sync is full');
        firstError ??= err;
      }
    }
    this.last = results;
    if (firstError) throw firstError;
    log.debug({ ms: this.#o.now() - started }, 'sync done');
    return results;
  }

  #noLocalEndpoints(family: IPFamily, sps: readonly { internalPolicyLocal: boolean; externalPolicyLocal: boolean; localEndpoints: unknown[]; hasEndpoints: boolean }[]): void {
    const m = this.#o.metrics;
    if (!m) return;
    let internal = 0, external = 0;
    for (const sp of sps) {
      if (!sp.hasEndpoints) continue;
      if (sp.internalPolicyLocal && sp.localEndpoints.length === 0) internal++;
      if (sp.externalPolicyLocal && sp.localEndpoints.length === 0) external++;
    }
    m.noLocalEndpointsTotal.set({ traffic_policy: 'internal', ip_family: family }, internal);
    m.noLocalEndpointsTotal.set({ traffic_policy: 'external', ip_family: family }, external);
  }
}

const round = (ms: number) => Math.round(ms * 100) / 100;
