// The node agent's process: `install --watch` (binary and conflist entry kept in place) side by side with a
// reconcile pass every interval (± jitter, so a fleet's nodes do not hit their runtimes in step; SIGHUP runs
// one at once), HTTP for /metrics /healthz /readyz, logs as JSON lines on stdout (`kubectl logs`: the agent is
// not the plugin, its stdout carries no protocol). `signal` (SIGTERM) stops it: the pass in flight stops at its
// next safe point (src/agent/reconcile.ts), the watcher and the server close.
import type { Logger } from '../log.js';
import { watchInstall, type WatchOptions, type WatchSummary } from '../install/install.js';
import { startHttp, type HealthState } from './http.js';
import { AgentMetrics } from './metrics.js';
import { PersistingProblems } from './problems.js';
import { reconcileOnce, type PassReport, type ReconcileOptions } from './reconcile.js';
import { withDefaultTimeout } from '../effects/exec.js';

export interface AgentOptions {
  reconcile: Omit<ReconcileOptions, 'signal' | 'metrics' | 'log'>;
  intervalMs: number;
  /** Each wait is intervalMs × (1 ± jitter), jitter in [0, 1). */
  jitter: number;
  listen: { host: string; port: number };
  /** What `install --watch` gets; absent: the agent does not install (tests, or an operator's choice). */
  install: Omit<WatchOptions, 'signal' | 'log'> | undefined;
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

/** The longest one tool call of a pass may take (one without its own bound): then it is killed, the step fails. */
const AGENT_TOOL_TIMEOUT_MS = 60_000;

export async function runAgent(o: AgentOptions, signal: AbortSignal): Promise<AgentSummary> {
  const metrics = new AgentMetrics();
  const problems = new PersistingProblems();
  const run = withDefaultTimeout(o.reconcile.run, AGENT_TOOL_TIMEOUT_MS);
  // A pass that shows no progress for this long (a stuck tool or lock beyond every timeout) fails /healthz.
  const health: HealthState = { ready: false, lastBeat: Date.now(), stallMs: Math.max(10 * o.intervalMs, 10 * 60_000) };
  const server = await startHttp(o.listen, metrics, health);
  const where = `${o.listen.host.includes(':') ? `[${o.listen.host}]` : o.listen.host}:${o.listen.port}`;
  o.log.info({ listen: where, intervalMs: o.intervalMs, gc: o.reconcile.gc.mode }, 'agent started');
  o.onListening?.(where);

  const install = o.install ? watchInstall({ ...o.install, signal, log: o.log.child({ task: 'install' }) }) : Promise.resolve(undefined);
  // A failing install (source unreadable) is logged and the reconcile loop goes on: the cures still apply.
  const installed = install.catch((e: unknown) => {
    o.log.error({ err: e }, 'install --watch stopped');
    return undefined;
  });

  let wake: (() => void) | undefined;
  let hup = false;
  const onHup = () => {
    hup = true;
    o.log.info('SIGHUP: reconcile pass now');
    wake?.();
  };
  process.on('SIGHUP', onHup);
  const summary: AgentSummary = { passes: 0, last: undefined, install: undefined };
  try {
    while (!signal.aborted) {
      hup = false;
      health.lastBeat = Date.now();
      summary.last = await reconcileOnce({ ...o.reconcile, run, signal, metrics, log: o.log, problems });
      summary.passes++;
      health.ready = true;
      health.lastBeat = Date.now();
      if (signal.aborted || hup) continue;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(t);
          signal.removeEventListener('abort', done);
          wake = undefined;
          resolve();
        };
        const t = setTimeout(done, nextDelay(o.intervalMs, o.jitter));
        signal.addEventListener('abort', done, { once: true });
        wake = done;
      });
    }
  } finally {
    process.off('SIGHUP', onHup);
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    summary.install = await installed;
  }
  const open = problems.current();
  // A problem that never cleared ends here: named once more, so the log's last line says what was still wrong.
  if (open.length) o.log.warn({ passes: summary.passes, problems: open }, 'agent stopped');
  else o.log.info({ passes: summary.passes }, 'agent stopped');
  return summary;
}
