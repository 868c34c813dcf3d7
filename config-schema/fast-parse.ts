/**
 * Hand-written fast paths for the two schemas the agent parses by the tens of thousands (ServiceSchema and
 * EndpointSliceSchema of config-schema/kubernetes.ts): about 10x cheaper than zod on the common shapes.
 *
 * Contract: `fastService(raw)` / `fastEndpointSlice(raw)` return either exactly what `Schema.parse(raw)` returns
 * (a fresh object at every object/array level, the schema's keys in schema order with defaults and transforms
 * applied, then the unknown keys in input order with their values passed through), or `undefined` when the input is
 * unusual (invalid, an explicit `undefined`, a non-plain object): the caller then runs zod, which gives the result
 * and the error message. So a fast path can only be faster, never different; config-schema/fast-parse.test.ts
 * checks it against zod on fixtures and on mutated variants. Keep both in step when the schema changes.
 */
import type { EndpointSlice, Service } from './kubernetes.ts';

/** Returned by a parser when the input is not of the common, valid shape. */
const BAIL: unique symbol = Symbol('bail');
type Out<T = unknown> = T | typeof BAIL;
type P = (v: unknown) => Out;
/** How a key behaves when absent (`skip`: left out; `fill`: the parser runs on `undefined`). */
interface Field { p: P; absent: 'skip' | 'fill' }

const isPlain = (v: unknown): v is Record<string, unknown> => {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};

const str = (min = 0): P => (v) => (typeof v === 'string' && v.length >= min ? v : BAIL);
const int = (min: number, max: number): P => (v) => (typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max ? v : BAIL);
const bool: P = (v) => (typeof v === 'boolean' ? v : BAIL);
const oneOf = (values: readonly string[]): P => (v) => (typeof v === 'string' && values.includes(v) ? v : BAIL);
const nullable = (p: P): P => (v) => (v === null ? null : p(v));
const union = (a: P, b: P): P => (v) => { const r = a(v); return r === BAIL ? b(v) : r; };
const arr = (p: P, min = 0): P => (v) => {
  if (!Array.isArray(v) || v.length < min) return BAIL;
  const out = new Array<unknown>(v.length);
  for (let i = 0; i < v.length; i++) {
    if (!(i in v)) return BAIL; // a hole
    const r = p(v[i]);
    if (r === BAIL) return BAIL;
    out[i] = r;
  }
  return out;
};
const record: P = (v) => {
  if (!isPlain(v)) return BAIL;
  const out: Record<string, string> = {};
  for (const k of Object.keys(v)) {
    const x = v[k];
    if (typeof x !== 'string') return BAIL;
    out[k] = x;
  }
  return out;
};

/** Optional key: absent stays absent. */
const opt = (p: P): Field => ({ p, absent: 'skip' });
/** `.nullish()` key. */
const nullish = (p: P): Field => ({ p: nullable(p), absent: 'skip' });
/** `.default(d)` key: absent gets a fresh `d()`. */
const withDefault = (p: P, d: () => unknown): Field => ({ p: (v) => (v === undefined ? d() : p(v)), absent: 'fill' });
/** `.nullish().transform((v) => v ?? [])`: absent or null gives []. */
const nullishList = (p: P): Field => ({ p: (v) => (v === undefined || v === null ? [] : p(v)), absent: 'fill' });
const req = (p: P): Field => ({ p, absent: 'fill' });

/** `z.looseObject(shape)`: schema keys in schema order, then unknown keys in input order. */
const loose = (shape: Record<string, Field>): P => {
  const keys = Object.keys(shape);
  const known = new Set(keys);
  return (v) => {
    if (!isPlain(v)) return BAIL;
    const out: Record<string, unknown> = {};
    for (const k of keys) {
      const f = shape[k];
      const x = v[k];
      if (x === undefined) {
        if (Object.hasOwn(v, k)) return BAIL; // an explicit undefined: zod keeps it; rare, leave it to zod
        if (f.absent === 'skip') continue;
      }
      const r = f.p(x);
      if (r === BAIL) return BAIL;
      out[k] = r;
    }
    for (const k of Object.keys(v)) if (!known.has(k)) out[k] = v[k];
    return out;
  };
};

const protocol = oneOf(['TCP', 'UDP', 'SCTP']);
const meta = loose({
  name: req(str(1)),
  namespace: opt(str()),
  labels: opt(record),
  annotations: opt(record),
  resourceVersion: opt(str()),
  deletionTimestamp: nullish(str()),
});

const service = loose({
  apiVersion: opt(str()),
  kind: opt(oneOf(['Service'])),
  metadata: req(meta),
  spec: req(loose({
    type: withDefault(oneOf(['ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName']), () => 'ClusterIP'),
    clusterIP: opt(str()),
    clusterIPs: opt(arr(str())),
    ipFamilies: opt(arr(oneOf(['IPv4', 'IPv6']))),
    ports: withDefault(arr(loose({
      name: opt(str()),
      protocol: withDefault(protocol, () => 'TCP'),
      port: req(int(1, 65535)),
      targetPort: opt(union(int(1, 65535), str(1))),
      nodePort: opt(int(0, 65535)),
    })), () => []),
    externalIPs: opt(arr(str())),
    loadBalancerSourceRanges: opt(arr(str())),
    externalTrafficPolicy: opt(oneOf(['Cluster', 'Local'])),
    internalTrafficPolicy: opt(oneOf(['Cluster', 'Local'])),
    healthCheckNodePort: opt(int(0, 65535)),
    sessionAffinity: opt(oneOf(['None', 'ClientIP'])),
    sessionAffinityConfig: opt(loose({
      clientIP: opt(loose({ timeoutSeconds: opt(int(1, 86400)) })),
    })),
    trafficDistribution: opt(str()),
  })),
  status: opt(loose({
    loadBalancer: opt(loose({
      ingress: opt(arr(loose({ ip: opt(str()), hostname: opt(str()), ipMode: opt(oneOf(['VIP', 'Proxy'])) }))),
    })),
  })),
});

const hints = loose({
  forZones: nullish(arr(loose({ name: req(str()) }))),
  forNodes: nullish(arr(loose({ name: req(str()) }))),
});
const addressList = arr(str(), 1);

/** `endpoints[].conditions`, specialised (it is parsed once per endpoint): ready, serving, terminating, unknowns. */
function conditions(v: unknown): Out {
  if (!isPlain(v)) return BAIL;
  const out: Record<string, unknown> = {};
  let known = 0;
  for (const k of ['ready', 'serving', 'terminating'] as const) {
    const x = v[k];
    if (x === undefined) { if (Object.hasOwn(v, k)) return BAIL; continue; }
    if (x !== null && typeof x !== 'boolean') return BAIL;
    out[k] = x;
    known++;
  }
  const keys = Object.keys(v);
  if (keys.length !== known) for (const k of keys) if (k !== 'ready' && k !== 'serving' && k !== 'terminating') out[k] = v[k];
  return out;
}

/**
 * One `endpoints[]` entry, specialised (the most frequent object: fixed property reads instead of the generic
 * {@link loose}): addresses, conditions, nodeName, zone, hints, then unknown keys in input order.
 */
function endpoint(v: unknown): Out {
  if (!isPlain(v)) return BAIL;
  const out: Record<string, unknown> = {};
  let known = 1;
  const addresses = addressList(v.addresses);
  if (addresses === BAIL) return BAIL;
  out.addresses = addresses;
  const c = v.conditions;
  if (c !== undefined) { const r = conditions(c); if (r === BAIL) return BAIL; out.conditions = r; known++; } else if (Object.hasOwn(v, 'conditions')) return BAIL;
  for (const k of ['nodeName', 'zone'] as const) {
    const x = v[k];
    if (x === undefined) { if (Object.hasOwn(v, k)) return BAIL; continue; }
    if (x !== null && typeof x !== 'string') return BAIL;
    out[k] = x;
    known++;
  }
  const h = v.hints;
  if (h !== undefined) { const r = h === null ? null : hints(h); if (r === BAIL) return BAIL; out.hints = r; known++; } else if (Object.hasOwn(v, 'hints')) return BAIL;
  const keys = Object.keys(v);
  if (keys.length !== known) {
    for (const k of keys) if (k !== 'addresses' && k !== 'conditions' && k !== 'nodeName' && k !== 'zone' && k !== 'hints') out[k] = v[k];
  }
  return out;
}

const endpointSlice = loose({
  apiVersion: opt(str()),
  kind: opt(oneOf(['EndpointSlice'])),
  metadata: req(meta),
  addressType: req(oneOf(['IPv4', 'IPv6', 'FQDN'])),
  endpoints: nullishList(arr(endpoint)),
  ports: nullishList(arr(loose({
    name: nullish(str()),
    port: nullish(int(0, 65535)),
    protocol: nullish(protocol),
  }))),
});

/** ServiceSchema.parse(raw) for a valid common-shaped Service; undefined: ask zod. */
export function fastService(raw: unknown): Service | undefined {
  const r = service(raw);
  return r === BAIL ? undefined : (r as Service);
}

/** EndpointSliceSchema.parse(raw) for a valid common-shaped EndpointSlice; undefined: ask zod. */
export function fastEndpointSlice(raw: unknown): EndpointSlice | undefined {
  const r = endpointSlice(raw);
  return r === BAIL ? undefined : (r as EndpointSlice);
}
