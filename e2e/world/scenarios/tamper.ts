/**
 * E2E scenario (e2e/tamper.test.ts): `nftproxy run` on the lab node with the example services file; someone else
 * deletes our table with `nft delete table`, later flushes one of our chains with `nft flush chain`. The agent
 * hears it on NFNLGRP_NFTABLES and repairs with a full sync. Measures when the ruleset and real connections are
 * back. Prints one JSON object.
 */
import { runScenario, LAB, buildLab, poll, preparePrivateWorld, type Background } from '../netns.ts';
import { exampleConfig, logOf, probe, runAsync, startAgent, startPods, stopAgent, waitForTable } from '../agent-lab.ts';

const WEB_CHAIN = 'service-SUSTUHLJ-default/web/tcp/http';
preparePrivateWorld();
const hosts = buildLab();
const bg: Background[] = [];
const obs: Record<string, unknown> = {};
const nft = (...args: string[]) => runAsync(LAB.node, 'nft', args);
await runScenario(obs, bg, hosts, async () => {
  await startPods(bg);
  const configPath = exampleConfig('tamper');
  const agent = startAgent(configPath);
  bg.push(agent);
  obs.agentUp = await waitForTable('service-ips', 15_000);
  if (!obs.agentUp) throw new Error(`agent did not program the table: ${agent.out.join('')}`);
  // Quiet period: the agent's own syncs must not look like tampering.
  await new Promise((r) => setTimeout(r, 2500));
  const synced = () => logOf(agent).filter((l) => l.msg === 'synced');
  obs.syncsBeforeTamper = synced().length;
  obs.tamperLogsBefore = logOf(agent).filter((l) => String(l.msg).startsWith('our table was changed')).length;

  // 1. nft delete table ip nftproxy
  let t0 = Date.now();
  obs.deleteTable = (await nft('delete', 'table', 'ip', 'nftproxy')).code;
  const back = await poll(async () => (await nft('list', 'chain', 'ip', 'nftproxy', WEB_CHAIN)).stdout.includes('numgen'), 10_000, 20);
  obs.tableBackMs = back ? Date.now() - t0 : null;
  obs.afterDelete = await probe(LAB.client, '10.96.0.10', 80, 'only', ['pod-a', 'pod-b', 'pod-c'], 5000);
  obs.afterDeleteSync = synced().slice(-1).map((l) => ({ full: l.full }))[0];

  // 2. nft flush chain of one of our chains, after the quiet minSyncPeriod.
  await new Promise((r) => setTimeout(r, 1500));
  t0 = Date.now();
  obs.flushChain = (await nft('flush', 'chain', 'ip', 'nftproxy', WEB_CHAIN)).code;
  const refilled = await poll(async () => (await nft('list', 'chain', 'ip', 'nftproxy', WEB_CHAIN)).stdout.includes('numgen'), 10_000, 20);
  obs.chainBackMs = refilled ? Date.now() - t0 : null;
  obs.afterFlush = await probe(LAB.client, '10.96.0.10', 80, 'only', ['pod-a', 'pod-b', 'pod-c'], 5000);

  // No repair loop: our own repair syncs do not trigger more repairs.
  await new Promise((r) => setTimeout(r, 2500));
  const n1 = synced().length;
  await new Promise((r) => setTimeout(r, 2000));
  obs.syncsInQuietAfter = synced().length - n1;
  obs.tamperLogs = logOf(agent).filter((l) => String(l.msg).startsWith('our table was changed')).map((l) => ({ by: l.by, changes: l.changes }));
  obs.problems = logOf(agent).filter((l) => (l.level as number) >= 50).map((l) => l.msg);
  obs.agentExit = await stopAgent(agent);
});
