/** Pure parts of the run wiring: Go duration formatting and the /configz view of the config. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from './config.ts';
import { buildMetricsServer } from './health.ts';
import { createProxyMetrics } from './metrics.ts';
import { configzView, formatGoDuration } from './run.ts';
import { parseDuration } from '../config-schema/config.ts';

test('formatGoDuration writes Go time.Duration strings that parse back to the same ms', () => {
  const cases: Array<[number, string]> = [[0, '0s'], [500, '500ms'], [1000, '1s'], [1500, '1.5s'], [90_000, '1m30s'], [3_600_000, '1h0m0s'], [86_400_000, '24h0m0s'], [900_000, '15m0s']];
  for (const [ms, text] of cases) {
    assert.equal(formatGoDuration(ms), text);
    assert.equal(parseDuration(text), ms);
  }
  assert.throws(() => formatGoDuration(-1), /-1 ms/);
});

test('/configz shows the running config as KubeProxyConfiguration with Go durations', async () => {
  const cfg = parseConfig(JSON.stringify({ nftables: { minSyncPeriod: '2s' }, source: { type: 'kubernetes' } }), '/etc/nftproxy/config.json');
  const app = buildMetricsServer(createProxyMetrics({ processMetrics: false }), configzView(cfg));
  const body = (await app.inject({ method: 'GET', url: '/configz' })).json()['kubeproxy.config.k8s.io'];
  assert.equal(body.kind, 'KubeProxyConfiguration');
  assert.equal(body.apiVersion, 'kubeproxy.config.k8s.io/v1alpha1');
  assert.equal(body.mode, 'nftables');
  assert.deepEqual([body.nftables.minSyncPeriod, body.nftables.syncPeriod, body.configSyncPeriod], ['2s', '30s', '15m0s']);
  assert.deepEqual([body.conntrack.tcpEstablishedTimeout, body.conntrack.tcpCloseWaitTimeout, body.conntrack.udpTimeout], ['24h0m0s', '1h0m0s', '0s']);
  assert.equal(body.healthzBindAddress, '0.0.0.0:10256');
});
