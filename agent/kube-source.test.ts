import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KubeConfig } from '@kubernetes/client-node';
import { FakeApiServer } from '../e2e/fake-apiserver.ts';
import { KubeSource, postStartingEvent, type KubeSourceSink, type SourceKind } from './kube-source.ts';

function kubeConfigFor(server: string, token: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'fake', server, skipTLSVerify: true }],
    users: [{ name: 'u', token }],
    contexts: [{ name: 'c', cluster: 'fake', user: 'u' }],
    currentContext: 'c',
  });
  return kc;
}

/** A sink that keeps the current objects per kind, like the trackers would. */
function recordingSink() {
  const state: Record<SourceKind, Map<string, any>> = { Service: new Map(), EndpointSlice: new Map(), Node: new Map() };
  const log: string[] = [];
  const key = (o: any) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;
  const sink: KubeSourceSink = {
    replace(kind, objects) { log.push(`replace ${kind} ${objects.length}`); state[kind] = new Map(objects.map((o: any) => [key(o), o])); },
    event(kind, type, o: any) { log.push(`${type} ${kind} ${o.metadata.name}`); if (type === 'DELETED') state[kind].delete(key(o)); else state[kind].set(key(o), o); },
    synced(kind) { log.push(`synced ${kind}`); },
  };
  return { sink, state, log };
}

const quiet = { info() {}, warn() {}, debug() {} };
const svc = (name: string, labels: Record<string, string> = {}, clusterIP = '10.96.0.10') =>
  ({ metadata: { name, namespace: 'default', labels }, spec: { clusterIP, ports: [{ port: 80, protocol: 'TCP' }] } });

async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('lists with kube-proxy selectors, then follows watch events', async () => {
  const api = new FakeApiServer({ token: 'secret' });
  const url = await api.start();
  api.upsert('services', svc('a'));
  api.upsert('services', svc('proxied-elsewhere', { 'service.kubernetes.io/service-proxy-name': 'x' }));
  api.upsert('services', svc('headless', {}, 'None'));
  api.upsert('endpointslices', { metadata: { name: 'a-1', namespace: 'default', labels: { 'kubernetes.io/service-name': 'a' } }, addressType: 'IPv4', endpoints: [] });
  api.upsert('endpointslices', { metadata: { name: 'h-1', namespace: 'default', labels: { 'service.kubernetes.io/headless': '' } }, addressType: 'IPv4', endpoints: [] });
  api.upsert('nodes', { metadata: { name: 'node-1' } });
  api.upsert('nodes', { metadata: { name: 'node-2' } });
  const { sink, state, log } = recordingSink();
  const src = new KubeSource({ kubeConfig: kubeConfigFor(url, 'secret'), nodeName: 'node-1', sink, log: quiet });
  try {
    await src.start();
    assert.deepEqual([...state.Service.keys()], ['default/a']);
    assert.deepEqual([...state.EndpointSlice.keys()], ['default/a-1']);
    assert.deepEqual([...state.Node.keys()], ['/node-1']);
    assert.ok(log.includes('synced Service') && log.includes('synced EndpointSlice') && log.includes('synced Node'));
    assert.ok(api.requests.some((r) => r.includes('labelSelector=%21service.kubernetes.io%2Fservice-proxy-name')), api.requests.join('\n'));
    await until(() => api.openWatches === 3);
    api.upsert('services', svc('b'));
    api.upsert('services', { ...svc('a'), spec: { clusterIP: '10.96.0.11' } });
    api.remove('endpointslices', 'default', 'a-1');
    await until(() => state.Service.has('default/b') && state.Service.get('default/a')?.spec.clusterIP === '10.96.0.11' && !state.EndpointSlice.has('default/a-1'));
  } finally {
    src.stop();
    await api.stop();
  }
});

test('a 410 Gone relists and the state converges; a dropped watch reconnects', async () => {
  const api = new FakeApiServer();
  const url = await api.start();
  api.upsert('services', svc('a'));
  const { sink, state, log } = recordingSink();
  const src = new KubeSource({ kubeConfig: kubeConfigFor(url, 't'), nodeName: 'node-1', sink, log: quiet, backoffInitialMs: 50 });
  try {
    await src.start();
    await until(() => api.openWatches === 3);
    // Changes happen while the client is disconnected, then history is compacted: the re-watch gets 410.
    api.dropConnections();
    api.upsert('services', svc('b'));
    api.remove('services', 'default', 'a');
    api.compact();
    await until(() => state.Service.has('default/b') && !state.Service.has('default/a'));
    assert.ok(log.filter((l) => l.startsWith('replace Service')).length >= 2, 'relisted');
    await until(() => api.openWatches === 3);
    api.upsert('services', svc('c'));
    await until(() => state.Service.has('default/c'));
  } finally {
    src.stop();
    await api.stop();
  }
});

test('the watchdog relists a watch that went silent', async () => {
  const api = new FakeApiServer({ bookmarkIntervalMs: 10_000 });
  const url = await api.start();
  const { sink, state, log } = recordingSink();
  const src = new KubeSource({ kubeConfig: kubeConfigFor(url, 't'), nodeName: 'node-1', sink, log: quiet, watchdogMs: 300 });
  try {
    await src.start();
    api.stall(); // watch streams stay open but deliver nothing
    api.upsert('services', svc('late'));
    await until(() => state.Service.has('default/late'));
    assert.ok(log.filter((l) => l.startsWith('replace Service')).length >= 2, 'the object arrived by a relist');
  } finally {
    src.stop();
    await api.stop();
  }
});

test('bad credentials stop startup with a clear message; the birth cry is posted', async () => {
  const api = new FakeApiServer({ token: 'right' });
  const url = await api.start();
  try {
    const src = new KubeSource({ kubeConfig: kubeConfigFor(url, 'wrong'), nodeName: 'node-1', sink: recordingSink().sink, log: quiet });
    await assert.rejects(src.start(), /cannot list Services from the Kubernetes API \(\/api\/v1\/services\): .*401/);
    src.stop();
    const err = await postStartingEvent(kubeConfigFor(url, 'right'), 'node-1', new Date());
    assert.equal(err, null);
    assert.equal(api.postedEvents[0].reason, 'Starting');
    assert.deepEqual((api.postedEvents[0] as any).involvedObject.kind, 'Node');
  } finally {
    await api.stop();
  }
});

test('describeError: one line from client-node ApiExceptions, with a hint for 401 and 403', async () => {
  const { describeError } = await import('./kube-source.ts');
  const multiLine = 'HTTP-Code: 401\nMessage: Unknown API Status Code!\nBody: undefined\nHeaders: {"date":"x"}';
  assert.equal(describeError(Object.assign(new Error(multiLine), { code: 401, body: undefined })), 'HTTP 401 (the credentials in the kubeconfig were rejected)');
  const status = JSON.stringify({ kind: 'Status', reason: 'Forbidden', message: 'services is forbidden: User "x" cannot list resource "services"', code: 403 });
  assert.equal(describeError(Object.assign(new Error('HTTP-Code: 403\n...'), { code: 403, body: status })),
    'HTTP 403 Forbidden: services is forbidden: User "x" cannot list resource "services" (the user lacks list/watch permission; see deploy/kubernetes/rbac.yaml)');
  assert.equal(describeError(Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:6443\n  at x'), { code: 'ECONNREFUSED' })), 'connect ECONNREFUSED 10.0.0.1:6443');
});

test('a real 401 from the API server stops start() with a one-line message naming the resource', async () => {
  const api = new FakeApiServer({ token: 'right' });
  const url = await api.start();
  const { sink } = recordingSink();
  const src = new KubeSource({ kubeConfig: kubeConfigFor(url, 'wrong'), nodeName: 'node-1', sink, log: { info() {}, warn() {}, debug() {} } });
  try {
    await assert.rejects(src.start(), (err: Error) => {
      assert.match(err.message, /^cannot list (Services|EndpointSlices|Nodes) from the Kubernetes API \(\/api.*\): HTTP 401 \(the credentials in the kubeconfig were rejected\)$/);
      assert.ok(!err.message.includes('\n'));
      return true;
    });
  } finally {
    src.stop();
    await api.stop();
  }
});
