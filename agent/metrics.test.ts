/** Metrics fed by the agent: network programming latency from the trigger-time annotation, change counters. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigSchema } from '../config-schema/config.ts';
import type { BatchOp } from '../netlink/types.ts';
import { ClusterState } from './cluster-state.ts';
import { SnapshotBuilder } from './snapshot.ts';
import { Syncer } from './syncer.ts';
import { ChangeMetrics, NETWORK_PROGRAMMING_BUCKETS, createProxyMetrics } from './metrics.ts';
import { buildMetricsServer } from './health.ts';

const quiet = { info() {}, warn() {}, error() {}, debug() {} };
const T0 = Date.UTC(2026, 0, 1, 12);
const service = { metadata: { name: 'web', namespace: 'default' }, spec: { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80, protocol: 'TCP' }] } };
const slice = (ips: string[], trigger?: string) => ({
  metadata: { name: 'web-x', namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' }, ...(trigger ? { annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': trigger } } : {}) },
  addressType: 'IPv4', endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true } })), ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
});

test('kubeproxy_network_programming_duration_seconds is measured from the last-change-trigger-time annotation to the sync', async () => {
  let now = T0;
  const state = new ClusterState('node-1', () => {});
  const cfg = ConfigSchema.parse({ clusterCIDR: '10.244.0.0/16', ipFamilies: ['IPv4'], source: { type: 'file', path: 'x' } });
  const metrics = createProxyMetrics({ processMetrics: false });
  const sender = { async sendBatch(ops: readonly BatchOp[]) { return { bytes: ops.length, messages: ops.length, kernelMs: 0 }; } };
  const syncer = new Syncer({ families: ['IPv4'], state, builder: new SnapshotBuilder(cfg, () => {}), sender, now: () => now, log: quiet, metrics });
  state.upsert('Service', service);
  state.upsert('EndpointSlice', slice(['10.244.1.10'], new Date(T0 - 1500).toISOString()));
  await syncer.sync();
  let text = await metrics.registry.metrics();
  assert.match(text, /kubeproxy_network_programming_duration_seconds_count\{ip_family="IPv4"\} 1\n/);
  assert.match(text, /kubeproxy_network_programming_duration_seconds_sum\{ip_family="IPv4"\} 1\.5\n/);
  assert.match(text, /kubeproxy_network_programming_duration_seconds_bucket\{le="1",ip_family="IPv4"\} 0\n/);
  assert.match(text, /kubeproxy_network_programming_duration_seconds_bucket\{le="2",ip_family="IPv4"\} 1\n/);

  // A change without the annotation is not observed; a later annotated one is, measured from its own time.
  now += 60_000;
  state.upsert('EndpointSlice', slice(['10.244.1.10', '10.244.1.11']));
  await syncer.sync();
  state.upsert('EndpointSlice', slice(['10.244.1.11'], new Date(now - 250).toISOString()));
  now += 3000;
  await syncer.sync();
  text = await metrics.registry.metrics();
  assert.match(text, /kubeproxy_network_programming_duration_seconds_count\{ip_family="IPv4"\} 2\n/);
  assert.match(text, /kubeproxy_network_programming_duration_seconds_sum\{ip_family="IPv4"\} 4\.75\n/);
});

test('network programming buckets are upstream\'s: 0.25, 0.5, 1..59, 60..115 by 5, 120..300 by 30', () => {
  assert.equal(NETWORK_PROGRAMMING_BUCKETS.length, 2 + 59 + 12 + 7);
  assert.deepEqual(NETWORK_PROGRAMMING_BUCKETS.slice(0, 4), [0.25, 0.5, 1, 2]);
  assert.deepEqual(NETWORK_PROGRAMMING_BUCKETS.slice(60, 63), [59, 60, 65]);
  assert.deepEqual(NETWORK_PROGRAMMING_BUCKETS.slice(-3), [240, 270, 300]);
});

test('change counters: totals accumulate and pending counts up until the syncer takes the changes', async () => {
  const state = new ClusterState('node-1', () => {});
  const metrics = createProxyMetrics({ processMetrics: false });
  const changes = new ChangeMetrics(metrics);
  state.upsert('Service', service);
  state.upsert('EndpointSlice', slice(['10.244.1.10']));
  state.upsert('EndpointSlice', slice(['10.244.1.11']));
  state.upsert('EndpointSlice', slice(['10.244.1.11'])); // no-op update: not a change
  changes.observe(state);
  changes.observe(state); // nothing new
  let text = await metrics.registry.metrics();
  assert.match(text, /kubeproxy_sync_proxy_rules_service_changes_total 1\n/);
  assert.match(text, /kubeproxy_sync_proxy_rules_endpoint_changes_total 2\n/);
  assert.match(text, /kubeproxy_sync_proxy_rules_endpoint_changes_pending 2\n/);
  const cfg = ConfigSchema.parse({ clusterCIDR: '10.244.0.0/16', ipFamilies: ['IPv4'], source: { type: 'file', path: 'x' } });
  const sender = { async sendBatch() { return { bytes: 0, messages: 0, kernelMs: 0 }; } };
  await new Syncer({ families: ['IPv4'], state, builder: new SnapshotBuilder(cfg, () => {}), sender, now: () => T0, log: quiet, metrics }).sync();
  text = await metrics.registry.metrics();
  assert.match(text, /kubeproxy_sync_proxy_rules_endpoint_changes_pending 0\n/);
  assert.match(text, /kubeproxy_sync_proxy_rules_service_changes_pending 0\n/);
  state.remove('Service', service);
  changes.observe(state);
  text = await metrics.registry.metrics();
  assert.match(text, /kubeproxy_sync_proxy_rules_service_changes_total 2\n/);
  assert.match(text, /kubeproxy_sync_proxy_rules_service_changes_pending 1\n/);
});

test('the metrics server\'s /healthz is a plain "ok" (not the proxy health); unknown paths are 404', async () => {
  const app = buildMetricsServer(createProxyMetrics({ processMetrics: false }), {});
  const r = await app.inject({ method: 'GET', url: '/healthz' });
  assert.equal(r.statusCode, 200);
  assert.equal(r.body, 'ok');
  assert.equal(r.headers['content-type'], 'text/plain; charset=utf-8');
  assert.equal((await app.inject({ method: 'GET', url: '/nope' })).statusCode, 404);
});
