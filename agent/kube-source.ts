/**
 * The Kubernetes source: list and watch Services, EndpointSlices and the agent's own Node through the API with
 * `@kubernetes/client-node`, using kube-proxy's selectors (kubernetes `cmd/kube-proxy/app/server.go`,
 * `pkg/proxy/node.go`; reference kube-proxy-nftables.md §7):
 * - Services: label selector `!service.kubernetes.io/service-proxy-name`, field selector `spec.clusterIP!=None`;
 * - EndpointSlices (discovery.k8s.io/v1): label selector `!service.kubernetes.io/headless`;
 * - the Node: field selector `metadata.name=<node name>`.
 *
 * Each resource runs a reflector: a paginated list, then a watch from the list's resourceVersion with bookmarks.
 * A 410 Gone (an ERROR event with code 410, or an HTTP 410) relists. Any other watch error reconnects from the last
 * resourceVersion with exponential backoff (1 s doubling to 30 s, reset by a healthy watch). A watchdog relists when
 * a watch stays silent (no event and no bookmark) for `watchdogMs` (client-node issue #958). Objects are delivered as
 * plain JSON; validation is the sink's job.
 */
import { CoreV1Api, DiscoveryV1Api, KubeConfig, Watch } from '@kubernetes/client-node';

/** The kinds the source delivers. */
export type SourceKind = 'Service' | 'EndpointSlice' | 'Node';

/** Where the source delivers objects. All objects are plain JSON (dates as RFC 3339 strings). */
export interface KubeSourceSink {
  /** The complete current set of `kind` after a (re)list: objects absent from it are gone. */
  replace(kind: SourceKind, objects: unknown[]): void;
  /** One watch event. */
  event(kind: SourceKind, type: 'ADDED' | 'MODIFIED' | 'DELETED', object: unknown): void;
  /** The first list of `kind` has been delivered (startup gating: sync only after Services and EndpointSlices). */
  synced(kind: SourceKind): void;
}

/** Logging used by the source (a pino logger fits). */
export interface SourceLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

/** Options of the Kubernetes source. Times in ms. */
export interface KubeSourceOptions {
  kubeConfig: KubeConfig;
  nodeName: string;
  sink: KubeSourceSink;
  log: SourceLogger;
  /** Page size of lists (default 500). */
  pageSize?: number;
  /** A watch that delivers nothing (not even a bookmark) for this long is considered dead: relist (default 120 000). */
  watchdogMs?: number;
  /** Server-side watch timeout in s, randomised up to 2× like client-go's reflector (default 300). */
  watchTimeoutSeconds?: number;
  /** First and maximum reconnect backoff (defaults 1000 and 30 000). */
  backoffInitialMs?: number;
  backoffMaxMs?: number;
}

interface ListPage { items: unknown[]; resourceVersion: string; continueToken?: string }

/** A resource the source reflects: how to list one page, and where to watch. */
interface ResourceDef {
  kind: SourceKind;
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  list(opts: { labelSelector?: string; fieldSelector?: string; limit: number; continueToken?: string }): Promise<ListPage>;
}

/** Thrown inside a reflector when the server says the resourceVersion is too old (410 Gone). */
class GoneError extends Error {}

/**
 * Lists and watches the three resources until `stop()`. `start()` resolves once the reflectors run (not when
 * synced: the sink's `synced` tells that). Unauthorised or unreachable APIs on the FIRST list reject `start()` with
 * a clear message (bad credentials stop startup); later failures are retried with backoff.
 */
export class KubeSource {
  readonly #opts: Required<Omit<KubeSourceOptions, 'kubeConfig' | 'sink' | 'log' | 'nodeName'>> & KubeSourceOptions;
  readonly #resources: ResourceDef[];
  readonly #abort = new AbortController();
  readonly #watchers = new Set<AbortController>();

  constructor(opts: KubeSourceOptions) {
    this.#opts = { pageSize: 500, watchdogMs: 120_000, watchTimeoutSeconds: 300, backoffInitialMs: 1000, backoffMaxMs: 30_000, ...opts };
    const core = opts.kubeConfig.makeApiClient(CoreV1Api);
    const discovery = opts.kubeConfig.makeApiClient(DiscoveryV1Api);
    const page = (r: { items: unknown[]; metadata?: { resourceVersion?: string; _continue?: string } }): ListPage => ({
      items: r.items.map(toPlainJson),
      resourceVersion: r.metadata?.resourceVersion ?? '',
      continueToken: r.metadata?._continue || undefined,
    });
    this.#resources = [
      {
        kind: 'Service', path: '/api/v1/services',
        labelSelector: '!service.kubernetes.io/service-proxy-name', fieldSelector: 'spec.clusterIP!=None',
        list: async (o) => page(await core.listServiceForAllNamespaces({ labelSelector: o.labelSelector, fieldSelector: o.fieldSelector, limit: o.limit, _continue: o.continueToken })),
      },
      {
        kind: 'EndpointSlice', path: '/apis/discovery.k8s.io/v1/endpointslices',
        labelSelector: '!service.kubernetes.io/headless',
        list: async (o) => page(await discovery.listEndpointSliceForAllNamespaces({ labelSelector: o.labelSelector, limit: o.limit, _continue: o.continueToken })),
      },
      {
        kind: 'Node', path: '/api/v1/nodes', fieldSelector: `metadata.name=${opts.nodeName}`,
        list: async (o) => page(await core.listNode({ fieldSelector: o.fieldSelector, limit: o.limit, _continue: o.continueToken })),
      },
    ];
  }

  /**
   * Runs the first list of every resource, then keeps reflecting in the background.
   * @throws Error when a first list fails (unreachable API, bad credentials), naming the resource and the status.
   */
  async start(): Promise<void> {
    const first = await Promise.all(this.#resources.map(async (r) => {
      try {
        return await this.#listAll(r);
      } catch (err) {
        throw new Error(`cannot list ${r.kind}s from the Kubernetes API (${r.path}): ${describeError(err)}`, { cause: err });
      }
    }));
    this.#resources.forEach((r, i) => {
      this.#opts.sink.replace(r.kind, first[i].items);
      this.#opts.sink.synced(r.kind);
      void this.#reflect(r, first[i].resourceVersion);
    });
  }

  /** Stops every watch; no more sink calls after it returns. */
  stop(): void {
    this.#abort.abort();
    for (const w of this.#watchers) w.abort();
    this.#watchers.clear();
  }

  async #listAll(r: ResourceDef): Promise<{ items: unknown[]; resourceVersion: string }> {
    const items: unknown[] = [];
    let continueToken: string | undefined;
    let resourceVersion = '';
    do {
      const p = await r.list({ labelSelector: r.labelSelector, fieldSelector: r.fieldSelector, limit: this.#opts.pageSize, continueToken });
      items.push(...p.items);
      resourceVersion = p.resourceVersion;
      continueToken = p.continueToken;
    } while (continueToken);
    return { items, resourceVersion };
  }

  async #reflect(r: ResourceDef, initialRv: string): Promise<void> {
    const { log, sink } = this.#opts;
    let rv = initialRv;
    let backoff = this.#opts.backoffInitialMs;
    while (!this.#abort.signal.aborted) {
      try {
        const outcome = await this.#watchOnce(r, rv, (newRv) => { rv = newRv; backoff = this.#opts.backoffInitialMs; });
        if (outcome === 'silent') log.warn({ kind: r.kind, resourceVersion: rv }, 'watch went silent; relisting');
        if (outcome === 'silent' || outcome === 'gone') {
          if (outcome === 'gone') log.info({ kind: r.kind, resourceVersion: rv }, 'resourceVersion expired (410 Gone); relisting');
          const l = await this.#listAll(r);
          if (this.#abort.signal.aborted) return;
          sink.replace(r.kind, l.items);
          rv = l.resourceVersion;
        }
        // 'closed': the server ended the watch normally; watch again from rv at once.
      } catch (err) {
        if (this.#abort.signal.aborted) return;
        if (err instanceof GoneError) continue;
        log.warn({ kind: r.kind, err: describeError(err), retryInMs: backoff }, 'watch failed; reconnecting');
        await sleep(backoff * (0.8 + 0.4 * Math.random()), this.#abort.signal);
        backoff = Math.min(backoff * 2, this.#opts.backoffMaxMs);
      }
    }
  }

  /** One watch stream. Resolves 'closed' (server ended it), 'gone' (410) or 'silent' (watchdog); rejects on errors. */
  #watchOnce(r: ResourceDef, rv: string, progress: (rv: string) => void): Promise<'closed' | 'gone' | 'silent'> {
    const { sink, kubeConfig } = this.#opts;
    const watch = new Watch(kubeConfig);
    // client-node's inactivity timer is our watchdog (issue #958): it aborts a stream that delivers nothing.
    (watch as unknown as { requestTimeoutMs: number }).requestTimeoutMs = this.#opts.watchdogMs;
    const timeoutSeconds = Math.floor(this.#opts.watchTimeoutSeconds * (1 + Math.random()));
    return new Promise((resolve, reject) => {
      let gone = false;
      let controller: AbortController | null = null;
      const query = { resourceVersion: rv, allowWatchBookmarks: true, timeoutSeconds, labelSelector: r.labelSelector, fieldSelector: r.fieldSelector };
      watch.watch(r.path, query, (type, obj) => {
        if (this.#abort.signal.aborted) return;
        const o = toPlainJson(obj) as { code?: number; metadata?: { resourceVersion?: string } };
        if (type === 'ERROR') {
          if (o?.code === 410) { gone = true; controller?.abort(); }
          return;
        }
        const newRv = o?.metadata?.resourceVersion;
        if (newRv) progress(newRv);
        if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') sink.event(r.kind, type, o);
      }, (err) => {
        if (controller) this.#watchers.delete(controller);
        if (gone) return resolve('gone');
        if (!err) return resolve('closed');
        const e = err as { name?: string; statusCode?: number };
        if (e.name === 'TimeoutError') return resolve('silent');
        if (e.statusCode === 410) return resolve('gone');
        if (e.name === 'AbortError' && this.#abort.signal.aborted) return resolve('closed');
        reject(err);
      }).then((c) => {
        controller = c;
        if (this.#abort.signal.aborted) c.abort();
        else this.#watchers.add(c);
      }, reject);
    });
  }
}

/** Builds the KubeConfig: in-cluster when `kubeconfigPath` is empty, else the file. Throws naming the path. */
export function loadKubeConfig(kubeconfigPath: string): KubeConfig {
  const kc = new KubeConfig();
  try {
    if (kubeconfigPath) kc.loadFromFile(kubeconfigPath);
    else kc.loadFromCluster();
  } catch (err) {
    throw new Error(`cannot load the kubeconfig ${kubeconfigPath ? JSON.stringify(kubeconfigPath) : '(in-cluster)'}: ${describeError(err)}`, { cause: err });
  }
  if (!kc.getCurrentCluster()) throw new Error(`the kubeconfig ${JSON.stringify(kubeconfigPath)} has no current cluster (clientConnection.kubeconfig)`);
  return kc;
}

/**
 * Posts an event on the Node, as kube-proxy's event recorder does (source component `kube-proxy`, in namespace
 * `default`, involvedObject the Node by name). Failures are returned, not thrown: an event is best effort.
 */
export async function postNodeEvent(
  kc: KubeConfig, nodeName: string, ev: { reason: string; message: string; type: 'Normal' | 'Warning' }, now: Date,
): Promise<Error | null> {
  try {
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespacedEvent({
      namespace: 'default',
      body: {
        metadata: { generateName: `${nodeName}.` },
        involvedObject: { kind: 'Node', name: nodeName, uid: nodeName },
        reason: ev.reason, message: ev.message, type: ev.type,
        source: { component: 'kube-proxy', host: nodeName },
        firstTimestamp: now, lastTimestamp: now, count: 1,
        reportingComponent: 'kube-proxy', reportingInstance: nodeName,
      },
    });
    return null;
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}

/** Posts kube-proxy's "birth cry": a `Starting` Normal event on the Node (`cmd/kube-proxy/app/server.go`). */
export function postStartingEvent(kc: KubeConfig, nodeName: string, now: Date): Promise<Error | null> {
  return postNodeEvent(kc, nodeName, { reason: 'Starting', message: '', type: 'Normal' }, now);
}

function toPlainJson(obj: unknown): unknown {
  return obj === undefined ? undefined : JSON.parse(JSON.stringify(obj));
}

/**
 * One line describing an API error. client-node's ApiException has `code` (the HTTP status) and `body` (the
 * Status object, or its JSON text) and a multi-line message with headers: only the status, the Status reason and
 * message are kept, plus a hint for 401/403.
 */
export function describeError(err: unknown): string {
  const e = err as { code?: number | string; statusCode?: number; body?: unknown; message?: string };
  const status = e?.code ?? e?.statusCode;
  if (typeof status === 'number' && status >= 400) {
    let body = e.body as { reason?: string; message?: string } | string | undefined;
    if (typeof body === 'string') { try { body = JSON.parse(body) as { reason?: string; message?: string }; } catch { /* text body */ } }
    const detail = typeof body === 'object' && body ? [body.reason, body.message].filter(Boolean).join(': ') : typeof body === 'string' ? body.slice(0, 200) : '';
    const hint = status === 401 ? ' (the credentials in the kubeconfig were rejected)' : status === 403 ? ' (the user lacks list/watch permission; see deploy/kubernetes/rbac.yaml)' : '';
    return `HTTP ${status}${detail ? ` ${detail}` : ''}${hint}`;
  }
  const msg = (e?.message ?? String(err)).split('\n')[0];
  return status !== undefined && !msg.includes(String(status)) ? `HTTP ${status}: ${msg}` : msg;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });
}
