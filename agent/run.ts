/**
 * `nftproxy run`: the long-running agent, wired together (cli.ts calls {@link runAgent}).
 *
 * - Source: the file source (bare metal) or the Kubernetes API (agent/kube-source.ts). With the API, the first
 *   sync waits until Services AND EndpointSlices have been listed (upstream: the proxier is not synced before both
 *   informers are); bad credentials, an unreachable API or an unreadable kubeconfig stop startup with one clear
 *   line on stderr and exit code 1.
 * - Syncs: snapshot → compile → plan → one batch per family, on kube-proxy's bounded-frequency runner
 *   (minSyncPeriod between syncs, retry after syncPeriod, a full resync every hour).
 * - Restart adoption (agent/adopt.ts): the first sync of each family dumps our table and sends only what differs.
 * - Tamper repair (agent/tamper.ts): a NFNLGRP_NFTABLES listener requests a FULL sync when anyone else changes
 *   our table. The listener leaves the group during our own batches; foreign commits in that window (seen through
 *   the generation id) trigger a read-only comparison of our tables with the committed rulesets.
 * - A change of the Node's `topology.kubernetes.io/zone` label makes the next sync full.
 * - Health (/healthz, /livez) and metrics (/metrics, /proxyMode, /configz) servers with kube-proxy's semantics.
 * - SIGTERM/SIGINT: stop within 5 s, leaving the ruleset in place.
 *
 * Environment knobs (for tests and operations): NFTPROXY_KUBE_WATCHDOG_MS (ms of watch silence, bookmarks
 * included, after which a watch is considered stalled and the resource relisted; default 120000).
 */
import type { Config } from '../config-schema/config.ts';
import { LABEL } from '../config-schema/kubernetes.ts';
import { toBatchOps } from '../rules/index.ts';
import { NFNLGRP_NFTABLES } from '../netlink/message.ts';
import { NftSocket } from '../netlink/socket.ts';
import type { BatchOp, TableFamily } from '../netlink/types.ts';
import { ClusterState } from './cluster-state.ts';
import { FileSource } from './file-source.ts';
import { SnapshotBuilder, type IPFamily } from './snapshot.ts';
import { Syncer, FULL_SYNC_PERIOD_MS, type SyncLogger } from './syncer.ts';
import { BoundedFrequencyRunner, systemClock } from './runner.ts';
import { ChangeMetrics, createProxyMetrics } from './metrics.ts';
import { ProxyHealth, buildHealthServer, buildMetricsServer, parseBindAddress } from './health.ts';
import { KubeSource, loadKubeConfig, postStartingEvent } from './kube-source.ts';
import { allocatorFromTable, contentOf, planAdoption, readTable, type TableContent } from './adopt.ts';
import { TamperWatcher } from './tamper.ts';
import { conntrackStartup, openConntrackCleanup } from './conntrack.ts';
import { ConfigWatcher } from './config-watch.ts';
import { NodeAddressWatcher } from './node-addresses.ts';
import { ServiceHealthServers, serviceHealthInfos } from './healthcheck-server.ts';
import type { Snapshot } from '../config-schema/snapshot.ts';
import { existsSync } from 'node:fs';

const TABLE_FAMILY: Record<IPFamily, TableFamily> = { IPv4: 'ip', IPv6: 'ip6' };

/** The logger run needs (pino fits). */
export interface RunLogger extends SyncLogger {
  flush?(): void;
}

/** The families to program: the config's, less IPv6 when the kernel has none (/proc/net/if_inet6 missing). */
export function familiesOf(cfg: Config, log: RunLogger | null): IPFamily[] {
  const fams = [...new Set(cfg.ipFamilies)] as IPFamily[];
  if (fams.includes('IPv6') && !existsSync('/proc/net/if_inet6')) {
    log?.warn({}, 'IPv6 is not supported by this kernel (/proc/net/if_inet6 is missing); programming IPv4 only');
    return fams.filter((f) => f !== 'IPv6');
  }
  return fams;
}

/**
 * Formats ms as a Go `time.Duration` string: `0s`, `500ms`, `1.5s`, `1m30s`, `1h0m0s`, `24h0m0s`.
 * @throws Error when `ms` is negative or not finite.
 */
export function formatGoDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) throw new Error(`duration ${ms} ms is not a non-negative number`);
  if (ms === 0) return '0s';
  if (ms < 1000) return `${ms}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const sec = (ms % 60_000) / 1000;
  return `${h ? `${h}h` : ''}${h || m ? `${m}m` : ''}${sec}s`;
}

/**
 * The running config as `/configz` shows it: KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1) JSON with
 * durations as Go duration strings again (the loaded config holds them in ms).
 */
export function configzView(cfg: Config): Record<string, unknown> {
  const d = formatGoDuration;
  return {
    ...cfg,
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1', kind: 'KubeProxyConfiguration', mode: 'nftables',
    configSyncPeriod: d(cfg.configSyncPeriod),
    conntrack: {
      ...cfg.conntrack,
      tcpEstablishedTimeout: d(cfg.conntrack.tcpEstablishedTimeout), tcpCloseWaitTimeout: d(cfg.conntrack.tcpCloseWaitTimeout),
      udpTimeout: d(cfg.conntrack.udpTimeout), udpStreamTimeout: d(cfg.conntrack.udpStreamTimeout),
    },
    nftables: { ...cfg.nftables, syncPeriod: d(cfg.nftables.syncPeriod), minSyncPeriod: d(cfg.nftables.minSyncPeriod) },
  };
}

/** What `run` gets from the CLI besides the parsed config. */
export interface RunOptions {
  /** The config file as read at startup: watched; a valid change makes the agent exit 0 (kube-proxy's behaviour). */
  configFile?: { path: string; text: string };
  /** Startup checks after the socket is open (oomScoreAdj, kernel probe); false stops startup with exit code 1. */
  preflight?: (sock: NftSocket, families: IPFamily[]) => Promise<boolean>;
}

/**
 * Runs the agent until SIGTERM/SIGINT, or until the config file changes to a valid new config. Returns the exit code: 0 after a signal, 1 when startup failed (the
 * reason is logged and printed on stderr as `nftproxy run: <reason>`).
 */
export async function runAgent(cfg: Config, nodeName: string, log: RunLogger, opts: RunOptions = {}): Promise<number> {
  const fail = (msg: string): number => {
    log.error({ err: msg }, 'startup failed');
    log.flush?.();
    process.stderr.write(`nftproxy run: ${msg}\n`);
    return 1;
  };
  const families = familiesOf(cfg, log);
  await conntrackStartup(cfg, nodeName, log); // conntrack sysctls, as upstream at startup (also `run --init-only`)
  const metrics = createProxyMetrics();
  const health = new ProxyHealth(systemClock, 2 * cfg.nftables.syncPeriod);
  const state = new ClusterState(nodeName, (what, reason) => log.warn({ object: what, reason }, 'skipping invalid object'));
  // nodeport-ips follow the interface addresses (polled; a change queues a sync, not a full one).
  const addrs = new NodeAddressWatcher({
    clock: systemClock, intervalMs: 1000,
    onChange: (a) => { log.info({ addresses: a }, 'node addresses changed'); queued(); },
    onError: (e) => log.warn({ err: e.message }, 'cannot read interface addresses'),
  });
  const builder = new SnapshotBuilder(cfg, (what, reason) => log.warn({ object: what, reason }, 'skipping invalid field'), () => addrs.current());

  // The Kubernetes client first: a bad kubeconfig must stop startup before anything touches the kernel.
  let kube: { src: KubeSource; kc: ReturnType<typeof loadKubeConfig> } | null = null;
  let kubeSynced = false;
  let queued: () => void = () => {};
  let zone: string | undefined;
  let syncerRef: Syncer | null = null;
  const zoneCheck = () => {
    const z = state.node?.metadata.labels?.[LABEL.zone];
    if (z === zone) return;
    if (syncerRef) {
      log.info({ from: zone ?? null, to: z ?? null }, 'node zone label changed; the next sync is full');
      syncerRef.requestFull();
    }
    zone = z;
  };
  if (cfg.source.type === 'kubernetes') {
    let kc;
    try {
      kc = loadKubeConfig(cfg.clientConnection.kubeconfig);
    } catch (err) {
      return fail((err as Error).message);
    }
    const synced = new Set<string>();
    const src = new KubeSource({
      kubeConfig: kc, nodeName, log,
      watchdogMs: Number(process.env.NFTPROXY_KUBE_WATCHDOG_MS) || undefined,
      sink: {
        replace: (k, objs) => {
          state.replace(k, objs);
          if (k === 'Node') { health.setNode(state.node); zoneCheck(); }
          if (kubeSynced) queued();
        },
        event: (k, type, o) => {
          if (type === 'DELETED') state.remove(k, o); else state.upsert(k, o);
          if (k === 'Node') { health.setNode(state.node); zoneCheck(); }
          if (kubeSynced && state.hasPending) queued();
        },
        synced: (k) => {
          synced.add(k);
          if (synced.has('Service') && synced.has('EndpointSlice')) kubeSynced = true;
        },
      },
    });
    try {
      await src.start(); // lists Services, EndpointSlices and the Node first: the first sync waits for them
    } catch (err) {
      src.stop();
      return fail((err as Error).message);
    }
    kube = { src, kc };
  }

  let sock: NftSocket;
  try {
    sock = NftSocket.open();
  } catch (err) {
    kube?.src.stop();
    return fail((err as Error).message);
  }
  if (opts.preflight && !(await opts.preflight(sock, families))) {
    kube?.src.stop();
    sock.close();
    log.flush?.();
    return 1;
  }
  // Per-family healthCheckNodePort servers, bound to the family's NodePort addresses (match-all: 0.0.0.0 / ::).
  const hcAddrs = new Map<IPFamily, readonly string[]>();
  const hcServers = new Map(families.map((f) => [f, new ServiceHealthServers({ addresses: () => hcAddrs.get(f) ?? [], healthy: () => health.health().healthy, log })]));
  let hcChain: Promise<unknown> = Promise.resolve();
  const onSynced = (f: IPFamily, snap: Snapshot) => {
    hcAddrs.set(f, snap.nodePortIPs ?? [f === 'IPv4' ? '0.0.0.0' : '::']);
    const wanted = serviceHealthInfos(snap.servicePorts);
    hcChain = hcChain.then(() => hcServers.get(f)!.sync(wanted));
  };
  const adoptTried = new Set<IPFamily>();
  const found = new Map<IPFamily, TableContent | null>(); // the table dumped for the allocation, reused by adopt
  let tamper: TamperWatcher | null = null;
  // Our batches run while the tamper listener is out of the group (agent/tamper.ts: no notifications built for them).
  const sender = { sendBatch: (ops: readonly BatchOp[]) => (tamper ? tamper.around(() => sock.sendBatch(ops), () => sock.getGeneration()) : sock.sendBatch(ops)) };
  const syncer = new Syncer({
    families, state, builder, sender, now: () => Date.now(), log, metrics, health, onSynced,
    seedAllocator: async (family) => {
      if (adoptTried.has(family)) return null;
      try {
        const kernel = await readTable(sock, TABLE_FAMILY[family], cfg.tableName);
        found.set(family, kernel);
        return allocatorFromTable(kernel);
      } catch (err) {
        log.warn({ family, err: (err as Error).message }, 'cannot read the endpoint allocation of the existing table; allocating anew');
        return null;
      }
    },
    adopt: async (family, desired) => {
      if (adoptTried.has(family)) return null;
      adoptTried.add(family);
      try {
        const kernel = found.get(family) ?? await readTable(sock, TABLE_FAMILY[family], cfg.tableName);
        found.delete(family);
        const want = contentOf(toBatchOps(desired));
        if (!want) return null;
        const p = planAdoption(kernel, want);
        log.info({ family, adoption: p.kind, reason: p.reason, ops: p.ops.length, compared: p.compared, mismatches: p.mismatches }, p.kind === 'adopt' ? 'adopting the existing table' : 'not adopting the existing table; full sync');
        return p.kind === 'adopt' ? p.ops : null;
      } catch (err) {
        log.warn({ family, err: (err as Error).message }, 'cannot read the existing table; full sync');
        return null;
      }
    },
  });
  syncerRef = syncer;
  zone = state.node?.metadata.labels?.[LABEL.zone];
  log.info({ minSyncPeriod: cfg.nftables.minSyncPeriod, syncPeriod: cfg.nftables.syncPeriod, maxSyncPeriod: FULL_SYNC_PERIOD_MS, families, nodeName, table: cfg.tableName }, 'NFTables sync params');
  let inflight: Promise<unknown> | null = null; // the sync in progress, for shutdown
  // Stale UDP flows are deleted over ctnetlink after each successful sync that touched a UDP ServicePort.
  const conntrack = openConntrackCleanup({ families, state, log, metrics });
  const runner = new BoundedFrequencyRunner(async () => {
    conntrack.beforeSync();
    const run = syncer.sync();
    inflight = run.catch(() => {});
    try { await run; } finally { inflight = null; }
    conntrack.afterSync();
  }, {
    minIntervalMs: cfg.nftables.minSyncPeriod, retryIntervalMs: cfg.nftables.syncPeriod, maxIntervalMs: FULL_SYNC_PERIOD_MS,
    clock: systemClock, onError: () => {},
  });
  const changeMetrics = new ChangeMetrics(metrics);
  queued = () => {
    changeMetrics.observe(state);
    for (const f of families) {
      health.queuedUpdate(f);
      metrics.syncProxyRulesLastQueuedTimestamp.set({ ip_family: f }, Date.now() / 1000);
    }
    runner.run();
  };

  // Foreign commits while we were not listening: compare our tables with what we committed (read-only), repair
  // with a full sync only when they differ.
  let checking = false;
  const checkTables = async () => {
    if (checking) return;
    checking = true;
    try {
      await runner.whenIdle();
      for (const f of families) {
        const committed = syncer.committed(f);
        const want = committed && contentOf(toBatchOps(committed));
        if (!want) continue;
        const p = planAdoption(await readTable(sock, TABLE_FAMILY[f], cfg.tableName), want, { ignoreEmptyExtraChains: true });
        if (p.kind === 'adopt' && p.ops.length === 0) continue;
        log.warn({ family: f, reason: p.reason, mismatches: p.mismatches }, 'our table was changed by someone else during a sync; repairing with a full sync');
        syncer.requestFull();
        queued();
        return;
      }
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'cannot check our tables');
    } finally {
      checking = false;
    }
  };

  // Tamper repair: a listener on the nf_tables multicast group.
  try {
    const notify = NftSocket.open({ groups: [NFNLGRP_NFTABLES], sndbufBytes: 64 << 10, rcvbufBytes: 4 << 20 });
    tamper = new TamperWatcher({
      source: notify, table: cfg.tableName, families: families.map((f) => TABLE_FAMILY[f]), ownPortIds: new Set([sock.portId]),
      clock: systemClock,
      onTamper: (changes) => {
        const who = changes.find((c) => c.procName !== undefined);
        log.warn({ changes: changes.length, first: changes.slice(0, 3), by: who ? `${who.procName} (pid ${who.procPid})` : `port ${changes[0].portId}` },
          'our table was changed by someone else; repairing with a full sync');
        syncer.requestFull();
        queued();
      },
      onError: (err) => log.warn({ err: (err as Error).message }, 'cannot read nf_tables notifications'),
      onUnseenCommits: (count) => {
        log.info({ commits: count }, 'foreign nf_tables commits during our sync; checking our tables');
        void checkTables();
      },
    });
    tamper.start();
  } catch (err) {
    log.warn({ err: (err as Error).message }, 'cannot subscribe to nf_tables notifications; tampering is repaired only by the hourly full sync');
  }

  const servers: Array<{ close(): Promise<unknown> }> = [];
  const listen = async (field: string, addr: string, app: ReturnType<typeof buildHealthServer>) => {
    if (!addr) return;
    const { host, port } = parseBindAddress(field, addr);
    await app.listen({ host, port });
    servers.push(app);
    log.info({ address: addr }, `${field === 'healthzBindAddress' ? 'health' : 'metrics'} server listening`);
  };

  let stopSource: () => void = () => {};
  if (cfg.source.type === 'file') {
    health.setNode({ metadata: {}, spec: {} }); // no Node object on bare metal: eligible
    const src = new FileSource(cfg.source.path, state, log, queued);
    src.start();
    stopSource = () => src.stop();
  } else if (kube) {
    const { src, kc } = kube;
    stopSource = () => src.stop();
    void postStartingEvent(kc, nodeName, new Date()).then((err) => { if (err) log.warn({ err: err.message }, 'cannot post the Starting event'); });
  }
  try {
    await listen('healthzBindAddress', cfg.healthzBindAddress, buildHealthServer(health, metrics));
    await listen('metricsBindAddress', cfg.metricsBindAddress, buildMetricsServer(metrics, configzView(cfg)));
  } catch (err) {
    stopSource();
    tamper?.stop();
    await Promise.allSettled(servers.map((s) => s.close()));
    sock.close();
    conntrack.close();
    return fail(`cannot listen: ${(err as Error).message}`);
  }

  for (const f of families) health.updated(f); // as upstream's SyncLoop: not stale before the first sync
  runner.start();
  addrs.start();
  queued();

  await new Promise<void>((resolve) => {
    const watcher = opts.configFile
      ? new ConfigWatcher({ path: opts.configFile.path, runningText: opts.configFile.text, log, onChange: () => stop('config file changed') })
      : null;
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      log.info({ signal }, 'stopping; the ruleset stays in place');
      watcher?.stop();
      runner.stop();
      stopSource();
      addrs.stop();
      tamper?.stop();
      // Wait for a sync in progress only (a pending one is dropped with the stopped runner), at most 4 s.
      const deadline = setTimeout(resolve, 4000);
      void (inflight ?? Promise.resolve()).then(async () => {
        await Promise.allSettled(servers.map((s) => s.close()));
        await hcChain.then(() => Promise.allSettled([...hcServers.values()].map((h) => h.close())));
        clearTimeout(deadline);
        resolve();
      });
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
    watcher?.start();
  });
  sock.close();
  conntrack.close();
  return 0;
}
