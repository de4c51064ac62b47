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

/** `--help` lines of NETWORK_FLAGS. */
export const NETWORK_FLAG_HELP = {
  conflist: {
    value: 'PATH',
    text: 'the conflist holding the shim (default: the one in --conf-dir that does), e.g. /etc/cni/net.d/05-cilium.conflist',
  },
  'conf-dir': { value: 'DIR', text: 'where to look for it (default /etc/cni/net.d), e.g. /host/etc/cni/net.d' },
  network: { value: 'NAME', text: 'the network, when several conflists hold the shim, e.g. cilium' },
  'cni-path': { value: 'DIRS', text: 'where plugins are looked up (default $CNI_PATH, else /opt/cni/bin), e.g. /opt/cni/bin:/usr/lib/cni' },
} as const;

export interface NetworkFlags {
  conflist?: string | undefined;
  'conf-dir'?: string | undefined;
  network?: string | undefined;
  'cni-path'?: string | undefined;
}

export function openNetwork(flags: NetworkFlags, run: Run, env: NodeJS.ProcessEnv, waitMs = 0): Promise<OpenNetwork> {
  return openConflistNetwork({ conflist: flags.conflist, confDir: flags['conf-dir'], network: flags.network, cniPath: flags['cni-path'] }, run, env, {
    waitMs,
  });
}
