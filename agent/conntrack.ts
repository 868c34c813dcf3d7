/**
 * Stale UDP flow cleanup after syncs (reference kube-proxy-nftables.md §6.2; issue 5). After a successful sync that
 * touched a UDP ServicePort (its frontends or serving endpoints differ from what the last reconcile saw), and once
 * after the first sync of a run, each family's UDP flows are dumped over ctnetlink, filtered in the kernel on
 * protocol = UDP (TCP and other flows never leave the kernel), the stale ones are picked by
 * agent/conntrack-reconciler.ts and deleted by original tuple and CTA_ID, so a tuple that a new flow reuses
 * in between is never deleted.
 *
 * The runner calls `beforeSync()` right before each sync and `afterSync()` after each successful one.
 *
 * Restarting the agent deletes no valid flow (upstream #122740): a reconcile only deletes flows whose reply source
 * is not a serving endpoint of the frontend they were sent to, whatever the agent saw before.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import type { Config } from '../config-schema/config.ts';
import type { CtDeleteSpec, CtDumpFilter, CtFamily, CtFlow } from '../netlink/ctnetlink.ts';
import { IPPROTO } from '../netlink/ctnetlink.ts';
import { ConntrackSocket, type DeleteResult } from '../netlink/ct-socket.ts';
import { loadKubeConfig, postNodeEvent } from './kube-source.ts';
import { READ_ONLY_SYSFS_EVENT, setupConntrackSysctls, type SysctlFs, type SysctlOutcome } from './sysctls.ts';
import type { ClusterState } from './cluster-state.ts';
import { indexUdpServices, staleFlows, type ConntrackFlow, type UdpServicePort } from './conntrack-reconciler.ts';
import type { ProxyMetrics } from './metrics.ts';
import { canonicalAddr, isIPv4, isIPv6 } from '../rules/addr.ts';
import { collectEndpoints, type IPFamily } from './snapshot.ts';
import type { SyncLogger } from './syncer.ts';

/** What the cleaner needs of the conntrack table (netlink/ct-socket.ts ConntrackSocket fits; tests use a fake). */
export interface ConntrackTable {
  dump(family: CtFamily, filter?: CtDumpFilter): CtFlow[];
  deleteFlows(specs: readonly CtDeleteSpec[]): DeleteResult;
}

/** The outcome of one family's reconcile, for logs and tests. */
export interface ReconcileResult {
  family: IPFamily;
  /** UDP flows the kernel sent (the dump is filtered on protocol = UDP). */
  udpFlows: number;
  stale: number;
  deleted: number;
  /** ENOENT: gone meanwhile, or the tuple now belongs to a newer flow (CTA_ID differs). */
  missing: number;
  failed: number;
  ms: number;
}

const CT_FAMILY: Record<IPFamily, CtFamily> = { IPv4: 'ipv4', IPv6: 'ipv6' };
const TABLE_FAMILY = { IPv4: 'ip', IPv6: 'ip6' } as const;

/**
 * The UDP ServicePorts of `family` as the reconciler sees them: frontends (ClusterIP, ExternalIPs and LoadBalancer
 * VIPs with ipMode VIP or unset, each with the service port), the NodePort (NodePort and LoadBalancer Services),
 * and EVERY serving endpoint (ready or serving-terminating, whatever the traffic policy or topology: upstream's
 * `IsServing()`), keyed by `ns/name:port/UDP`. Built from the cluster state the syncer just programmed, the same
 * way agent/snapshot.ts builds ServicePorts; Services without a UDP port cost one check, so a sync of a large
 * TCP-only cluster pays ~1 ms here. Addresses are canonical (rules/addr.ts), like the flows' (netlink/ctnetlink.ts).
 */
export function udpServicePorts(state: ClusterState, family: IPFamily): Map<string, UdpServicePort> {
  const out = new Map<string, UdpServicePort>();
  const tf = TABLE_FAMILY[family];
  const canon = (ips: readonly (string | undefined)[]) => ips.flatMap((ip) => {
    if (!ip || (family === 'IPv4' ? !isIPv4(ip) : !isIPv6(ip))) return [];
    return [canonicalAddr(tf, ip)];
  });
  for (const [svcKey, svc] of state.services) {
    const spec = svc.spec;
    if (!spec.ports.some((p) => p.protocol === 'UDP')) continue;
    const clusterIPs = canon(spec.clusterIPs?.length ? spec.clusterIPs : [spec.clusterIP]);
    if (clusterIPs.length === 0) continue;
    const ips = [clusterIPs[0], ...canon(spec.externalIPs ?? []),
      ...canon((svc.status?.loadBalancer?.ingress ?? []).filter((i) => i.ipMode === undefined || i.ipMode === 'VIP').map((i) => i.ip))];
    const slices = [...(state.slicesByService.get(svcKey) ?? [])].flatMap((k) => { const s = state.slices.get(k); return s && s.addressType === family ? [s] : []; });
    const withNodePort = spec.type === 'NodePort' || spec.type === 'LoadBalancer';
    for (const p of spec.ports) {
      if (p.protocol !== 'UDP') continue;
      const portName = p.name ?? '';
      const endpoints = collectEndpoints(slices, portName, 'UDP', state.nodeName, tf, () => {});
      out.set(`${svcKey}:${portName}/UDP`, {
        frontends: ips.map((ip) => ({ ip, port: p.port })),
        nodePort: withNodePort ? p.nodePort ?? 0 : 0,
        servingEndpoints: endpoints.filter((e) => e.serving).map((e) => ({ ip: e.ip, port: e.port })),
      });
    }
  }
  return out;
}

const fingerprint = (sps: Map<string, UdpServicePort>) => JSON.stringify([...sps.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)));

/** Options of {@link ConntrackCleaner}. */
export interface ConntrackCleanerOptions {
  families: IPFamily[];
  state: ClusterState;
  table: ConntrackTable;
  log: SyncLogger;
  metrics?: ProxyMetrics;
}

interface FamilyMemory {
  fingerprint: string;
  services: Map<string, UdpServicePort>;
}

/**
 * Runs the reconciler after syncs. Not re-entrant (the runner never overlaps runs). Per family it remembers the
 * UDP ServicePorts of the last successful reconcile: an unchanged set skips the dump; a ServicePort that
 * disappeared since is reconciled once with no endpoints, so flows of a deleted Service go too.
 */
export class ConntrackCleaner {
  readonly #o: ConntrackCleanerOptions;
  readonly #last = new Map<IPFamily, FamilyMemory>();
  #view: Map<IPFamily, Map<string, UdpServicePort>> | null = null;
  /** Results of the last call (families that were reconciled), for tests. */
  last: ReconcileResult[] = [];

  constructor(opts: ConntrackCleanerOptions) {
    this.#o = opts;
  }

  /**
   * Call right before the syncer starts: captures the UDP ServicePorts of the state the sync is about to program.
   * The syncer checks the state out synchronously at its start, so nothing can change in between; a change that
   * arrives while the batch is in flight is left for the next sync (and its reconcile), instead of being
   * reconciled against rules that do not have it yet.
   */
  beforeSync(): void {
    const view = new Map<IPFamily, Map<string, UdpServicePort>>();
    for (const family of this.#o.families) {
      try {
        view.set(family, udpServicePorts(this.#o.state, family));
      } catch (err) {
        this.#o.log.error({ family, err: (err as Error).message }, 'conntrack reconcile: cannot compute the UDP services');
      }
    }
    this.#view = view;
  }

  /**
   * Call after every successful sync. Reconciles each family whose UDP ServicePorts (as captured by
   * {@link beforeSync}, else as they are now) changed since its last successful reconcile (always on the first
   * call). Never throws: a failure is logged and the family is retried after the next sync.
   */
  afterSync(): ReconcileResult[] {
    const { families, log } = this.#o;
    if (!this.#view) this.beforeSync();
    const view = this.#view!;
    this.#view = null;
    const results: ReconcileResult[] = [];
    for (const family of families) {
      const current = view.get(family);
      if (!current) continue;
      const fp = fingerprint(current);
      const prev = this.#last.get(family);
      if (prev && prev.fingerprint === fp) continue;
      // Deleted ServicePorts first (no endpoints), then the live ones, which win where they share a frontend.
      const gone = prev ? [...prev.services].filter(([k]) => !current.has(k)).map(([, sp]) => ({ ...sp, servingEndpoints: [] })) : [];
      try {
        const r = this.reconcile(family, [...gone, ...current.values()]);
        results.push(r);
        this.#last.set(family, { fingerprint: fp, services: current });
      } catch (err) {
        log.error({ family, err: (err as Error).message }, 'conntrack reconcile failed; it is retried after the next sync');
      }
    }
    this.last = results;
    return results;
  }

  /**
   * One reconcile of `family` against `services`: dump UDP flows (kernel-filtered), pick the stale ones, delete
   * them by tuple and CTA_ID.
   * @throws the dump's or the delete's socket error.
   */
  reconcile(family: IPFamily, services: readonly UdpServicePort[]): ReconcileResult {
    const { table, log, metrics } = this.#o;
    const t0 = performance.now();
    const flows = table.dump(CT_FAMILY[family], { orig: { proto: IPPROTO.UDP } });
    const byId = new Map<number, CtFlow>();
    const view: ConntrackFlow[] = flows.map((f) => {
      byId.set(f.id, f);
      return {
        proto: f.orig.proto, origSrc: f.orig.src, origDst: f.orig.dst, origSport: f.orig.sport, origDport: f.orig.dport,
        replySrc: f.reply.src, replySport: f.reply.sport, id: f.id, zone: f.zone,
      };
    });
    const stale = staleFlows(view, indexUdpServices(services));
    let del: DeleteResult = { deleted: 0, missing: 0, failed: [] };
    if (stale.length > 0) {
      del = table.deleteFlows(stale.map((s) => { const f = byId.get(s.id)!; return { family: f.family, orig: f.orig, id: f.id, zone: f.zone }; }));
    }
    const ms = performance.now() - t0;
    metrics?.conntrackReconcilerSyncDuration.observe({ ip_family: family }, ms / 1000);
    metrics?.conntrackReconcilerDeletedEntriesTotal.inc({ ip_family: family }, del.deleted); // 0 too: the series exists from the first reconcile
    const r: ReconcileResult = { family, udpFlows: flows.length, stale: stale.length, deleted: del.deleted, missing: del.missing, failed: del.failed.length, ms: Math.round(ms * 100) / 100 };
    if (del.failed.length) log.warn({ family, failed: del.failed.slice(0, 5) }, 'conntrack reconcile: some deletes failed');
    if (r.stale > 0) {
      log.info({ ...r, flows: stale.slice(0, 10).map((f) => `${f.origSrc}:${f.origSport} -> ${f.origDst}:${f.origDport} (reply from ${f.replySrc}:${f.replySport})`) }, 'conntrack reconciled: stale UDP flows deleted');
    } else {
      log.info(r, 'conntrack reconciled');
    }
    return r;
  }
}

/** The real /proc and /sys. */
export const procFs: SysctlFs = { readFile: (p) => readFileSync(p, 'utf8'), writeFile: (p, d) => writeFileSync(p, d) };

/**
 * The privileged startup step of `nftproxy run` and `nftproxy run --init-only`: the conntrack sysctls of the
 * config (agent/sysctls.ts). When a value is read-only and that matters, the warning is logged and, with the
 * Kubernetes source, posted as a Warning event on the Node (reason readOnlySysFS), as upstream does.
 * @throws Error naming the path and the errno for any other failure (startup must stop).
 */
export async function conntrackStartup(cfg: Config, nodeName: string, log: SyncLogger, fs: SysctlFs = procFs, numCPU = availableParallelism()): Promise<SysctlOutcome[]> {
  let readOnly: string | null = null;
  const out = setupConntrackSysctls(cfg.conntrack, numCPU, fs, log, (m) => { readOnly = m; });
  if (readOnly !== null && cfg.source.type === 'kubernetes') {
    const err = await postNodeWarning(cfg, nodeName, READ_ONLY_SYSFS_EVENT.reason, readOnly, new Date());
    if (err) log.warn({ err: err.message }, 'cannot post the readOnlySysFS event');
  }
  return out;
}

async function postNodeWarning(cfg: Config, nodeName: string, reason: string, message: string, now: Date): Promise<Error | null> {
  let kc;
  try {
    kc = loadKubeConfig(cfg.clientConnection.kubeconfig);
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
  return postNodeEvent(kc, nodeName, { reason, message, type: 'Warning' }, now);
}

/**
 * Opens the ctnetlink socket and returns the cleaner to call after each successful sync, and `close`. When the
 * socket cannot be opened, cleanup is disabled with an error in the log (the proxy itself keeps working).
 */
export function openConntrackCleanup(opts: Omit<ConntrackCleanerOptions, 'table'>): { beforeSync(): void; afterSync(): void; close(): void } {
  let sock: ConntrackSocket;
  try {
    sock = ConntrackSocket.open();
  } catch (err) {
    opts.log.error({ err: (err as Error).message }, 'cannot open the conntrack netlink socket; stale UDP flows will not be cleaned');
    return { beforeSync() {}, afterSync() {}, close() {} };
  }
  const cleaner = new ConntrackCleaner({ ...opts, table: sock });
  return { beforeSync: () => cleaner.beforeSync(), afterSync: () => { cleaner.afterSync(); }, close: () => sock.close() };
}
