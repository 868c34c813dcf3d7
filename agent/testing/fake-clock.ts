/** A fake clock for timer tests: time moves only when `advance()` is called; due timers fire in order. */
import type { Clock } from '../runner.ts';

interface Timer { id: number; at: number; fn: () => void }

export class FakeClock implements Clock {
  #now: number;
  #timers: Timer[] = [];
  #next = 1;
  constructor(start = 1_000_000) { this.#now = start; }
  now(): number { return this.#now; }
  setTimeout(fn: () => void, ms: number): unknown {
    const t = { id: this.#next++, at: this.#now + Math.max(0, ms), fn };
    this.#timers.push(t);
    return t.id;
  }
  clearTimeout(handle: unknown): void { this.#timers = this.#timers.filter((t) => t.id !== handle); }
  /** Pending timers (for assertions). */
  get pending(): number { return this.#timers.length; }
  /** Moves time forward by `ms`, firing due timers in time order and letting promises settle after each. */
  async advance(ms: number): Promise<void> {
    const target = this.#now + ms;
    for (;;) {
      await settle();
      this.#timers.sort((a, b) => a.at - b.at || a.id - b.id);
      const t = this.#timers[0];
      if (!t || t.at > target) break;
      this.#timers.shift();
      this.#now = t.at;
      t.fn();
    }
    this.#now = target;
    await settle();
  }
}

/** Lets pending promise callbacks run. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise<void>((r) => setImmediate(r));
}
