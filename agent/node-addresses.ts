/**
 * The node's interface addresses, for `nodePortAddresses` (kubernetes `pkg/proxy/util/nodeport_addresses.go`:
 * `nodeport-ips` holds the local interface addresses inside the configured CIDRs; reference kube-proxy-nftables.md
 * §2.10). Upstream reads them only on full syncs (≤ 1 h late); we poll them and request a sync as soon as they
 * change, so a new or removed address reaches `nodeport-ips` within one poll interval plus minSyncPeriod, without a
 * full sync (only the skeleton fragment's elements change).
 *
 * Addresses come from `os.networkInterfaces()` (getifaddrs(3)), canonicalised (IPv4 dotted quad, IPv6 RFC 5952,
 * zone suffix `%eth0` removed), sorted and deduplicated. Loopback addresses are kept here; the skeleton drops them
 * from `nodeport-ips` (no localhost NodePorts without route_localnet, as upstream).
 */
import { networkInterfaces } from 'node:os';
import { canonicalAddr, isIPv4, isIPv6 } from '../rules/addr.ts';
import type { Clock } from './runner.ts';

/** Reads the current interface addresses (text, either family). */
export type AddressReader = () => readonly string[];

/** All interface addresses of this network namespace, via os.networkInterfaces(); canonical, sorted, unique. */
export const readInterfaceAddresses: AddressReader = () => {
  const out = new Set<string>();
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) {
      const ip = a.address.replace(/%.*$/, '');
      if (isIPv4(ip)) out.add(canonicalAddr('ip', ip));
      else if (isIPv6(ip)) out.add(canonicalAddr('ip6', ip));
    }
  }
  return [...out].sort();
};

/** Options of {@link NodeAddressWatcher}. */
export interface NodeAddressWatcherOptions {
  read?: AddressReader;
  clock: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
  /** Poll interval in ms (default 1000). */
  intervalMs?: number;
  /** Called after the set of addresses changed (not on the first read). */
  onChange: (addrs: readonly string[]) => void;
  /** Called when reading fails; the last good list stays. */
  onError?: (err: Error) => void;
}

/**
 * Keeps the current interface addresses and reports changes. `current()` is what the snapshot builder reads.
 * A failed read keeps the last good list.
 */
export class NodeAddressWatcher {
  readonly #o: NodeAddressWatcherOptions;
  readonly #read: AddressReader;
  #addrs: readonly string[] = [];
  #timer: unknown = null;
  #running = false;

  constructor(opts: NodeAddressWatcherOptions) {
    this.#o = opts;
    this.#read = opts.read ?? readInterfaceAddresses;
    try {
      this.#addrs = [...new Set(this.#read())].sort();
    } catch (err) {
      opts.onError?.(err as Error);
    }
  }

  /** The addresses as last read. */
  current(): readonly string[] {
    return this.#addrs;
  }

  /** Reads now; returns true (and calls onChange) when the set changed. */
  refresh(): boolean {
    let next: string[];
    try {
      next = [...new Set(this.#read())].sort();
    } catch (err) {
      this.#o.onError?.(err as Error);
      return false;
    }
    const changed = next.length !== this.#addrs.length || next.some((a, i) => a !== this.#addrs[i]);
    this.#addrs = next;
    if (changed) this.#o.onChange(next);
    return changed;
  }

  /** Starts polling every `intervalMs`. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    const tick = () => {
      if (!this.#running) return;
      this.refresh();
      this.#timer = this.#o.clock.setTimeout(tick, this.#o.intervalMs ?? 1000);
    };
    this.#timer = this.#o.clock.setTimeout(tick, this.#o.intervalMs ?? 1000);
  }

  /** Stops polling. */
  stop(): void {
    this.#running = false;
    if (this.#timer !== null) this.#o.clock.clearTimeout(this.#timer);
    this.#timer = null;
  }
}
