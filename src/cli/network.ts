// Shared by the operator commands: open the shim's network from the node's conflist the way the plugin
// would see it (same NetConf, ledger, delegate), so CLI and verbs decide alike.
import { join } from 'node:path';
import { loadShimConflist, DEFAULT_CONF_DIR, type ShimConflist } from '../conflist.js';
import { Delegate } from '../effects/delegate.js';
import { Ledger } from '../effects/ledger.js';
import { createLogger, type Logger } from '../log.js';
import type { Run } from '../effects/exec.js';
import type { NetConf } from '../cni/config.js';

export const DEFAULT_CNI_PATH = '/opt/cni/bin';

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

export interface OpenNetwork {
  shim: ShimConflist;
  conf: NetConf;
  ledger: Ledger;
  delegate: Delegate | undefined;
  log: Logger;
  run: Run;
  cniPath: string[];
}

export async function openNetwork(flags: NetworkFlags, run: Run, env: NodeJS.ProcessEnv, waitMs = 0): Promise<OpenNetwork> {
  const shim = await loadShimConflist({
    ...(flags.conflist ? { conflist: flags.conflist } : {}),
    confDir: flags['conf-dir'] ?? DEFAULT_CONF_DIR,
    ...(flags.network ? { network: flags.network } : {}),
    waitMs,
  });
  const { conf } = shim;
  const cniPath = (flags['cni-path'] ?? env.CNI_PATH ?? DEFAULT_CNI_PATH).split(':').filter(Boolean);
  const log = createLogger({ file: conf.settings.logFile, level: conf.settings.logLevel, base: { command: 'cli', network: conf.name } });
  const delegate = conf.settings.delegate
    ? new Delegate({
        type: conf.settings.delegate.type,
        cniPath,
        env: { ...env, CNI_PATH: cniPath.join(':') },
        timeoutMs: conf.settings.delegateTimeoutMs,
        log,
        cacheDir: join(conf.settings.stateDir, '.delegate-versions'),
        run,
      })
    : undefined;
  return { shim, conf, ledger: new Ledger(conf.settings.stateDir, conf.name), delegate, log, run, cniPath };
}
