// `ipam-shim agent`: the DaemonSet's one long-running process per node (src/agent/daemon.ts). Flags only; the
// DaemonSet fills them from its ConfigMap.
import { DEFAULT_CONF_DIR } from '../conflist.js';
import { defaultSource } from '../install/binary.js';
import { NETWORK_FLAG_HELP, NETWORK_FLAGS } from '../contract/network-flags.js';
import { DEFAULT_CNI_PATH, type NetworkSelection } from '../network/open.js';
import { parseListen } from '../agent/http.js';
import type { GcMode } from '../agent/reconcile.js';
import { DEFAULT_CONFIRM_AFTER_MS, DEFAULT_CONFIRM_PASSES } from '../gc/confirm.js';
import { parseShimConfig, DEFAULT_WATCH_INTERVAL_S } from './install.js';
import { parseArgv, UsageError, type Command, type CommandOutput } from '../contract/command.js';
import { stdoutLogger } from '../log.js';
import { agentSummary } from '../fix-list/about.js';
import { DEFAULT_CACHE_DIR, DEFAULT_GC_GRACE_S } from '../gc/from-cache.js';

export const DEFAULT_AGENT_LISTEN = '127.0.0.1:9740';
export const DEFAULT_AGENT_INTERVAL_S = 30;
/**
 * From SIGTERM to the answer (and so the exit) at most, whatever the agent is doing: past the pass's own stop grace
 * (src/agent/reconcile.ts PASS_BOUNDS.stopGraceMs, 32 s) and within the DaemonSet's terminationGracePeriodSeconds
 * (45), so the last log line is the agent's own, not a SIGKILL's silence.
 */
const AGENT_STOP_BOUND_MS = 40_000;

/** Every flag `agent` takes (test/unit/deploy.test.ts checks the DaemonSet against it). */
export const AGENT_FLAGS = {
  ...NETWORK_FLAGS,
  interval: { type: 'string', default: String(DEFAULT_AGENT_INTERVAL_S) },
  jitter: { type: 'string', default: '0.1' },
  gc: { type: 'string', default: 'report' },
  'gc-confirm-after': { type: 'string', default: String(DEFAULT_CONFIRM_AFTER_MS / 1000) },
  'gc-confirm-passes': { type: 'string', default: String(DEFAULT_CONFIRM_PASSES) },
  'grace-seconds': { type: 'string', default: String(DEFAULT_GC_GRACE_S) },
  'cache-dir': { type: 'string', default: DEFAULT_CACHE_DIR },
  'allow-empty-cache': { type: 'boolean', default: false },
  listen: { type: 'string', default: DEFAULT_AGENT_LISTEN },
  'probe-listen': { type: 'string' },
  'log-level': { type: 'string', default: 'info' },
  'cni-bin-dir': { type: 'string' },
  source: { type: 'string' },
  'shim-config': { type: 'string' },
  'no-install': { type: 'boolean', default: false },
} as const;

const USAGE = `ipam-shim agent [--gc report|confirmed|apply] [--interval SECONDS] [--jitter FRACTION]
  [--gc-confirm-after ${DEFAULT_CONFIRM_AFTER_MS / 1000}] [--gc-confirm-passes ${DEFAULT_CONFIRM_PASSES}] [--grace-seconds ${DEFAULT_GC_GRACE_S}] [--cache-dir ${DEFAULT_CACHE_DIR}]
  [--allow-empty-cache] [--listen HOST:PORT] [--probe-listen HOST:PORT] [--log-level info]
  [--conflist PATH | --conf-dir DIR] [--network NAME] [--cni-path DIRS]
  [--cni-bin-dir DIR] [--source PATH] [--shim-config JSON] [--no-install]
ipam-shim agent reload

Runs until SIGTERM: keeps the shim installed (install --watch), and every interval (± jitter; SIGHUP: now)
reconciles the node: GC of leaked pod addresses from the runtime's result cache (--gc report: only reported,
the default; confirmed: released once found leaked in every pass for --gc-confirm-after seconds and in at least
--gc-confirm-passes passes, the clock starting afresh when the agent restarts, the DaemonSet's default; apply:
released when found), residue removed for every pod the runtime's cache and the ledger know (pods the
shim never saw counted, a pod holding a reserved address reported), the IPv6 probe rewrite put back where due.
/metrics, /healthz and /readyz on --listen (default ${DEFAULT_AGENT_LISTEN}); /healthz and /readyz alone also on
--probe-listen when given (the kubelet's probes, on an address only the node reaches: the DaemonSet's 127.0.0.1,
so no client of the metrics port can fail them); logs as JSON lines on stdout.
/readyz is 200 only when the shim's entry is in the network config the runtime uses (the first in --conf-dir;
with --no-install and --conflist, that file: verified, never edited), the list's plugins (cilium-cni) take the
version the runtime sends them (asked their VERSION; the entry is never put into a list they refuse), and the
last pass completed.
Logs are its output (no --json). "agent reload", run in the agent's container (kubectl exec; the image has no
kill), sends the agent (pid 1, checked to be an ipam-shim agent) SIGHUP: a reconcile pass now.`;

const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']);

function seconds(flag: string, text: string, min: number): number {
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n) || n < min) throw new UsageError(`--${flag} takes seconds (≥ ${min}), got ${JSON.stringify(text)}`);
  return n;
}

export interface AgentSettings {
  network: NetworkSelection;
  gc: { mode: GcMode; cacheDir: string; graceMs: number; allowEmptyCache: boolean; confirmAfterMs: number; confirmPasses: number };
  intervalMs: number;
  jitter: number;
  listen: { host: string; port: number };
  /** --probe-listen: /healthz and /readyz alone, for the kubelet's probes; undefined: none. */
  probeListen: { host: string; port: number } | undefined;
  logLevel: string;
  /**
   * Where readiness looks for the shim's entry: the conf dir the runtime reads (installing, or no --conflist), or
   * the --conflist given with --no-install (the list Cilium writes from its ConfigMap: verified, never edited).
   */
  entryAt: { confDir: string } | { conflist: string };
}

/** Validates the agent's argv (no side effects): its settings, and what `install --watch` gets (absent with --no-install). */
export function parseAgentArgs(argv: string[]): { settings: AgentSettings; install: AgentInstall | undefined } {
  const { values: v } = parseArgv({ args: argv, strict: true, options: AGENT_FLAGS });
  const mode = v.gc;
  if (mode !== 'report' && mode !== 'apply' && mode !== 'confirmed')
    throw new UsageError(`--gc takes report, confirmed or apply, got ${JSON.stringify(mode)}`);
  const confirmAfterS = seconds('gc-confirm-after', v['gc-confirm-after'], 0);
  const confirmPasses = Number(v['gc-confirm-passes']);
  if (!Number.isInteger(confirmPasses) || confirmPasses < 1)
    throw new UsageError(`--gc-confirm-passes takes a whole number ≥ 1, got ${JSON.stringify(v['gc-confirm-passes'])}`);
  const intervalS = seconds('interval', v.interval, 0.1);
  const graceS = seconds('grace-seconds', v['grace-seconds'], 0);
  const jitter = Number(v.jitter);
  if (!Number.isFinite(jitter) || jitter < 0 || jitter >= 1) throw new UsageError('--jitter takes a fraction in [0, 1)');
  if (!LEVELS.has(v['log-level'])) throw new UsageError(`--log-level takes one of ${[...LEVELS].join(', ')}`);
  let listen;
  let probeListen;
  try {
    listen = parseListen(v.listen);
    probeListen = v['probe-listen'] === undefined ? undefined : parseListen(v['probe-listen'], '--probe-listen');
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  if (probeListen && probeListen.port === listen.port && probeListen.host === listen.host)
    throw new UsageError('--probe-listen must differ from --listen (the probes get a listener of their own)');
  const shimKeys = parseShimConfig(v['shim-config']);
  let install: AgentInstall | undefined;
  if (!v['no-install']) {
    let source: string;
    try {
      source = v.source ?? defaultSource();
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
    install = {
      source,
      binDir: v['cni-bin-dir'] ?? DEFAULT_CNI_PATH,
      confDir: v['conf-dir'] ?? DEFAULT_CONF_DIR,
      shimKeys,
      intervalMs: DEFAULT_WATCH_INTERVAL_S * 1000,
    };
  }
  const network: NetworkSelection = { conflist: v.conflist, confDir: v['conf-dir'], network: v.network, cniPath: v['cni-path'] };
  const entryAt = !install && v.conflist ? { conflist: v.conflist } : { confDir: v['conf-dir'] ?? DEFAULT_CONF_DIR };
  return {
    settings: {
      network,
      entryAt,
      gc: {
        mode,
        cacheDir: v['cache-dir'],
        graceMs: graceS * 1000,
        allowEmptyCache: v['allow-empty-cache'],
        confirmAfterMs: confirmAfterS * 1000,
        confirmPasses,
      },
      intervalMs: intervalS * 1000,
      jitter,
      listen,
      probeListen,
      logLevel: v['log-level'],
    },
    install,
  };
}

interface AgentInstall {
  source: string;
  binDir: string;
  confDir: string;
  /** undefined: keep the settings of the entry already there (install's own rule). */
  shimKeys: Record<string, unknown> | undefined;
  intervalMs: number;
}

export const agentCommand: Command = {
  name: 'agent',
  summary: agentSummary(),
  usage: USAGE,
  options: AGENT_FLAGS,
  flagHelp: {
    ...NETWORK_FLAG_HELP,
    interval: { value: 'SECONDS', text: `time between reconcile passes (default ${DEFAULT_AGENT_INTERVAL_S}), e.g. 60` },
    jitter: { value: 'FRACTION', text: 'each wait is interval × (1 ± this), in [0, 1) (default 0.1), e.g. 0.2' },
    gc: {
      value: 'report|confirmed|apply',
      text: 'leaked pod addresses: only report them (default), release them once confirmed over the window below, or release them when found, e.g. confirmed',
    },
    'gc-confirm-after': {
      value: 'SECONDS',
      text: `confirmed: a leak must be found in every pass for this long before it is released (default ${DEFAULT_CONFIRM_AFTER_MS / 1000}), e.g. 1800`,
    },
    'gc-confirm-passes': {
      value: 'N',
      text: `confirmed: … and in at least this many passes (default ${DEFAULT_CONFIRM_PASSES}), e.g. 5`,
    },
    'grace-seconds': { value: 'N', text: `GC keeps attachments younger than this (default ${DEFAULT_GC_GRACE_S}), e.g. 300` },
    'cache-dir': { value: 'DIR', text: `the runtime's CNI cache (default ${DEFAULT_CACHE_DIR}), e.g. /host/var/lib/cni` },
    'allow-empty-cache': { text: 'GC releases even when the cache is missing or empty while pods are recorded' },
    listen: { value: 'HOST:PORT', text: `where /metrics, /healthz, /readyz are served (default ${DEFAULT_AGENT_LISTEN}), e.g. 10.224.0.4:9740` },
    'probe-listen': { value: 'ADDR', text: 'HOST:PORT serving /healthz and /readyz alone, for the kubelet (default: none), e.g. 127.0.0.1:9741' },
    'log-level': { value: 'LEVEL', text: 'trace, debug, info (default), warn, error, fatal or silent, e.g. debug' },
    'cni-bin-dir': { value: 'DIR', text: 'where to install the executable (default /opt/cni/bin), e.g. /host/opt/cni/bin' },
    source: { value: 'PATH', text: 'the executable to install (default: this one), e.g. /ipam-shim' },
    'shim-config': { value: 'JSON', text: 'the chained entry\'s settings (as install --shim-config), e.g. \'{"reservedCIDRs":["10.224.0.0/24"]}\'' },
    'no-install': { text: 'never install the executable nor edit the entry: verify it, watching the list (/readyz follows it at once)' },
  },
  examples: [
    'ipam-shim agent',
    'ipam-shim agent --gc apply --interval 60 --listen 0.0.0.0:9740',
    'ipam-shim agent --no-install --conf-dir /host/etc/cni/net.d --log-level debug',
    'kubectl -n kube-system exec ds/ipam-shim -- ipam-shim agent reload',
  ],
  json: false,
  exitStatus:
    '0 stopped by SIGTERM/SIGINT (every problem meanwhile is logged and counted, never an exit); 1 never; 2 usage; 3 could not run: it could not start (e.g. the --listen address is taken). reload: 0 signalled; 3 pid 1 is no ipam-shim agent (nothing signalled)',
  async run(argv, ctx): Promise<CommandOutput> {
    if (argv[0] === 'reload') return (await import('./agent-reload.js')).agentReload(argv.slice(1));
    const { settings, install } = parseAgentArgs(argv);
    const { runAgent } = await import('../agent/daemon.js');
    // JSON lines on stdout, written synchronously (a SIGTERM'd agent loses no line).
    const log = stdoutLogger(settings.logLevel, { component: 'agent' });
    const ac = new AbortController();
    const stop = (sig: string) => () => {
      log.info({ signal: sig }, 'stopping');
      ac.abort();
    };
    const onTerm = stop('SIGTERM');
    const onInt = stop('SIGINT');
    process.once('SIGTERM', onTerm);
    process.once('SIGINT', onInt);
    let bound: NodeJS.Timeout | undefined;
    const overdue = new Promise<undefined>((resolve) =>
      ac.signal.addEventListener('abort', () => (bound = setTimeout(resolve, AGENT_STOP_BOUND_MS, undefined)), { once: true }),
    );
    try {
      const summary = await Promise.race([
        runAgent(
          {
            reconcile: { network: settings.network, env: ctx.env, run: ctx.run, gc: settings.gc },
            intervalMs: settings.intervalMs,
            jitter: settings.jitter,
            listen: settings.listen,
            probeListen: settings.probeListen,
            install,
            entryAt: settings.entryAt,
            log,
          },
          ac.signal,
        ),
        overdue,
      ]);
      if (!summary) {
        // Something under way never reached a safe point (a file system call that does not return): exit anyway.
        log.error({ boundMs: AGENT_STOP_BOUND_MS }, 'agent stopped: the work under way did not end within the stop bound and is left behind');
        return { data: { forced: true }, text: '', exitCode: 0 };
      }
      // Everything was logged as it happened; stdout carries the log lines, so no text is added after them.
      return { data: summary, text: '', exitCode: 0 };
    } finally {
      clearTimeout(bound);
      process.removeListener('SIGTERM', onTerm);
      process.removeListener('SIGINT', onInt);
    }
  },
};
