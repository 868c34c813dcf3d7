import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';
import { ServicePortSchema } from '../config-schema/snapshot.ts';
import { ServiceHealthServers, buildServiceHealthApp, serviceHealthInfos } from './healthcheck-server.ts';

const ep = (ip: string, isLocal: boolean, ready = true, extra = {}) => ({ ip, port: 8080, isLocal, ready, serving: true, terminating: false, ...extra });

test('200 with the local endpoint count; upstream body, headers; any path and method', async () => {
  let n = 2;
  const app = buildServiceHealthApp('default', 'web', () => ({ localEndpoints: n, healthy: true }));
  for (const [method, url] of [['GET', '/'], ['GET', '/healthz'], ['HEAD', '/x'], ['POST', '/a/b']] as const) {
    const r = await app.inject({ method, url });
    assert.equal(r.statusCode, 200, `${method} ${url}`);
    assert.equal(r.headers['content-type'], 'application/json');
    assert.equal(r.headers['x-content-type-options'], 'nosniff');
    assert.equal(r.headers['x-load-balancing-endpoint-weight'], '2');
  }
  const r = await app.inject({ method: 'GET', url: '/' });
  assert.equal(r.body, '{\n\t"service": {\n\t\t"namespace": "default",\n\t\t"name": "web"\n\t},\n\t"localEndpoints": 2,\n\t"serviceProxyHealthy": true\n}');
  assert.deepEqual(JSON.parse(r.body), { service: { namespace: 'default', name: 'web' }, localEndpoints: 2, serviceProxyHealthy: true });
  n = 0;
  const r0 = await app.inject({ method: 'GET', url: '/' });
  assert.equal(r0.statusCode, 503);
  assert.equal(JSON.parse(r0.body).localEndpoints, 0);
  assert.equal(r0.headers['x-load-balancing-endpoint-weight'], '0');
});

test('503 while the proxy is unhealthy even with local endpoints', async () => {
  const app = buildServiceHealthApp('ns', 'svc', () => ({ localEndpoints: 3, healthy: false }));
  const r = await app.inject({ method: 'GET', url: '/' });
  assert.equal(r.statusCode, 503);
  assert.equal(JSON.parse(r.body).serviceProxyHealthy, false);
});

test('localEndpoints = distinct local READY IPs over all ports of the Service (terminating excluded)', () => {
  const sp = (portName: string, localEndpoints: ReturnType<typeof ep>[]) => ServicePortSchema.parse({
    namespace: 'default', name: 'web', portName, protocol: 'TCP', clusterIP: '10.96.0.1', port: 80, nodePort: 30080,
    externalPolicyLocal: true, healthCheckNodePort: 31000, localEndpoints,
  });
  const other = ServicePortSchema.parse({ namespace: 'default', name: 'plain', portName: '', protocol: 'TCP', clusterIP: '10.96.0.2', port: 80 });
  const m = serviceHealthInfos([
    sp('http', [ep('10.244.1.10', true), ep('10.244.1.11', true)]),
    sp('https', [ep('10.244.1.10', true), ep('10.244.1.12', true, false, { terminating: true })]),
    other,
  ]);
  assert.deepEqual([...m], [['default/web', { namespace: 'default', name: 'web', port: 31000, localEndpoints: 2 }]]);
});

test('servers per Service and address: opened, counts updated, reopened on a port change, closed when gone, listen errors retried', async () => {
  const listening: string[] = [];
  const apps = new Map<string, FastifyInstance>();
  let failPort = 0;
  const logs: string[] = [];
  let addrs = ['192.168.1.11', '10.0.0.5'];
  const s = new ServiceHealthServers({
    addresses: () => addrs, healthy: () => true,
    log: { info: (_o, m) => logs.push(m), warn: (_o, m) => logs.push(m) },
    listen: async (app, host, port) => {
      if (port === failPort) throw new Error('EADDRINUSE');
      listening.push(`${host}:${port}`);
      apps.set(`${host}:${port}`, app);
      app.addHook('onClose', async () => { listening.splice(listening.indexOf(`${host}:${port}`), 1); });
    },
  });
  const info = (port: number, n: number) => new Map([['default/web', { namespace: 'default', name: 'web', port, localEndpoints: n }]]);
  await s.sync(info(31000, 1));
  assert.deepEqual(listening.sort(), ['10.0.0.5:31000', '192.168.1.11:31000']);
  assert.equal((await apps.get('10.0.0.5:31000')!.inject({ url: '/' })).statusCode, 200);
  await s.sync(info(31000, 0));
  assert.equal((await apps.get('10.0.0.5:31000')!.inject({ url: '/' })).statusCode, 503, 'same server, new count');
  await s.sync(info(31001, 4));
  assert.deepEqual(listening.sort(), ['10.0.0.5:31001', '192.168.1.11:31001']);
  addrs = ['192.168.1.11'];
  await s.sync(info(31001, 4));
  assert.deepEqual(listening, ['192.168.1.11:31001'], 'bind addresses follow nodePortAddresses');
  failPort = 31002;
  await s.sync(info(31002, 1));
  assert.deepEqual(listening, [], 'old closed; new failed and left nothing open');
  assert.ok(logs.some((l) => l.includes('FailedToStartServiceHealthcheck')));
  failPort = 0;
  await s.sync(info(31002, 1));
  assert.deepEqual(listening, ['192.168.1.11:31002'], 'retried on the next sync');
  await s.sync(new Map());
  assert.deepEqual(listening, []);
  await s.close();
});

test('a real listener on loopback answers over HTTP', async () => {
  const s = new ServiceHealthServers({ addresses: () => ['127.0.0.1'], healthy: () => true, log: { info: () => {}, warn: () => {} } });
  const port = 20000 + (process.pid % 20000);
  await s.sync(new Map([['a/b', { namespace: 'a', name: 'b', port, localEndpoints: 1 }]]));
  try {
    const r = await fetch(`http://127.0.0.1:${port}/anything`);
    assert.equal(r.status, 200);
    assert.equal((await r.json() as { localEndpoints: number }).localEndpoints, 1);
  } finally {
    await s.close();
  }
});
