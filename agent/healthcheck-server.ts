/**
 * Per-Service health-check servers (healthCheckNodePort), as upstream runs them (kubernetes
 * `pkg/proxy/healthcheck/service_health.go`; reference kube-proxy-nftables.md §8.2):
 * - one HTTP server per Service of type LoadBalancer with externalTrafficPolicy Local, per IP family, listening on
 *   `<ip>:<healthCheckNodePort>` for every node address that nodePortAddresses selects (`0.0.0.0` / `::` when it
 *   matches all);
 * - any path and method: 200 iff `localEndpoints > 0` and the proxy is healthy, else 503;
 * - headers `Content-Type: application/json`, `X-Content-Type-Options: nosniff`,
 *   `X-Load-Balancing-Endpoint-Weight: <localEndpoints>`;
 * - body: upstream's tab-indented JSON `{ "service": { "namespace", "name" }, "localEndpoints", "serviceProxyHealthy" }`;
 * - `localEndpoints` = upstream `LocalReadyEndpoints()`: per Service, the number of distinct IPs of endpoints that
 *   are local and READY (terminating ones do not count, so LBs fail over during termination);
 * - a port change closes the old listeners and opens new ones; a listen failure closes what was opened and is
 *   retried on the next sync (upstream emits the event FailedToStartServiceHealthcheck).
 *
 * fastify instances are built by {@link buildServiceHealthApp} without listening; tests use `inject()`.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import type { ServicePort } from '../config-schema/snapshot.ts';

/** What one Service's health-check server needs: its identity, port and local ready endpoint count. */
export interface ServiceHealthInfo {
  namespace: string;
  name: string;
  /** healthCheckNodePort, 1..65535. */
  port: number;
  /** Distinct local ready endpoint IPs of the Service (all its ports). */
  localEndpoints: number;
}

/**
 * Upstream's `HealthCheckNodePorts()` + `LocalReadyEndpoints()` from one family's ServicePorts: the Services with
 * a healthCheckNodePort, keyed `ns/name`. Ports of one Service share its healthCheckNodePort.
 */
export function serviceHealthInfos(sps: readonly ServicePort[]): Map<string, ServiceHealthInfo> {
  const out = new Map<string, ServiceHealthInfo & { ips: Set<string> }>();
  for (const sp of sps) {
    if (!sp.healthCheckNodePort) continue;
    const key = `${sp.namespace}/${sp.name}`;
    let info = out.get(key);
    if (!info) out.set(key, info = { namespace: sp.namespace, name: sp.name, port: sp.healthCheckNodePort, localEndpoints: 0, ips: new Set() });
    for (const e of sp.localEndpoints) if (e.isLocal && e.ready) info.ips.add(e.ip);
    info.localEndpoints = info.ips.size;
  }
  return new Map([...out].map(([k, { ips: _ips, ...v }]) => [k, v]));
}

/** Upstream's body text (Go `dedent` of a tab-indented template; `%q` quoting). */
export function serviceHealthBody(namespace: string, name: string, localEndpoints: number, healthy: boolean): string {
  return `{\n\t"service": {\n\t\t"namespace": ${JSON.stringify(namespace)},\n\t\t"name": ${JSON.stringify(name)}\n\t},\n\t"localEndpoints": ${localEndpoints},\n\t"serviceProxyHealthy": ${healthy}\n}`;
}

/**
 * The fastify app of one Service: answers every path and method. `state()` is read per request.
 */
export function buildServiceHealthApp(namespace: string, name: string, state: () => { localEndpoints: number; healthy: boolean }): FastifyInstance {
  const app = Fastify({ logger: false });
  app.all('/*', async (_req, reply) => {
    const { localEndpoints, healthy } = state();
    return reply
      .code(localEndpoints !== 0 && healthy ? 200 : 503)
      .header('Content-Type', 'application/json')
      .header('X-Content-Type-Options', 'nosniff')
      .header('X-Load-Balancing-Endpoint-Weight', String(localEndpoints))
      .send(Buffer.from(serviceHealthBody(namespace, name, localEndpoints, healthy)));
  });
  return app;
}

/** Structured logger (pino fits). */
export interface HealthCheckLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** Options of {@link ServiceHealthServers}. */
export interface ServiceHealthServersOptions {
  /** The addresses to bind, e.g. the family's nodeport-ips, or ['0.0.0.0'] / ['::'] for match-all. */
  addresses: () => readonly string[];
  /** Proxy health (upstream `healthzServer.Health().Healthy`). */
  healthy: () => boolean;
  log: HealthCheckLogger;
  /** Listens an app on host:port (tests replace it); default fastify listen, IPv6-only for IPv6 hosts. */
  listen?: (app: FastifyInstance, host: string, port: number) => Promise<void>;
}

interface Instance {
  info: ServiceHealthInfo;
  addrKey: string;
  apps: FastifyInstance[];
}

const defaultListen = async (app: FastifyInstance, host: string, port: number) => {
  await app.listen({ host, port, ipv6Only: host.includes(':') });
};

/** The set of running health-check servers of one IP family. */
export class ServiceHealthServers {
  readonly #o: ServiceHealthServersOptions;
  readonly #svcs = new Map<string, Instance>();

  constructor(opts: ServiceHealthServersOptions) {
    this.#o = opts;
  }

  /** Services currently served: `ns/name` -> port. */
  ports(): Map<string, number> {
    return new Map([...this.#svcs].map(([k, v]) => [k, v.info.port]));
  }

  /**
   * Upstream SyncServices + SyncEndpoints: closes servers of Services that are gone or changed port (or when the
   * bind addresses changed), opens missing ones, and updates every endpoint count. A listen error is logged and the
   * Service retried on the next call. Never throws.
   */
  async sync(wanted: ReadonlyMap<string, ServiceHealthInfo>): Promise<void> {
    const addrs = [...new Set(this.#o.addresses())].sort();
    const addrKey = addrs.join(',');
    for (const [key, inst] of [...this.#svcs]) {
      const w = wanted.get(key);
      if (!w || w.port !== inst.info.port || inst.addrKey !== addrKey) {
        this.#o.log.info({ service: key, port: inst.info.port }, 'closing healthcheck');
        this.#svcs.delete(key);
        await closeAll(inst.apps);
      }
    }
    for (const [key, w] of wanted) {
      const inst = this.#svcs.get(key);
      if (inst) { inst.info = { ...w }; continue; }
      const created: Instance = { info: { ...w }, addrKey, apps: [] };
      const state = () => ({ localEndpoints: created.info.localEndpoints, healthy: this.#o.healthy() });
      try {
        for (const host of addrs) {
          const app = buildServiceHealthApp(w.namespace, w.name, state);
          created.apps.push(app);
          await (this.#o.listen ?? defaultListen)(app, host, w.port);
        }
        this.#svcs.set(key, created);
        this.#o.log.info({ service: key, port: w.port, addresses: addrs }, 'opened healthcheck');
      } catch (err) {
        await closeAll(created.apps);
        this.#o.log.warn({ service: key, port: w.port, err: (err as Error).message }, 'FailedToStartServiceHealthcheck: cannot listen; retrying on the next sync');
      }
    }
  }

  /** Closes every server. */
  async close(): Promise<void> {
    const all = [...this.#svcs.values()];
    this.#svcs.clear();
    for (const inst of all) await closeAll(inst.apps);
  }
}

async function closeAll(apps: readonly FastifyInstance[]): Promise<void> {
  await Promise.allSettled(apps.map((a) => a.close()));
}
