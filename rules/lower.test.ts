import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { render } from './render.ts';
import { elementKeyBytes, endpointDataBytes, formatExprs, formatKeyWords, lowerRule, lowerStmt, setSpec } from './lower.ts';
import { fullSteps } from './plan.ts';
import { GOLDENS } from './testdata/goldens.ts';
import { verdictText } from './model.ts';
import { S } from './model.ts';
import { NFT_DATA_VERDICT } from '../netlink/types.ts';

interface DebugRule { chain: string; exprs: string; comment?: string }
interface DebugElement { set: string; key: string; data: string; comment?: string }

/** Parses `nft --debug=netlink -f` output: rule blocks and element lines, in order. */
function parseDebug(text: string, family: string): { rules: DebugRule[]; elements: DebugElement[] } {
  const rules: DebugRule[] = [];
  const elements: DebugElement[] = [];
  const lines = text.split('\n');
  let cur: DebugRule | null = null;
  let curSet = '';
  const header = new RegExp(`^${family} (\\S+) (\\S+)$`);
  for (const line of lines) {
    const h = header.exec(line);
    if (h) {
      cur = { chain: h[2], exprs: '' };
      rules.push(cur);
      continue;
    }
    if (cur && line.startsWith('  [')) {
      cur.exprs += (cur.exprs ? '\n' : '') + line;
      continue;
    }
    if (cur && line.startsWith('  userdata = {')) {
      const m = /^  userdata = \{ \\x00(?:\\x[0-9a-f]{2}|.)(.*)\\x00 \}$/.exec(line);
      cur.comment = m ? m[1] : line;
      continue;
    }
    cur = null;
    const sh = /^(\S+) nftproxy \d+/.exec(line);
    if (sh) { curSet = sh[1]; continue; }
    if (line.startsWith('\telement ')) {
      for (const part of line.slice(1).split(/\t(?=element )/)) {
        const m = /^element ((?:[0-9a-f]{8} )+) : (.*?) ?0 \[end\](?:\s+userdata = \{ \\x00(?:\\x[0-9a-f]{2}|.)(.*)\\x00 \})?\s*$/.exec(part);
        assert.ok(m, `unparsed element line: ${part}`);
        elements.push({ set: curSet, key: m[1].trim(), data: m[2].trim(), ...(m[3] !== undefined ? { comment: m[3] } : {}) });
      }
    }
  }
  return { rules, elements };
}

const dir = new URL('./testdata/', import.meta.url);

for (const [name, make] of Object.entries(GOLDENS)) {
  test(`golden ${name}: render is unchanged and lowering equals nft --debug=netlink`, () => {
    const rs = make();
    const nftText = readFileSync(new URL(`${name}.nft`, dir), 'utf8');
    assert.equal(render(rs), nftText, `${name}.nft is stale: run rules/testdata/gen.ts and capture.sh`);
    const debug = parseDebug(readFileSync(new URL(`${name}.debug.txt`, dir), 'utf8'), rs.family);
    const ours: DebugRule[] = [];
    const ourElems: DebugElement[] = [];
    for (const st of fullSteps(rs)) {
      if (st.kind === 'rule') {
        ours.push({ chain: st.chain, exprs: formatExprs(lowerRule(rs.family, st.rule)), ...(st.rule.comment !== undefined ? { comment: st.rule.comment } : {}) });
      }
      if (st.kind === 'elements' && st.op === 'add') {
        for (const e of st.elements) {
          ourElems.push({
            set: st.set,
            key: formatKeyWords(elementKeyBytes(rs.family, e.key)),
            data: e.verdict ? verdictText(e.verdict).replace(/^(goto|jump) /, '$1 -> ') : e.endpoint ? formatKeyWords(endpointDataBytes(rs.family, e.endpoint)) : '',
            ...(e.comment !== undefined ? { comment: e.comment } : {}),
          });
        }
      }
    }
    assert.equal(ours.length, debug.rules.length, 'rule count');
    for (let i = 0; i < ours.length; i++) assert.deepEqual(ours[i], debug.rules[i], `rule ${i} in ${ours[i].chain}`);
    // nft may print a set's elements in another order than we sent them; compare as sets per set name.
    const key = (e: DebugElement) => JSON.stringify([e.set, e.key, e.data, e.comment ?? null]);
    assert.deepEqual(ourElems.map(key).sort(), debug.elements.map(key).sort());
  });
}

test('set specs carry nft 1.0.6 types, lengths and userdata byte orders', () => {
  const m = setSpec('ip', 't', { name: 'service-ips', key: ['ipv4_addr', 'inet_proto', 'inet_service'], map: 'verdict', comment: 'c' });
  assert.deepEqual(
    { flags: m.flags, keyType: m.keyType, keyLen: m.keyLen, dataType: m.dataType, dataLen: m.dataLen, kbo: m.keyByteOrder, dbo: m.dataByteOrder, comment: m.comment },
    { flags: 0x8, keyType: 0x730d, keyLen: 12, dataType: NFT_DATA_VERDICT, dataLen: 0, kbo: 0, dbo: 0, comment: 'c' },
  );
  const s6 = setSpec('ip6', 't', { name: 'hp', key: ['ipv6_addr', 'ipv6_addr', 'inet_proto', 'inet_service'] });
  assert.equal(s6.keyLen, 40);
  assert.equal(s6.keyType, (((8 << 6) | 8) << 6 | 12) << 6 | 13);
  const a = setSpec('ip', 't', { name: 'aff', key: ['ipv4_addr'], timeoutSec: 10800 });
  assert.deepEqual({ flags: a.flags, keyLen: a.keyLen, kbo: a.keyByteOrder, t: a.timeoutMs, dbo: a.dataByteOrder }, { flags: 0x30, keyLen: 4, kbo: 2, t: 10800000n, dbo: undefined });
});

test('invalid values give errors naming the construct', () => {
  assert.throws(() => lowerStmt('ip', S.daddr('10.0.0.1/8')), /host bits/);
  assert.throws(() => lowerStmt('ip', S.daddr('fd00::1')), /not an IPv4/);
  assert.throws(() => lowerStmt('ip6', S.dnat('10.0.0.1', 80)), /dnat address.*not an IPv6/);
  assert.throws(() => lowerStmt('ip', S.dnat('10.0.0.1', 0)), /port 0/);
  assert.throws(() => lowerStmt('ip', S.iifname('averyveryverylongname')), /interface name/);
  assert.throws(() => lowerStmt('ip', S.numgen(2, 2)), /numgen/);
});
