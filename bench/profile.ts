/**
 * Stage profile of one cold full sync (no `nft`, no data plane): `node bench/profile.ts [SERVICES] [--kernel] [--reps=N]`.
 * Prints per-stage wall time and CPU time (ms; CPU is the steadier number on a busy machine) and heap/RSS (MiB) after each stage, as one JSON line. With `--kernel` the batch is
 * sent to the kernel; run it inside a throwaway namespace (`unshare -n node bench/profile.ts 10000 --kernel`).
 * With `--reps=N` the stages run N times in one process and the medians are printed (as bench/run.ts, warm).
 * A developer tool for perf work; the numbers are as noisy as the machine.
 */
import { ConfigSchema } from '../config-schema/config.ts';
import { ClusterState } from '../agent/cluster-state.ts';
import { SnapshotBuilder } from '../agent/snapshot.ts';
import { compile, plan } from '../rules/index.ts';
import { encodeBatch } from '../netlink/batch.ts';
import { NftSocket } from '../netlink/socket.ts';
import { kubeObjects, syntheticServices } from './upstream-layout.ts';

const n = Number(process.argv[2] ?? 10_000);
const kernel = process.argv.includes('--kernel');
const svcs = syntheticServices(n, 10);
const { services, slices } = kubeObjects(svcs);
const cfg = ConfigSchema.parse({ clusterCIDR: '10.0.0.0/8', ipFamilies: ['IPv4'], source: { type: 'file', path: 'x' } });
const mib = (x: number) => Math.round(x / 1048576);
const out: Record<string, number> = {};
let cpu0 = process.cpuUsage();
const mark = (name: string, t0: number) => {
  out[`${name}Ms`] = Math.round(performance.now() - t0);
  const c = process.cpuUsage(cpu0);
  out[`${name}CpuMs`] = Math.round((c.user + c.system) / 1000);
  cpu0 = process.cpuUsage();
  const m = process.memoryUsage();
  out[`${name}HeapMiB`] = mib(m.heapUsed);
  out[`${name}RssMiB`] = mib(m.rss);
  return performance.now();
};
async function once(): Promise<void> {
  (globalThis as { gc?: () => void }).gc?.();
  const sock = kernel ? NftSocket.open() : null;
  const start = performance.now();
  let t = start;
  const state = new ClusterState('node-1', () => {});
  state.replace('Service', services);
  state.replace('EndpointSlice', slices);
  t = mark('state', t);
  const builder = new SnapshotBuilder(cfg, () => {});
  builder.invalidate(state.checkout());
  const snap = builder.build(state, 'IPv4');
  t = mark('snapshot', t);
  const rs = compile(snap);
  t = mark('compile', t);
  const p = plan(null, rs, { full: true, now: Date.now(), stale: new Map() });
  t = mark('plan', t);
  const enc = encodeBatch(p.ops, { seqStart: 1 });
  t = mark('encode', t);
  if (sock) { const r = await sock.sendBatch(p.ops); out.kernelMs = Math.round(r.kernelMs); sock.close(); }
  out.totalMs = Math.round(performance.now() - start) - (out.encodeMs ?? 0) * (sock ? 1 : 0);
  out.bytes = enc.bytes;
  out.maxRssMiB = Math.round(process.resourceUsage().maxRSS / 1024);
}
const reps = Number(process.argv.find((a) => a.startsWith('--reps='))?.slice(7) ?? 1);
const runs: Array<Record<string, number>> = [];
for (let rep = 0; rep < reps; rep++) {
  for (const k of Object.keys(out)) delete out[k];
  await once();
  runs.push({ ...out });
}
if (reps > 1) {
  // The median of each number over the repetitions (the first one is cold: JIT and allocation warm-up).
  for (const k of Object.keys(runs[0])) { const s = runs.map((r) => r[k]).sort((x, y) => x - y); out[k] = s[Math.floor(s.length / 2)]; }
}
process.stdout.write(JSON.stringify(out) + '\n');
