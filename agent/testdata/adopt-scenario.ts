/**
 * Kernel scenario for adopt.test.ts and tamper.test.ts. Run it ONLY inside a throwaway network namespace
 * (`unshare -n`): it programs nf_tables. It syncs the real kubectl fixture (both families) with one syncer, then
 * starts a second syncer (a restarted agent) with adoption and records what it sent; then it tampers with the
 * table in several ways and records what adoption plans and what the notification listener reports.
 * Prints one JSON object.
 */
import { execFileSync } from 'node:child_process';
import { loadConfig } from '../config.ts';
import { ClusterState } from '../cluster-state.ts';
import { readListFile } from '../file-source.ts';
import { SnapshotBuilder, type IPFamily } from '../snapshot.ts';
import { Syncer } from '../syncer.ts';
import { allocatorFromTable, contentOf, planAdoption, readTable } from '../adopt.ts';
import { TamperWatcher, foreignChanges } from '../tamper.ts';
import { systemClock } from '../runner.ts';
import { toBatchOps, compile } from '../../rules/index.ts';
import { NftSocket } from '../../netlink/socket.ts';
import { NFNLGRP_NFTABLES } from '../../netlink/message.ts';
import type { BatchOp } from '../../netlink/types.ts';

const cfg = loadConfig(new URL('../../e2e/testdata/fixture-config.json', import.meta.url).pathname);
const quiet = { info() {}, warn() {}, error() {}, debug() {} };
const families: IPFamily[] = ['IPv4', 'IPv6'];
const fam = { IPv4: 'ip', IPv6: 'ip6' } as const;
const out: Record<string, unknown> = {};
const nft = (...args: string[]) => execFileSync('nft', args, { encoding: 'utf8' });

function freshState(): ClusterState {
  const state = new ClusterState('node-1', () => {});
  const objs = readListFile(cfg.source.type === 'file' ? cfg.source.path : '');
  state.replace('Node', objs.Node);
  state.replace('Service', objs.Service);
  state.replace('EndpointSlice', objs.EndpointSlice);
  return state;
}

const notify = NftSocket.open({ groups: [NFNLGRP_NFTABLES] });
const sock1 = NftSocket.open();
const first = new Syncer({ families, state: freshState(), builder: new SnapshotBuilder(cfg, () => {}), sender: sock1, now: () => Date.now(), log: quiet });
out.first = (await first.sync()).map((r) => ({ family: r.family, full: r.full, ops: r.ops }));
out.firstNotifications = foreignChanges(notify.drain(), { table: 'nftproxy', families: ['ip', 'ip6'], ownPortIds: new Set([sock1.portId]) }).length;
sock1.close();

// A restarted agent: a new socket, a new syncer with adoption.
async function restart(label: string): Promise<void> {
  const sock = NftSocket.open();
  const sent: BatchOp[][] = [];
  const plans: Record<string, unknown> = {};
  const sender = { sendBatch: (ops: readonly BatchOp[]) => { sent.push([...ops]); return sock.sendBatch(ops); } };
  const s = new Syncer({
    families, state: freshState(), builder: new SnapshotBuilder(cfg, () => {}), sender, now: () => Date.now(), log: quiet,
    adopt: async (family, desired) => {
      const p = planAdoption(await readTable(sock, fam[family], 'nftproxy'), contentOf(toBatchOps(desired))!);
      plans[family] = { kind: p.kind, reason: p.reason, ops: p.ops.map((o) => `${o.op} ${o.kind}`), mismatches: p.mismatches, compared: p.compared };
      return p.kind === 'adopt' ? p.ops : null;
    },
  });
  const results = (await s.sync()).map((r) => ({ family: r.family, full: r.full, ops: r.ops }));
  // After adoption (and any repair), the kernel must equal the desired ruleset exactly.
  const equal: Record<string, boolean> = {};
  for (const f of families) {
    const p = planAdoption(await readTable(sock, fam[f], 'nftproxy'), contentOf(toBatchOps(compile(new SnapshotBuilder(cfg, () => {}).build(freshState(), f))))!);
    equal[f] = p.kind === 'adopt' && p.ops.length === 0;
  }
  out[label] = { results, plans, batches: sent.length, equalAfter: equal };
  sock.close();
}

await restart('identical');
notify.drain();
const serviceChain = nft('list', 'table', 'ip', 'nftproxy').split('\n').map((l) => /chain (service-\S+)/.exec(l)?.[1]).find(Boolean)!;
nft('flush', 'chain', 'ip', 'nftproxy', serviceChain);
nft('add', 'chain', 'ip', 'nftproxy', 'stray-chain');
nft('delete', 'element', 'ip', 'nftproxy', 'cluster-ips', `{ ${nft('list', 'set', 'ip', 'nftproxy', 'cluster-ips').match(/elements = \{ ([0-9.]+)/)![1]} }`);
const tamperMsgs = notify.drain();
out.tamper = foreignChanges(tamperMsgs, { table: 'nftproxy', families: ['ip', 'ip6'], ownPortIds: new Set([notify.portId]) });
out.tamperIp6Only = foreignChanges(tamperMsgs, { table: 'nftproxy', families: ['ip6'], ownPortIds: new Set() }).length;
out.tamperOtherTable = foreignChanges(tamperMsgs, { table: 'other', families: ['ip', 'ip6'], ownPortIds: new Set() }).length;
await restart('tampered');
nft('delete', 'table', 'ip6', 'nftproxy');
await restart('ip6Missing');
nft('insert', 'rule', 'ip', 'nftproxy', 'nat-output', 'counter');
await restart('baseChainChanged');
notify.drain();

// History: endpoint changes keep surviving endpoints in their slots, so after a change the kernel's allocation
// differs from a cold compile. A restarted syncer seeded from the kernel's endpoint maps sends nothing; an unseeded
// one has to rewrite the endpoint elements of the three kube-dns ServicePorts.
{
  const sock = NftSocket.open();
  type Slice = { addressType: string; metadata: { name: string }; endpoints?: unknown[] };
  const slices = readListFile(cfg.source.type === 'file' ? cfg.source.path : '').EndpointSlice as unknown as Slice[];
  // Replace the first of kube-dns's two endpoints: the new one takes the freed slot 0, ahead of the old second endpoint,
  // where a cold compile puts it after.
  const slice = structuredClone(slices.find((x) => x.metadata.name.startsWith('kube-dns-'))!);
  const [e0, e1] = slice.endpoints as Array<{ addresses: string[] }>;
  slice.endpoints = [e1, { ...e0, addresses: ['10.244.99.99'] }];
  const changed = (): ClusterState => { const st = freshState(); st.upsert('EndpointSlice', slice); return st; };
  const history: Record<string, unknown> = { slice: slice.metadata.name };
  for (const seeded of [true, false]) {
    // The history: a full sync of the fixture, then the change as an incremental sync.
    const state = freshState();
    const s = new Syncer({ families, state, builder: new SnapshotBuilder(cfg, () => {}), sender: sock, now: () => Date.now(), log: quiet });
    s.requestFull();
    await s.sync();
    state.upsert('EndpointSlice', slice);
    const change = (await s.sync()).map((r) => r.ops);
    // The restart.
    const plans: Record<string, unknown> = {};
    let batches = 0;
    const r = new Syncer({
      families, state: changed(), builder: new SnapshotBuilder(cfg, () => {}), now: () => Date.now(), log: quiet,
      sender: { sendBatch: (ops: readonly BatchOp[]) => { batches++; return sock.sendBatch(ops); } },
      seedAllocator: seeded ? async (family) => allocatorFromTable(await readTable(sock, fam[family], 'nftproxy')) : undefined,
      adopt: async (family, desired) => {
        const p = planAdoption(await readTable(sock, fam[family], 'nftproxy'), contentOf(toBatchOps(desired))!);
        plans[family] = { kind: p.kind, ops: p.ops.length, mismatches: p.mismatches };
        return p.kind === 'adopt' ? p.ops : null;
      },
    });
    const results = (await r.sync()).map((x) => ({ family: x.family, full: x.full, ops: x.ops }));
    history[seeded ? 'seeded' : 'unseeded'] = { change, results, batches, plans };
  }
  out.history = history;
  sock.close();
}

// around(): our own batch sends no notifications to the listener; a foreign commit in the window is counted.
{
  const sock = NftSocket.open();
  const unseen: number[] = [];
  const tampers: unknown[] = [];
  const w = new TamperWatcher({
    source: notify, table: 'nftproxy', families: ['ip', 'ip6'], ownPortIds: new Set([sock.portId]), clock: systemClock, pollMs: 60_000,
    onTamper: (c) => tampers.push(c), onUnseenCommits: (n) => unseen.push(n),
  });
  w.start();
  const chain = (name: string): BatchOp[] => [{ op: 'add', kind: 'chain', chain: { family: 'ip', table: 'nftproxy', name } }];
  await w.around(() => sock.sendBatch(chain('ours-1')), () => sock.getGeneration());
  const afterOwn = notify.drain().length;
  await w.around(async () => { nft('add', 'chain', 'ip', 'nftproxy', 'theirs'); return sock.sendBatch(chain('ours-2')); }, () => sock.getGeneration());
  const afterForeign = notify.drain().length;
  // Outside around(): our batch is notified (and ignored by port id), a foreign one is reported.
  await sock.sendBatch(chain('ours-3'));
  const ownOutside = notify.drain();
  out.around = { afterOwn, afterForeign, unseen, ownOutside: ownOutside.length, ownOutsideForeign: foreignChanges(ownOutside, { table: 'nftproxy', families: ['ip'], ownPortIds: new Set([sock.portId]) }).length };
  w.stop(); // closes notify
  sock.close();
}
process.stdout.write(JSON.stringify(out, (_k, v) => (typeof v === 'bigint' ? String(v) : v)) + '\n');
