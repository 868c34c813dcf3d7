/**
 * Generates `nft -f` text in upstream kube-proxy's 1.36 nftables layout for synthetic ClusterIP Services, so the
 * benchmark can load the same Services the way upstream would, side by side with nftproxy, in the same run.
 *
 * Layout (kubernetes `pkg/proxy/nftables/proxier.go`, 1.36; reference kube-proxy-nftables.md §2): table
 * `ip kube-proxy`, its base chains and dispatch maps, and per ServicePort a `service-HASH-ns/name/tcp/pN` chain with
 * `dnat ip addr . port to numgen random mod N map { … }` (an anonymous map per Service: the part whose kernel cost
 * grows quadratically, reference nftables-netlink.md §6.3), a `cluster-ips` element and a `service-ips` element.
 */
import { createHash } from 'node:crypto';

/** One synthetic ClusterIP ServicePort: address, port, endpoints (`ip`, port 8080). */
export interface SyntheticService {
  namespace: string;
  name: string;
  clusterIP: string;
  port: number;
  endpoints: string[];
  targetPort: number;
}

/** Upstream's `hashAndTruncate` prefix: base32 (RFC 4648) of sha256, first 8 characters. */
function hash8(s: string): string {
  const digest = createHash('sha256').update(s).digest();
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = 0, value = 0, out = '';
  for (const byte of digest) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5 && out.length < 8) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    if (out.length >= 8) break;
  }
  return out;
}

/**
 * `count` ClusterIP Services with `endpointsPerService` endpoints each: ClusterIPs from 172.30.0.0/16 upward
 * (then 172.31…), endpoints from 10.128.0.0/9, deterministic.
 */
export function syntheticServices(count: number, endpointsPerService: number): SyntheticService[] {
  const out: SyntheticService[] = [];
  let ep = 0;
  for (let i = 0; i < count; i++) {
    const cip = 0xac1e0000 + 1 + i; // 172.30.0.1 + i
    const endpoints: string[] = [];
    for (let j = 0; j < endpointsPerService; j++, ep++) endpoints.push(ipv4(0x0a800000 + 1 + ep));
    out.push({ namespace: `ns${i % 100}`, name: `svc${i}`, clusterIP: ipv4(cip), port: 80, endpoints, targetPort: 8080 });
  }
  return out;
}

function ipv4(n: number): string {
  return `${(n >>> 24) & 255}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
}

/** The whole ruleset in upstream's 1.36 layout, as one `nft -f` text (it starts by deleting a previous table). */
export function upstreamRuleset(services: SyntheticService[], opts: { clusterCIDR: string; table?: string }): string {
  const t = `ip ${opts.table ?? 'kube-proxy'}`;
  const lines: string[] = [
    `add table ${t} { comment "rules for kube-proxy" ; }`,
    `delete table ${t}`,
    `add table ${t} { comment "rules for kube-proxy" ; }`,
    `add chain ${t} filter-prerouting-pre-dnat { type filter hook prerouting priority -110 ; }`,
    `add chain ${t} filter-output-pre-dnat { type filter hook output priority -110 ; }`,
    `add chain ${t} filter-input { type filter hook input priority 0 ; }`,
    `add chain ${t} filter-forward { type filter hook forward priority 0 ; }`,
    `add chain ${t} filter-output { type filter hook output priority 0 ; }`,
    `add chain ${t} nat-prerouting { type nat hook prerouting priority -100 ; }`,
    `add chain ${t} nat-output { type nat hook output priority -100 ; }`,
    `add chain ${t} nat-postrouting { type nat hook postrouting priority 100 ; }`,
    `add chain ${t} services`,
    `add chain ${t} masquerading`,
    `add chain ${t} mark-for-masquerade`,
    `add chain ${t} service-endpoints-check`,
    `add chain ${t} cluster-ips-check`,
    `add chain ${t} firewall-check`,
    `add chain ${t} reject-chain { comment "helper for @no-endpoint-services / @no-endpoint-nodeports" ; }`,
    `add set ${t} cluster-ips { type ipv4_addr ; comment "Active ClusterIPs" ; }`,
    `add map ${t} service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }`,
    `add map ${t} no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to services with no endpoints" ; }`,
    `add map ${t} firewall-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "destinations that are subject to LoadBalancerSourceRanges" ; }`,
    `add rule ${t} filter-prerouting-pre-dnat ct state new jump firewall-check`,
    `add rule ${t} filter-output-pre-dnat ct state new jump firewall-check`,
    `add rule ${t} filter-input ct state new jump service-endpoints-check`,
    `add rule ${t} filter-forward ct state new jump service-endpoints-check`,
    `add rule ${t} filter-forward ct state new jump cluster-ips-check`,
    `add rule ${t} filter-output ct state new jump service-endpoints-check`,
    `add rule ${t} filter-output ct state new jump cluster-ips-check`,
    `add rule ${t} nat-prerouting jump services`,
    `add rule ${t} nat-output jump services`,
    `add rule ${t} nat-postrouting jump masquerading`,
    `add rule ${t} masquerading meta mark & 0x00004000 == 0 return`,
    `add rule ${t} masquerading meta mark set meta mark ^ 0x00004000`,
    `add rule ${t} masquerading masquerade fully-random`,
    `add rule ${t} mark-for-masquerade meta mark set meta mark | 0x00004000`,
    `add rule ${t} service-endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services`,
    `add rule ${t} cluster-ips-check ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"`,
    `add rule ${t} firewall-check ip daddr . meta l4proto . th dport vmap @firewall-ips`,
    `add rule ${t} reject-chain reject`,
    `add rule ${t} services ip daddr . meta l4proto . th dport vmap @service-ips`,
  ];
  for (const s of services) {
    const base = `${s.namespace}/${s.name}/tcp/p${s.port}`;
    const chain = `service-${hash8(base)}-${base}`;
    lines.push(`add chain ${t} ${chain}`);
    lines.push(`add rule ${t} ${chain} ip daddr ${s.clusterIP} tcp dport ${s.port} ip saddr != ${opts.clusterCIDR} jump mark-for-masquerade`);
    const map = s.endpoints.map((ep, i) => `${i} : ${ep} . ${s.targetPort}`).join(' , ');
    lines.push(s.endpoints.length === 1
      ? `add rule ${t} ${chain} meta l4proto tcp dnat to ${s.endpoints[0]}:${s.targetPort}`
      : `add rule ${t} ${chain} meta l4proto tcp dnat ip addr . port to numgen random mod ${s.endpoints.length} map { ${map} }`);
    lines.push(`add element ${t} cluster-ips { ${s.clusterIP} }`);
    lines.push(`add element ${t} service-ips { ${s.clusterIP} . tcp . ${s.port} : goto ${chain} }`);
  }
  return lines.join('\n') + '\n';
}

/** The Kubernetes objects of the synthetic Services (the same ones the upstream layout is generated from). */
export function kubeObjects(svcs: SyntheticService[]): { services: unknown[]; slices: unknown[] } {
  const services = svcs.map((s) => ({ kind: 'Service', metadata: { name: s.name, namespace: s.namespace }, spec: { clusterIP: s.clusterIP, ports: [{ name: `p${s.port}`, port: s.port, protocol: 'TCP' }] } }));
  const slices = svcs.map((s) => ({
    kind: 'EndpointSlice', metadata: { name: `${s.name}-x`, namespace: s.namespace, labels: { 'kubernetes.io/service-name': s.name } }, addressType: 'IPv4',
    endpoints: s.endpoints.map((ip) => ({ addresses: [ip], conditions: { ready: true }, nodeName: 'node-2' })),
    ports: [{ name: `p${s.port}`, port: s.targetPort, protocol: 'TCP' }],
  }));
  return { services, slices };
}
