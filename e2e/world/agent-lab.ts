/**
 * Helpers for the agent e2e scenarios (kube-source, restart, tamper): async commands in lab hosts (the scenarios
 * that run the fake API server in-process must not block their event loop), the echo pods, the agent process and
 * its JSON log, a reachability probe, and a veth that connects the private world's own namespace to the node (the
 * fake API server listens there).
 */
export { logOf, problemsOf } from './netns.ts';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LAB, inNs, poll, sh, spawnInNs, type Background } from './netns.ts';

export const ROOT = new URL('../..', import.meta.url).pathname;
export const CLI = join(ROOT, 'agent/cli.ts');
export const PROBE = join(ROOT, 'e2e/world/probe.ts');
export const ECHO = join(ROOT, 'e2e/world/echo-server.ts');
export const CLIENT = join(ROOT, 'e2e/world/client.ts');
export const NODE = process.execPath;

/** What e2e/world/client.ts reports per connection: the answering pod and the source it saw, or the error. */
export type ConnectResult = { by?: string; src?: string; err?: string; ms?: number };

/** Makes `count` sequential connections from host `ns` with e2e/world/client.ts (blocking; bounded by `timeoutMs` each). */
export function connect(ns: string, proto: 'tcp' | 'udp', host: string, port: number, count: number, timeoutMs = 2000): ConnectResult[] {
  return JSON.parse(inNs(ns, NODE, [CLIENT, proto, host, String(port), String(count), String(timeoutMs)], { timeoutMs: 120_000 }));
}

/** Runs a command in host `ns` without blocking; resolves with exit code and output. */
export function runAsync(ns: string, cmd: string, args: string[], timeoutMs = 60_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('ip', ['netns', 'exec', ns, cmd, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    child.stdout.on('data', (d: Buffer) => { stdout += d.toString(); });
    child.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
    const t = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('exit', (code) => { clearTimeout(t); resolve({ code, stdout, stderr }); });
  });
}

/** Starts the echo servers in the three pods (TCP/UDP 8080) and waits until each answers from the node. */
export async function startPods(bg: Background[]): Promise<void> {
  for (const p of LAB.pods) bg.push(spawnInNs(p.ns, NODE, [ECHO, p.ns, '8080']));
  for (const p of LAB.pods) {
    const ok = await poll(async () => (await probe(LAB.node, p.ip, 8080, 'reach', [p.ns], 3000)).ok, 10_000, 100);
    if (!ok) throw new Error(`echo server in ${p.ns} did not come up`);
  }
}

/** The result of {@link probe}: whether the condition held within the timeout, after how many ms and tries. */
export interface ProbeResult { ok: boolean; ms: number; tries: number; last: string[] }

/**
 * Connects from `ns` to HOST:PORT over TCP (250 ms timeout per try) until:
 * - 'reach': an answer comes from one of `names`;
 * - 'only': 12 answers in a row all come from `names` (and every name answered at least once);
 * - 'gone': a connection fails (refused or timed out).
 */
export async function probe(ns: string, host: string, port: number, mode: 'reach' | 'only' | 'gone', names: string[], timeoutMs: number): Promise<ProbeResult> {
  const r = await runAsync(ns, NODE, [PROBE, host, String(port), mode, names.join(',') || '-', String(timeoutMs)], timeoutMs + 10_000);
  try {
    return JSON.parse(r.stdout.trim().split('\n').pop()!);
  } catch {
    return { ok: false, ms: -1, tries: 0, last: [`probe failed: ${r.stderr}`] };
  }
}

/** TCP connections from `ns` (client.ts): the answering pod of each, or `error:CODE`. */
export async function answers(ns: string, host: string, port: number, count: number): Promise<string[]> {
  const r = await runAsync(ns, NODE, [CLIENT, 'tcp', host, String(port), String(count), '1000']);
  return (JSON.parse(r.stdout) as Array<{ by?: string; err?: string }>).map((x) => x.by ?? `error:${x.err}`);
}

/**
 * A temp folder with the example services file and the example config (health and metrics servers off unless
 * `overrides` sets them); returns the config's path.
 */
export function exampleConfig(prefix: string, overrides: Record<string, unknown> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), `nftproxy-${prefix}-`));
  writeFileSync(join(dir, 'services.json'), readFileSync(join(ROOT, 'deploy/examples/services.json')));
  const config = { ...JSON.parse(readFileSync(join(ROOT, 'deploy/examples/config.json'), 'utf8')), healthzBindAddress: '', metricsBindAddress: '', ...overrides };
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  return join(dir, 'config.json');
}

/** Starts `nftproxy run` in the node. */
export function startAgent(configPath: string, env: NodeJS.ProcessEnv = {}): Background {
  return spawnInNs(LAB.node, NODE, [CLI, 'run', '--config', configPath], { ...process.env, ...env });
}

/** Waits until `nft list table ip nftproxy` in the node shows `needle`; true when it did within `timeoutMs`. */
export async function waitForTable(needle: string, timeoutMs: number): Promise<boolean> {
  return !!(await poll(async () => (await runAsync(LAB.node, 'nft', ['list', 'table', 'ip', 'nftproxy'])).stdout.includes(needle), timeoutMs, 100));
}

/** Sends SIGTERM and waits (up to `waitMs`, default 6 s) for the exit code. */
export async function stopAgent(agent: Background, waitMs = 6000): Promise<number | null | 'timeout'> {
  agent.child.kill('SIGTERM');
  return Promise.race([agent.exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), waitMs))]);
}

/** A veth between the private world's own namespace (172.30.0.1) and the node (172.30.0.2). */
export const API_LINK = { worldIP: '172.30.0.1', nodeIP: '172.30.0.2' } as const;
export function linkWorldToNode(): void {
  sh('ip', ['link', 'add', 'api-world', 'type', 'veth', 'peer', 'name', 'api0', 'netns', LAB.node]);
  sh('ip', ['addr', 'add', `${API_LINK.worldIP}/30`, 'dev', 'api-world']);
  sh('ip', ['link', 'set', 'api-world', 'up']);
  inNs(LAB.node, 'ip', ['addr', 'add', `${API_LINK.nodeIP}/30`, 'dev', 'api0']);
  inNs(LAB.node, 'ip', ['link', 'set', 'api0', 'up']);
}
