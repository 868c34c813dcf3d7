/**
 * Operations scenario (run by e2e/ops.test.ts through runInPrivateWorld): in a node namespace,
 *   1. `nftproxy check` (the kernel probe) and `nftproxy run --init-only` (the conntrack sysctls of the namespace);
 *   2. `nftproxy run`: kernel check logged, oom_score_adj, /livez answers, no probe table left behind;
 *   3. the config watch: an invalid config is reported and the agent keeps running; a valid change makes it exit 0
 *      with the ruleset left in place;
 *   4. `nftproxy --cleanup --kube-proxy` removes kube-proxy's nftables tables, keeps ours and names an iptables-nft
 *      leftover without touching it; then `nftproxy cleanup` removes our ip and ip6 tables and nothing else.
 * Prints one JSON object with what it observed; the test asserts on it. conntrack.maxPerCore is 0, so nothing global
 * to the host (nf_conntrack_max, the hashsize module parameter) is written: only per-namespace sysctls.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { problemsOf, destroyHosts, inNs, poll, preparePrivateWorld, sh, spawnInNs, type Background } from '../netns.ts';

const ROOT = new URL('../../..', import.meta.url).pathname;
const CLI = join(ROOT, 'agent/cli.ts');
const node = process.execPath;
const NS = 'node';
const OTHER = 'other';
const SYSCTL = '/proc/sys/net/netfilter';

preparePrivateWorld();
// Our own /proc (private mount namespace, new PID namespace): pgrep and /proc/PID then see only this world.
sh('mount', ['-t', 'proc', 'proc', '/proc']);
const hosts = [NS, OTHER];
const bg: Background[] = [];
const obs: Record<string, unknown> = {};
const dir = mkdtempSync(join(tmpdir(), 'nftproxy-ops-'));
const tables = () => inNs(NS, 'nft', ['list', 'tables'], { allowFail: true }).trim().split('\n').filter(Boolean).sort();
const sysctls = (ns: string) => Object.fromEntries(['nf_conntrack_tcp_timeout_established', 'nf_conntrack_tcp_timeout_close_wait', 'nf_conntrack_tcp_be_liberal']
  .map((k) => [k, Number(inNs(ns, 'cat', [`${SYSCTL}/${k}`]).trim())]));
const logLines = (b: Background) => b.out.join('').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: number; msg: string; [k: string]: unknown });
/** Replaces the file the way editors and ConfigMap updates do: write a temp file, rename over. */
const replace = (path: string, text: string) => { writeFileSync(`${path}.tmp`, text); renameSync(`${path}.tmp`, path); };

try {
  for (const h of hosts) { sh('ip', ['netns', 'add', h]); inNs(h, 'ip', ['link', 'set', 'lo', 'up']); }
  writeFileSync(join(dir, 'services.json'), readFileSync(join(ROOT, 'deploy/examples/services.json')));
  const baseConfig = {
    ...JSON.parse(readFileSync(join(ROOT, 'deploy/examples/config.json'), 'utf8')),
    ipFamilies: ['IPv4', 'IPv6'], healthzBindAddress: '127.0.0.1:10256', metricsBindAddress: '',
    conntrack: { maxPerCore: 0, tcpEstablishedTimeout: '24h', tcpCloseWaitTimeout: '1h', tcpBeLiberal: false },
  };
  const cfgPath = join(dir, 'config.json');
  writeFileSync(cfgPath, JSON.stringify(baseConfig, null, 2));

  // 1. the kernel probe, then --init-only. The probe's nat chain loads nf_conntrack, so its sysctls exist.
  const check = spawnSyncish(['check', '--config', cfgPath]);
  obs.check = { status: check.status, passed: check.log.filter((l) => l.msg === 'kernel check passed').map((l) => l.family) };
  obs.tablesAfterCheck = tables();
  for (const ns of [NS, OTHER]) {
    inNs(ns, 'sh', ['-c', `echo 1000 > ${SYSCTL}/nf_conntrack_tcp_timeout_established; echo 100 > ${SYSCTL}/nf_conntrack_tcp_timeout_close_wait; echo 1 > ${SYSCTL}/nf_conntrack_tcp_be_liberal`]);
  }
  const init = spawnSyncish(['run', '--init-only', '--config', cfgPath]);
  obs.initOnly = { status: init.status, sysctls: sysctls(NS), other: sysctls(OTHER), tables: tables(), written: init.log.filter((l) => l.action === 'written').length };

  // 2. the agent
  const agent = spawnInNs(NS, node, [CLI, 'run', '--config', cfgPath]);
  bg.push(agent);
  const up = await poll(() => tables().includes('table ip6 nftproxy') && inNs(NS, 'nft', ['list', 'table', 'ip', 'nftproxy'], { allowFail: true }).includes('service-ips'), 15_000, 100);
  obs.agentUp = !!up;
  if (!up) throw new Error(`agent did not program the tables: ${agent.out.join('')}`);
  const livez = inNs(NS, node, ['-e', "fetch('http://127.0.0.1:10256/livez').then(async r=>console.log(r.status, await r.text()),e=>console.log('ERR',e.message))"]).trim();
  obs.livez = livez.split(' ')[0];
  const pids = sh('pgrep', ['-f', `^${node} ${CLI} run --config`], { allowFail: true }).trim().split('\n').filter(Boolean);
  obs.oomScoreAdj = pids.map((p) => Number(readFileSync(`/proc/${p}/oom_score_adj`, 'utf8').trim()));
  obs.tablesRunning = tables();
  // Lowering oom_score_adj needs CAP_SYS_RESOURCE (some sandboxes drop it even for root): then a warning is expected.
  obs.hasSysResource = (BigInt(`0x${/CapEff:\s*([0-9a-f]+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]}`) >> 24n & 1n) === 1n;
  // The agent's output reaches us through a pipe that is read only while the event loop runs (the inNs calls above
  // block it): wait until its startup lines are in.
  await poll(() => logLines(agent).filter((l) => l.msg === 'kernel check passed').length >= 2, 5000, 50);
  obs.oomWarning = logLines(agent).filter((l) => l.level === 40 && /oom_score_adj/.test(l.msg)).map((l) => l.msg)[0] ?? null;
  obs.kernelCheckLogged = logLines(agent).filter((l) => l.msg === 'kernel check passed').map((l) => l.family);

  // 3a. an invalid config: reported, the agent keeps going
  replace(cfgPath, JSON.stringify({ ...baseConfig, nftables: { ...baseConfig.nftables, syncPeriod: 'often' } }));
  const reported = await poll(() => logLines(agent).find((l) => l.msg.includes('not valid; keeping the running config')), 5000, 50);
  obs.invalidReported = reported ? String(reported.err) : null;
  await new Promise((r) => setTimeout(r, 300));
  obs.runningAfterInvalid = agent.child.exitCode === null && agent.child.signalCode === null;
  // 3b. a valid change: exit 0, ruleset left in place
  const changedAt = Date.now();
  replace(cfgPath, JSON.stringify({ ...baseConfig, oomScoreAdj: 500, nftables: { ...baseConfig.nftables, minSyncPeriod: '2s' } }));
  obs.exitAfterChange = await Promise.race([agent.exited, new Promise((r) => setTimeout(() => r('timeout'), 8000))]);
  obs.exitAfterChangeMs = Date.now() - changedAt;
  obs.changeLogged = logLines(agent).some((l) => l.msg.includes('config file changed; exiting'));
  obs.tablesAfterExit = tables();
  obs.agentErrors = problemsOf(agent, /not valid; keeping the running config/).slice(0, 5);

  // 3c. what the supervisor does next: start it again; it runs with the new file (minSyncPeriod 2 s, oomScoreAdj 500,
  // which needs no privilege); SIGTERM then stops it with exit 0 within 5 s and the ruleset in place.
  const again = spawnInNs(NS, node, [CLI, 'run', '--config', cfgPath]);
  bg.push(again);
  const params = await poll(() => logLines(again).find((l) => l.msg === 'NFTables sync params'), 15_000, 100);
  const synced = await poll(() => logLines(again).find((l) => l.msg === 'synced'), 15_000, 100);
  obs.restarted = { minSyncPeriod: params?.minSyncPeriod ?? null, synced: !!synced };
  obs.restartedOom = sh('pgrep', ['-f', `^${node} ${CLI} run --config`], { allowFail: true }).trim().split('\n').filter(Boolean)
    .map((p) => Number(readFileSync(`/proc/${p}/oom_score_adj`, 'utf8').trim()));
  again.child.kill('SIGTERM');
  const termAt = Date.now();
  obs.sigtermExit = await Promise.race([again.exited, new Promise((r) => setTimeout(() => r('timeout'), 8000))]);
  obs.sigtermExitMs = Date.now() - termAt;
  obs.tablesAfterSigterm = tables();

  // 4. cleanup: ours only; then --cleanup --kube-proxy
  inNs(NS, 'nft', ['-f', '-'], { input: [
    'add table ip filter', 'add chain ip filter input { type filter hook input priority 0 ; }',
    'add table ip nat', 'add chain ip nat KUBE-SERVICES', 'add chain ip nat PREROUTING { type nat hook prerouting priority -100 ; }',
    'add table ip kube-proxy', 'add chain ip kube-proxy services',
    'add table ip6 kube-proxy', 'add chain ip6 kube-proxy services',
  ].join('\n') + '\n' });
  const c1 = spawnSyncish(['--cleanup', '--kube-proxy', '--config', cfgPath]);
  obs.cleanupKubeProxy = { status: c1.status, summary: c1.summary, tables: tables() };
  const c2 = spawnSyncish(['cleanup', '--config', cfgPath]);
  obs.cleanup = { status: c2.status, summary: c2.summary, tables: tables() };
} catch (err) {
  obs.error = (err as Error).stack;
} finally {
  for (const b of bg) b.child.kill('SIGKILL');
  destroyHosts(hosts);
  rmSync(dir, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify(obs) + '\n');

/** Runs the CLI in the node namespace to completion: exit status, JSON log lines (stderr), last stdout JSON line. */
function spawnSyncish(args: string[]): { status: number | null; log: Array<Record<string, unknown> & { msg: string }>; summary: unknown } {
  const r = spawnSync('ip', ['netns', 'exec', NS, node, CLI, ...args], { encoding: 'utf8', timeout: 30_000, killSignal: 'SIGKILL' });
  // `run` logs to stdout, the other commands to stderr; the summary is the last stdout JSON line that is not a log line.
  const json = (t: string | null) => (t ?? '').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown> & { msg: string });
  const out = json(r.stdout);
  const log = [...json(r.stderr), ...out].filter((l) => 'level' in l);
  const summary = out.filter((l) => !('level' in l)).pop() ?? null;
  return { status: r.status, log, summary };
}
