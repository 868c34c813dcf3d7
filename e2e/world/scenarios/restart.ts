/**
 * E2E scenario (e2e/restart.test.ts): `nftproxy run` on the lab node with the example services file; while the
 * outside client makes a bounded stream of TCP connections to a ClusterIP, the agent gets SIGTERM (the ruleset
 * stays) and a new agent starts. The new agent must adopt the table: its first sync sends nothing, and the table
 * is never re-created (its kernel handle stays the same). Prints one JSON object.
 */
import { join } from 'node:path';
import { runScenario, LAB, buildLab, poll, preparePrivateWorld, type Background } from '../netns.ts';
import { exampleConfig, NODE, ROOT, logOf, problemsOf, runAsync, startAgent, startPods, stopAgent, waitForTable } from '../agent-lab.ts';

preparePrivateWorld();
const hosts = buildLab();
const bg: Background[] = [];
const obs: Record<string, unknown> = {};
const tableHandle = async () => /table ip nftproxy \{ # handle (\d+)/.exec((await runAsync(LAB.node, 'nft', ['-a', 'list', 'table', 'ip', 'nftproxy'])).stdout)?.[1] ?? null;
await runScenario(obs, bg, hosts, async () => {
  await startPods(bg);
  const configPath = exampleConfig('restart');

  const first = startAgent(configPath);
  bg.push(first);
  obs.firstUp = await waitForTable('service-ips', 15_000);
  if (!obs.firstUp) throw new Error(`agent did not program the table: ${first.out.join('')}`);
  obs.handleBefore = await tableHandle();

  // A bounded stream of connections across the restart (at most 12 s or 4000 connections).
  const stream = runAsync(LAB.client, NODE, [join(ROOT, 'e2e/world/stream.ts'), '10.96.0.10', '80', '9000', '4000'], 30_000);
  await new Promise((r) => setTimeout(r, 1000));
  const t0 = Date.now();
  obs.firstExit = await stopAgent(first);
  obs.tableWhileDown = (await tableHandle()) !== null;
  const second = startAgent(configPath);
  bg.push(second);
  const synced = await poll(() => logOf(second).find((l) => l.msg === 'synced'), 15_000, 20);
  obs.restartToFirstSyncMs = Date.now() - t0;
  obs.secondFirstSync = synced ? { full: synced.full, ops: synced.ops, bytes: synced.bytes } : null;
  obs.adoption = logOf(second).filter((l) => l.adoption !== undefined).map((l) => ({ kind: l.adoption, reason: l.reason, ops: l.ops, compared: l.compared }));
  const s = await stream;
  obs.stream = JSON.parse(s.stdout.trim() || '{}');
  obs.handleAfter = await tableHandle();
  obs.secondLogProblems = problemsOf(second);
  const tStop = Date.now();
  obs.secondExit = await stopAgent(second, 15_000);
  obs.secondExitMs = Date.now() - tStop;
  obs.secondStopLoggedMs = Date.parse(String(logOf(second).find((l) => l.msg === 'stopping; the ruleset stays in place')?.time)) - tStop;
  if (obs.secondExit !== 0) obs.secondLogTail = second.out.join('').split('\n').slice(-8);
});
