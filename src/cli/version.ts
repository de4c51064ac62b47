// `ipam-shim version` (and `--version`): the shim's version and the Node.js that runs it. The version and the
// commit are put into the bundle by the build (scripts/build.mjs `define`); only unbundled code (tests from
// source) lacks them. The runtime matters to an operator: the single executable embeds its own Node.js (docs/build.md).
import { startup } from '../startup.js';
import { parseArgv, type Command } from '../contract/command.js';

const sea = () => process.getBuiltinModule('node:sea')?.isSea() === true;

/** Two lines: `ipam-shim VERSION`, then `node vX.Y.Z (embedded: single executable[, startup snapshot][, flags …] | external: PATH)`. */
export function versionText(): string {
  const version = process.env.IPAM_SHIM_VERSION ?? 'unbundled';
  // The single executable's own node/V8 flags (scripts/build.mjs SEA_EXEC_ARGV), and any NODE_OPTIONS added.
  const flags = process.execArgv.length ? `, flags ${process.execArgv.join(' ')}` : '';
  const how = startup.fromSnapshot ? ', startup snapshot' : startup.codeCache ? `, code cache ${startup.codeCache}` : '';
  return `ipam-shim ${version}\nnode ${process.version} (${sea() ? `embedded: single executable${how}${flags}` : `external: ${process.execPath}`})\n`;
}

/** What `version --json` and `--version --json` print. */
export function versionJson(): Record<string, unknown> {
  return {
    version: process.env.IPAM_SHIM_VERSION ?? 'unbundled',
    commit: process.env.IPAM_SHIM_COMMIT ?? 'unknown',
    node: process.version,
    runtime: sea() ? 'embedded' : 'external',
    ...(sea()
      ? { startupSnapshot: startup.fromSnapshot, ...(startup.caches ? { codeCaches: startup.caches() } : {}), flags: process.execArgv }
      : { execPath: process.execPath }),
  };
}

export const versionCommand: Command = {
  name: 'version',
  summary: "print the shim's version, the commit it was built from (--json) and the Node.js that runs it",
  usage: 'ipam-shim version [--json]      (also: ipam-shim --version [--json])',
  options: {},
  flagHelp: {},
  examples: ['ipam-shim version', 'ipam-shim version --json | jq -r .commit'],
  exitStatus: '0 printed; 1 never; 2 usage; 3 never',
  async run(argv) {
    parseArgv({ args: argv, options: {}, strict: true });
    return { data: versionJson(), text: versionText(), exitCode: 0 };
  },
};
