/**
 * kube-proxy's bounded-frequency runner, the current one (kubernetes `pkg/proxy/runner/bounded_frequency_runner.go`;
 * reference kube-proxy-nftables.md §4.1):
 * - `run()` requests a run; requests coalesce (at most one is pending);
 * - at least `minIntervalMs` passes between the END of one run and the START of the next;
 * - after a failed run, a retry comes within `retryIntervalMs` unless something else triggers a run first;
 * - a run happens at least every `maxIntervalMs`;
 * - runs never overlap. The clock is injected.
 */

/** A clock with timers, in ms. Tests pass a fake. */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The real clock. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** Options of {@link BoundedFrequencyRunner}, in ms. */
export interface RunnerOptions {
  minIntervalMs: number;
  retryIntervalMs: number;
  maxIntervalMs: number;
  clock: Clock;
  /** Called when `fn` throws or rejects (the runner keeps going). */
  onError?: (err: unknown) => void;
}

/**
 * Runs `fn` under kube-proxy's rate rules.
 * @throws Error from the constructor when maxInterval < minInterval (upstream panics).
 */
export class BoundedFrequencyRunner {
  readonly #fn: () => Promise<void> | void;
  readonly #o: RunnerOptions;
  #pending = false;
  #running = false;
  #stopped = true;
  #lastEnd = -Infinity;
  #wakeTimer: unknown = null;
  #wakeAt = Infinity;
  #retryAt = Infinity;
  #maxAt = Infinity;
  #idle: Array<() => void> = [];
  /** Number of completed runs (for tests and metrics). */
  runs = 0;

  constructor(fn: () => Promise<void> | void, opts: RunnerOptions) {
    if (opts.maxIntervalMs < opts.minIntervalMs) throw new Error(`maxInterval (${opts.maxIntervalMs} ms) must be >= minInterval (${opts.minIntervalMs} ms)`);
    this.#fn = fn;
    this.#o = opts;
  }

  /** Starts the loop: the max-interval timer is armed; nothing runs until requested or due. */
  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#maxAt = this.#o.clock.now() + this.#o.maxIntervalMs;
    this.#schedule();
  }

  /** Requests a run (coalesced). No-op before `start()` and after `stop()`. */
  run(): void {
    if (this.#stopped) return;
    this.#pending = true;
    this.#schedule();
  }

  /** Stops the loop; a run in progress finishes. */
  stop(): void {
    this.#stopped = true;
    this.#clearWake();
  }

  /** Resolves when no run is in progress and none is pending (for tests and shutdown). */
  whenIdle(): Promise<void> {
    if (!this.#running && !this.#pending) return Promise.resolve();
    return new Promise((r) => this.#idle.push(r));
  }

  #clearWake(): void {
    if (this.#wakeTimer !== null) this.#o.clock.clearTimeout(this.#wakeTimer);
    this.#wakeTimer = null;
    this.#wakeAt = Infinity;
  }

  /** Arms one timer for the earliest moment something may run. */
  #schedule(): void {
    if (this.#stopped || this.#running) return;
    const now = this.#o.clock.now();
    const earliest = this.#lastEnd + this.#o.minIntervalMs;
    let due = Math.min(this.#retryAt, this.#maxAt);
    if (this.#pending) due = Math.min(due, now);
    const at = Math.max(due, earliest);
    if (at === Infinity) return;
    if (this.#wakeTimer !== null && this.#wakeAt === at) return;
    this.#clearWake();
    this.#wakeAt = at;
    this.#wakeTimer = this.#o.clock.setTimeout(() => { this.#wakeTimer = null; this.#wakeAt = Infinity; void this.#tick(); }, Math.max(0, at - now));
  }

  async #tick(): Promise<void> {
    if (this.#stopped || this.#running) return;
    const now = this.#o.clock.now();
    const due = this.#pending || now >= this.#retryAt || now >= this.#maxAt;
    if (!due || now < this.#lastEnd + this.#o.minIntervalMs) { this.#schedule(); return; }
    this.#pending = false;
    this.#running = true;
    let failed = false;
    try {
      await this.#fn();
    } catch (err) {
      failed = true;
      this.#o.onError?.(err);
    }
    this.#running = false;
    this.runs++;
    const end = this.#o.clock.now();
    this.#lastEnd = end;
    this.#retryAt = failed ? end + this.#o.retryIntervalMs : Infinity;
    this.#maxAt = end + this.#o.maxIntervalMs;
    if (!this.#pending) for (const r of this.#idle.splice(0)) r();
    this.#schedule();
  }
}
