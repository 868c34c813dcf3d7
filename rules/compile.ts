/**
 * The compiler: `(snapshot) -> ruleset`, pure (DESIGN.md §1, §3).
 *
 * Per ServicePort, upstream's 1.37 decision logic (kubernetes pkg/proxy/nftables/proxier.go syncProxyRules;
 * shared/reference/kube-proxy-nftables.md §2.7), with our endpoint selection (DESIGN.md §3): no per-service set.
 * - every endpoint list (cluster, local) is ONE rule `meta l4proto tcp dnat ip to numgen random mod N offset K
 *   map @endpoint-map` over a block of the shared endpoint map (endpoint-select.ts): first-packet cost independent
 *   of N and of the number of Services, stable keys across syncs;
 * - ClientIP affinity keeps upstream's per-endpoint `affinity-…` timeout sets and `endpoint-…` chains
 *   (`ip saddr @affinity-X goto endpoint-X` first, then a cascade `numgen random mod (N-i) 0 goto endpoint-X_i`:
 *   rule i is reached with probability (N-i)/N and matches with 1/(N-i), so every endpoint gets 1/N).
 * Endpoints are sorted by their `ip:port` string (`[ip]:port` for IPv6), as upstream does.
 *
 * Deviations from upstream, for a ruleset that is always valid: a verdict-map element never points to a chain that
 * has no endpoints (that traffic gets the no-endpoint verdict instead), and the firewall chain tests the
 * allowed source ranges with one `ip saddr != a ip saddr != b drop` rule instead of an anonymous set.
 */
import type { TableFamily, Verdict } from '../netlink/types.ts';
import type { Endpoint, ServicePort, Snapshot } from '../config-schema/snapshot.ts';
import { servicePortKey } from '../config-schema/snapshot.ts';
import { canonicalAddr, cidrContains, formatCidr, parseAddr, parseCidr } from './addr.ts';
import type { Chain, Element, Fragment, KeyPart, L4Proto, Rule, Ruleset, SetDef, Stmt } from './model.ts';
import { S, SKELETON_KEY, buildRuleset, elementKeyText, fingerprintOf, rule } from './model.ts';
import { endpointNames, servicePortNameString, servicePortNames, truncateComment } from './names.ts';
import { EndpointAllocator, isEndpointMap, ownerComment, rebuildEndpointAllocator, selectViaMap, shardFragment } from './endpoint-select.ts';
import { Journal, patchRuleset } from './incremental.ts';
import {
  CHAINS, SETS, TABLE_COMMENT, addrTypeOf, globalsOf, ifLocal, masqueradeMark, skeletonFragment, tableFamilyOf,
} from './skeleton.ts';

/** Options of {@link compile}. */
export interface CompileOptions {
  /**
   * A ruleset compiled earlier (typically the committed one). Fragments whose fingerprint is unchanged are
   * reused as objects instead of being rebuilt; a ServicePort that is the very same object as last time is reused
   * without even hashing it (snapshots must therefore be treated as immutable).
   */
  previous?: Ruleset | null;
  /**
   * The endpoint-map allocation to start from when there is no previous ruleset (restart adoption:
   * `rebuildEndpointAllocator` of the dumped map). Not modified (cloned).
   */
  allocator?: EndpointAllocator;
  /**
   * Patch `previous` in place (O(changed ServicePorts) instead of O(cluster); incremental.ts) when its skeleton
   * is unchanged. The result carries a `delta`; the caller MUST then call `commitDelta(result)` once the kernel
   * acknowledged the batch, or `rollbackDelta(result)` if it did not, before compiling again.
   */
  inPlace?: boolean;
  /**
   * With `inPlace`: the ServicePorts that changed since `previous` was compiled (SnapshotBuilder.lastDelta), so
   * that the compile does not even look at the others. Must be exact: every ServicePort of the snapshot that is not
   * listed must be the very object `previous` was compiled from. Ignored without `inPlace`.
   */
  changed?: { servicePorts: readonly ServicePort[]; removedKeys: readonly string[] } | null;
}

/** Snapshot-wide values a ServicePort fragment depends on. */
interface Ctx {
  family: TableFamily;
  mark: number;
  snap: Snapshot;
  globalsFp: string;
  alloc: EndpointAllocator;
}

const PROTO: Record<ServicePort['protocol'], L4Proto> = { TCP: 'tcp', UDP: 'udp', SCTP: 'sctp' };

/** An endpoint with canonical address and its sort/identity string (`ip:port`, `[ip]:port`). */
interface Ep {
  ip: string;
  port: number;
  isLocal: boolean;
  str: string;
}

function normEndpoints(family: TableFamily, eps: readonly Endpoint[], field: string): Ep[] {
  // Fast path: the snapshot's lists are usually sorted by identity already without duplicates (agent/snapshot.ts
  // collectEndpoints); then the result is the list itself, without a Map and a sort.
  const out: Ep[] = [];
  for (let i = 0; i < eps.length; i++) {
    const e = eps[i];
    const ip = canonicalAddr(family, e.ip, `${field}[${i}].ip`);
    if (!Number.isInteger(e.port) || e.port < 1 || e.port > 65535) throw new Error(`${field}[${i}].port: ${e.port} is out of range 1..65535`);
    const str = family === 'ip' ? `${ip}:${e.port}` : `[${ip}]:${e.port}`;
    if (i > 0 && !(out[i - 1].str < str)) return normEndpointsSlow(family, eps, field);
    out.push({ ip, port: e.port, isLocal: e.isLocal, str });
  }
  return out;
}

/** {@link normEndpoints} for any order: deduplicated by identity (local wins), sorted by identity. */
function normEndpointsSlow(family: TableFamily, eps: readonly Endpoint[], field: string): Ep[] {
  const byStr = new Map<string, Ep>();
  eps.forEach((e, i) => {
    const ip = canonicalAddr(family, e.ip, `${field}[${i}].ip`);
    if (!Number.isInteger(e.port) || e.port < 1 || e.port > 65535) throw new Error(`${field}[${i}].port: ${e.port} is out of range 1..65535`);
    const str = family === 'ip' ? `${ip}:${e.port}` : `[${ip}]:${e.port}`;
    const prev = byStr.get(str);
    if (prev) prev.isLocal ||= e.isLocal;
    else byStr.set(str, { ip, port: e.port, isLocal: e.isLocal, str });
  });
  return [...byStr.values()].sort((a, b) => (a.str < b.str ? -1 : a.str > b.str ? 1 : 0));
}

function ipPart(family: TableFamily, ip: string): KeyPart {
  return family === 'ip' ? { type: 'ipv4_addr', ip } : { type: 'ipv6_addr', ip };
}

/**
 * The endpoint-selection rules of a policy chain (`service-…` or `local-…`).
 * `target(ep)` is the final statement list for one endpoint (DNAT, or `goto endpoint-…` with affinity).
 */
function selectionRules(eps: readonly Ep[], target: (ep: Ep) => Stmt[]): Rule[] {
  const n = eps.length;
  const rules: Rule[] = [];
  for (let i = 0; i < n; i++) {
    rules.push(rule(i < n - 1 ? [S.numgen(n - i, 0), ...target(eps[i])] : target(eps[i])));
  }
  return rules;
}

/**
 * Compiles one ServicePort into its fragment. `fingerprint`: the input fingerprint `fingerprintOf([globalsFp, sp])`
 * when the caller has it already; otherwise it is computed when first read.
 * @throws Error naming `servicePorts[i].<field>` on invalid addresses, ports or CIDRs.
 */
function compileServicePort(ctx: Ctx, sp: ServicePort, idx: number, fingerprint: string | undefined): Fragment {
  const { family } = ctx;
  const f = `servicePorts[${idx}]`;
  const proto = PROTO[sp.protocol];
  if (!proto) throw new Error(`${f}.protocol: ${JSON.stringify(sp.protocol)} is not TCP, UDP or SCTP`);
  for (const [name, v] of [['port', sp.port], ['nodePort', sp.nodePort]] as const) {
    if (!Number.isInteger(v) || v < 0 || v > 65535 || (name === 'port' && v === 0)) throw new Error(`${f}.${name}: ${v} is out of range`);
  }
  const spn = { namespace: sp.namespace, name: sp.name, portName: sp.portName, protocol: proto };
  const names = servicePortNames(spn);
  const comment = truncateComment(servicePortNameString(sp));
  const addrType = addrTypeOf(family);
  const clusterIP = canonicalAddr(family, sp.clusterIP, `${f}.clusterIP`);
  const externalIPs = sp.externalIPs.map((ip, i) => canonicalAddr(family, ip, `${f}.externalIPs[${i}]`));
  const lbIPs = sp.loadBalancerIPs.map((ip, i) => canonicalAddr(family, ip, `${f}.loadBalancerIPs[${i}]`));
  const sourceRanges = sp.loadBalancerSourceRanges.map((c, i) => parseCidr(family, c, `${f}.loadBalancerSourceRanges[${i}]`));

  const clusterEps = normEndpoints(family, sp.clusterEndpoints, `${f}.clusterEndpoints`);
  const localEps = normEndpoints(family, sp.localEndpoints, `${f}.localEndpoints`);
  // The reachable list is usually the very cluster (or local) list (agent/endpoints.ts): normalise it once.
  const reachableEps = sp.allReachableEndpoints === sp.clusterEndpoints ? clusterEps
    : sp.allReachableEndpoints === sp.localEndpoints ? localEps
    : normEndpoints(family, sp.allReachableEndpoints, `${f}.allReachableEndpoints`);

  // serviceport.go: ExternallyAccessible, UsesClusterEndpoints, UsesLocalEndpoints.
  const externallyAccessible = sp.nodePort !== 0 || lbIPs.length > 0 || externalIPs.length > 0;
  const usesClusterChain = clusterEps.length > 0 && (!sp.internalPolicyLocal || externallyAccessible);
  const usesLocalChain = localEps.length > 0 && (sp.internalPolicyLocal || (sp.externalPolicyLocal && externallyAccessible));
  const chainExists = (name: string) => (name === names.clusterChain ? usesClusterChain : usesLocalChain);

  const internalChain = sp.internalPolicyLocal ? names.localChain : names.clusterChain;
  const hasInternal = (sp.internalPolicyLocal ? localEps.length > 0 : sp.hasEndpoints) && chainExists(internalChain);
  const externalPolicyChain = sp.externalPolicyLocal ? names.localChain : names.clusterChain;
  const hasExternal = (sp.externalPolicyLocal ? localEps.length > 0 : sp.hasEndpoints) && chainExists(externalPolicyChain);
  const usesExternalChain = sp.hasEndpoints && externallyAccessible;
  const usesFirewallChain = lbIPs.length > 0 && sourceRanges.length > 0;

  const rejectV: Verdict = { kind: 'goto', chain: CHAINS.reject };
  const internalFilter: Verdict = sp.hasEndpoints ? { kind: 'drop' } : rejectV;
  const externalFilter: Verdict = sp.hasEndpoints ? { kind: 'drop' } : rejectV;
  const toExternal: Verdict = { kind: 'goto', chain: names.externalChain };

  // Elements.
  const elements: Element[] = [];
  const svcKey = (ip: string): KeyPart[] => [ipPart(family, ip), { type: 'inet_proto', proto }, { type: 'inet_service', port: sp.port }];
  const npKey: KeyPart[] = [{ type: 'inet_proto', proto }, { type: 'inet_service', port: sp.nodePort }];
  elements.push({ set: SETS.clusterIPs, key: [ipPart(family, clusterIP)] });
  if (hasInternal) elements.push({ set: SETS.serviceIPs, key: svcKey(clusterIP), verdict: { kind: 'goto', chain: internalChain } });
  else elements.push({ set: SETS.noEndpointServices, key: svcKey(clusterIP), verdict: internalFilter, comment });
  for (const ip of externalIPs) {
    if (usesExternalChain) elements.push({ set: SETS.serviceIPs, key: svcKey(ip), verdict: toExternal });
    if (!hasExternal) elements.push({ set: SETS.noEndpointServices, key: svcKey(ip), verdict: externalFilter, comment });
  }
  for (const ip of lbIPs) {
    if (usesExternalChain) elements.push({ set: SETS.serviceIPs, key: svcKey(ip), verdict: toExternal });
    if (usesFirewallChain) elements.push({ set: SETS.firewallIPs, key: svcKey(ip), verdict: { kind: 'goto', chain: names.firewallChain } });
  }
  if (!hasExternal) for (const ip of lbIPs) elements.push({ set: SETS.noEndpointServices, key: svcKey(ip), verdict: externalFilter, comment });
  if (sp.nodePort !== 0) {
    if (usesExternalChain) elements.push({ set: SETS.serviceNodePorts, key: npKey, verdict: toExternal });
    if (!hasExternal) elements.push({ set: SETS.noEndpointNodePorts, key: npKey, verdict: externalFilter, comment });
  }
  for (const ep of reachableEps) {
    if (!ep.isLocal) continue;
    elements.push({
      set: SETS.hairpin,
      key: [ipPart(family, ep.ip), ipPart(family, ep.ip), { type: 'inet_proto', proto }, { type: 'inet_service', port: ep.port }],
    });
  }

  // Chains and sets.
  const chains: Chain[] = [];
  const sets: SetDef[] = [];
  const affinity = sp.affinityTimeoutSeconds;
  const dnatTo = (ep: Ep): Stmt[] => [S.l4proto(proto), S.dnat(ep.ip, ep.port)];
  const epNames = (ep: Ep) => endpointNames(spn, ep.ip, ep.port);
  const endpointOwners: string[] = [];
  const policyRules = (eps: readonly Ep[], list: 'cluster' | 'local' = 'cluster'): Rule[] => {
    if (affinity === null) {
      // Endpoint map (endpoint-select.ts): one rule, N elements in the shared map.
      const owner = truncateComment(ownerComment(servicePortNameString(sp), list));
      endpointOwners.push(owner);
      const sel = selectViaMap(ctx.alloc, owner, proto, eps);
      elements.push(...sel.elements);
      return sel.rules;
    }
    return [
      ...eps.map((ep) => rule([S.lookup(['saddr'], epNames(ep).affinitySet), S.goto(epNames(ep).chain)])),
      ...selectionRules(eps, (ep) => [S.goto(epNames(ep).chain)]),
    ];
  };
  if (usesClusterChain) chains.push({ name: names.clusterChain, rules: policyRules(clusterEps) });
  if (usesLocalChain) chains.push({ name: names.localChain, rules: policyRules(localEps, 'local') });

  if (usesExternalChain) {
    const mark = S.markOr(ctx.mark);
    const rules: Rule[] = [];
    if (!sp.externalPolicyLocal) {
      rules.push(rule([mark], 'masquerade'));
    } else {
      if (usesClusterChain) {
        for (const alt of ifLocal(family, ctx.snap.localDetector)) rules.push(rule([...alt, S.goto(names.clusterChain)], 'short-circuit pod traffic'));
      }
      rules.push(rule([S.fibLocal('saddr'), mark], 'masquerade local traffic'));
      if (usesClusterChain) rules.push(rule([S.fibLocal('saddr'), S.goto(names.clusterChain)], 'short-circuit local traffic'));
    }
    if (hasExternal) rules.push(rule([S.goto(externalPolicyChain)]));
    chains.push({ name: names.externalChain, rules });
  }

  if (usesFirewallChain) {
    const nodeIP = ctx.snap.node.ips[0];
    const nodeBytes = nodeIP !== undefined ? parseAddr(family, nodeIP, 'node.ips[0]') : null;
    const allowFromNode = nodeBytes !== null && sourceRanges.some((c) => cidrContains(c, nodeBytes));
    const sources = [...sourceRanges.map(formatCidr), ...(allowFromNode ? lbIPs : [])];
    chains.push({ name: names.firewallChain, rules: [rule([...sources.map((s) => S.saddr(s, true)), S.drop()])] });
  }

  if (affinity !== null) {
    if (!Number.isInteger(affinity) || affinity <= 0) throw new Error(`${f}.affinityTimeoutSeconds: ${affinity} is not a positive integer`);
    const used = new Map<string, Ep>();
    for (const ep of [...(usesClusterChain ? clusterEps : []), ...(usesLocalChain ? localEps : []), ...reachableEps]) used.set(ep.str, ep);
    for (const ep of [...used.values()].sort((a, b) => (a.str < b.str ? -1 : a.str > b.str ? 1 : 0))) {
      const n = epNames(ep);
      sets.push({ name: n.affinitySet, key: [addrType], timeoutSec: affinity });
      chains.push({ name: n.chain, rules: [rule([S.update(n.affinitySet, 'saddr')]), rule(dnatTo(ep))] });
    }
  }

  // The content depends on the endpoint-map blocks too (offsets, slot order): fold them into the fingerprint.
  // Blocks are immutable (endpoint-select.ts), so capturing them now and hashing later gives the same digest.
  const blocks = endpointOwners.length ? endpointOwners.map((o) => ctx.alloc.get(o)) : null;
  const globalsFp = ctx.globalsFp;
  let inputFp = fingerprint, fp: string | undefined;
  const input = () => (inputFp ??= fingerprintOf([globalsFp, sp]));
  const frag = { key: servicePortKey(sp), chains, sets, elements, elementKeys: elements.map(elementKeyText), source: sp, endpointOwners };
  // The fingerprints are computed on first read: a cold full sync never reads them, and later compiles read only
  // those of the ServicePorts that changed to another object.
  Object.defineProperty(frag, 'inputFingerprint', { get: input, enumerable: true });
  Object.defineProperty(frag, 'fingerprint', { get: () => (fp ??= blocks ? fingerprintOf([input(), blocks]) : input()), enumerable: true });
  return frag as typeof frag & Pick<Fragment, 'fingerprint' | 'inputFingerprint'>;
}

/**
 * Compiles a snapshot into the desired ruleset of its family's table.
 * @param snapshot a parsed Snapshot (config-schema/snapshot.ts; defaults applied)
 * @throws Error naming the snapshot field (e.g. `servicePorts[3].clusterIP`) on invalid values, or on two
 *   ServicePorts with the same key.
 */
export function compile(snapshot: Snapshot, opts: CompileOptions = {}): Ruleset {
  const family = tableFamilyOf(snapshot);
  const globalsFp = fingerprintOf(globalsOf(snapshot));
  const prev = opts.previous && opts.previous.family === family && opts.previous.table === snapshot.tableName ? opts.previous : null;
  let skeleton = skeletonFragment(snapshot);
  const prevSkel = prev?.fragments.get(skeleton.key);
  if (prevSkel && prevSkel.fingerprint === skeleton.fingerprint) skeleton = prevSkel;
  const prevGlobals = prevSkel?.fingerprint === skeleton.fingerprint ? globalsFp : null;
  const mark = masqueradeMark(snapshot.masqueradeBit);

  if (opts.inPlace && prev && skeleton === prevSkel && !prev.delta && prev.endpointAlloc) {
    return compileInPlace({ family, mark, snap: snapshot, globalsFp, alloc: prev.endpointAlloc }, prev, snapshot, globalsFp, opts.changed ?? null);
  }
  const alloc = (prev ? prev.endpointAlloc : opts.allocator)?.clone() ?? new EndpointAllocator();
  const ctx: Ctx = { family, mark, snap: snapshot, globalsFp, alloc };

  const byKey = new Map<string, Fragment>();
  const trusted = new Set<Fragment>();
  snapshot.servicePorts.forEach((sp, i) => {
    const key = servicePortKey(sp);
    if (byKey.has(key)) throw new Error(`servicePorts[${i}]: duplicate ServicePort ${key}`);
    const old = prev?.fragments.get(key);
    if (old && old.source === sp && prevGlobals === globalsFp) {
      byKey.set(key, old);
      trusted.add(old);
      return;
    }
    // Without a previous fragment the input fingerprint is left to the fragment (computed if ever read).
    const fp = old ? fingerprintOf([globalsFp, sp]) : undefined;
    if (old && (old.inputFingerprint ?? old.fingerprint) === fp) {
      byKey.set(key, old);
      trusted.add(old);
    } else {
      const nf = compileServicePort(ctx, sp, i, fp);
      byKey.set(key, nf);
      for (const o of old?.endpointOwners ?? []) if (!nf.endpointOwners?.includes(o)) alloc.release(o);
    }
  });
  // The endpoint maps the allocation needs (reusing the previous objects).
  for (let i = 0; i < alloc.shards; i++) {
    const sf = shardFragment(i);
    const old = prev?.fragments.get(sf.key);
    byKey.set(sf.key, old ?? sf);
    if (old) trusted.add(old);
  }
  // Free the endpoint-map blocks of ServicePorts that are gone (and, without a previous ruleset, of adopted
  // owners that no ServicePort claimed).
  if (prev) {
    for (const [k, f] of prev.fragments) if (!byKey.has(k)) for (const o of f.endpointOwners ?? []) alloc.release(o);
  } else if (alloc.size) {
    const used = new Set<string>();
    for (const f of byKey.values()) for (const o of f.endpointOwners ?? []) used.add(o);
    for (const [o] of [...alloc.entries()]) if (!used.has(o)) alloc.release(o);
  }
  const keys = [...byKey.keys()].sort();
  if (skeleton === prevSkel) trusted.add(skeleton);
  else trusted.clear(); // a new skeleton may have changed what the reused fragments reference
  const rs = buildRuleset(family, snapshot.tableName, TABLE_COMMENT, [skeleton, ...keys.map((k) => byKey.get(k)!)], { trusted });
  rs.endpointAlloc = alloc;
  return rs;
}

/** The endpoint-map allocation a ruleset's fragments hold (after a rollback, or to check one). */
export function allocatorOf(rs: Ruleset): EndpointAllocator {
  const els: Array<{ key: number; comment?: string; ip: string; port: number }> = [];
  for (const f of rs.fragments.values()) {
    for (const e of f.elements) {
      const k = e.key[0];
      if (isEndpointMap(e.set) && e.endpoint && k?.type === 'numgen') els.push({ key: k.value, comment: e.comment, ip: e.endpoint.ip, port: e.endpoint.port });
    }
  }
  return rebuildEndpointAllocator(els);
}

/** The in-place path of {@link compile} (see CompileOptions.inPlace). */
function compileInPlace(ctx: Ctx, prev: Ruleset, snapshot: Snapshot, globalsFp: string, hint: CompileOptions['changed']): Ruleset {
  const alloc = ctx.alloc;
  const removed: Fragment[] = [];
  const added: Fragment[] = [];
  const changed: string[] = [];
  const seen = new Set<string>();
  const j = new Journal();
  const one = (sp: ServicePort, i: number) => {
    const key = servicePortKey(sp);
    if (seen.has(key)) throw new Error(`servicePorts[${i < 0 ? snapshot.servicePorts.indexOf(sp) : i}]: duplicate ServicePort ${key}`);
    seen.add(key);
    const old = prev.fragments.get(key);
    if (old && old.source === sp) return;
    const fp = fingerprintOf([globalsFp, sp]);
    if (old && (old.inputFingerprint ?? old.fingerprint) === fp) return;
    const nf = compileServicePort(ctx, sp, i < 0 ? snapshot.servicePorts.indexOf(sp) : i, fp);
    for (const o of old?.endpointOwners ?? []) if (!nf.endpointOwners?.includes(o)) alloc.release(o);
    if (old) removed.push(old);
    added.push(nf);
    changed.push(key);
  };
  try {
    if (hint) {
      // O(change): only the ServicePorts the snapshot builder rebuilt, and the keys it dropped.
      for (const sp of hint.servicePorts) one(sp, -1);
      for (const k of hint.removedKeys) {
        const f = prev.fragments.get(k);
        if (!f || seen.has(k)) continue;
        for (const o of f.endpointOwners ?? []) alloc.release(o);
        removed.push(f);
        changed.push(k);
      }
    } else snapshot.servicePorts.forEach(one);
    if (!hint && seen.size !== [...prev.fragments.keys()].filter((k) => !k.startsWith('#')).length) {
      for (const [k, f] of prev.fragments) {
        if (k.startsWith('#') || seen.has(k)) continue;
        for (const o of f.endpointOwners ?? []) alloc.release(o);
        removed.push(f);
        changed.push(k);
      }
    }
    // New endpoint maps when the allocation grew past the last one (never removed here; a full compile drops them).
    for (let i = 0; i < alloc.shards; i++) {
      const sf = shardFragment(i);
      if (!prev.fragments.has(sf.key)) { added.push(sf); changed.push(sf.key); }
    }
    patchRuleset(prev, j, removed, added);
  } catch (err) {
    j.rollback();
    prev.endpointAlloc = allocatorOf(prev);
    throw err;
  }
  const rs: Ruleset = { family: prev.family, table: prev.table, comment: prev.comment, fragments: prev.fragments, index: prev.index, endpointAlloc: alloc };
  rs.delta = { base: prev, changed, journal: j, onRollback: () => { const a = allocatorOf(prev); prev.endpointAlloc = a; rs.endpointAlloc = a; } };
  return rs;
}
