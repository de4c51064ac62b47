// Build time (scripts/build.mjs): one V8 code cache of the bundle asset for one verb, made by the runtime the
// executable embeds under its own flags (a cache made under other flags is rejected: scripts/sea.mjs). The
// bundle is compiled exactly as the executable's loader compiles it (scripts/sea-loader.cjs), its calls for
// that verb are run once on made-up input (src/warm.ts through src/main.ts's build hook), and the cache is then
// taken: it holds the bytecode of every function those calls ran.
//   node --no-sparkplug --no-maglev scripts/code-cache.mjs BUNDLE OUT [COMMAND…]
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { Script } from 'node:vm';

const [given, out, ...commands] = process.argv.slice(2);
const source = resolve(given);
const script = new Script(readFileSync(source, 'utf8'), { filename: 'ipam-shim.js' });
const warmed = new Promise((resolve, reject) => {
  globalThis[Symbol.for('ipam-shim.code-cache-build')] = { commands, done: (e) => (e ? reject(e) : resolve()) };
});
const module = { exports: {} };
script.runInThisContext()(module.exports, createRequire(source), module, source, dirname(source));
await warmed;
const data = script.createCachedData();
if (data.length === 0) throw new Error(`code-cache: an empty cache for ${commands.join(',') || 'the top level'}`);
writeFileSync(out, data);
