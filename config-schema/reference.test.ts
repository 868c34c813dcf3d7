import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { configFields, configReferenceMarkdown } from './reference.ts';

const DOC = new URL('../docs/configuration.md', import.meta.url);

test('docs/configuration.md is what `npm run docs` generates from the schema (run it after changing the schema)', () => {
  const committed = readFileSync(DOC, 'utf8');
  assert.ok(committed === configReferenceMarkdown(), 'docs/configuration.md is out of date: run `npm run docs` and commit the result');
});

test('every field of the config has a type, a default (or required/unset) and a description', () => {
  const rows = configFields();
  const paths = rows.map((r) => r.path);
  for (const p of ['nftables.minSyncPeriod', 'conntrack.tcpBeLiberal', 'oomScoreAdj', 'source (type=file).path', 'clientConnection.qps', 'tableName']) {
    assert.ok(paths.includes(p), `missing row ${p}`);
  }
  for (const r of rows) {
    assert.notEqual(r.description, '', `${r.path} has no description: add .describe() in config-schema/config.ts`);
    assert.notEqual(r.type, '', r.path);
  }
  const sync = rows.find((r) => r.path === 'nftables.syncPeriod')!;
  assert.match(sync.type, /^duration/);
  assert.equal(sync.default, '`"30s"`');
});
