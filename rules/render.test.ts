import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compile } from './compile.ts';
import { render, renderSteps, ruleText } from './render.ts';
import { plan } from './plan.ts';
import { S, rule } from './model.ts';
import { ep, simpleSP, snapshot } from './testdata/fixtures.ts';

const small = () => snapshot({
  family: 'ipv4', localDetector: { mode: 'cidr', cidrs: ['10.244.0.0/16'] }, node: { name: 'n' },
  servicePorts: [
    simpleSP({ namespace: 'ns1', name: 'svc1', portName: 'p80', protocol: 'TCP', clusterIP: '172.30.0.41', port: 80, endpoints: [ep('10.180.0.2', 80), ep('10.180.0.1', 80, true)] }),
    simpleSP({ namespace: 'ns6', name: 'svc6', portName: 'p80', protocol: 'TCP', clusterIP: '172.30.0.46', port: 80, endpoints: [] }),
  ],
});

const GOLDEN = `
add table ip nftproxy { comment "rules for nftproxy" ; }
delete table ip nftproxy
add table ip nftproxy { comment "rules for nftproxy" ; }
add chain ip nftproxy filter-prerouting-pre-dnat { type filter hook prerouting priority -110 ; }
add chain ip nftproxy filter-output-pre-dnat { type filter hook output priority -110 ; }
add chain ip nftproxy filter-input { type filter hook input priority 0 ; }
add chain ip nftproxy filter-forward { type filter hook forward priority 0 ; }
add chain ip nftproxy filter-output { type filter hook output priority 0 ; }
add chain ip nftproxy nat-prerouting { type nat hook prerouting priority -100 ; }
add chain ip nftproxy nat-output { type nat hook output priority -100 ; }
add chain ip nftproxy nat-postrouting { type nat hook postrouting priority 100 ; }
add chain ip nftproxy nodeport-endpoints-check
add chain ip nftproxy service-endpoints-check
add chain ip nftproxy cluster-ips-check
add chain ip nftproxy firewall-check
add chain ip nftproxy services
add chain ip nftproxy masquerading
add chain ip nftproxy reject-chain { comment "helper for @no-endpoint-services / @no-endpoint-nodeports" ; }
add chain ip nftproxy service-ULMVA6XW-ns1/svc1/tcp/p80
add set ip nftproxy cluster-ips { type ipv4_addr ; comment "Active ClusterIPs" ; }
add set ip nftproxy hairpin-connections { type ipv4_addr . ipv4_addr . inet_proto . inet_service ; comment "service hairpin connections" ; }
add map ip nftproxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }
add map ip nftproxy service-nodeports { type inet_proto . inet_service : verdict ; comment "NodePort traffic" ; }
add map ip nftproxy no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to services with no endpoints" ; }
add map ip nftproxy no-endpoint-nodeports { type inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to service nodeports with no endpoints" ; }
add map ip nftproxy firewall-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "destinations that are subject to LoadBalancerSourceRanges" ; }
add map ip nftproxy endpoint-map-0 { typeof numgen random mod 1 : ip daddr . th dport ; comment "endpoints: numgen index -> address . port (keys 0..1023)" ; }
add rule ip nftproxy filter-prerouting-pre-dnat ct state new jump firewall-check
add rule ip nftproxy filter-output-pre-dnat ct state new jump firewall-check
add rule ip nftproxy filter-input ct state new jump nodeport-endpoints-check
add rule ip nftproxy filter-input ct state new jump service-endpoints-check
add rule ip nftproxy filter-forward ct state new jump service-endpoints-check
add rule ip nftproxy filter-forward ct state new jump cluster-ips-check
add rule ip nftproxy filter-output ct state new jump service-endpoints-check
add rule ip nftproxy filter-output ct state new jump cluster-ips-check
add rule ip nftproxy nat-prerouting jump services
add rule ip nftproxy nat-output jump services
add rule ip nftproxy nat-postrouting jump masquerading
add rule ip nftproxy nodeport-endpoints-check ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @no-endpoint-nodeports
add rule ip nftproxy service-endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services
add rule ip nftproxy cluster-ips-check ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"
add rule ip nftproxy firewall-check ip daddr . meta l4proto . th dport vmap @firewall-ips
add rule ip nftproxy services ip daddr @cluster-ips ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x00004000 comment "masquerade clusterIP traffic from outside cluster"
add rule ip nftproxy services ip daddr . meta l4proto . th dport vmap @service-ips
add rule ip nftproxy services fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports
add rule ip nftproxy masquerading meta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random
add rule ip nftproxy masquerading ct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random
add rule ip nftproxy reject-chain reject
add rule ip nftproxy service-ULMVA6XW-ns1/svc1/tcp/p80 meta l4proto tcp dnat ip to numgen random mod 2 map @endpoint-map-0
add element ip nftproxy cluster-ips { 172.30.0.41, 172.30.0.46 }
add element ip nftproxy hairpin-connections { 10.180.0.1 . 10.180.0.1 . tcp . 80 }
add element ip nftproxy service-ips { 172.30.0.41 . tcp . 80 : goto service-ULMVA6XW-ns1/svc1/tcp/p80 }
add element ip nftproxy no-endpoint-services { 172.30.0.46 . tcp . 80 comment "ns6/svc6:p80" : goto reject-chain }
add element ip nftproxy endpoint-map-0 { 0 comment "ns1/svc1:p80" : 10.180.0.1 . 80, 1 comment "ns1/svc1:p80" : 10.180.0.2 . 80 }
`.trimStart();

test('render of a small ClusterIP ruleset (golden text; upstream chain names and comments)', () => {
  assert.equal(render(compile(small())), GOLDEN);
});

test('render of a partial plan: flush, element changes, rules', () => {
  const a = compile(small());
  const s = small();
  s.servicePorts[0] = { ...s.servicePorts[0], clusterEndpoints: [], allReachableEndpoints: [], hasEndpoints: false };
  const p = plan(a, compile(s), { full: false, now: 0, stale: new Map() });
  assert.equal(renderSteps('ip', 'nftproxy', 'rules for nftproxy', p.steps), [
    'flush chain ip nftproxy service-ULMVA6XW-ns1/svc1/tcp/p80',
    'delete element ip nftproxy service-ips { 172.30.0.41 . tcp . 80 }',
    'delete element ip nftproxy hairpin-connections { 10.180.0.1 . 10.180.0.1 . tcp . 80 }',
    'delete element ip nftproxy endpoint-map-0 { 0, 1 }',
    'add element ip nftproxy no-endpoint-services { 172.30.0.41 . tcp . 80 comment "ns1/svc1:p80" : goto reject-chain }',
    '',
  ].join('\n'));
});

test('IPv6 statements render as nft prints them', () => {
  assert.equal(ruleText('ip6', rule([S.saddr('FD00:10:0:0::/48', true), S.l4proto('tcp'), S.dnat('fd00:0:0:0::1', 80)], 'x')), 'ip6 saddr != fd00:10::/48 meta l4proto tcp dnat to [fd00::1]:80 comment "x"');
  assert.equal(ruleText('ip6', rule([S.daddr('::1', true), S.update('aff')])), 'ip6 daddr != ::1 update @aff { ip6 saddr }');
});

test('text nft cannot express is an error, not a broken file', () => {
  assert.throws(() => ruleText('ip', rule([S.drop()], 'say "hi"')), /rule comment.*double quote/);
});
