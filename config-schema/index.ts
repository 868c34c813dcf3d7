/** The zod schemas: the single source of truth for the config, the Kubernetes objects we read, and the snapshot. */
export * from './config.ts';
export * from './kubernetes.ts';
export * from './snapshot.ts';
export { configJsonSchema } from './json-schema.ts';
