/**
 * The `nftproxy` command line, and the composition root: it builds every object and passes it down.
 *
 *   nftproxy run --config FILE [--init-only] [--hostname-override NAME] [--log-level LEVEL]
 *   nftproxy apply --config FILE        one sync; exit 0 only when the kernel acknowledged it
 *   nftproxy render --config FILE       the ruleset as nft -f text (no root, no socket)
 *   nftproxy cleanup [--config FILE] [--kube-proxy]     (alias: nftproxy --cleanup, as kube-proxy's flag)
 *   nftproxy check [--config FILE]      the kernel requirements probe (agent/kernel-check.ts)
 *   nftproxy config schema | config validate FILE | config docs
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import pino from 'pino';
import type { Config } from '../config-schema/config.ts';
import { configJsonSchema } from '../config-schema/json-schema.ts';
import { configReferenceMarkdown } from '../config-schema/reference.ts';
import { compile, render } from '../rules/index.ts';
import { NftSocket } from '../netlink/socket.ts';
import type { TableFamily } from '../netlink/types.ts';
import { ConfigError, loadConfig, parseConfig } from './config.ts';
import { ClusterState } from './cluster-state.ts';
import { readListFile } from './file-source.ts';
import { SnapshotBuilder, type IPFamily } from './snapshot.ts';
import { Syncer } from './syncer.ts';
import { KubeSource, loadKubeConfig } from './kube-source.ts';
import { conntrackStartup } from './conntrack.ts';
import { checkKernel } from './kernel-check.ts';
import { applyOomScoreAdj } from './oom.ts';
import { KUBE_PROXY_TABLE, deleteTables, findKubeProxyLeftovers } from './cleanup.ts';
import { ConfigSchema } from '../config-schema/config.ts';
import { runAgent } from './run.ts';

const VERSION = (JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), '..', 'package.json'), 'utf8')) as { version: string }).version;

const HELP: Record<string, string> = {
  '': `nftproxy ${VERSION}: a Kubernetes service proxy on nftables, programmed over netlink

Usage: nftproxy <command> [options]

Commands:
  run --config FILE       run the agent (sync loop, health and metrics servers)
  apply --config FILE     one sync, then exit (0 only when the kernel acknowledged it)
  render --config FILE    print the ruleset as nft -f text (no root needed)
  cleanup [--config FILE] delete nftproxy's tables (ip and ip6); --kube-proxy: kube-proxy's instead
  check [--config FILE]   check that the kernel has every nf_tables feature nftproxy needs
  config schema           print the JSON Schema of the config file
  config validate FILE    check a config file
  config docs             print the configuration reference (docs/configuration.md)

Options:
  --help, -h              this help; 'nftproxy <command> --help' for one command
  --version               print the version
  --cleanup               same as the cleanup command (kube-proxy's flag)`,
  run: `Usage: nftproxy run --config FILE [--init-only] [--hostname-override NAME] [--log-level LEVEL]

Runs the agent: checks the kernel, sets oomScoreAdj, programs the ruleset and keeps it in sync.
  --config FILE             the JSON config (see docs/configuration.md); watched: a valid change makes the
                            agent exit 0 so that its supervisor restarts it; an invalid change is only reported
  --init-only               write the conntrack sysctls (the privileged step) and exit
  --hostname-override NAME  the node name (else config hostnameOverride, $NODE_NAME, the hostname)
  --log-level LEVEL         trace, debug, info (default), warn, error
SIGTERM and SIGINT stop it within 5 s and leave the ruleset in place.`,
  apply: 'Usage: nftproxy apply --config FILE [--hostname-override NAME]\n\nOne full sync; prints a JSON summary; exit 0 only when the kernel acknowledged every batch.',
  render: 'Usage: nftproxy render --config FILE [--hostname-override NAME]\n\nPrints the ruleset of every family as nft -f text. Opens no socket and needs no root.',
  cleanup: `Usage: nftproxy cleanup [--config FILE] [--kube-proxy]     (or: nftproxy --cleanup ...)

Deletes the ip and ip6 tables named by tableName (default nftproxy): everything nftproxy made, nothing else.
--kube-proxy  instead takes over from kube-proxy: deletes kube-proxy's nftables tables (ip and ip6 kube-proxy)
              and leaves nftproxy's own; names kube-proxy's iptables and ipvs leftovers with the command to remove
              them (nftproxy does not touch those).
Prints a JSON summary; exit 1 when a table could not be deleted.`,
  check: `Usage: nftproxy check [--config FILE]

Probes the kernel with one nf_tables batch that creates and deletes a throw-away table holding every feature
nftproxy uses; exit 0 when it was accepted, 1 with the missing feature otherwise. 'run' does the same at startup.`,
  config: 'Usage: nftproxy config schema | nftproxy config validate FILE | nftproxy config docs\n\nschema: the JSON Schema of the config file; validate: check FILE (exit 1 naming each invalid field); docs: the Markdown configuration reference (docs/configuration.md).',
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

/** `cleanup`: our tables (both families); with --kube-proxy instead kube-proxy's tables, and its other leftovers named. */
async function cmdCleanup(cfg: Config, kubeProxy: boolean, log: Logger): Promise<number> {
  const sock = NftSocket.open();
  try {
    // --kube-proxy takes over from kube-proxy: its tables only, so a running nftproxy keeps its own.
    const tables = await deleteTables(sock, kubeProxy ? [KUBE_PROXY_TABLE] : [cfg.tableName]);
    for (const t of tables) {
      if (t.action === 'failed') log.error({ table: t.table, err: t.error }, 'cannot delete table');
      else if (t.action === 'deleted') log.info({ table: t.table }, 'table deleted');
    }
    const leftovers = kubeProxy ? await findKubeProxyLeftovers(sock, (p) => { try { return readFileSync(p, 'utf8'); } catch { return null; } }) : [];
    for (const l of leftovers) log.warn({ advice: l.advice }, `kube-proxy leftover, not removed by nftproxy: ${l.what}`);
    if (kubeProxy && !leftovers.length) log.info({}, 'no iptables or ipvs leftovers of kube-proxy found');
    process.stdout.write(JSON.stringify({ tables, leftovers }) + '\n');
    return tables.some((t) => t.action === 'failed') ? 1 : 0;
  } finally {
    sock.close();
  }
}

/** `check`: the kernel probe for every configured family. */
async function cmdCheck(cfg: Config, log: Logger): Promise<number> {
  const sock = NftSocket.open();
  try {
    let ok = true;
    for (const f of familiesOf(cfg, log)) {
      const r = await checkKernel(sock, f, cfg.tableName);
      for (const w of r.warnings) log.warn({ family: r.family }, w);
      if (r.ok) log.info({ family: r.family, ops: r.ops }, 'kernel check passed');
      else { ok = false; log.error({ family: r.family }, r.message); }
    }
    return ok ? 0 : 1;
  } finally {
    sock.close();
  }
}

/** Startup steps of `run` before the first sync: oomScoreAdj, then the kernel probe. Returns false when the kernel lacks a feature. */
async function preflight(cfg: Config, sock: NftSocket, families: IPFamily[], log: Logger): Promise<boolean> {
  const oom = applyOomScoreAdj({ readFile: (p) => readFileSync(p, 'utf8'), writeFile: (p, d) => writeFileSync(p, d) }, cfg.oomScoreAdj);
  if (oom.action === 'not-permitted') log.warn({ oomScoreAdj: cfg.oomScoreAdj }, oom.reason);
  else log.info({ oomScoreAdj: oom.value, previous: oom.previous }, 'oom_score_adj set');
  for (const f of families) {
    const r = await checkKernel(sock, f, cfg.tableName);
    for (const w of r.warnings) log.warn({ family: r.family }, w);
    if (!r.ok) { log.error({ family: r.family }, r.message); return false; }
    log.info({ family: r.family, ops: r.ops }, 'kernel check passed');
  }
  return true;
}

async function cmdInitOnly(cfg: Config, nodeName: string, log: Logger): Promise<number> {
  await conntrackStartup(cfg, nodeName, log);
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
      cleanup: { type: 'boolean' },
      'init-only': { type: 'boolean' },
      'kube-proxy': { type: 'boolean' },
      'hostname-override': { type: 'string' },
      'log-level': { type: 'string', default: 'info' },
    },
  });
  const [first = '', sub] = positionals;
  // kube-proxy's `--cleanup` flag: the cleanup command (also `nftproxy run --cleanup`).
  const cmd = values.cleanup && (first === '' || first === 'run' || first === 'cleanup') ? 'cleanup' : first;
  if (values.version) { process.stdout.write(`nftproxy ${VERSION}\n`); return 0; }
  if (values.help || cmd === '' || cmd === 'help') { process.stdout.write(`${HELP[cmd === 'help' ? '' : cmd] ?? HELP['']}\n`); return cmd === '' && !values.help ? 2 : 0; }
  if (cmd === 'config') {
    if (sub === 'schema') { process.stdout.write(JSON.stringify(configJsonSchema(), null, 2) + '\n'); return 0; }
    if (sub === 'docs') { process.stdout.write(configReferenceMarkdown()); return 0; }
    if (sub === 'validate' && positionals[2]) { loadConfig(positionals[2]); process.stdout.write(`${positionals[2]}: valid\n`); return 0; }
    process.stderr.write(`${HELP.config}\n`);
    return 2;
  }
  if (!['run', 'apply', 'render', 'cleanup', 'check'].includes(cmd)) {
    process.stderr.write(`nftproxy: unknown command ${JSON.stringify(cmd)}\n\n${HELP['']}\n`);
    return 2;
  }
  if (!values.config && (cmd === 'cleanup' || cmd === 'check')) {
    // Both work without a config: the default table name and families.
    const cfg = ConfigSchema.parse({ source: { type: 'file', path: '/dev/null' } });
    const log = makeLogger(values['log-level'] ?? 'info', true);
    return cmd === 'cleanup' ? cmdCleanup(cfg, !!values['kube-proxy'], log) : cmdCheck(cfg, log);
  }
  if (!values.config) { process.stderr.write(`nftproxy ${cmd}: --config FILE is required\n`); return 2; }
  let configText: string;
  try {
    configText = readFileSync(values.config, 'utf8');
  } catch (err) {
    throw new ConfigError(`${values.config}: cannot read the config file: ${(err as Error).message}`);
  }
  const cfg = parseConfig(configText, values.config);
  const nodeName = nodeNameOf(cfg, values['hostname-override']);
  const log = makeLogger(values['log-level'] ?? 'info', cmd !== 'run');
  switch (cmd) {
    case 'render': return cmdRender(cfg, nodeName);
    case 'apply': return cmdApply(cfg, nodeName, log);
    case 'cleanup': return cmdCleanup(cfg, !!values['kube-proxy'], log);
    case 'check': return cmdCheck(cfg, log);
    default: return values['init-only'] ? cmdInitOnly(cfg, nodeName, log) : runAgent(cfg, nodeName, log, {
      configFile: { path: values.config, text: configText },
      preflight: (sock, families) => preflight(cfg, sock, families, log),
    });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main(process.argv.slice(2)).then((code) => process.exit(code), (err: unknown) => {
    process.stderr.write(`nftproxy: ${err instanceof ConfigError ? err.message : (err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  });
}
