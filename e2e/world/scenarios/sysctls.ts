/**
 * E2E scenario (run by e2e/sysctls.test.ts through runInPrivateWorld): `nftproxy run --init-only` and the conntrack
 * sysctls, inside the private world's own network namespace and mount namespace.
 *
 * - The per-namespace values (TCP and UDP timeouts, be_liberal) are set from the config in this namespace.
 * - nf_conntrack_max is global: the kernel makes it read-only (0444) outside the initial namespace.
 * - hashsize is global too, and the kernel refuses writes to it from here; so that the host's is never at stake,
 *   a regular file is bind-mounted over /sys/module/nf_conntrack/parameters/hashsize in this mount namespace, and
 *   the scenario stops unless the bind mount is in place.
 * - Run 2 runs with /proc/sys remounted read-only and the hashsize file read-only: any write attempt would fail
 *   with EROFS and show up as a `read-only` outcome; all values are already right, so none may show up.
 * - Run 3 asks for a different value with /proc/sys still read-only: a warning, exit 0.
 * Prints one JSON object; the test asserts.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { preparePrivateWorld, sh } from '../netns.ts';

const ROOT = new URL('../../..', import.meta.url).pathname;
const CLI = join(ROOT, 'agent/cli.ts');
const NF = '/proc/sys/net/netfilter';
const HASHSIZE = '/sys/module/nf_conntrack/parameters/hashsize';
const obs: Record<string, unknown> = {};

const readNf = () => Object.fromEntries(['nf_conntrack_max', 'nf_conntrack_tcp_timeout_established', 'nf_conntrack_tcp_timeout_close_wait',
  'nf_conntrack_tcp_be_liberal', 'nf_conntrack_udp_timeout', 'nf_conntrack_udp_timeout_stream'].map((n) => [n, Number(readFileSync(`${NF}/${n}`, 'utf8').trim())]));

function initOnly(dir: string, conntrack: Record<string, unknown>) {
  const cfg = join(dir, 'config.json');
  writeFileSync(cfg, JSON.stringify({ ipFamilies: ['IPv4'], healthzBindAddress: '', metricsBindAddress: '', source: { type: 'file', path: join(dir, 'services.json') }, conntrack }));
  const t0 = Date.now();
  const r = spawnSync(process.execPath, [CLI, 'run', '--init-only', '--config', cfg], { encoding: 'utf8', timeout: 30_000 });
  const lines = r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
  return {
    status: r.status, ms: Date.now() - t0, stderr: r.stderr.slice(-1000),
    outcomes: lines.filter((l) => typeof l.action === 'string').map((l) => ({ name: String(l.path).split('/').pop(), action: l.action, previous: l.previous, desired: l.desired, warned: l.warned })),
    warnings: lines.filter((l) => Number(l.level) >= 40).map((l) => String(l.msg)),
  };
}

try {
  preparePrivateWorld();
  const dir = mkdtempSync(join(tmpdir(), 'nftproxy-sysctl-'));
  writeFileSync(join(dir, 'services.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [] }));
  // hashsize: our own file, never the host's.
  const fake = join(dir, 'hashsize');
  writeFileSync(fake, '1024\n');
  sh('mount', ['--bind', fake, HASHSIZE]);
  if (readFileSync(HASHSIZE, 'utf8').trim() !== '1024') throw new Error('the bind mount over hashsize is not in place; stopping');
  // A known start in this namespace.
  const start = { nf_conntrack_tcp_timeout_established: 432000, nf_conntrack_tcp_timeout_close_wait: 60, nf_conntrack_tcp_be_liberal: 0, nf_conntrack_udp_timeout: 30, nf_conntrack_udp_timeout_stream: 120 };
  for (const [k, v] of Object.entries(start)) writeFileSync(`${NF}/${k}`, String(v));
  obs.netnsModeMax = (spawnSync('stat', ['-c', '%a', `${NF}/nf_conntrack_max`], { encoding: 'utf8' }).stdout ?? '').trim();
  obs.before = readNf();

  const conntrack = { maxPerCore: 32768, min: 131072, tcpEstablishedTimeout: '24h', tcpCloseWaitTimeout: '1h', tcpBeLiberal: true, udpTimeout: '45s', udpStreamTimeout: '150s' };
  obs.run1 = initOnly(dir, conntrack);
  obs.after1 = readNf();
  obs.hashsizeFile = readFileSync(fake, 'utf8').trim();

  // Run 2: everything read-only, everything already right.
  sh('mount', ['--bind', '/proc/sys', '/proc/sys']);
  sh('mount', ['-o', 'remount,bind,ro', '/proc/sys']);
  sh('mount', ['-o', 'remount,bind,ro', HASHSIZE]);
  let probe = 'writable';
  try { writeFileSync(`${NF}/nf_conntrack_udp_timeout`, '45'); } catch (e) { probe = (e as NodeJS.ErrnoException).code ?? 'error'; }
  obs.readOnlyProbe = probe;
  obs.run2 = initOnly(dir, conntrack);
  obs.after2 = readNf();

  // Run 3: a value that differs, on a read-only /proc/sys: warning, exit 0, value unchanged.
  obs.run3 = initOnly(dir, { ...conntrack, tcpEstablishedTimeout: '12h' });
  obs.after3 = readNf();
} catch (err) {
  obs.error = (err as Error).stack;
}
process.stdout.write(JSON.stringify(obs) + '\n');
