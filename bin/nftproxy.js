#!/usr/bin/env node
// nftproxy command line. Node 24 runs the TypeScript sources directly (type stripping).
import { main } from '../agent/cli.ts';

main(process.argv.slice(2)).then((code) => process.exit(code), (err) => {
  process.stderr.write(`nftproxy: ${err?.name === 'ConfigError' ? err.message : err?.stack ?? String(err)}\n`);
  process.exit(1);
});
