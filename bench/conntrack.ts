/**
 * Conntrack benchmark: what kernel-side filtering saves. In a throwaway network namespace (it re-executes itself
 * under `unshare -n`; it refuses to run in the initial namespace) it creates TCP and UDP flows over ctnetlink,
 * then times a dump of the whole family, a dump filtered on protocol = UDP (what the reconciler sends), and the
 * delete of 1000 UDP flows by tuple + CTA_ID. Prints one JSON object.
 *   node bench/conntrack.ts [TCP_FLOWS=100000] [UDP_FLOWS=10000]
 * Timings are wall-clock on a shared machine: noisy.
 */
import { readlinkSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ConntrackSocket } from '../netlink/ct-socket.ts';
import { IPPROTO, type CtCreateSpec } from '../netlink/ctnetlink.ts';

const [tcpN = 100_000, udpN = 10_000] = process.argv.slice(2).map(Number);
const PARENT_NS = 'NFTPROXY_CT_BENCH_PARENT_NETNS';
if (!process.env[PARENT_NS]) {
  const env = { ...process.env, [PARENT_NS]: readlinkSync('/proc/self/ns/net') };
  const r = spawnSync('unshare', ['-n', process.execPath, fileURLToPath(import.meta.url), String(tcpN), String(udpN)], { stdio: 'inherit', env });
  process.exit(r.status ?? 1);
}
if (readlinkSync('/proc/self/ns/net') === process.env[PARENT_NS]) throw new Error('refusing to run outside the throwaway network namespace');

const ip = (base: number, i: number) => `10.${base}.${(i >> 8) & 255}.${i & 255}`;
const flows = (n: number, proto: number, base: number, dport: number): CtCreateSpec[] => Array.from({ length: n }, (_, i) => ({
  family: 'ipv4', timeoutSeconds: 600, tcpState: proto === IPPROTO.TCP ? 3 : undefined,
  orig: { src: ip(base, i >> 6), dst: '10.96.0.10', proto, sport: 1024 + (i & 63), dport },
  reply: { src: '10.244.1.2', dst: ip(base, i >> 6), proto, sport: dport, dport: 1024 + (i & 63) },
}));
const time = <T>(fn: () => T): [T, number] => { const t0 = performance.now(); const v = fn(); return [v, Math.round((performance.now() - t0) * 10) / 10]; };

const sock = ConntrackSocket.open();
const out: Record<string, unknown> = { tcpFlows: tcpN, udpFlows: udpN };
const [c1, tcpMs] = time(() => sock.createFlows(flows(tcpN, IPPROTO.TCP, 1, 80)));
const [c2, udpMs] = time(() => sock.createFlows(flows(udpN, IPPROTO.UDP, 2, 53)));
out.create = { tcp: c1.created, udp: c2.created, tcpMs, udpMs, failed: c1.failed.length + c2.failed.length };
for (let i = 0; i < 3; i++) {
  const [all, allMs] = time(() => sock.dump('ipv4'));
  const [udp, udpOnlyMs] = time(() => sock.dump('ipv4', { orig: { proto: IPPROTO.UDP } }));
  (out.dumps ??= [] as unknown[]) as unknown[];
  (out.dumps as unknown[]).push({ all: all.length, allMs, udpFiltered: udp.length, udpFilteredMs: udpOnlyMs });
}
const udp = sock.dump('ipv4', { orig: { proto: IPPROTO.UDP } }).slice(0, 1000);
const [del, delMs] = time(() => sock.deleteFlows(udp.map((f) => ({ family: f.family, orig: f.orig, id: f.id }))));
out.delete1000 = { ...del, failed: del.failed.length, ms: delMs };
sock.close();
process.stdout.write(JSON.stringify(out) + '\n');
