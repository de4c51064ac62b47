// The one place that opens a network's dependencies (ledger, delegate, logger, Run) from its config: the verbs
// (from the request), the CLI, doctor and the node agent (from the node's conflist) all build them here, so they
// see the same network alike. Imports nothing from cli/, doctor/ or verbs/.
import { join } from 'node:path';
import { loadShimConflist, DEFAULT_CONF_DIR, type ShimConflist } from '../conflist.js';
import { Delegate, type IpamDelegate } from '../effects/delegate.js';
import { Ledger } from '../effects/ledger.js';
import type { LedgerStore } from '../ledger/store.js';
import { createLogger, logBound, type Logger } from '../log.js';
import type { Run } from '../effects/exec.js';
import type { NetConf } from '../cni/config.js';
import { cniPathOf } from '../cni/env.js';

export const DEFAULT_CNI_PATH = '/opt/cni/bin';

/** What every piece of code acting on one network works with. */
export interface NetworkDeps {
  conf: NetConf;
  ledger: LedgerStore;
  /** The wrapped IPAM plugin; required in the IPAM slot, optional when chained (GC/STATUS/agent IPs use it). */
  delegate: IpamDelegate | undefined;
  log: Logger;
  run: Run;
}

/** The real (file, executable) ledger and delegate. */
export interface OpenedDeps extends NetworkDeps {
  ledger: Ledger;
  delegate: Delegate | undefined;
}

/** The ledger and the delegate of `conf`'s network. `env` is the delegate's environment (it inherits CNI_*). */
export function networkDeps(conf: NetConf, o: { cniPath: string[]; env: NodeJS.ProcessEnv; log: Logger; run: Run }): OpenedDeps {
  const { settings } = conf;
  const delegate = settings.delegate
    ? new Delegate({
        type: settings.delegate.type,
        cniPath: o.cniPath,
        env: o.env,
        timeoutMs: settings.delegateTimeoutMs,
        log: o.log,
        cacheDir: join(settings.stateDir, '.delegate-versions'),
        run: o.run,
      })
    : undefined;
  return { conf, ledger: new Ledger(settings.stateDir, conf.name), delegate, log: o.log, run: o.run };
}

/** Which conflist and network to open (defaults: the node's conf dir, the only shim network, CNI_PATH). */
export interface NetworkSelection {
  conflist?: string | undefined;
  confDir?: string | undefined;
  network?: string | undefined;
  cniPath?: string | undefined;
}

/** The CNI path a selection names: --cni-path, else CNI_PATH, else the default bin dir. */
export const selectedCniPath = (sel: NetworkSelection, env: NodeJS.ProcessEnv): string[] =>
  cniPathOf(sel.cniPath ?? env.CNI_PATH ?? DEFAULT_CNI_PATH);

/** A network opened from the node's conflist, the way the plugin would see it. */
export interface OpenNetwork extends OpenedDeps {
  shim: ShimConflist;
  cniPath: string[];
}

/**
 * `o.log`: the caller's own logger (the node agent, every pass: its stdout). Without one, the network's log file
 * is opened (log.ts shares one descriptor per file per process, so opening a network again holds nothing more).
 */
export async function openConflistNetwork(
  sel: NetworkSelection,
  run: Run,
  env: NodeJS.ProcessEnv,
  o: { waitMs?: number; log?: Logger } = {},
): Promise<OpenNetwork> {
  const shim = await loadShimConflist({
    ...(sel.conflist ? { conflist: sel.conflist } : {}),
    confDir: sel.confDir ?? DEFAULT_CONF_DIR,
    ...(sel.network ? { network: sel.network } : {}),
    waitMs: o.waitMs ?? 0,
  });
  const { conf } = shim;
  const cniPath = selectedCniPath(sel, env);
  const log =
    o.log?.child({ network: conf.name }) ??
    createLogger({
      file: conf.settings.logFile,
      level: conf.settings.logLevel,
      bound: logBound(conf.settings),
      base: { command: 'cli', network: conf.name },
    });
  return { ...networkDeps(conf, { cniPath, env: { ...env, CNI_PATH: cniPath.join(':') }, log, run }), shim, cniPath };
}
