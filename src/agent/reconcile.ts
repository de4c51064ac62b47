// One reconcile pass of the node agent, on the shim's network as the plugin sees it (src/contract/network-flags.ts): the network
// step opens it, then every step runs in order (src/agent/steps.ts: gc, pods, then every fix's), each with the same
// Pass (src/contract/agent-step.ts). The runner knows no step by name: it reads the runtime's result cache and lists
// the ledger once a pass for the steps that ask, hands the pods step's view to the steps after it, and writes the
// pass's report, metrics and log line.
// Every step is its own try: one failing step is logged and counted, the others still run. SIGTERM (`signal`)
// is honoured between steps and between attachments, never inside a release or a cleanup; a step that does not
// reach its next safe point within PASS_BOUNDS.stopGraceMs is left behind, so the pass ends whatever it is doing.
// A step that runs past PASS_BOUNDS.stepMs is abandoned the same way (outcome "abandoned", counted as an error):
// its signal asks it to stop at its next safe point, and the pass, and the next one, go on without it. Leaving a
// step behind is safe because everything a step does to an attachment it does under the attachment's lock.
import type { Run } from '../effects/exec.js';
import type { LedgerRecord } from '../ledger/record.js';
import { openConflistNetwork, type NetworkSelection, type OpenNetwork } from '../network/open.js';
import type { Logger } from '../log.js';
import { sinceStart } from '../spans.js';
import { cachedAttachments } from '../gc/from-cache.js';
import type { CacheView } from '../pods/cached-pod.js';
import type { GcFlags, Pass, StepOutcome } from '../contract/agent-step.js';
import { podHolds } from '../fix-list/pod-holds.js';
import { FIXES } from '../fix-list/registry.js';
import { networkPodRanges } from '../pods/ranges.js';
import type { PodsView } from '../pods/view.js';
import type { AgentMetrics } from './metrics.js';
import { PersistingProblems } from './problems.js';
import { STEPS } from './steps.js';

export type { GcMode } from '../contract/agent-step.js';

export interface ReconcileOptions {
  network: NetworkSelection;
  env: NodeJS.ProcessEnv;
  run: Run;
  log: Logger;
  metrics: AgentMetrics;
  gc: GcFlags;
  signal: AbortSignal;
  /** What one pass leaves the next (the daemon keeps one): what each step keeps (Pass.state). */
  memory?: PassMemory;
  /** The agent's problems across passes (logged when they start and end); absent: each pass logs its own. */
  problems?: PersistingProblems;
  /** PASS_BOUNDS unless given (tests). */
  bounds?: PassBounds;
  /** Called as each step ends (the daemon's /healthz heartbeat: a pass of bounded steps is progress). */
  beat?: () => void;
}

interface PassBounds {
  /** A step running longer is abandoned: its signal aborted, the pass goes on without it. */
  stepMs: number;
  /** After SIGTERM, how long the step under way gets to reach its next safe point before the pass leaves it. */
  stopGraceMs: number;
}

/**
 * stepMs: past every bound a step's own calls have (a tool call 60 s, a lock wait 5 s, a delegate call 30 s), so a
 * step is abandoned only for what nothing else bounds (a file system call that never returns). stopGraceMs: long
 * enough for a delegate DEL under way to finish (delegateTimeoutMs, 30 s by default) and within the DaemonSet's
 * terminationGracePeriodSeconds (45).
 */
const PASS_BOUNDS: PassBounds = { stepMs: 120_000, stopGraceMs: 32_000 };

/** What a step came to: its own outcome, or `abandoned` (it ran past PassBounds.stepMs and was left behind). */
type PassStepOutcome = StepOutcome | 'abandoned';

/** A step ran past its bound (PassBounds.stepMs): it was left behind, its signal aborted. */
class StepOverrunError extends Error {
  constructor(
    readonly step: string,
    readonly boundMs: number,
  ) {
    super(`the ${step} step ran past its bound of ${boundMs / 1000} s and was abandoned (the next pass runs it again)`);
    this.name = 'StepOverrunError';
  }
}

export interface PassMemory {
  /** What each step keeps across passes (Pass.state), by step. */
  steps?: Map<string, unknown>;
}

export interface PassReport {
  network: string | undefined;
  steps: Partial<Record<string, PassStepOutcome>>;
  /** Attachments left for the next pass because a CNI call held their lock (or re-recorded them). */
  busy: number;
  /**
   * What the steps noted (Pass.note, AgentStepEntry.notes): gc's leaked, released, forgotten, cacheIgnored; pods'
   * runtimePods, unseenPods (absent: could not look); the fixes' residueRemoved, probeRestored, reservedPods, …
   */
  notes: Record<string, number | boolean>;
  errors: number;
  durationMs: number;
  stopped: boolean;
  /** Why the shim's network could not be opened (the pass then did nothing: not a completed pass). */
  networkError?: string;
}

const stopped = (o: ReconcileOptions) => o.signal.aborted;

export async function reconcileOnce(o: ReconcileOptions): Promise<PassReport> {
  const t0 = sinceStart();
  const report: PassReport = {
    network: undefined,
    steps: {},
    busy: 0,
    notes: Object.assign({}, ...STEPS.map((s) => s.notes ?? {})),
    errors: 0,
    durationMs: 0,
    stopped: false,
  };
  const problems = o.problems ?? new PersistingProblems();
  const bounds = o.bounds ?? PASS_BOUNDS;
  const step = async (name: string, fn: (signal: AbortSignal) => Promise<StepOutcome>): Promise<void> => {
    if (stopped(o)) {
      report.steps[name] = 'stopped';
      return;
    }
    let outcome: PassStepOutcome;
    const own = new AbortController();
    const left = leftBehind(o.signal, bounds);
    try {
      const running = fn(AbortSignal.any([o.signal, own.signal]));
      const r = await Promise.race([running.then((v) => ({ v })), left.promise]);
      if ('v' in r) {
        outcome = r.v;
        problems.succeeded(name, o.log);
      } else {
        // Left behind: asked to stop at its next safe point; whatever it settles to is no longer this pass's.
        own.abort();
        running.catch(() => undefined);
        if (r.left === 'stopped') outcome = 'stopped';
        else {
          outcome = 'abandoned';
          report.errors++;
          o.metrics.errors.inc({ step: name });
          problems.failed(name, new StepOverrunError(name, bounds.stepMs), o.log);
        }
      }
    } catch (e) {
      outcome = 'error';
      report.errors++;
      if (name === 'network') report.networkError = (e as Error).message;
      o.metrics.errors.inc({ step: name });
      problems.failed(name, e, o.log);
    } finally {
      left.cancel();
    }
    report.steps[name] = outcome;
    o.metrics.steps.inc({ step: name, outcome });
    o.beat?.();
  };

  let net: OpenNetwork | undefined;
  await step('network', async () => {
    // The agent's own logger (its stdout): a pass opens no log file.
    const opened = await openConflistNetwork(o.network, o.run, o.env, { log: o.log });
    net = opened;
    report.network = opened.conf.name;
    o.metrics.networkKnown(opened.conf.name);
    o.metrics.pluginFile = opened.conf.settings.metricsFile;
    return 'ok';
  });
  if (net) {
    const n = net;
    // The runtime's result cache and one ledger listing (taken after GC: what it released is gone from it), read
    // once for the steps that ask; the pods step's view, for the steps after it.
    const shared: Shared = { runtime: undefined };
    for (const { step: name, load } of STEPS)
      await step(name, async (signal) => (await load(FIXES)).reconcile(passFor(o, n, report, name, shared, signal)));
  }

  report.stopped = stopped(o);
  report.durationMs = sinceStart() - t0;
  const outcome = report.stopped ? 'stopped' : report.errors ? 'error' : 'ok';
  o.metrics.passes.inc({ outcome });
  o.metrics.lastDuration.set(report.durationMs / 1000);
  o.metrics.lastPass.set(Date.now() / 1000);
  const { steps, notes, errors, network, busy } = report;
  o.log.info(
    {
      network,
      steps,
      ...notes,
      busy,
      errors,
      stopped: report.stopped,
      rssMiB: Math.round(process.memoryUsage.rss() / 1048576),
      durationMs: Math.round(report.durationMs),
    },
    `reconcile pass ${outcome}`,
  );
  return report;
}

/**
 * When the step under way is to be left behind: `overran` after bounds.stepMs, `stopped` bounds.stopGraceMs after
 * SIGTERM (whichever comes first). cancel() clears the timers once the step has settled.
 */
function leftBehind(signal: AbortSignal, bounds: PassBounds): { promise: Promise<{ left: 'overran' | 'stopped' }>; cancel: () => void } {
  let overrun: NodeJS.Timeout | undefined;
  let grace: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const promise = new Promise<{ left: 'overran' | 'stopped' }>((resolve) => {
    overrun = setTimeout(() => resolve({ left: 'overran' }), bounds.stepMs);
    onAbort = () => {
      grace = setTimeout(() => resolve({ left: 'stopped' }), bounds.stopGraceMs);
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  const cancel = () => {
    clearTimeout(overrun);
    clearTimeout(grace);
    if (onAbort) signal.removeEventListener('abort', onAbort);
  };
  return { promise, cancel };
}

/** What the steps of one pass share: the reads made once, the pods step's view. */
interface Shared {
  cache?: Promise<CacheView>;
  records?: Promise<LedgerRecord[]>;
  runtime: PodsView | undefined;
}

/** What a step gets from this pass (src/contract/agent-step.ts). */
function passFor(o: ReconcileOptions, net: OpenNetwork, report: PassReport, step: string, shared: Shared, signal: AbortSignal): Pass {
  const records = () => (shared.records ??= net.ledger.list().then((l) => l.records));
  return {
    net,
    signal,
    flags: { gc: o.gc },
    records,
    podRanges: async () => networkPodRanges(net, await records()),
    // The pass's signal: SIGTERM answers a read under way at once (its child is left to its own bound).
    cache: () => (shared.cache ??= cachedAttachments(o.gc.cacheDir, net.conf.name, { signal: o.signal })),
    holds: () => podHolds(net.conf),
    runtime: shared.runtime,
    provide: (view) => {
      shared.runtime = view;
    },
    counter: (name) => o.metrics.counter(name),
    gauge: (name) => o.metrics.gauge(name),
    error: () => {
      report.errors++;
      o.metrics.errors.inc({ step });
    },
    busy: () => {
      report.busy++;
    },
    note: (fields) => Object.assign(report.notes, fields),
    state: <T>(init: () => T): T => {
      const kept = o.memory ? (o.memory.steps ??= new Map()) : new Map<string, unknown>();
      if (!kept.has(step)) kept.set(step, init());
      return kept.get(step) as T;
    },
  };
}
