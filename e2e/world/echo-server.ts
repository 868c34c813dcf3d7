/**
 * Test endpoint: answers every TCP connection and every UDP datagram with one line `NAME SRC_IP:SRC_PORT`, the
 * source address it saw. Usage: echo-server.ts NAME PORT[,PORT...]  (TCP and UDP on each port, IPv4 on 0.0.0.0;
 * also IPv6 on [::] (IPv6-only sockets) when the host has IPv6 addresses). Runs until killed.
 */
import { createServer } from 'node:net';
import { createSocket } from 'node:dgram';
import { networkInterfaces } from 'node:os';

const [name, ports = '8080'] = process.argv.slice(2);
for (const port of ports.split(',').map(Number)) {
  createServer((s) => {
    s.on('error', () => {});
    s.end(`${name} ${s.remoteAddress}:${s.remotePort}\n`);
  }).listen(port, '0.0.0.0');
  const u = createSocket('udp4');
  u.on('message', (_msg, rinfo) => u.send(`${name} ${rinfo.address}:${rinfo.port}\n`, rinfo.port, rinfo.address));
  u.bind(port, '0.0.0.0');
  const hasV6 = Object.values(networkInterfaces()).some((l) => (l ?? []).some((a) => a.family === 'IPv6' && !a.internal));
  if (hasV6) {
    createServer((s) => {
      s.on('error', () => {});
      s.end(`${name} ${s.remoteAddress}:${s.remotePort}\n`);
    }).listen({ port, host: '::', ipv6Only: true });
    const u6 = createSocket({ type: 'udp6', ipv6Only: true });
    u6.on('message', (_msg, rinfo) => u6.send(`${name} ${rinfo.address}:${rinfo.port}\n`, rinfo.port, rinfo.address));
    u6.bind(port, '::');
  }
}
process.stdout.write(`listening ${name} ${ports}\n`);
