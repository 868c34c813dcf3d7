/**
 * The `nftproxy` command line, and the composition root: it builds every object and passes it down.
 *
 *   nftproxy run --config FILE [--init-only] [--hostname-override NAME] [--log-level LEVEL]
 *   nftproxy apply --config FILE        one sync; exit 0 only when the kernel acknowledged it
 *   nftproxy render --config FILE       the ruleset as nft -f text (no root, no socket)
 *   nftproxy cleanup --config FILE [--kube-proxy]
 *   nftproxy config schema | config validate FILE
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import pino from 'pino';
import type { Config } from '../config-schema/config.ts';
import { configJsonSchema } from '../config-schema/json-schema.ts';
import { compile, render } from '../rules/index.ts';
import { BatchError, NftSocket } from '../netlink/socket.ts';
import type { TableFamily } from '../netlink/types.ts';
import { ConfigError, loadConfig } from './config.ts';
import { ClusterState } from './cluster-state.ts';
import { FileSource, readListFile } from './file-source.ts';
import { SnapshotBuilder, type IPFamily } from './snapshot.ts';
import { Syncer, FULL_SYNC_PERIOD_MS } from './syncer.ts';
import { BoundedFrequencyRunner, systemClock } from './runner.ts';
import { createProxyMetrics } from './metrics.ts';
import { ProxyHealth, buildHealthServer, buildMetricsServer, parseBindAddress } from './health.ts';
import { KubeSource, loadKubeConfig, postStartingEvent } from './kube-source.ts';
import { conntrackStartup, openConntrackCleanup } from './conntrack.ts';

const VERSION = (JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), '..', 'package.json'), 'utf8')) as { version: string }).version;

const HELP: Record<string, string> = {
  '': `nftproxy ${VERSION}: a Kubernetes service proxy on nftables, programmed over netlink

Usage: nftproxy <command> [options]

Commands:
  run --config FILE       run the agent (sync loop, health and metrics servers)
  apply --config FILE     one sync, then exit (0 only when the kernel acknowledged it)
  render --config FILE    print the ruleset as nft -f text (no root needed)
  cleanup --config FILE   delete nftproxy's tables
  config schema           print the JSON Schema of the config file
  config validate FILE    check a config file

Options: --help, --version; see 'nftproxy <command> --help'.`,
  run: `Usage: nftproxy run --config FILE [--init-only] [--hostname-override NAME] [--log-level LEVEL]

Runs the agent. --init-only writes the conntrack sysctls (the privileged step) and exits.
SIGTERM and SIGINT stop it within 5 s and leave the ruleset in place.`,
  apply: 'Usage: nftproxy apply --config FILE [--hostname-override NAME]\n\nOne full sync; prints a JSON summary; exit 0 only when the kernel acknowledged every batch.',
  render: 'Usage: nftproxy render --config FILE [--hostname-override NAME]\n\nPrints the ruleset of every family as nft -f text. Opens no socket and needs no root.',
  cleanup: 'Usage: nftproxy cleanup --config FILE [--kube-proxy]\n\nDeletes the ip and ip6 tables named by tableName; with --kube-proxy also kube-proxy\'s own nftables tables.',
  config: 'Usage: nftproxy config schema | nftproxy config validate FILE',
};

type Logger = pino.Logger;

function makeLogger(level: string, toStderr: boolean): Logger {
  return pino({ level, base: { component: 'nftproxy' }, timestamp: pino.stdTimeFunctions.isoTime }, pino.destination(toStderr ? 2 : 1));
}

/** The node name: --hostname-override, else config hostnameOverride, else $NODE_NAME, else the hostname; lowercased. */
export function nodeNameOf(cfg: Config, override?: string): string {
  return (override || cfg.hostnameOverride || process.env.NODE_NAME || hostname()).trim().toLowerCase();
}

/** The families to program: the config's, less IPv6 when the kernel has none (/proc/net/if_inet6 missing). */
function familiesOf(cfg: Config, log: Logger | null): IPFamily[] {
  const fams = [...new Set(cfg.ipFamilies)] as IPFamily[];
  if (fams.includes('IPv6') && !existsSync('/proc/net/if_inet6')) {
    log?.warn({}, 'IPv6 is not supported by this kernel (/proc/net/if_inet6 is missing); programming IPv4 only');
    return fams.filter((f) => f !== 'IPv6');
  }
  return fams;
}

const TABLE_FAMILY: Record<IPFamily, TableFamily> = { IPv4: 'ip', IPv6: 'ip6' };

/** Loads the objects once (file read, or one API list) into a fresh state. */
async function loadOnce(cfg: Config, nodeName: string, log: Logger): Promise<ClusterState> {
  const state = new ClusterState(nodeName, (what, reason) => log.warn({ object: what, reason }, 'skipping invalid object'));
  if (cfg.source.type === 'file') {
    const objs = readListFile(cfg.source.path);
    state.replace('Node', objs.Node);
    state.replace('Service', objs.Service);
    state.replace('EndpointSlice', objs.EndpointSlice);
  } else {
    const src = new KubeSource({
      kubeConfig: loadKubeConfig(cfg.clientConnection.kubeconfig), nodeName, log,
      sink: { replace: (k, o) => state.replace(k, o), event: () => {}, synced: () => {} },
    });
    await src.start();
    src.stop();
  }
  return state;
}

async function cmdRender(cfg: Config, nodeName: string): Promise<number> {
  const log = makeLogger('warn', true);
  const state = await loadOnce(cfg, nodeName, log);
  const builder = new SnapshotBuilder(cfg, (what, reason) => log.warn({ object: what, reason }, 'skipping invalid field'));
  for (const f of [...new Set(cfg.ipFamilies)] as IPFamily[]) process.stdout.write(render(compile(builder.build(state, f))));
  return 0;
}

async function cmdApply(cfg: Config, nodeName: string, log: Logger): Promise<number> {
  const state = await loadOnce(cfg, nodeName, log);
  const builder = new SnapshotBuilder(cfg, (what, reason) => log.warn({ object: what, reason }, 'skipping invalid field'));
  const sock = NftSocket.open();
  try {
    const syncer = new Syncer({ families: familiesOf(cfg, log), state, builder, sender: sock, now: () => Date.now(), log });
    const results = await syncer.sync();
    process.stdout.write(JSON.stringify({ ok: true, results }) + '\n');
    return 0;
  } catch (err) {
    process.stderr.write(`nftproxy apply: ${(err as Error).message}\n`);
    return 1;
  } finally {
    sock.close();
  }
}

async function cmdCleanup(cfg: Config, kubeProxy: boolean, log: Logger): Promise<number> {
  const sock = NftSocket.open();
  let failed = 0;
  try {
    const names = kubeProxy ? [cfg.tableName, 'kube-proxy'] : [cfg.tableName];
    for (const name of names) {
      for (const family of ['ip', 'ip6'] as const) {
        try {
          await sock.sendBatch([{ op: 'delete', kind: 'table', table: { family, name } }]);
          log.info({ table: `${family} ${name}` }, 'table deleted');
        } catch (err) {
          if (err instanceof BatchError && err.errors.every((e) => e.errnoName === 'ENOENT')) continue;
          failed++;
          log.error({ table: `${family} ${name}`, err: (err as Error).message }, 'cannot delete table');
        }
      }
    }
    if (kubeProxy) log.info({}, 'iptables and ipvs leftovers of kube-proxy are not removed by nftproxy: run "kube-proxy --cleanup" or see docs/migration-from-kube-proxy.md');
  } finally {
    sock.close();
  }
  return failed ? 1 : 0;
}

async function cmdInitOnly(cfg: Config, nodeName: string, log: Logger): Promise<number> {
  await conntrackStartup(cfg, nodeName, log);
  return 0;
}

async function cmdRun(cfg: Config, nodeName: string, log: Logger): Promise<number> {
  const families = familiesOf(cfg, log);
  await conntrackStartup(cfg, nodeName, log);
  const metrics = createProxyMetrics();
  const health = new ProxyHealth(systemClock, 2 * cfg.nftables.syncPeriod);
  const state = new ClusterState(nodeName, (what, reason) => log.warn({ object: what, reason }, 'skipping invalid object'));
  const builder = new SnapshotBuilder(cfg, (what, reason) => log.warn({ object: what, reason }, 'skipping invalid field'));
  const sock = NftSocket.open();
  const syncer = new Syncer({ families, state, builder, sender: sock, now: () => Date.now(), log, metrics, health });
  log.info({ minSyncPeriod: cfg.nftables.minSyncPeriod, syncPeriod: cfg.nftables.syncPeriod, maxSyncPeriod: FULL_SYNC_PERIOD_MS, families, nodeName, table: cfg.tableName }, 'NFTables sync params');
  const conntrack = openConntrackCleanup({ families, state, log, metrics });
  const runner = new BoundedFrequencyRunner(async () => { conntrack.beforeSync(); await syncer.sync(); conntrack.afterSync(); }, {
    minIntervalMs: cfg.nftables.minSyncPeriod, retryIntervalMs: cfg.nftables.syncPeriod, maxIntervalMs: FULL_SYNC_PERIOD_MS,
    clock: systemClock, onError: () => {},
  });
  const queued = () => {
    for (const f of families) {
      health.queuedUpdate(f);
      metrics.syncProxyRulesLastQueuedTimestamp.set({ ip_family: f }, Date.now() / 1000);
    }
    runner.run();
  };

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
  } else {
    const kc = loadKubeConfig(cfg.clientConnection.kubeconfig);
    const synced = new Set<string>();
    const src = new KubeSource({
      kubeConfig: kc, nodeName, log,
      sink: {
        replace: (k, objs) => { state.replace(k, objs); if (k === 'Node') health.setNode(state.node); if (synced.has('Service') && synced.has('EndpointSlice')) queued(); },
        event: (k, type, o) => {
          if (type === 'DELETED') state.remove(k, o); else state.upsert(k, o);
          if (k === 'Node') health.setNode(state.node);
          if (state.hasPending && synced.has('Service') && synced.has('EndpointSlice')) queued();
        },
        synced: (k) => { synced.add(k); },
      },
    });
    await src.start(); // lists Services, EndpointSlices and the Node first: the first sync waits for them
    stopSource = () => src.stop();
    const err = await postStartingEvent(kc, nodeName, new Date());
    if (err) log.warn({ err: err.message }, 'cannot post the Starting event');
  }
  await listen('healthzBindAddress', cfg.healthzBindAddress, buildHealthServer(health, metrics));
  await listen('metricsBindAddress', cfg.metricsBindAddress, buildMetricsServer(metrics, cfg));

  for (const f of families) health.updated(f); // as upstream's SyncLoop: not stale before the first sync
  runner.start();
  queued();

  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      log.info({ signal }, 'stopping; the ruleset stays in place');
      runner.stop();
      stopSource();
      const deadline = setTimeout(resolve, 4000);
      void runner.whenIdle().then(async () => {
        await Promise.allSettled(servers.map((s) => s.close()));
        clearTimeout(deadline);
        resolve();
      });
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  sock.close();
  conntrack.close();
  return 0;
}

/** Entry point: returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv, allowPositionals: true, strict: true,
    options: {
      config: { type: 'string', short: 'c' },
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean' },
      'init-only': { type: 'boolean' },
      'kube-proxy': { type: 'boolean' },
      'hostname-override': { type: 'string' },
      'log-level': { type: 'string', default: 'info' },
    },
  });
  const [cmd = '', sub] = positionals;
  if (values.version) { process.stdout.write(`nftproxy ${VERSION}\n`); return 0; }
  if (values.help || cmd === '' || cmd === 'help') { process.stdout.write(`${HELP[cmd === 'help' ? '' : cmd] ?? HELP['']}\n`); return cmd === '' && !values.help ? 2 : 0; }
  if (cmd === 'config') {
    if (sub === 'schema') { process.stdout.write(JSON.stringify(configJsonSchema(), null, 2) + '\n'); return 0; }
    if (sub === 'validate' && positionals[2]) { loadConfig(positionals[2]); process.stdout.write(`${positionals[2]}: valid\n`); return 0; }
    process.stderr.write(`${HELP.config}\n`);
    return 2;
  }
  if (!['run', 'apply', 'render', 'cleanup'].includes(cmd)) {
    process.stderr.write(`nftproxy: unknown command ${JSON.stringify(cmd)}\n\n${HELP['']}\n`);
    return 2;
  }
  if (!values.config) { process.stderr.write(`nftproxy ${cmd}: --config FILE is required\n`); return 2; }
  const cfg = loadConfig(values.config);
  const nodeName = nodeNameOf(cfg, values['hostname-override']);
  const log = makeLogger(values['log-level'] ?? 'info', cmd !== 'run');
  switch (cmd) {
    case 'render': return cmdRender(cfg, nodeName);
    case 'apply': return cmdApply(cfg, nodeName, log);
    case 'cleanup': return cmdCleanup(cfg, !!values['kube-proxy'], log);
    default: return values['init-only'] ? cmdInitOnly(cfg, nodeName, log) : cmdRun(cfg, nodeName, log);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main(process.argv.slice(2)).then((code) => process.exit(code), (err: unknown) => {
    process.stderr.write(`nftproxy: ${err instanceof ConfigError ? err.message : (err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  });
}
