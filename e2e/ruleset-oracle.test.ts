/**
 * The oracle: `nft -f` of our rendered text and our netlink push build the same ruleset (`nft -j list ruleset`,
 * handles dropped, set elements sorted), and stock `nft list ruleset` of our table loads again with `nft -f` into
 * the same ruleset. Run for the example config (IPv4 ClusterIPs) and for the real kubectl fixture in both families
 * (NodePort, LoadBalancer with source ranges, eTP/iTP Local, ClientIP affinity, ServiceCIDR drops).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runInPrivateWorld, e2eSkip } from './world/netns.ts';

const skip = e2eSkip('e2e/ruleset-oracle.test.ts');
const SCENARIO = new URL('./world/scenarios/oracle.ts', import.meta.url).pathname;

const CASES = [
  { name: 'example config (IPv4)', config: new URL('../deploy/examples/config.json', import.meta.url).pathname, tables: ['ip'] },
  { name: 'kubectl fixture, dual-stack, every feature the compiler has', config: new URL('./testdata/fixture-config.json', import.meta.url).pathname, tables: ['ip', 'ip6'] },
  // every-feature.json: multi-port TCP/UDP/SCTP with named ports, NodePort, ExternalIPs, LB (+ source ranges with and
  // without the node-IP self-allow, padded range, Proxy-mode ingress), eTP/iTP Local with and without local endpoints,
  // ClientIP affinity (default and explicit timeout), no endpoints, terminating-only, hints, single-stack of each
  // family, exclusions; in three configs covering every detectLocalMode and nodePortAddresses kind.
  { name: 'every feature, dual-stack: InterfaceNamePrefix, nodePortAddresses primary + CIDRs + localhost', config: new URL('./testdata/every-feature-config.json', import.meta.url).pathname, tables: ['ip', 'ip6'] },
  { name: 'every feature, dual-stack: BridgeInterface, nodePortAddresses all (fib), masqueradeAll, masqueradeBit 5', config: new URL('./testdata/every-feature-all-config.json', import.meta.url).pathname, tables: ['ip', 'ip6'] },
  { name: 'every feature, dual-stack: NodeCIDR, nodePortAddresses primary', config: new URL('./testdata/every-feature-nodecidr-config.json', import.meta.url).pathname, tables: ['ip', 'ip6'] },
];

for (const c of CASES) {
  test(`oracle: ${c.name}`, { skip: skip ?? false, timeout: 120_000 }, () => {
    const r = runInPrivateWorld(SCENARIO, [c.config], 100_000);
    assert.equal(r.status, 0, r.stderr);
    const o = JSON.parse(r.stdout.trim().split('\n').pop()!);
    assert.equal(o.error, undefined, o.error);
    assert.equal(o.apply.ok, true);
    const tables = (o.b as Array<{ table?: { family: string; name: string } }>).filter((x) => x.table).map((x) => `${x.table!.family} ${x.table!.name}`);
    assert.deepEqual(tables, c.tables.map((f) => `${f} nftproxy`));
    assert.ok((o.b as unknown[]).length > 40, 'a real ruleset');
    assert.deepEqual(o.b, o.a, 'netlink push == nft -f of the rendered text');
    assert.deepEqual(o.c, o.b, 'nft -f of `nft list ruleset` reloads the same ruleset');
    assert.match(o.listedText, /table ip nftproxy \{/);
  });
}
