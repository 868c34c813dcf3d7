/**
 * kube-proxy's metrics for nftables mode, with upstream's names, labels and buckets
 * (kubernetes `pkg/proxy/metrics/metrics.go`; reference kube-proxy-nftables.md §9). One registry per agent:
 * nothing here is global, so tests can build as many agents as they like.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** `ExponentialBuckets(0.001, 2, 15)`: 1 ms … 16.384 s (metrics.go, sync duration histograms). */
export const SYNC_DURATION_BUCKETS: readonly number[] = Array.from({ length: 15 }, (_, i) => 0.001 * 2 ** i);

/** Network programming latency buckets (metrics.go): 0.25, 0.5, 1..59 step 1, 60..115 step 5, 120..300 step 30 (s). */
export const NETWORK_PROGRAMMING_BUCKETS: readonly number[] = [
  0.25, 0.5,
  ...Array.from({ length: 59 }, (_, i) => i + 1),
  ...Array.from({ length: 12 }, (_, i) => 60 + 5 * i),
  ...Array.from({ length: 7 }, (_, i) => 120 + 30 * i),
];

/** The label values kube-proxy uses for `ip_family`. */
export type IPFamilyLabel = 'IPv4' | 'IPv6';

/** Every `kubeproxy_*` metric that applies to nftables mode, in one registry. */
export interface ProxyMetrics {
  registry: Registry;
  syncProxyRulesDuration: Histogram<'ip_family'>;
  syncFullProxyRulesDuration: Histogram<'ip_family'>;
  syncPartialProxyRulesDuration: Histogram<'ip_family'>;
  syncProxyRulesLastTimestamp: Gauge<'ip_family'>;
  syncProxyRulesLastQueuedTimestamp: Gauge<'ip_family'>;
  networkProgrammingDuration: Histogram<'ip_family'>;
  endpointChangesPending: Gauge;
  endpointChangesTotal: Counter;
  serviceChangesPending: Gauge;
  serviceChangesTotal: Counter;
  noLocalEndpointsTotal: Gauge<'traffic_policy' | 'ip_family'>;
  nftablesSyncFailuresTotal: Counter<'ip_family'>;
  nftablesCleanupFailuresTotal: Counter<'ip_family'>;
  healthzTotal: Counter<'code'>;
  livezTotal: Counter<'code'>;
  conntrackReconcilerSyncDuration: Histogram<'ip_family'>;
  conntrackReconcilerDeletedEntriesTotal: Counter<'ip_family'>;
}

/**
 * Builds a fresh registry with every metric registered, plus Node process metrics (`process_*`, `nodejs_*`)
 * unless `processMetrics` is false.
 */
export function createProxyMetrics(opts: { processMetrics?: boolean } = {}): ProxyMetrics {
  const registry = new Registry();
  if (opts.processMetrics !== false) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const syncHistogram = (name: string, help: string) =>
    new Histogram({ name, help, labelNames: ['ip_family'] as const, buckets: [...SYNC_DURATION_BUCKETS], registers });
  return {
    registry,
    syncProxyRulesDuration: syncHistogram('kubeproxy_sync_proxy_rules_duration_seconds', 'SyncProxyRules latency in seconds'),
    syncFullProxyRulesDuration: syncHistogram('kubeproxy_sync_full_proxy_rules_duration_seconds', 'SyncProxyRules latency in seconds for full resyncs'),
    syncPartialProxyRulesDuration: syncHistogram('kubeproxy_sync_partial_proxy_rules_duration_seconds', 'SyncProxyRules latency in seconds for partial resyncs'),
    syncProxyRulesLastTimestamp: new Gauge({ name: 'kubeproxy_sync_proxy_rules_last_timestamp_seconds', help: 'The last time proxy rules were successfully synced', labelNames: ['ip_family'] as const, registers }),
    syncProxyRulesLastQueuedTimestamp: new Gauge({ name: 'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds', help: 'The last time a sync of proxy rules was queued', labelNames: ['ip_family'] as const, registers }),
    networkProgrammingDuration: new Histogram({ name: 'kubeproxy_network_programming_duration_seconds', help: 'In Cluster Network Programming Latency in seconds', labelNames: ['ip_family'] as const, buckets: [...NETWORK_PROGRAMMING_BUCKETS], registers }),
    endpointChangesPending: new Gauge({ name: 'kubeproxy_sync_proxy_rules_endpoint_changes_pending', help: 'Pending proxy rules Endpoint changes', registers }),
    endpointChangesTotal: new Counter({ name: 'kubeproxy_sync_proxy_rules_endpoint_changes_total', help: 'Cumulative proxy rules Endpoint changes', registers }),
    serviceChangesPending: new Gauge({ name: 'kubeproxy_sync_proxy_rules_service_changes_pending', help: 'Pending proxy rules Service changes', registers }),
    serviceChangesTotal: new Counter({ name: 'kubeproxy_sync_proxy_rules_service_changes_total', help: 'Cumulative proxy rules Service changes', registers }),
    noLocalEndpointsTotal: new Gauge({ name: 'kubeproxy_sync_proxy_rules_no_local_endpoints_total', help: 'Number of services with a Local traffic policy and no endpoints', labelNames: ['traffic_policy', 'ip_family'] as const, registers }),
    nftablesSyncFailuresTotal: new Counter({ name: 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total', help: 'Cumulative proxy nftables sync failures', labelNames: ['ip_family'] as const, registers }),
    nftablesCleanupFailuresTotal: new Counter({ name: 'kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total', help: 'Cumulative proxy nftables cleanup failures', labelNames: ['ip_family'] as const, registers }),
    healthzTotal: new Counter({ name: 'kubeproxy_proxy_healthz_total', help: 'Cumulative proxy healthz HTTP status', labelNames: ['code'] as const, registers }),
    livezTotal: new Counter({ name: 'kubeproxy_proxy_livez_total', help: 'Cumulative proxy livez HTTP status', labelNames: ['code'] as const, registers }),
    conntrackReconcilerSyncDuration: syncHistogram('kubeproxy_conntrack_reconciler_sync_duration_seconds', 'ReconcileConntrackFlowsLatency latency in seconds'),
    conntrackReconcilerDeletedEntriesTotal: new Counter({ name: 'kubeproxy_conntrack_reconciler_deleted_entries_total', help: 'Cumulative conntrack flows deleted by conntrack reconciler', labelNames: ['ip_family'] as const, registers }),
  };
}

/** Every metric name `createProxyMetrics` registers (for the `/metrics` completeness test). */
export const PROXY_METRIC_NAMES: readonly string[] = [
  'kubeproxy_sync_proxy_rules_duration_seconds',
  'kubeproxy_sync_full_proxy_rules_duration_seconds',
  'kubeproxy_sync_partial_proxy_rules_duration_seconds',
  'kubeproxy_sync_proxy_rules_last_timestamp_seconds',
  'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds',
  'kubeproxy_network_programming_duration_seconds',
  'kubeproxy_sync_proxy_rules_endpoint_changes_pending',
  'kubeproxy_sync_proxy_rules_endpoint_changes_total',
  'kubeproxy_sync_proxy_rules_service_changes_pending',
  'kubeproxy_sync_proxy_rules_service_changes_total',
  'kubeproxy_sync_proxy_rules_no_local_endpoints_total',
  'kubeproxy_sync_proxy_rules_nftables_sync_failures_total',
  'kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total',
  'kubeproxy_proxy_healthz_total',
  'kubeproxy_proxy_livez_total',
  'kubeproxy_conntrack_reconciler_sync_duration_seconds',
  'kubeproxy_conntrack_reconciler_deleted_entries_total',
];

/** The change counters a cluster state keeps (ClusterState.serviceChanges / endpointChanges: cumulative counts). */
export interface ChangeCounts {
  serviceChanges: number;
  endpointChanges: number;
}

/**
 * Feeds `kubeproxy_sync_proxy_rules_{service,endpoint}_changes_{total,pending}` from a state's cumulative change
 * counts: each `observe()` adds the changes since the previous call to the totals and to the pending gauges (the
 * syncer resets the pending gauges to 0 when it takes the changes).
 */
export class ChangeMetrics {
  readonly #m: ProxyMetrics;
  #services = 0;
  #endpoints = 0;

  constructor(metrics: ProxyMetrics) {
    this.#m = metrics;
  }

  /** Records the changes counted since the previous call. */
  observe(c: ChangeCounts): void {
    const ds = c.serviceChanges - this.#services;
    const de = c.endpointChanges - this.#endpoints;
    this.#services = c.serviceChanges;
    this.#endpoints = c.endpointChanges;
    if (ds > 0) { this.#m.serviceChangesTotal.inc(ds); this.#m.serviceChangesPending.inc(ds); }
    if (de > 0) { this.#m.endpointChangesTotal.inc(de); this.#m.endpointChangesPending.inc(de); }
  }
}
