/**
 * Tamper repair (scenarios/tamper.ts): `nft delete table ip nftproxy` and `nft flush chain` of one of ours, from
 * outside, are repaired within minSyncPeriod (1 s) + 1 s, and our own syncs never look like tampering.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { e2eSkip, scenarioResult } from './world/netns.ts';

const skip = e2eSkip('e2e/tamper.test.ts');

test('tamper repair: a deleted table and a flushed chain come back within minSyncPeriod + 1 s', { skip: skip ?? false, timeout: 90_000 }, () => {
  const o = scenarioResult(new URL('./world/scenarios/tamper.ts', import.meta.url), [], 80_000);
  assert.equal(o.agentUp, true);
  assert.equal(o.syncsBeforeTamper, 1, 'no sync was triggered by our own first sync');
  assert.equal(o.tamperLogsBefore, 0);

  assert.equal(o.deleteTable, 0);
  assert.ok(o.tableBackMs !== null && o.tableBackMs <= 2000, `table back after ${o.tableBackMs} ms`);
  assert.equal(o.afterDelete.ok, true, JSON.stringify(o.afterDelete));
  assert.deepEqual(o.afterDeleteSync, { full: true });

  assert.equal(o.flushChain, 0);
  assert.ok(o.chainBackMs !== null && o.chainBackMs <= 2000, `chain back after ${o.chainBackMs} ms`);
  assert.equal(o.afterFlush.ok, true, JSON.stringify(o.afterFlush));

  // Each tamper was logged once with the tamperer's process, and the repairs did not trigger more syncs.
  assert.equal(o.tamperLogs.length, 2, JSON.stringify(o.tamperLogs));
  for (const t of o.tamperLogs) assert.match(t.by, /^nft \(pid \d+\)$/);
  assert.equal(o.syncsInQuietAfter, 0);
  assert.deepEqual(o.problems, []);
  assert.equal(o.agentExit, 0);
});
