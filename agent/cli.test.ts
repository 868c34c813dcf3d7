import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const CLI = new URL('./cli.ts', import.meta.url).pathname;
const EXAMPLE = new URL('../deploy/examples/config.json', import.meta.url).pathname;
const run = (...args: string[]) => spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 30_000 });

test('render prints the ruleset of the example without root and without a socket', () => {
  const out = execFileSync(process.execPath, [CLI, 'render', '--config', EXAMPLE], { encoding: 'utf8' });
  assert.match(out, /^add table ip nftproxy \{ comment "rules for nftproxy" ; \}/);
  assert.match(out, /add element ip nftproxy service-ips \{ .*10\.96\.0\.10 \. tcp \. 80 : goto service-[A-Z2-7]{8}-default\/web\/tcp\/http/);
  assert.match(out, /no-endpoint-services \{ 10\.96\.0\.30 \. tcp \. 80 comment "default\/empty:http" : goto reject-chain \}/);
});

test('config validate and config schema; an invalid config exits non-zero naming file and field', () => {
  const ok = run('config', 'validate', EXAMPLE);
  assert.equal(ok.status, 0);
  assert.match(ok.stdout, /valid/);
  const dir = mkdtempSync(join(tmpdir(), 'nftproxy-cli-'));
  const bad = join(dir, 'bad.json');
  writeFileSync(bad, JSON.stringify({ nftables: { syncPeriod: 'often' } }));
  const r = run('run', '--config', bad);
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /bad\.json: invalid config/);
  assert.match(r.stderr, /nftables\.syncPeriod: .*\(got "often"\)/);
  const schema = JSON.parse(run('config', 'schema').stdout);
  assert.ok(schema.properties.nftables.properties.minSyncPeriod);
});

test('an invalid services file at startup exits non-zero with the file and the reason', () => {
  const dir = mkdtempSync(join(tmpdir(), 'nftproxy-cli-'));
  writeFileSync(join(dir, 'services.json'), '{"kind":"List","items":[');
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ source: { type: 'file', path: 'services.json' } }));
  const r = run('render', '--config', join(dir, 'config.json'));
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /services\.json: not valid JSON/);
});

test('--version and --help for each verb', () => {
  assert.match(run('--version').stdout, /^nftproxy \d+\.\d+\.\d+/);
  for (const verb of ['run', 'apply', 'render', 'cleanup']) assert.match(run(verb, '--help').stdout, new RegExp(`nftproxy ${verb}`));
  assert.equal(run('frobnicate').status, 2);
});

test('--help lists every verb; --cleanup is the cleanup verb; config docs prints the reference', () => {
  const help = run('--help');
  assert.equal(help.status, 0);
  for (const verb of ['run', 'apply', 'render', 'cleanup', 'check', 'config schema', 'config validate', 'config docs', '--cleanup']) assert.ok(help.stdout.includes(verb), verb);
  assert.match(run('--cleanup', '--help').stdout, /^Usage: nftproxy cleanup/);
  assert.match(run('check', '--help').stdout, /^Usage: nftproxy check/);
  assert.match(run('run', '--help').stdout, /--init-only/);
  const docs = run('config', 'docs');
  assert.equal(docs.status, 0);
  assert.match(docs.stdout, /^# Configuration reference/);
  assert.match(docs.stdout, /\| `oomScoreAdj` \| integer .*\| `-999` \|/);
  assert.equal(run('run').status, 2, 'run without --config is a usage error');
});
