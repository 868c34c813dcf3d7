/**
 * `npm run bench` (and `npm run bench -- --quick`): sync performance at cluster scale, side by side with `nft -f`
 * of the same Services in upstream kube-proxy's 1.36 layout, in the same run, in throwaway network namespaces.
 *
 * For each size (Services × 10 endpoints, ClusterIP):
 * - cold full sync through the agent's own code path: state → snapshot → compile → plan → encode → kernel;
 * - `nft -f` of our rendered text, and `nft -f` of upstream's layout (each in a fresh namespace);
 * - one endpoint change: wall time from the change to the kernel's ACK, and the bytes sent;
 * - the agent's peak RSS holding the cluster (a child process with the file source path);
 * - the kernel hold time: the cold sync is ONE transaction (one atomic batch), so its kernel time is the longest
 *   the kernel holds the nf_tables commit for this agent;
 * - the data plane (bench/dataplane.ts, in its own private world): TCP connect p50/p99 to ClusterIPs with 1, 10,
 *   100 and 250 endpoints, with 100 and with 30,000 Services loaded.
 * Cold syncs are repeated (3× at ≤ 10,000 Services) and the median is reported; the one-endpoint change is
 * repeated 7× (median). `--quick` (CI): 1,000 Services once, a small data-plane run; it fails when a sync sent
 * nothing, when a connection through a ClusterIP failed or reached a wrong endpoint: correctness, not timings.
 * Writes bench/results/latest.json (quick: latest-quick.json) and bench/results/sync-time.svg, and prints tables.
 * For perf work: `--sizes=10000[,30000]`, `--no-nft`, `--no-dataplane` run a part (written to latest-partial.json).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigSchema } from '../config-schema/config.ts';
import { ClusterState } from '../agent/cluster-state.ts';
import { SnapshotBuilder } from '../agent/snapshot.ts';
import { commitDelta, compile, plan, render } from '../rules/index.ts';
import { encodeBatch } from '../netlink/batch.ts';
import { NftSocket } from '../netlink/socket.ts';
import { kubeObjects, syntheticServices, upstreamRuleset } from './upstream-layout.ts';
import { runInPrivateWorld } from '../e2e/world/netns.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const INSIDE = 'NFTPROXY_BENCH_INSIDE';
const args = process.argv.slice(2);
const quick = args.includes('--quick');
const sizesArg = args.find((a) => a.startsWith('--sizes='));
const SIZES = sizesArg ? sizesArg.slice(8).split(',').map(Number) : quick ? [1000] : [1000, 10_000, 30_000];
/** `--no-nft` / `--no-dataplane`: skip the `nft -f` comparison / the data-plane run (perf work on the agent's path). */
const noNft = args.includes('--no-nft');
const noDataplane = args.includes('--no-dataplane');
const ENDPOINTS = 10;
/** Upstream's layout is quadratic in the kernel: past this many seconds we stop waiting and report a lower bound. */
const NFT_TIMEOUT_S = quick ? 60 : 150;
const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

if (process.env[INSIDE] !== '1') {
  const unshareArgs = process.getuid?.() === 0 ? ['--net', '--mount', '--propagation', 'private'] : ['--user', '--map-root-user', '--net', '--mount', '--propagation', 'private'];
  const r = spawnSync('unshare', [...unshareArgs, process.execPath, new URL(import.meta.url).pathname, ...args], { stdio: 'inherit', env: { ...process.env, [INSIDE]: '1' } });
  process.exit(r.status ?? 1);
}

/** Runs `nft -f file` in a fresh netns; returns seconds, or null past the timeout. */
function nftLoad(file: string): number | null {
  const t0 = performance.now();
  const r = spawnSync('unshare', ['-n', 'nft', '-f', file], { timeout: NFT_TIMEOUT_S * 1000, killSignal: 'SIGKILL', encoding: 'utf8' });
  if (r.status !== 0) return r.signal ? null : (() => { throw new Error(`nft -f ${file}: ${r.stderr}`); })();
  return (performance.now() - t0) / 1000;
}

interface Row {
  services: number; endpoints: number;
  snapshotMs: number; compileMs: number; planMs: number; encodeMs: number; kernelMs: number; coldTotalMs: number;
  /** Repetitions the cold numbers are the median of. */
  coldRuns: number;
  batchBytes: number; messages: number;
  nftOursS: number | null; nftUpstreamS: number | null;
  incrementalMs: number; incrementalBytes: number; incrementalOps: number;
  peakRssMiB: number | null;
}

const cfg = ConfigSchema.parse({ clusterCIDR: '10.0.0.0/8', ipFamilies: ['IPv4'], source: { type: 'file', path: 'x' } });
const rows: Row[] = [];
const dir = mkdtempSync(join(tmpdir(), 'nftproxy-bench-'));
for (const n of SIZES) {
  const svcs = syntheticServices(n, ENDPOINTS);
  const objs = kubeObjects(svcs);
  const reps = quick || n > 10_000 ? 1 : 3;
  type Cold = { snapshotMs: number; compileMs: number; planMs: number; encodeMs: number; kernelMs: number; coldTotalMs: number; bytes: number; messages: number };
  const colds: Cold[] = [];
  let state!: ClusterState, builder!: SnapshotBuilder, rs!: ReturnType<typeof compile>, stale = new Map<string, number>();
  let sock!: NftSocket;
  for (let rep = 0; rep < reps; rep++) {
    spawnSync('nft', ['flush', 'ruleset']);
    if (rep > 0) sock.close();
    sock = NftSocket.open();
    (globalThis as { gc?: () => void }).gc?.();
    const tStart = performance.now();
    state = new ClusterState('node-1', () => {});
    state.replace('Service', objs.services);
    state.replace('EndpointSlice', objs.slices);
    builder = new SnapshotBuilder(cfg, () => {});
    builder.invalidate(state.checkout());
    const snap = builder.build(state, 'IPv4');
    const t1 = performance.now();
    rs = compile(snap);
    const t2 = performance.now();
    const p = plan(null, rs, { full: true, now: Date.now(), stale: new Map() });
    const t3 = performance.now();
    const encoded = encodeBatch(p.ops, { seqStart: 1 });
    const t4 = performance.now();
    const sent = await sock.sendBatch(p.ops);
    const t5 = performance.now();
    stale = p.stale;
    colds.push({
      snapshotMs: t1 - tStart, compileMs: t2 - t1, planMs: t3 - t2, encodeMs: t4 - t3, kernelMs: sent.kernelMs,
      coldTotalMs: (t5 - tStart) - (t4 - t3), // sendBatch encodes again; count the encoding once
      bytes: encoded.bytes, messages: encoded.messages,
    });
  }
  const med = (k: keyof Cold) => median(colds.map((c) => c[k]));

  // One endpoint change, from the change to the ACK (7 different Services; median).
  const incMs: number[] = [];
  let inc = { bytes: 0 }, incOps = 0;
  for (let k = 0; k < 7; k++) {
    const i = Math.floor(n / 2) + k;
    const slice = structuredClone(objs.slices[i]) as { endpoints: Array<{ addresses: string[] }> };
    slice.endpoints[0].addresses = [`10.127.0.${k + 1}`];
    const c0 = performance.now();
    state.upsert('EndpointSlice', slice);
    builder.invalidate(state.checkout());
    // As the agent's syncer does it: the snapshot delta as a hint, an in-place compile, commit after the ACK.
    const rs2 = compile(builder.build(state, 'IPv4'), { previous: rs, inPlace: true, changed: builder.lastDelta('IPv4') });
    const p2 = plan(rs, rs2, { full: false, now: Date.now(), stale });
    inc = await sock.sendBatch(p2.ops);
    commitDelta(rs2);
    incMs.push(performance.now() - c0);
    incOps = p2.ops.length;
    rs = rs2;
    stale = p2.stale;
  }
  sock.close();

  const ours = join(dir, `ours-${n}.nft`);
  writeFileSync(ours, render(rs));
  const up = join(dir, `upstream-${n}.nft`);
  writeFileSync(up, upstreamRuleset(svcs, { clusterCIDR: '10.0.0.0/8' }));
  const nftOursS = noNft ? null : nftLoad(ours);
  const nftUpstreamS = noNft ? null : nftLoad(up);

  // Peak RSS of an agent process holding this cluster (file source path, compile and plan; no kernel).
  const listFile = join(dir, `list-${n}.json`);
  writeFileSync(listFile, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [...objs.services, ...objs.slices] }));
  const probe = spawnSync(process.execPath, [join(ROOT, 'bench/rss-probe.ts'), listFile], { encoding: 'utf8', timeout: 300_000 });
  const peakRssMiB = probe.status === 0 ? Number(JSON.parse(probe.stdout).peakRssMiB) : null;

  rows.push({
    services: n, endpoints: n * ENDPOINTS,
    snapshotMs: med('snapshotMs'), compileMs: med('compileMs'), planMs: med('planMs'), encodeMs: med('encodeMs'), kernelMs: med('kernelMs'),
    coldTotalMs: med('coldTotalMs'), coldRuns: reps,
    batchBytes: colds[0].bytes, messages: colds[0].messages,
    nftOursS, nftUpstreamS,
    incrementalMs: median(incMs), incrementalBytes: inc.bytes, incrementalOps: incOps, peakRssMiB,
  });
  process.stderr.write(`measured ${n} services\n`);
}

// The data plane, in its own private world (bench/dataplane.ts).
type DpRow = { services: number; endpoints: number; p50us: number; p99us: number; failures: number; endpointsReached: number; wrongEndpoint: number };
let dataplane: { connectsPerTarget: number; rows: DpRow[] } | null = null;
const dpRun = noDataplane ? null : runInPrivateWorld(join(ROOT, 'bench/dataplane.ts'), quick ? ['--quick'] : [], 900_000);
if (dpRun) try { dataplane = JSON.parse(dpRun.stdout.trim().split('\n').pop() ?? ''); } catch { process.stderr.write(`bench: the data-plane run failed (${dpRun.status}): ${dpRun.stderr.slice(-2000)}\n`); }

const f = (x: number | null, d = 0) => (x === null ? `>${NFT_TIMEOUT_S}s` : x.toFixed(d));
const lines = [
  '| Services × 10 | snapshot ms | compile ms | plan ms | encode ms | kernel ms (hold time) | cold total ms | batch MB | nft -f ours s | nft -f upstream 1.36 s | upstream / ours | 1 endpoint change ms | bytes sent | peak RSS MiB |',
  '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ...rows.map((r) => `| ${r.services.toLocaleString('en')} | ${f(r.snapshotMs)} | ${f(r.compileMs)} | ${f(r.planMs)} | ${f(r.encodeMs)} | ${f(r.kernelMs)} | ${f(r.coldTotalMs)} | ${(r.batchBytes / 1e6).toFixed(1)} | ${f(r.nftOursS, 2)} | ${f(r.nftUpstreamS, 2)} | ${r.nftUpstreamS === null ? `>${(NFT_TIMEOUT_S / (r.coldTotalMs / 1000)).toFixed(0)}×` : `${(r.nftUpstreamS / (r.coldTotalMs / 1000)).toFixed(1)}×`} | ${f(r.incrementalMs, 1)} | ${r.incrementalBytes} | ${r.peakRssMiB === null ? '?' : r.peakRssMiB.toFixed(0)} |`),
];
if (dataplane) {
  lines.push('', `Data plane: TCP connect (SYN to SYN-ACK through DNAT) to a ClusterIP, ${dataplane.connectsPerTarget} connects per target, µs`, '',
    '| Services loaded | endpoints | p50 µs | p99 µs | failed | endpoints reached |', '|---|---|---|---|---|---|',
    ...dataplane.rows.map((d) => `| ${d.services.toLocaleString('en')} | ${d.endpoints} | ${d.p50us.toFixed(0)} | ${d.p99us.toFixed(0)} | ${d.failures} | ${d.endpointsReached} |`));
}
process.stdout.write(lines.join('\n') + '\n');

mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
const machine = { cpus: (await import('node:os')).cpus().length, cpu: (await import('node:os')).cpus()[0]?.model, kernel: (await import('node:os')).release(), node: process.version };
const partial = !!sizesArg || noNft || noDataplane;
const jsonName = quick ? 'latest-quick.json' : partial ? 'latest-partial.json' : 'latest.json';
writeFileSync(join(ROOT, `bench/results/${jsonName}`), JSON.stringify({ date: new Date().toISOString(), quick, machine, rows, dataplane }, null, 2) + '\n');
if (!quick && !partial) writeFileSync(join(ROOT, 'bench/results/sync-time.svg'), chart(rows));
process.stdout.write(`\nwrote bench/results/${jsonName}${quick || partial ? '' : ' and bench/results/sync-time.svg'} (${machine.cpus} CPUs, ${machine.cpu}, Linux ${machine.kernel}, Node ${machine.node})\n`);
// Sanity (CI runs --quick): the sync must have been correct, not just fast.
if (rows.some((r) => r.incrementalOps === 0 || r.messages < r.services)) { process.stderr.write('bench: a sync sent nothing: broken\n'); process.exit(1); }
if (!dataplane && !noDataplane) { process.stderr.write('bench: no data-plane result\n'); process.exit(1); }
for (const d of dataplane?.rows ?? []) {
  if (d.failures > 0 || d.wrongEndpoint > 0 || (d.endpoints > 1 && d.endpointsReached < 2)) {
    process.stderr.write(`bench: data plane broken at ${d.services} Services / ${d.endpoints} endpoints: ${JSON.stringify(d)}\n`);
    process.exit(1);
  }
}

/** A small log-log SVG line chart of cold sync time against the number of Services. */
function chart(rs: Row[]): string {
  const W = 640, H = 360, L = 70, B = 50, T = 30, R = 170;
  const xs = rs.map((r) => r.services);
  const series = [
    { name: 'nftproxy (netlink, end to end)', color: '#1f77b4', ys: rs.map((r) => r.coldTotalMs / 1000) },
    { name: 'nft -f of nftproxy text', color: '#2ca02c', ys: rs.map((r) => r.nftOursS) },
    { name: 'nft -f, upstream 1.36 layout', color: '#d62728', ys: rs.map((r) => r.nftUpstreamS ?? NFT_TIMEOUT_S) },
  ];
  const all = series.flatMap((s) => s.ys.filter((y): y is number => y !== null));
  const lx = (x: number) => Math.log10(x), ly = (y: number) => Math.log10(Math.max(y, 1e-3));
  const [x0, x1] = [lx(Math.min(...xs)) - 0.1, lx(Math.max(...xs)) + 0.1];
  const [y0, y1] = [Math.floor(ly(Math.min(...all))), Math.ceil(ly(Math.max(...all)))];
  const px = (x: number) => L + ((lx(x) - x0) / (x1 - x0 || 1)) * (W - L - R);
  const py = (y: number) => H - B - ((ly(y) - y0) / (y1 - y0 || 1)) * (H - B - T);
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${L}" y="18" font-size="14">Cold full sync time vs Services (× ${ENDPOINTS} endpoints), log-log</text>`];
  for (let e = y0; e <= y1; e++) parts.push(`<line x1="${L}" x2="${W - R}" y1="${py(10 ** e)}" y2="${py(10 ** e)}" stroke="#ddd"/><text x="${L - 8}" y="${py(10 ** e) + 4}" text-anchor="end">${10 ** e >= 1 ? 10 ** e : (10 ** e).toFixed(-e)} s</text>`);
  for (const x of xs) parts.push(`<text x="${px(x)}" y="${H - B + 18}" text-anchor="middle">${x.toLocaleString('en')}</text>`);
  parts.push(`<text x="${(L + W - R) / 2}" y="${H - 12}" text-anchor="middle">Services</text>`);
  series.forEach((s, k) => {
    const pts = s.ys.map((y, i) => (y === null ? null : `${px(xs[i])},${py(y)}`)).filter(Boolean);
    parts.push(`<polyline fill="none" stroke="${s.color}" stroke-width="2" points="${pts.join(' ')}"/>`);
    for (const pt of pts) { const [a, b] = pt!.split(','); parts.push(`<circle cx="${a}" cy="${b}" r="3" fill="${s.color}"/>`); }
    parts.push(`<rect x="${W - R + 10}" y="${T + 20 * k}" width="12" height="3" fill="${s.color}"/><text x="${W - R + 28}" y="${T + 20 * k + 5}">${s.name}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}
