import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigWatcher } from './config-watch.ts';

const GOOD = JSON.stringify({ source: { type: 'file', path: 's.json' }, nftables: { minSyncPeriod: '1s' } });

function setup(initial: string) {
  let content: string | null = initial;
  const logs: Array<[string, string, object]> = [];
  let changes = 0;
  const w = new ConfigWatcher({
    path: '/etc/nftproxy/config.json', runningText: initial, onChange: () => { changes++; },
    log: { info: (o, m) => logs.push(['info', m, o]), error: (o, m) => logs.push(['error', m, o]) },
    readFile: () => { if (content === null) throw Object.assign(new Error('ENOENT: no such file'), { code: 'ENOENT' }); return content; },
  });
  return { w, logs, set: (c: string | null) => { content = c; }, changes: () => changes };
}

test('an event with the same content does nothing', () => {
  const s = setup(GOOD);
  assert.deepEqual(s.w.check(), { action: 'unchanged' });
  s.w.handleEvent();
  assert.equal(s.changes(), 0);
  assert.deepEqual(s.logs, []);
});

test('a valid change is logged and calls onChange once (the agent exits 0 and is restarted)', () => {
  const s = setup(GOOD);
  s.set(JSON.stringify({ source: { type: 'file', path: 's.json' }, nftables: { minSyncPeriod: '2s' } }));
  assert.deepEqual(s.w.check(), { action: 'changed' });
  s.w.handleEvent();
  s.w.handleEvent();
  assert.equal(s.changes(), 1);
  assert.equal(s.logs.length, 1);
  assert.match(s.logs[0][1], /config file changed; exiting/);
});

test('an invalid change is reported once, with the field, and the agent keeps going; a later valid change still counts', () => {
  const s = setup(GOOD);
  s.set(JSON.stringify({ nftables: { syncPeriod: 'often' } }));
  const r = s.w.check();
  assert.equal(r.action, 'invalid');
  assert.ok(r.action === 'invalid' && /nftables\.syncPeriod/.test(r.message), JSON.stringify(r));
  s.w.handleEvent();
  s.w.handleEvent(); // the same bad content again: not reported twice
  assert.equal(s.changes(), 0);
  assert.deepEqual(s.logs.map((l) => l[0]), ['error']);
  assert.match(s.logs[0][1], /not valid; keeping the running config/);
  s.set('{ not json');
  s.w.handleEvent();
  assert.deepEqual(s.logs.map((l) => l[0]), ['error', 'error'], 'a different bad content is reported');
  s.set(JSON.stringify({ source: { type: 'file', path: 'other.json' } }));
  s.w.handleEvent();
  assert.equal(s.changes(), 1);
});

test('a file that cannot be read is invalid, not a change', () => {
  const s = setup(GOOD);
  s.set(null);
  const r = s.w.check();
  assert.equal(r.action, 'invalid');
  assert.ok(r.action === 'invalid' && /cannot read the config file/.test(r.message));
  s.w.handleEvent();
  assert.equal(s.changes(), 0);
});
