/**
 * Issue 5, must-show 2: the conntrack sysctls of `nftproxy run --init-only`, inside a network namespace and a
 * private mount namespace (scenarios/sysctls.ts): the per-namespace values are set from the config; a second run
 * with /proc/sys remounted read-only finds them right and attempts no write (an attempt would fail with EROFS and
 * be reported); a differing value on the read-only /proc/sys is a warning and exit 0. nf_conntrack_max is
 * read-only outside the initial namespace (0444) and, being higher than asked, is left alone without a warning;
 * hashsize goes to a file bind-mounted over the sysfs path, never to the host's.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { e2eSkip, scenarioResult } from './world/netns.ts';

const skip = e2eSkip('e2e/sysctls.test.ts');

type Outcome = { name: string; action: string; previous: number; desired: number; warned?: boolean };
const byName = (os: Outcome[]) => Object.fromEntries(os.map((o) => [o.name, o]));
const PER_NETNS = ['nf_conntrack_tcp_timeout_established', 'nf_conntrack_tcp_timeout_close_wait', 'nf_conntrack_tcp_be_liberal', 'nf_conntrack_udp_timeout', 'nf_conntrack_udp_timeout_stream'];

test('run --init-only sets the per-namespace conntrack sysctls, writes nothing when right, warns on a read-only /proc/sys', { skip: skip ?? false, timeout: 90_000 }, () => {
  const o = scenarioResult(new URL('./world/scenarios/sysctls.ts', import.meta.url), [], 80_000);
  assert.equal(o.netnsModeMax, '444', 'the kernel makes nf_conntrack_max read-only outside the initial namespace');

  // Run 1: exits 0 and sets every per-namespace value from the config (24h, 1h, be_liberal, 45s, 150s).
  assert.equal(o.run1.status, 0, o.run1.stderr);
  const r1 = byName(o.run1.outcomes);
  for (const n of PER_NETNS) assert.equal(r1[n].action, 'written', n);
  assert.deepEqual(o.after1, { ...o.before, nf_conntrack_tcp_timeout_established: 86400, nf_conntrack_tcp_timeout_close_wait: 3600, nf_conntrack_tcp_be_liberal: 1, nf_conntrack_udp_timeout: 45, nf_conntrack_udp_timeout_stream: 150 });
  assert.deepEqual({ action: r1.nf_conntrack_max.action, warned: r1.nf_conntrack_max.warned }, { action: 'read-only', warned: false });
  assert.equal(o.after1.nf_conntrack_max, o.before.nf_conntrack_max);
  assert.equal(r1.hashsize.action, 'written');
  assert.equal(o.hashsizeFile, '32768', 'max(32768 x 2 CPUs, 131072) / 4, into the bind-mounted file');
  assert.deepEqual(o.run1.warnings, []);

  // Run 2: /proc/sys is read-only (the probe write failed with EROFS); every value is right, so nothing was written
  // and nothing was even attempted: an attempt would have come back as a read-only outcome with a warning.
  assert.equal(o.readOnlyProbe, 'EROFS');
  assert.equal(o.run2.status, 0, o.run2.stderr);
  const r2 = byName(o.run2.outcomes);
  for (const n of [...PER_NETNS, 'hashsize']) assert.equal(r2[n].action, 'unchanged', n);
  assert.deepEqual(o.run2.warnings, []);
  assert.deepEqual(o.after2, o.after1);

  // Run 3: 12h asked on a read-only /proc/sys: one warning naming the path and EROFS, exit 0, value unchanged.
  assert.equal(o.run3.status, 0, 'a read-only value is a warning, not an exit');
  assert.equal(byName(o.run3.outcomes).nf_conntrack_tcp_timeout_established.action, 'read-only');
  assert.equal(o.run3.warnings.length, 1);
  assert.match(o.run3.warnings[0], /nf_conntrack_tcp_timeout_established: cannot set it to 43200 \(EROFS/);
  assert.deepEqual(o.after3, o.after1);
  for (const run of [o.run1, o.run2, o.run3]) assert.ok(run.ms < 20_000, `--init-only exits promptly (${run.ms} ms)`);
});
