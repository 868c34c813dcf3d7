/**
 * The golden cases: name -> ruleset. `gen.ts` writes `<name>.nft` (our rendering); `capture.sh` runs
 * `nft --debug=netlink -f <name>.nft` in a throwaway netns and stores `<name>.debug.txt`; lower.test.ts checks
 * that the rendering is unchanged and that our lowering prints exactly what nft generated.
 */
import type { Ruleset } from '../model.ts';
import { compile } from '../compile.ts';
import { constructs, smallCluster, smallClusterV6 } from './fixtures.ts';

export const GOLDENS: Record<string, () => Ruleset> = {
  'constructs-ip': () => constructs('ip'),
  'constructs-ip6': () => constructs('ip6'),
  'small-cluster-ip': () => compile(smallCluster()),
  'small-cluster-ip-masqall': () => compile(smallCluster({ masqueradeAll: true, nodePortIPs: ['192.168.1.11', '127.0.0.1'], localDetector: { mode: 'interfacePrefix', prefix: 'veth' } })),
  'small-cluster-ip6': () => compile(smallClusterV6()),
};
