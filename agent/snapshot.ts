/**
 * Builds the per-family Snapshot (config-schema/snapshot.ts) from the cluster state and the config, the way
 * upstream builds its ServicePorts and EndpointsMap (kubernetes `pkg/proxy/serviceport.go`,
 * `pkg/proxy/endpointslicecache.go`; reference kube-proxy-nftables.md §5):
 * - one ServicePort per `spec.ports[]` with a ClusterIP of the family;
 * - endpoints from every EndpointSlice of the Service with that addressType, matched by port NAME and protocol,
 *   `addresses[0]` only, deduplicated by ip:port (isLocal wins), sorted;
 * - externalIPs, LoadBalancer VIPs (ipMode VIP or unset) and trimmed source ranges of the family;
 * - ClientIP affinity timeout (default 10800 s); eTP=Local only when externally accessible.
 * ServicePorts of unchanged Services are reused as the same objects, so the compiler can reuse their fragments.
 */
import type { Config } from '../config-schema/config.ts';
import { clusterCIDRsOf } from '../config-schema/config.ts';
import type { EndpointSlice, Service } from '../config-schema/kubernetes.ts';
import { LABEL } from '../config-schema/kubernetes.ts';
import type { Endpoint, LocalDetector, ServicePort, Snapshot } from '../config-schema/snapshot.ts';
import { servicePortKey } from '../config-schema/snapshot.ts';
import { canonicalAddr, formatAddr, isIPv4, isIPv6, parseAddr, prefixMask } from '../rules/addr.ts';
import type { TableFamily } from '../netlink/types.ts';
import { categorizeEndpoints } from './endpoints.ts';
import type { ClusterState, Changes, InvalidObjectReporter } from './cluster-state.ts';

/** Default ClientIP affinity timeout (core/v1 DefaultClientIPServiceAffinitySeconds). */
export const DEFAULT_AFFINITY_SECONDS = 10800;

export type IPFamily = 'IPv4' | 'IPv6';
const TABLE_FAMILY: Record<IPFamily, TableFamily> = { IPv4: 'ip', IPv6: 'ip6' };
const inFamily = (f: IPFamily, ip: string) => (f === 'IPv4' ? isIPv4(ip) : isIPv6(ip));

/** The ServicePorts that changed between two builds of one family (SnapshotBuilder.lastDelta). */
export interface SnapshotDelta {
  /** ServicePorts of the Services that changed, as now built (added or possibly modified). */
  servicePorts: ServicePort[];
  /** `servicePortKey()`s of ServicePorts that no longer exist. */
  removedKeys: string[];
}

/**
 * Keeps the ServicePorts built per Service and family, and rebuilds only the Services that changed.
 */
export class SnapshotBuilder {
  readonly #config: Config;
  readonly #report: InvalidObjectReporter;
  readonly #cache = new Map<string, ServicePort[]>(); // `${family}|ns/name` -> ServicePorts
  /** Sorted Service keys of the last build, and whether a Service was added or removed since. */
  #sortedKeys: string[] | null = null;
  /** Position of each Service key in #sortedKeys. */
  #pos = new Map<string, number>();
  /** Per family: the ServicePorts of each Service, aligned with #sortedKeys (null: rebuild from the cache). */
  readonly #lists = new Map<IPFamily, ServicePort[][] | null>();
  /** Per family: Services invalidated since that family's last build -> their ServicePorts before. */
  readonly #touched = new Map<IPFamily, Map<string, ServicePort[] | undefined>>([['IPv4', new Map()], ['IPv6', new Map()]]);
  /** Per family: false after a node change (every ServicePort may differ) until the next build. */
  readonly #deltaValid = new Map<IPFamily, boolean>([['IPv4', false], ['IPv6', false]]);
  readonly #lastDelta = new Map<IPFamily, SnapshotDelta | null>();

  readonly #interfaceAddrs: (() => readonly string[]) | null;

  /**
   * @param interfaceAddrs the host's interface addresses (agent/node-addresses.ts), used for `nodeport-ips` as
   *   upstream does (kubernetes pkg/proxy/util/nodeport_addresses.go: the local addresses inside the
   *   nodePortAddresses CIDRs). Without it (render, apply, tests) the Node object's addresses stand in.
   */
  constructor(config: Config, report: InvalidObjectReporter, interfaceAddrs?: () => readonly string[]) {
    this.#config = config;
    this.#report = report;
    this.#interfaceAddrs = interfaceAddrs ?? null;
  }

  /** Forgets cached ServicePorts of `changes` (all of them when the node changed). */
  invalidate(changes: Changes): void {
    if (changes.node) {
      this.#cache.clear();
      this.#sortedKeys = null;
      this.#lists.clear();
      for (const f of this.#touched.keys()) { this.#touched.get(f)!.clear(); this.#deltaValid.set(f, false); }
      return;
    }
    for (const k of changes.services) {
      for (const f of ['IPv4', 'IPv6'] as const) {
        const t = this.#touched.get(f)!;
        if (!t.has(k)) t.set(k, this.#cache.get(`${f}|${k}`));
        this.#cache.delete(`${f}|${k}`);
      }
    }
  }

  /**
   * What changed in `family`'s ServicePorts between its previous build and its last one: the ServicePorts of the
   * Services that were invalidated (new objects) and the keys (`servicePortKey`) of ServicePorts that are gone.
   * Null when unknown (first build, node change): then everything may have changed. A compile hint (O(change)).
   */
  lastDelta(family: IPFamily): SnapshotDelta | null {
    return this.#lastDelta.get(family) ?? null;
  }

  /** The desired state of `family`. */
  build(state: ClusterState, family: IPFamily): Snapshot {
    const cfg = this.#config;
    const node = state.node;
    const zone = node?.metadata.labels?.[LABEL.zone] ?? '';
    const nodeIPs = (node?.status?.addresses ?? [])
      .filter((a) => a.type === 'InternalIP' || a.type === 'ExternalIP')
      .map((a) => a.address).filter((ip) => inFamily(family, ip));
    const servicePorts: ServicePort[] = [];
    const touched = this.#touched.get(family)!;
    // Re-sort the Service keys only when a Service came or went.
    if (this.#sortedKeys === null || this.#sortedKeys.length !== state.services.size || [...touched.keys()].some((k) => state.services.has(k) !== (touched.get(k) !== undefined) || !this.#pos.has(k) !== !state.services.has(k))) {
      this.#sortedKeys = [...state.services.keys()].sort();
      this.#pos = new Map(this.#sortedKeys.map((k, i) => [k, i]));
      this.#lists.clear();
    }
    const spsOf = (key: string): ServicePort[] => {
      const cacheKey = `${family}|${key}`;
      let sps = this.#cache.get(cacheKey);
      if (!sps) {
        sps = this.#servicePorts(state, state.services.get(key)!, family, zone);
        this.#cache.set(cacheKey, sps);
      }
      return sps;
    };
    let lists = this.#lists.get(family) ?? null;
    if (lists === null) {
      lists = this.#sortedKeys.map(spsOf);
      this.#lists.set(family, lists);
    } else {
      // Only the touched Services (the set of Services is unchanged here): O(change) + one flatten.
      // A touched key without a position is a Service already gone (e.g. its EndpointSlice deleted after it).
      for (const k of touched.keys()) { const i = this.#pos.get(k); if (i !== undefined) lists[i] = spsOf(k); }
    }
    for (const l of lists) for (const sp of l) servicePorts.push(sp);
    if (this.#deltaValid.get(family)) {
      const upserted: ServicePort[] = [];
      const removedKeys: string[] = [];
      for (const [k, before] of touched) {
        const now = state.services.has(k) ? this.#cache.get(`${family}|${k}`) ?? [] : [];
        for (const sp of now) upserted.push(sp);
        const nowKeys = new Set(now.map(servicePortKey));
        for (const sp of before ?? []) if (!nowKeys.has(servicePortKey(sp))) removedKeys.push(servicePortKey(sp));
      }
      this.#lastDelta.set(family, { servicePorts: upserted, removedKeys });
    } else {
      this.#lastDelta.set(family, null);
    }
    touched.clear();
    this.#deltaValid.set(family, true);
    return {
      family: family === 'IPv4' ? 'ipv4' : 'ipv6',
      tableName: cfg.tableName,
      masqueradeAll: cfg.nftables.masqueradeAll,
      masqueradeBit: cfg.nftables.masqueradeBit,
      localDetector: this.#localDetector(state, family),
      nodePortIPs: this.#nodePortIPs(family, nodeIPs),
      serviceCIDRs: this.#familyCidrs(cfg.serviceCIDRs, family, 'config', 'serviceCIDRs'),
      node: { name: state.nodeName, zone, ips: nodeIPs },
      servicePorts,
    };
  }

  #localDetector(state: ClusterState, family: IPFamily): LocalDetector {
    const cfg = this.#config;
    switch (cfg.detectLocalMode) {
      case 'ClusterCIDR': {
        const cidrs = this.#familyCidrs(clusterCIDRsOf(cfg), family, 'config', 'clusterCIDR');
        return cidrs.length ? { mode: 'cidr', cidrs: [cidrs[0]] } : { mode: 'none' };
      }
      case 'NodeCIDR': {
        // upstream: node.spec.podCIDRs, first of the family (older Nodes: spec.podCIDR).
        const spec = state.node?.spec;
        const list = spec?.podCIDRs?.length ? spec.podCIDRs : spec?.podCIDR ? [spec.podCIDR] : [];
        const cidrs = this.#familyCidrs(list, family, `Node ${state.nodeName}`, 'spec.podCIDRs');
        return cidrs.length ? { mode: 'cidr', cidrs: [cidrs[0]] } : { mode: 'none' };
      }
      case 'BridgeInterface':
        return cfg.detectLocal.bridgeInterface ? { mode: 'interface', name: cfg.detectLocal.bridgeInterface } : { mode: 'none' };
      case 'InterfaceNamePrefix':
        return cfg.detectLocal.interfaceNamePrefix ? { mode: 'interfacePrefix', prefix: cfg.detectLocal.interfaceNamePrefix } : { mode: 'none' };
    }
  }

  /** The CIDRs of `family` in `list`, host bits masked (Go net.ParseCIDR); malformed ones reported and skipped. */
  #familyCidrs(list: readonly string[], family: IPFamily, what: string, field: string): string[] {
    const out: string[] = [];
    list.forEach((c, i) => {
      const n = normaliseCidr(c.trim());
      if (n === null) this.#report(what, `${field}[${i}]: ${JSON.stringify(c)} is not a CIDR; ignored`);
      else if (n.family === family) out.push(n.text);
    });
    return out;
  }

  /** nodePortAddresses → null (match all) or the node IPs in the listed CIDRs (kube-proxy's NodePortAddresses). */
  #nodePortIPs(family: IPFamily, nodeIPs: string[]): string[] | null {
    const candidates = this.#interfaceAddrs ? this.#interfaceAddrs().filter((ip) => inFamily(family, ip)) : nodeIPs;
    const cidrs: string[] = [];
    for (const a of this.#config.nodePortAddresses) {
      if (a === 'all') return null;
      if (a === 'primary') {
        // upstream expandNodePortAddressKeywords: bindAddress, when a specific address, overrides the node IP.
        const bind = this.#config.bindAddress;
        const primary = bind && inFamily(family, bind) && !/^(0\.0\.0\.0|::)$/.test(bind) ? bind : nodeIPs[0];
        if (primary) cidrs.push(`${primary}/${family === 'IPv4' ? 32 : 128}`);
        continue;
      }
      if (a === 'localhost') { cidrs.push(family === 'IPv4' ? '127.0.0.0/8' : '::1/128'); continue; }
      cidrs.push(a);
    }
    const mine = cidrs.filter((c) => inFamily(family, c.split('/')[0]));
    if (mine.length === 0 || mine.some((c) => /\/0$/.test(c))) return null;
    const seen = new Set<string>();
    return candidates.filter((ip) => mine.some((c) => cidrContainsText(c, ip)) && !seen.has(ip) && !!seen.add(ip));
  }

  #servicePorts(state: ClusterState, svc: Service, family: IPFamily, zone: string): ServicePort[] {
    const ns = svc.metadata.namespace ?? 'default';
    const name = svc.metadata.name;
    const what = `Service ${ns}/${name}`;
    const spec = svc.spec;
    const clusterIPs = spec.clusterIPs?.length ? spec.clusterIPs : spec.clusterIP ? [spec.clusterIP] : [];
    const rawIP = clusterIPs.find((ip) => inFamily(family, ip));
    if (!rawIP) return [];
    const tf = TABLE_FAMILY[family];
    let clusterIP: string;
    try { clusterIP = canonicalAddr(tf, rawIP, 'spec.clusterIPs'); } catch (e) { this.#report(what, (e as Error).message); return []; }
    // Values of the other family are programmed by the other family's table; when the Service has no ClusterIP of
    // that family they can never be programmed: reported (upstream: event KubeProxyIncorrectIPVersion).
    const otherFamily: IPFamily = family === 'IPv4' ? 'IPv6' : 'IPv4';
    const hasOther = clusterIPs.some((ip) => inFamily(otherFamily, ip));
    const familyIPs = (list: string[] | undefined, field: string) => (list ?? []).flatMap((ip, i) => {
      if (!isIPv4(ip) && !isIPv6(ip)) { this.#report(what, `${field}[${i}]: ${JSON.stringify(ip)} is not an IP address; ignored`); return []; }
      if (!inFamily(family, ip)) {
        if (!hasOther) this.#report(what, `${field}[${i}]: ${ip} is ${otherFamily} but the Service has no ${otherFamily} ClusterIP; ignored`);
        return [];
      }
      try { return [canonicalAddr(tf, ip, `${field}[${i}]`)]; } catch (e) { this.#report(what, (e as Error).message); return []; }
    });
    const externalIPs = familyIPs(spec.externalIPs, 'spec.externalIPs');
    const ingress = svc.status?.loadBalancer?.ingress ?? [];
    const lbIPs = familyIPs(ingress.filter((i) => i.ip && (i.ipMode === undefined || i.ipMode === 'VIP')).map((i) => i.ip!), 'status.loadBalancer.ingress[].ip');
    // loadBalancerSourceRanges: trimmed (upstream TrimSpace; validation once allowed padding), host bits masked as
    // Go's net.ParseCIDR does. A range that does not parse makes the Service unprogrammable in this family: it is
    // skipped (fail closed) rather than programmed with a wider firewall than asked for.
    const sourceRanges: string[] = [];
    for (const [i, raw] of (spec.loadBalancerSourceRanges ?? []).entries()) {
      const r = raw.trim();
      const field = `spec.loadBalancerSourceRanges[${i}]`;
      const norm = normaliseCidr(r);
      if (norm === null) { this.#report(what, `${field}: ${JSON.stringify(raw)} is not a CIDR; Service skipped`); return []; }
      if (norm.family === family) sourceRanges.push(norm.text);
      else if (!hasOther) this.#report(what, `${field}: ${r} is ${norm.family} but the Service has no ${norm.family} ClusterIP; ignored`);
    }
    const externallyAccessible = spec.type === 'NodePort' || spec.type === 'LoadBalancer' || externalIPs.length > 0 || lbIPs.length > 0;
    const externalPolicyLocal = externallyAccessible && spec.externalTrafficPolicy === 'Local';
    const internalPolicyLocal = spec.internalTrafficPolicy === 'Local';
    const affinity = spec.sessionAffinity === 'ClientIP' ? spec.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? DEFAULT_AFFINITY_SECONDS : null;
    const slices: EndpointSlice[] = [];
    for (const k of state.slicesByService.get(`${ns}/${name}`) ?? []) { const s = state.slices.get(k)!; if (s.addressType === family) slices.push(s); }

    const out: ServicePort[] = [];
    for (const [i, p] of spec.ports.entries()) {
      const portName = p.name ?? '';
      if (spec.ports.length > 1 && !portName) { this.#report(what, `spec.ports[${i}].name: required when a Service has several ports`); continue; }
      const endpoints = collectEndpoints(slices, portName, p.protocol, state.nodeName, tf, (w) => this.#report(what, w));
      const nodePort = spec.type === 'NodePort' || spec.type === 'LoadBalancer' ? p.nodePort ?? 0 : 0;
      // serviceport.go ExternallyAccessible() (the method, not the API helper used for externalPolicyLocal):
      // nodePort != 0, LoadBalancer VIPs or externalIPs of this family.
      const portExternallyAccessible = nodePort > 0 || lbIPs.length > 0 || externalIPs.length > 0;
      const cat = categorizeEndpoints(endpoints, { internalPolicyLocal, externalPolicyLocal, externallyAccessible: portExternallyAccessible }, state.nodeName, zone);
      out.push({
        namespace: ns, name, portName, protocol: p.protocol, clusterIP, port: p.port, nodePort,
        externalIPs, loadBalancerIPs: lbIPs, loadBalancerSourceRanges: sourceRanges,
        affinityTimeoutSeconds: affinity, externalPolicyLocal, internalPolicyLocal,
        healthCheckNodePort: spec.type === 'LoadBalancer' && externalPolicyLocal ? spec.healthCheckNodePort ?? 0 : 0,
        ...cat,
      });
    }
    return out;
  }
}

/** Endpoints of one ServicePort from the Service's slices of one family (endpointslicecache.go semantics). */
export function collectEndpoints(slices: readonly EndpointSlice[], portName: string, protocol: string, nodeName: string, family: TableFamily, warn: (msg: string) => void): Endpoint[] {
  // Candidates with their `ip:port` identity, in slice order; sorted (stably) by identity, then deduplicated:
  // of equal identities the first wins unless a later one is local and the winner is not (as a Map in slice
  // order would decide), without a Map per ServicePort.
  const keys: string[] = [];
  const eps: Endpoint[] = [];
  for (const s of slices) {
    const port = s.ports.find((p) => (p.name ?? '') === portName && (p.protocol ?? 'TCP') === protocol);
    if (!port || !port.port) continue;
    for (const e of s.endpoints) {
      let ip: string;
      try { ip = canonicalAddr(family, e.addresses[0], 'endpoints[].addresses[0]'); } catch (err) { warn(`EndpointSlice ${s.metadata.name}: ${(err as Error).message}`); continue; }
      const c = e.conditions;
      const ready = c?.ready ?? true;
      const ep: Endpoint = {
        ip, port: port.port, isLocal: !!e.nodeName && e.nodeName === nodeName,
        ready: ready !== false, serving: (c?.serving ?? true) !== false, terminating: c?.terminating === true,
      };
      const h = e.hints;
      if (h) {
        const zones = h.forZones?.map((z) => z.name);
        const nodes = h.forNodes?.map((n) => n.name);
        if (zones?.length) ep.zoneHints = zones;
        if (nodes?.length) ep.nodeHints = nodes;
      }
      keys.push(`${ip}:${port.port}`);
      eps.push(ep);
    }
  }
  // Already strictly ascending (no duplicates): the stable sort and the deduplication would keep it as is.
  let ascending = true;
  for (let i = 1; i < keys.length; i++) if (!(keys[i - 1] < keys[i])) { ascending = false; break; }
  if (ascending) return eps;
  const order = keys.map((_, i) => i);
  order.sort((a, b) => (keys[a] < keys[b] ? -1 : keys[a] > keys[b] ? 1 : a - b));
  const out: Endpoint[] = [];
  let lastKey: string | null = null;
  for (const i of order) {
    const ep = eps[i];
    if (keys[i] !== lastKey) { out.push(ep); lastKey = keys[i]; continue; }
    const prev = out[out.length - 1];
    if (!prev.isLocal && ep.isLocal) out[out.length - 1] = ep;
  }
  return out;
}

/** Parses `addr[/prefix]` of either family and masks host bits (Go net.ParseCIDR); null when malformed. */
export function normaliseCidr(text: string): { family: IPFamily; text: string } | null {
  const m = /^([0-9a-fA-F:.]+)(?:\/(\d{1,3}))?$/.exec(text);
  if (!m) return null;
  const family: IPFamily | null = isIPv4(m[1]) ? 'IPv4' : isIPv6(m[1]) ? 'IPv6' : null;
  if (!family) return null;
  const tf = TABLE_FAMILY[family];
  const bytes = parseAddr(tf, m[1]);
  const prefix = m[2] === undefined ? bytes.length * 8 : Number(m[2]);
  if (prefix > bytes.length * 8) return null;
  const mask = prefixMask(bytes.length, prefix);
  for (let i = 0; i < bytes.length; i++) bytes[i] &= mask[i];
  return { family, text: `${formatAddr(bytes)}/${prefix}` };
}

function cidrContainsText(cidr: string, ip: string): boolean {
  const [base, bitsText] = cidr.split('/');
  const bits = Number(bitsText);
  const toBig = (s: string): bigint => {
    if (isIPv4(s)) return s.split('.').reduce((n, o) => (n << 8n) | BigInt(Number(o)), 0n);
    const full = canonicalAddr('ip6', s).split('::');
    const head = full[0] ? full[0].split(':') : [];
    const tail = full.length > 1 && full[1] ? full[1].split(':') : [];
    const groups = [...head, ...Array(8 - head.length - tail.length).fill('0'), ...tail];
    return groups.reduce((n, g) => (n << 16n) | BigInt(parseInt(g || '0', 16)), 0n);
  };
  const width = isIPv4(base) ? 32 : 128;
  if (isIPv4(base) !== isIPv4(ip)) return false;
  const shift = BigInt(width - bits);
  return (toBig(base) >> shift) === (toBig(ip) >> shift);
}
