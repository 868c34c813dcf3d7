/**
 * The snapshot: the typed desired state of ONE IP family, which the pure compiler `rules/compile.ts` turns into
 * a ruleset. It is plain data (JSON-serialisable), so it can be printed (`nftproxy render --snapshot`) and replayed.
 *
 * The agent builds it from the trackers: ServicePorts with their endpoints already categorised the way upstream's
 * `CategorizeEndpoints` does (kubernetes `pkg/proxy/topology.go`), the node's IPs and zone, and the proxy config
 * fields the compiler needs. Addresses are strings in canonical form (IPv4 dotted quad, IPv6 RFC 5952).
 */
import { z } from 'zod';

/** An endpoint of a ServicePort: one address and the resolved target port. */
export const EndpointSchema = z.object({
  ip: z.string().describe('Endpoint address, of the snapshot family'),
  port: z.number().int().min(1).max(65535).describe('Resolved target port (host order)'),
  isLocal: z.boolean().describe('The endpoint runs on this node (nodeName equals the node name)'),
  ready: z.boolean(),
  serving: z.boolean(),
  terminating: z.boolean(),
  zoneHints: z.array(z.string()).optional(),
  nodeHints: z.array(z.string()).optional(),
});
export type Endpoint = z.infer<typeof EndpointSchema>;

export const ProtocolSchema = z.enum(['TCP', 'UDP', 'SCTP']);
export type Protocol = z.infer<typeof ProtocolSchema>;

/** One ServicePort of one family: `namespace/name:portName` + protocol, with everything the compiler needs. */
export const ServicePortSchema = z.object({
  namespace: z.string(),
  name: z.string(),
  portName: z.string().describe('spec.ports[].name; "" for an unnamed port'),
  protocol: ProtocolSchema,
  clusterIP: z.string().describe('The ClusterIP of this family'),
  port: z.number().int().min(1).max(65535),
  nodePort: z.number().int().min(0).max(65535).default(0).describe('0 when none'),
  externalIPs: z.array(z.string()).default([]),
  loadBalancerIPs: z.array(z.string()).default([]).describe('status.loadBalancer.ingress[].ip with ipMode VIP or unset'),
  loadBalancerSourceRanges: z.array(z.string()).default([]),
  /** ClientIP session affinity timeout in seconds; null when sessionAffinity is None. */
  affinityTimeoutSeconds: z.number().int().positive().nullable().default(null),
  externalPolicyLocal: z.boolean().default(false),
  internalPolicyLocal: z.boolean().default(false),
  healthCheckNodePort: z.number().int().min(0).max(65535).default(0),
  /** Endpoints after CategorizeEndpoints (topology.go). */
  clusterEndpoints: z.array(EndpointSchema).default([]),
  localEndpoints: z.array(EndpointSchema).default([]),
  allReachableEndpoints: z.array(EndpointSchema).default([]),
  /** True iff any endpoint anywhere is ready, or serving and terminating. */
  hasEndpoints: z.boolean().default(false),
});
export type ServicePort = z.infer<typeof ServicePortSchema>;
export type ServicePortInput = z.input<typeof ServicePortSchema>;

/** How local (pod) traffic is detected: kube-proxy `--detect-local-mode`, already resolved to this family. */
export const LocalDetectorSchema = z.discriminatedUnion('mode', [
  z.object({ mode: z.literal('none') }),
  z.object({ mode: z.literal('cidr'), cidrs: z.array(z.string()).min(1).describe('ClusterCIDR or NodeCIDR of this family') }),
  z.object({ mode: z.literal('interface'), name: z.string().describe('Bridge interface, exact name') }),
  z.object({ mode: z.literal('interfacePrefix'), prefix: z.string() }),
]);
export type LocalDetector = z.infer<typeof LocalDetectorSchema>;

/** The desired state of one family. */
export const SnapshotSchema = z.object({
  family: z.enum(['ipv4', 'ipv6']),
  tableName: z.string().min(1).max(255).default('nftproxy'),
  masqueradeAll: z.boolean().default(false),
  masqueradeBit: z.number().int().min(0).max(31).default(14),
  localDetector: LocalDetectorSchema.default({ mode: 'none' }),
  /** NodePort addresses for this family: null = match all (fib daddr type local), else the node's matching IPs. */
  nodePortIPs: z.array(z.string()).nullable().default(null),
  /** ServiceCIDRs of this family; traffic to unallocated IPs in them is dropped. Empty = no drop rule. */
  serviceCIDRs: z.array(z.string()).default([]),
  node: z.object({
    name: z.string(),
    zone: z.string().default(''),
    ips: z.array(z.string()).default([]).describe('Node IPs of this family (primary first)'),
  }),
  servicePorts: z.array(ServicePortSchema),
});
export type Snapshot = z.infer<typeof SnapshotSchema>;
export type SnapshotInput = z.input<typeof SnapshotSchema>;

/** The identity of a ServicePort, `ns/name:portName/protocol`, stable across syncs. */
export function servicePortKey(sp: Pick<ServicePort, 'namespace' | 'name' | 'portName' | 'protocol'>): string {
  return `${sp.namespace}/${sp.name}:${sp.portName}/${sp.protocol}`;
}
