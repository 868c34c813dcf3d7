/**
 * `npm run demo`: the main job on deploy/examples, with nothing else to set up.
 *
 * In a private world (network, mount and PID namespaces: nothing touches the host, and everything is gone when
 * the demo ends, even on Ctrl-C) it builds a node with a pod bridge, three pods running echo servers, an outside
 * client and an uplink; runs `nftproxy run` on the node; sends traffic to the example Services from the node,
 * from a pod and from the client; and prints which endpoint answered each connection and the source it saw.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LAB, PRIVATE_WORLD_ENV, buildLab, destroyHosts, inNs, namespacesUnavailable, poll, preparePrivateWorld, spawnInNs, worldArgs, type Background } from './world/netns.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const node = process.execPath;

if (process.env[PRIVATE_WORLD_ENV] !== '1') {
  const why = namespacesUnavailable();
  if (why) {
    process.stderr.write(`The demo needs network namespaces (root, or unprivileged user namespaces) and iproute2 + nftables: ${why}\n`);
    process.exit(1);
  }
  const child = spawn('unshare', [...worldArgs(), node, new URL(import.meta.url).pathname], { stdio: 'inherit', env: { ...process.env, [PRIVATE_WORLD_ENV]: '1' } });
  for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(s, () => child.kill(s));
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 130 : 1)));
} else {
  await inside();
}

type Result = { by?: string; src?: string; err?: string; ms?: number };

function traffic(ns: string, proto: 'tcp' | 'udp', host: string, port: number, count: number): Result[] {
  return JSON.parse(inNs(ns, node, [join(ROOT, 'e2e/world/client.ts'), proto, host, String(port), String(count), '2000'], { timeoutMs: 120_000 }));
}

function table(title: string, rs: Result[]): void {
  const rows = new Map<string, number>();
  for (const r of rs) {
    const key = r.by ? `${r.by.padEnd(8)} saw source ${r.src}` : `error ${r.err} after ${r.ms} ms`;
    rows.set(key, (rows.get(key) ?? 0) + 1);
  }
  process.stdout.write(`\n  ${title}\n`);
  for (const [k, n] of [...rows].sort()) process.stdout.write(`    ${String(n).padStart(3)} × ${k}\n`);
}

async function inside(): Promise<void> {
  preparePrivateWorld();
  let hosts: string[] = [];
  const bg: Background[] = [];
  let cleaned = false;
  const cleanup = () => {
    if (cleaned) return;
    cleaned = true;
    for (const b of bg) b.child.kill('SIGKILL');
    destroyHosts(hosts);
  };
  for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(s, () => { cleanup(); process.stdout.write('\ninterrupted: everything removed\n'); process.exit(130); });
  try {
    process.stdout.write('nftproxy demo: building the lab (node + bridge cni0, pods pod-a/b/c, client, uplink) in private namespaces\n');
    hosts = buildLab();
    for (const p of LAB.pods) bg.push(spawnInNs(p.ns, node, [join(ROOT, 'e2e/world/echo-server.ts'), p.ns, '8080,5353']));
    const dir = mkdtempSync(join(tmpdir(), 'nftproxy-demo-'));
    writeFileSync(join(dir, 'services.json'), readFileSync(join(ROOT, 'deploy/examples/services.json')));
    const config = { ...JSON.parse(readFileSync(join(ROOT, 'deploy/examples/config.json'), 'utf8')), healthzBindAddress: '', metricsBindAddress: '' };
    writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
    for (const p of LAB.pods) {
      await poll(() => inNs(LAB.node, node, [join(ROOT, 'e2e/world/client.ts'), 'tcp', p.ip, '8080', '1', '300'], { allowFail: true }).includes(p.ns), 10_000, 100);
    }
    process.stdout.write('starting: nftproxy run --config deploy/examples/config.json (on the node)\n');
    const agent = spawnInNs(LAB.node, node, [join(ROOT, 'agent/cli.ts'), 'run', '--config', join(dir, 'config.json')]);
    bg.push(agent);
    const up = await poll(() => inNs(LAB.node, 'nft', ['list', 'table', 'ip', 'nftproxy'], { allowFail: true }).includes('service-ips'), 15_000, 100);
    if (!up) throw new Error(`the agent did not program its table:\n${agent.out.join('')}`);
    const synced = await poll(() => agent.out.join('').split('\n').find((l) => l.includes('"msg":"synced"')), 3000);
    if (synced) {
      const s = JSON.parse(synced);
      process.stdout.write(`synced over netlink: ${s.ops} operations, ${s.bytes} bytes, kernel ${s.kernelMs} ms\n`);
    }
    process.stdout.write('\nService default/web  ClusterIP 10.96.0.10:80/TCP -> pod-a, pod-b, pod-c :8080\n');
    table('30 connections from the node itself (masqueraded: the node is outside the cluster CIDR)', traffic(LAB.node, 'tcp', '10.96.0.10', 80, 30));
    table('30 connections from pod-a (source unchanged; back to itself = hairpin, masqueraded)', traffic('pod-a', 'tcp', '10.96.0.10', 80, 30));
    table('30 connections from the outside client 192.168.50.2 (masqueraded)', traffic(LAB.client, 'tcp', '10.96.0.10', 80, 30));
    process.stdout.write('\nService default/dns  ClusterIP 10.96.0.20:53/UDP -> pod-a, pod-b :5353\n');
    table('10 UDP requests from the client', traffic(LAB.client, 'udp', '10.96.0.20', 53, 10));
    process.stdout.write('\nService default/empty  ClusterIP 10.96.0.30:80/TCP, no endpoints\n');
    table('3 connections from the client (rejected at once, not a timeout)', traffic(LAB.client, 'tcp', '10.96.0.30', 80, 3));
    process.stdout.write('\nUndefined port 10.96.0.10:81 on an active ClusterIP\n');
    table('3 connections from the client', traffic(LAB.client, 'tcp', '10.96.0.10', 81, 3));
    process.stdout.write('\nThe web Service chain in the kernel (nft list chain ip nftproxy ...):\n');
    process.stdout.write(inNs(LAB.node, 'nft', ['list', 'chain', 'ip', 'nftproxy', 'service-SUSTUHLJ-default/web/tcp/http']).replace(/^/gm, '    '));
    process.stdout.write('\nand the endpoint map it draws from (nft list map ip nftproxy endpoint-map-0):\n');
    process.stdout.write(inNs(LAB.node, 'nft', ['list', 'map', 'ip', 'nftproxy', 'endpoint-map-0']).replace(/^/gm, '    '));
    agent.child.kill('SIGTERM');
    await agent.exited;
    process.stdout.write('\nagent stopped with SIGTERM (its ruleset stays); removing the lab\n');
  } finally {
    cleanup();
  }
  process.stdout.write('done: every namespace is gone\n');
}
