import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { BatchOp } from '../netlink/types.ts';
import { BatchError } from '../netlink/socket.ts';
import { checkKernel, kernelVersionWarning, probeBatch } from './kernel-check.ts';

test('the probe batch creates the whole ruleset in a throw-away table and deletes it in the same batch', () => {
  for (const family of ['IPv4', 'IPv6'] as const) {
    const ops = probeBatch(family, 'nftproxy-probe-7');
    const tf = family === 'IPv4' ? 'ip' : 'ip6';
    assert.deepEqual(ops.at(-1), { op: 'delete', kind: 'table', table: { family: tf, name: 'nftproxy-probe-7' } });
    const tables = new Set(ops.map((o) => (o.kind === 'table' ? o.table.name : o.kind === 'chain' ? o.chain.table : o.kind === 'rule' ? o.rule.table : o.kind === 'set' ? o.set.table : o.elements.table)));
    assert.deepEqual([...tables], ['nftproxy-probe-7'], 'touches no other table');
    const exprs = new Set(ops.flatMap((o) => (o.kind === 'rule' ? o.rule.exprs.map((e) => e.type) : [])));
    for (const e of ['numgen', 'nat', 'masq', 'ct', 'fib', 'reject', 'dynset', 'lookup']) assert.ok(exprs.has(e as never), `${family}: the probe uses ${e}`);
    assert.ok(ops.some((o) => o.kind === 'chain' && o.chain.hook?.type === 'nat'), 'a nat base chain');
  }
});

test('a refused probe names the operation, the errno and the kernel feature (numgen missing)', async () => {
  const sender = {
    async sendBatch(ops: readonly BatchOp[]) {
      const i = ops.findIndex((o) => o.kind === 'rule' && o.rule.exprs.some((e) => e.type === 'numgen'));
      throw new BatchError([{ opIndex: i, op: ops[i], seq: 1, errno: 2, errnoName: 'ENOENT' }]);
    },
  };
  const r = await checkKernel(sender, 'IPv4', 'nftproxy', { kernelRelease: '6.8.0-45-generic' });
  assert.equal(r.ok, false);
  assert.ok(!r.ok);
  assert.match(r.message, /kernel check failed for family ip/);
  assert.match(r.message, /add rule ip nftproxy-probe-\d+ /);
  assert.match(r.message, /CONFIG_NFT_NUMGEN/);
  assert.deepEqual(r.warnings, []);
});

test('a refused nat chain and a missing family are explained', async () => {
  const fail = (pick: (o: BatchOp) => boolean, errnoName: string) => ({
    async sendBatch(ops: readonly BatchOp[]) {
      const i = ops.findIndex(pick);
      throw new BatchError([{ opIndex: i, op: ops[i], seq: 1, errno: 95, errnoName }]);
    },
  });
  const nat = await checkKernel(fail((o) => o.kind === 'chain' && o.chain.hook?.type === 'nat', 'EOPNOTSUPP'), 'IPv6', 'nftproxy', { kernelRelease: '6.1.0' });
  assert.ok(!nat.ok && /CONFIG_NFT_NAT/.test(nat.message) && nat.family === 'ip6', JSON.stringify(nat));
  const table = await checkKernel(fail((o) => o.kind === 'table', 'EAFNOSUPPORT'), 'IPv6', 'nftproxy', { kernelRelease: '6.1.0' });
  assert.ok(!table.ok && /CONFIG_NF_TABLES_IPV6/.test(table.message), JSON.stringify(table));
});

test('an accepted probe passes; a kernel older than 5.13 only warns', async () => {
  let sent = 0;
  const r = await checkKernel({ async sendBatch(ops) { sent = ops.length; } }, 'IPv4', 'nftproxy', { kernelRelease: '5.10.0-28-amd64' });
  assert.equal(r.ok, true);
  assert.equal(r.ops, sent);
  assert.equal(r.warnings.length, 1);
  assert.match(r.warnings[0], /5\.10\.0-28-amd64 is older than 5\.13/);
  assert.equal(kernelVersionWarning('5.13.0'), null);
  assert.equal(kernelVersionWarning('6.1.0'), null);
  assert.match(kernelVersionWarning('weird')!, /cannot parse/);
});
