/**
 * `nftproxy run` with the Kubernetes source, end to end: the fake API server in the private world, the agent on the
 * lab node, real TCP connections (scenarios/kube-source.ts). Timings are upper bounds: they include the start of
 * a probe process in the client host.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { e2eSkip, scenarioResult } from './world/netns.ts';

const skip = e2eSkip('e2e/kube-source.test.ts');

/** minSyncPeriod (1 s) + 1 s. */
const BUDGET_MS = 2000;

test('kubernetes source: startup gating, create/update/delete within minSyncPeriod + 1 s, 410, dropped and stalled watches, bad credentials', { skip: skip ?? false, timeout: 120_000 }, () => {
  const o = scenarioResult(new URL('./world/scenarios/kube-source.ts', import.meta.url), [], 110_000);

  // Bad credentials and an unreadable kubeconfig: exit 1 with one clear line, nothing programmed.
  assert.equal(o.badToken.code, 1);
  assert.match(o.badToken.stderr.at(-1), /^nftproxy run: cannot list Services from the Kubernetes API \(\/api\/v1\/services\): HTTP 401\b.*credentials in the kubeconfig were rejected/);
  assert.equal(o.missingKubeconfig.code, 1);
  assert.match(o.missingKubeconfig.stderr.at(-1), /^nftproxy run: cannot load the kubeconfig ".*no-such-kubeconfig": ENOENT/);
  assert.equal(o.tableAfterBadStarts, false);

  // The first sync waits until EndpointSlices are listed too; then it is one full sync with the endpoints.
  assert.equal(o.tableWhileSlicesHeld, false, 'no ruleset while the EndpointSlice list is held');
  assert.equal(o.agentUp, true);
  assert.equal(o.firstSync[0].full, true);
  assert.deepEqual([...new Set(o.initial)].sort(), ['pod-a', 'pod-b'], 'the first ruleset already has the endpoints');

  // Create, update, delete reach real connections within minSyncPeriod + 1 s.
  for (const k of ['create', 'update', 'delete']) {
    assert.equal(o[k].ok, true, `${k}: ${JSON.stringify(o[k])}`);
    assert.ok(o[k].sinceChangeMs <= BUDGET_MS, `${k} took ${o[k].sinceChangeMs} ms`);
  }

  // 410 Gone: relist, and the ruleset is right (both endpoints, nothing else).
  assert.ok(o.logs.relist410 >= 1, 'a 410 was logged and relisted');
  assert.equal(o.gone.ok, true, JSON.stringify(o.gone));
  assert.deepEqual([...new Set(o.goneAnswers)].sort(), ['pod-a', 'pod-b']);
  // A dropped watch reconnects (backoff ~1 s) and delivers the change; a stalled one is relisted by the watchdog (3 s).
  assert.ok(o.logs.watchFailed >= 1);
  assert.equal(o.dropped.ok, true, JSON.stringify(o.dropped));
  assert.ok(o.dropped.sinceChangeMs <= 1200 + BUDGET_MS + 1000, `dropped: ${o.dropped.sinceChangeMs} ms`);
  assert.ok(o.logs.silent >= 1, 'the watchdog fired');
  assert.equal(o.stalled.ok, true, JSON.stringify(o.stalled));
  assert.ok(o.stalled.sinceChangeMs <= 3000 + BUDGET_MS + 1000, `stalled: ${o.stalled.sinceChangeMs} ms`);

  // An invalid object is skipped with a log line naming the object and the field; everything else keeps working.
  assert.ok(o.logs.invalid.length >= 1);
  assert.match(o.logs.invalid[0], /^Service default\/broken: spec\.ports\[0\]\.port: .*70000/);

  // A zone label change makes the next sync full.
  assert.equal(o.afterZoneChange[0]?.full, true);

  // Metrics: network programming latency from the trigger-time annotation; health; the birth cry.
  assert.ok(o.metrics.programmingCount >= 1, `network programming observations: ${o.metrics.programmingCount}`);
  assert.ok(o.metrics.syncCount >= 5);
  assert.equal(o.healthz, '200');
  assert.deepEqual(o.birthCry, ['Starting']);
  assert.deepEqual(o.logs.errors, []);
  assert.equal(o.agentExit, 0);
});
