// The node agent's process: `install --watch` (binary and conflist entry kept in place) side by side with a
// reconcile pass every interval (± jitter, so a fleet's nodes do not hit their runtimes in step; SIGHUP runs
// one at once; a pass that did not complete is retried after 250 ms, doubling up to the interval, and at once when
// the watcher has checked the entry), HTTP for /metrics /healthz /readyz, logs as JSON lines on stdout (`kubectl logs`: the agent is
// not the plugin, its stdout carries no protocol). `signal` (SIGTERM) stops it: the pass in flight stops at its
// next safe point, or is left behind after a grace (src/agent/reconcile.ts PASS_BOUNDS), the watcher and the
// server close; src/cli/agent.ts bounds the whole stop (AGENT_STOP_BOUND_MS).
import type { Logger } from '../log.js';
import { shimEntryInUse, type EntryInUse } from '../conflist.js';
import { watchInstall, type WatchOptions, type WatchSummary } from '../install/install.js';
import { startHttp, type HealthState } from './http.js';
import { AgentMetrics } from './metrics.js';
import { PersistingProblems } from './problems.js';
import { reconcileOnce, type PassMemory, type PassReport, type ReconcileOptions } from './reconcile.js';
import { withDefaultTimeout } from '../effects/exec.js';
import type { ListVerdict } from '../cni/list-versions.js';
import { selectedCniPath } from '../network/open.js';
import { judgeRuntimeList } from './list-versions.js';
import { watchList } from '../install/list-watch.js';
import { keepReaderWarm } from '../gc/cache-reader.js';

export interface AgentOptions {
  reconcile: Omit<ReconcileOptions, 'signal' | 'metrics' | 'log' | 'memory' | 'beat'>;
  intervalMs: number;
  /** Each wait is intervalMs × (1 ± jitter), jitter in [0, 1). */
  jitter: number;
  listen: { host: string; port: number };
  /** Where /healthz and /readyz are served alone, for the kubelet's probes (the DaemonSet: 127.0.0.1); absent: none. */
  probeListen?: { host: string; port: number } | undefined;
  /** What `install --watch` gets; absent: the agent does not install (tests, or an operator's choice). */
  install: Omit<WatchOptions, 'signal' | 'log'> | undefined;
  /**
   * Where readiness looks for the shim's entry: the conf dir (its first config is the one the runtime uses), or,
   * with installing disabled, the conflist the agent was pointed at.
   */
  entryAt: { confDir: string } | { conflist: string };
  log: Logger;
  /** Called once the HTTP server listens (tests and the CLI log the address). */
  onListening?: (address: string) => void;
}

export interface AgentSummary {
  passes: number;
  last: PassReport | undefined;
  install: WatchSummary | undefined;
}

/** The wait before the next pass. */
export function nextDelay(intervalMs: number, jitter: number, random = Math.random): number {
  return Math.max(0, Math.round(intervalMs * (1 + jitter * (2 * random() - 1))));
}

/** The first wait after a pass that did not complete; it doubles with every further one, up to the interval. */
const RETRY_FIRST_MS = 250;

/** The wait before retrying after the `n`th pass in a row that did not complete (n ≥ 1). */
function retryDelay(n: number, intervalMs: number): number {
  return Math.min(intervalMs, RETRY_FIRST_MS * 2 ** Math.min(n - 1, 20));
}

/**
 * Logs the entry's state when it changes (not every pass): with installing disabled the agent only verifies, and
 * this line, /readyz, doctor and ipam_shim_agent_conflist_entry_in_use are how a missing entry is seen.
 */
function logEntryChange(log: Logger, before: EntryInUse | undefined, now: EntryInUse, installing: boolean): EntryInUse {
  const same = before && before.inUse === now.inUse && before.path === now.path && (before.inUse || now.inUse || before.reason === now.reason);
  if (same) return now;
  if (now.inUse) log.info({ conflist: now.path }, "the shim's entry is in the network config the runtime uses");
  // Not in use yet at start while installing is every node's first second (install --watch is about to put it in):
  // info. Gone after being in use, or not installed by us, is for an operator: warn.
  else
    log[installing && !before?.inUse ? 'info' : 'warn'](
      { conflist: now.path, why: now.reason, installing },
      installing
        ? "the shim's entry is not in use yet (install --watch puts it in once cilium-cni's conflist is there)"
        : "the shim's entry is not in the network config the runtime uses (installing is disabled: only verified)",
    );
  return now;
}

/** The longest one tool call of a pass may take (one without its own bound): then it is killed, the step fails. */
const AGENT_TOOL_TIMEOUT_MS = 60_000;

export async function runAgent(o: AgentOptions, signal: AbortSignal): Promise<AgentSummary> {
  // The cache is read every pass: by one reader kept warm between passes, stopped (its group killed) on the way out.
  const stopReader = keepReaderWarm();
  try {
    return await runAgentWithReader(o, signal);
  } finally {
    stopReader();
  }
}

async function runAgentWithReader(o: AgentOptions, signal: AbortSignal): Promise<AgentSummary> {
  const metrics = new AgentMetrics(o.log);
  const problems = new PersistingProblems();
  const run = withDefaultTimeout(o.reconcile.run, AGENT_TOOL_TIMEOUT_MS);
  // A pass that shows no progress for this long (a stuck tool or lock beyond every timeout) fails /healthz.
  const entry = () => shimEntryInUse(o.entryAt);
  metrics.entry = entry;
  const health: HealthState = { lastPass: undefined, entry, lastBeat: Date.now(), stallMs: Math.max(10 * o.intervalMs, 10 * 60_000) };
  const servers = [await startHttp(o.listen, metrics, health)];
  const at = (l: { host: string; port: number }) => `${l.host.includes(':') ? `[${l.host}]` : l.host}:${l.port}`;
  const where = at(o.listen);
  try {
    if (o.probeListen) servers.push(await startHttp(o.probeListen, undefined, health));
  } catch (e) {
    servers[0]!.close();
    throw e;
  }
  const probes = o.probeListen ? { probeListen: at(o.probeListen) } : {};
  o.log.info({ listen: where, ...probes, intervalMs: o.intervalMs, gc: o.reconcile.gc.mode }, 'agent started');
  o.onListening?.(where);

  let wake: (() => void) | undefined;
  /** Set when a pass is wanted now: the loop does not wait after the pass in flight (or wakes from its wait). */
  let soon = false;
  const passNow = () => {
    soon = true;
    wake?.();
  };
  // The entry was checked (put back, or found in place): when the last pass did not complete (the conflist was
  // missing or mid-rewrite), a pass runs now, so /readyz follows the entry within a pass, not an interval.
  // The list's plugins against its version: judged by the watcher on every check when installing (it keeps the
  // entry out of a list they refuse), else after every pass; /readyz and ipam_shim_agent_list_version follow.
  const setVersions = (v: ListVerdict | undefined) => {
    const before = health.versions;
    health.versions = v;
    metrics.listVersionState(v?.state);
    if (o.install) return; // the watcher logs its own verdicts (install/install.ts)
    if (v && v.state !== 'taken' && (v.state !== before?.state || v.message !== before.message))
      o.log.warn({ listVersion: v.state, use: v.use }, v.message);
    else if (before && before.state !== 'taken' && v?.state === 'taken') o.log.info({ listVersion: v.state }, v.message);
  };
  const cniPath = o.install ? [o.install.binDir] : selectedCniPath(o.reconcile.network, o.reconcile.env);
  const onCheck = (r: { versions?: ListVerdict }) => {
    setVersions(r.versions);
    if (health.lastPass && !health.lastPass.completed) passNow();
  };
  const install = o.install ? watchInstall({ ...o.install, signal, log: o.log.child({ task: 'install' }), onCheck }) : Promise.resolve(undefined);
  // A failing install (source unreadable) is logged and the reconcile loop goes on: the cures still apply.
  const installed = install.catch((e: unknown) => {
    o.log.error({ err: e }, 'install --watch stopped');
    return undefined;
  });

  // Verifying only (--no-install: Cilium's route), nothing else watches the list: without this, a pass that ran
  // before cilium-agent wrote it was retried on the backoff (up to the interval), and /readyz lagged by as much.
  // Now a change to the list runs the pass at once when the last one did not complete, and judges the list's
  // version again when it did.
  let judging = false;
  const listWatch = o.install
    ? undefined
    : watchList(
        o.entryAt,
        () => {
          if (!health.lastPass?.completed) return passNow();
          if (judging) return;
          judging = true;
          entry()
            .then((now) => judgeRuntimeList(now, cniPath, run))
            .then(setVersions, () => undefined)
            .finally(() => {
              judging = false;
            });
        },
        o.log,
      );

  const onHup = () => {
    o.log.info('SIGHUP: reconcile pass now');
    passNow();
  };
  process.on('SIGHUP', onHup);
  const summary: AgentSummary = { passes: 0, last: undefined, install: undefined };
  let seen: EntryInUse | undefined;
  const memory: PassMemory = {};
  let retries = 0;
  try {
    while (!signal.aborted) {
      soon = false;
      listWatch?.ensure();
      health.lastBeat = Date.now();
      const beat = () => {
        health.lastBeat = Date.now();
      };
      summary.last = await reconcileOnce({ ...o.reconcile, run, signal, metrics, log: o.log, memory, problems, beat });
      summary.passes++;
      const last = summary.last;
      const completed = last.steps.network === 'ok' && !last.stopped;
      health.lastPass = {
        completed,
        at: Date.now(),
        ...(completed ? {} : { why: last.networkError ? `the shim's network could not be opened: ${last.networkError}` : 'stopped' }),
      };
      health.lastBeat = Date.now();
      const now = await entry();
      seen = logEntryChange(o.log, seen, now, o.install !== undefined);
      if (!o.install) setVersions(await judgeRuntimeList(now, cniPath, run).catch(() => undefined));
      // A pass that could not complete (a rewrite window, a conflist not there yet) is retried soon, then less often.
      retries = completed ? 0 : retries + 1;
      if (signal.aborted || soon) continue;
      const delay = completed ? nextDelay(o.intervalMs, o.jitter) : retryDelay(retries, o.intervalMs);
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(t);
          signal.removeEventListener('abort', done);
          wake = undefined;
          resolve();
        };
        const t = setTimeout(done, delay);
        signal.addEventListener('abort', done, { once: true });
        wake = done;
      });
    }
  } finally {
    process.off('SIGHUP', onHup);
    listWatch?.close();
    for (const server of servers) {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
    summary.install = await installed;
  }
  const open = problems.current();
  // A problem that never cleared ends here: named once more, so the log's last line says what was still wrong.
  if (open.length) o.log.warn({ passes: summary.passes, problems: open }, 'agent stopped');
  else o.log.info({ passes: summary.passes }, 'agent stopped');
  return summary;
}
