/**
 * OOM score adjustment at startup, as kube-proxy's `oomAdjuster.ApplyOOMScoreAdj(0, oomScoreAdj)` (kubernetes
 * `cmd/kube-proxy/app/server.go`; default -999 from `v1alpha1/defaults.go`): the value is written to
 * `/proc/self/oom_score_adj` (linux Documentation/filesystems/proc.rst, range -1000..1000). Lowering it needs
 * CAP_SYS_RESOURCE; without it the write fails with EACCES/EPERM and the agent only warns, as upstream does.
 */

/** Where the value goes (this process). */
export const OOM_SCORE_ADJ_PATH = '/proc/self/oom_score_adj';

/** File access, injected for tests. Errors carry Node's `code`. */
export interface OomFs {
  readFile(path: string): string;
  writeFile(path: string, data: string): void;
}

/** What happened: written, already at the value, or not permitted (with the reason for the warning). */
export type OomOutcome =
  | { action: 'written' | 'unchanged'; value: number; previous: number | null }
  | { action: 'not-permitted'; value: number; previous: number | null; reason: string };

/**
 * Ensures `oom_score_adj` is `value` (an integer in -1000..1000).
 * @throws RangeError naming the field and value when out of range.
 */
export function applyOomScoreAdj(fs: OomFs, value: number): OomOutcome {
  if (!Number.isInteger(value) || value < -1000 || value > 1000) throw new RangeError(`oomScoreAdj: expected an integer in -1000..1000, got ${value}`);
  let previous: number | null = null;
  try { previous = Number.parseInt(fs.readFile(OOM_SCORE_ADJ_PATH).trim(), 10); } catch { previous = null; }
  if (previous === value) return { action: 'unchanged', value, previous };
  try {
    fs.writeFile(OOM_SCORE_ADJ_PATH, String(value));
    return { action: 'written', value, previous };
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return { action: 'not-permitted', value, previous, reason: `cannot write ${value} to ${OOM_SCORE_ADJ_PATH}: ${e.code ?? 'error'}: ${e.message} (lowering it needs CAP_SYS_RESOURCE)` };
  }
}
