/**
 * A fake Kubernetes API server for tests. It speaks the real HTTP protocol of list and watch for Services (core/v1),
 * EndpointSlices (discovery.k8s.io/v1) and Nodes (core/v1), and accepts Events:
 * - JSON lists with `metadata.resourceVersion`; items without kind/apiVersion, as the real API returns them;
 * - chunked watch streams of ADDED, MODIFIED, DELETED, BOOKMARK and ERROR events, one JSON object per line;
 *   an object that stops (starts) matching the selectors is sent as DELETED (ADDED), like the real watch cache;
 * - 410 Gone (an ERROR event with a Status of reason Expired, code 410) for a watch from a compacted version;
 * - label selectors (`k`, `!k`, `k=v`, `k==v`, `k!=v`, comma-joined) and field selectors (`metadata.name`,
 *   `metadata.namespace`, `spec.clusterIP`, with `=`, `==` and `!=`);
 * - bearer-token auth (401 with a Status otherwise);
 * - hooks that stall watches (no events delivered until resumed), drop every open connection, or hold list
 *   requests of one resource until released (to test that the client waits for its first lists).
 *
 * It listens on loopback (or an address the test chooses) and is meant only for tests.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A Kubernetes object as JSON, with at least metadata.name. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string>; [k: string]: unknown };
  [k: string]: unknown;
}

/** The resources the fake serves, by URL plural. */
export const RESOURCES = {
  services: { group: '', version: 'v1', kind: 'Service', namespaced: true },
  endpointslices: { group: 'discovery.k8s.io', version: 'v1', kind: 'EndpointSlice', namespaced: true },
  nodes: { group: '', version: 'v1', kind: 'Node', namespaced: false },
} as const;
export type Resource = keyof typeof RESOURCES;

type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';
interface StoredEvent { rv: number; type: EventType; resource: Resource; object: KubeObject; previous: KubeObject | null }
interface Watcher {
  resource: Resource; namespace: string | null; labelSel: Selector; fieldSel: Selector;
  res: ServerResponse; fromRv: number; bookmarks: boolean; timer: NodeJS.Timeout | null;
}
type Selector = (obj: KubeObject) => boolean;

/** Options: `token` requires `Authorization: Bearer <token>`; `bookmarkIntervalMs` (default 1000) for BOOKMARKs. */
export interface FakeApiServerOptions { token?: string; bookmarkIntervalMs?: number }

export class FakeApiServer {
  readonly #server: Server;
  readonly #token: string | undefined;
  readonly #bookmarkIntervalMs: number;
  readonly #objects = new Map<string, KubeObject>(); // key: resource/ns/name
  readonly #events: StoredEvent[] = [];
  readonly #watchers = new Set<Watcher>();
  #rv = 100;
  #compactedRv = 0;
  #stalled = false;
  readonly #heldLists = new Map<Resource, Array<() => void>>();
  /** Every request line seen, e.g. `GET /api/v1/services?watch=true…`, for assertions. */
  readonly requests: string[] = [];
  /** Events posted by the client (birth cry, warnings). */
  readonly postedEvents: KubeObject[] = [];

  constructor(opts: FakeApiServerOptions = {}) {
    this.#token = opts.token;
    this.#bookmarkIntervalMs = opts.bookmarkIntervalMs ?? 1000;
    this.#server = createServer((req, res) => this.#handle(req, res));
  }

  /** Listens on `host` (default 127.0.0.1) and an ephemeral port; resolves to the base URL. */
  async start(host = '127.0.0.1'): Promise<string> {
    await new Promise<void>((resolve) => this.#server.listen(0, host, resolve));
    const a = this.#server.address() as AddressInfo;
    return `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
  }

  /** Closes every watch and the listener. */
  async stop(): Promise<void> {
    this.dropConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  /** The current resourceVersion (a decimal string, as the API returns it). */
  get resourceVersion(): string { return String(this.#rv); }

  /** Creates or replaces an object; returns the stored copy with its new resourceVersion. */
  upsert(resource: Resource, obj: KubeObject): KubeObject {
    const key = this.#key(resource, obj.metadata.namespace, obj.metadata.name);
    const previous = this.#objects.get(key) ?? null;
    const rv = ++this.#rv;
    const info = RESOURCES[resource];
    const stored: KubeObject = structuredClone({
      ...obj,
      apiVersion: info.group ? `${info.group}/${info.version}` : info.version,
      kind: info.kind,
      metadata: { ...obj.metadata, resourceVersion: String(rv) },
    });
    this.#objects.set(key, stored);
    this.#record({ rv, type: previous ? 'MODIFIED' : 'ADDED', resource, object: stored, previous });
    return stored;
  }

  /** Deletes an object; returns false when it did not exist. */
  remove(resource: Resource, namespace: string | undefined, name: string): boolean {
    const key = this.#key(resource, namespace, name);
    const previous = this.#objects.get(key);
    if (!previous) return false;
    this.#objects.delete(key);
    const rv = ++this.#rv;
    const object = structuredClone({ ...previous, metadata: { ...previous.metadata, resourceVersion: String(rv) } });
    this.#record({ rv, type: 'DELETED', resource, object, previous });
    return true;
  }

  /** Forgets the event history up to now: a watch from an older resourceVersion gets 410 Gone. */
  compact(): void {
    this.#compactedRv = this.#rv;
    this.#events.length = 0;
  }

  /** Stops delivering watch events and bookmarks (connections stay open) until `resume()`. */
  stall(): void { this.#stalled = true; }

  /** Delivers what was held back by `stall()`. */
  resume(): void {
    this.#stalled = false;
    for (const w of this.#watchers) this.#flush(w);
  }

  /** Holds every list request of `resource` (not watches) until {@link releaseLists}. */
  holdLists(resource: Resource): void {
    if (!this.#heldLists.has(resource)) this.#heldLists.set(resource, []);
  }

  /** Answers the held list requests of `resource` (with the data current at release) and stops holding. */
  releaseLists(resource: Resource): void {
    const held = this.#heldLists.get(resource) ?? [];
    this.#heldLists.delete(resource);
    for (const answer of held) answer();
  }

  /** Ends every open watch stream abruptly (the client sees the connection close). */
  dropConnections(): void {
    for (const w of [...this.#watchers]) this.#closeWatch(w, true);
  }

  /** Number of open watch streams. */
  get openWatches(): number { return this.#watchers.size; }

  #key(resource: Resource, ns: string | undefined, name: string): string {
    return `${resource}/${RESOURCES[resource].namespaced ? ns ?? 'default' : ''}/${name}`;
  }

  #record(ev: StoredEvent): void {
    this.#events.push(ev);
    if (this.#stalled) return;
    for (const w of this.#watchers) this.#flush(w);
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    this.requests.push(`${req.method} ${req.url}`);
    if (this.#token !== undefined && req.headers.authorization !== `Bearer ${this.#token}`) {
      this.#status(res, 401, 'Unauthorized', 'Unauthorized');
      return;
    }
    const url = new URL(req.url ?? '/', 'http://fake');
    const route = this.#route(url.pathname);
    if (req.method === 'POST' && route?.events) {
      let body = '';
      req.on('data', (c: Buffer) => { body += c.toString(); });
      req.on('end', () => {
        try {
          const ev = JSON.parse(body) as KubeObject;
          this.postedEvents.push(ev);
          res.writeHead(201, { 'Content-Type': 'application/json' }).end(JSON.stringify(ev));
        } catch {
          this.#status(res, 400, 'BadRequest', 'invalid JSON body');
        }
      });
      return;
    }
    if (req.method !== 'GET' || !route || route.events) {
      this.#status(res, 404, 'NotFound', `the server could not find the requested resource (${req.method} ${url.pathname})`);
      return;
    }
    let labelSel: Selector;
    let fieldSel: Selector;
    try {
      labelSel = parseLabelSelector(url.searchParams.get('labelSelector') ?? '');
      fieldSel = parseFieldSelector(url.searchParams.get('fieldSelector') ?? '');
    } catch (err) {
      this.#status(res, 400, 'BadRequest', (err as Error).message);
      return;
    }
    const matches = (o: KubeObject) =>
      (route.namespace === null || o.metadata.namespace === route.namespace) && labelSel(o) && fieldSel(o);
    const watch = url.searchParams.get('watch');
    if (watch === 'true' || watch === '1') {
      const fromRv = Number(url.searchParams.get('resourceVersion') ?? this.#rv);
      const w: Watcher = {
        resource: route.resource, namespace: route.namespace, labelSel: matches, fieldSel: () => true,
        res, fromRv: Number.isFinite(fromRv) ? fromRv : this.#rv,
        bookmarks: url.searchParams.get('allowWatchBookmarks') === 'true', timer: null,
      };
      res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
      res.flushHeaders();
      if (w.fromRv > 0 && w.fromRv < this.#compactedRv) {
        const status = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `too old resource version: ${w.fromRv} (${this.#compactedRv})`, reason: 'Expired', code: 410 };
        res.end(JSON.stringify({ type: 'ERROR', object: status }) + '\n');
        return;
      }
      this.#watchers.add(w);
      const timeout = Number(url.searchParams.get('timeoutSeconds') ?? 0);
      const started = Date.now();
      w.timer = setInterval(() => {
        if (timeout > 0 && Date.now() - started >= timeout * 1000) { this.#closeWatch(w, false); return; }
        if (w.bookmarks && !this.#stalled) {
          const info = RESOURCES[w.resource];
          res.write(JSON.stringify({ type: 'BOOKMARK', object: { kind: info.kind, apiVersion: info.group ? `${info.group}/${info.version}` : info.version, metadata: { resourceVersion: String(this.#rv) } } }) + '\n');
        }
      }, Math.min(this.#bookmarkIntervalMs, timeout > 0 ? timeout * 1000 : Infinity));
      req.on('close', () => this.#closeWatch(w, false));
      if (!this.#stalled) this.#flush(w);
      return;
    }
    const held = this.#heldLists.get(route.resource);
    if (held) {
      held.push(() => this.#list(route.resource, matches, res));
      return;
    }
    this.#list(route.resource, matches, res);
  }

  #list(resource: Resource, matches: (o: KubeObject) => boolean, res: ServerResponse): void {
    const route = { resource };
    const items = [...this.#objects.entries()]
      .filter(([k]) => k.startsWith(`${route.resource}/`))
      .map(([, o]) => o)
      .filter(matches)
      .map(({ apiVersion: _a, kind: _k, ...rest }) => rest);
    const info = RESOURCES[route.resource];
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({
      kind: `${info.kind}List`, apiVersion: info.group ? `${info.group}/${info.version}` : info.version,
      metadata: { resourceVersion: String(this.#rv) }, items,
    }));
  }

  #flush(w: Watcher): void {
    for (const ev of this.#events) {
      if (ev.rv <= w.fromRv || ev.resource !== w.resource) continue;
      w.fromRv = ev.rv;
      const now = ev.type !== 'DELETED' && w.labelSel(ev.object);
      const before = ev.previous !== null && w.labelSel(ev.previous);
      let type: EventType | null = null;
      if (ev.type === 'DELETED') type = before ? 'DELETED' : null;
      else if (now && before) type = 'MODIFIED';
      else if (now) type = 'ADDED';
      else if (before) type = 'DELETED';
      if (type) w.res.write(JSON.stringify({ type, object: ev.object }) + '\n');
    }
  }

  #closeWatch(w: Watcher, abrupt: boolean): void {
    if (!this.#watchers.delete(w)) return;
    if (w.timer) clearInterval(w.timer);
    if (abrupt) w.res.destroy();
    else w.res.end();
  }

  #route(path: string): { resource: Resource; namespace: string | null; events?: boolean } | null {
    let m = /^\/api\/v1\/(?:namespaces\/([^/]+)\/)?events$/.exec(path) ?? /^\/apis\/events\.k8s\.io\/v1\/(?:namespaces\/([^/]+)\/)?events$/.exec(path);
    if (m) return { resource: 'services', namespace: m[1] ?? null, events: true };
    m = /^\/api\/v1\/(?:namespaces\/([^/]+)\/)?(services|nodes)$/.exec(path);
    if (m) return { resource: m[2] as Resource, namespace: m[1] ?? null };
    m = /^\/apis\/discovery\.k8s\.io\/v1\/(?:namespaces\/([^/]+)\/)?endpointslices$/.exec(path);
    if (m) return { resource: 'endpointslices', namespace: m[1] ?? null };
    return null;
  }

  #status(res: ServerResponse, code: number, reason: string, message: string): void {
    res.writeHead(code, { 'Content-Type': 'application/json' }).end(JSON.stringify({
      kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code,
    }));
  }
}

/** Parses a label selector (`a`, `!a`, `a=b`, `a==b`, `a!=b`, comma-joined). Throws on other syntax. */
export function parseLabelSelector(sel: string): Selector {
  const reqs = sel.split(',').map((s) => s.trim()).filter(Boolean).map((r): Selector => {
    let m = /^!([\w./-]+)$/.exec(r);
    if (m) { const k = m[1]; return (o) => !(k in (o.metadata.labels ?? {})); }
    m = /^([\w./-]+)\s*(!=|==|=)\s*([\w./-]*)$/.exec(r);
    if (m) {
      const [, k, op, v] = m;
      return (o) => { const val = (o.metadata.labels ?? {})[k]; return op === '!=' ? val !== v : val === v; };
    }
    m = /^([\w./-]+)$/.exec(r);
    if (m) { const k = m[1]; return (o) => k in (o.metadata.labels ?? {}); }
    throw new Error(`unable to parse requirement: ${JSON.stringify(r)}`);
  });
  return (o) => reqs.every((f) => f(o));
}

/** Parses a field selector over metadata.name, metadata.namespace and spec.clusterIP. Throws on other fields. */
export function parseFieldSelector(sel: string): Selector {
  const reqs = sel.split(',').map((s) => s.trim()).filter(Boolean).map((r): Selector => {
    const m = /^([\w.]+)\s*(!=|==|=)\s*(.*)$/.exec(r);
    if (!m) throw new Error(`invalid field selector: ${JSON.stringify(r)}`);
    const [, field, op, value] = m;
    const get = ({
      'metadata.name': (o: KubeObject) => o.metadata.name,
      'metadata.namespace': (o: KubeObject) => o.metadata.namespace ?? '',
      'spec.clusterIP': (o: KubeObject) => String((o.spec as { clusterIP?: string } | undefined)?.clusterIP ?? ''),
    } as Record<string, (o: KubeObject) => string>)[field];
    if (!get) throw new Error(`field label not supported: ${field}`);
    return (o) => (op === '!=' ? get(o) !== value : get(o) === value);
  });
  return (o) => reqs.every((f) => f(o));
}
