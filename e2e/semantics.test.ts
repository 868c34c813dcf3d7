/**
 * Issue 3 end to end, IPv4 AND IPv6, real TCP and UDP sockets: `nftproxy run` on the node namespace with a
 * dual-stack services file (scenarios/semantics.ts, in a private world). NodePort on the node's address and not on
 * its others, loadBalancerSourceRanges allowing and denying, ClientIP affinity holding and expiring (timeout 1 s),
 * eTP=Local answering with the client's source kept and dropping without local endpoints (pod and host traffic
 * still served, upstream #131765), and the healthCheckNodePort server: 200 with localEndpoints 2, then 503 at 0.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runInPrivateWorld, e2eSkip } from './world/netns.ts';

const skip = e2eSkip('e2e/semantics.test.ts');

type R = { by?: string; src?: string; err?: string; ms?: number };
type H = { status?: number; body?: string; weight?: string | null; err?: string };
const pods = (rs: R[]) => [...new Set(rs.map((r) => r.by ?? `error:${r.err}`))].sort();
const allAnswered = (rs: R[], what: string) => assert.ok(rs.length > 0 && rs.every((r) => r.by), `${what}: ${JSON.stringify(rs)}`);

// The scenario runs once; every test asserts on its observations (a failed run fails every test, once).
let o: Record<string, any> | null = null;
let failure: Error | null = null;
const scenario = () => {
  if (failure) throw failure;
  if (o) return o;
  try {
    // The scenario itself takes ~25 s. Under load from other network-namespace users on the machine, the kernel's
    // teardown of the private world has been seen to hold the exit for minutes AFTER the scenario printed its
    // result: a kill after a complete result line is accepted (the world dies with its PID namespace either way).
    const r = runInPrivateWorld(new URL('./world/scenarios/semantics.ts', import.meta.url).pathname, [], 240_000);
    const line = r.stdout.trim().split('\n').pop() ?? '';
    assert.ok(r.status === 0 || (r.signal === 'SIGKILL' && line.startsWith('{')), `scenario exited ${r.status} ${r.signal}: ${r.stderr}`);
    const parsed = JSON.parse(line);
    assert.equal(parsed.error, undefined, parsed.error);
    o = parsed;
    return parsed;
  } catch (err) {
    failure = err as Error;
    throw err;
  }
};

const FAM = {
  v4: { bridge: '10.244.1.1', client: '192.168.50.2', podA: '10.244.1.10', podD: '10.244.1.13' },
  v6: { bridge: 'fd00:10:244:1::1', client: 'fd00:192:168:50::2', podA: 'fd00:10:244:1::10', podD: 'fd00:10:244:1::13' },
} as const;

test('semantics e2e: the scenario runs within budget with a clean agent log', { skip: skip ?? false, timeout: 260_000 }, () => {
  const s = scenario();
  assert.equal(s.hcUp, true);
  assert.equal(s.moved, true, 'the endpoint move reached the health-check server');
  assert.deepEqual(s.agentLog, [], 'no warnings or errors in the agent log');
  assert.ok(s.totalMs < 120_000, `scenario took ${s.totalMs} ms`);
});

for (const [fam, a] of Object.entries(FAM)) {
  test(`${fam}: NodePort answers on the node's primary address (TCP and UDP), masqueraded, and not on its other address`, { skip: skip ?? false, timeout: 260_000 }, () => {
    const s = scenario()[fam];
    for (const k of ['npTcp', 'npUdp']) {
      allAnswered(s[k], k);
      assert.ok(pods(s[k]).length >= 2, `${k} balanced: ${pods(s[k])}`);
      assert.ok(s[k].every((r: R) => r.src === a.bridge), `${k}: eTP Cluster masquerades`);
    }
    assert.ok(s.npTcpOther.every((r: R) => r.err === 'ECONNREFUSED'), `other address: the node's own stack refuses: ${JSON.stringify(s.npTcpOther)}`);
    assert.ok(s.npUdpOther.every((r: R) => !r.by), 'other address, UDP: no endpoint answers');
  });

  test(`${fam}: hairpin: a pod reaching itself through its Service is masqueraded, other endpoints see the pod`, { skip: skip ?? false, timeout: 260_000 }, () => {
    const s = scenario()[fam];
    allAnswered(s.hairpin, 'hairpin');
    assert.ok(s.hairpin.some((r: R) => r.by === 'pod-a'), 'pod-a reached itself at least once');
    for (const r of s.hairpin as R[]) assert.equal(r.src, r.by === 'pod-a' ? a.bridge : a.podA, JSON.stringify(r));
  });

  test(`${fam}: a node address added inside a nodePortAddresses CIDR serves NodePorts within seconds (no full sync)`, { skip: skip ?? false, timeout: 260_000 }, () => {
    const s = scenario()[fam];
    assert.ok(s.newAddrBefore.every((r: R) => !r.by), 'before: the address does not exist');
    assert.ok(s.newAddrMs !== null && s.newAddrMs < 5000, `picked up in ${s.newAddrMs} ms (poll 1 s + minSyncPeriod)`);
    allAnswered(s.newAddrAfter, 'after');
    assert.ok(s.newAddrSyncs.length > 0 && s.newAddrSyncs.every((full: boolean) => full === false), `partial syncs only: ${JSON.stringify(s.newAddrSyncs)}`);
  });

  test(`${fam}: loadBalancerSourceRanges allow the client on one LB IP and drop it on another; the ClusterIP is not filtered`, { skip: skip ?? false, timeout: 260_000 }, () => {
    const s = scenario()[fam];
    allAnswered(s.lbAllow, 'allowed');
    assert.deepEqual(s.lbDeny.map((r: R) => r.err), ['TIMEOUT'], 'denied: dropped (a timeout, not a reject)');
    allAnswered(s.lbDenyClusterIP, 'ClusterIP of the denied Service');
    assert.ok(s.lbDenyClusterIP.every((r: R) => r.src === a.podD), 'pod source kept on ClusterIP traffic');
  });

  test(`${fam}: ClientIP affinity holds across connections and expires after timeoutSeconds (1 s)`, { skip: skip ?? false, timeout: 260_000 }, () => {
    const s = scenario()[fam];
    allAnswered(s.affHold, 'hold');
    assert.equal(pods(s.affHold).length, 1, `10 connections, one endpoint: ${pods(s.affHold)}`);
    allAnswered(s.affAfterExpiry, 'after expiry');
    assert.ok(s.affAfterExpiry.some((r: R) => r.by !== s.affHold[0].by), `after expiry another endpoint is picked: ${JSON.stringify(s.affAfterExpiry)}`);
  });

  test(`${fam}: eTP=Local answers from local endpoints only with the client source kept; health check 200 localEndpoints 2`, { skip: skip ?? false, timeout: 260_000 }, () => {
    const s = scenario()[fam];
    for (const k of ['localLB', 'localNP']) {
      allAnswered(s[k], k);
      assert.ok(pods(s[k]).every((p) => p === 'pod-a' || p === 'pod-b'), `${k}: never the remote pod-c: ${pods(s[k])}`);
      assert.ok(s[k].every((r: R) => r.src === a.client), `${k}: source preserved`);
    }
    const hc = s.hc as H;
    assert.equal(hc.status, 200);
    assert.equal(hc.weight, '2');
    assert.deepEqual(JSON.parse(hc.body!), { service: { namespace: 'e2e', name: 'local' }, localEndpoints: 2, serviceProxyHealthy: true });
    assert.equal((s.hcOther as H).err, 'ECONNREFUSED', 'the health check binds only the nodePortAddresses address');
  });

  test(`${fam}: eTP=Local without local endpoints: outside dropped, pod and host still served (#131765); health check 503 at 0`, { skip: skip ?? false, timeout: 260_000 }, () => {
    const s = scenario()[fam];
    const hc = s.hcZero as H;
    assert.equal(hc.status, 503);
    assert.equal(JSON.parse(hc.body!).localEndpoints, 0);
    assert.deepEqual(s.localLBNone.map((r: R) => r.err), ['TIMEOUT'], 'LB from outside: dropped');
    assert.deepEqual(s.localNPNone.map((r: R) => r.err), ['TIMEOUT'], 'NodePort from outside: dropped');
    allAnswered(s.localLBFromPod, 'pod → LB IP');
    assert.ok(s.localLBFromPod.every((r: R) => r.src === a.podD), 'pod → LB IP: short-circuited, not masqueraded');
    allAnswered(s.localLBFromHost, 'host → LB IP');
  });
}
