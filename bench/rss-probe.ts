/**
 * Peak RSS of the agent's state for a List file: file source parsing, cluster state, snapshot, compile and a full
 * plan, as `nftproxy run` holds them (no kernel). Prints `{ "peakRssMiB": N }`. Usage: rss-probe.ts LIST_FILE
 */
import { ConfigSchema } from '../config-schema/config.ts';
import { ClusterState } from '../agent/cluster-state.ts';
import { SnapshotBuilder } from '../agent/snapshot.ts';
import { readListFile } from '../agent/file-source.ts';
import { compile, plan } from '../rules/index.ts';
import { encodeBatch } from '../netlink/batch.ts';

const objs = readListFile(process.argv[2]);
const state = new ClusterState('node-1', () => {});
state.replace('Service', objs.Service);
state.replace('EndpointSlice', objs.EndpointSlice);
const builder = new SnapshotBuilder(ConfigSchema.parse({ clusterCIDR: '10.0.0.0/8', ipFamilies: ['IPv4'], source: { type: 'file', path: 'x' } }), () => {});
builder.invalidate(state.checkout());
const rs = compile(builder.build(state, 'IPv4'));
const p = plan(null, rs, { full: true, now: Date.now(), stale: new Map() });
const b = encodeBatch(p.ops, { seqStart: 1 });
process.stdout.write(JSON.stringify({ peakRssMiB: process.resourceUsage().maxRSS / 1024, bytes: b.bytes }) + '\n');
