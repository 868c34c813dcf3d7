/** JSON Schema export of the agent config (`nftproxy config schema`), through zod 4's `z.toJSONSchema`. */
import { z } from 'zod';
import { ConfigSchema } from './config.ts';

/** The JSON Schema (draft 2020-12) of the config file as a user writes it (input side: durations are strings). */
export function configJsonSchema(): Record<string, unknown> {
  return {
    title: 'nftproxy configuration (KubeProxyConfiguration-compatible)',
    ...z.toJSONSchema(ConfigSchema, { io: 'input', unrepresentable: 'any' }),
  };
}
