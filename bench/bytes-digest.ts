/**
 * sha256 of the encoded full-sync batch of the synthetic cluster (`node bench/bytes-digest.ts [SERVICES]`), plus
 * a variant with ClientIP affinity, NodePorts, externalIPs and LoadBalancers on some Services: a developer check that
 * a performance change leaves the netlink bytes identical (compare the digest before and after the change).
 */
import { createHash } from 'node:crypto';
import { encodeBatch } from '../netlink/batch.ts';
import { syntheticServices } from './upstream-layout.ts';
import { fullSyncOps } from './full-sync.ts';

const n = Number(process.argv[2] ?? 3000);
const svcs = syntheticServices(n, 10);
const services = svcs.map((s, i) => ({
  kind: 'Service', metadata: { name: s.name, namespace: s.namespace },
  spec: {
    clusterIP: s.clusterIP, ports: [{ name: `p${s.port}`, port: s.port, protocol: 'TCP', ...(i % 5 === 1 ? { nodePort: 30000 + (i % 2000) } : {}) }],
    ...(i % 5 === 1 ? { type: 'NodePort', externalTrafficPolicy: i % 10 === 1 ? 'Local' : 'Cluster' } : {}),
    ...(i % 7 === 2 ? { sessionAffinity: 'ClientIP' } : {}),
    ...(i % 11 === 3 ? { externalIPs: [`192.0.2.${i % 250}`] } : {}),
  },
}));
const slices = svcs.map((s, i) => ({
  kind: 'EndpointSlice', metadata: { name: `${s.name}-x`, namespace: s.namespace, labels: { 'kubernetes.io/service-name': s.name } }, addressType: 'IPv4',
  endpoints: s.endpoints.map((ip, j) => ({ addresses: [ip], conditions: { ready: j % 9 !== 8 }, nodeName: j % 3 === 0 ? 'node-1' : 'node-2' })),
  ports: [{ name: `p${s.port}`, port: s.targetPort, protocol: 'TCP' }],
}));
const ops = fullSyncOps({ services, slices }, '10.0.0.0/8');
const enc = encodeBatch(ops, { seqStart: 1 });
process.stdout.write(`${createHash('sha256').update(enc.buffer).digest('hex')} ${enc.bytes} bytes ${enc.messages} messages\n`);
