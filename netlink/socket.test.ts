/**
 * The socket against the real kernel, inside a throwaway network namespace (`unshare -n`), so the host ruleset is
 * never touched. Skips with a printed reason only when namespaces are impossible, and never under CI.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

const SCENARIO = new URL('./testdata/socket-scenario.ts', import.meta.url).pathname;
const probe = spawnSync('unshare', ['-n', 'true']);
const skip = probe.status !== 0 ? `network namespaces unavailable (unshare -n: ${probe.stderr?.toString().trim() || probe.error?.message})` : false;
if (skip && process.env.CI) throw new Error(`CI must run kernel tests: ${skip}`);
if (skip) console.log(`# SKIP socket.test.ts: ${skip}`);

test('NftSocket against the kernel: batches, error mapping, genid, dumps, a >1 MiB batch', { skip }, () => {
  const r = spawnSync('unshare', ['-n', process.execPath, SCENARIO], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.equal(out.good.messages, 6);
  assert.equal(out.gen1, 1, 'one commit');
  const objs = out.nftJson.nftables;
  assert.ok(objs.some((o: any) => o.table?.name === 'nftproxy-test'));
  assert.ok(objs.some((o: any) => o.chain?.name === 'nat-output' && o.chain?.hook === 'output' && o.chain?.prio === -100 && o.chain?.type === 'nat'));
  assert.ok(objs.some((o: any) => o.rule?.chain === 'nat-output' && o.rule?.comment === 'to svc' && o.rule?.expr?.[0]?.jump?.target === 'svc'));
  assert.ok(objs.some((o: any) => o.set?.name === 'ips' && o.set?.comment === 'some IPs'));

  assert.equal(out.bad.name, 'BatchError');
  assert.deepEqual(out.bad.errors, [{ opIndex: 1, errnoName: 'ENOENT' }]);
  assert.match(out.bad.message, /add rule ip nftproxy-test missing: ENOENT/);
  assert.equal(out.genAfterBad, 1, 'a rejected batch commits nothing');
  assert.deepEqual(out.chainsAfterBad, ['nat-output', 'svc'], 'the chain added in the rejected batch is not there');
  assert.deepEqual(out.stale, [{ opIndex: null, errnoName: 'ERESTART' }]);

  assert.deepEqual(out.dump.tables.find((t: any) => t.name === 'nftproxy-test'), { name: 'nftproxy-test', comment: 'socket test', hasHandle: true });
  assert.deepEqual(out.dump.chains.find((c: any) => c.name === 'nat-output').hook, { type: 'nat', hooknum: 3, priority: -100, policy: 'accept' });
  assert.equal(out.dump.chains.find((c: any) => c.name === 'svc').comment, 'a chain');
  assert.deepEqual(out.dump.rules[0].exprs, [{ type: 'immediate', dreg: 0, data: { verdict: { kind: 'jump', chain: 'svc' } } }]);
  assert.equal(out.dump.rules[0].hasHandle, true);
  assert.deepEqual(out.dump.sets, [{ name: 'ips', keyLen: 4, comment: 'some IPs' }]);
  assert.deepEqual(out.dump.elements, [{ key: [10, 96, 0, 1], comment: 'one' }]);

  assert.ok(out.big.bytes > 1 << 20, `big batch is ${out.big.bytes} bytes`);
  assert.equal(out.bigCount, 80_001);
});
