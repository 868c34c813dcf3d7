/**
 * The fast parsers (fast-parse.ts) against zod: on every Service and EndpointSlice of the real kubectl fixture and
 * the every-feature fixture, and on thousands of mutated variants (keys removed, nulled, retyped, out of range,
 * explicit undefined, unknown keys added), a fast result must equal zod's parse exactly (values and key order), and
 * the fast path must give up whenever zod rejects the object.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { EndpointSliceSchema, ServiceSchema } from './kubernetes.ts';
import { fastEndpointSlice, fastService } from './fast-parse.ts';

const load = (name: string): Array<Record<string, unknown>> =>
  (JSON.parse(readFileSync(new URL(`../e2e/testdata/${name}`, import.meta.url), 'utf8')) as { items: Array<Record<string, unknown>> }).items;
const items = [...load('cluster-small.kubectl.json'), ...load('every-feature.json')];
const services = items.filter((o) => o.kind === 'Service');
const slices = items.filter((o) => o.kind === 'EndpointSlice');

/** JSON with `undefined` made visible, so key order and explicit undefineds are compared too. */
const show = (x: unknown) => JSON.stringify(x, (_k, v) => (v === undefined ? '<undefined>' : v));

/** Deterministic PRNG (mulberry32). */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Every path to a value inside `o`. */
function paths(o: unknown, prefix: Array<string | number> = []): Array<Array<string | number>> {
  if (typeof o !== 'object' || o === null) return [];
  const out: Array<Array<string | number>> = [];
  for (const k of Object.keys(o)) {
    const p = [...prefix, Array.isArray(o) ? Number(k) : k];
    out.push(p, ...paths((o as Record<string, unknown>)[k], p));
  }
  return out;
}

const REPLACEMENTS: unknown[] = [null, undefined, '', 'x', 'TCP', 'Local', 'ClientIP', 0, -1, 1, 70000, 1.5, 80, true, false, [], {}, ['10.0.0.1'], { name: 'n' }, [{ name: 'z' }]];

/** A copy of `o` with one random edit: a value replaced, a key deleted, or an unknown key added. */
function mutate(o: unknown, r: () => number): unknown {
  const c = structuredClone(o) as Record<string, unknown>;
  const ps = paths(c);
  if (ps.length === 0) return c;
  const p = ps[Math.floor(r() * ps.length)];
  let parent: Record<string | number, unknown> = c;
  for (const k of p.slice(0, -1)) parent = parent[k] as Record<string | number, unknown>;
  const last = p[p.length - 1];
  const what = r();
  if (what < 0.6) parent[last] = REPLACEMENTS[Math.floor(r() * REPLACEMENTS.length)];
  else if (what < 0.85 && !Array.isArray(parent)) delete parent[last];
  else if (!Array.isArray(parent)) parent[`zz${Math.floor(r() * 3)}`] = { any: 'thing' };
  return c;
}

function check(kind: string, fast: (x: unknown) => unknown, schema: { safeParse: (x: unknown) => { success: boolean; data?: unknown } }, x: unknown): 'fast' | 'zod' {
  const f = fast(x);
  const z = schema.safeParse(x);
  if (f === undefined) return 'zod';
  assert.ok(z.success, `${kind}: the fast path accepted what zod rejects: ${show(x)}`);
  assert.equal(show(f), show(z.data), `${kind}: fast and zod differ for ${show(x)}`);
  assert.deepStrictEqual(f, z.data);
  return 'fast';
}

test('fast parsers equal zod on the fixtures (and take the fast path there)', () => {
  assert.ok(services.length > 3 && slices.length > 3);
  for (const s of services) assert.equal(check('Service', fastService, ServiceSchema, s), 'fast', show(s));
  for (const s of slices) assert.equal(check('EndpointSlice', fastEndpointSlice, EndpointSliceSchema, s), 'fast', show(s));
});

test('fast parsers equal zod or give up, on 6000 mutated objects', () => {
  const r = rng(42);
  const counts = { fast: 0, zod: 0 };
  for (let i = 0; i < 3000; i++) {
    let s: unknown = services[i % services.length];
    let e: unknown = slices[i % slices.length];
    for (let m = 0, n = 1 + Math.floor(r() * 3); m < n; m++) { s = mutate(s, r); e = mutate(e, r); }
    counts[check('Service', fastService, ServiceSchema, s)]++;
    counts[check('EndpointSlice', fastEndpointSlice, EndpointSliceSchema, e)]++;
  }
  // Both paths were exercised: the mutations produce valid variants as well as invalid ones.
  assert.ok(counts.fast > 1000 && counts.zod > 500, JSON.stringify(counts));
});

test('fast parsers return fresh objects (the input is not aliased) and apply defaults', () => {
  const raw = { metadata: { name: 'a', labels: { k: 'v' } }, spec: { clusterIP: '10.0.0.1', ports: [{ port: 80 }] } };
  const s = fastService(raw)!;
  assert.notEqual(s.metadata, raw.metadata);
  assert.notEqual(s.metadata.labels, raw.metadata.labels);
  assert.notEqual(s.spec.ports, raw.spec.ports);
  assert.equal(s.spec.type, 'ClusterIP');
  assert.equal(s.spec.ports[0].protocol, 'TCP');
  const e = fastEndpointSlice({ metadata: { name: 'x' }, addressType: 'IPv4', endpoints: null })!;
  assert.deepEqual([e.endpoints, e.ports], [[], []]);
  assert.equal(fastEndpointSlice({ metadata: { name: 'x' }, addressType: 'IPv4', endpoints: [{ addresses: [] }] }), undefined);
});
