import { test } from 'node:test';
import assert from 'node:assert/strict';
import { base32, endpointNames, hashAndTruncate, servicePortNameString, servicePortNames, truncateComment } from './names.ts';

test('base32 is RFC 4648 StdEncoding with padding', () => {
  const enc = (s: string) => base32(new TextEncoder().encode(s));
  assert.deepEqual(['', 'f', 'fo', 'foo', 'foob', 'fooba', 'foobar'].map(enc), ['', 'MY======', 'MZXQ====', 'MZXW6===', 'MZXW6YQ=', 'MZXW6YTB', 'MZXW6YTBOI======']);
});

test('chain names match upstream examples (proxier_test.go)', () => {
  const sp = { namespace: 'ns1', name: 'svc1', protocol: 'tcp', portName: 'p80' };
  assert.equal(servicePortNames(sp).clusterChain, 'service-ULMVA6XW-ns1/svc1/tcp/p80');
  assert.equal(servicePortNames(sp).externalChain, 'external-ULMVA6XW-ns1/svc1/tcp/p80');
  assert.equal(endpointNames(sp, '10.180.0.1', 80).chain, 'endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80');
  assert.match(endpointNames(sp, 'fd00::1', 80).affinitySet, /^affinity-[A-Z2-7]{8}-ns1\/svc1\/tcp\/p80__fd00\.\.1\/80$/);
});

test('names longer than 240 are truncated with "..."', () => {
  const long = 'x'.repeat(300);
  const h = hashAndTruncate(long);
  assert.equal(h.length, 240);
  assert.ok(h.endsWith('...'));
  assert.equal(h.slice(0, 9), hashAndTruncate('x'.repeat(300)).slice(0, 9));
});

test('ServicePortName strings and comment truncation', () => {
  assert.equal(servicePortNameString({ namespace: 'a', name: 'b', portName: 'http' }), 'a/b:http');
  assert.equal(servicePortNameString({ namespace: 'a', name: 'b', portName: '' }), 'a/b');
  assert.equal(truncateComment('é'.repeat(100)).length, 64);
  assert.equal(truncateComment('short'), 'short');
});
