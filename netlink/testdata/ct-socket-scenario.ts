/**
 * Kernel scenario for ct-socket.test.ts. Run it ONLY inside a throwaway network namespace (`unshare -n`): it
 * creates and deletes conntrack flows there with `conntrack -I` and our socket. Prints one JSON object.
 */
import { execFileSync } from 'node:child_process';
import { ConntrackSocket, ConntrackSocketError } from '../ct-socket.ts';
import { IPPROTO, type CtFlow } from '../ctnetlink.ts';

const ct = (args: string[]) => execFileSync('conntrack', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const insert = (src: string, dst: string, proto: 'udp' | 'tcp', sport: number, dport: number, rsrc: string, rport: number) =>
  ct(['-I', '-p', proto, '-s', src, '-d', dst, '--sport', String(sport), '--dport', String(dport), '-r', rsrc, '-q', src,
    '--reply-port-src', String(rport), '--reply-port-dst', String(sport), '-t', '300', ...(proto === 'tcp' ? ['--state', 'ESTABLISHED'] : [])]);

// IPv4: two UDP services and one TCP flow; IPv6: two UDP flows.
insert('10.0.0.1', '10.96.0.10', 'udp', 40000, 53, '10.244.1.2', 5353);
insert('10.0.0.1', '10.96.0.10', 'udp', 40001, 53, '10.244.1.3', 5353);
insert('10.0.0.1', '10.96.0.50', 'udp', 40125, 8125, '10.244.1.2', 8125);
insert('10.0.0.1', '10.96.0.10', 'tcp', 40002, 53, '10.244.1.2', 5353);
insert('fd00::1', 'fd00:96::10', 'udp', 40000, 53, 'fd00:244::2', 5353);
insert('fd00::1', 'fd00:96::10', 'udp', 40001, 53, 'fd00:244::3', 5353);
insert('fd00::1', 'fd00:96::50', 'udp', 40125, 8125, 'fd00:244::2', 8125);

const sock = ConntrackSocket.open();
const brief = (fs: CtFlow[]) => fs.map((f) => `${f.orig.proto} ${f.orig.dst}:${f.orig.dport} -> ${f.reply.src}:${f.reply.sport}`).sort();
const out: Record<string, unknown> = {};
try {
  out.all4 = brief(sock.dump('ipv4'));
  out.all6 = brief(sock.dump('ipv6'));
  out.udp4 = brief(sock.dump('ipv4', { orig: { proto: IPPROTO.UDP } }));
  out.udp6 = brief(sock.dump('ipv6', { orig: { proto: IPPROTO.UDP } }));
  for (const fam of ['ipv4', 'ipv6'] as const) {
    const svc = fam === 'ipv4' ? '10.96.0.10' : 'fd00:96::10';
    const ep = fam === 'ipv4' ? '10.244.1.3' : 'fd00:244::3';
    out[`byFrontend_${fam}`] = brief(sock.dump(fam, { orig: { dst: svc, proto: IPPROTO.UDP, dport: 53 } }));
    out[`byReply_${fam}`] = brief(sock.dump(fam, { orig: { proto: IPPROTO.UDP }, reply: { src: ep } }));
    out[`byPort_${fam}`] = brief(sock.dump(fam, { orig: { proto: IPPROTO.UDP, dport: 8125 } }));
    // Delete the flow to the endpoint that went away, by tuple + id. A second delete of the same spec finds nothing,
    // and so does a delete carrying a wrong id for a live tuple (the kernel checks CTA_ID).
    const stale = sock.dump(fam, { orig: { proto: IPPROTO.UDP }, reply: { src: ep } });
    const live = sock.dump(fam, { orig: { proto: IPPROTO.UDP, dport: 8125 } })[0];
    const specs = stale.map((f) => ({ family: fam, orig: f.orig, id: f.id, zone: f.zone }));
    out[`delete_${fam}`] = sock.deleteFlows(specs);
    out[`deleteAgain_${fam}`] = sock.deleteFlows(specs);
    out[`wrongId_${fam}`] = sock.deleteFlows([{ family: fam, orig: live.orig, id: (live.id + 1) >>> 0 }]);
    out[`after_${fam}`] = brief(sock.dump(fam));
  }
  // Many deletes in several datagrams: 300 flows, 4 KiB chunks.
  const small = ConntrackSocket.open({ deleteChunkBytes: 4096 });
  const specs = Array.from({ length: 300 }, (_, i) => ({
    family: 'ipv4' as const, timeoutSeconds: 300,
    orig: { src: '10.1.0.1', dst: '10.96.1.1', proto: IPPROTO.UDP, sport: 20000 + i, dport: 9 },
    reply: { src: '10.96.1.1', dst: '10.1.0.1', proto: IPPROTO.UDP, sport: 9, dport: 20000 + i },
  }));
  out.manyCreated = small.createFlows(specs);
  out.createAgain = small.createFlows(specs.slice(0, 2));
  out.manyListedByTool = ct(['-L', '-d', '10.96.1.1']).split('\n').filter(Boolean).length;
  const many = small.dump('ipv4', { orig: { dst: '10.96.1.1', proto: IPPROTO.UDP, dport: 9 } });
  out.manyDumped = many.length;
  out.manyDeleted = small.deleteFlows(many.map((f) => ({ family: 'ipv4' as const, orig: f.orig, id: f.id })));
  out.manyLeft = small.dump('ipv4', { orig: { dst: '10.96.1.1', proto: IPPROTO.UDP, dport: 9 } }).length;
  small.close();
  // A filter the kernel refuses (port without protocol cannot be built; a status mask of 0 is refused by us).
  try { sock.dump('ipv4', { status: { value: 0, mask: 0 } }); } catch (e) { out.badFilter = (e as Error).message; }
  out.conntrackL = ct(['-L']).split('\n').filter(Boolean).length;
} catch (e) {
  out.error = e instanceof ConntrackSocketError ? `${e.message} (errno ${e.errno})` : (e as Error).stack;
} finally {
  sock.close();
}
process.stdout.write(JSON.stringify(out) + '\n');
