import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applySysctls, conntrackTargets, HASHSIZE_PATH, type ConntrackSettings, type SysctlFs } from './sysctls.ts';

const DEFAULTS: ConntrackSettings = {
  maxPerCore: 32768, min: 131072, tcpEstablishedTimeoutMs: 24 * 3600_000, tcpCloseWaitTimeoutMs: 3600_000,
  tcpBeLiberal: false, udpTimeoutMs: 0, udpStreamTimeoutMs: 0,
};

function fakeFs(files: Record<string, string>, readOnly: Set<string> = new Set(), failing: Record<string, string> = {}) {
  const writes: Array<[string, string]> = [];
  const fs: SysctlFs = {
    readFile(p) {
      if (!(p in files)) throw Object.assign(new Error(`open ${p}: no such file`), { code: 'ENOENT' });
      return files[p] + '\n';
    },
    writeFile(p, d) {
      if (readOnly.has(p)) throw Object.assign(new Error('read-only file system'), { code: 'EROFS' });
      if (p in failing) throw Object.assign(new Error('boom'), { code: failing[p] });
      writes.push([p, d]);
      files[p] = d;
    },
  };
  return { fs, writes, files };
}

test('nf_conntrack_max = max(maxPerCore × CPUs, min); hashsize max/4; timeouts in seconds; 0 leaves a value alone', () => {
  const t2 = conntrackTargets(DEFAULTS, 2);
  assert.deepEqual(t2.map((t) => [t.path.split('/').pop(), t.value]), [
    ['nf_conntrack_max', 131072], ['hashsize', 32768], ['nf_conntrack_tcp_timeout_established', 86400],
    ['nf_conntrack_tcp_timeout_close_wait', 3600], ['nf_conntrack_tcp_be_liberal', 0],
  ]);
  assert.equal(conntrackTargets(DEFAULTS, 8)[0].value, 262144);
  const none = conntrackTargets({ ...DEFAULTS, maxPerCore: 0, udpTimeoutMs: 30_000, udpStreamTimeoutMs: 120_500 }, 4);
  assert.deepEqual(none.map((t) => [t.path.split('/').pop(), t.value]), [
    ['nf_conntrack_tcp_timeout_established', 86400], ['nf_conntrack_tcp_timeout_close_wait', 3600],
    ['nf_conntrack_tcp_be_liberal', 0], ['nf_conntrack_udp_timeout', 30], ['nf_conntrack_udp_timeout_stream', 120],
  ]);
});

test('writes only values that differ; hashsize is only raised', () => {
  const { fs, writes } = fakeFs({
    '/proc/sys/net/netfilter/nf_conntrack_max': '131072',
    [HASHSIZE_PATH]: '65536',
    '/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established': '432000',
    '/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_close_wait': '3600',
    '/proc/sys/net/netfilter/nf_conntrack_tcp_be_liberal': '0',
  });
  const out = applySysctls(fs, conntrackTargets(DEFAULTS, 2), () => assert.fail('no warning expected'));
  assert.deepEqual(writes, [['/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established', '86400']]);
  assert.deepEqual(out.map((o) => o.action), ['unchanged', 'unchanged', 'written', 'unchanged', 'unchanged']);
});

test('a read-only /sys is a warning, not a failure', () => {
  const warnings: string[] = [];
  const { fs } = fakeFs({
    '/proc/sys/net/netfilter/nf_conntrack_max': '65536',
    [HASHSIZE_PATH]: '16384',
    '/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established': '86400',
    '/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_close_wait': '3600',
    '/proc/sys/net/netfilter/nf_conntrack_tcp_be_liberal': '0',
  }, new Set([HASHSIZE_PATH]));
  const out = applySysctls(fs, conntrackTargets(DEFAULTS, 2), (m) => warnings.push(m));
  assert.equal(out[0].action, 'written');
  assert.equal(out[1].action, 'read-only');
  assert.equal(warnings.length, 1);
  assert.match(warnings[0], /hashsize is read-only \(EROFS\)/);
});

test('any other failure throws with the path and the errno', () => {
  const { fs } = fakeFs({});
  assert.throws(() => applySysctls(fs, conntrackTargets(DEFAULTS, 2), () => {}),
    /read \/proc\/sys\/net\/netfilter\/nf_conntrack_max: ENOENT/);
  const f2 = fakeFs({ '/proc/sys/net/netfilter/nf_conntrack_max': '1' }, new Set(), { '/proc/sys/net/netfilter/nf_conntrack_max': 'EIO' });
  assert.throws(() => applySysctls(f2.fs, conntrackTargets(DEFAULTS, 2), () => {}), /write \/proc\/sys\/net\/netfilter\/nf_conntrack_max: EIO/);
});
