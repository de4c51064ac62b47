// `ipam-shim --version`: the shim's version and the Node.js that runs it. The version is package.json's, put
// into the bundle by the build (scripts/build.mjs `define`); only unbundled code (tests from source) lacks it.
// The runtime matters to an operator: the single executable embeds its own Node.js (docs/build.md).
import { startup } from '../startup.js';

/** Two lines: `ipam-shim VERSION`, then `node vX.Y.Z (embedded: single executable[, startup snapshot][, flags …] | external: PATH)`. */
export function versionText(): string {
  const version = process.env.IPAM_SHIM_VERSION ?? 'unbundled';
  const sea = process.getBuiltinModule('node:sea')?.isSea() === true;
  // The single executable's own node/V8 flags (scripts/build.mjs SEA_EXEC_ARGV), and any NODE_OPTIONS added.
  const flags = process.execArgv.length ? `, flags ${process.execArgv.join(' ')}` : '';
  return `ipam-shim ${version}\nnode ${process.version} (${sea ? `embedded: single executable${startup.fromSnapshot ? ', startup snapshot' : ''}${flags}` : `external: ${process.execPath}`})\n`;
}
