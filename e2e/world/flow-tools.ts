/**
 * Long-lived flows for the conntrack e2e test (scenarios/conntrack.ts). Modes:
 *   sink NAME LOGFILE UDPPORT[,UDPPORT...] [TCPPORT]   append `ms NAME srcip:srcport port payload` per UDP datagram
 *                                                      (IPv4 and IPv6)
 *                                                      to LOGFILE (never answers: one-way, like statsd); accept TCP
 *                                                      connections on TCPPORT and hold them open.
 *   send HOST PORT SRCPORT INTERVAL_MS COUNT           send datagrams `0`, `1`, ... from ONE source port (statsd-like)
 *   hold HOST PORT                                     open one TCP connection and keep it open; prints `connected`
 * Runs until killed (send: until COUNT datagrams are sent).
 */
import { appendFileSync } from 'node:fs';
import { createSocket } from 'node:dgram';
import { createServer, connect } from 'node:net';

const [mode, ...args] = process.argv.slice(2);
if (mode === 'sink') {
  const [name, logFile, udpPorts, tcpPort] = args;
  for (const port of udpPorts.split(',').map(Number)) {
    for (const type of ['udp4', 'udp6'] as const) {
      const u = createSocket({ type, ipv6Only: type === 'udp6' });
      u.on('message', (msg, r) => appendFileSync(logFile, `${Date.now()} ${name} ${r.address}:${r.port} ${port} ${msg.toString().trim()}\n`));
      u.on('error', (e) => process.stderr.write(`sink ${type}: ${e.message}\n`)); // no IPv6 in this host: IPv4 only
      u.bind(port, type === 'udp4' ? '0.0.0.0' : '::');
    }
  }
  if (tcpPort) {
    const held: unknown[] = [];
    createServer((s) => { held.push(s); s.on('error', () => {}); }).listen(Number(tcpPort), '0.0.0.0');
  }
  process.stdout.write(`sink ${name} up\n`);
} else if (mode === 'send') {
  const [host, port, srcPort, intervalMs, count] = args.map((a, i) => (i === 0 ? a : Number(a))) as [string, number, number, number, number];
  const s = createSocket(host.includes(':') ? 'udp6' : 'udp4');
  s.on('error', (e) => process.stderr.write(`send: ${e.message}\n`));
  s.bind(srcPort, () => {
    let seq = 0;
    const t = setInterval(() => {
      s.send(String(seq++), port, host);
      if (seq >= count) { clearInterval(t); setTimeout(() => s.close(), 100); }
    }, intervalMs);
  });
} else if (mode === 'hold') {
  const [host, port] = args;
  const c = connect({ host, port: Number(port) }, () => process.stdout.write('connected\n'));
  c.on('error', (e) => process.stderr.write(`hold: ${e.message}\n`));
  setInterval(() => {}, 1 << 30);
} else {
  process.stderr.write('usage: flow-tools.ts sink|send|hold ...\n');
  process.exit(2);
}
