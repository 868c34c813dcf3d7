/**
 * ConntrackSocket against the real kernel, inside a throwaway network namespace (`unshare -n`) where
 * `conntrack -I` creates flows: kernel-filtered dumps in both families, deletes by tuple + CTA_ID (a second
 * delete and a wrong id find nothing), 300 deletes in 4 KiB datagrams. Skips with a printed reason only when
 * namespaces are impossible, and never under CI.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

const SCENARIO = new URL('./testdata/ct-socket-scenario.ts', import.meta.url).pathname;
const probe = spawnSync('unshare', ['-n', 'true']);
const tool = spawnSync('conntrack', ['--version']);
const skip = probe.status !== 0 ? `network namespaces unavailable (unshare -n: ${probe.stderr?.toString().trim() || probe.error?.message})`
  : tool.error ? 'the conntrack tool (conntrack-tools) is not installed' : false;
if (skip && process.env.CI) throw new Error(`CI must run kernel tests: ${skip}`);
if (skip) console.log(`# SKIP ct-socket.test.ts: ${skip}`);

test('ConntrackSocket against the kernel: filtered dumps (IPv4, IPv6), deletes by tuple and CTA_ID', { skip, timeout: 90_000 }, () => {
  const r = spawnSync('unshare', ['-n', process.execPath, SCENARIO], { encoding: 'utf8', timeout: 80_000 });
  assert.equal(r.status, 0, r.stderr);
  const o = JSON.parse(r.stdout);
  assert.equal(o.error, undefined, o.error);
  // The family of the request separates the tables; the protocol filter drops TCP in the kernel.
  assert.equal(o.all4.length, 4);
  assert.equal(o.all6.length, 3);
  assert.deepEqual(o.udp4, o.all4.filter((l: string) => l.startsWith('17 ')));
  assert.deepEqual(o.udp6, o.all6);
  for (const [fam, svc, ep2, ep3, stats] of [['ipv4', '10.96.0.10', '10.244.1.2', '10.244.1.3', '10.96.0.50'], ['ipv6', 'fd00:96::10', 'fd00:244::2', 'fd00:244::3', 'fd00:96::50']]) {
    assert.deepEqual(o[`byFrontend_${fam}`], [`17 ${svc}:53 -> ${ep2}:5353`, `17 ${svc}:53 -> ${ep3}:5353`], `${fam}: orig dst + proto + dport`);
    assert.deepEqual(o[`byReply_${fam}`], [`17 ${svc}:53 -> ${ep3}:5353`], `${fam}: reply src`);
    assert.deepEqual(o[`byPort_${fam}`], [`17 ${stats}:8125 -> ${ep2}:8125`], `${fam}: dport only`);
    assert.deepEqual(o[`delete_${fam}`], { deleted: 1, missing: 0, failed: [] });
    assert.deepEqual(o[`deleteAgain_${fam}`], { deleted: 0, missing: 1, failed: [] }, 'the same tuple + id again: ENOENT');
    assert.deepEqual(o[`wrongId_${fam}`], { deleted: 0, missing: 1, failed: [] }, 'a live tuple with another id is not deleted');
    assert.ok(!o[`after_${fam}`].some((l: string) => l.includes(ep3)), `${fam}: the stale flow is gone`);
    assert.ok(o[`after_${fam}`].includes(`17 ${stats}:8125 -> ${ep2}:8125`), `${fam}: the flow with the wrong id survived`);
  }
  assert.ok(o.after_ipv4.some((l: string) => l.startsWith('6 ')), 'TCP untouched');
  assert.deepEqual(o.manyCreated, { created: 300, failed: [] });
  assert.deepEqual(o.createAgain, { created: 0, failed: [{ index: 0, errno: 17 }, { index: 1, errno: 17 }] }, 'EEXIST');
  assert.equal(o.manyListedByTool, 300, 'conntrack -L sees the flows we created');
  assert.equal(o.manyDumped, 300);
  assert.deepEqual(o.manyDeleted, { deleted: 300, missing: 0, failed: [] });
  assert.equal(o.manyLeft, 0);
  assert.match(o.badFilter, /filter\.status\.mask/);
  assert.equal(o.conntrackL, o.after_ipv4.length + o.after_ipv6.length, 'conntrack -L agrees with our dumps');
  assert.equal(o.conntrackL, 5);
});
