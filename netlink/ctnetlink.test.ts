/**
 * ctnetlink codec against bytes captured from conntrack-tools 1.4.7 (testdata/ctnetlink-goldens.json, see
 * testdata/ctnetlink-capture.sh): our dump requests and our delete's original tuple come out byte for byte, and
 * the kernel's replies decode to the flows that `conntrack -I` created. Round trips cover what the tool never
 * sends (CTA_FILTER, CTA_ID on a delete, zones).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { NetlinkWriter, attrMap, iterAttrs, read } from './attrs.ts';
import { parseMessages, parseError, NLMSG } from './message.ts';
import {
  CTA, CTA_FILTER, CTA_FILTER_F, CTA_TUPLE, CTA_PROTO, IPCTNL_MSG, IPS, ctType, ctAddrBytes, ctAddrText, decodeFlow,
  encodeCreate, encodeDelete, encodeDumpRequest, type CtFlow,
} from './ctnetlink.ts';

interface Capture { command: string; messages: Array<{ dir: 'send' | 'recv'; hex: string }> }
const G: { captures: Record<string, Capture> } = JSON.parse(readFileSync(new URL('./testdata/ctnetlink-goldens.json', import.meta.url), 'utf8'));
const sent = (name: string, i = 0) => Buffer.from(G.captures[name].messages.filter((m) => m.dir === 'send')[i].hex, 'hex');
const received = (name: string) => G.captures[name].messages.filter((m) => m.dir === 'recv').flatMap((m) => parseMessages(Buffer.from(m.hex, 'hex')));
const seqOf = (b: Buffer) => b.readUInt32LE(8);
const flowsOf = (name: string): CtFlow[] => received(name).filter((m) => m.type === ctType(IPCTNL_MSG.CT_NEW)).map(decodeFlow);

function bytes(fn: (w: NetlinkWriter) => void): Buffer {
  const w = new NetlinkWriter(256);
  fn(w);
  return Buffer.from(w.bytes());
}

test('dump requests match conntrack -L byte for byte (IPv4, IPv6)', () => {
  for (const [name, family] of [['list4', 'ipv4'], ['list6', 'ipv6']] as const) {
    const golden = sent(name);
    assert.equal(bytes((w) => encodeDumpRequest(w, seqOf(golden), family)).toString('hex'), golden.toString('hex'), name);
  }
});

test('mark and status filters match conntrack -L --mark / --status byte for byte (after the family byte)', () => {
  // conntrack -L without -f sends AF_UNSPEC; we always name the family, so compare with the family byte patched.
  for (const [name, filter] of [['mark', { mark: { value: 42, mask: 0xff } }], ['status', { status: { value: IPS.ASSURED, mask: IPS.ASSURED } }]] as const) {
    const golden = sent(name);
    const ours = bytes((w) => encodeDumpRequest(w, seqOf(golden), 'ipv4', filter));
    assert.equal(ours[16], 2, 'NFPROTO_IPV4');
    ours[16] = golden[16];
    assert.equal(ours.toString('hex'), golden.toString('hex'), name);
  }
});

test('a delete carries the same CTA_TUPLE_ORIG bytes as conntrack -D, plus CTA_ID', () => {
  for (const name of ['delete4', 'delete6'] as const) {
    const golden = sent(name, 1); // [0] is the dump conntrack -D starts with
    assert.equal(golden.readUInt16LE(4), ctType(IPCTNL_MSG.CT_DELETE));
    const flow = flowsOf(name).find((f) => f.orig.proto === 17 && f.orig.dport === 53)!;
    const ours = bytes((w) => encodeDelete(w, seqOf(golden), { family: flow.family, orig: flow.orig, id: flow.id }));
    // Same header (type, flags REQUEST|ACK, seq) and nfgenmsg.
    assert.equal(ours.subarray(4, 20).toString('hex'), golden.subarray(4, 20).toString('hex'), `${name}: header`);
    const g = attrMap(golden.subarray(20, golden.readUInt32LE(0)));
    const o = attrMap(ours.subarray(20, ours.readUInt32LE(0)));
    assert.equal(o.get(CTA.TUPLE_ORIG)!.toString('hex'), g.get(CTA.TUPLE_ORIG)!.toString('hex'), `${name}: orig tuple`);
    assert.equal(read.u32be(o.get(CTA.ID)!), flow.id);
    assert.deepEqual([...o.keys()], [CTA.TUPLE_ORIG, CTA.ID], 'nothing else: no reply tuple, status, timeout or mark');
  }
  // The kernel acknowledged conntrack's delete with error 0.
  const ack = received('delete4').find((m) => m.type === NLMSG.ERROR)!;
  assert.equal(parseError(ack).error, 0);
});

test('a create matches conntrack -I byte for byte (but for a padding byte libnetfilter_conntrack leaves uninitialised)', () => {
  const golden = Buffer.from(sent('create4'));
  const ours = bytes((w) => encodeCreate(w, seqOf(golden), {
    family: 'ipv4', timeoutSeconds: 100,
    orig: { src: '10.0.0.1', dst: '10.96.0.10', proto: 17, sport: 40000, dport: 53 },
    reply: { src: '10.244.1.2', dst: '10.0.0.1', proto: 17, sport: 5353, dport: 40000 },
  }));
  assert.equal(golden[0x69], 0x10, 'the garbage padding byte after the reply CTA_PROTO_NUM');
  golden[0x69] = 0;
  assert.equal(ours.toString('hex'), golden.toString('hex'));
});

test('kernel replies decode to the flows conntrack -I created', () => {
  const v4 = flowsOf('list4');
  assert.equal(v4.length, 3);
  const udp = v4.find((f) => f.orig.dport === 53)!;
  assert.deepEqual(udp.orig, { src: '10.0.0.1', dst: '10.96.0.10', proto: 17, sport: 40000, dport: 53 });
  assert.deepEqual(udp.reply, { src: '10.244.1.2', dst: '10.0.0.1', proto: 17, sport: 5353, dport: 40000 });
  assert.equal(udp.family, 'ipv4');
  assert.ok(udp.status & IPS.SEEN_REPLY && udp.status & IPS.CONFIRMED, `status 0x${udp.status.toString(16)}`);
  assert.ok(udp.timeout > 0 && udp.timeout <= 100);
  assert.ok(udp.id > 0);
  const tcp = v4.find((f) => f.orig.proto === 6)!;
  assert.deepEqual(tcp.reply, { src: '10.244.1.3', dst: '10.0.0.1', proto: 6, sport: 8080, dport: 40001 });
  const zoned = v4.find((f) => f.orig.dport === 8125)!;
  assert.equal(zoned.zone, 7);
  assert.equal(zoned.mark, 42);
  assert.equal(zoned.status & IPS.SEEN_REPLY, 0, 'unreplied');
  assert.equal(new Set(v4.map((f) => f.id)).size, 3, 'ids differ');

  const [v6] = flowsOf('list6');
  assert.deepEqual(v6.orig, { src: 'fd00::1', dst: 'fd00:96::10', proto: 17, sport: 40000, dport: 53 });
  assert.deepEqual(v6.reply, { src: 'fd00:244::2', dst: 'fd00::1', proto: 17, sport: 5353, dport: 40000 });
  assert.equal(v6.family, 'ipv6');
  // The same ids the delete captures listed (one netns, one run).
  assert.equal(flowsOf('delete6')[0].id, v6.id);
});

test('the kernel filtered the mark and status dumps (NLM_F_DUMP_FILTERED) and returned only matches', () => {
  const mark = flowsOf('mark');
  assert.deepEqual(mark.map((f) => f.orig.dport), [8125]);
  assert.ok(received('mark')[0].flags & 0x20, 'NLM_F_DUMP_FILTERED');
  assert.deepEqual(flowsOf('status').map((f) => f.orig.proto), [6], 'only the TCP flow was created ASSURED');
});

test('CTA_FILTER: original and reply tuple filters with their flag bits (host order)', () => {
  const b = bytes((w) => encodeDumpRequest(w, 7, 'ipv6', { orig: { dst: 'fd00:96::10', proto: 17, dport: 53 }, reply: { src: 'fd00:244::2' } }));
  const [m] = parseMessages(b);
  assert.equal(m.type, ctType(IPCTNL_MSG.CT_GET));
  assert.equal(m.flags, 0x301, 'REQUEST|DUMP');
  assert.equal(m.family, 10);
  const a = attrMap(m.payload);
  const filter = attrMap(a.get(CTA.FILTER)!);
  assert.equal(filter.get(CTA_FILTER.ORIG_FLAGS)!.readUInt32LE(0), CTA_FILTER_F.IP_DST | CTA_FILTER_F.PROTO_NUM | CTA_FILTER_F.PROTO_DST_PORT);
  assert.equal(filter.get(CTA_FILTER.REPLY_FLAGS)!.readUInt32LE(0), CTA_FILTER_F.IP_SRC);
  const orig = attrMap(a.get(CTA.TUPLE_ORIG)!);
  const proto = attrMap(orig.get(CTA_TUPLE.PROTO)!);
  assert.equal(proto.get(CTA_PROTO.NUM)![0], 17);
  assert.equal(proto.get(CTA_PROTO.DST_PORT)!.readUInt16BE(0), 53);
  assert.equal(proto.get(CTA_PROTO.SRC_PORT), undefined);
  // Every nest carries NLA_F_NESTED, as libnetfilter_conntrack sends them.
  const nested = [...iterAttrs(m.payload)].filter((x) => x.type === CTA.TUPLE_ORIG || x.type === CTA.FILTER);
  assert.ok(nested.every((x) => x.nested));
  // Proto-only filter: one flag.
  const p = attrMap(parseMessages(bytes((w) => encodeDumpRequest(w, 1, 'ipv4', { orig: { proto: 17 } })))[0].payload);
  assert.equal(attrMap(p.get(CTA.FILTER)!).get(CTA_FILTER.ORIG_FLAGS)!.readUInt32LE(0), CTA_FILTER_F.PROTO_NUM);
});

test('delete round trip with a zone; bad input names the field', () => {
  const orig = { src: '10.0.0.2', dst: '10.96.0.11', proto: 17, sport: 41000, dport: 8125 };
  const [m] = parseMessages(bytes((w) => encodeDelete(w, 9, { family: 'ipv4', orig, id: 0xdeadbeef, zone: 7 })));
  const a = attrMap(m.payload);
  assert.equal(read.u32be(a.get(CTA.ID)!), 0xdeadbeef);
  assert.equal(read.u16be(a.get(CTA.ZONE)!), 7);
  // Decoding our own tuple gives it back.
  // Our delete, read as a flow message, lacks the reply tuple: the decoder says so instead of guessing.
  assert.throws(() => decodeFlow({ ...m, type: ctType(IPCTNL_MSG.CT_NEW) }), /CTA_TUPLE_REPLY/);
  assert.throws(() => bytes((w) => encodeDelete(w, 1, { family: 'ipv4', orig: { ...orig, src: 'fd00::1' }, id: 1 })), /orig\.src: "fd00::1" is not an IPv4 address/);
  assert.throws(() => bytes((w) => encodeDelete(w, 1, { family: 'ipv4', orig: { ...orig, dport: 70000 }, id: 1 })), /orig\.dport: 70000 is not a port/);
  assert.throws(() => bytes((w) => encodeDelete(w, 1, { family: 'ipv4', orig, id: -1 })), /id: -1/);
  assert.throws(() => bytes((w) => encodeDumpRequest(w, 1, 'ipv4', { orig: { dport: 53 } })), /filter\.orig\.proto: required/);
});

test('address text round trips in canonical form', () => {
  for (const [fam, s, canon] of [['ipv4', '10.96.0.10', '10.96.0.10'], ['ipv6', 'FD00:0:0::10', 'fd00::10'], ['ipv6', '::ffff:10.0.0.1', '::ffff:10.0.0.1'], ['ipv6', '2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1']] as const) {
    assert.equal(ctAddrText(ctAddrBytes(fam, s, 'x')), canon);
  }
  assert.throws(() => ctAddrBytes('ipv4', '10.0.0.256', 'f'), /f: "10.0.0.256"/);
  assert.throws(() => ctAddrBytes('ipv6', '1::2::3', 'f'), /not an IPv6/);
});
