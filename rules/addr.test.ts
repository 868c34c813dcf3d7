import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalAddr, cidrContains, formatAddr, formatCidr, isIPv4, isIPv6, parseAddr, parseCidr, writeAddr } from './addr.ts';

test('IPv4 parsing is strict', () => {
  for (const ok of ['1.2.3.4', '0.0.0.0', '255.255.255.255']) assert.ok(isIPv4(ok), ok);
  for (const bad of ['256.1.1.1', '01.2.3.4', '1.2.3', '1.2.3.4.5', '1..2.3', '', '1.2.3.4.', 'a.b.c.d', ' 1.2.3.4']) assert.ok(!isIPv4(bad), bad);
});

test('IPv6 parsing and RFC 5952 formatting', () => {
  const cases: Array<[string, string]> = [
    ['::', '::'], ['::1', '::1'], ['FD00:0:0::1', 'fd00::1'], ['1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'], ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'], ['::ffff:1.2.3.4', '::ffff:1.2.3.4'],
    ['fd00:10:96::48b3', 'fd00:10:96::48b3'],
  ];
  for (const [i, o] of cases) assert.equal(formatAddr(parseAddr('ip6', i)), o, i);
  for (const bad of ['1::2::3', '1:2:3:4:5:6:7:8:9', ':::', 'fe80::1%eth0', '12345::']) assert.ok(!isIPv6(bad), bad);
});

test('errors name the field and the value', () => {
  assert.throws(() => parseAddr('ip', 'fd00::1', 'servicePorts[0].clusterIP'), /servicePorts\[0\]\.clusterIP: "fd00::1" is not an IPv4 address/);
  assert.throws(() => parseCidr('ip', '10.0.0.1/8', 'serviceCIDRs[0]'), /serviceCIDRs\[0\].*host bits/);
  assert.throws(() => parseCidr('ip', '10.0.0.0/33'), /prefix length/);
});

test('CIDRs', () => {
  const c = parseCidr('ip', '10.96.0.0/12');
  assert.equal(formatCidr(c), '10.96.0.0/12');
  assert.ok(cidrContains(c, parseAddr('ip', '10.111.255.255')));
  assert.ok(!cidrContains(c, parseAddr('ip', '10.112.0.0')));
  assert.equal(formatCidr(parseCidr('ip6', 'fd00::1')), 'fd00::1');
  assert.equal(formatCidr(parseCidr('ip', '0.0.0.0/0')), '0.0.0.0/0');
});

test('canonicalAddr ip: the allocation-free fast path gives what parse+format gives, errors included', () => {
  const cands = ['1.2.3.4', '01.2.3.4', '1.2.3', '1.2.3.4.5', '256.1.1.1', '0.0.0.0', '255.255.255.255', '', '.', '1..2.3', '1.2.3.4 ', '1.2.3.04', 'a.b.c.d', '1.2.3.-4', '::1'];
  let seed = 7;
  const r = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % 300; };
  for (let i = 0; i < 20000; i++) cands.push(`${r()}.${r()}.${r()}.${r() % 10 === 0 ? '0' : ''}${r()}`);
  let valid = 0;
  for (const c of cands) {
    const viaFormat = (() => { try { return formatAddr(parseAddr('ip', c, 'f')); } catch (e) { return `ERR ${(e as Error).message}`; } })();
    const fast = (() => { try { return canonicalAddr('ip', c, 'f'); } catch (e) { return `ERR ${(e as Error).message}`; } })();
    assert.equal(fast, viaFormat, c);
    if (!fast.startsWith('ERR')) valid++;
  }
  assert.ok(valid > 1000 && valid < cands.length, `${valid} valid of ${cands.length}`);
});

test('writeAddr writes what parseAddr returns, at the offset, and throws the same errors', () => {
  const cases: Array<['ip' | 'ip6', string]> = [['ip', '10.1.2.3'], ['ip', '0.0.0.0'], ['ip', '01.2.3.4'], ['ip', '1.2.3'], ['ip', '::1'], ['ip6', 'fd00::1'], ['ip6', '1.2.3.4'], ['ip6', '::ffff:1.2.3.4']];
  for (const [family, s] of cases) {
    const want = (() => { try { return [...parseAddr(family, s, 'f')]; } catch (e) { return (e as Error).message; } })();
    const got = (() => {
      const out = new Uint8Array(20).fill(7);
      try { writeAddr(family, s, out, 2, 'f'); } catch (e) { return (e as Error).message; }
      assert.deepEqual([out[0], out[1]], [7, 7], 'bytes before the offset untouched');
      return [...out.subarray(2, 2 + (family === 'ip' ? 4 : 16))];
    })();
    assert.deepEqual(got, want, `${family} ${s}`);
  }
});
