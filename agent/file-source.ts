/**
 * The file source, for bare metal: a Kubernetes `List` of Services, EndpointSlices and an optional Node, as
 * `kubectl get services,endpointslices -A -o json` prints it. The file is watched and reloaded when it changes.
 * A file that cannot be read or parsed keeps the last good state (the running ruleset stays) and is reported;
 * the next change is tried again. Items of other kinds are ignored; invalid objects are skipped by ClusterState.
 */
import { readFileSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import { KubeListSchema } from '../config-schema/kubernetes.ts';
import type { ClusterState, ObjectKind } from './cluster-state.ts';
import { describeIssues } from './cluster-state.ts';

/**
 * Reads and parses a List file.
 * @throws Error naming the file, and the JSON position or the field, when it is not a valid List.
 */
export function readListFile(path: string, content?: string): Record<ObjectKind, unknown[]> {
  let text: string;
  try {
    text = content ?? readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`${path}: cannot read the services file: ${(err as Error).message}`, { cause: err });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`${path}: not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  const r = KubeListSchema.safeParse(json);
  if (!r.success) throw new Error(`${path}: not a Kubernetes List: ${describeIssues(r.error, json)}`);
  const out: Record<ObjectKind, unknown[]> = { Service: [], EndpointSlice: [], Node: [] };
  for (const item of r.data.items) {
    const kind = item.kind;
    if (kind === 'Service' || kind === 'EndpointSlice' || kind === 'Node') out[kind].push(item);
  }
  return out;
}

/** Logging of the file source. */
export interface FileSourceLogger {
  info(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Loads the file into the state now, then on every change; calls `onChange` after each successful load. */
export class FileSource {
  readonly #path: string;
  readonly #state: ClusterState;
  readonly #log: FileSourceLogger;
  readonly #onChange: () => void;
  #watcher: FSWatcher | null = null;
  #debounce: NodeJS.Timeout | null = null;
  #lastText: string | null = null;

  constructor(path: string, state: ClusterState, log: FileSourceLogger, onChange: () => void) {
    this.#path = path;
    this.#state = state;
    this.#log = log;
    this.#onChange = onChange;
  }

  /**
   * The initial load. @throws Error (file, position or field) when the file is invalid: the agent must not start.
   */
  start(): void {
    this.#load(true);
    // Watch the directory: editors and `mv` replace the file, which a watch on the file itself would lose.
    this.#watcher = watch(dirname(this.#path), (_event, name) => {
      if (name !== null && name !== basename(this.#path)) return;
      if (this.#debounce) clearTimeout(this.#debounce);
      this.#debounce = setTimeout(() => this.#reload(), 50);
    });
  }

  stop(): void {
    this.#watcher?.close();
    this.#watcher = null;
    if (this.#debounce) clearTimeout(this.#debounce);
  }

  #reload(): void {
    try {
      if (this.#load(false)) this.#onChange();
    } catch (err) {
      this.#log.error({ file: this.#path, err: (err as Error).message }, 'services file is invalid; keeping the last good state');
    }
  }

  /** Returns true when the content changed. */
  #load(initial: boolean): boolean {
    let text: string;
    try { text = readFileSync(this.#path, 'utf8'); } catch (err) {
      throw new Error(`${this.#path}: cannot read the services file: ${(err as Error).message}`, { cause: err });
    }
    if (text === this.#lastText) return false;
    const objects = readListFile(this.#path, text);
    this.#lastText = text;
    this.#state.replace('Node', objects.Node);
    this.#state.replace('Service', objects.Service);
    this.#state.replace('EndpointSlice', objects.EndpointSlice);
    this.#log.info({ file: this.#path, services: objects.Service.length, endpointSlices: objects.EndpointSlice.length, nodes: objects.Node.length, initial }, 'services file loaded');
    return true;
  }
}
