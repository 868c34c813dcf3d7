/**
 * Watching the config file, as kube-proxy does (kubernetes `cmd/kube-proxy/app/server.go`; reference
 * kube-proxy-nftables.md §10.3): when the file's content changes, the agent exits cleanly (exit 0) so that its
 * supervisor (kubelet, systemd `Restart=`) restarts it with the new file. Unlike upstream, a new content that does
 * not validate does NOT stop the agent: it is reported and the agent keeps running on the config it started with;
 * a later valid change still restarts it.
 *
 * The watch is on the file's FOLDER, not on the file: editors and `mv` replace the file, and a Kubernetes ConfigMap
 * volume swaps a `..data` symlink next to it, which a watch on the file itself would miss. Every event in the folder
 * re-reads the file and compares the content with the content the agent started with, so unrelated events are
 * harmless.
 */
import { readFileSync, watch, type FSWatcher } from 'node:fs';
import { dirname } from 'node:path';
import { parseConfig } from './config.ts';

/** What a look at the file found. `unchanged` also covers "changed back to the running content". */
export type ConfigCheck =
  | { action: 'unchanged' }
  | { action: 'changed' }
  | { action: 'invalid'; message: string; text: string | null };

/** Logging of the watcher (pino fits). */
export interface ConfigWatchLogger {
  info(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Options of {@link ConfigWatcher}. */
export interface ConfigWatchOptions {
  /** The config file the agent was started with. */
  path: string;
  /** The text the running config was parsed from; later content is compared with it. */
  runningText: string;
  log: ConfigWatchLogger;
  /** Called once, after a valid change was logged: the agent should stop and exit 0. */
  onChange: () => void;
  /** Debounce of folder events (ms, default 100): a ConfigMap update is several renames. */
  debounceMs?: number;
  /** File reading, injectable for tests (default fs.readFileSync utf8). */
  readFile?: (path: string) => string;
}

/** Watches the config file; see the module comment. */
export class ConfigWatcher {
  readonly #o: ConfigWatchOptions;
  #watcher: FSWatcher | null = null;
  #timer: NodeJS.Timeout | null = null;
  /** The last content reported as invalid, so one bad save is reported once. */
  #lastInvalid: string | null = null;
  #fired = false;

  constructor(opts: ConfigWatchOptions) {
    this.#o = opts;
  }

  /**
   * Looks at the file now and decides. Pure apart from reading the file; never throws: a file that cannot be read
   * (e.g. removed during a rename) is `invalid` with `text` null.
   */
  check(): ConfigCheck {
    const { path, runningText } = this.#o;
    let text: string;
    try {
      text = (this.#o.readFile ?? ((p: string) => readFileSync(p, 'utf8')))(path);
    } catch (err) {
      return { action: 'invalid', message: `${path}: cannot read the config file: ${(err as Error).message}`, text: null };
    }
    if (text === runningText) return { action: 'unchanged' };
    try {
      parseConfig(text, path);
    } catch (err) {
      return { action: 'invalid', message: (err as Error).message, text };
    }
    return { action: 'changed' };
  }

  /** Starts watching the folder of the config file. */
  start(): void {
    this.#watcher = watch(dirname(this.#o.path), () => {
      if (this.#timer) clearTimeout(this.#timer);
      this.#timer = setTimeout(() => this.handleEvent(), this.#o.debounceMs ?? 100);
    });
    this.#watcher.on('error', (err) => this.#o.log.error({ file: this.#o.path, err: err.message }, 'config file watch failed; changes will not restart the agent'));
  }

  /** Stops watching (idempotent). */
  stop(): void {
    this.#watcher?.close();
    this.#watcher = null;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  /** One (debounced) folder event: check the file, then exit on a valid change or report an invalid one once. */
  handleEvent(): void {
    if (this.#fired) return;
    const r = this.check();
    if (r.action === 'changed') {
      this.#fired = true;
      this.#o.log.info({ file: this.#o.path }, 'the config file changed; exiting so that the supervisor restarts nftproxy with it');
      this.stop();
      this.#o.onChange();
    } else if (r.action === 'invalid') {
      if (r.text !== null && r.text === this.#lastInvalid) return; // the same bad content: reported already
      this.#lastInvalid = r.text;
      this.#o.log.error({ file: this.#o.path, err: r.message }, 'the config file changed but is not valid; keeping the running config');
    }
  }
}
