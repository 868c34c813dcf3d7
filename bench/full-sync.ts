/**
 * The batch of a cold full sync of Kubernetes objects, the way the agent builds it (cluster state → snapshot →
 * compile → plan), for the benchmarks that need the ops but not the stage timings (bench/run.ts times each stage
 * itself). IPv4 only, node `node-1`, cluster CIDR `clusterCIDR`.
 */
import { ConfigSchema } from '../config-schema/config.ts';
import { ClusterState } from '../agent/cluster-state.ts';
import { SnapshotBuilder } from '../agent/snapshot.ts';
import { compile, plan } from '../rules/index.ts';
import type { BatchOp } from '../netlink/types.ts';

/** Ops of the full-sync batch for `services` and `slices` (Kubernetes objects). @throws like compile(). */
export function fullSyncOps(objects: { services: unknown[]; slices: unknown[] }, clusterCIDR: string): BatchOp[] {
  const cfg = ConfigSchema.parse({ clusterCIDR, ipFamilies: ['IPv4'], source: { type: 'file', path: 'x' } });
  const state = new ClusterState('node-1', () => {});
  state.replace('Service', objects.services);
  state.replace('EndpointSlice', objects.slices);
  const builder = new SnapshotBuilder(cfg, () => {});
  builder.invalidate(state.checkout());
  return plan(null, compile(builder.build(state, 'IPv4')), { full: true, now: 0, stale: new Map() }).ops;
}
