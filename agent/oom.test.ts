import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applyOomScoreAdj, OOM_SCORE_ADJ_PATH } from './oom.ts';

test('oomScoreAdj is written when it differs, left when equal, and a refused write is a warning', () => {
  const files = new Map([[OOM_SCORE_ADJ_PATH, '0\n']]);
  const fs = { readFile: (p: string) => files.get(p)!, writeFile: (p: string, d: string) => { files.set(p, d); } };
  assert.deepEqual(applyOomScoreAdj(fs, -999), { action: 'written', value: -999, previous: 0 });
  assert.equal(files.get(OOM_SCORE_ADJ_PATH), '-999');
  assert.deepEqual(applyOomScoreAdj(fs, -999), { action: 'unchanged', value: -999, previous: -999 });
  const denied = { readFile: () => '0', writeFile: () => { throw Object.assign(new Error('permission denied'), { code: 'EACCES' }); } };
  const r = applyOomScoreAdj(denied, -999);
  assert.equal(r.action, 'not-permitted');
  assert.ok(r.action === 'not-permitted' && /EACCES/.test(r.reason) && /CAP_SYS_RESOURCE/.test(r.reason));
  assert.throws(() => applyOomScoreAdj(fs, -1001), /oomScoreAdj: expected an integer in -1000\.\.1000, got -1001/);
});
