/**
 * Restart under continuous connections (scenarios/restart.ts): SIGTERM leaves the ruleset in place, and the new
 * agent adopts it: its first sync sends nothing and the table is never re-created.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { e2eSkip, scenarioResult } from './world/netns.ts';

const skip = e2eSkip('e2e/restart.test.ts');

test('restart under a stream of connections: no connection fails, the new agent adopts the table with 0 ops', { skip: skip ?? false, timeout: 90_000 }, () => {
  const o = scenarioResult(new URL('./world/scenarios/restart.ts', import.meta.url), [], 80_000);
  assert.equal(o.firstUp, true);
  assert.equal(o.firstExit, 0);
  assert.equal(o.tableWhileDown, true, 'SIGTERM leaves the ruleset in place');

  // The stream spanned the restart and lost nothing.
  assert.ok(o.stream.total >= 200, `only ${o.stream.total} connections`);
  assert.equal(o.stream.failed, 0, JSON.stringify(o.stream.errors));
  assert.deepEqual(Object.keys(o.stream.byPod).sort(), ['pod-a', 'pod-b', 'pod-c']);
  assert.ok(o.stream.ms > o.restartToFirstSyncMs, 'the stream outlasted the restart');

  // Adoption: the dump matched the desired ruleset object by object; the first sync sent nothing.
  assert.equal(o.adoption.length, 1);
  assert.equal(o.adoption[0].kind, 'adopt');
  assert.equal(o.adoption[0].reason, 'identical');
  assert.ok(o.adoption[0].compared.rules > 10 && o.adoption[0].compared.elements > 5, JSON.stringify(o.adoption[0].compared));
  assert.deepEqual(o.secondFirstSync, { full: false, ops: 0, bytes: 0 });
  assert.equal(o.handleAfter, o.handleBefore, 'the table was not deleted and re-created');
  assert.deepEqual(o.secondLogProblems, []);
  assert.equal(o.secondExit, 0, `second agent exit after ${o.secondExitMs} ms`);
});
