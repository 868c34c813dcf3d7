/**
 * sha256 of the encoded full-sync batch of the synthetic cluster (`node bench/bytes-digest.ts [SERVICES]`), plus
 * a variant with ClientIP affinity, NodePorts, externalIPs and LoadBalancers on some Services: a developer check that
 * a performance change leaves the netlink bytes identical (compare the digest before and after the change).
 */
import { createHash } from 'node:crypto';
import { ConfigSchema } from '../config-schema/config.ts';
import { ClusterState } from '../agent/cluster-state.ts';
import { SnapshotBuilder } from '../agent/snapshot.ts';
import { compile, plan } from '../rules/index.ts';
import { encodeBatch } from '../netlink/batch.ts';
import { syntheticServices } from './upstream-layout.ts';

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
const cfg = ConfigSchema.parse({ clusterCIDR: '10.0.0.0/8', ipFamilies: ['IPv4'], source: { type: 'file', path: 'x' } });
const state = new ClusterState('node-1', () => {});
state.replace('Service', services);
state.replace('EndpointSlice', slices);
const builder = new SnapshotBuilder(cfg, () => {});
builder.invalidate(state.checkout());
const rs = compile(builder.build(state, 'IPv4'));
const p = plan(null, rs, { full: true, now: 0, stale: new Map() });
const enc = encodeBatch(p.ops, { seqStart: 1 });
process.stdout.write(`${createHash('sha256').update(enc.buffer).digest('hex')} ${enc.bytes} bytes ${enc.messages} messages\n`);
