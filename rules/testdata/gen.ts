/**
 * Dev script: writes rules/testdata/<name>.nft for every golden case (our render output).
 * Run: ./node_modules/.bin/node rules/testdata/gen.ts   (then rules/testdata/capture.sh, as root)
 */
import { writeFileSync } from 'node:fs';
import { render } from '../render.ts';
import { GOLDENS } from './goldens.ts';

const dir = new URL('.', import.meta.url);
for (const [name, make] of Object.entries(GOLDENS)) {
  writeFileSync(new URL(`${name}.nft`, dir), render(make()));
  console.log(`wrote ${name}.nft`);
}
