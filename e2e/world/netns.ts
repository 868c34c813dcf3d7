/**
 * Network-namespace test hosts for e2e tests and the demo.
 *
 * Everything runs inside a PRIVATE world: `runInPrivateWorld()` executes a script under
 * `unshare --net --mount --pid --fork --kill-child` (root) or with `--user --map-root-user` added (rootless); the
 * script calls `preparePrivateWorld()`, which mounts a tmpfs on /run there, and creates the hosts with
 * `ip netns add`. The hosts are bind mounts in that private /run and the script is PID 1 of its PID namespace: when
 * it exits (even on SIGKILL) every process it started dies and every host is gone. The host's own ruleset, routes
 * and interfaces are never touched. `destroyHosts()` also deletes them explicitly.
 */
import { spawn, spawnSync, type ChildProcess, type SpawnSyncReturns } from 'node:child_process';

/** Set in the environment of the re-executed script, so it knows it is inside the private world. */
export const PRIVATE_WORLD_ENV = 'NFTPROXY_PRIVATE_WORLD';

const isRoot = () => process.getuid?.() === 0;
/** The unshare arguments of the private world. */
export function worldArgs(): string[] {
  const base = ['--net', '--mount', '--propagation', 'private', '--pid', '--fork', '--kill-child'];
  return isRoot() ? base : ['--user', '--map-root-user', ...base];
}

/** Why namespaces cannot be used here, or null when they can. */
export function namespacesUnavailable(): string | null {
  const r = spawnSync('unshare', [...worldArgs(), 'true'], { encoding: 'utf8' });
  if (r.error) return `unshare: ${r.error.message}`;
  if (r.status !== 0) return `unshare ${worldArgs().join(' ')} failed: ${r.stderr.trim()}`;
  if (spawnSync('ip', ['-V']).error) return 'iproute2 (ip) is not installed';
  if (spawnSync('nft', ['--version']).error) return 'nftables (nft) is not installed';
  return null;
}

/**
 * Runs `script` (a .ts file) with `args` inside the private world and returns its result; `timeoutMs` kills it
 * (and so its whole world).
 */
export function runInPrivateWorld(script: string, args: string[], timeoutMs: number): SpawnSyncReturns<string> {
  return spawnSync('unshare', [...worldArgs(), process.execPath, script, ...args], {
    encoding: 'utf8', timeout: timeoutMs, killSignal: 'SIGKILL', env: { ...process.env, [PRIVATE_WORLD_ENV]: '1' },
    maxBuffer: 64 << 20,
  });
}

/**
 * Why the e2e tests of `file` must be skipped, or false. The reason is printed as a TAP comment. In CI (`CI` set)
 * it throws instead: CI must run the e2e tests.
 */
export function e2eSkip(file: string): string | false {
  const why = namespacesUnavailable();
  if (why && process.env.CI) throw new Error(`CI must run the e2e tests, but: ${why}`);
  if (why) console.log(`# SKIP ${file}: ${why}`);
  return why ?? false;
}

/**
 * Runs a scenario script (it prints one JSON object as its last line) in the private world and returns that object.
 * @throws Error (failing the test) when the script exited non-zero or its object carries an `error`.
 */
export function scenarioResult(script: URL, args: string[], timeoutMs: number): any {
  const r = runInPrivateWorld(script.pathname, args, timeoutMs);
  if (r.status !== 0) throw new Error(`scenario exited ${r.status}: ${r.stderr}`);
  const o = JSON.parse(r.stdout.trim().split('\n').pop()!);
  if (o.error !== undefined) throw new Error(`scenario failed: ${o.error}`);
  return o;
}

/**
 * Runs a scenario's body inside the private world: an error is recorded as `obs.error`; then every background
 * process is killed and every host deleted, `obs` is printed as the last stdout line (what scenarioResult() reads),
 * and the process exits 0 without waiting for the killed children's pipes.
 */
export async function runScenario(obs: Record<string, unknown>, bg: Background[], hosts: string[], body: () => Promise<void>): Promise<never> {
  try {
    await body();
  } catch (err) {
    obs.error = (err as Error).stack;
  } finally {
    for (const b of bg) b.child.kill('SIGKILL');
    destroyHosts(hosts);
  }
  process.stdout.write(JSON.stringify(obs) + '\n');
  process.exit(0);
}

/** Inside the private world: a private tmpfs on /run so `ip netns add` works and leaves nothing behind. */
export function preparePrivateWorld(): void {
  if (process.env[PRIVATE_WORLD_ENV] !== '1') throw new Error('not inside the private world: use runInPrivateWorld()');
  sh('mount', ['-t', 'tmpfs', 'tmpfs', '/run']);
  sh('mkdir', ['-p', '/run/netns']);
  sh('ip', ['link', 'set', 'lo', 'up']);
}

/** Runs a command synchronously; throws with its stderr when it fails. */
export function sh(cmd: string, args: string[], opts: { input?: string; allowFail?: boolean; timeoutMs?: number } = {}): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', input: opts.input, timeout: opts.timeoutMs ?? 30_000, maxBuffer: 64 << 20 });
  if ((r.status !== 0 || r.error) && !opts.allowFail) {
    throw new Error(`${cmd} ${args.join(' ')} failed (${r.status ?? r.error?.message}): ${r.stderr?.trim()}`);
  }
  return r.stdout ?? '';
}

/** Runs a command in host `ns`. */
export function inNs(ns: string, cmd: string, args: string[], opts: { input?: string; allowFail?: boolean; timeoutMs?: number } = {}): string {
  return sh('ip', ['netns', 'exec', ns, cmd, ...args], opts);
}

/** A long-running command in a host; its output is collected in `out`. */
export interface Background { child: ChildProcess; out: string[]; exited: Promise<number | null> }

/** The JSON (pino) lines a background process printed, parsed; other lines are left out. */
export function logOf(b: Background): Array<Record<string, unknown>> {
  return b.out.join('').split('\n').flatMap((l) => {
    try { return [JSON.parse(l) as Record<string, unknown>]; } catch { return []; }
  });
}

/**
 * The messages of an agent's warnings and errors (pino level >= 40), less the ones this sandbox makes expected:
 * oom_score_adj -999 needs CAP_SYS_RESOURCE, which some sandboxes drop even for root. `ignore` drops more.
 */
export function problemsOf(b: Background, ignore?: RegExp): string[] {
  return logOf(b).map((l) => ({ level: Number(l.level), msg: String(l.msg) }))
    .filter((l) => l.level >= 40 && !/oom_score_adj/.test(l.msg) && !(ignore?.test(l.msg) ?? false)).map((l) => l.msg);
}

/** Starts a long-running command in host `ns`. */
export function spawnInNs(ns: string, cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): Background {
  const child = spawn('ip', ['netns', 'exec', ns, cmd, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  const out: string[] = [];
  child.stdout!.on('data', (d: Buffer) => out.push(d.toString()));
  child.stderr!.on('data', (d: Buffer) => out.push(d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, out, exited };
}

/** The standard lab: a node with a pod bridge, three pods, an outside client and an uplink. */
export const LAB = {
  node: 'node', client: 'client', uplink: 'uplink',
  pods: [
    { ns: 'pod-a', ip: '10.244.1.10' },
    { ns: 'pod-b', ip: '10.244.1.11' },
    { ns: 'pod-c', ip: '10.244.1.12' },
  ],
  bridgeIP: '10.244.1.1',
  clientIP: '192.168.50.2', nodeClientSideIP: '192.168.50.1',
  uplinkIP: '172.31.0.2', nodeUplinkIP: '172.31.0.1',
  serviceCIDR: '10.96.0.0/16',
} as const;

/**
 * Builds the lab. The pods hang off bridge `cni0` in the node, as the standard bridge CNI sets it up: hairpin mode
 * on every port and `net.bridge.bridge-nf-call-iptables=1` (without them the kernel drops a pod's hairpin
 * connection to itself through a Service). The node's default route goes through its own uplink host, not through
 * the client: otherwise the node would answer the client with ICMP redirects, and their rate limit would swallow
 * the reject errors. Returns the names of the hosts it made.
 */
export function buildLab(): string[] {
  const hosts = [LAB.node, LAB.client, LAB.uplink, ...LAB.pods.map((p) => p.ns)];
  for (const h of hosts) {
    sh('ip', ['netns', 'add', h]);
    inNs(h, 'ip', ['link', 'set', 'lo', 'up']);
  }
  const n = LAB.node;
  inNs(n, 'sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
  inNs(n, 'ip', ['link', 'add', 'cni0', 'type', 'bridge']);
  inNs(n, 'ip', ['addr', 'add', `${LAB.bridgeIP}/24`, 'dev', 'cni0']);
  inNs(n, 'ip', ['link', 'set', 'cni0', 'up']);
  if (inNs(n, 'sh', ['-c', 'test -e /proc/sys/net/bridge/bridge-nf-call-iptables && echo yes'], { allowFail: true }).trim() !== 'yes') {
    sh('modprobe', ['br_netfilter'], { allowFail: true });
  }
  inNs(n, 'sysctl', ['-qw', 'net.bridge.bridge-nf-call-iptables=1']);
  for (const [i, p] of LAB.pods.entries()) {
    const host = `veth-p${i}`;
    inNs(n, 'ip', ['link', 'add', host, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', p.ns]);
    inNs(n, 'ip', ['link', 'set', host, 'master', 'cni0']);
    inNs(n, 'ip', ['link', 'set', host, 'type', 'bridge_slave', 'hairpin', 'on']);
    inNs(n, 'ip', ['link', 'set', host, 'up']);
    inNs(p.ns, 'ip', ['addr', 'add', `${p.ip}/24`, 'dev', 'eth0']);
    inNs(p.ns, 'ip', ['link', 'set', 'eth0', 'up']);
    inNs(p.ns, 'ip', ['route', 'add', 'default', 'via', LAB.bridgeIP]);
  }
  inNs(n, 'ip', ['link', 'add', 'eth-client', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', LAB.client]);
  inNs(n, 'ip', ['addr', 'add', `${LAB.nodeClientSideIP}/24`, 'dev', 'eth-client']);
  inNs(n, 'ip', ['link', 'set', 'eth-client', 'up']);
  inNs(LAB.client, 'ip', ['addr', 'add', `${LAB.clientIP}/24`, 'dev', 'eth0']);
  inNs(LAB.client, 'ip', ['link', 'set', 'eth0', 'up']);
  inNs(LAB.client, 'ip', ['route', 'add', LAB.serviceCIDR, 'via', LAB.nodeClientSideIP]);
  inNs(n, 'ip', ['link', 'add', 'eth-uplink', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', LAB.uplink]);
  inNs(n, 'ip', ['addr', 'add', `${LAB.nodeUplinkIP}/24`, 'dev', 'eth-uplink']);
  inNs(n, 'ip', ['link', 'set', 'eth-uplink', 'up']);
  inNs(LAB.uplink, 'ip', ['addr', 'add', `${LAB.uplinkIP}/24`, 'dev', 'eth0']);
  inNs(LAB.uplink, 'ip', ['link', 'set', 'eth0', 'up']);
  inNs(n, 'ip', ['route', 'add', 'default', 'via', LAB.uplinkIP]);
  return hosts;
}

/** Deletes hosts (errors ignored: this runs in finally blocks and signal handlers). */
export function destroyHosts(hosts: readonly string[]): void {
  for (const h of hosts) spawnSync('ip', ['netns', 'del', h]);
}

/** Polls `fn` every `everyMs` until it returns a truthy value or `timeoutMs` passes; returns the value or null. */
export async function poll<T>(fn: () => T | Promise<T>, timeoutMs: number, everyMs = 50): Promise<T | null> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() >= end) return null;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** IPv6 addresses of the lab (added by {@link addLabIPv6}); the prefixes mirror the IPv4 ones. */
export const LAB6 = {
  pods: { 'pod-a': 'fd00:10:244:1::10', 'pod-b': 'fd00:10:244:1::11', 'pod-c': 'fd00:10:244:1::12' } as Record<string, string>,
  bridgeIP: 'fd00:10:244:1::1',
  clientIP: 'fd00:192:168:50::2', nodeClientSideIP: 'fd00:192:168:50::1',
  uplinkIP: 'fd00:172:31::2', nodeUplinkIP: 'fd00:172:31::1',
  serviceCIDR: 'fd00:10:96::/112',
} as const;

/**
 * Adds IPv6 to a lab built by {@link buildLab}: the same topology with the LAB6 addresses (`nodad`, so they are
 * usable at once), forwarding on the node, default routes for the pods and the node, and the client's route to
 * the IPv6 service CIDR. `extraClientRoutes` (either family) are routed from the client via the node, e.g. LB IPs.
 */
export function addLabIPv6(extraClientRoutes: readonly string[] = []): void {
  const n = LAB.node;
  inNs(n, 'sysctl', ['-qw', 'net.ipv6.conf.all.forwarding=1']);
  inNs(n, 'sysctl', ['-qw', 'net.bridge.bridge-nf-call-ip6tables=1'], { allowFail: true });
  inNs(n, 'ip', ['-6', 'addr', 'add', `${LAB6.bridgeIP}/64`, 'dev', 'cni0', 'nodad']);
  for (const p of LAB.pods) {
    inNs(p.ns, 'ip', ['-6', 'addr', 'add', `${LAB6.pods[p.ns]}/64`, 'dev', 'eth0', 'nodad']);
    inNs(p.ns, 'ip', ['-6', 'route', 'add', 'default', 'via', LAB6.bridgeIP]);
  }
  inNs(n, 'ip', ['-6', 'addr', 'add', `${LAB6.nodeClientSideIP}/64`, 'dev', 'eth-client', 'nodad']);
  inNs(LAB.client, 'ip', ['-6', 'addr', 'add', `${LAB6.clientIP}/64`, 'dev', 'eth0', 'nodad']);
  inNs(LAB.client, 'ip', ['-6', 'route', 'add', LAB6.serviceCIDR, 'via', LAB6.nodeClientSideIP]);
  inNs(n, 'ip', ['-6', 'addr', 'add', `${LAB6.nodeUplinkIP}/64`, 'dev', 'eth-uplink', 'nodad']);
  inNs(LAB.uplink, 'ip', ['-6', 'addr', 'add', `${LAB6.uplinkIP}/64`, 'dev', 'eth0', 'nodad']);
  inNs(n, 'ip', ['-6', 'route', 'add', 'default', 'via', LAB6.uplinkIP]);
  for (const r of extraClientRoutes) {
    const v6 = r.includes(':');
    inNs(LAB.client, 'ip', [v6 ? '-6' : '-4', 'route', 'add', r, 'via', v6 ? LAB6.nodeClientSideIP : LAB.nodeClientSideIP]);
  }
}

/**
 * Adds one more pod on the node's bridge (after {@link buildLab}), with an IPv4 and optionally an IPv6 address.
 * Returns the host name (also to be passed to destroyHosts).
 */
export function addLabPod(ns: string, ip: string, ip6?: string): string {
  sh('ip', ['netns', 'add', ns]);
  inNs(ns, 'ip', ['link', 'set', 'lo', 'up']);
  const host = `veth-${ns}`.slice(0, 15);
  inNs(LAB.node, 'ip', ['link', 'add', host, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
  inNs(LAB.node, 'ip', ['link', 'set', host, 'master', 'cni0']);
  inNs(LAB.node, 'ip', ['link', 'set', host, 'type', 'bridge_slave', 'hairpin', 'on']);
  inNs(LAB.node, 'ip', ['link', 'set', host, 'up']);
  inNs(ns, 'ip', ['addr', 'add', `${ip}/24`, 'dev', 'eth0']);
  inNs(ns, 'ip', ['link', 'set', 'eth0', 'up']);
  inNs(ns, 'ip', ['route', 'add', 'default', 'via', LAB.bridgeIP]);
  if (ip6) {
    inNs(ns, 'ip', ['-6', 'addr', 'add', `${ip6}/64`, 'dev', 'eth0', 'nodad']);
    inNs(ns, 'ip', ['-6', 'route', 'add', 'default', 'via', LAB6.bridgeIP]);
  }
  return ns;
}
