/**
 * E2E scenario (run by traffic.test.ts through runInPrivateWorld): the lab, echo servers in three pods, and
 * `nftproxy run` on the node with the example services file. It makes real TCP and UDP connections and prints one
 * JSON object with what it observed; the test asserts on it.
 */
import { mkdtempSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runScenario, problemsOf, LAB, buildLab, inNs, poll, preparePrivateWorld, spawnInNs, type Background } from '../netns.ts';
import { CLI, ECHO, NODE, ROOT, connect } from '../agent-lab.ts';


preparePrivateWorld();
const hosts = buildLab();
const bg: Background[] = [];
const obs: Record<string, unknown> = {};
await runScenario(obs, bg, hosts, async () => {
  for (const p of LAB.pods) bg.push(spawnInNs(p.ns, NODE, [ECHO, p.ns, '8080,5353']));
  const dir = mkdtempSync(join(tmpdir(), 'nftproxy-e2e-'));
  const services = JSON.parse(readFileSync(join(ROOT, 'deploy/examples/services.json'), 'utf8'));
  writeFileSync(join(dir, 'services.json'), JSON.stringify(services));
  const config = { ...JSON.parse(readFileSync(join(ROOT, 'deploy/examples/config.json'), 'utf8')), healthzBindAddress: '', metricsBindAddress: '' };
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  // Pods must answer before the agent matters.
  for (const p of LAB.pods) {
    const ok = await poll(() => { const r = connect(LAB.node, 'tcp', p.ip, 8080, 1, 500)[0]; return r.by === p.ns; }, 10_000, 100);
    if (!ok) throw new Error(`echo server in ${p.ns} did not come up`);
  }
  const agent = spawnInNs(LAB.node, NODE, [CLI, 'run', '--config', join(dir, 'config.json')]);
  bg.push(agent);
  const up = await poll(() => inNs(LAB.node, 'nft', ['list', 'table', 'ip', 'nftproxy'], { allowFail: true }).includes('service-ips'), 15_000, 100);
  obs.agentUp = !!up;
  if (!up) throw new Error(`agent did not program the table: ${agent.out.join('')}`);

  obs.fromNode = connect(LAB.node, 'tcp', '10.96.0.10', 80, 60);
  obs.fromClient = connect(LAB.client, 'tcp', '10.96.0.10', 80, 60);
  obs.fromPodA = connect('pod-a', 'tcp', '10.96.0.10', 80, 60);
  obs.udpFromClient = connect(LAB.client, 'udp', '10.96.0.20', 53, 40);
  obs.noEndpoints = [...connect(LAB.client, 'tcp', '10.96.0.30', 80, 3), ...connect(LAB.node, 'tcp', '10.96.0.30', 80, 3)];
  obs.undefinedPort = [...connect(LAB.client, 'tcp', '10.96.0.10', 81, 3), ...connect(LAB.node, 'tcp', '10.96.0.10', 81, 3)];

  // Remove pod-c from the web slice, the way an editor would replace the file.
  const slice = services.items.find((i: { kind: string; metadata: { name: string } }) => i.kind === 'EndpointSlice' && i.metadata.name === 'web-abc12');
  slice.endpoints = slice.endpoints.filter((e: { addresses: string[] }) => e.addresses[0] !== '10.244.1.12');
  writeFileSync(join(dir, 'services.json.tmp'), JSON.stringify(services));
  const changedAt = Date.now();
  renameSync(join(dir, 'services.json.tmp'), join(dir, 'services.json'));
  // Endpoints live in the shared endpoint map (rules/endpoint-select.ts), not in the service chain.
  const gone = await poll(() => !inNs(LAB.node, 'nft', ['list', 'table', 'ip', 'nftproxy']).includes('10.244.1.12'), 5000, 20);
  obs.removalMs = gone ? Date.now() - changedAt : null;
  obs.afterRemoval = connect(LAB.client, 'tcp', '10.96.0.10', 80, 40);

  agent.child.kill('SIGTERM');
  const t0 = Date.now();
  obs.agentExit = await Promise.race([agent.exited, new Promise((r) => setTimeout(() => r('timeout'), 6000))]);
  obs.agentExitMs = Date.now() - t0;
  obs.tableAfterExit = inNs(LAB.node, 'nft', ['list', 'table', 'ip', 'nftproxy'], { allowFail: true }).includes('service-ips');
  obs.agentLog = problemsOf(agent).slice(0, 5);
});
