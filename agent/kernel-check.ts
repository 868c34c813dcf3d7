/**
 * Kernel requirements, checked at startup (`nftproxy run`, `nftproxy check`).
 *
 * The check is real and cheap: ONE netlink batch that creates a throw-away table (`<tableName>-probe-<pid>`) holding
 * the whole ruleset nftproxy would program for a synthetic node with one Service that uses every feature (ClusterIP,
 * NodePort, LoadBalancer with source ranges, externalTrafficPolicy Local, ClientIP affinity, two endpoints), and
 * deletes that table again in the same batch. The kernel validates every object and loads every expression module
 * while it processes the batch, so a missing feature fails the batch (nothing of it is kept), and the failing
 * operation names the feature. A batch that succeeds leaves no trace but one ruleset generation.
 *
 * Upstream kube-proxy instead enforces kernel >= 5.13 (kube-proxy-nftables.md §11); we only warn on an older
 * release, because the probe is the authority. Feature list: kube-proxy-nftables.md §11 and the linux Kconfig
 * names (net/netfilter/Kconfig, net/ipv4/netfilter/Kconfig, net/ipv6/netfilter/Kconfig).
 */
import { release } from 'node:os';
import { ConfigSchema } from '../config-schema/config.ts';
import type { BatchOp, Expr, TableFamily } from '../netlink/types.ts';
import { BatchError } from '../netlink/socket.ts';
import { compile, toBatchOps } from '../rules/index.ts';
import { ClusterState } from './cluster-state.ts';
import { SnapshotBuilder, type IPFamily } from './snapshot.ts';

/** The oldest kernel upstream supports for nftables mode (kubernetes `utilkernel.NFTablesKubeProxyKernelVersion`). */
export const MIN_KERNEL = [5, 13] as const;

/** The kernel config option and module behind each nf_tables expression we use. */
export const EXPR_FEATURE: Record<string, string> = {
  payload: 'nf_tables core (CONFIG_NF_TABLES)',
  meta: 'nf_tables core (CONFIG_NF_TABLES)',
  meta_set: 'nf_tables core (CONFIG_NF_TABLES)',
  cmp: 'nf_tables core (CONFIG_NF_TABLES)',
  range: 'nf_tables core (CONFIG_NF_TABLES)',
  bitwise: 'nf_tables core (CONFIG_NF_TABLES)',
  lookup: 'nf_tables core (CONFIG_NF_TABLES)',
  immediate: 'nf_tables core (CONFIG_NF_TABLES)',
  dynset: 'nf_tables core (CONFIG_NF_TABLES)',
  nat: 'NAT (CONFIG_NFT_NAT, module nft_nat) and conntrack (CONFIG_NF_CONNTRACK)',
  masq: 'masquerade (CONFIG_NFT_MASQ, module nft_masq)',
  numgen: 'number generator (CONFIG_NFT_NUMGEN, module nft_numgen)',
  ct: 'conntrack expression (CONFIG_NFT_CT, module nft_ct)',
  ct_set: 'conntrack expression (CONFIG_NFT_CT, module nft_ct)',
  fib: 'fib lookups (CONFIG_NFT_FIB_IPV4 / CONFIG_NFT_FIB_IPV6, modules nft_fib_ipv4 / nft_fib_ipv6)',
  reject: 'reject (CONFIG_NFT_REJECT, modules nft_reject_ipv4 / nft_reject_ipv6)',
  counter: 'counters (CONFIG_NFT_COUNTER, built into nf_tables since 4.x)',
};

/** Outcome of the probe. `message` is ready to log; on failure it names the operation, the errno and the feature. */
export type KernelCheckResult =
  | { ok: true; family: TableFamily; ops: number; warnings: string[] }
  | { ok: false; family: TableFamily; ops: number; warnings: string[]; message: string };

/** What the check needs of the socket (NftSocket fits). */
export interface ProbeSender {
  sendBatch(ops: readonly BatchOp[]): Promise<unknown>;
}

/** Parses `uname -r` text ("6.8.0-45-generic") into [major, minor]; null when it does not start with digits. */
export function kernelVersion(text: string): [number, number] | null {
  const m = /^(\d+)\.(\d+)/.exec(text);
  return m ? [Number(m[1]), Number(m[2])] : null;
}

/** A warning when `text` (a kernel release) is older than {@link MIN_KERNEL}, else null. */
export function kernelVersionWarning(text: string): string | null {
  const v = kernelVersion(text);
  if (!v) return `cannot parse the kernel release ${JSON.stringify(text)}; the nf_tables probe decides`;
  if (v[0] > MIN_KERNEL[0] || (v[0] === MIN_KERNEL[0] && v[1] >= MIN_KERNEL[1])) return null;
  return `kernel ${text} is older than ${MIN_KERNEL.join('.')}, the oldest kube-proxy supports for nftables mode; the nf_tables probe passed or failed on its own`;
}

/** The synthetic objects of the probe: one Service of every kind we program, two endpoints, one of them local. */
function probeObjects(family: IPFamily, nodeName: string): { services: unknown[]; slices: unknown[]; nodes: unknown[] } {
  const v6 = family === 'IPv6';
  const ip = (n: number) => (v6 ? `fd00:96::${n}` : `10.96.0.${n}`);
  const pod = (n: number) => (v6 ? `fd00:244::${n}` : `10.244.0.${n}`);
  return {
    nodes: [{ kind: 'Node', metadata: { name: nodeName, labels: { 'topology.kubernetes.io/zone': 'probe' } }, spec: {}, status: { addresses: [{ type: 'InternalIP', address: v6 ? 'fd00:1::1' : '192.0.2.1' }] } }],
    services: [{
      kind: 'Service', metadata: { name: 'probe', namespace: 'probe', uid: 'probe' },
      spec: {
        type: 'LoadBalancer', clusterIP: ip(1), clusterIPs: [ip(1)], ipFamilies: [family], externalIPs: [ip(2)],
        ports: [{ name: 'p', port: 80, protocol: 'TCP', targetPort: 8080, nodePort: 30080 }, { name: 'u', port: 53, protocol: 'UDP', targetPort: 53, nodePort: 30053 }],
        externalTrafficPolicy: 'Local', healthCheckNodePort: 30999, sessionAffinity: 'ClientIP',
        loadBalancerSourceRanges: [v6 ? 'fd00:ff::/64' : '203.0.113.0/24'],
      },
      status: { loadBalancer: { ingress: [{ ip: ip(3) }] } },
    }],
    slices: [{
      kind: 'EndpointSlice', metadata: { name: 'probe-1', namespace: 'probe', labels: { 'kubernetes.io/service-name': 'probe' } },
      addressType: family,
      endpoints: [
        { addresses: [pod(10)], conditions: { ready: true, serving: true, terminating: false }, nodeName },
        { addresses: [pod(11)], conditions: { ready: true, serving: true, terminating: false }, nodeName: 'elsewhere' },
      ],
      ports: [{ name: 'p', port: 8080, protocol: 'TCP' }, { name: 'u', port: 53, protocol: 'UDP' }],
    }],
  };
}

/**
 * The probe batch for `family`: add the whole synthetic ruleset under table `probeTable`, then delete that table.
 * Pure (no I/O).
 */
export function probeBatch(family: IPFamily, probeTable: string): BatchOp[] {
  const nodeName = 'nftproxy-probe';
  const cfg = ConfigSchema.parse({
    tableName: probeTable, clusterCIDR: family === 'IPv6' ? 'fd00:244::/56' : '10.244.0.0/16', ipFamilies: [family],
    nodePortAddresses: [family === 'IPv6' ? 'fd00:1::/64' : '192.0.2.0/24'],
    serviceCIDRs: [family === 'IPv6' ? 'fd00:96::/112' : '10.96.0.0/16'],
    source: { type: 'file', path: '/nonexistent' },
  });
  const state = new ClusterState(nodeName, (what, reason) => { throw new Error(`kernel probe object ${what} is invalid: ${reason}`); });
  const o = probeObjects(family, nodeName);
  state.replace('Node', o.nodes);
  state.replace('Service', o.services);
  state.replace('EndpointSlice', o.slices);
  const builder = new SnapshotBuilder(cfg, (what, reason) => { throw new Error(`kernel probe field ${what} is invalid: ${reason}`); });
  const ruleset = compile(builder.build(state, family));
  const tf: TableFamily = family === 'IPv6' ? 'ip6' : 'ip';
  return [...toBatchOps(ruleset), { op: 'delete', kind: 'table', table: { family: tf, name: probeTable } }];
}

/** The features a rule needs, from its expressions (unique, in order). */
function featuresOf(exprs: readonly Expr[]): string[] {
  return [...new Set(exprs.map((e) => EXPR_FEATURE[e.type === 'opaque' ? e.name : e.type] ?? `expression ${e.type}`))];
}

/** Turns a failed probe into a message that names the operation, errno and the kernel feature that is missing. */
export function explainProbeFailure(err: unknown, family: TableFamily): string {
  const head = `kernel check failed for family ${family}: nf_tables refused nftproxy's ruleset`;
  if (!(err instanceof BatchError)) return `${head}: ${(err as Error)?.message ?? String(err)}`;
  const f = err.errors[0];
  const op = f.op;
  let why = '';
  if (op?.kind === 'rule' && (f.errnoName === 'ENOENT' || f.errnoName === 'EOPNOTSUPP' || f.errnoName === 'EAFNOSUPPORT')) {
    why = `an expression of this rule is not supported by this kernel (module missing or not built); the rule needs: ${featuresOf(op.rule.exprs).join('; ')}`;
  } else if (op?.kind === 'chain' && op.chain.hook) {
    why = `base chain type ${op.chain.hook.type} at hook ${op.chain.hook.hooknum} is not supported; ${op.chain.hook.type === 'nat' ? 'NAT chains need CONFIG_NFT_NAT and CONFIG_NF_NAT (modules nft_chain_nat, nf_nat)' : 'filter chains need CONFIG_NF_TABLES_IPV4 / CONFIG_NF_TABLES_IPV6'}`;
  } else if (op?.kind === 'set') {
    why = 'this set needs concatenated keys, intervals or timeouts (CONFIG_NF_TABLES with the hash, rbtree and pipapo set backends; kernel 5.6+ for concatenated intervals)';
  } else if (op?.kind === 'table') {
    why = `nf_tables for family ${family} is not available (CONFIG_NF_TABLES_${family === 'ip' ? 'IPV4' : 'IPV6'})`;
  } else if (f.errnoName === 'EPERM') {
    why = 'permission denied: nftproxy needs CAP_NET_ADMIN';
  }
  return `${head}: ${err.message}${why ? `: ${why}` : ''}. See docs/troubleshooting.md#kernel-requirements`;
}

/**
 * Runs the probe for one family through `sender` (an NftSocket). Never throws for a refused batch: the result says
 * why. `probeTable` defaults to `<tableName>-probe-<pid>`, which no one else uses.
 */
export async function checkKernel(sender: ProbeSender, family: IPFamily, tableName: string, opts: { kernelRelease?: string; probeTable?: string } = {}): Promise<KernelCheckResult> {
  const tf: TableFamily = family === 'IPv6' ? 'ip6' : 'ip';
  const warnings: string[] = [];
  const w = kernelVersionWarning(opts.kernelRelease ?? release());
  if (w) warnings.push(w);
  const probeTable = opts.probeTable ?? `${tableName.slice(0, 200)}-probe-${process.pid}`;
  const ops = probeBatch(family, probeTable);
  try {
    await sender.sendBatch(ops);
    return { ok: true, family: tf, ops: ops.length, warnings };
  } catch (err) {
    return { ok: false, family: tf, ops: ops.length, warnings, message: explainProbeFailure(err, tf) };
  }
}
