/**
 * The agent's view of the cluster: Services, EndpointSlices and its own Node, fed by a source (file or Kubernetes
 * API), with kube-proxy's change-tracker semantics (kubernetes `pkg/proxy/servicechangetracker.go`,
 * `endpointschangetracker.go`, `endpointslicecache.go`; reference kube-proxy-nftables.md §5.1–§5.2):
 * - every object is validated against config-schema/kubernetes.ts (common shapes through the exact fast path of
 *   config-schema/fast-parse.ts); an invalid one is skipped with a reason naming
 *   the object and the field, and everything else is still programmed;
 * - Services labelled `service.kubernetes.io/service-proxy-name`, headless Services and ExternalName Services are
 *   ignored, and so are EndpointSlices labelled `service.kubernetes.io/headless` or without
 *   `kubernetes.io/service-name`;
 * - an update that changes nothing the proxy reads queues nothing;
 * - `checkout()` returns the Services whose ServicePorts may have changed since the last checkout.
 */
import { EndpointSliceSchema, LABEL, NodeSchema, ServiceSchema, type EndpointSlice, type Node, type Service } from '../config-schema/kubernetes.ts';
import type { z } from 'zod';
import { fastEndpointSlice, fastService } from '../config-schema/fast-parse.ts';
import { hashString } from '../rules/model.ts';

/** Reports an object that was skipped: `what` is e.g. `Service default/web`, `reason` names the field. */
export type InvalidObjectReporter = (what: string, reason: string) => void;

/** The kinds a source delivers. */
export type ObjectKind = 'Service' | 'EndpointSlice' | 'Node';

/** The pending changes, checked out by a sync. */
export interface Changes {
  /** `namespace/name` of Services whose ServicePorts or endpoints may differ from the last checkout. */
  services: Set<string>;
  /** The Node (IPs, zone, podCIDRs) changed: every ServicePort must be rebuilt. */
  node: boolean;
  /** endpoints.kubernetes.io/last-change-trigger-time values (ms) of the slices that changed. */
  triggerTimes: number[];
}

const nsName = (m: { namespace?: string; name: string }) => `${m.namespace ?? 'default'}/${m.name}`;

/** Formats a zod error as `field.path: message (got VALUE)`. */
export function describeIssues(err: z.ZodError, input: unknown): string {
  return err.issues.slice(0, 3).map((i) => {
    let v: unknown = input;
    for (const p of i.path) v = v && typeof v === 'object' ? (v as Record<PropertyKey, unknown>)[p as PropertyKey] : undefined;
    const path = i.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('').replace(/^\./, '');
    return `${path || '(object)'}: ${i.message}${v !== undefined && typeof v !== 'object' ? ` (got ${JSON.stringify(v)})` : ''}`;
  }).join('; ');
}

/** The relevant content of a Service, for no-op detection. */
function serviceFingerprint(s: Service): string {
  return hashString(JSON.stringify([s.metadata.labels?.[LABEL.serviceProxyName] ?? null, s.spec, s.status?.loadBalancer ?? null]));
}

function sliceFingerprint(s: EndpointSlice): string {
  return hashString(JSON.stringify([s.metadata.labels?.[LABEL.serviceName] ?? null, s.addressType, s.endpoints, s.ports]));
}

/** Services, EndpointSlices and the Node, with change tracking. Not thread-safe; the agent is single-threaded. */
export class ClusterState {
  readonly services = new Map<string, Service>();
  readonly slices = new Map<string, EndpointSlice>();
  /** service ns/name -> slice ns/name set. */
  readonly slicesByService = new Map<string, Set<string>>();
  node: Node | null = null;
  readonly #nodeName: string;
  readonly #report: InvalidObjectReporter;
  /**
   * Fingerprints of stored Services and slices, by key, computed lazily: only when an update of a stored object
   * arrives (a first insert needs none; the stored objects are never modified, so computing one later is the same).
   */
  readonly #svcFp = new Map<string, string>();
  readonly #epsFp = new Map<string, string>();
  #pending: Changes = { services: new Set(), node: false, triggerTimes: [] };
  /** Counters of changes seen (for kubeproxy_sync_proxy_rules_{service,endpoint}_changes_total). */
  serviceChanges = 0;
  endpointChanges = 0;

  constructor(nodeName: string, report: InvalidObjectReporter) {
    this.#nodeName = nodeName;
    this.#report = report;
  }

  /** The node name this agent programs for (endpoints on it are local). */
  get nodeName(): string { return this.#nodeName; }

  /** True when anything is pending. */
  get hasPending(): boolean { return this.#pending.services.size > 0 || this.#pending.node; }

  /** Applies one added or modified object of any kind (validated here). */
  upsert(kind: ObjectKind, raw: unknown): void {
    if (kind === 'Service') this.#upsertService(raw);
    else if (kind === 'EndpointSlice') this.#upsertSlice(raw);
    else this.#setNode(raw);
  }

  /** Applies a deletion. `raw` needs only metadata.namespace and metadata.name. */
  remove(kind: ObjectKind, raw: unknown): void {
    const meta = (raw as { metadata?: { name?: string; namespace?: string } })?.metadata;
    if (!meta?.name) return;
    const key = nsName({ name: meta.name, namespace: meta.namespace });
    if (kind === 'Service') {
      if (this.services.delete(key)) { this.#svcFp.delete(key); this.#markService(key); this.serviceChanges++; }
    } else if (kind === 'EndpointSlice') {
      const old = this.slices.get(key);
      if (old) { this.slices.delete(key); this.#epsFp.delete(key); this.#unlinkSlice(key, old); this.endpointChanges++; }
    } else if (this.node && this.node.metadata.name === meta.name) {
      this.node = null;
      this.#pending.node = true;
    }
  }

  /** Replaces every object of `kind` with `objects` (a (re)list, or a reload of the file). */
  replace(kind: ObjectKind, objects: readonly unknown[]): void {
    const seen = new Set<string>();
    for (const o of objects) {
      const meta = (o as { metadata?: { name?: string; namespace?: string } })?.metadata;
      if (meta?.name) seen.add(kind === 'Node' ? meta.name : nsName({ name: meta.name, namespace: meta.namespace }));
      this.upsert(kind, o);
    }
    if (kind === 'Service') for (const k of [...this.services.keys()]) if (!seen.has(k)) this.remove('Service', { metadata: splitKey(k) });
    if (kind === 'EndpointSlice') for (const k of [...this.slices.keys()]) if (!seen.has(k)) this.remove('EndpointSlice', { metadata: splitKey(k) });
    if (kind === 'Node' && this.node && !seen.has(this.node.metadata.name)) this.remove('Node', this.node);
  }

  /** Takes the pending changes; the next call returns only what happened after this one. */
  checkout(): Changes {
    const c = this.#pending;
    this.#pending = { services: new Set(), node: false, triggerTimes: [] };
    return c;
  }

  /** Marks every Service as changed (after a failed sync the diff is lost, as upstream). */
  markAllChanged(): void {
    for (const k of this.services.keys()) this.#pending.services.add(k);
    this.#pending.node = true;
  }

  #upsertService(raw: unknown): void {
    // The hand-written fast path gives zod's exact result for common valid objects; anything else goes to zod.
    const fast = fastService(raw);
    const r = fast ? { success: true as const, data: fast } : ServiceSchema.safeParse(raw);
    const meta = (raw as { metadata?: { name?: string; namespace?: string } })?.metadata;
    const label = `Service ${meta?.namespace ?? 'default'}/${meta?.name ?? '?'}`;
    if (!r.success) {
      this.#report(label, describeIssues(r.error, raw));
      if (meta?.name) this.remove('Service', raw); // an object that turned invalid is no longer programmed
      return;
    }
    const s = r.data;
    const key = nsName(s.metadata);
    const ignored = s.metadata.labels?.[LABEL.serviceProxyName] !== undefined || s.spec.type === 'ExternalName'
      || !s.spec.clusterIP || s.spec.clusterIP === 'None';
    if (ignored) {
      if (this.services.has(key)) this.remove('Service', s);
      return;
    }
    const prev = this.services.get(key);
    if (prev) {
      const fp = serviceFingerprint(s);
      const prevFp = this.#svcFp.get(key) ?? serviceFingerprint(prev);
      this.#svcFp.set(key, fp);
      if (prevFp === fp) return; // no-op update
    }
    this.services.set(key, s);
    this.#markService(key);
    this.serviceChanges++;
  }

  #upsertSlice(raw: unknown): void {
    const fast = fastEndpointSlice(raw);
    const r = fast ? { success: true as const, data: fast } : EndpointSliceSchema.safeParse(raw);
    const meta = (raw as { metadata?: { name?: string; namespace?: string } })?.metadata;
    const label = `EndpointSlice ${meta?.namespace ?? 'default'}/${meta?.name ?? '?'}`;
    if (!r.success) {
      this.#report(label, describeIssues(r.error, raw));
      if (meta?.name) this.remove('EndpointSlice', raw);
      return;
    }
    const s = r.data;
    const key = nsName(s.metadata);
    const svc = s.metadata.labels?.[LABEL.serviceName];
    if (s.metadata.labels?.[LABEL.headless] !== undefined || !svc) {
      if (!svc) this.#report(label, `metadata.labels: missing ${LABEL.serviceName}`);
      if (this.slices.has(key)) this.remove('EndpointSlice', s);
      return;
    }
    const old = this.slices.get(key);
    if (old) {
      const fp = sliceFingerprint(s);
      const prevFp = this.#epsFp.get(key) ?? sliceFingerprint(old);
      this.#epsFp.set(key, fp);
      if (prevFp === fp) return; // no-op update
    }
    if (old) this.#unlinkSlice(key, old);
    this.slices.set(key, s);
    const svcKey = `${s.metadata.namespace ?? 'default'}/${svc}`;
    let set = this.slicesByService.get(svcKey);
    if (!set) this.slicesByService.set(svcKey, (set = new Set()));
    set.add(key);
    this.#markService(svcKey);
    this.endpointChanges++;
    const trigger = s.metadata.annotations?.['endpoints.kubernetes.io/last-change-trigger-time'];
    const t = trigger ? Date.parse(trigger) : NaN;
    if (Number.isFinite(t)) this.#pending.triggerTimes.push(t);
  }

  #unlinkSlice(key: string, old: EndpointSlice): void {
    const svcKey = `${old.metadata.namespace ?? 'default'}/${old.metadata.labels?.[LABEL.serviceName]}`;
    const set = this.slicesByService.get(svcKey);
    set?.delete(key);
    if (set && set.size === 0) this.slicesByService.delete(svcKey);
    this.#markService(svcKey);
  }

  #setNode(raw: unknown): void {
    const r = NodeSchema.safeParse(raw);
    if (!r.success) {
      this.#report(`Node ${(raw as { metadata?: { name?: string } })?.metadata?.name ?? '?'}`, describeIssues(r.error, raw));
      return;
    }
    if (r.data.metadata.name !== this.#nodeName) return; // another node: not ours
    const before = this.node ? JSON.stringify([this.node.metadata.labels?.[LABEL.zone], this.node.spec?.podCIDRs, this.node.status?.addresses]) : null;
    const after = JSON.stringify([r.data.metadata.labels?.[LABEL.zone], r.data.spec?.podCIDRs, r.data.status?.addresses]);
    this.node = r.data;
    if (before !== after) this.#pending.node = true;
  }

  #markService(key: string): void {
    this.#pending.services.add(key);
  }
}

function splitKey(k: string): { namespace: string; name: string } {
  const i = k.indexOf('/');
  return { namespace: k.slice(0, i), name: k.slice(i + 1) };
}
