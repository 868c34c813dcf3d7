/**
 * Conntrack sysctls at startup, with kube-proxy's defaults and rules (kubernetes `pkg/proxy/conntrack/sysctls.go`,
 * `cmd/kube-proxy/app/conntrack.go`; reference kube-proxy-nftables.md §6.1):
 * - `net/netfilter/nf_conntrack_max` = max(maxPerCore × CPUs, min) when maxPerCore > 0, and the conntrack hash
 *   table (`/sys/module/nf_conntrack/parameters/hashsize`) raised to max/4 when it is smaller;
 * - `nf_conntrack_tcp_timeout_established`, `nf_conntrack_tcp_timeout_close_wait` (seconds; 0 = leave as is);
 * - `nf_conntrack_tcp_be_liberal` (1 iff tcpBeLiberal);
 * - `nf_conntrack_udp_timeout`, `nf_conntrack_udp_timeout_stream` (seconds; 0 = leave as is).
 * Each is written only when its current value differs. A read-only /sys (or /proc/sys) is reported as a warning,
 * the way upstream reports `errReadOnlySysFS`; any other failure throws with the path and the errno.
 */

/** The conntrack block of the config, durations already in ms. */
export interface ConntrackSettings {
  maxPerCore: number;
  min: number;
  tcpEstablishedTimeoutMs: number;
  tcpCloseWaitTimeoutMs: number;
  tcpBeLiberal: boolean;
  udpTimeoutMs: number;
  udpStreamTimeoutMs: number;
}

/** One value to ensure. `path` is absolute; `value` is the decimal text written (without newline). */
export interface SysctlTarget {
  path: string;
  value: number;
  /** Write only when the current value is lower (hashsize), instead of whenever it differs. */
  onlyRaise?: boolean;
}

/** What was done for each target. */
export interface SysctlOutcome {
  path: string;
  desired: number;
  previous: number | null;
  action: 'unchanged' | 'written' | 'read-only';
}

/** File access, injected so that tests can use a fake /proc and /sys. Errors carry Node's `code` (EROFS, ENOENT…). */
export interface SysctlFs {
  readFile(path: string): string;
  writeFile(path: string, data: string): void;
}

const PROC_NF = '/proc/sys/net/netfilter';
/** The nf_conntrack module parameter that sizes the hash table (linux net/netfilter/nf_conntrack_core.c). */
export const HASHSIZE_PATH = '/sys/module/nf_conntrack/parameters/hashsize';

/**
 * The sysctl targets for `settings` on a machine with `numCPU` CPUs, in upstream's order. Timeouts are rounded
 * down to whole seconds, as Go's `int(d / time.Second)` does.
 */
export function conntrackTargets(settings: ConntrackSettings, numCPU: number): SysctlTarget[] {
  const out: SysctlTarget[] = [];
  if (settings.maxPerCore > 0) {
    const max = Math.max(settings.maxPerCore * numCPU, settings.min);
    out.push({ path: `${PROC_NF}/nf_conntrack_max`, value: max });
    out.push({ path: HASHSIZE_PATH, value: Math.floor(max / 4), onlyRaise: true });
  }
  const seconds = (ms: number) => Math.floor(ms / 1000);
  if (settings.tcpEstablishedTimeoutMs > 0) out.push({ path: `${PROC_NF}/nf_conntrack_tcp_timeout_established`, value: seconds(settings.tcpEstablishedTimeoutMs) });
  if (settings.tcpCloseWaitTimeoutMs > 0) out.push({ path: `${PROC_NF}/nf_conntrack_tcp_timeout_close_wait`, value: seconds(settings.tcpCloseWaitTimeoutMs) });
  out.push({ path: `${PROC_NF}/nf_conntrack_tcp_be_liberal`, value: settings.tcpBeLiberal ? 1 : 0 });
  if (settings.udpTimeoutMs > 0) out.push({ path: `${PROC_NF}/nf_conntrack_udp_timeout`, value: seconds(settings.udpTimeoutMs) });
  if (settings.udpStreamTimeoutMs > 0) out.push({ path: `${PROC_NF}/nf_conntrack_udp_timeout_stream`, value: seconds(settings.udpStreamTimeoutMs) });
  return out;
}

/**
 * Ensures every target. Returns one outcome per target. A write that fails with EROFS (read-only sysfs or procfs),
 * or EACCES/EPERM on a value that is global to the host and read-only inside a network namespace, becomes
 * `read-only` and is passed to `warn`.
 * @throws Error naming the path and the errno for any other failure (e.g. ENOENT when nf_conntrack is not loaded).
 */
export function applySysctls(fs: SysctlFs, targets: SysctlTarget[], warn: (msg: string, path: string) => void): SysctlOutcome[] {
  const outcomes: SysctlOutcome[] = [];
  for (const t of targets) {
    let previous: number;
    try {
      const text = fs.readFile(t.path).trim();
      previous = Number.parseInt(text, 10);
      if (!Number.isFinite(previous)) throw Object.assign(new Error(`not an integer: ${JSON.stringify(text)}`), { code: 'EINVAL' });
    } catch (err) {
      throw sysctlError('read', t.path, err);
    }
    const needed = t.onlyRaise ? previous < t.value : previous !== t.value;
    if (!needed) {
      outcomes.push({ path: t.path, desired: t.value, previous, action: 'unchanged' });
      continue;
    }
    try {
      fs.writeFile(t.path, String(t.value));
      outcomes.push({ path: t.path, desired: t.value, previous, action: 'written' });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EROFS' || code === 'EACCES' || code === 'EPERM') {
        warn(`${t.path} is read-only (${code}): cannot set it to ${t.value}, it stays ${previous}; problems may arise later`, t.path);
        outcomes.push({ path: t.path, desired: t.value, previous, action: 'read-only' });
        continue;
      }
      throw sysctlError('write', t.path, err);
    }
  }
  return outcomes;
}

function sysctlError(what: 'read' | 'write', path: string, err: unknown): Error {
  const e = err as NodeJS.ErrnoException;
  return new Error(`could not set conntrack parameters from the configuration: ${what} ${path}: ${e.code ?? 'error'}: ${e.message}`, { cause: err });
}
