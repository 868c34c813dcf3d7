import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClusterState } from './cluster-state.ts';
import { FileSource, readListFile } from './file-source.ts';

const list = (n: number) => JSON.stringify({ apiVersion: 'v1', kind: 'List', items: Array.from({ length: n }, (_, i) => ({
  apiVersion: 'v1', kind: 'Service', metadata: { name: `s${i}`, namespace: 'default' }, spec: { clusterIP: `10.96.0.${i + 1}`, ports: [{ port: 80 }] },
})).concat([{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'ignored', namespace: 'default' } } as never]) });

const until = async (cond: () => boolean, ms = 3000) => {
  const end = Date.now() + ms;
  while (!cond()) { if (Date.now() > end) throw new Error('timeout'); await new Promise((r) => setTimeout(r, 20)); }
};

test('a List file: Services, EndpointSlices and Nodes; other kinds ignored; invalid files name the file and the problem', () => {
  const dir = mkdtempSync(join(tmpdir(), 'nftproxy-fs-'));
  writeFileSync(join(dir, 'a.json'), list(2));
  const objs = readListFile(join(dir, 'a.json'));
  assert.equal(objs.Service.length, 2);
  writeFileSync(join(dir, 'b.json'), '{"kind":"ServiceList","items":[}');
  assert.throws(() => readListFile(join(dir, 'b.json')), /b\.json: not valid JSON/);
  writeFileSync(join(dir, 'c.json'), '{"kind":"Service","metadata":{"name":"x"}}');
  assert.throws(() => readListFile(join(dir, 'c.json')), /c\.json: not a Kubernetes List: kind: expected a List/);
});

test('the file is watched: a change reloads it; a file that turns invalid keeps the last good state until fixed', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nftproxy-fs-'));
  const path = join(dir, 'services.json');
  writeFileSync(path, list(1));
  const state = new ClusterState('node-1', () => {});
  const errors: string[] = [];
  let changes = 0;
  const src = new FileSource(path, state, { info() {}, error: (o: object) => errors.push(JSON.stringify(o)) }, () => { changes++; });
  src.start();
  try {
    assert.equal(state.services.size, 1);
    writeFileSync(path + '.tmp', list(3));
    renameSync(path + '.tmp', path); // editors and kubectl > file.new && mv replace the file
    await until(() => changes === 1);
    assert.equal(state.services.size, 3);
    writeFileSync(path, '{"kind":"List","items":[');
    await until(() => errors.length === 1);
    assert.match(errors[0], /not valid JSON/);
    assert.equal(state.services.size, 3, 'last good state kept');
    writeFileSync(path, list(2));
    await until(() => changes === 2);
    assert.equal(state.services.size, 2);
  } finally {
    src.stop();
  }
});
