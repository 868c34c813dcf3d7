/**
 * Issue 5, must-show 1: stale UDP flows end to end (scenarios/conntrack.ts, in a private world). A statsd-like
 * sender keeps sending from ONE source port to a UDP Service; its endpoint moves to another pod by rewriting the
 * services file; the traffic reaches the new pod within one sync, and `conntrack -L` (in the node namespace) shows
 * that the other UDP Service's flow and the TCP flow kept their conntrack ids. Restarting the agent deletes no
 * valid flow (upstream #122740); deleting a Service takes its flow along (upstream PR #141371).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { e2eSkip, scenarioResult } from './world/netns.ts';
import type { CtLine } from './world/scenarios/conntrack.ts';

const skip = e2eSkip('e2e/conntrack.test.ts');

const find = (ls: CtLine[], dport: number, proto = 'udp') => ls.filter((l) => l.proto === proto && l.dport === dport && l.src === '192.168.50.2');

test('stale UDP flows: endpoint moved, other flows untouched, restart deletes nothing, Service deletion', { skip: skip ?? false, timeout: 120_000 }, () => {
  const o = scenarioResult(new URL('./world/scenarios/conntrack.ts', import.meta.url), [], 100_000);

  // Before: one statsd flow from source port 40125 to pod-a, one dns flow, one TCP flow.
  assert.deepEqual(o.statsBefore, ['pod-a']);
  const [statsBefore] = find(o.ctBefore, 8125);
  const [dnsBefore] = find(o.ctBefore, 53);
  const [tcpBefore] = find(o.ctBefore, 80, 'tcp');
  assert.equal(statsBefore.sport, 40125);
  assert.equal(statsBefore.rsrc, '10.244.1.10');
  assert.ok(dnsBefore && tcpBefore, JSON.stringify(o.ctBefore));

  // The endpoint moved: the same sender (same source port) reaches pod-c within one sync (minSyncPeriod 1 s; the
  // bound leaves 1.5 s for the file watch and a loaded machine). Without the cleanup the flow would keep DNATing
  // to pod-a for as long as the sender sends.
  assert.ok(o.firstAtNewEndpointMs !== null && o.firstAtNewEndpointMs <= 2500, `first datagram at pod-c after ${o.firstAtNewEndpointMs} ms`);
  assert.ok(o.lastAtOldEndpointMs === null || o.lastAtOldEndpointMs <= o.firstAtNewEndpointMs, 'pod-a gets nothing once pod-c does');
  assert.deepEqual(o.statsAfterMovePods, ['pod-c']);
  const [statsAfter] = find(o.ctAfterMove, 8125);
  assert.equal(statsAfter.sport, 40125, 'the same sender socket');
  assert.equal(statsAfter.rsrc, '10.244.1.12', 'a new flow, DNATed to pod-c');
  // (Its id may equal the old one: the kernel hashes the conn's slab address and original tuple into CTA_ID, and
  // the freed slot is often reused for the same tuple. The id guards deletes; it is not a flow serial number.)
  // conntrack -L: the other Service's flow and the TCP flow are the very same flows (same ids).
  assert.deepEqual(find(o.ctAfterMove, 53), [dnsBefore]);
  assert.deepEqual(find(o.ctAfterMove, 80, 'tcp'), [tcpBefore]);
  assert.equal(o.reconcilesAfterMove.length, 1);
  assert.equal(o.reconcilesAfterMove[0].deleted, 1);
  assert.equal(o.reconcilesAfterMove[0].udpFlows, 2, 'the kernel sent the UDP flows only (TCP and the metrics scrape stayed in the kernel)');
  assert.equal(o.deletedMetricAfterMove, 1, 'kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family="IPv4"}');

  // Restart: the first reconcile of the new agent looks at every UDP flow and deletes none; conntrack -L agrees.
  assert.equal(o.agentExit, 0);
  assert.equal(o.restartReconcile.stale, 0);
  assert.equal(o.restartReconcile.deleted, 0);
  assert.equal(o.restartReconcile.udpFlows, 2);
  for (const [port, proto] of [[8125, 'udp'], [53, 'udp'], [80, 'tcp']] as const) {
    assert.deepEqual(find(o.ctAfterRestart, port, proto), find(o.ctAfterMove, port, proto), `${proto}/${port} flow kept its id across the restart`);
  }
  assert.deepEqual(o.statsPodsAfterRestart, ['pod-c']);
  assert.equal(o.deletedMetricAfterRestart, 0);

  // The dns Service is deleted: its flow goes, the stats and TCP flows stay.
  assert.equal(o.reconcileAfterDelete.deleted, 1);
  assert.equal(o.reconcileAfterDelete.flows[0], `192.168.50.2:40053 -> 10.96.0.20:53 (reply from ${dnsBefore.rsrc}:5353)`);
  // No flow to :53 is DNATed to the old endpoint any more. (Not "no flow with the old id": the sender keeps sending,
  // and the kernel may give the new, un-DNATed flow of the same tuple the same CTA_ID when it reuses the slot.)
  assert.ok(!find(o.ctAfterDelete, 53).some((l) => l.rsrc === dnsBefore.rsrc), JSON.stringify(find(o.ctAfterDelete, 53)));
  assert.deepEqual(find(o.ctAfterDelete, 8125), find(o.ctAfterMove, 8125));
  assert.deepEqual(find(o.ctAfterDelete, 80, 'tcp'), [tcpBefore]);
  assert.deepEqual(o.warnings, [], 'no warnings or errors in the agent log');
});

test('stale UDP flows in the IPv6 family: the endpoint moves, the same sender reaches the new pod', { skip: skip ?? false, timeout: 90_000 }, () => {
  const o = scenarioResult(new URL('./world/scenarios/conntrack6.ts', import.meta.url), [], 80_000);
  assert.deepEqual(o.before, ['pod-a']);
  assert.deepEqual(o.ctBefore.map((l: { sport: number; rsrc: string }) => [l.sport, l.rsrc]), [[40125, 'fd00:244:1::10']]);
  assert.ok(o.firstAtNewEndpointMs !== null && o.firstAtNewEndpointMs <= 2500, `first datagram at pod-c after ${o.firstAtNewEndpointMs} ms`);
  assert.deepEqual(o.podsAfterMove, ['pod-c']);
  assert.deepEqual(o.ctAfter.map((l: { sport: number; rsrc: string }) => [l.sport, l.rsrc]), [[40125, 'fd00:244:1::12']], 'conntrack -L -f ipv6');
  // Only the family whose UDP Services changed was reconciled.
  assert.deepEqual(o.reconcilesAfterMove, [{ family: 'IPv6', udpFlows: 1, deleted: 1 }]);
  assert.deepEqual(o.warnings, []);
});
