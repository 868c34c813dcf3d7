/**
 * The main job end to end: `nftproxy run` on a node namespace with the example services file, real TCP and UDP
 * connections from the node, from a pod and from an outside client (scenarios/clusterip.ts, in a private world).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { e2eSkip, scenarioResult } from './world/netns.ts';

const skip = e2eSkip('e2e/traffic.test.ts');

type R = { by?: string; src?: string; err?: string; ms?: number };
const answeredBy = (rs: R[]) => new Set(rs.map((r) => r.by ?? `error:${r.err}`));

test('ClusterIP traffic through nftproxy run: balance, sources, UDP, rejects, endpoint removal, SIGTERM', { skip: skip ?? false, timeout: 240_000 }, () => {
  const o = scenarioResult(new URL('./world/scenarios/clusterip.ts', import.meta.url), [], 200_000);
  assert.equal(o.agentUp, true);

  // From the node itself and from the outside client: every endpoint answers, and the pod sees the node's
  // bridge address (masqueraded: the sources are outside the cluster CIDR 10.244.0.0/16).
  for (const [from, rs] of [['node', o.fromNode], ['client', o.fromClient]] as const) {
    assert.deepEqual([...answeredBy(rs)].sort(), ['pod-a', 'pod-b', 'pod-c'], `from ${from}`);
    assert.ok(rs.every((x: R) => x.src === '10.244.1.1'), `from ${from}: masqueraded to 10.244.1.1`);
  }
  // From a pod: unchanged source to other pods; hairpin back to itself is masqueraded (or the reply would bypass NAT).
  assert.deepEqual([...answeredBy(o.fromPodA)].sort(), ['pod-a', 'pod-b', 'pod-c']);
  for (const x of o.fromPodA as R[]) assert.equal(x.src, x.by === 'pod-a' ? '10.244.1.1' : '10.244.1.10', JSON.stringify(x));

  // UDP reaches both endpoints of the UDP Service.
  assert.deepEqual([...answeredBy(o.udpFromClient)].sort(), ['pod-a', 'pod-b']);

  // No endpoints, and an undefined port on an active ClusterIP: refused at once, not a timeout.
  for (const x of [...o.noEndpoints, ...o.undefinedPort] as R[]) {
    assert.equal(x.err, 'ECONNREFUSED');
    assert.ok(x.ms! < 1000, `refused in ${x.ms} ms`);
  }

  // Removing an endpoint from the file reaches the kernel within minSyncPeriod (1 s) + 1 s.
  assert.ok(o.removalMs !== null && o.removalMs <= 2000, `endpoint removal took ${o.removalMs} ms`);
  assert.deepEqual([...answeredBy(o.afterRemoval)].sort(), ['pod-a', 'pod-b']);

  // SIGTERM: exit 0 quickly, ruleset left in place.
  assert.equal(o.agentExit, 0);
  assert.ok(o.agentExitMs < 5000);
  assert.equal(o.tableAfterExit, true);
  assert.deepEqual(o.agentLog, [], 'no warnings or errors in the agent log');
});
