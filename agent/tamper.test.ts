/** Tamper detection: which nf_tables notifications are someone else's changes to our table; the poller on a fake clock. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NetlinkWriter } from '../netlink/attrs.ts';
import { NFTA_GEN, NFT_MSG, beginMessage, endMessage, nftType, parseMessages, type NetlinkMessage } from '../netlink/message.ts';
import { NFPROTO } from '../netlink/types.ts';
import { FakeClock } from './testing/fake-clock.ts';
import { TamperWatcher, foreignChanges, type ForeignChange } from './tamper.ts';

/** Builds a notification as the kernel multicasts it: nlmsg_pid = the sender's port id, attribute 1 = table. */
function notification(msg: number, family: number, portId: number, table: string | null, gen?: { pid: number; name: string }): NetlinkMessage {
  const w = new NetlinkWriter(256);
  const s = beginMessage(w, nftType(msg), 0, 0, family);
  if (table !== null) w.attrStr(1, table);
  if (gen) { w.attrU32be(NFTA_GEN.ID, 42); w.attrU32be(NFTA_GEN.PROC_PID, gen.pid); w.attrStr(NFTA_GEN.PROC_NAME, gen.name); }
  endMessage(w, s);
  const buf = Buffer.from(w.bytes());
  buf.writeUInt32LE(portId, 12);
  return parseMessages(buf)[0];
}

const opts = { table: 'nftproxy', families: ['ip', 'ip6'] as const, ownPortIds: new Set([777]) };

test('foreign changes: our port id is ignored; other tables and families are ignored; NEWGEN names the process', () => {
  const msgs = [
    notification(NFT_MSG.NEWRULE, NFPROTO.IPV4, 777, 'nftproxy'), // ours
    notification(NFT_MSG.NEWGEN, NFPROTO.UNSPEC, 777, null, { pid: 1, name: 'node' }),
    notification(NFT_MSG.DELTABLE, NFPROTO.IPV4, 5000, 'nftproxy'), // nft delete table ip nftproxy
    notification(NFT_MSG.DELRULE, NFPROTO.IPV4, 5000, 'other'), // someone else's table
    notification(NFT_MSG.DELTABLE, NFPROTO.INET, 5000, 'nftproxy'), // an inet table of the same name
    notification(NFT_MSG.NEWGEN, NFPROTO.UNSPEC, 5000, null, { pid: 4321, name: 'nft' }),
    notification(NFT_MSG.DELRULE, NFPROTO.IPV6, 6000, 'nftproxy'), // no NEWGEN in this read
  ];
  assert.deepEqual(foreignChanges(msgs, { ...opts, families: [...opts.families] }), [
    { op: 'DELTABLE', family: 'ip', portId: 5000, procPid: 4321, procName: 'nft' },
    { op: 'DELRULE', family: 'ip6', portId: 6000 },
  ]);
  assert.deepEqual(foreignChanges(msgs, { ...opts, families: ['ip6'] }).map((c) => c.op), ['DELRULE']);
  assert.deepEqual(foreignChanges(msgs, { ...opts, families: ['ip'], ownPortIds: new Set([777, 5000]) }), []);
});

test('the watcher polls every pollMs on the clock, reports once per poll, survives read errors, and closes on stop', async () => {
  const clock = new FakeClock();
  const queue: NetlinkMessage[][] = [];
  let closed = false;
  let failNext = false;
  const reports: ForeignChange[][] = [];
  const errors: unknown[] = [];
  const w = new TamperWatcher({
    source: { drain: () => { if (failNext) { failNext = false; throw new Error('recv: ENOBUFS'); } return queue.shift() ?? []; }, close: () => { closed = true; } },
    table: 'nftproxy', families: ['ip'], ownPortIds: new Set([777]), clock, pollMs: 100,
    onTamper: (c) => reports.push(c), onError: (e) => errors.push(e),
  });
  w.start();
  queue.push([notification(NFT_MSG.NEWRULE, NFPROTO.IPV4, 777, 'nftproxy')]);
  await clock.advance(100);
  assert.equal(reports.length, 0, 'our own change is not a tamper');
  queue.push([notification(NFT_MSG.DELRULE, NFPROTO.IPV4, 9, 'nftproxy'), notification(NFT_MSG.DELCHAIN, NFPROTO.IPV4, 9, 'nftproxy')]);
  await clock.advance(99);
  assert.equal(reports.length, 0, 'not before the poll interval');
  await clock.advance(1);
  assert.equal(reports.length, 1);
  assert.deepEqual(reports[0].map((c) => c.op), ['DELRULE', 'DELCHAIN']);
  failNext = true;
  await clock.advance(100);
  assert.equal(errors.length, 1);
  queue.push([notification(NFT_MSG.DELTABLE, NFPROTO.IPV4, 9, 'nftproxy')]);
  await clock.advance(100);
  assert.equal(reports.length, 2, 'still polling after a read error');
  w.stop();
  assert.equal(closed, true);
  assert.equal(clock.pending, 0);
  assert.equal(w.seen, 4);
});

test('around(): our batch runs outside the group; the generation tells foreign commits in that window apart', async () => {
  const clock = new FakeClock();
  const calls: string[] = [];
  const queue: NetlinkMessage[][] = [[notification(NFT_MSG.DELRULE, NFPROTO.IPV4, 9, 'nftproxy')]];
  let gen = 100;
  const unseen: number[] = [];
  const reports: ForeignChange[][] = [];
  const w = new TamperWatcher({
    source: { drain: () => queue.shift() ?? [], close: () => {}, setMembership: (g, on) => calls.push(`${on ? 'join' : 'leave'} ${g}`) },
    table: 'nftproxy', families: ['ip'], ownPortIds: new Set([777]), clock,
    onTamper: (c) => reports.push(c), onUnseenCommits: (n) => unseen.push(n),
  });
  w.start();
  const generation = async () => { calls.push(`gen ${gen}`); return gen; };

  // A committed batch of ours: +1 generation, nothing unseen. What was queued before is processed first.
  const r = await w.around(async () => { calls.push('batch'); gen++; return 'ok'; }, generation);
  assert.equal(r, 'ok');
  assert.deepEqual(calls, ['leave 7', 'gen 100', 'batch', 'join 7', 'gen 101']);
  assert.equal(reports.length, 1, 'the queued foreign change was reported before leaving the group');
  assert.deepEqual(unseen, []);

  // Someone else commits while we are out of the group: +2 for one batch of ours.
  await w.around(async () => { gen += 2; }, generation);
  assert.deepEqual(unseen, [1]);

  // A rejected batch commits nothing: +0 is fine, the error propagates, and we rejoin the group.
  calls.length = 0;
  await assert.rejects(w.around(async () => { throw new Error('EINVAL'); }, generation), /EINVAL/);
  assert.deepEqual(calls.slice(-2), ['join 7', `gen ${gen}`]);
  assert.deepEqual(unseen, [1]);

  // A rejected batch while someone else committed: +1 with nothing of ours is unseen.
  await assert.rejects(w.around(async () => { gen++; throw new Error('EBUSY'); }, generation));
  assert.deepEqual(unseen, [1, 1]);

  // After stop(), around() just runs the batch.
  w.stop();
  calls.length = 0;
  await w.around(async () => { calls.push('batch'); }, generation);
  assert.deepEqual(calls, ['batch']);
});
