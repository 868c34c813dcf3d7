/**
 * Which conntrack flows are stale, with the semantics of upstream's reconciler (kubernetes
 * `pkg/proxy/conntrack/cleanup.go`, 1.33+; reference kube-proxy-nftables.md §6.2). Pure: the agent dumps UDP flows
 * over ctnetlink (kernel-filtered), asks this module which to delete, and deletes them by tuple and CTA_ID.
 *
 * For every UDP ServicePort (serving ignores traffic policy, topology and terminating state, so UDP behaves like TCP):
 * - a flow whose original destination `ip:port` is a frontend (ClusterIP, ExternalIP or LoadBalancer IP with the
 *   service port) and whose reply source `ip:port` is not one of its serving endpoints is stale;
 * - a flow whose original destination PORT is the NodePort (any IP) and whose reply source is not one of its
 *   serving endpoints is stale.
 * A ServicePort WITHOUT serving endpoints is NOT skipped, unlike the 1.32 reconciler: it takes part with an empty
 * endpoint set, so every flow to it goes (kubernetes PR #139629, fixing #139628: one-way UDP senders kept DNATing
 * to a deleted pod for 13 hours after a scale to zero). A deleted Service is passed by the caller with an empty
 * endpoint set for the same reason (PR #141371). Flows created while nothing served (reply source = the service
 * IP) go too, when endpoints appear or not: their traffic is rejected or re-balanced either way.
 */

/** An address and a port (host order). */
export interface HostPort {
  ip: string;
  port: number;
}

/** One UDP ServicePort as the reconciler sees it. */
export interface UdpServicePort {
  /** ClusterIP, ExternalIPs and LoadBalancer IPs of this family, each with the service port. */
  frontends: HostPort[];
  /** 0 when the ServicePort has no NodePort. */
  nodePort: number;
  /** Every endpoint whose `serving` condition is true (or unset), whatever its policy, zone or termination. */
  servingEndpoints: HostPort[];
}

/** A conntrack flow, decoded from ctnetlink (CTA_TUPLE_ORIG / CTA_TUPLE_REPLY, CTA_ID, CTA_ZONE). */
export interface ConntrackFlow {
  /** IP protocol number (17 = UDP). */
  proto: number;
  origSrc: string;
  origDst: string;
  origSport: number;
  origDport: number;
  replySrc: string;
  replySport: number;
  /** CTA_ID: deletes carry it so a reused tuple is never deleted by mistake. */
  id: number;
  zone: number;
}

const key = (ip: string, port: number) => `${ip}|${port}`;

/** An index of the UDP frontends, built once per reconcile. */
export interface FrontendIndex {
  byFrontend: Map<string, Set<string>>;
  byNodePort: Map<number, Set<string>>;
}

/**
 * Builds the frontend → serving endpoints index. ServicePorts without serving endpoints map to an empty set (every
 * flow to them is stale). When two entries name the same frontend or NodePort, the later one wins, so callers list
 * deleted ServicePorts first and live ones after them.
 */
export function indexUdpServices(services: readonly UdpServicePort[]): FrontendIndex {
  const byFrontend = new Map<string, Set<string>>();
  const byNodePort = new Map<number, Set<string>>();
  for (const sp of services) {
    const eps = new Set(sp.servingEndpoints.map((e) => key(e.ip, e.port)));
    for (const f of sp.frontends) byFrontend.set(key(f.ip, f.port), eps);
    if (sp.nodePort > 0) byNodePort.set(sp.nodePort, eps);
  }
  return { byFrontend, byNodePort };
}

/** The UDP flows that must be deleted. Flows of other protocols are never returned. */
export function staleFlows(flows: readonly ConntrackFlow[], index: FrontendIndex): ConntrackFlow[] {
  const out: ConntrackFlow[] = [];
  for (const f of flows) {
    if (f.proto !== 17) continue;
    const reply = key(f.replySrc, f.replySport);
    const eps = index.byFrontend.get(key(f.origDst, f.origDport));
    if (eps && !eps.has(reply)) { out.push(f); continue; }
    const npEps = index.byNodePort.get(f.origDport);
    if (npEps && !npEps.has(reply)) out.push(f);
  }
  return out;
}
