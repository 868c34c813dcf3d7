import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BoundedFrequencyRunner } from './runner.ts';
import { FakeClock } from './testing/fake-clock.ts';

function setup(opts: { min?: number; retry?: number; max?: number; durationMs?: number; fail?: () => boolean } = {}) {
  const clock = new FakeClock();
  const starts: number[] = [];
  const ends: number[] = [];
  const runner = new BoundedFrequencyRunner(async () => {
    starts.push(clock.now());
    if (opts.durationMs) await new Promise<void>((r) => clock.setTimeout(r, opts.durationMs!));
    ends.push(clock.now());
    if (opts.fail?.()) throw new Error('sync failed');
  }, { minIntervalMs: opts.min ?? 1000, retryIntervalMs: opts.retry ?? 30_000, maxIntervalMs: opts.max ?? 3_600_000, clock, onError: () => {} });
  runner.start();
  return { clock, runner, starts, ends, t0: clock.now() };
}

test('a request runs at once; requests during the min interval coalesce into one run at its end', async () => {
  const { clock, runner, starts, t0 } = setup({ min: 1000 });
  runner.run();
  await clock.advance(0);
  assert.deepEqual(starts, [t0]);
  await clock.advance(100);
  runner.run(); runner.run(); runner.run();
  await clock.advance(850);
  assert.equal(starts.length, 1, 'not before minInterval');
  await clock.advance(100);
  assert.deepEqual(starts.map((s) => s - t0), [0, 1000]);
  await clock.advance(5000);
  assert.equal(starts.length, 2, 'coalesced: one run for three requests');
});

test('minInterval counts from the END of a run', async () => {
  const { clock, runner, starts, ends, t0 } = setup({ min: 1000, durationMs: 400 });
  runner.run();
  await clock.advance(0);
  runner.run(); // requested while running
  await clock.advance(400);
  assert.equal(ends[0] - t0, 400);
  await clock.advance(999);
  assert.equal(starts.length, 1);
  await clock.advance(1);
  assert.deepEqual(starts.map((s) => s - t0), [0, 1400]);
});

test('after a failure, a retry comes within retryInterval without any request', async () => {
  let failures = 1;
  const { clock, runner, starts, t0 } = setup({ min: 1000, retry: 30_000, fail: () => failures-- > 0 });
  runner.run();
  await clock.advance(0);
  await clock.advance(29_999);
  assert.equal(starts.length, 1);
  await clock.advance(1);
  assert.deepEqual(starts.map((s) => s - t0), [0, 30_000]);
  await clock.advance(100_000);
  assert.equal(starts.length, 2, 'no retry after a success');
});

test('a run happens at least every maxInterval', async () => {
  const { clock, starts, t0 } = setup({ min: 1000, max: 60_000 });
  await clock.advance(60_000);
  await clock.advance(60_000);
  assert.deepEqual(starts.map((s) => s - t0), [60_000, 120_000]);
});

test('maxInterval below minInterval is refused; stop() ends scheduling', async () => {
  assert.throws(() => new BoundedFrequencyRunner(() => {}, { minIntervalMs: 10, retryIntervalMs: 10, maxIntervalMs: 5, clock: new FakeClock() }), /maxInterval/);
  const { clock, runner, starts } = setup({ min: 1000, max: 5000 });
  runner.stop();
  runner.run();
  await clock.advance(60_000);
  assert.equal(starts.length, 0);
});
