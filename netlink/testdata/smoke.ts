// Ad-hoc: push a compiled ruleset over netlink inside a throwaway netns (run under `unshare -n`).
import { NftSocket } from '../socket.ts';
import { compile, toBatchOps, render } from '../../rules/index.ts';
import { smallCluster, syntheticCluster } from '../../rules/testdata/fixtures.ts';
import { execFileSync } from 'node:child_process';
const n = Number(process.argv[2] ?? 0);
const snap = n ? syntheticCluster(n) : smallCluster();
const t0 = performance.now();
const rs = compile(snap);
const t1 = performance.now();
const ops = toBatchOps(rs);
const t2 = performance.now();
const sock = NftSocket.open();
const r = await sock.sendBatch(ops);
const t3 = performance.now();
console.log(JSON.stringify({ compileMs: t1 - t0, planMs: t2 - t1, sendMs: t3 - t2, ...r, ops: ops.length }));
if (!n) console.log(execFileSync('nft', ['list', 'ruleset']).toString().slice(0, 3000));
console.log('gen', await sock.getGeneration(), 'tables', (await sock.listTables()).map((t) => t.name), 'chains', (await sock.listChains('ip', 'nftproxy')).length, 'rules', (await sock.listRules('ip', 'nftproxy')).length);
