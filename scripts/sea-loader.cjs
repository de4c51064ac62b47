// The single executable's main when it boots from a code cache (scripts/build.mjs, IPAM_SHIM_BOOT=code-cache):
// the bundle is an asset, compiled here with the V8 code cache made at build time for this call's verb
// (scripts/code-cache.mjs), so a call deserialises the compiled code of what it runs and evaluates only the
// modules it imports. Plain CommonJS: it runs as the SEA's main, whose `require` loads built-ins only.
const { getAsset, getRawAsset } = require('node:sea');
const { Script } = require('node:vm');

const command = process.env.CNI_COMMAND?.toUpperCase();
// Which cache: each was made after a warm call of that verb; any cache matches the source (V8 checks), so the
// rare verbs share one. No CNI_COMMAND: the CLI and the node agent.
const CACHE = { STATUS: 'STATUS', ADD: 'ADD', CHECK: 'ADD', DEL: 'DEL', GC: 'DEL' };
const KEYS = ['TOP', 'STATUS', 'ADD', 'DEL'];
const cacheOf = (key) => {
  try {
    return new Uint8Array(getRawAsset(`code-cache-${key}`));
  } catch {
    return undefined; // none (the build makes one for each of KEYS): compiled from source
  }
};
const source = getAsset('ipam-shim.js', 'utf8');
// `filename`: the check compiles the same source once per cache, and V8 answers a second compile of a source with
// the same name from its in-process compilation cache without reading the cached data (a garbage cache then
// passes as accepted): each check compile gets a name of its own.
const compile = (key, filename = 'ipam-shim.js') => {
  const cachedData = cacheOf(key);
  const script = new Script(source, { filename, cachedData });
  return { script, codeCache: cachedData === undefined ? 'none' : script.cachedDataRejected ? 'rejected' : 'accepted' };
};
const { script, codeCache } = compile((command && CACHE[command]) || 'TOP');
// How this process started, for `ipam-shim --version` (src/startup.ts); `caches` compiles each (the build's check).
globalThis[Symbol.for('ipam-shim.boot')] = {
  codeCache,
  caches: () => Object.fromEntries(KEYS.map((k) => [k, compile(k, `ipam-shim.js (check ${k})`).codeCache])),
};
script.runInThisContext()(module.exports, require, module, __filename, __dirname);
