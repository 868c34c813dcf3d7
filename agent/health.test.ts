import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ProxyHealth, buildHealthServer, buildMetricsServer, formatGoTime, parseBindAddress } from './health.ts';
import { createProxyMetrics, PROXY_METRIC_NAMES } from './metrics.ts';

function fakeClock(start = Date.UTC(2026, 0, 1)) {
  let t = start;
  return { now: () => t, advance: (ms: number) => { t += ms; } };
}

const SYNC_PERIOD_MS = 30_000;

test('formatGoTime trims trailing zeros like Go RFC3339Nano, zero time for null', () => {
  assert.equal(formatGoTime(Date.UTC(2026, 0, 1, 12, 0, 0, 120)), '2026-01-01T12:00:00.12Z');
  assert.equal(formatGoTime(Date.UTC(2026, 0, 1, 12, 0, 0, 0)), '2026-01-01T12:00:00Z');
  assert.equal(formatGoTime(null), '0001-01-01T00:00:00Z');
});

test('a family is healthy at start, while a queued update is younger than 2×syncPeriod, unhealthy after', () => {
  const clock = fakeClock();
  const h = new ProxyHealth(clock, 2 * SYNC_PERIOD_MS);
  h.updated('IPv4');
  assert.equal(h.health().healthy, true);
  h.queuedUpdate('IPv4');
  clock.advance(2 * SYNC_PERIOD_MS - 1);
  assert.equal(h.health().healthy, true);
  h.queuedUpdate('IPv4'); // keeps the oldest
  clock.advance(1);
  assert.equal(h.health().healthy, false);
  assert.equal(h.health().status.IPv4?.healthy, false);
  h.updated('IPv4');
  assert.equal(h.health().healthy, true);
});

test('overall health is the AND of the families', () => {
  const clock = fakeClock();
  const h = new ProxyHealth(clock, 1000);
  h.updated('IPv4');
  h.updated('IPv6');
  h.queuedUpdate('IPv6');
  clock.advance(1000);
  const r = h.health();
  assert.equal(r.healthy, false);
  assert.equal(r.status.IPv4?.healthy, true);
  assert.equal(r.status.IPv6?.healthy, false);
});

test('node eligibility: unknown node, deletionTimestamp and the autoscaler taint make /healthz 503 but not /livez', async () => {
  const clock = fakeClock();
  const h = new ProxyHealth(clock, 60_000);
  h.updated('IPv4');
  const metrics = createProxyMetrics({ processMetrics: false });
  const app = buildHealthServer(h, metrics);

  let res = await app.inject({ method: 'GET', url: '/healthz' });
  assert.equal(res.statusCode, 503, 'node not known yet');
  assert.equal(res.json().nodeEligible, false);

  h.setNode({ metadata: {}, spec: { taints: [] } });
  res = await app.inject({ method: 'GET', url: '/healthz' });
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['content-type'], 'application/json');
  assert.equal(res.headers['x-content-type-options'], 'nosniff');
  const body = res.json();
  assert.deepEqual(Object.keys(body), ['lastUpdated', 'currentTime', 'nodeEligible', 'healthy', 'status']);
  assert.equal(body.lastUpdated, formatGoTime(clock.now()));
  assert.equal(body.healthy, true);
  assert.deepEqual(body.status, { IPv4: { lastUpdated: formatGoTime(clock.now()), healthy: true } });

  h.setNode({ metadata: {}, spec: { taints: [{ key: 'ToBeDeletedByClusterAutoscaler' }] } });
  assert.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 503);
  h.setNode({ metadata: { deletionTimestamp: '2026-01-01T00:00:00Z' } });
  assert.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 503);

  const live = await app.inject({ method: 'GET', url: '/livez' });
  assert.equal(live.statusCode, 200);
  assert.equal('nodeEligible' in live.json(), false);

  const text = await metrics.registry.metrics();
  assert.match(text, /kubeproxy_proxy_healthz_total\{code="503"\} 3/);
  assert.match(text, /kubeproxy_proxy_healthz_total\{code="200"\} 1/);
  assert.match(text, /kubeproxy_proxy_livez_total\{code="200"\} 1/);
});

test('/livez turns 503 when a queued update is late, and lastUpdated stays the last sync time', async () => {
  const clock = fakeClock();
  const h = new ProxyHealth(clock, 2 * SYNC_PERIOD_MS);
  h.updated('IPv4');
  const synced = clock.now();
  h.queuedUpdate('IPv4');
  clock.advance(2 * SYNC_PERIOD_MS);
  const app = buildHealthServer(h, createProxyMetrics({ processMetrics: false }));
  const res = await app.inject({ method: 'GET', url: '/livez' });
  assert.equal(res.statusCode, 503);
  assert.equal(res.json().lastUpdated, formatGoTime(synced));
  assert.equal(res.json().healthy, false);
});

test('/metrics exposes every kubeproxy metric name; /proxyMode and /configz', async () => {
  const metrics = createProxyMetrics();
  metrics.nftablesSyncFailuresTotal.inc({ ip_family: 'IPv4' }, 0);
  const app = buildMetricsServer(metrics, { mode: 'nftables' });
  const res = await app.inject({ method: 'GET', url: '/metrics' });
  assert.equal(res.statusCode, 200);
  for (const name of PROXY_METRIC_NAMES) assert.ok(res.body.includes(`# TYPE ${name} `), `missing ${name}`);
  assert.match(res.body, /process_cpu_user_seconds_total/);
  const mode = await app.inject({ method: 'GET', url: '/proxyMode' });
  assert.equal(mode.body, 'nftables');
  assert.equal(mode.headers['content-type'], 'text/plain; charset=utf-8');
  const configz = await app.inject({ method: 'GET', url: '/configz' });
  assert.deepEqual(configz.json(), { 'kubeproxy.config.k8s.io': { mode: 'nftables' } });
});

test('sync duration buckets are ExponentialBuckets(0.001, 2, 15)', async () => {
  const metrics = createProxyMetrics({ processMetrics: false });
  metrics.syncProxyRulesDuration.observe({ ip_family: 'IPv4' }, 0.002);
  const text = await metrics.registry.metrics();
  assert.match(text, /kubeproxy_sync_proxy_rules_duration_seconds_bucket\{le="0.001",ip_family="IPv4"\} 0/);
  assert.match(text, /kubeproxy_sync_proxy_rules_duration_seconds_bucket\{le="16.384",ip_family="IPv4"\} 1/);
});

test('parseBindAddress accepts kube-proxy forms and names the field on error', () => {
  assert.deepEqual(parseBindAddress('healthzBindAddress', '0.0.0.0:10256'), { host: '0.0.0.0', port: 10256 });
  assert.deepEqual(parseBindAddress('healthzBindAddress', '[::]:10256'), { host: '::', port: 10256 });
  assert.deepEqual(parseBindAddress('metricsBindAddress', ':10249'), { host: '0.0.0.0', port: 10249 });
  assert.throws(() => parseBindAddress('metricsBindAddress', 'localhost'), /metricsBindAddress: "localhost"/);
  assert.throws(() => parseBindAddress('metricsBindAddress', '1.2.3.4:70000'), /metricsBindAddress/);
});
