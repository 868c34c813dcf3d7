import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from './testing/fake-clock.ts';
import { NodeAddressWatcher, readInterfaceAddresses } from './node-addresses.ts';
import { ConfigSchema } from '../config-schema/config.ts';
import { ClusterState } from './cluster-state.ts';
import { SnapshotBuilder } from './snapshot.ts';

test('readInterfaceAddresses: canonical, sorted, unique, includes loopback', () => {
  const a = readInterfaceAddresses();
  assert.deepEqual(a, [...new Set(a)].sort());
  assert.ok(a.includes('127.0.0.1'), JSON.stringify(a));
  assert.ok(a.every((x) => !x.includes('%')));
});

test('the watcher reports an added and a removed address within one poll, and nothing when unchanged', async () => {
  const clock = new FakeClock();
  let addrs = ['192.168.1.11', '127.0.0.1'];
  const changes: string[][] = [];
  const w = new NodeAddressWatcher({ read: () => addrs, clock, intervalMs: 500, onChange: (a) => changes.push([...a]) });
  assert.deepEqual(w.current(), ['127.0.0.1', '192.168.1.11']);
  w.start();
  await clock.advance(2000);
  assert.deepEqual(changes, [], 'no change, no callback');
  addrs = [...addrs, '192.168.2.11'];
  await clock.advance(500);
  assert.deepEqual(changes, [['127.0.0.1', '192.168.1.11', '192.168.2.11']]);
  addrs = ['127.0.0.1', '192.168.2.11'];
  await clock.advance(500);
  assert.deepEqual(changes.at(-1), ['127.0.0.1', '192.168.2.11']);
  w.stop();
  assert.equal(clock.pending, 0);
});

test('a failing read keeps the last good list', async () => {
  const clock = new FakeClock();
  let fail = false;
  const errors: string[] = [];
  const w = new NodeAddressWatcher({ read: () => { if (fail) throw new Error('boom'); return ['10.0.0.1']; }, clock, onChange: () => assert.fail('no change'), onError: (e) => errors.push(e.message) });
  fail = true;
  w.start();
  await clock.advance(1000);
  assert.deepEqual(w.current(), ['10.0.0.1']);
  assert.deepEqual(errors, ['boom']);
  w.stop();
});

function build(nodePortAddresses: string[], ifaddrs: string[], family: 'IPv4' | 'IPv6' = 'IPv4', extra: object = {}) {
  const cfg = ConfigSchema.parse({ nodePortAddresses, source: { type: 'file', path: 'x' }, ...extra });
  const state = new ClusterState('node-1', () => {});
  state.replace('Node', [{ kind: 'Node', metadata: { name: 'node-1' }, status: { addresses: [{ type: 'InternalIP', address: '192.168.1.11' }, { type: 'InternalIP', address: 'fd00::11' }] } }]);
  return new SnapshotBuilder(cfg, () => {}, () => ifaddrs).build(state, family).nodePortIPs;
}

test('nodePortAddresses → nodeport-ips from the interface addresses (upstream NodePortAddresses)', () => {
  const ifs = ['127.0.0.1', '192.168.1.11', '192.168.2.11', '10.0.0.5', '::1', 'fd00::11', 'fd00::12'];
  assert.deepEqual(build(['primary'], ifs), ['192.168.1.11'], 'primary: the node IP only');
  assert.deepEqual(build(['primary'], ifs, 'IPv6'), ['fd00::11']);
  assert.deepEqual(build(['192.168.0.0/16'], ifs), ['192.168.1.11', '192.168.2.11'], 'CIDR: every interface address inside it');
  assert.deepEqual(build(['192.168.0.0/16'], ifs, 'IPv6'), null, 'no CIDR of the family: match all');
  assert.equal(build(['all'], ifs), null, 'all: match all (fib daddr type local)');
  assert.equal(build(['0.0.0.0/0'], ifs), null);
  assert.deepEqual(build(['localhost'], ifs), ['127.0.0.1'], 'localhost: loopback (the skeleton leaves it out of nodeport-ips)');
  assert.deepEqual(build(['primary', 'localhost'], ifs, 'IPv6'), ['::1', 'fd00::11']);
  assert.deepEqual(build(['primary'], ['127.0.0.1']), [], 'the node IP is not on any interface: no NodePort address');
  assert.deepEqual(build(['primary'], ifs, 'IPv4', { bindAddress: '10.0.0.5' }), ['10.0.0.5'], 'bindAddress overrides the primary IP');
});
