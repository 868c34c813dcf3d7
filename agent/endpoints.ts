/**
 * Endpoint categorisation, exactly upstream's `CategorizeEndpoints` and `topologyModeFromHints`
 * (kubernetes `pkg/proxy/topology.go`; reference kube-proxy-nftables.md §5.3), with the PreferSameTrafficDistribution
 * feature enabled (GA upstream).
 */
import type { Endpoint } from '../config-schema/snapshot.ts';

/** What the categorisation needs to know of a ServicePort (serviceport.go UsesClusterEndpoints/UsesLocalEndpoints). */
export interface PolicyView {
  internalPolicyLocal: boolean;
  externalPolicyLocal: boolean;
  /** nodePort != 0, or LoadBalancer VIPs, or externalIPs. */
  externallyAccessible: boolean;
}

/** `!iTP.Local || ExternallyAccessible`: even eTP=Local needs cluster endpoints, for the short-circuit. */
export const usesClusterEndpoints = (p: PolicyView): boolean => !p.internalPolicyLocal || p.externallyAccessible;
/** `iTP.Local || (eTP.Local && ExternallyAccessible)`. */
export const usesLocalEndpoints = (p: PolicyView): boolean => p.internalPolicyLocal || (p.externalPolicyLocal && p.externallyAccessible);

/** The result of {@link categorizeEndpoints}. */
export interface Categorized {
  clusterEndpoints: Endpoint[];
  localEndpoints: Endpoint[];
  allReachableEndpoints: Endpoint[];
  hasEndpoints: boolean;
}

type TopologyMode = '' | 'PreferSameNode' | 'PreferSameZone';

/** Upstream's topologyModeFromHints: hints are used only when every READY endpoint has them (all-or-nothing). */
export function topologyModeFromHints(endpoints: readonly Endpoint[], nodeName: string, zone: string): TopologyMode {
  let hasForNode = false, allNodeHints = true, hasForZone = false, allZoneHints = true;
  for (const ep of endpoints) {
    if (!ep.ready) continue;
    if (!ep.nodeHints?.length) allNodeHints = false;
    else if (ep.nodeHints.includes(nodeName)) hasForNode = true;
    if (!ep.zoneHints?.length) allZoneHints = false;
    else if (ep.zoneHints.includes(zone)) hasForZone = true;
  }
  if (allNodeHints && hasForNode) return 'PreferSameNode';
  if (allZoneHints && hasForZone) return 'PreferSameZone';
  return '';
}

function availableForTopology(ep: Endpoint, mode: TopologyMode, nodeName: string, zone: string): boolean {
  switch (mode) {
    case '': return true;
    case 'PreferSameNode': return ep.nodeHints?.includes(nodeName) ?? false;
    case 'PreferSameZone': return ep.zoneHints?.includes(zone) ?? false;
  }
}

const key = (e: Endpoint) => `${e.ip}:${e.port}`;

/**
 * Upstream's CategorizeEndpoints. `endpoints` must already be deduplicated and sorted. Returns the cluster
 * endpoints (ready and topology-available; else serving-and-terminating), the local endpoints (local ready; else
 * local serving-and-terminating), their union, and whether any endpoint is usable anywhere.
 */
export function categorizeEndpoints(endpoints: readonly Endpoint[], p: PolicyView, nodeName: string, zone: string): Categorized {
  let clusterEndpoints: Endpoint[] = [];
  let hasEndpoints = false;
  if (usesClusterEndpoints(p)) {
    const mode = topologyModeFromHints(endpoints, nodeName, zone);
    clusterEndpoints = endpoints.filter((e) => e.ready && availableForTopology(e, mode, nodeName, zone));
    if (clusterEndpoints.length === 0) clusterEndpoints = endpoints.filter((e) => e.serving && e.terminating);
    if (clusterEndpoints.length > 0) hasEndpoints = true;
  }
  if (!usesLocalEndpoints(p)) return { clusterEndpoints, localEndpoints: [], allReachableEndpoints: clusterEndpoints, hasEndpoints };

  let localReady = false, localServingTerminating = false;
  for (const e of endpoints) {
    if (e.ready) {
      hasEndpoints = true;
      if (e.isLocal) localReady = true;
    } else if (e.serving && e.terminating) {
      hasEndpoints = true;
      if (e.isLocal) localServingTerminating = true;
    }
  }
  let localEndpoints: Endpoint[] = [];
  if (localReady) localEndpoints = endpoints.filter((e) => e.isLocal && e.ready);
  else if (localServingTerminating) localEndpoints = endpoints.filter((e) => e.isLocal && e.serving && e.terminating);

  if (!usesClusterEndpoints(p)) return { clusterEndpoints, localEndpoints, allReachableEndpoints: localEndpoints, hasEndpoints };
  const merged = new Map<string, Endpoint>();
  for (const e of clusterEndpoints) merged.set(key(e), e);
  for (const e of localEndpoints) merged.set(key(e), e);
  const allReachableEndpoints = [...merged.values()].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  return { clusterEndpoints, localEndpoints, allReachableEndpoints, hasEndpoints };
}
