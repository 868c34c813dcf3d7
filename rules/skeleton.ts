/**
 * The fixed part of the table: upstream kube-proxy's 1.37 layout (kubernetes pkg/proxy/nftables/proxier.go
 * setupNFTables; shared/reference/kube-proxy-nftables.md §2.1–§2.5, §2.8), with our table name.
 *
 * Differences from upstream, both semantically equivalent and free of anonymous sets:
 * - the "Drop traffic to unallocated ClusterIPs" rule is one rule per ServiceCIDR (`ip daddr <cidr> drop`)
 *   instead of one rule with an anonymous set `{ cidr, cidr }`;
 * - a local detector with several CIDRs tests `ip saddr != a ip saddr != b` (not in any) in one rule.
 * Pure.
 */
import type { TableFamily } from '../netlink/types.ts';
import { canonicalAddr, isLoopback, parseAddr, parseCidr, formatCidr } from './addr.ts';
import type { Chain, Element, Fragment, KeyType, SetDef, Stmt } from './model.ts';
import { S, SKELETON_KEY, fingerprintOf, rule } from './model.ts';
import type { LocalDetector, Snapshot } from '../config-schema/snapshot.ts';

/** Table comment (upstream: "rules for kube-proxy"). */
export const TABLE_COMMENT = 'rules for nftproxy';

/** Fixed chain names (proxier.go constants). */
export const CHAINS = {
  filterPreroutingPreDnat: 'filter-prerouting-pre-dnat',
  filterOutputPreDnat: 'filter-output-pre-dnat',
  filterInput: 'filter-input',
  filterForward: 'filter-forward',
  filterOutput: 'filter-output',
  natPrerouting: 'nat-prerouting',
  natOutput: 'nat-output',
  natPostrouting: 'nat-postrouting',
  nodePortEndpointsCheck: 'nodeport-endpoints-check',
  serviceEndpointsCheck: 'service-endpoints-check',
  clusterIPsCheck: 'cluster-ips-check',
  firewallCheck: 'firewall-check',
  services: 'services',
  masquerading: 'masquerading',
  reject: 'reject-chain',
} as const;

/** Fixed set and map names (proxier.go constants). */
export const SETS = {
  clusterIPs: 'cluster-ips',
  nodePortIPs: 'nodeport-ips',
  hairpin: 'hairpin-connections',
  serviceIPs: 'service-ips',
  serviceNodePorts: 'service-nodeports',
  noEndpointServices: 'no-endpoint-services',
  noEndpointNodePorts: 'no-endpoint-nodeports',
  firewallIPs: 'firewall-ips',
} as const;

/** `ip` / `ip6` from the snapshot family. */
export function tableFamilyOf(s: Pick<Snapshot, 'family'>): TableFamily {
  return s.family === 'ipv4' ? 'ip' : 'ip6';
}

/** ipv4_addr / ipv6_addr. */
export function addrTypeOf(family: TableFamily): 'ipv4_addr' | 'ipv6_addr' {
  return family === 'ip' ? 'ipv4_addr' : 'ipv6_addr';
}

/** The masquerade mark: `1 << masqueradeBit` as an unsigned 32-bit number. */
export function masqueradeMark(bit: number): number {
  if (!Number.isInteger(bit) || bit < 0 || bit > 31) throw new Error(`masqueradeBit: ${bit} is not in 0..31`);
  return 2 ** bit;
}

function checkIfname(name: string, field: string): string {
  if (!name || Buffer.byteLength(name) > 15 || /["*\s]/.test(name)) throw new Error(`${field}: ${JSON.stringify(name)} is not a valid interface name (1..15 bytes, no quotes, spaces or *)`);
  return name;
}

/**
 * Statements matching traffic NOT from local pods (proxier localDetector.IfNotLocalNFT), or null when the
 * detector is not implemented (mode none).
 * @throws Error on an invalid CIDR or interface name.
 */
export function ifNotLocal(family: TableFamily, d: LocalDetector): Stmt[] | null {
  switch (d.mode) {
    case 'none': return null;
    case 'cidr': return d.cidrs.map((c, i) => S.saddr(formatCidr(parseCidr(family, c, `localDetector.cidrs[${i}]`)), true));
    case 'interface': return [S.iifname(checkIfname(d.name, 'localDetector.name'), true)];
    case 'interfacePrefix': return [S.iifname(`${checkIfname(d.prefix, 'localDetector.prefix')}*`, true)];
  }
}

/**
 * Alternatives (one rule each) matching traffic from local pods (IfLocalNFT); empty when not implemented.
 * @throws Error on an invalid CIDR or interface name.
 */
export function ifLocal(family: TableFamily, d: LocalDetector): Stmt[][] {
  switch (d.mode) {
    case 'none': return [];
    case 'cidr': return d.cidrs.map((c, i) => [S.saddr(formatCidr(parseCidr(family, c, `localDetector.cidrs[${i}]`)))]);
    case 'interface': return [[S.iifname(checkIfname(d.name, 'localDetector.name'))]];
    case 'interfacePrefix': return [[S.iifname(`${checkIfname(d.prefix, 'localDetector.prefix')}*`)]];
  }
}

/** The snapshot fields the skeleton and every ServicePort fragment depend on. */
export function globalsOf(s: Snapshot): unknown {
  return {
    v: 1, family: s.family, tableName: s.tableName, masqueradeAll: s.masqueradeAll, masqueradeBit: s.masqueradeBit,
    localDetector: s.localDetector, nodePortIPs: s.nodePortIPs, serviceCIDRs: s.serviceCIDRs, nodeIPs: s.node.ips,
  };
}

/**
 * The skeleton fragment of a snapshot: 8 base chains with their jump rules, the 7 fixed regular chains with their
 * rules, and the fixed sets/maps (nodeport-ips only when `nodePortIPs` is not null, filled with those IPs minus
 * loopback).
 * @throws Error naming the snapshot field on invalid addresses, CIDRs or interface names.
 */
export function skeletonFragment(snap: Snapshot): Fragment {
  const family = tableFamilyOf(snap);
  const addr: KeyType = addrTypeOf(family);
  const mark = masqueradeMark(snap.masqueradeBit);
  const C = CHAINS;
  const matchAll = snap.nodePortIPs === null;
  const noLocalhost = S.daddr(family === 'ip' ? '127.0.0.0/8' : '::1', true);
  const svcKey = ['daddr', 'l4proto', 'dport'] as const;
  const portKey = ['l4proto', 'dport'] as const;
  const ctNew = S.ctState('new');

  const sets: SetDef[] = [
    { name: SETS.clusterIPs, key: [addr], comment: 'Active ClusterIPs' },
    ...(matchAll ? [] : [{ name: SETS.nodePortIPs, key: [addr], comment: 'IPs that accept NodePort traffic' }]),
    { name: SETS.hairpin, key: [addr, addr, 'inet_proto', 'inet_service'], comment: 'service hairpin connections' },
    { name: SETS.serviceIPs, key: [addr, 'inet_proto', 'inet_service'], map: 'verdict', comment: 'ClusterIP, ExternalIP and LoadBalancer IP traffic' },
    { name: SETS.serviceNodePorts, key: ['inet_proto', 'inet_service'], map: 'verdict', comment: 'NodePort traffic' },
    { name: SETS.noEndpointServices, key: [addr, 'inet_proto', 'inet_service'], map: 'verdict', comment: 'vmap to drop or reject packets to services with no endpoints' },
    { name: SETS.noEndpointNodePorts, key: ['inet_proto', 'inet_service'], map: 'verdict', comment: 'vmap to drop or reject packets to service nodeports with no endpoints' },
    { name: SETS.firewallIPs, key: [addr, 'inet_proto', 'inet_service'], map: 'verdict', comment: 'destinations that are subject to LoadBalancerSourceRanges' },
  ];

  const elements: Element[] = [];
  if (!matchAll) {
    const seen = new Set<string>();
    (snap.nodePortIPs ?? []).forEach((ip, i) => {
      const field = `nodePortIPs[${i}]`;
      if (isLoopback(parseAddr(family, ip, field))) return; // upstream: localhost NodePorts are not supported here
      const c = canonicalAddr(family, ip, field);
      if (seen.has(c)) return;
      seen.add(c);
      elements.push({ set: SETS.nodePortIPs, key: [addr === 'ipv4_addr' ? { type: 'ipv4_addr', ip: c } : { type: 'ipv6_addr', ip: c }] });
    });
  }

  const servicesRules = [];
  const notLocal = ifNotLocal(family, snap.localDetector);
  if (snap.masqueradeAll) {
    servicesRules.push(rule([S.lookup(['daddr'], SETS.clusterIPs), S.markOr(mark)], 'masquerade all clusterIP traffic'));
  } else if (notLocal) {
    servicesRules.push(rule([S.lookup(['daddr'], SETS.clusterIPs), ...notLocal, S.markOr(mark)], 'masquerade clusterIP traffic from outside cluster'));
  }
  servicesRules.push(rule([S.vmap(svcKey, SETS.serviceIPs)]));
  servicesRules.push(matchAll
    ? rule([S.fibLocal('daddr'), noLocalhost, S.vmap(portKey, SETS.serviceNodePorts)])
    : rule([S.lookup(['daddr'], SETS.nodePortIPs), S.vmap(portKey, SETS.serviceNodePorts)]));

  const clusterIPsCheck = [rule([S.lookup(['daddr'], SETS.clusterIPs), S.reject()], 'Reject traffic to invalid ports of ClusterIPs')];
  snap.serviceCIDRs.forEach((c, i) => {
    clusterIPsCheck.push(rule([S.daddr(formatCidr(parseCidr(family, c, `serviceCIDRs[${i}]`))), S.drop()], 'Drop traffic to unallocated ClusterIPs'));
  });

  const chains: Chain[] = [
    { name: C.filterPreroutingPreDnat, hook: { type: 'filter', hook: 'prerouting', priority: -110 }, rules: [rule([ctNew, S.jump(C.firewallCheck)])] },
    { name: C.filterOutputPreDnat, hook: { type: 'filter', hook: 'output', priority: -110 }, rules: [rule([ctNew, S.jump(C.firewallCheck)])] },
    {
      name: C.filterInput, hook: { type: 'filter', hook: 'input', priority: 0 },
      rules: [rule([ctNew, S.jump(C.nodePortEndpointsCheck)]), rule([ctNew, S.jump(C.serviceEndpointsCheck)])],
    },
    {
      name: C.filterForward, hook: { type: 'filter', hook: 'forward', priority: 0 },
      rules: [rule([ctNew, S.jump(C.serviceEndpointsCheck)]), rule([ctNew, S.jump(C.clusterIPsCheck)])],
    },
    {
      name: C.filterOutput, hook: { type: 'filter', hook: 'output', priority: 0 },
      rules: [rule([ctNew, S.jump(C.serviceEndpointsCheck)]), rule([ctNew, S.jump(C.clusterIPsCheck)])],
    },
    { name: C.natPrerouting, hook: { type: 'nat', hook: 'prerouting', priority: -100 }, rules: [rule([S.jump(C.services)])] },
    { name: C.natOutput, hook: { type: 'nat', hook: 'output', priority: -100 }, rules: [rule([S.jump(C.services)])] },
    { name: C.natPostrouting, hook: { type: 'nat', hook: 'postrouting', priority: 100 }, rules: [rule([S.jump(C.masquerading)])] },
    {
      name: C.nodePortEndpointsCheck,
      rules: [matchAll
        ? rule([noLocalhost, S.vmap(portKey, SETS.noEndpointNodePorts)])
        : rule([S.lookup(['daddr'], SETS.nodePortIPs), S.vmap(portKey, SETS.noEndpointNodePorts)])],
    },
    { name: C.serviceEndpointsCheck, rules: [rule([S.vmap(svcKey, SETS.noEndpointServices)])] },
    { name: C.clusterIPsCheck, rules: clusterIPsCheck },
    { name: C.firewallCheck, rules: [rule([S.vmap(svcKey, SETS.firewallIPs)])] },
    { name: C.services, rules: servicesRules },
    {
      name: C.masquerading,
      rules: [
        rule([S.markTest(mark, true, 0), S.markXor(mark), S.masquerade(true)]),
        rule([S.ctStatus('dnat'), S.lookup(['saddr', 'daddr', 'l4proto', 'dport'], SETS.hairpin), S.masquerade(true)]),
      ],
    },
    { name: C.reject, comment: 'helper for @no-endpoint-services / @no-endpoint-nodeports', rules: [rule([S.reject()])] },
  ];

  return { key: SKELETON_KEY, fingerprint: fingerprintOf(['skeleton', globalsOf(snap)]), chains, sets, elements };
}
