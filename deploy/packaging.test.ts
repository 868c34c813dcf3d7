/**
 * The Containerfile and the systemd unit, checked offline (no container engine or registry is reachable here, so the
 * image itself is not built in CI: must-show 4 is checked by reading the Containerfile).
 * - Containerfile: every FROM is an exact Node 24 release (the devDependency `node` that CI runs on), multi-stage,
 *   the build runs the npm commands CI runs, the runtime stage holds production dependencies only, no nft, nothing
 *   fetched with curl/wget/ADD, the command is `nftproxy run --config /etc/nftproxy/config.json`, and the
 *   HEALTHCHECK URL is served by the health server on the default healthz port.
 * - systemd unit: `systemd-analyze verify` with no output at all (it only WARNS about unknown keys, so any output
 *   fails), on a temp copy whose ExecStart paths point at bin/nftproxy.js (verify requires the binaries to exist);
 *   plus the hardening the issue asks for.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigSchema } from '../config-schema/config.ts';
import { buildHealthServer, ProxyHealth } from '../agent/health.ts';
import { createProxyMetrics } from '../agent/metrics.ts';
import { FakeClock } from '../agent/testing/fake-clock.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const read = (p: string) => readFileSync(join(ROOT, p), 'utf8');
const pkg = JSON.parse(read('package.json')) as { version: string; devDependencies: Record<string, string> };

/** Containerfile instructions: line continuations joined, comments dropped. */
function instructions(text: string): Array<{ op: string; args: string }> {
  return text.replace(/\\\n/g, ' ').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'))
    .map((l) => { const m = /^(\S+)\s+(.*)$/.exec(l)!; return { op: m[1].toUpperCase(), args: m[2] }; });
}

test('Containerfile: pinned Node 24 bases, CI npm commands, production deps only, no nft, the run command', () => {
  const ins = instructions(read('Containerfile'));
  const args = new Map(ins.filter((i) => i.op === 'ARG').map((i) => i.args.split('=') as [string, string]));
  const froms = ins.filter((i) => i.op === 'FROM').map((i) => i.args.replace(/\$\{(\w+)\}/g, (_, n: string) => args.get(n) ?? `\${${n}}`));
  assert.equal(froms.length, 2, 'multi-stage: build and runtime');
  for (const f of froms) {
    const image = f.split(/\s+/)[0];
    const m = /^docker\.io\/library\/node:(\d+\.\d+\.\d+)-bookworm-slim(@sha256:[0-9a-f]{64})?$/.exec(image);
    assert.ok(m, `FROM ${image} is not an exact node release tag`);
    assert.equal(m[1], pkg.devDependencies.node, 'the image runs the same Node as CI (devDependency node)');
    assert.match(m[1], /^24\./);
  }
  const stages = read('Containerfile').split(/^FROM /m).slice(1);
  const [build, runtime] = stages;
  // The build stage runs what .ci/run runs, then drops devDependencies.
  const ci = read('.ci/run');
  for (const cmd of ['npm ci', 'npm run typecheck']) {
    assert.ok(build.includes(cmd), `build stage runs ${cmd}`);
    assert.ok(ci.includes(cmd), `.ci/run runs ${cmd}`);
  }
  assert.match(build, /npm ci --omit=dev/);
  assert.ok(build.indexOf('npm run typecheck') < build.indexOf('npm ci --omit=dev'));
  assert.match(runtime, /COPY --from=build \/src \/app/);
  assert.doesNotMatch(runtime, /npm (ci|install)(?! --omit=dev)/, 'no dev install in the runtime stage');
  const runs = ins.filter((i) => i.op === 'RUN').map((i) => i.args).join('\n');
  assert.doesNotMatch(runs, /apt-get|apk |dnf |yum /, 'no system packages: no nft binary in the image');
  assert.doesNotMatch(runs, /\b(curl|wget)\b/, 'nothing downloaded outside the registries');
  assert.ok(!ins.some((i) => i.op === 'ADD'), 'no ADD (of URLs or archives)');
  // The command.
  const entry = JSON.parse(ins.filter((i) => i.op === 'ENTRYPOINT').pop()!.args) as string[];
  const cmd = JSON.parse(ins.filter((i) => i.op === 'CMD').pop()!.args) as string[];
  assert.deepEqual([...entry, ...cmd], ['nftproxy', 'run', '--config', '/etc/nftproxy/config.json']);
  assert.match(runtime, /ln -s \/app\/bin\/nftproxy\.js \/usr\/local\/bin\/nftproxy/);
  // .dockerignore keeps the host's node_modules out of `COPY . .`.
  assert.match(read('.dockerignore'), /^node_modules$/m);
});

test('Containerfile HEALTHCHECK asks /livez on the default healthz port, which the health server serves', async () => {
  const hc = instructions(read('Containerfile')).find((i) => i.op === 'HEALTHCHECK')!;
  const url = /https?:\/\/[^'"]+/.exec(hc.args)![0];
  const u = new URL(url);
  assert.equal(u.pathname, '/livez');
  const defaultPort = ConfigSchema.parse({}).healthzBindAddress.split(':').pop();
  assert.equal(u.port, defaultPort);
  const app = buildHealthServer(new ProxyHealth(new FakeClock(), 60_000), createProxyMetrics());
  const res = await app.inject({ method: 'GET', url: u.pathname });
  assert.notEqual(res.statusCode, 404);
  await app.close();
});

const hasSystemd = spawnSync('systemd-analyze', ['--version']).status === 0;
if (!hasSystemd && process.env.CI) throw new Error('CI must verify the systemd unit, but systemd-analyze is missing (.ci/run installs systemd)');

test('systemd unit passes systemd-analyze verify without a single warning', { skip: hasSystemd ? false : 'systemd-analyze is not installed (apt-get install systemd)' }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'nftproxy-unit-'));
  // verify requires ExecStart binaries to exist: point them at the repo's launcher, in a temp copy.
  const unit = read('deploy/systemd/nftproxy.service').replaceAll('/usr/local/bin/nftproxy', join(ROOT, 'bin/nftproxy.js'));
  writeFileSync(join(dir, 'nftproxy.service'), unit);
  const r = spawnSync('systemd-analyze', ['verify', '--man=no', join(dir, 'nftproxy.service')], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(`${r.stdout}${r.stderr}`.trim(), '', 'systemd-analyze printed warnings');
  // A misspelt key must produce output, so the check above can fail.
  writeFileSync(join(dir, 'typo.service'), `${unit.replace('NoNewPrivileges=yes', 'NoNewPrivilege=yes')}`);
  const bad = spawnSync('systemd-analyze', ['verify', '--man=no', join(dir, 'typo.service')], { encoding: 'utf8', timeout: 60_000 });
  assert.match(`${bad.stdout}${bad.stderr}`, /Unknown key/);
});

test('systemd unit: hardening, the init-only step, the config path, restarts after a config change', () => {
  const unit = read('deploy/systemd/nftproxy.service');
  const keys = new Map<string, string[]>();
  for (const l of unit.split('\n')) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(l);
    if (m) keys.set(m[1], [...(keys.get(m[1]) ?? []), m[2]]);
  }
  const one = (k: string) => keys.get(k)?.[0];
  assert.equal(one('CapabilityBoundingSet'), 'CAP_NET_ADMIN');
  assert.equal(one('AmbientCapabilities'), 'CAP_NET_ADMIN');
  assert.equal(one('NoNewPrivileges'), 'yes');
  assert.equal(one('ProtectSystem'), 'strict');
  assert.equal(one('Restart'), 'on-failure');
  assert.equal(one('RestartForceExitStatus'), '0', 'the exit 0 after a config change restarts the agent');
  assert.equal(one('ExecStartPre'), '+/usr/local/bin/nftproxy run --init-only --config /etc/nftproxy/config.json');
  assert.equal(one('ExecStart'), '/usr/local/bin/nftproxy run --config /etc/nftproxy/config.json');
  assert.equal(one('OOMScoreAdjust'), String(ConfigSchema.parse({}).oomScoreAdj));
  assert.match(one('RestrictAddressFamilies')!, /AF_NETLINK/);
  // The bare-metal example the README installs next to it is a valid file-source config.
  const example = ConfigSchema.parse(JSON.parse(read('deploy/examples/config.json')));
  assert.equal(example.source.type, 'file');
});
