import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeApiServer, parseLabelSelector } from './fake-apiserver.ts';

const svc = (name: string, labels: Record<string, string> = {}, clusterIP = '10.96.0.10') => ({
  metadata: { name, namespace: 'default', labels },
  spec: { clusterIP, ports: [{ port: 80, protocol: 'TCP' }] },
});

/** Reads watch lines until `n` events arrived or `ms` passed. */
async function readEvents(res: Response, n: number, ms = 2000): Promise<Array<{ type: string; object: any }>> {
  const out: Array<{ type: string; object: any }> = [];
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let buf = '';
  const deadline = Date.now() + ms;
  while (out.length < n && Date.now() < deadline) {
    const r = await Promise.race([reader.read(), new Promise<null>((r) => setTimeout(() => r(null), deadline - Date.now()))]);
    if (r === null || r.done) break;
    buf += dec.decode(r.value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n')) >= 0) { out.push(JSON.parse(buf.slice(0, i))); buf = buf.slice(i + 1); }
  }
  await reader.cancel().catch(() => {});
  return out;
}

test('list returns items without kind, with the list resourceVersion; selectors filter', async () => {
  const api = new FakeApiServer({ token: 't0k' });
  const base = await api.start();
  try {
    api.upsert('services', svc('a'));
    api.upsert('services', svc('b', { 'service.kubernetes.io/service-proxy-name': 'x' }));
    api.upsert('services', svc('c', {}, 'None'));
    const unauth = await fetch(`${base}/api/v1/services`);
    assert.equal(unauth.status, 401);
    const res = await fetch(`${base}/api/v1/services?labelSelector=${encodeURIComponent('!service.kubernetes.io/service-proxy-name')}&fieldSelector=${encodeURIComponent('spec.clusterIP!=None')}`, { headers: { authorization: 'Bearer t0k' } });
    const list: any = await res.json();
    assert.equal(list.kind, 'ServiceList');
    assert.equal(list.metadata.resourceVersion, api.resourceVersion);
    assert.deepEqual(list.items.map((i: any) => i.metadata.name), ['a']);
    assert.equal(list.items[0].kind, undefined);
  } finally {
    await api.stop();
  }
});

test('watch streams ADDED/MODIFIED/DELETED after the given resourceVersion, selector transitions included', async () => {
  const api = new FakeApiServer();
  const base = await api.start();
  try {
    api.upsert('services', svc('a'));
    const rv = api.resourceVersion;
    const res = await fetch(`${base}/api/v1/services?watch=true&resourceVersion=${rv}&labelSelector=${encodeURIComponent('!service.kubernetes.io/service-proxy-name')}`);
    api.upsert('services', svc('b'));
    api.upsert('services', { ...svc('a'), spec: { clusterIP: '10.96.0.11' } });
    api.upsert('services', svc('b', { 'service.kubernetes.io/service-proxy-name': 'other' })); // leaves the selection
    api.remove('services', 'default', 'a');
    const evs = await readEvents(res, 4);
    assert.deepEqual(evs.map((e) => `${e.type} ${e.object.metadata.name}`), ['ADDED b', 'MODIFIED a', 'DELETED b', 'DELETED a']);
    assert.equal(evs[0].object.kind, 'Service');
  } finally {
    await api.stop();
  }
});

test('a watch from a compacted resourceVersion gets a 410 Expired ERROR event', async () => {
  const api = new FakeApiServer();
  const base = await api.start();
  try {
    api.upsert('endpointslices', { metadata: { name: 's', namespace: 'default' }, addressType: 'IPv4', endpoints: [] });
    const old = Number(api.resourceVersion) - 1;
    api.compact();
    const res = await fetch(`${base}/apis/discovery.k8s.io/v1/endpointslices?watch=true&resourceVersion=${old}`);
    const evs = await readEvents(res, 1);
    assert.equal(evs[0].type, 'ERROR');
    assert.equal(evs[0].object.code, 410);
    assert.equal(evs[0].object.reason, 'Expired');
  } finally {
    await api.stop();
  }
});

test('stall holds events back, resume delivers them; bookmarks; dropConnections ends streams', async () => {
  const api = new FakeApiServer({ bookmarkIntervalMs: 50 });
  const base = await api.start();
  try {
    const res = await fetch(`${base}/api/v1/nodes?watch=true&allowWatchBookmarks=true&resourceVersion=${api.resourceVersion}&fieldSelector=metadata.name%3Dnode-1`);
    api.stall();
    api.upsert('nodes', { metadata: { name: 'node-1' } });
    api.upsert('nodes', { metadata: { name: 'node-2' } });
    setTimeout(() => api.resume(), 150);
    const evs = await readEvents(res, 2);
    assert.equal(evs[0].type, 'ADDED', 'the held-back event comes first after resume');
    assert.equal(evs[0].object.metadata.name, 'node-1');
    assert.equal(evs[1].type, 'BOOKMARK');
    const res2 = await fetch(`${base}/api/v1/nodes?watch=true&resourceVersion=${api.resourceVersion}`);
    assert.equal(api.openWatches >= 1, true);
    api.dropConnections();
    await assert.rejects(res2.text());
  } finally {
    await api.stop();
  }
});

test('events can be posted; label selector syntax errors are reported', async () => {
  const api = new FakeApiServer();
  const base = await api.start();
  try {
    const r = await fetch(`${base}/api/v1/namespaces/default/events`, { method: 'POST', body: JSON.stringify({ metadata: { name: 'e' }, reason: 'Starting' }) });
    assert.equal(r.status, 201);
    assert.equal(api.postedEvents[0].reason, 'Starting');
    assert.throws(() => parseLabelSelector('a in (b)'), /unable to parse requirement/);
  } finally {
    await api.stop();
  }
});
