import { test } from 'node:test';
import assert from 'node:assert/strict';
import { indexUdpServices, staleFlows, type ConntrackFlow } from './conntrack-reconciler.ts';

const flow = (origDst: string, origDport: number, replySrc: string, replySport: number, proto = 17, id = 1): ConntrackFlow =>
  ({ proto, origSrc: '10.244.1.5', origDst, origSport: 40000, origDport, replySrc, replySport, id, zone: 0 });

const dns = {
  frontends: [{ ip: '10.96.0.10', port: 53 }, { ip: '192.0.2.10', port: 53 }],
  nodePort: 30053,
  servingEndpoints: [{ ip: '10.244.1.2', port: 5353 }],
};

test('a flow to a frontend whose reply source is no longer a serving endpoint is stale', () => {
  const idx = indexUdpServices([dns]);
  const live = flow('10.96.0.10', 53, '10.244.1.2', 5353);
  const dead = flow('10.96.0.10', 53, '10.244.1.3', 5353, 17, 2);
  const deadExternal = flow('192.0.2.10', 53, '10.244.9.9', 5353, 17, 3);
  assert.deepEqual(staleFlows([live, dead, deadExternal], idx).map((f) => f.id), [2, 3]);
});

test('the reply port matters too: same endpoint IP, other port is stale', () => {
  const idx = indexUdpServices([dns]);
  assert.equal(staleFlows([flow('10.96.0.10', 53, '10.244.1.2', 53)], idx).length, 1);
});

test('NodePort flows match on the destination port with any IP', () => {
  const idx = indexUdpServices([dns]);
  assert.equal(staleFlows([flow('172.18.0.2', 30053, '10.244.7.7', 5353)], idx).length, 1);
  assert.equal(staleFlows([flow('172.18.0.2', 30053, '10.244.1.2', 5353)], idx).length, 0);
});

test('TCP flows and flows of other services are untouched', () => {
  const idx = indexUdpServices([dns]);
  assert.equal(staleFlows([flow('10.96.0.10', 53, '10.244.1.3', 5353, 6)], idx).length, 0);
  assert.equal(staleFlows([flow('10.96.0.99', 53, '10.244.1.3', 5353)], idx).length, 0);
});

test('scale to zero: flows to the endpoints that were there go (upstream #139628 / PR #139629)', () => {
  const toDeadPod = flow('10.96.0.10', 53, '10.244.1.2', 5353);
  const viaNodePort = flow('172.18.0.2', 30053, '10.244.1.2', 5353, 17, 2);
  assert.deepEqual(staleFlows([toDeadPod, viaNodePort], indexUdpServices([{ ...dns, servingEndpoints: [] }])).map((f) => f.id), [1, 2]);
});

test('scale back up: a flow created while nothing served (reply source = the service IP) goes', () => {
  const blackHole = flow('10.96.0.10', 53, '10.96.0.10', 53);
  assert.equal(staleFlows([blackHole], indexUdpServices([dns])).length, 1);
});

test('a deleted Service listed first with no endpoints; a live ServicePort reusing its frontend wins', () => {
  const gone = { frontends: [{ ip: '10.96.0.10', port: 53 }], nodePort: 30053, servingEndpoints: [] };
  const live = flow('10.96.0.10', 53, '10.244.1.2', 5353);
  assert.equal(staleFlows([live], indexUdpServices([gone])).length, 1, 'alone, the deleted Service takes its flows along');
  assert.equal(staleFlows([live], indexUdpServices([gone, dns])).length, 0, 'the live one has the last word');
});
