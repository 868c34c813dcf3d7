/**
 * The agent config: JSON in the shape of kube-proxy's `KubeProxyConfiguration` (kubeproxy.config.k8s.io/v1alpha1),
 * with kube-proxy's field names and defaults (kubernetes `pkg/proxy/apis/config/types.go`, `v1alpha1/defaults.go`;
 * reference kube-proxy-nftables.md §10), plus our own `source`, `tableName`, `ipFamilies` and `serviceCIDRs`.
 * This schema is the single source of truth: types are inferred from it, and `nftproxy config schema` exports it.
 */
import { z } from 'zod';

/**
 * Parses a Go duration string (`"300ms"`, `"1s"`, `"1h30m"`, `"0"`, `"0s"`) into milliseconds.
 * Returns null when the text is not a duration.
 */
export function parseDuration(text: string): number | null {
  if (text === '0') return 0;
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy;
  const unit: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  let m: RegExpExecArray | null;
  let consumed = 0;
  while ((m = re.exec(text)) !== null) {
    total += Number(m[1]) * unit[m[2]];
    consumed = re.lastIndex;
  }
  return consumed === text.length && consumed > 0 ? total : null;
}

/**
 * A duration field: a Go duration string (`"1s"`, `"500ms"`, `"1h30m"`), parsed to milliseconds. The JSON Schema
 * marks it `format: "duration"` so the generated reference shows it as a duration.
 */
const duration = (def: string, what: string) =>
  z.string()
    .default(def)
    .meta({ description: what, format: 'duration' })
    .transform((s, ctx) => {
      const ms = parseDuration(s);
      if (ms === null) {
        ctx.addIssue({ code: 'custom', message: `expected a duration such as "1s", "500ms" or "1h30m", got ${JSON.stringify(s)}` });
        return z.NEVER;
      }
      return ms;
    });

const cidrLike = /^[0-9a-fA-F:.]+\/\d{1,3}$/;

export const SourceSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('file').describe('Read the objects from a JSON file (bare metal)'),
    path: z.string().min(1).describe('A Kubernetes List of Services, EndpointSlices and an optional Node (kubectl get ... -o json). Relative to the config file.'),
  }).strict(),
  z.object({ type: z.literal('kubernetes').describe('List and watch the Kubernetes API (in-cluster config, or clientConnection.kubeconfig)') }).strict(),
]).describe('Where Services and EndpointSlices come from: the Kubernetes API, or a JSON file on bare metal');

export const ConntrackSchema = z.object({
  maxPerCore: z.number().int().min(0).default(32768).describe('Conntrack entries per CPU; 0 leaves nf_conntrack_max alone'),
  min: z.number().int().min(0).default(131072).describe('Minimum nf_conntrack_max'),
  tcpEstablishedTimeout: duration('24h', 'nf_conntrack_tcp_timeout_established; 0 leaves it alone'),
  tcpCloseWaitTimeout: duration('1h', 'nf_conntrack_tcp_timeout_close_wait; 0 leaves it alone'),
  tcpBeLiberal: z.boolean().default(false).describe('Set nf_conntrack_tcp_be_liberal'),
  udpTimeout: duration('0s', 'nf_conntrack_udp_timeout; 0 leaves it alone'),
  udpStreamTimeout: duration('0s', 'nf_conntrack_udp_timeout_stream; 0 leaves it alone'),
}).strict().prefault({}).describe('Conntrack sysctls set at startup (kube-proxy conntrack block)');

export const NftablesSchema = z.object({
  masqueradeAll: z.boolean().default(false).describe('SNAT all traffic sent to ClusterIPs'),
  masqueradeBit: z.number().int().min(0).max(31).default(14).describe('The fwmark bit that marks packets to masquerade (0-31)'),
  syncPeriod: duration('30s', 'Retry interval after a failed sync; health turns bad after 2 x syncPeriod of unsynced changes'),
  minSyncPeriod: duration('1s', 'Minimum time between the end of one sync and the start of the next; 0 syncs on every change'),
}).strict().prefault({}).describe('nftables mode settings (kube-proxy nftables block)');

export const ClientConnectionSchema = z.object({
  kubeconfig: z.string().default('').describe('Path of a kubeconfig; empty = in-cluster config'),
  acceptContentTypes: z.string().default('').describe('Accept header of API requests; accepted for compatibility, JSON is always used'),
  contentType: z.string().default('application/vnd.kubernetes.protobuf').describe('Content type of API requests; accepted for compatibility, JSON is always used'),
  qps: z.number().default(5).describe('Client-side rate limit of API requests per second (kube-proxy field; the watch uses few requests)'),
  burst: z.number().int().default(10).describe('Client-side burst of API requests (kube-proxy field)'),
}).strict().prefault({}).describe('Kubernetes API client settings');

export const DetectLocalSchema = z.object({
  bridgeInterface: z.string().default('').describe('Pod bridge interface for detectLocalMode BridgeInterface'),
  interfaceNamePrefix: z.string().default('').describe('Pod interface name prefix for detectLocalMode InterfaceNamePrefix'),
  clusterCIDRs: z.array(z.string().regex(cidrLike, 'expected a CIDR such as 10.244.0.0/16')).default([]).describe('Cluster CIDRs (one per family); overrides clusterCIDR'),
}).strict().prefault({}).describe('Settings of the local-traffic detector chosen by detectLocalMode (kube-proxy detectLocal block)');

/** kube-proxy fields that exist in KubeProxyConfiguration but do not apply to nftables mode: accepted, ignored. */
const ignored = z.unknown().optional().describe('Accepted for compatibility with KubeProxyConfiguration; ignored');

export const ConfigSchema = z.object({
  apiVersion: z.string().optional().describe('kubeproxy.config.k8s.io/v1alpha1, if given'),
  kind: z.literal('KubeProxyConfiguration').optional().describe('KubeProxyConfiguration, if given'),
  mode: z.enum(['', 'nftables']).optional().describe('Only nftables (or empty) is accepted'),
  hostnameOverride: z.string().default('').describe('The node name; empty = the NODE_NAME environment variable, else the hostname'),
  bindAddress: z.string().default('0.0.0.0').describe('Overrides the node primary IP when set to a specific address'),
  clusterCIDR: z.string().default('').describe('The cluster CIDR(s), comma-separated for dual-stack, for detectLocalMode ClusterCIDR'),
  detectLocalMode: z.enum(['ClusterCIDR', 'NodeCIDR', 'BridgeInterface', 'InterfaceNamePrefix']).default('ClusterCIDR')
    .describe('How traffic from local pods is detected'),
  detectLocal: DetectLocalSchema,
  nodePortAddresses: z.array(z.string()).default(['primary']).describe('NodePort addresses: "primary", "all", "localhost" or CIDRs'),
  healthzBindAddress: z.string().default('0.0.0.0:10256').describe('host:port of the health server; empty disables it'),
  metricsBindAddress: z.string().default('127.0.0.1:10249').describe('host:port of the metrics server; empty disables it'),
  oomScoreAdj: z.number().int().min(-1000).max(1000).default(-999)
    .describe('Written to /proc/self/oom_score_adj at startup (-1000..1000); a warning when not permitted'),
  configSyncPeriod: duration('15m', 'Informer resync period (kube-proxy field; watches keep the state current)'),
  conntrack: ConntrackSchema,
  clientConnection: ClientConnectionSchema,
  nftables: NftablesSchema,
  // nftproxy's own fields
  source: SourceSchema.default({ type: 'kubernetes' }),
  tableName: z.string().min(1).max(255).regex(/^[A-Za-z0-9_.-]+$/, 'letters, digits, "_", "." and "-" only').default('nftproxy')
    .describe('Name of our nftables tables (ip and ip6)'),
  ipFamilies: z.array(z.enum(['IPv4', 'IPv6'])).min(1).default(['IPv4', 'IPv6'])
    .describe('IP families to program; IPv6 is dropped at startup when the kernel has no IPv6'),
  serviceCIDRs: z.array(z.string().regex(cidrLike, 'expected a CIDR such as 10.96.0.0/16')).default([])
    .describe('Service CIDRs: new connections to unallocated IPs in them are dropped'),
  // accepted and ignored (kube-proxy compatibility)
  featureGates: ignored, iptables: ignored, ipvs: ignored, winkernel: ignored, logging: ignored, portRange: ignored,
  enableProfiling: ignored, showHiddenMetricsForVersion: ignored, bindAddressHardFail: ignored, udpIdleTimeout: ignored,
  linux: ignored, windowsRunAsService: ignored,
}).strict();

/** The config after defaults (durations in ms). */
export type Config = z.infer<typeof ConfigSchema>;
/** The config as written in the file. */
export type ConfigInput = z.input<typeof ConfigSchema>;

/** The cluster CIDRs the config names: detectLocal.clusterCIDRs, else clusterCIDR split on commas. */
export function clusterCIDRsOf(c: Config): string[] {
  if (c.detectLocal.clusterCIDRs.length) return c.detectLocal.clusterCIDRs;
  return c.clusterCIDR.split(',').map((s) => s.trim()).filter(Boolean);
}
