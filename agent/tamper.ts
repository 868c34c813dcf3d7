/**
 * Tamper repair (DESIGN.md "subscribe to nf_tables notifications and resync when someone else edits our table").
 *
 * A second NETLINK_NETFILTER socket joins the multicast group NFNLGRP_NFTABLES (7, linux/netfilter/nfnetlink.h).
 * After every committed transaction the kernel multicasts one message per changed object (NFT_MSG_NEWTABLE,
 * DELCHAIN, NEWRULE, DELSETELEM, ...: linux/netfilter/nf_tables.h enum nf_tables_msg_types) followed by
 * NFT_MSG_NEWGEN (NFTA_GEN_ID, NFTA_GEN_PROC_PID, NFTA_GEN_PROC_NAME). Every one of them carries, in nlmsg_pid, the
 * netlink port id of the socket that sent the batch (net/netfilter/nf_tables_api.c: nft_notify, ctx->portid).
 * Messages from our own batch socket's port id are ours and ignored; an object message from anyone else whose
 * first attribute (NFTA_TABLE_NAME, NFTA_CHAIN_TABLE, NFTA_RULE_TABLE, NFTA_SET_TABLE, NFTA_SET_ELEM_LIST_TABLE,
 * NFTA_OBJ_TABLE and NFTA_FLOWTABLE_TABLE are all attribute 1) names our table in one of our families is a tamper:
 * the watcher calls `onTamper`, and the agent requests a FULL sync (which replaces the table atomically).
 *
 * The socket is polled without blocking (MSG_DONTWAIT) every `pollMs` (default 100 ms) on the injected clock.
 *
 * Our own batches: the kernel builds one notification per object of a transaction whenever the group has a
 * listener (nf_tables_api.c checks nfnetlink_has_listeners), which nearly doubled the kernel time of a 5000-Service
 * full sync (measured 175 → 310 ms) and cost ~90 ms to drain. So {@link TamperWatcher.around} leaves the group while
 * our own batch runs: it processes what is queued, leaves, reads the generation id, runs the batch, rejoins, reads
 * the generation again. A committed batch advances it by exactly 1 (an aborted one by 0); anything more means that
 * someone else committed while we were not listening, and `onUnseenCommits` is called so the agent can check its
 * table.
 */
import { attrMap, read } from '../netlink/attrs.ts';
import { NFNLGRP_NFTABLES, NFNL_SUBSYS, NFTA_GEN, NFT_MSG, type NetlinkMessage } from '../netlink/message.ts';
import { FAMILY_NUMBER, type TableFamily } from '../netlink/types.ts';
import type { Clock } from './runner.ts';

/** One change to our table made by someone else. */
export interface ForeignChange {
  /** nf_tables message name, e.g. `DELTABLE`, `DELRULE`. */
  op: string;
  family: TableFamily;
  /** nlmsg_pid: the netlink port id of the sender. */
  portId: number;
  /** From the transaction's NEWGEN, when it arrived in the same read: who did it. */
  procPid?: number;
  procName?: string;
}

const MSG_NAME = new Map<number, string>(Object.entries(NFT_MSG).map(([k, v]) => [v, k]));
const NOT_OBJECT = new Set<number>([NFT_MSG.NEWGEN, NFT_MSG.TRACE]);
const FAMILY_OF = new Map<number, TableFamily>(Object.entries(FAMILY_NUMBER).map(([k, v]) => [v, k as TableFamily]));

/**
 * Picks out the changes to table `table` (in `families`) that were not made through a socket in `ownPortIds`.
 * Pure: for unit tests and the watcher.
 * @param msgs notifications as read from the NFNLGRP_NFTABLES socket
 */
export function foreignChanges(msgs: readonly NetlinkMessage[], opts: { table: string; families: readonly TableFamily[]; ownPortIds: ReadonlySet<number> }): ForeignChange[] {
  const out: ForeignChange[] = [];
  const gens = new Map<number, { pid?: number; name?: string }>();
  for (const m of msgs) {
    if (m.type >> 8 !== NFNL_SUBSYS.NFTABLES || (m.type & 0xff) !== NFT_MSG.NEWGEN) continue;
    const a = attrMap(m.payload);
    gens.set(m.pid, {
      pid: a.has(NFTA_GEN.PROC_PID) ? read.u32be(a.get(NFTA_GEN.PROC_PID)!) : undefined,
      name: a.has(NFTA_GEN.PROC_NAME) ? read.str(a.get(NFTA_GEN.PROC_NAME)!) : undefined,
    });
  }
  for (const m of msgs) {
    if (m.type >> 8 !== NFNL_SUBSYS.NFTABLES) continue;
    const msg = m.type & 0xff;
    if (NOT_OBJECT.has(msg) || opts.ownPortIds.has(m.pid)) continue;
    const family = FAMILY_OF.get(m.family);
    if (!family || !opts.families.includes(family)) continue;
    const tableAttr = attrMap(m.payload).get(1);
    if (!tableAttr || read.str(tableAttr) !== opts.table) continue;
    const g = gens.get(m.pid);
    const c: ForeignChange = { op: MSG_NAME.get(msg) ?? String(msg), family, portId: m.pid };
    if (g?.pid !== undefined) c.procPid = g.pid;
    if (g?.name !== undefined) c.procName = g.name;
    out.push(c);
  }
  return out;
}

/** What the watcher reads from (NftSocket opened with `groups: [NFNLGRP_NFTABLES]` has it). */
export interface NotificationSource {
  drain(): NetlinkMessage[];
  close(): void;
  /** Joins/leaves a multicast group (NftSocket.setMembership). Without it, {@link TamperWatcher.around} just runs. */
  setMembership?(group: number, member: boolean): void;
}

/** Options of {@link TamperWatcher}. */
export interface TamperWatcherOptions {
  source: NotificationSource;
  table: string;
  families: readonly TableFamily[];
  /** Port ids of our own batch sockets (NftSocket.portId). */
  ownPortIds: ReadonlySet<number>;
  clock: Clock;
  /** Poll interval in ms (default 100). */
  pollMs?: number;
  /** Called at most once per poll with the foreign changes seen. */
  onTamper(changes: ForeignChange[]): void;
  /** Called when reading fails (the watcher keeps polling). */
  onError?(err: unknown): void;
  /** Called by {@link TamperWatcher.around} with the number of foreign commits made while we did not listen. */
  onUnseenCommits?(count: number): void;
}

/** Polls the notification socket and reports foreign changes to our table. */
export class TamperWatcher {
  readonly #o: TamperWatcherOptions;
  #timer: unknown = null;
  #stopped = true;
  /** Notifications read so far (for tests and debug logs). */
  seen = 0;

  constructor(opts: TamperWatcherOptions) {
    this.#o = opts;
  }

  /** Starts polling. */
  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#arm();
  }

  /** Reads what is queued now and reports foreign changes; returns them. */
  pollOnce(): ForeignChange[] {
    let msgs: NetlinkMessage[];
    try {
      msgs = this.#o.source.drain();
    } catch (err) {
      this.#o.onError?.(err);
      return [];
    }
    this.seen += msgs.length;
    const changes = foreignChanges(msgs, this.#o);
    if (changes.length) this.#o.onTamper(changes);
    return changes;
  }

  /**
   * Runs `batch` (one nf_tables transaction of ours) without listening, so the kernel does not build notifications
   * for it; detects foreign commits in that window through the generation id (see the file comment).
   * @param generation reads the current ruleset generation (NftSocket.getGeneration)
   * @returns what `batch` returns; rethrows what it throws
   */
  async around<T>(batch: () => Promise<T>, generation: () => Promise<number>): Promise<T> {
    const src = this.#o.source;
    if (!src.setMembership || this.#stopped) return batch();
    this.pollOnce(); // foreign changes queued before our batch
    src.setMembership(NFNLGRP_NFTABLES, false);
    let committed = false;
    let g0: number | null = null;
    try {
      g0 = await generation();
      const r = await batch();
      committed = true;
      return r;
    } finally {
      src.setMembership(NFNLGRP_NFTABLES, true);
      if (g0 !== null) {
        const g1 = await generation().catch(() => null);
        const unseen = g1 === null ? 1 : ((g1 - g0) >>> 0) - (committed ? 1 : 0);
        if (unseen > 0) this.#o.onUnseenCommits?.(unseen);
      }
    }
  }

  /** Stops polling and closes the source. */
  stop(): void {
    this.#stopped = true;
    if (this.#timer !== null) this.#o.clock.clearTimeout(this.#timer);
    this.#timer = null;
    this.#o.source.close();
  }

  #arm(): void {
    this.#timer = this.#o.clock.setTimeout(() => {
      this.#timer = null;
      if (this.#stopped) return;
      this.pollOnce();
      if (!this.#stopped) this.#arm();
    }, this.#o.pollMs ?? 100);
  }
}
