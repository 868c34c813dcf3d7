/**
 * Proxy health as kube-proxy computes it (kubernetes `pkg/proxy/healthcheck/proxy_health.go`;
 * reference kube-proxy-nftables.md §8.1), and the HTTP servers that expose it and the metrics.
 *
 * fastify instances are built by functions that do not listen; the agent listens, tests use `inject()`.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import type { ProxyMetrics, IPFamilyLabel } from './metrics.ts';

/** Milliseconds since the epoch; injected so that tests use a fake clock. */
export interface HealthClock {
  now(): number;
}

/** Health of one family's proxier, as JSON-marshalled by upstream (`ProxierHealth`). */
export interface ProxierHealth {
  lastUpdated: string;
  healthy: boolean;
}

/** Upstream's `ProxyHealth` JSON body. Key order matches Go's struct order. */
export interface ProxyHealthBody {
  lastUpdated: string;
  currentTime: string;
  nodeEligible?: boolean;
  healthy: boolean;
  status?: Partial<Record<IPFamilyLabel, ProxierHealth>>;
}

/** The part of a Node that decides eligibility: deletionTimestamp and taints. */
export interface NodeEligibilityView {
  metadata?: { deletionTimestamp?: string | Date | null };
  spec?: { taints?: Array<{ key: string }> | null };
}

/** The Cluster Autoscaler's taint (proxy_health.go ToBeDeletedTaint). */
export const TO_BE_DELETED_TAINT = 'ToBeDeletedByClusterAutoscaler';

/**
 * Formats ms-since-epoch like Go's `time.Time` JSON (RFC 3339 with nanoseconds, trailing zeros trimmed).
 * The zero time (`ms === null`) is `0001-01-01T00:00:00Z`.
 */
export function formatGoTime(ms: number | null): string {
  if (ms === null) return '0001-01-01T00:00:00Z';
  const iso = new Date(ms).toISOString(); // 2024-01-01T00:00:00.120Z
  const [base, frac] = iso.slice(0, -1).split('.');
  const trimmed = (frac ?? '').replace(/0+$/, '');
  return trimmed ? `${base}.${trimmed}Z` : `${base}Z`;
}

/**
 * Tracks, per family, when rules were last updated and the oldest queued update. A family is unhealthy when an
 * update has been queued for at least `healthTimeoutMs` (upstream: 2 × syncPeriod) without a successful sync.
 */
export class ProxyHealth {
  readonly #clock: HealthClock;
  readonly #healthTimeoutMs: number;
  readonly #lastUpdated = new Map<IPFamilyLabel, number>();
  readonly #oldestPendingQueued = new Map<IPFamilyLabel, number>();
  #node: NodeEligibilityView | null = null;

  /** @param healthTimeoutMs ms; upstream uses 2 × syncPeriod. */
  constructor(clock: HealthClock, healthTimeoutMs: number) {
    this.#clock = clock;
    this.#healthTimeoutMs = healthTimeoutMs;
  }

  /** A sync of `family` succeeded: its rules reflect the current state. */
  updated(family: IPFamilyLabel): void {
    this.#oldestPendingQueued.delete(family);
    this.#lastUpdated.set(family, this.#clock.now());
  }

  /** A change for `family` was queued; only the oldest pending time is kept. */
  queuedUpdate(family: IPFamilyLabel): void {
    if (!this.#oldestPendingQueued.has(family)) this.#oldestPendingQueued.set(family, this.#clock.now());
  }

  /** The node object as last seen (null until known: then /healthz is not eligible, as upstream). */
  setNode(node: NodeEligibilityView | null): void {
    this.#node = node;
  }

  /** True unless the node is unknown, being deleted, or tainted ToBeDeletedByClusterAutoscaler. */
  nodeEligible(): boolean {
    const node = this.#node;
    if (node === null) return false;
    if (node.metadata?.deletionTimestamp) return false;
    return !(node.spec?.taints ?? []).some((t) => t.key === TO_BE_DELETED_TAINT);
  }

  /** Upstream's `Health()`: overall and per-family health. `lastUpdated` is the newest family update. */
  health(): { healthy: boolean; lastUpdatedMs: number | null; status: Partial<Record<IPFamilyLabel, { lastUpdatedMs: number; healthy: boolean }>> } {
    const now = this.#clock.now();
    let healthy = true;
    let lastUpdatedMs: number | null = null;
    const status: Partial<Record<IPFamilyLabel, { lastUpdatedMs: number; healthy: boolean }>> = {};
    for (const [family, updated] of this.#lastUpdated) {
      if (lastUpdatedMs === null || updated > lastUpdatedMs) lastUpdatedMs = updated;
      const queued = this.#oldestPendingQueued.get(family);
      const late = queued !== undefined && now - queued >= this.#healthTimeoutMs;
      if (late) healthy = false;
      status[family] = { lastUpdatedMs: updated, healthy: !late };
    }
    return { healthy, lastUpdatedMs, status };
  }

  /** The JSON body upstream writes; `forHealthz` adds `nodeEligible`. Healthy responses report now as lastUpdated. */
  body(forHealthz: boolean): { code: 200 | 503; body: ProxyHealthBody } {
    const h = this.health();
    const now = this.#clock.now();
    const eligible = forHealthz ? this.nodeEligible() : true;
    const ok = h.healthy && eligible;
    const status: Partial<Record<IPFamilyLabel, ProxierHealth>> = {};
    for (const [family, s] of Object.entries(h.status) as Array<[IPFamilyLabel, { lastUpdatedMs: number; healthy: boolean }]>) {
      status[family] = { lastUpdated: formatGoTime(s.lastUpdatedMs), healthy: s.healthy };
    }
    const body: ProxyHealthBody = {
      lastUpdated: formatGoTime(ok ? now : h.lastUpdatedMs),
      currentTime: formatGoTime(now),
      ...(forHealthz ? { nodeEligible: eligible } : {}),
      healthy: h.healthy,
      ...(Object.keys(status).length > 0 ? { status } : {}),
    };
    return { code: ok ? 200 : 503, body };
  }
}

/**
 * The health server (`healthzBindAddress`): `/healthz` (health and node eligibility) and `/livez` (health only),
 * 200 or 503 with `Content-Type: application/json` and `X-Content-Type-Options: nosniff`, counted in
 * `kubeproxy_proxy_healthz_total{code}` / `kubeproxy_proxy_livez_total{code}`.
 */
export function buildHealthServer(health: ProxyHealth, metrics: ProxyMetrics): FastifyInstance {
  const app = Fastify({ logger: false });
  const handler = (forHealthz: boolean) => async (_req: unknown, reply: import('fastify').FastifyReply) => {
    const { code, body } = health.body(forHealthz);
    (forHealthz ? metrics.healthzTotal : metrics.livezTotal).inc({ code: String(code) });
    return reply
      .code(code)
      .header('Content-Type', 'application/json')
      .header('X-Content-Type-Options', 'nosniff')
      .send(Buffer.from(JSON.stringify(body)));
  };
  app.get('/healthz', handler(true));
  app.get('/livez', handler(false));
  return app;
}

/**
 * The metrics server (`metricsBindAddress`): `/metrics` (Prometheus text), `/proxyMode` (`nftables`),
 * `/configz` (the running config under `kubeproxy.config.k8s.io`) and a plain `/healthz` "ok".
 */
export function buildMetricsServer(metrics: ProxyMetrics, runningConfig: unknown): FastifyInstance {
  const app = Fastify({ logger: false });
  app.get('/metrics', async (_req, reply) =>
    reply.header('Content-Type', metrics.registry.contentType).send(await metrics.registry.metrics()));
  app.get('/proxyMode', async (_req, reply) => reply.header('Content-Type', 'text/plain; charset=utf-8').send('nftables'));
  app.get('/configz', async (_req, reply) =>
    reply.header('Content-Type', 'application/json').send(JSON.stringify({ 'kubeproxy.config.k8s.io': runningConfig })));
  app.get('/healthz', async (_req, reply) => reply.header('Content-Type', 'text/plain; charset=utf-8').send('ok'));
  return app;
}

/**
 * Splits a kube-proxy bind address `host:port` (`0.0.0.0:10256`, `[::]:10256`, `:10249`) for `listen()`.
 * Throws an Error naming `field` and the value when it is not host:port with a port in 1..65535.
 */
export function parseBindAddress(field: string, value: string): { host: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(value);
  const port = m ? Number(m[3]) : NaN;
  if (!m || !(port >= 1 && port <= 65535)) {
    throw new Error(`${field}: ${JSON.stringify(value)} is not a bind address; expected host:port, e.g. 0.0.0.0:10256 or [::]:10256`);
  }
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port };
}
