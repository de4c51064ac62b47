// The operator commands' network flags: which conflist and network to open (src/network/open.ts opens it the
// way the plugin would see it: same NetConf, ledger, delegate), so CLI and verbs decide alike.
import { openConflistNetwork, type OpenNetwork } from '../network/open.js';
import type { Run } from '../effects/exec.js';

/** parseArgs options every network-scoped command accepts. */
export const NETWORK_FLAGS = {
  conflist: { type: 'string' },
  'conf-dir': { type: 'string' },
  network: { type: 'string' },
  'cni-path': { type: 'string' },
} as const;

export interface NetworkFlags {
  conflist?: string | undefined;
  'conf-dir'?: string | undefined;
  network?: string | undefined;
  'cni-path'?: string | undefined;
}

export function openNetwork(flags: NetworkFlags, run: Run, env: NodeJS.ProcessEnv, waitMs = 0): Promise<OpenNetwork> {
  return openConflistNetwork({ conflist: flags.conflist, confDir: flags['conf-dir'], network: flags.network, cniPath: flags['cni-path'] }, run, env, { waitMs });
}
