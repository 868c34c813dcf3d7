/**
 * E2E scenario (run by e2e/kube-source.test.ts through runInPrivateWorld): the lab, echo servers in three pods,
 * the fake Kubernetes API server in the private world's own namespace (reached from the node over a veth), and
 * `nftproxy run` on the node with `source.type = kubernetes` and a kubeconfig with a bearer token. It changes
 * Services and EndpointSlices through the API and measures, with real TCP connections, when the change took effect.
 * Prints one JSON object; the test asserts.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LAB, buildLab, destroyHosts, poll, preparePrivateWorld, type Background } from '../netns.ts';
import { API_LINK, CLI, NODE, answers, linkWorldToNode, logOf, probe, runAsync, startAgent, startPods, stopAgent, waitForTable } from '../agent-lab.ts';
import { FakeApiServer, type KubeObject } from '../../fake-apiserver.ts';

const TOKEN = 'e2e-secret-token';
const svc = (name: string, ip: string, extra: Record<string, unknown> = {}): KubeObject => ({
  metadata: { name, namespace: 'default', uid: `uid-${name}` },
  spec: { type: 'ClusterIP', clusterIP: ip, clusterIPs: [ip], ipFamilies: ['IPv4'], ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }], ...extra },
});
const slice = (service: string, pods: string[], suffix = 'x', annotations: Record<string, string> = {}): KubeObject => ({
  metadata: { name: `${service}-${suffix}`, namespace: 'default', labels: { 'kubernetes.io/service-name': service }, annotations },
  addressType: 'IPv4',
  endpoints: pods.map((ns) => ({ addresses: [LAB.pods.find((p) => p.ns === ns)!.ip], conditions: { ready: true, serving: true, terminating: false }, nodeName: 'node-1' })),
  ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
});
const node = (zone: string): KubeObject => ({
  metadata: { name: 'node-1', labels: { 'kubernetes.io/hostname': 'node-1', 'topology.kubernetes.io/zone': zone } },
  spec: { podCIDR: '10.244.1.0/24', podCIDRs: ['10.244.1.0/24'] },
  status: { addresses: [{ type: 'InternalIP', address: LAB.nodeClientSideIP }] },
});

preparePrivateWorld();
const hosts = buildLab();
const bg: Background[] = [];
const obs: Record<string, unknown> = {};
const api = new FakeApiServer({ token: TOKEN, bookmarkIntervalMs: 500 });
try {
  linkWorldToNode();
  await startPods(bg);
  const url = (await api.start(API_LINK.worldIP)).replace('127.0.0.1', API_LINK.worldIP);
  const dir = mkdtempSync(join(tmpdir(), 'nftproxy-kube-'));
  const kubeconfig = (token: string) => JSON.stringify({
    apiVersion: 'v1', kind: 'Config', 'current-context': 'e2e',
    clusters: [{ name: 'fake', cluster: { server: url, 'insecure-skip-tls-verify': true } }], // plain HTTP inside the private world
    users: [{ name: 'nftproxy', user: { token } }],
    contexts: [{ name: 'e2e', context: { cluster: 'fake', user: 'nftproxy' } }],
  });
  writeFileSync(join(dir, 'kubeconfig'), kubeconfig(TOKEN));
  writeFileSync(join(dir, 'kubeconfig-bad'), kubeconfig('wrong-token'));
  const config = (kc: string) => JSON.stringify({
    hostnameOverride: 'node-1', clusterCIDR: '10.244.0.0/16', ipFamilies: ['IPv4'],
    healthzBindAddress: '127.0.0.1:10256', metricsBindAddress: '127.0.0.1:10249',
    nftables: { minSyncPeriod: '1s', syncPeriod: '30s' },
    clientConnection: { kubeconfig: kc }, source: { type: 'kubernetes' },
  });
  writeFileSync(join(dir, 'config.json'), config(join(dir, 'kubeconfig')));
  writeFileSync(join(dir, 'config-bad.json'), config(join(dir, 'kubeconfig-bad')));
  writeFileSync(join(dir, 'config-missing.json'), config(join(dir, 'no-such-kubeconfig')));

  api.upsert('nodes', node('zone-a'));
  api.upsert('services', svc('web', '10.96.0.10'));
  api.upsert('endpointslices', slice('web', ['pod-a', 'pod-b'], 'x', { 'endpoints.kubernetes.io/last-change-trigger-time': new Date().toISOString() }));
  // Invalid: a port out of range. It must be skipped with a log line naming the object and the field.
  api.upsert('services', svc('broken', '10.96.0.99', { ports: [{ name: 'http', port: 70000, protocol: 'TCP' }] }));

  // Bad credentials and an unreadable kubeconfig stop startup with a clear message and exit code 1.
  for (const [key, file] of [['badToken', 'config-bad.json'], ['missingKubeconfig', 'config-missing.json']] as const) {
    const t0 = Date.now();
    const r = await runAsync(LAB.node, NODE, [CLI, 'run', '--config', join(dir, file)], 30_000);
    obs[key] = { code: r.code, ms: Date.now() - t0, stderr: r.stderr.trim().split('\n').slice(-2) };
  }
  obs.tableAfterBadStarts = (await runAsync(LAB.node, 'nft', ['list', 'table', 'ip', 'nftproxy'])).code === 0;

  // The first sync waits for both lists: hold the EndpointSlice list.
  api.holdLists('endpointslices');
  const agent = startAgent(join(dir, 'config.json'), { NFTPROXY_KUBE_WATCHDOG_MS: '3000' });
  bg.push(agent);
  await poll(() => api.requests.some((r) => r.startsWith('GET /api/v1/services?')), 10_000, 50);
  await new Promise((r) => setTimeout(r, 1500));
  obs.tableWhileSlicesHeld = (await runAsync(LAB.node, 'nft', ['list', 'table', 'ip', 'nftproxy'])).code === 0;
  api.releaseLists('endpointslices');
  obs.agentUp = await waitForTable('service-ips', 15_000);
  if (!obs.agentUp) throw new Error(`agent did not program the table: ${agent.out.join('')}`);
  obs.firstSync = logOf(agent).filter((l) => l.msg === 'synced').map((l) => ({ full: l.full, ops: l.ops }));
  obs.initial = await answers(LAB.client, '10.96.0.10', 80, 30);

  // Create a Service and its EndpointSlice.
  let t0 = Date.now();
  api.upsert('services', svc('api', '10.96.0.40'));
  api.upsert('endpointslices', slice('api', ['pod-c']));
  obs.create = { ...(await probe(LAB.client, '10.96.0.40', 80, 'reach', ['pod-c'], 10_000)), sinceChangeMs: 0 };
  (obs.create as { sinceChangeMs: number }).sinceChangeMs = Date.now() - t0;

  // Update an EndpointSlice: web moves from pods a,b to pod c.
  t0 = Date.now();
  api.upsert('endpointslices', slice('web', ['pod-c'], 'x', { 'endpoints.kubernetes.io/last-change-trigger-time': new Date().toISOString() }));
  obs.update = { ...(await probe(LAB.client, '10.96.0.10', 80, 'only', ['pod-c'], 10_000)), sinceChangeMs: Date.now() - t0 };

  // Delete a Service: its ClusterIP stops answering.
  t0 = Date.now();
  api.remove('services', 'default', 'api');
  api.remove('endpointslices', 'default', 'api-x');
  obs.delete = { ...(await probe(LAB.client, '10.96.0.40', 80, 'gone', [], 10_000)), sinceChangeMs: Date.now() - t0 };

  // 410 Gone: drop the watches, change something and compact the history before the client reconnects.
  t0 = Date.now();
  api.dropConnections();
  api.upsert('endpointslices', slice('web', ['pod-a', 'pod-b']));
  api.compact();
  obs.gone = { ...(await probe(LAB.client, '10.96.0.10', 80, 'only', ['pod-a', 'pod-b'], 15_000)), sinceChangeMs: Date.now() - t0 };
  obs.goneAnswers = await answers(LAB.client, '10.96.0.10', 80, 30);

  // A dropped watch (no compaction): the change is delivered when the client re-watches.
  await new Promise((r) => setTimeout(r, 1500));
  t0 = Date.now();
  api.dropConnections();
  api.upsert('services', svc('dropped', '10.96.0.50'));
  api.upsert('endpointslices', slice('dropped', ['pod-a']));
  obs.dropped = { ...(await probe(LAB.client, '10.96.0.50', 80, 'reach', ['pod-a'], 15_000)), sinceChangeMs: Date.now() - t0 };

  // A stalled watch (open, silent): the watchdog (3 s here) relists.
  t0 = Date.now();
  api.stall();
  api.upsert('services', svc('stalled', '10.96.0.60'));
  api.upsert('endpointslices', slice('stalled', ['pod-b']));
  obs.stalled = { ...(await probe(LAB.client, '10.96.0.60', 80, 'reach', ['pod-b'], 20_000)), sinceChangeMs: Date.now() - t0 };
  api.resume();

  // The node's zone label changes: the next sync is full.
  await new Promise((r) => setTimeout(r, 1500));
  const before = logOf(agent).filter((l) => l.msg === 'synced').length;
  api.upsert('nodes', node('zone-b'));
  await poll(() => logOf(agent).filter((l) => l.msg === 'synced').length > before, 5000, 50);
  obs.afterZoneChange = logOf(agent).filter((l) => l.msg === 'synced').slice(before).map((l) => ({ full: l.full }));

  // Metrics and health from the node.
  const fetchText = async (u: string) => (await runAsync(LAB.node, NODE, ['-e', `fetch(${JSON.stringify(u)}).then(async (r) => console.log(r.status + ' ' + await r.text()))`])).stdout;
  const metrics = await fetchText('http://127.0.0.1:10249/metrics');
  obs.metrics = {
    programmingCount: Number(/kubeproxy_network_programming_duration_seconds_count\{ip_family="IPv4"\} (\d+)/.exec(metrics)?.[1] ?? -1),
    syncCount: Number(/kubeproxy_sync_proxy_rules_duration_seconds_count\{ip_family="IPv4"\} (\d+)/.exec(metrics)?.[1] ?? -1),
  };
  obs.healthz = (await fetchText('http://127.0.0.1:10256/healthz')).slice(0, 3);
  obs.birthCry = api.postedEvents.map((e) => (e as { reason?: string }).reason);

  const log = logOf(agent);
  obs.logs = {
    invalid: log.filter((l) => l.msg === 'skipping invalid object').map((l) => `${l.object}: ${l.reason}`),
    relist410: log.filter((l) => String(l.msg).includes('410 Gone')).length,
    watchFailed: log.filter((l) => l.msg === 'watch failed; reconnecting').length,
    silent: log.filter((l) => l.msg === 'watch went silent; relisting').length,
    errors: log.filter((l) => (l.level as number) >= 50).map((l) => l.msg),
    errorDetails: log.filter((l) => (l.level as number) >= 50).map((l) => JSON.stringify(l)),
  };
  obs.agentExit = await stopAgent(agent);
} catch (err) {
  obs.error = (err as Error).stack;
} finally {
  for (const b of bg) b.child.kill('SIGKILL');
  await api.stop().catch(() => {});
  destroyHosts(hosts);
}
process.stdout.write(JSON.stringify(obs) + '\n');
process.exit(0);
