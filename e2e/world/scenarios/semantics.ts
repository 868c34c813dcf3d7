/**
 * E2E scenario for issue 3 (run by e2e/semantics.test.ts through runInPrivateWorld): the lab in IPv4 AND IPv6, a
 * fourth pod (pod-d, a client that is no endpoint), echo servers in pods a/b/c, and `nftproxy run` on the node with
 * a dual-stack services file:
 * - np:    NodePort TCP 80 -> 8080 (nodePort 30080) and UDP 53 -> 5353 (30053), endpoints a, b, c;
 * - lb-allow / lb-deny: LoadBalancer with loadBalancerSourceRanges that include / exclude the client;
 * - aff:   ClusterIP with ClientIP affinity, timeoutSeconds 1;
 * - local: LoadBalancer eTP=Local, healthCheckNodePort 32000, endpoints a, b on node-1 and c on node-2; later a and b
 *          move to node-2 (no local endpoints).
 * It makes real TCP/UDP connections and HTTP requests and prints one JSON object; the test asserts on it.
 * Usage: semantics.ts
 */
import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { problemsOf, LAB, LAB6, addLabIPv6, addLabPod, buildLab, destroyHosts, inNs, poll, preparePrivateWorld, spawnInNs, type Background } from '../netns.ts';
import { CLI, ECHO, NODE, ROOT, connect, type ConnectResult } from '../agent-lab.ts';

const httpGet = (ns: string, url: string): { status?: number; body?: string; weight?: string | null; err?: string } =>
  JSON.parse(inNs(ns, NODE, ['--input-type=module', '-e',
    'try { const r = await fetch(process.argv[1], { signal: AbortSignal.timeout(3000) }); console.log(JSON.stringify({ status: r.status, weight: r.headers.get("x-load-balancing-endpoint-weight"), body: await r.text() })); } catch (e) { console.log(JSON.stringify({ err: String(e.cause?.code ?? e.name) })); }',
    url], { timeoutMs: 20_000 }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Per family: the addresses the scenario uses. */
const F = {
  v4: {
    family: 'IPv4', pods: { 'pod-a': '10.244.1.10', 'pod-b': '10.244.1.11', 'pod-c': '10.244.1.12' } as Record<string, string>, podD: '10.244.1.13',
    nodeIP: LAB.nodeClientSideIP, otherNodeIP: LAB.nodeUplinkIP, clientIP: LAB.clientIP,
    clusterIPs: { np: '10.96.1.10', allow: '10.96.1.20', deny: '10.96.1.21', aff: '10.96.1.30', local: '10.96.1.40' },
    lb: { allow: '192.0.2.20', deny: '192.0.2.21', local: '192.0.2.40' }, lbRoute: '192.0.2.0/24', otherRoute: '172.31.0.0/24',
    newIP: '192.168.60.1', newRoute: '192.168.60.0/24',
    allowRange: '192.168.50.0/24', denyRange: '203.0.113.0/24', url: (ip: string, port: number) => `http://${ip}:${port}/`,
  },
  v6: {
    family: 'IPv6', pods: LAB6.pods, podD: 'fd00:10:244:1::13',
    nodeIP: LAB6.nodeClientSideIP, otherNodeIP: LAB6.nodeUplinkIP, clientIP: LAB6.clientIP,
    clusterIPs: { np: 'fd00:10:96::110', allow: 'fd00:10:96::120', deny: 'fd00:10:96::121', aff: 'fd00:10:96::130', local: 'fd00:10:96::140' },
    lb: { allow: '2001:db8:2::20', deny: '2001:db8:2::21', local: '2001:db8:2::40' }, lbRoute: '2001:db8:2::/64', otherRoute: 'fd00:172:31::/64',
    newIP: 'fd00:192:168:60::1', newRoute: 'fd00:192:168:60::/64',
    allowRange: 'fd00:192:168:50::/64', denyRange: '2001:db8:ffff::/48', url: (ip: string, port: number) => `http://[${ip}]:${port}/`,
  },
} as const;
type Fam = typeof F[keyof typeof F];

function servicesList(localNodes: { a: string; b: string }): unknown {
  const items: unknown[] = [
    { kind: 'Node', metadata: { name: 'node-1' }, spec: { podCIDRs: ['10.244.1.0/24', 'fd00:10:244:1::/64'] }, status: { addresses: [{ type: 'InternalIP', address: LAB.nodeClientSideIP }, { type: 'InternalIP', address: LAB6.nodeClientSideIP }] } },
  ];
  const svc = (name: string, key: keyof Fam['clusterIPs'], spec: object, lbKey?: keyof Fam['lb']) => items.push({
    kind: 'Service', metadata: { name, namespace: 'e2e' },
    spec: { clusterIP: F.v4.clusterIPs[key], clusterIPs: [F.v4.clusterIPs[key], F.v6.clusterIPs[key]], ipFamilies: ['IPv4', 'IPv6'], ipFamilyPolicy: 'RequireDualStack', ...spec },
    status: { loadBalancer: lbKey ? { ingress: [{ ip: F.v4.lb[lbKey], ipMode: 'VIP' }, { ip: F.v6.lb[lbKey] }] } : {} },
  });
  const slices = (svcName: string, pods: Array<[string, string]>, ports: object[]) => {
    for (const f of [F.v4, F.v6]) {
      items.push({
        kind: 'EndpointSlice', metadata: { name: `${svcName}-${f.family.toLowerCase()}`, namespace: 'e2e', labels: { 'kubernetes.io/service-name': svcName } },
        addressType: f.family, ports,
        endpoints: pods.map(([pod, nodeName]) => ({ addresses: [f.pods[pod]], nodeName, conditions: { ready: true, serving: true, terminating: false } })),
      });
    }
  };
  const all: Array<[string, string]> = [['pod-a', 'node-1'], ['pod-b', 'node-1'], ['pod-c', 'node-1']];
  svc('np', 'np', { type: 'NodePort', ports: [{ name: 'http', port: 80, targetPort: 'http', nodePort: 30080 }, { name: 'dns', port: 53, protocol: 'UDP', targetPort: 5353, nodePort: 30053 }] });
  slices('np', all, [{ name: 'http', port: 8080, protocol: 'TCP' }, { name: 'dns', port: 5353, protocol: 'UDP' }]);
  svc('lb-allow', 'allow', { type: 'LoadBalancer', loadBalancerSourceRanges: [F.v4.allowRange, ` ${F.v6.allowRange} `], ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30120 }] }, 'allow');
  slices('lb-allow', all, [{ name: 'http', port: 8080 }]);
  svc('lb-deny', 'deny', { type: 'LoadBalancer', loadBalancerSourceRanges: [F.v4.denyRange, F.v6.denyRange], ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30121 }] }, 'deny');
  slices('lb-deny', all, [{ name: 'http', port: 8080 }]);
  svc('aff', 'aff', { sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 1 } }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] });
  slices('aff', all, [{ name: 'http', port: 8080 }]);
  svc('local', 'local', { type: 'LoadBalancer', externalTrafficPolicy: 'Local', healthCheckNodePort: 32000, ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30140 }] }, 'local');
  slices('local', [['pod-a', localNodes.a], ['pod-b', localNodes.b], ['pod-c', 'node-2']], [{ name: 'http', port: 8080 }]);
  return { apiVersion: 'v1', kind: 'List', items };
}

const answeredBy = (rs: ConnectResult[]) => [...new Set(rs.map((r) => r.by ?? `error:${r.err}`))].sort();

const tStart = Date.now();
const stage = (what: string) => process.stderr.write(`[semantics] ${what} at +${Date.now() - tStart} ms\n`);
preparePrivateWorld();
const hosts = buildLab();
stage('lab built');
const bg: Background[] = [];
const obs: Record<string, unknown> = {};
const t0 = Date.now();
try {
  addLabIPv6([F.v4.lbRoute, F.v6.lbRoute, F.v4.otherRoute, F.v6.otherRoute, F.v4.newRoute, F.v6.newRoute]);
  hosts.push(addLabPod('pod-d', F.v4.podD, F.v6.podD));
  for (const p of LAB.pods) bg.push(spawnInNs(p.ns, NODE, [ECHO, p.ns, '8080,5353']));
  const dir = mkdtempSync(join(tmpdir(), 'nftproxy-sem-'));
  const write = (list: unknown) => {
    writeFileSync(join(dir, 'services.json.tmp'), JSON.stringify(list));
    renameSync(join(dir, 'services.json.tmp'), join(dir, 'services.json'));
  };
  write(servicesList({ a: 'node-1', b: 'node-1' }));
  writeFileSync(join(dir, 'config.json'), JSON.stringify({
    hostnameOverride: 'node-1', clusterCIDR: '10.244.0.0/16,fd00:10:244::/56', ipFamilies: ['IPv4', 'IPv6'], nodePortAddresses: ['primary', F.v4.newRoute, F.v6.newRoute],
    serviceCIDRs: ['10.96.0.0/16', 'fd00:10:96::/112'], healthzBindAddress: '', metricsBindAddress: '',
    nftables: { minSyncPeriod: '100ms' }, source: { type: 'file', path: 'services.json' },
  }));
  for (const f of [F.v4, F.v6]) {
    for (const [ns, ip] of Object.entries(f.pods)) {
      const ok = await poll(() => connect(LAB.node, 'tcp', ip, 8080, 1, 500)[0].by === ns, 10_000, 100);
      if (!ok) throw new Error(`echo server in ${ns} did not come up on ${ip}`);
    }
  }
  const agent = spawnInNs(LAB.node, NODE, [CLI, 'run', '--config', join(dir, 'config.json')]);
  bg.push(agent);
  const up = await poll(() => ['ip', 'ip6'].every((t) => inNs(LAB.node, 'nft', ['list', 'table', t, 'nftproxy'], { allowFail: true }).includes('service-ips')), 15_000, 100);
  if (!up) throw new Error(`agent did not program both tables: ${agent.out.join('')}`);
  const hcUp = await poll(() => httpGet(LAB.client, F.v4.url(F.v4.nodeIP, 32000)).status !== undefined, 5000, 100);
  obs.agentUpMs = Date.now() - t0;
  obs.hcUp = !!hcUp;

  for (const [k, f] of Object.entries(F)) {
    const o: Record<string, unknown> = {};
    obs[k] = o;
    // NodePort on the node's (primary) address, not on another of its addresses.
    o.npTcp = connect(LAB.client, 'tcp', f.nodeIP, 30080, 12);
    o.npTcpOther = connect(LAB.client, 'tcp', f.otherNodeIP, 30080, 2, 1000);
    o.npUdp = connect(LAB.client, 'udp', f.nodeIP, 30053, 12);
    o.npUdpOther = connect(LAB.client, 'udp', f.otherNodeIP, 30053, 1, 800);
    // Hairpin: pod-a through the ClusterIP to itself is masqueraded (else the reply would bypass conntrack).
    o.hairpin = connect('pod-a', 'tcp', f.clusterIPs.np, 80, 20); // P(pod-a never picked) = (2/3)^20 = 0.03 %
    // loadBalancerSourceRanges.
    o.lbAllow = connect(LAB.client, 'tcp', f.lb.allow, 80, 6);
    o.lbDeny = connect(LAB.client, 'tcp', f.lb.deny, 80, 1, 1000);
    o.lbDenyClusterIP = connect('pod-d', 'tcp', f.clusterIPs.deny, 80, 3);
    // Affinity: holds across connections, then expires (timeout 1 s): after each expiry a fresh random pick.
    o.affHold = connect(LAB.client, 'tcp', f.clusterIPs.aff, 80, 10);
    // Up to 8 expiries: the chance that a fresh pick (1 of 3) repeats the held pod 8 times is (1/3)^8 = 0.015 %.
    const held = (o.affHold as ConnectResult[])[0]?.by;
    const after: ConnectResult[] = [];
    for (let i = 0; i < 8; i++) {
      await sleep(1300);
      after.push(...connect(LAB.client, 'tcp', f.clusterIPs.aff, 80, 1));
      if (after.some((r) => r.by !== held)) break;
    }
    o.affAfterExpiry = after;
    // eTP Local with local endpoints a, b.
    o.localLB = connect(LAB.client, 'tcp', f.lb.local, 80, 12);
    o.localNP = connect(LAB.client, 'tcp', f.nodeIP, 30140, 12);
    o.hc = httpGet(LAB.client, f.url(f.nodeIP, 32000));
    o.hcOther = httpGet(LAB.client, f.url(f.otherNodeIP, 32000));
  }

  // A new node address inside nodePortAddresses becomes a NodePort address without a full sync (upstream: <= 1 h).
  for (const [k, f] of Object.entries(F)) {
    const o = obs[k] as Record<string, unknown>;
    o.newAddrBefore = connect(LAB.client, 'tcp', f.newIP, 30080, 1, 500);
    inNs(LAB.node, 'ip', [f.family === 'IPv4' ? '-4' : '-6', 'addr', 'add', `${f.newIP}/${f.family === 'IPv4' ? 24 : 64}`, 'dev', 'eth-client', ...(f.family === 'IPv6' ? ['nodad'] : [])]);
    const mark = agent.out.join('').length;
    const t1 = Date.now();
    const ok = await poll(() => connect(LAB.client, 'tcp', f.newIP, 30080, 1, 500)[0].by !== undefined, 8000, 100);
    o.newAddrMs = ok ? Date.now() - t1 : null;
    o.newAddrAfter = connect(LAB.client, 'tcp', f.newIP, 30080, 3);
    // The agent's log arrives through a pipe: let the event loop read it (spawnSync above blocked it).
    const syncedLines = () => agent.out.join('').slice(mark).split('\n').filter((l) => l.includes('"msg":"synced"'));
    await poll(() => syncedLines().length > 0, 3000, 50);
    o.newAddrSyncs = syncedLines().map((l) => JSON.parse(l).full);
  }

  // a and b move to node-2: no local endpoints.
  write(servicesList({ a: 'node-2', b: 'node-2' }));
  const moved = await poll(() => JSON.parse(httpGet(LAB.client, F.v4.url(F.v4.nodeIP, 32000)).body ?? '{}').localEndpoints === 0, 5000, 50);
  obs.moved = !!moved;
  for (const [k, f] of Object.entries(F)) {
    const o = obs[k] as Record<string, unknown>;
    o.hcZero = httpGet(LAB.client, f.url(f.nodeIP, 32000));
    o.localLBNone = connect(LAB.client, 'tcp', f.lb.local, 80, 1, 1000);
    o.localNPNone = connect(LAB.client, 'tcp', f.nodeIP, 30140, 1, 1000);
    o.localLBFromPod = connect('pod-d', 'tcp', f.lb.local, 80, 6);
    o.localLBFromHost = connect(LAB.node, 'tcp', f.lb.local, 80, 3);
  }
  obs.agentLog = problemsOf(agent).slice(0, 5);
  obs.totalMs = Date.now() - t0;
} catch (err) {
  obs.error = (err as Error).stack;
} finally {
  stage('observations done');
  for (const b of bg) b.child.kill('SIGKILL');
  destroyHosts(hosts);
  stage('hosts destroyed');
}
process.stdout.write(JSON.stringify(obs) + '\n');
process.exit(0); // do not wait for the killed children's pipes
