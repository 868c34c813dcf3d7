/**
 * Test endpoint: answers every TCP connection and every UDP datagram with one line `NAME SRC_IP:SRC_PORT`, the
 * source address it saw. Usage: echo-server.ts NAME PORT[,PORT...]  (TCP and UDP on each port). Runs until killed.
 */
import { createServer } from 'node:net';
import { createSocket } from 'node:dgram';

const [name, ports = '8080'] = process.argv.slice(2);
for (const port of ports.split(',').map(Number)) {
  createServer((s) => {
    s.on('error', () => {});
    s.end(`${name} ${s.remoteAddress}:${s.remotePort}\n`);
  }).listen(port, '0.0.0.0');
  const u = createSocket('udp4');
  u.on('message', (_msg, rinfo) => u.send(`${name} ${rinfo.address}:${rinfo.port}\n`, rinfo.port, rinfo.address));
  u.bind(port, '0.0.0.0');
}
process.stdout.write(`listening ${name} ${ports}\n`);
