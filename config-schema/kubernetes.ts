/**
 * The subsets of Kubernetes objects nftproxy reads: Service (core/v1), EndpointSlice (discovery.k8s.io/v1) and Node
 * (core/v1). Unknown fields pass through untouched; the fields we use are validated, so a bad object is reported
 * with the field path and skipped while everything else is still programmed.
 * Field semantics: kubernetes `pkg/apis/core/types.go`, `pkg/apis/discovery/types.go`.
 */
import { z } from 'zod';

const ObjectMetaSchema = z.looseObject({
  name: z.string().min(1),
  namespace: z.string().optional(),
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
  resourceVersion: z.string().optional(),
  deletionTimestamp: z.string().nullish(),
});

export const KubeProtocolSchema = z.enum(['TCP', 'UDP', 'SCTP']);

export const ServicePortSpecSchema = z.looseObject({
  name: z.string().optional(),
  protocol: KubeProtocolSchema.default('TCP'),
  port: z.number().int().min(1).max(65535),
  targetPort: z.union([z.number().int().min(1).max(65535), z.string().min(1)]).optional(),
  nodePort: z.number().int().min(0).max(65535).optional(),
});

export const ServiceSchema = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.literal('Service').optional(),
  metadata: ObjectMetaSchema,
  spec: z.looseObject({
    type: z.enum(['ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName']).default('ClusterIP'),
    clusterIP: z.string().optional(),
    clusterIPs: z.array(z.string()).optional(),
    ipFamilies: z.array(z.enum(['IPv4', 'IPv6'])).optional(),
    ports: z.array(ServicePortSpecSchema).default([]),
    externalIPs: z.array(z.string()).optional(),
    loadBalancerSourceRanges: z.array(z.string()).optional(),
    externalTrafficPolicy: z.enum(['Cluster', 'Local']).optional(),
    internalTrafficPolicy: z.enum(['Cluster', 'Local']).optional(),
    healthCheckNodePort: z.number().int().min(0).max(65535).optional(),
    sessionAffinity: z.enum(['None', 'ClientIP']).optional(),
    sessionAffinityConfig: z.looseObject({
      clientIP: z.looseObject({ timeoutSeconds: z.number().int().min(1).max(86400).optional() }).optional(),
    }).optional(),
    trafficDistribution: z.string().optional(),
  }),
  status: z.looseObject({
    loadBalancer: z.looseObject({
      ingress: z.array(z.looseObject({ ip: z.string().optional(), hostname: z.string().optional(), ipMode: z.enum(['VIP', 'Proxy']).optional() })).optional(),
    }).optional(),
  }).optional(),
});
export type Service = z.infer<typeof ServiceSchema>;

export const EndpointSliceSchema = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.literal('EndpointSlice').optional(),
  metadata: ObjectMetaSchema,
  addressType: z.enum(['IPv4', 'IPv6', 'FQDN']),
  endpoints: z.array(z.looseObject({
    addresses: z.array(z.string()).min(1),
    conditions: z.looseObject({ ready: z.boolean().nullish(), serving: z.boolean().nullish(), terminating: z.boolean().nullish() }).optional(),
    nodeName: z.string().nullish(),
    zone: z.string().nullish(),
    hints: z.looseObject({
      forZones: z.array(z.looseObject({ name: z.string() })).nullish(),
      forNodes: z.array(z.looseObject({ name: z.string() })).nullish(),
    }).nullish(),
  })).nullish().transform((v) => v ?? []),
  ports: z.array(z.looseObject({
    name: z.string().nullish(),
    port: z.number().int().min(0).max(65535).nullish(),
    protocol: KubeProtocolSchema.nullish(),
  })).nullish().transform((v) => v ?? []),
});
export type EndpointSlice = z.infer<typeof EndpointSliceSchema>;

export const NodeSchema = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.literal('Node').optional(),
  metadata: ObjectMetaSchema,
  spec: z.looseObject({
    podCIDR: z.string().optional(),
    podCIDRs: z.array(z.string()).optional(),
    taints: z.array(z.looseObject({ key: z.string(), effect: z.string().optional() })).nullish(),
  }).optional(),
  status: z.looseObject({
    addresses: z.array(z.looseObject({ type: z.string(), address: z.string() })).optional(),
  }).optional(),
});
export type Node = z.infer<typeof NodeSchema>;

/** A Kubernetes `List` as kubectl prints it: items of any kind. */
export const KubeListSchema = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.string().refine((k) => k === 'List' || k.endsWith('List'), { message: 'expected a List (kubectl get ... -o json)' }),
  items: z.array(z.looseObject({ kind: z.string().optional() })),
});

/** Labels with meaning to the proxy (kubernetes `pkg/proxy/apis/well_known_labels.go`, discovery/v1). */
export const LABEL = {
  serviceProxyName: 'service.kubernetes.io/service-proxy-name',
  headless: 'service.kubernetes.io/headless',
  serviceName: 'kubernetes.io/service-name',
  zone: 'topology.kubernetes.io/zone',
} as const;
/** The annotation carrying when an EndpointSlice's change was triggered (RFC 3339 Nano). */
export const ANNOTATION_LAST_CHANGE_TRIGGER_TIME = 'endpoints.kubernetes.io/last-change-trigger-time';
