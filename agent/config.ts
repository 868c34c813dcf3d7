/**
 * Loading the config file: read, parse JSON, validate with the zod schema (config-schema/config.ts), resolve a
 * relative `source.path` against the config file's folder. Every error names the file, the field path, the value
 * and what was expected.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ConfigSchema, type Config } from '../config-schema/config.ts';

/** A config that could not be loaded; `message` is ready to print. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** Describes zod issues as `field.path: expected X, got VALUE` lines. */
export function formatIssues(issues: ReadonlyArray<{ path: PropertyKey[]; message: string; code?: string; keys?: string[] }>, input: unknown): string[] {
  return issues.map((i) => {
    let v: unknown = input;
    for (const p of i.path) v = v && typeof v === 'object' ? (v as Record<PropertyKey, unknown>)[p] : undefined;
    const path = i.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('').replace(/^\./, '') || '(top level)';
    if (i.code === 'unrecognized_keys' && i.keys) return `${path}: unknown field${i.keys.length > 1 ? 's' : ''} ${i.keys.map((k) => JSON.stringify(k)).join(', ')}`;
    const got = v === undefined ? '' : ` (got ${JSON.stringify(v)?.slice(0, 80)})`;
    return `${path}: ${i.message}${got}`;
  });
}

/**
 * Loads and validates the config at `path`.
 * @throws ConfigError naming the file and every invalid field.
 */
export function loadConfig(path: string): Config {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`${path}: cannot read the config file: ${(err as Error).message}`);
  }
  return parseConfig(text, path);
}

/** Validates config text; `path` is used for messages and to resolve a relative `source.path`. */
export function parseConfig(text: string, path: string): Config {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`${path}: not valid JSON: ${(err as Error).message}`);
  }
  const r = ConfigSchema.safeParse(json);
  if (!r.success) {
    throw new ConfigError(`${path}: invalid config:\n${formatIssues(r.error.issues as never, json).map((l) => `  ${l}`).join('\n')}`);
  }
  const cfg = r.data;
  if (cfg.source.type === 'file') cfg.source.path = resolve(dirname(resolve(path)), cfg.source.path);
  return cfg;
}
