/**
 * upstream CategorizeEndpoints (kubernetes pkg/proxy/topology.go), case by case: cluster endpoints, local endpoints,
 * all reachable endpoints and hasAnyEndpoints for every policy combination, topology hints and terminating states.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Endpoint } from '../config-schema/snapshot.ts';
import { categorizeEndpoints, topologyModeFromHints, type PolicyView } from './endpoints.ts';

const NODE = 'node-1', ZONE = 'zone-a';
interface E { ip: string; local?: boolean; ready?: boolean; serving?: boolean; terminating?: boolean; zones?: string[]; nodes?: string[] }
const mk = (e: E): Endpoint => ({
  ip: e.ip, port: 80, isLocal: e.local ?? false, ready: e.ready ?? true, serving: e.serving ?? (e.ready ?? true), terminating: e.terminating ?? false,
  ...(e.zones ? { zoneHints: e.zones } : {}), ...(e.nodes ? { nodeHints: e.nodes } : {}),
});
const CLUSTER: PolicyView = { internalPolicyLocal: false, externalPolicyLocal: false, externallyAccessible: false };
const ITP_LOCAL: PolicyView = { internalPolicyLocal: true, externalPolicyLocal: false, externallyAccessible: false };
const ETP_LOCAL: PolicyView = { internalPolicyLocal: false, externalPolicyLocal: true, externallyAccessible: true };
const BOTH_LOCAL: PolicyView = { internalPolicyLocal: true, externalPolicyLocal: true, externallyAccessible: true };

interface Case { name: string; policy: PolicyView; eps: E[]; cluster: string[]; local: string[]; reachable: string[]; has: boolean }
const CASES: Case[] = [
  { name: 'cluster policy, all ready', policy: CLUSTER, eps: [{ ip: '10.0.0.1' }, { ip: '10.0.0.2', local: true }], cluster: ['10.0.0.1', '10.0.0.2'], local: [], reachable: ['10.0.0.1', '10.0.0.2'], has: true },
  { name: 'not-ready endpoints are excluded', policy: CLUSTER, eps: [{ ip: '10.0.0.1' }, { ip: '10.0.0.2', ready: false, serving: false }], cluster: ['10.0.0.1'], local: [], reachable: ['10.0.0.1'], has: true },
  { name: 'ready wins over serving+terminating', policy: CLUSTER, eps: [{ ip: '10.0.0.1' }, { ip: '10.0.0.2', ready: false, serving: true, terminating: true }], cluster: ['10.0.0.1'], local: [], reachable: ['10.0.0.1'], has: true },
  { name: 'no ready → serving+terminating fallback', policy: CLUSTER, eps: [{ ip: '10.0.0.1', ready: false, serving: true, terminating: true }, { ip: '10.0.0.2', ready: false, serving: false, terminating: true }], cluster: ['10.0.0.1'], local: [], reachable: ['10.0.0.1'], has: true },
  { name: 'serving but not terminating and not ready: unusable', policy: CLUSTER, eps: [{ ip: '10.0.0.1', ready: false, serving: true, terminating: false }], cluster: [], local: [], reachable: [], has: false },
  { name: 'zone hints for this zone', policy: CLUSTER, eps: [{ ip: '10.0.0.1', zones: ['zone-a'] }, { ip: '10.0.0.2', zones: ['zone-b'] }], cluster: ['10.0.0.1'], local: [], reachable: ['10.0.0.1'], has: true },
  { name: 'partial hints ignored', policy: CLUSTER, eps: [{ ip: '10.0.0.1', zones: ['zone-a'] }, { ip: '10.0.0.2' }], cluster: ['10.0.0.1', '10.0.0.2'], local: [], reachable: ['10.0.0.1', '10.0.0.2'], has: true },
  { name: 'hints only for other zones ignored', policy: CLUSTER, eps: [{ ip: '10.0.0.1', zones: ['zone-b'] }, { ip: '10.0.0.2', zones: ['zone-c'] }], cluster: ['10.0.0.1', '10.0.0.2'], local: [], reachable: ['10.0.0.1', '10.0.0.2'], has: true },
  { name: 'not-ready endpoints do not count for hint completeness', policy: CLUSTER, eps: [{ ip: '10.0.0.1', zones: ['zone-a'] }, { ip: '10.0.0.2', zones: ['zone-b'] }, { ip: '10.0.0.3', ready: false, serving: false }], cluster: ['10.0.0.1'], local: [], reachable: ['10.0.0.1'], has: true },
  { name: 'node hints (PreferSameNode) before zone hints', policy: CLUSTER, eps: [{ ip: '10.0.0.1', nodes: [NODE], zones: ['zone-a'] }, { ip: '10.0.0.2', nodes: ['node-2'], zones: ['zone-a'] }], cluster: ['10.0.0.1'], local: [], reachable: ['10.0.0.1'], has: true },
  { name: 'node hints partial → zone hints used', policy: CLUSTER, eps: [{ ip: '10.0.0.1', nodes: [NODE], zones: ['zone-b'] }, { ip: '10.0.0.2', zones: ['zone-a'] }], cluster: ['10.0.0.2'], local: [], reachable: ['10.0.0.2'], has: true },
  { name: 'hinted endpoints all terminating → fallback ignores topology', policy: CLUSTER, eps: [{ ip: '10.0.0.1', ready: false, serving: true, terminating: true, zones: ['zone-b'] }], cluster: ['10.0.0.1'], local: [], reachable: ['10.0.0.1'], has: true },
  { name: 'iTP Local: local ready only; no cluster endpoints', policy: ITP_LOCAL, eps: [{ ip: '10.0.0.1', local: true }, { ip: '10.0.0.2' }], cluster: [], local: ['10.0.0.1'], reachable: ['10.0.0.1'], has: true },
  { name: 'iTP Local, no local endpoints: hasAnyEndpoints still true (drop, not reject)', policy: ITP_LOCAL, eps: [{ ip: '10.0.0.2' }], cluster: [], local: [], reachable: [], has: true },
  { name: 'iTP Local: local terminating fallback', policy: ITP_LOCAL, eps: [{ ip: '10.0.0.1', local: true, ready: false, serving: true, terminating: true }, { ip: '10.0.0.2' }], cluster: [], local: ['10.0.0.1'], reachable: ['10.0.0.1'], has: true },
  { name: 'eTP Local: cluster endpoints kept for the short-circuit; local ones separately', policy: ETP_LOCAL, eps: [{ ip: '10.0.0.1', local: true }, { ip: '10.0.0.2' }], cluster: ['10.0.0.1', '10.0.0.2'], local: ['10.0.0.1'], reachable: ['10.0.0.1', '10.0.0.2'], has: true },
  { name: 'eTP Local: a local terminating endpoint is reachable though not a cluster endpoint', policy: ETP_LOCAL, eps: [{ ip: '10.0.0.1', local: true, ready: false, serving: true, terminating: true }, { ip: '10.0.0.2' }], cluster: ['10.0.0.2'], local: ['10.0.0.1'], reachable: ['10.0.0.1', '10.0.0.2'], has: true },
  { name: 'eTP Local: a local endpoint outside the topology is still local', policy: ETP_LOCAL, eps: [{ ip: '10.0.0.1', local: true, zones: ['zone-b'] }, { ip: '10.0.0.2', zones: ['zone-a'] }], cluster: ['10.0.0.2'], local: ['10.0.0.1'], reachable: ['10.0.0.1', '10.0.0.2'], has: true },
  { name: 'eTP Local, no endpoints at all', policy: ETP_LOCAL, eps: [], cluster: [], local: [], reachable: [], has: false },
  { name: 'iTP and eTP Local, externally accessible: both lists', policy: BOTH_LOCAL, eps: [{ ip: '10.0.0.1', local: true }, { ip: '10.0.0.2' }], cluster: ['10.0.0.1', '10.0.0.2'], local: ['10.0.0.1'], reachable: ['10.0.0.1', '10.0.0.2'], has: true },
  { name: 'eTP Local but not externally accessible: cluster policy', policy: { ...ETP_LOCAL, externallyAccessible: false }, eps: [{ ip: '10.0.0.1', local: true }, { ip: '10.0.0.2' }], cluster: ['10.0.0.1', '10.0.0.2'], local: [], reachable: ['10.0.0.1', '10.0.0.2'], has: true },
];

for (const c of CASES) {
  test(`CategorizeEndpoints: ${c.name}`, () => {
    const r = categorizeEndpoints(c.eps.map(mk), c.policy, NODE, ZONE);
    assert.deepEqual(r.clusterEndpoints.map((e) => e.ip), c.cluster, 'cluster');
    assert.deepEqual(r.localEndpoints.map((e) => e.ip), c.local, 'local');
    assert.deepEqual(r.allReachableEndpoints.map((e) => e.ip), c.reachable, 'reachable');
    assert.equal(r.hasEndpoints, c.has, 'hasAnyEndpoints');
  });
}

test('topologyModeFromHints: PreferSameNode, PreferSameZone, or none', () => {
  assert.equal(topologyModeFromHints([mk({ ip: 'a', nodes: [NODE], zones: [ZONE] })], NODE, ZONE), 'PreferSameNode');
  assert.equal(topologyModeFromHints([mk({ ip: 'a', nodes: ['x'], zones: [ZONE] })], NODE, ZONE), 'PreferSameZone');
  assert.equal(topologyModeFromHints([mk({ ip: 'a', zones: ['x'] })], NODE, ZONE), '');
  assert.equal(topologyModeFromHints([], NODE, ZONE), '');
  assert.equal(topologyModeFromHints([mk({ ip: 'a', zones: [ZONE] })], NODE, ''), '', 'a node without a zone label');
});
