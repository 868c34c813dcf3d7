/**
 * Hand-built snapshots and construct rulesets for the rules/ tests and the golden captures (see README.md).
 * `smallCluster()` is the node-1 view of /work/shared/fixtures/cluster-small.kubectl.json, categorised by hand the
 * way upstream's CategorizeEndpoints would (the agent's real List->Snapshot conversion lives in agent/).
 */
import type { EndpointSchema, ServicePortInput, Snapshot, SnapshotInput } from '../../config-schema/snapshot.ts';
import { SnapshotSchema } from '../../config-schema/snapshot.ts';
import type { z } from 'zod';
import type { Fragment, KeyPart, Ruleset } from '../model.ts';
import { S, SKELETON_KEY, buildRuleset, fingerprintOf, rule } from '../model.ts';
import type { TableFamily } from '../../netlink/types.ts';

type EpIn = z.input<typeof EndpointSchema>;

/** A ready, serving, non-terminating endpoint. */
export function ep(ip: string, port: number, isLocal = false, extra: Partial<EpIn> = {}): EpIn {
  return { ip, port, isLocal, ready: true, serving: true, terminating: false, ...extra };
}

/**
 * A ServicePort whose endpoints are all ready: cluster = all, local = local ones, reachable = used ones.
 */
export function simpleSP(p: Omit<ServicePortInput, 'clusterEndpoints' | 'localEndpoints' | 'allReachableEndpoints' | 'hasEndpoints'> & { endpoints: EpIn[] }): ServicePortInput {
  const { endpoints, ...rest } = p;
  const local = endpoints.filter((e) => e.isLocal);
  const usesLocalOnly = !!p.internalPolicyLocal && !(p.nodePort || p.externalIPs?.length || p.loadBalancerIPs?.length);
  return {
    ...rest,
    clusterEndpoints: usesLocalOnly ? [] : endpoints,
    localEndpoints: local,
    allReachableEndpoints: usesLocalOnly ? local : endpoints,
    hasEndpoints: endpoints.length > 0,
  };
}

/** Parses a snapshot input (applies defaults). */
export function snapshot(input: SnapshotInput): Snapshot {
  return SnapshotSchema.parse(input);
}

/** The ClusterIP-only services of the fixture (node-1, IPv4), plus UDP DNS. */
export function clusterIPServices(): ServicePortInput[] {
  return [
    simpleSP({ namespace: 'default', name: 'kubernetes', portName: 'https', protocol: 'TCP', clusterIP: '10.96.0.1', port: 443, endpoints: [ep('192.168.1.10', 6443)] }),
    simpleSP({ namespace: 'default', name: 'empty', portName: 'http', protocol: 'TCP', clusterIP: '10.96.40.54', port: 80, endpoints: [] }),
    simpleSP({ namespace: 'kube-system', name: 'kube-dns', portName: 'dns', protocol: 'UDP', clusterIP: '10.96.0.10', port: 53, endpoints: [ep('10.244.1.5', 53, true), ep('10.244.2.7', 53)] }),
    simpleSP({ namespace: 'kube-system', name: 'kube-dns', portName: 'dns-tcp', protocol: 'TCP', clusterIP: '10.96.0.10', port: 53, endpoints: [ep('10.244.1.5', 53, true), ep('10.244.2.7', 53)] }),
    simpleSP({ namespace: 'kube-system', name: 'kube-dns', portName: 'metrics', protocol: 'TCP', clusterIP: '10.96.0.10', port: 9153, endpoints: [ep('10.244.1.5', 9153, true), ep('10.244.2.7', 9153)] }),
    simpleSP({
      namespace: 'default', name: 'three', portName: '', protocol: 'TCP', clusterIP: '10.96.3.3', port: 8000,
      endpoints: [ep('10.244.2.33', 8000), ep('10.244.1.31', 8000, true), ep('10.244.3.32', 8000)],
    }),
    simpleSP({ namespace: 'default', name: 'sctp', portName: 'assoc', protocol: 'SCTP', clusterIP: '10.96.9.9', port: 9999, endpoints: [ep('10.244.2.99', 9999)] }),
  ];
}

/** The full node-1 view of the fixture: ClusterIP services plus NodePort+affinity, iTP Local, LB eTP Local. */
export function smallCluster(overrides: Partial<SnapshotInput> = {}): Snapshot {
  const api = (portName: string, port: number, nodePort: number, target: number) => simpleSP({
    namespace: 'default', name: 'api', portName, protocol: 'TCP', clusterIP: '10.96.77.254', port, nodePort,
    affinityTimeoutSeconds: 600,
    endpoints: [ep('10.244.1.20', target, true), ep('10.244.3.21', target), ep('10.244.2.22', target)],
  });
  return snapshot({
    family: 'ipv4',
    localDetector: { mode: 'cidr', cidrs: ['10.244.0.0/16'] },
    serviceCIDRs: ['10.96.0.0/12'],
    node: { name: 'node-1', zone: 'zone-a', ips: ['192.168.1.11'] },
    servicePorts: [
      ...clusterIPServices(),
      api('grpc', 9000, 30985, 9000),
      api('web', 8080, 32581, 8081),
      {
        namespace: 'default', name: 'dual', portName: 'http', protocol: 'TCP', clusterIP: '10.96.45.131', port: 80,
        externalIPs: ['198.51.100.20'], internalPolicyLocal: true,
        clusterEndpoints: [ep('10.244.1.30', 8080, true), ep('10.244.2.31', 8080)],
        localEndpoints: [ep('10.244.1.30', 8080, true)],
        allReachableEndpoints: [ep('10.244.1.30', 8080, true), ep('10.244.2.31', 8080)],
        hasEndpoints: true,
      },
      {
        namespace: 'default', name: 'web', portName: 'http', protocol: 'TCP', clusterIP: '10.96.25.76', port: 80, nodePort: 32399,
        loadBalancerIPs: ['192.0.2.10'], loadBalancerSourceRanges: ['203.0.113.0/24'], externalPolicyLocal: true, healthCheckNodePort: 31000,
        clusterEndpoints: [ep('10.244.1.10', 8080, true)],
        localEndpoints: [ep('10.244.1.10', 8080, true)],
        allReachableEndpoints: [ep('10.244.1.10', 8080, true)],
        hasEndpoints: true,
      },
    ],
    ...overrides,
  });
}

/** An IPv6 snapshot with a ClusterIP service (2 endpoints), a NodePort one and an empty one. */
export function smallClusterV6(overrides: Partial<SnapshotInput> = {}): Snapshot {
  return snapshot({
    family: 'ipv6',
    localDetector: { mode: 'cidr', cidrs: ['fd00:10:244::/48'] },
    serviceCIDRs: ['fd00:10:96::/108'],
    nodePortIPs: ['fd00:192:168:1::11', '::1'],
    node: { name: 'node-1', ips: ['fd00:192:168:1::11'] },
    servicePorts: [
      simpleSP({
        namespace: 'default', name: 'dual', portName: 'http', protocol: 'TCP', clusterIP: 'fd00:10:96::48b3', port: 80,
        endpoints: [ep('fd00:10:244:1::30', 8080, true), ep('fd00:10:244:2::31', 8080)],
      }),
      simpleSP({
        namespace: 'default', name: 'np', portName: 'udp', protocol: 'UDP', clusterIP: 'fd00:10:96::99', port: 53, nodePort: 30053,
        endpoints: [ep('fd00:10:244:2::53', 5353)],
      }),
      simpleSP({ namespace: 'default', name: 'empty', portName: 'http', protocol: 'TCP', clusterIP: 'fd00:10:96::5', port: 80, endpoints: [] }),
    ],
    ...overrides,
  });
}

/** `n` synthetic ClusterIP services with 2..4 endpoints each (for planner scale tests). */
export function syntheticCluster(n: number, mutate?: (sps: ServicePortInput[]) => void): Snapshot {
  const sps: ServicePortInput[] = [];
  for (let i = 0; i < n; i++) {
    const a = (i >> 8) & 0xff;
    const b = i & 0xff;
    const eps = [];
    for (let j = 0; j < 2 + (i % 3); j++) eps.push(ep(`10.${100 + j}.${a}.${b}`, 8080, j === 0));
    sps.push(simpleSP({ namespace: `ns${i % 7}`, name: `svc${i}`, portName: 'http', protocol: i % 5 === 0 ? 'UDP' : 'TCP', clusterIP: `10.96.${a}.${b}`, port: 80, endpoints: eps }));
  }
  mutate?.(sps);
  return snapshot({ family: 'ipv4', localDetector: { mode: 'cidr', cidrs: ['10.0.0.0/8'] }, node: { name: 'n', ips: ['192.168.0.1'] }, servicePorts: sps });
}

/**
 * A ruleset with one rule per IR construct (for the lowering goldens): chain `c` holds the rules, chain `d` is a
 * jump target, plus the sets they look up.
 */
export function constructs(family: TableFamily): Ruleset {
  const v4 = family === 'ip';
  const addr = v4 ? 'ipv4_addr' as const : 'ipv6_addr' as const;
  const A = (a4: string, a6: string) => (v4 ? a4 : a6);
  const ipk = (ip: string): KeyPart => (v4 ? { type: 'ipv4_addr', ip } : { type: 'ipv6_addr', ip });
  const rules = [
    rule([S.ctState('new'), S.jump('d')]),
    rule([S.jump('d')]),
    rule([S.lookup(['daddr'], 'cluster-ips'), S.markOr(0x4000)], 'masquerade all clusterIP traffic'),
    rule([S.lookup(['daddr'], 'cluster-ips'), S.saddr(A('10.0.0.0/8', 'fd00::/8'), true), S.markOr(0x4000)]),
    rule([S.lookup(['daddr'], 'cluster-ips'), S.saddr(A('10.244.0.0/16', 'fd00:10:244::/48'), true), S.markOr(0x4000)]),
    rule([S.lookup(['daddr'], 'cluster-ips'), S.saddr(A('10.240.0.0/12', 'fd00:10:240::/44'), true), S.markOr(0x4000)]),
    rule([S.lookup(['daddr'], 'cluster-ips'), S.saddr(A('10.244.0.0/16', 'fd00:10:244::/48'), true), S.saddr(A('10.96.0.0/25', 'fd00:10:96::/120'), true), S.markOr(1 << 3)]),
    rule([S.lookup(['daddr'], 'cluster-ips'), S.iifname('cni0', true), S.markOr(0x4000)]),
    rule([S.lookup(['daddr'], 'cluster-ips'), S.iifname('veth*', true), S.markOr(0x80000000)]),
    rule([S.vmap(['daddr', 'l4proto', 'dport'], 'sips')]),
    rule([S.fibLocal('daddr'), S.daddr(A('127.0.0.0/8', '::1'), true), S.vmap(['l4proto', 'dport'], 'snp')]),
    rule([S.lookup(['daddr'], 'npips'), S.vmap(['l4proto', 'dport'], 'snp')]),
    rule([S.markTest(0x4000, true, 0), S.markXor(0x4000), S.masquerade(true)]),
    rule([S.ctStatus('dnat'), S.lookup(['saddr', 'daddr', 'l4proto', 'dport'], 'hp'), S.masquerade(true)]),
    rule([S.lookup(['daddr'], 'cluster-ips'), S.reject()], 'Reject traffic to invalid ports of ClusterIPs'),
    rule([S.daddr(A('10.96.0.0/12', 'fd00:10:96::/108')), S.drop()], 'Drop traffic to unallocated ClusterIPs'),
    rule([S.daddr(A('10.96.0.0/16', 'fd00:10:96::/64')), S.drop()]),
    rule([S.daddr(A('10.96.0.1', 'fd00:10:96::1')), S.drop()]),
    rule([S.daddr(A('0.0.0.0/0', '::/0')), S.drop()]),
    rule([S.reject()]),
    rule([S.markOr(0x4000)], 'masquerade'),
    rule([S.goto('d')]),
    rule([S.saddr(A('10.0.0.0/8', 'fd00::/8')), S.goto('d')], 'short-circuit pod traffic'),
    rule([S.iifname('cni0'), S.goto('d')]),
    rule([S.iifname('veth*'), S.goto('d')]),
    rule([S.fibLocal('saddr'), S.markOr(0x4000)], 'masquerade local traffic'),
    rule([S.fibLocal('saddr'), S.goto('d')], 'short-circuit local traffic'),
    rule([S.saddr(A('203.0.113.0/24', '2001:db8::/32'), true), S.saddr(A('192.0.2.10', '2001:db8:1::10'), true), S.drop()]),
    rule([S.lookup(['saddr'], 'aff'), S.goto('d')]),
    rule([S.update('aff', 'saddr')]),
    rule([S.numgen(3, 0), S.goto('d')]),
    rule([S.l4proto('tcp'), S.dnat(A('10.0.0.1', 'fd00::1'), 80)]),
    rule([S.numgen(3, 0), S.l4proto('tcp'), S.dnat(A('10.0.0.1', 'fd00::1'), 80)]),
    rule([S.numgen(2, 0), S.l4proto('udp'), S.dnat(A('10.0.0.2', 'fd00::2'), 53)]),
    rule([S.l4proto('sctp'), S.dnat(A('10.0.0.3', 'fd00:10:244:1::3'), 9999)]),
    rule([S.counter()]),
    rule([S.lookup(['daddr'], 'cluster-ips'), S.counter(), S.reject()]),
    rule([S.accept()]),
    rule([S.ret()]),
    rule([S.lookup(['daddr'], 'cluster-ips', true), S.drop()]),
    rule([S.l4proto('tcp'), { k: 'dnatMap', mod: 3, offset: 4, map: 'em' }]),
    rule([S.l4proto('udp'), { k: 'dnatMap', mod: 1, offset: 0, map: 'em' }]),
    rule([S.l4proto('sctp'), { k: 'dnatMap', mod: 250, offset: 65536, map: 'em' }]),
  ];
  const frag: Fragment = {
    key: SKELETON_KEY,
    fingerprint: fingerprintOf(['constructs', family]),
    chains: [{ name: 'c', rules }, { name: 'd', comment: 'jump target', rules: [] }],
    sets: [
      { name: 'cluster-ips', key: [addr], comment: 'Active ClusterIPs' },
      { name: 'npips', key: [addr] },
      { name: 'hp', key: [addr, addr, 'inet_proto', 'inet_service'], comment: 'service hairpin connections' },
      { name: 'sips', key: [addr, 'inet_proto', 'inet_service'], map: 'verdict', comment: 'ClusterIP, ExternalIP and LoadBalancer IP traffic' },
      { name: 'snp', key: ['inet_proto', 'inet_service'], map: 'verdict' },
      { name: 'aff', key: [addr], timeoutSec: 10800 },
      { name: 'em', key: ['numgen'], map: 'endpoint', comment: 'endpoints' },
    ],
    elements: [
      { set: 'cluster-ips', key: [ipk(A('10.96.0.1', 'fd00:10:96::1'))] },
      { set: 'cluster-ips', key: [ipk(A('10.96.0.10', 'fd00:10:96::a'))] },
      { set: 'hp', key: [ipk(A('10.0.0.5', 'fd00::5')), ipk(A('10.0.0.5', 'fd00::5')), { type: 'inet_proto', proto: 'tcp' }, { type: 'inet_service', port: 8080 }] },
      { set: 'sips', key: [ipk(A('10.96.0.1', 'fd00:10:96::1')), { type: 'inet_proto', proto: 'tcp' }, { type: 'inet_service', port: 443 }], verdict: { kind: 'goto', chain: 'd' } },
      { set: 'sips', key: [ipk(A('10.96.0.10', 'fd00:10:96::a')), { type: 'inet_proto', proto: 'udp' }, { type: 'inet_service', port: 53 }], verdict: { kind: 'drop' }, comment: 'kube-system/kube-dns:dns' },
      { set: 'snp', key: [{ type: 'inet_proto', proto: 'sctp' }, { type: 'inet_service', port: 30080 }], verdict: { kind: 'jump', chain: 'd' } },
      { set: 'em', key: [{ type: 'numgen', value: 0 }], endpoint: { ip: A('10.0.0.1', 'fd00::1'), port: 80 }, comment: 'ns/svc:http' },
      { set: 'em', key: [{ type: 'numgen', value: 4 }], endpoint: { ip: A('10.0.0.2', 'fd00::2'), port: 8080 } },
      { set: 'em', key: [{ type: 'numgen', value: 65536 }], endpoint: { ip: A('10.244.1.3', 'fd00:10:244:1::3'), port: 65535 }, comment: 'ns/svc:http local' },
    ],
  };
  return buildRuleset(family, 'nftproxy', 'rules for nftproxy', [frag]);
}
