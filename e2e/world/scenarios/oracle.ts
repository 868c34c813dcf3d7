/**
 * Oracle scenario (run by ruleset-oracle.test.ts in the private world). For a config: in host A, `nft -f` of
 * `nftproxy render`; in host B, `nftproxy apply` (our netlink push); in host C, `nft -f` of what stock
 * `nft list ruleset` prints for B. Prints the three `nft -j list ruleset` listings, normalised.
 * Usage: oracle.ts CONFIG_JSON
 */
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { destroyHosts, inNs, preparePrivateWorld, sh } from '../netns.ts';

const ROOT = new URL('../../..', import.meta.url).pathname;
const CLI = join(ROOT, 'agent/cli.ts');
const [config] = process.argv.slice(2);

/** Drops handles (kernel-assigned) and metainfo, and sorts set elements (hash sets list in hash order). */
function normalise(json: string): unknown {
  const walk = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object') {
      const o: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) {
        if (k === 'handle') continue;
        o[k] = k === 'elem' && Array.isArray(x) ? x.map(walk).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))) : walk(x);
      }
      return o;
    }
    return v;
  };
  return (walk(JSON.parse(json)) as { nftables: Array<Record<string, unknown>> }).nftables.filter((o) => !('metainfo' in o));
}

preparePrivateWorld();
const hosts = ['oracle-a', 'oracle-b', 'oracle-c'];
const out: Record<string, unknown> = {};
try {
  for (const h of hosts) sh('ip', ['netns', 'add', h]);
  const dir = mkdtempSync(join(tmpdir(), 'nftproxy-oracle-'));
  const rendered = sh(process.execPath, [CLI, 'render', '--config', config]);
  writeFileSync(join(dir, 'rendered.nft'), rendered);
  inNs('oracle-a', 'nft', ['-f', join(dir, 'rendered.nft')]);
  out.apply = JSON.parse(inNs('oracle-b', process.execPath, [CLI, 'apply', '--config', config]).trim().split('\n').pop()!);
  const listed = inNs('oracle-b', 'nft', ['list', 'ruleset']);
  writeFileSync(join(dir, 'listed.nft'), listed);
  inNs('oracle-c', 'nft', ['-f', join(dir, 'listed.nft')]);
  out.a = normalise(inNs('oracle-a', 'nft', ['-j', 'list', 'ruleset']));
  out.b = normalise(inNs('oracle-b', 'nft', ['-j', 'list', 'ruleset']));
  out.c = normalise(inNs('oracle-c', 'nft', ['-j', 'list', 'ruleset']));
  out.listedText = listed;
} catch (err) {
  out.error = (err as Error).message;
} finally {
  destroyHosts(hosts);
}
process.stdout.write(JSON.stringify(out) + '\n');
