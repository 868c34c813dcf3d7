/**
 * Conntrack sysctls at startup, with kube-proxy's defaults and rules (kubernetes `pkg/proxy/conntrack/sysctls.go`,
 * `cmd/kube-proxy/app/conntrack.go`; reference kube-proxy-nftables.md §6.1):
 * - `net/netfilter/nf_conntrack_max` = max(maxPerCore × CPUs, min) when maxPerCore > 0, capped at 1048576 like
 *   current upstream (sysctls.go getConntrackMax, "avoid excessive memory usage on high-core machines"), and the
 *   conntrack hash table (`/sys/module/nf_conntrack/parameters/hashsize`) raised to max/4 when it is smaller;
 * - `nf_conntrack_tcp_timeout_established`, `nf_conntrack_tcp_timeout_close_wait` (seconds; 0 = leave as is);
 * - `nf_conntrack_tcp_be_liberal` = 1 when tcpBeLiberal (false leaves it as is: upstream only ever writes 1);
 * - `nf_conntrack_udp_timeout`, `nf_conntrack_udp_timeout_stream` (seconds; 0 = leave as is).
 * Each is written only when its current value differs. A value that cannot be written because it is read-only
 * where we run is a warning (unless it is a limit that is already high enough), not a failure, the way upstream treats `errReadOnlySysFS`:
 * - EROFS: /sys or /proc/sys mounted read-only (docker issue #24000);
 * - EACCES/EPERM: nf_conntrack_max is 0444 in every network namespace but the initial one (the kernel's
 *   nf_conntrack_standalone.c makes the global values read-only there), or no CAP_NET_ADMIN/CAP_SYS_ADMIN;
 * - EOPNOTSUPP: the kernel refuses hashsize writes from outside the initial network namespace
 *   (nf_conntrack_core.c nf_conntrack_set_hashsize).
 * The per-namespace values (timeouts, be_liberal) are writable inside a network namespace and are set there.
 * Any other failure throws with the path and the errno.
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
  /** A capacity limit (nf_conntrack_max, hashsize): when it cannot be written but is already at least `value`,
   * nothing can go wrong, so that is logged at info level without a warning. */
  limit?: boolean;
}

/** What was done for each target. */
export interface SysctlOutcome {
  path: string;
  desired: number;
  previous: number | null;
  action: 'unchanged' | 'written' | 'read-only';
  /** For `read-only`: whether it was passed to `warn` (false for a limit already high enough). */
  warned?: boolean;
}

/** File access, injected so that tests can use a fake /proc and /sys. Errors carry Node's `code` (EROFS, ENOENT…). */
export interface SysctlFs {
  readFile(path: string): string;
  writeFile(path: string, data: string): void;
}

const PROC_NF = '/proc/sys/net/netfilter';
/** Upstream's cap of nf_conntrack_max (kubernetes pkg/proxy/conntrack/sysctls.go `maxLimit`). */
export const MAX_CONNTRACK_LIMIT = 1048576;
/** The nf_conntrack module parameter that sizes the hash table (linux net/netfilter/nf_conntrack_core.c). */
export const HASHSIZE_PATH = '/sys/module/nf_conntrack/parameters/hashsize';

/**
 * The sysctl targets for `settings` on a machine with `numCPU` CPUs, in upstream's order. Timeouts are rounded
 * down to whole seconds, as Go's `int(d / time.Second)` does.
 */
export function conntrackTargets(settings: ConntrackSettings, numCPU: number): SysctlTarget[] {
  const out: SysctlTarget[] = [];
  if (settings.maxPerCore > 0) {
    const max = Math.min(Math.max(settings.maxPerCore * numCPU, settings.min), MAX_CONNTRACK_LIMIT);
    out.push({ path: `${PROC_NF}/nf_conntrack_max`, value: max, limit: true });
    out.push({ path: HASHSIZE_PATH, value: Math.floor(max / 4), onlyRaise: true, limit: true });
  }
  const seconds = (ms: number) => Math.floor(ms / 1000);
  if (settings.tcpEstablishedTimeoutMs > 0) out.push({ path: `${PROC_NF}/nf_conntrack_tcp_timeout_established`, value: seconds(settings.tcpEstablishedTimeoutMs) });
  if (settings.tcpCloseWaitTimeoutMs > 0) out.push({ path: `${PROC_NF}/nf_conntrack_tcp_timeout_close_wait`, value: seconds(settings.tcpCloseWaitTimeoutMs) });
  if (settings.tcpBeLiberal) out.push({ path: `${PROC_NF}/nf_conntrack_tcp_be_liberal`, value: 1 });
  if (settings.udpTimeoutMs > 0) out.push({ path: `${PROC_NF}/nf_conntrack_udp_timeout`, value: seconds(settings.udpTimeoutMs) });
  if (settings.udpStreamTimeoutMs > 0) out.push({ path: `${PROC_NF}/nf_conntrack_udp_timeout_stream`, value: seconds(settings.udpStreamTimeoutMs) });
  return out;
}

/**
 * Ensures every target. Returns one outcome per target. A write that fails with EROFS (read-only sysfs or procfs),
 * or EACCES/EPERM on a value that is global to the host and read-only inside a network namespace, becomes
 * `read-only` and is passed to `warn`; so does a read that fails with EACCES/EPERM (`previous` null).
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
      // Unreadable for lack of privilege (e.g. /sys/module/nf_conntrack/parameters/hashsize is 0600 and the agent
      // runs in an unprivileged user namespace): we cannot know or set it, so it is a warning like a read-only file.
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EACCES' || code === 'EPERM') {
        warn(`${t.path}: cannot read it (${code}: not permitted here); cannot set it to ${t.value}; problems may arise later`, t.path);
        outcomes.push({ path: t.path, desired: t.value, previous: null, action: 'read-only', warned: true });
        continue;
      }
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
      if (code === 'EROFS' || code === 'EACCES' || code === 'EPERM' || code === 'EOPNOTSUPP') {
        const why = code === 'EROFS' ? 'the file system is read-only'
          : code === 'EOPNOTSUPP' ? 'the kernel allows it only from the initial network namespace'
          : 'it is read-only here (global values are read-only outside the initial network namespace)';
        const harmless = !!t.limit && previous >= t.value;
        if (!harmless) warn(`${t.path}: cannot set it to ${t.value} (${code}: ${why}); it stays ${previous}; problems may arise later`, t.path);
        outcomes.push({ path: t.path, desired: t.value, previous, action: 'read-only', warned: !harmless });
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

/** The upstream Node event for a read-only conntrack setting (cmd/kube-proxy/app/server_linux.go, reason readOnlySysFS). */
export const READ_ONLY_SYSFS_EVENT = {
  reason: 'readOnlySysFS',
  message: 'CRI error: /sys is read-only: cannot modify conntrack limits, problems may arise later (If running Docker, see docker issue #24000)',
} as const;

/** The `conntrack` block of the config (durations in ms), as config-schema/config.ts parses it. */
export interface ConntrackConfig {
  maxPerCore: number;
  min: number;
  tcpEstablishedTimeout: number;
  tcpCloseWaitTimeout: number;
  tcpBeLiberal: boolean;
  udpTimeout: number;
  udpStreamTimeout: number;
}

/** Logger subset used here (pino fits). */
export interface SysctlLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/**
 * The startup step of `nftproxy run` (and all of `run --init-only`): computes the targets from the config and
 * `numCPU`, applies them through `fs`, logs one line per value, and calls `onReadOnly` once when any value was
 * read-only (the CLI posts the upstream Warning event on the Node then).
 * @returns the outcomes, in upstream's order.
 * @throws Error naming the path and the errno for a failure that is not a read-only value (e.g. ENOENT when the
 *   nf_conntrack module is not loaded: "open /proc/sys/net/netfilter/nf_conntrack_max: no such file").
 */
export function setupConntrackSysctls(c: ConntrackConfig, numCPU: number, fs: SysctlFs, log: SysctlLogger, onReadOnly: (message: string) => void = () => {}): SysctlOutcome[] {
  const targets = conntrackTargets({
    maxPerCore: c.maxPerCore, min: c.min, tcpEstablishedTimeoutMs: c.tcpEstablishedTimeout, tcpCloseWaitTimeoutMs: c.tcpCloseWaitTimeout,
    tcpBeLiberal: c.tcpBeLiberal, udpTimeoutMs: c.udpTimeout, udpStreamTimeoutMs: c.udpStreamTimeout,
  }, numCPU);
  const out = applySysctls(fs, targets, (msg, path) => log.warn({ path }, msg));
  for (const o of out) {
    log.info(o, o.action === 'written' ? 'conntrack sysctl set' : o.action === 'unchanged' ? 'conntrack sysctl already right'
      : o.warned ? 'conntrack sysctl read-only' : 'conntrack limit read-only here and already high enough; left alone');
  }
  if (out.some((o) => o.warned)) onReadOnly(READ_ONLY_SYSFS_EVENT.message);
  return out;
}
