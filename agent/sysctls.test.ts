import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applySysctls, conntrackTargets, HASHSIZE_PATH, READ_ONLY_SYSFS_EVENT, setupConntrackSysctls, type ConntrackSettings, type SysctlFs } from './sysctls.ts';

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
    ['nf_conntrack_tcp_timeout_close_wait', 3600],
  ]);
  assert.equal(conntrackTargets(DEFAULTS, 8)[0].value, 262144);
  assert.equal(conntrackTargets(DEFAULTS, 64)[0].value, 1048576, 'capped like upstream');
  assert.equal(conntrackTargets(DEFAULTS, 64)[1].value, 262144);
  assert.deepEqual(conntrackTargets({ ...DEFAULTS, tcpBeLiberal: true }, 2).map((t) => [t.path.split('/').pop(), t.value]).at(-1), ['nf_conntrack_tcp_be_liberal', 1]);
  const none = conntrackTargets({ ...DEFAULTS, maxPerCore: 0, udpTimeoutMs: 30_000, udpStreamTimeoutMs: 120_500 }, 4);
  assert.deepEqual(none.map((t) => [t.path.split('/').pop(), t.value]), [
    ['nf_conntrack_tcp_timeout_established', 86400], ['nf_conntrack_tcp_timeout_close_wait', 3600],
    ['nf_conntrack_udp_timeout', 30], ['nf_conntrack_udp_timeout_stream', 120],
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
  assert.deepEqual(out.map((o) => o.action), ['unchanged', 'unchanged', 'written', 'unchanged']);
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
  assert.match(warnings[0], /hashsize: cannot set it to 32768 \(EROFS: the file system is read-only\); it stays 16384/);
});

test('a value we may not even read (rootless: hashsize is 0600) is a warning, not a failure; the rest is set', () => {
  const warnings: string[] = [];
  const { fs, writes } = fakeFs({
    '/proc/sys/net/netfilter/nf_conntrack_max': '65536',
    '/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established': '86400',
    '/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_close_wait': '3600',
    '/proc/sys/net/netfilter/nf_conntrack_tcp_be_liberal': '0',
  });
  const unreadable: SysctlFs = {
    readFile: (p) => { if (p === HASHSIZE_PATH) throw Object.assign(new Error('permission denied'), { code: 'EACCES' }); return fs.readFile(p); },
    writeFile: (p, d) => fs.writeFile(p, d),
  };
  const out = applySysctls(unreadable, conntrackTargets(DEFAULTS, 2), (m) => warnings.push(m));
  assert.equal(out[0].action, 'written');
  assert.deepEqual({ action: out[1].action, previous: out[1].previous }, { action: 'read-only', previous: null });
  assert.equal(writes.some(([p]) => p === HASHSIZE_PATH), false);
  assert.equal(warnings.length, 1);
  assert.match(warnings[0], /hashsize: cannot read it \(EACCES/);
});

test('any other failure throws with the path and the errno', () => {
  const { fs } = fakeFs({});
  assert.throws(() => applySysctls(fs, conntrackTargets(DEFAULTS, 2), () => {}),
    /read \/proc\/sys\/net\/netfilter\/nf_conntrack_max: ENOENT/);
  const f2 = fakeFs({ '/proc/sys/net/netfilter/nf_conntrack_max': '1' }, new Set(), { '/proc/sys/net/netfilter/nf_conntrack_max': 'EIO' });
  assert.throws(() => applySysctls(f2.fs, conntrackTargets(DEFAULTS, 2), () => {}), /write \/proc\/sys\/net\/netfilter\/nf_conntrack_max: EIO/);
});

test('inside a network namespace: nf_conntrack_max (EACCES) and hashsize (EOPNOTSUPP) warn, per-netns values are set', () => {
  const files: Record<string, string> = {
    '/proc/sys/net/netfilter/nf_conntrack_max': '262144', [HASHSIZE_PATH]: '1024',
    '/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established': '432000', '/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_close_wait': '60',
  };
  const writes: string[] = [];
  const fs: SysctlFs = {
    readFile: (p) => files[p],
    writeFile(p, d) {
      if (p.endsWith('nf_conntrack_max')) throw Object.assign(new Error('permission denied'), { code: 'EACCES' });
      if (p === HASHSIZE_PATH) throw Object.assign(new Error('operation not supported'), { code: 'EOPNOTSUPP' });
      writes.push(p); files[p] = d;
    },
  };
  const lines: string[] = [];
  const events: string[] = [];
  const log = { info: (_o: object, m: string) => lines.push(m), warn: (_o: object, m: string) => lines.push(`WARN ${m}`) };
  const out = setupConntrackSysctls({ maxPerCore: 32768, min: 131072, tcpEstablishedTimeout: 86_400_000, tcpCloseWaitTimeout: 3_600_000, tcpBeLiberal: false, udpTimeout: 0, udpStreamTimeout: 0 }, 2, fs, log, (m) => events.push(m));
  assert.deepEqual(out.map((o) => o.action), ['read-only', 'read-only', 'written', 'written']);
  assert.deepEqual(out.map((o) => o.warned), [false, true, undefined, undefined], 'max is already above 131072 (harmless); hashsize 1024 < 32768 warns');
  assert.deepEqual(writes, ['/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established', '/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_close_wait']);
  assert.deepEqual(lines.filter((l) => l.startsWith('WARN')).map((l) => l.split(':')[0]), [`WARN ${HASHSIZE_PATH}`]);
  assert.deepEqual(events, [READ_ONLY_SYSFS_EVENT.message as string], 'one Node event, upstream wording');
  // Second run: everything per-netns is already right, nothing is written, no event for writable values.
  writes.length = 0;
  const again = setupConntrackSysctls({ maxPerCore: 0, min: 0, tcpEstablishedTimeout: 86_400_000, tcpCloseWaitTimeout: 3_600_000, tcpBeLiberal: false, udpTimeout: 0, udpStreamTimeout: 0 }, 2, fs, log, (m) => events.push(m));
  assert.deepEqual(again.map((o) => o.action), ['unchanged', 'unchanged']);
  assert.deepEqual(writes, []);
  assert.equal(events.length, 1);
});
