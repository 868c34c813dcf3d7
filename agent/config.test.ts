import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, parseConfig } from './config.ts';
import { parseDuration } from '../config-schema/config.ts';

test('defaults follow KubeProxyConfiguration', () => {
  const c = parseConfig('{}', '/etc/nftproxy/config.json');
  assert.equal(c.nftables.syncPeriod, 30_000);
  assert.equal(c.nftables.minSyncPeriod, 1000);
  assert.equal(c.nftables.masqueradeBit, 14);
  assert.equal(c.healthzBindAddress, '0.0.0.0:10256');
  assert.equal(c.metricsBindAddress, '127.0.0.1:10249');
  assert.deepEqual(c.nodePortAddresses, ['primary']);
  assert.equal(c.detectLocalMode, 'ClusterCIDR');
  assert.equal(c.conntrack.maxPerCore, 32768);
  assert.equal(c.oomScoreAdj, -999);
  assert.deepEqual(c.source, { type: 'kubernetes' });
  assert.equal(c.tableName, 'nftproxy');
});

test('Go durations', () => {
  assert.equal(parseDuration('1h30m'), 5_400_000);
  assert.equal(parseDuration('500ms'), 500);
  assert.equal(parseDuration('0'), 0);
  assert.equal(parseDuration('1.5s'), 1500);
  assert.equal(parseDuration('soon'), null);
  assert.equal(parseDuration('5'), null);
});

test('errors name the file, the field path, the value and what was expected', () => {
  assert.throws(() => parseConfig('{"nftables":{"minSyncPeriod":"soon","masqueradeBit":40}}', 'cfg.json'), (err: Error) => {
    assert.match(err.message, /^cfg\.json: invalid config/);
    assert.match(err.message, /nftables\.minSyncPeriod: expected a duration .* \(got "soon"\)/);
    assert.match(err.message, /nftables\.masqueradeBit: .*31.* \(got 40\)/);
    return true;
  });
  assert.throws(() => parseConfig('{"sourcee":{}}', 'cfg.json'), /unknown field "sourcee"/);
  assert.throws(() => parseConfig('{"mode":"iptables"}', 'cfg.json'), /mode: .*\(got "iptables"\)/);
  assert.throws(() => parseConfig('{ nope', 'cfg.json'), /cfg\.json: not valid JSON/);
  assert.throws(() => loadConfig('/nonexistent/x.json'), /\/nonexistent\/x\.json: cannot read the config file/);
});

test('a kube-proxy config converted from YAML is accepted once source is added; relative source.path resolves against the config folder', () => {
  const dir = mkdtempSync(join(tmpdir(), 'nftproxy-cfg-'));
  const file = join(dir, 'config.json');
  writeFileSync(file, JSON.stringify({
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1', kind: 'KubeProxyConfiguration', mode: 'nftables',
    bindAddress: '0.0.0.0', clusterCIDR: '10.244.0.0/16', configSyncPeriod: '15m0s',
    conntrack: { maxPerCore: 32768, min: 131072, tcpCloseWaitTimeout: '1h0m0s', tcpEstablishedTimeout: '24h0m0s', udpTimeout: '0s', udpStreamTimeout: '0s' },
    featureGates: {}, iptables: { masqueradeAll: false, masqueradeBit: 14, minSyncPeriod: '1s', syncPeriod: '30s' },
    ipvs: { scheduler: '' }, logging: { format: 'text' }, nftables: { masqueradeAll: false, masqueradeBit: 14, minSyncPeriod: '1s', syncPeriod: '30s' },
    nodePortAddresses: null === null ? ['primary'] : [], oomScoreAdj: -999, portRange: '', winkernel: {},
    source: { type: 'file', path: 'services.json' },
  }));
  const c = loadConfig(file);
  assert.equal(c.source.type === 'file' && c.source.path, join(dir, 'services.json'));
  assert.equal(c.conntrack.tcpEstablishedTimeout, 86_400_000);
});
