// One reconcile pass of the node agent, on the shim's network as the plugin sees it (src/cli/network.ts):
//   gc       leaked pod attachments, from the runtime's result cache, with every guard of `ipam-shim gc`
//            (src/gc/); released only in `apply` mode, reported in `report` mode;
//   pods     every pod the runtime's result cache holds (GC's source and guards), against the ledger: pods the
//            shim never saw are counted, and the view is what the fixes' steps work on;
//   then every fix's step (src/fixes/registry.ts, Fix.agent): reserved (pods holding a reserved address are
//            reported, never touched), residue (removed for ledger addresses and unseen pods, with ADD's
//            function), probe (the IPv6 probe rewrite put back where due, with ADD's decision).
// Every step is its own try: one failing step is logged and counted, the others still run. SIGTERM (`signal`)
// is honoured between steps and between attachments, never inside a release or a cleanup; a step that does not
// reach its next safe point within PASS_BOUNDS.stopGraceMs is left behind, so the pass ends whatever it is doing.
// A step that runs past PASS_BOUNDS.stepMs is abandoned the same way (outcome "abandoned", counted as an error):
// its signal asks it to stop at its next safe point, and the pass, and the next one, go on without it. Leaving a
// step behind is safe because everything a step does to an attachment it does under the attachment's lock.
import { attachmentKey } from '../ledger/key.js';
import type { Run } from '../effects/exec.js';
import type { LedgerRecord } from '../ledger/record.js';
import { openConflistNetwork, type NetworkSelection, type OpenNetwork } from '../network/open.js';
import type { Logger } from '../log.js';
import { sinceStart } from '../spans.js';
import { cachedAttachments, gcFromCache, type CacheView } from '../gc/from-cache.js';
import { FIXES } from '../fixes/registry.js';
import type { Pass, StepOutcome } from '../fixes/agent-step.js';
import { podName, viewNetworkPods, type PodsView } from '../fixes/pods.js';
import type { AgentMetrics } from './metrics.js';
import { AGENT_LOCK_WAIT_MS } from '../fixes/attachment-lock.js';
import { PersistingProblems } from './problems.js';
import { Lasting } from '../fixes/lasting.js';

export type GcMode = 'report' | 'apply';

export interface ReconcileOptions {
  network: NetworkSelection;
  env: NodeJS.ProcessEnv;
  run: Run;
  log: Logger;
  metrics: AgentMetrics;
  gc: { mode: GcMode; cacheDir: string; graceMs: number; allowEmptyCache: boolean };
  signal: AbortSignal;
  /** What one pass leaves the next (the daemon keeps one): only to log newly unseen pods once, not every pass. */
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
  /** The unseen pods of the last pass (attachment keys): replaced every pass, never grows beyond the node's pods. */
  unseen: Set<string>;
  /** The cache files the last pass ignored (names libcni would refuse): logged when they first appear. */
  ignored?: Set<string>;
  /** Why the runtime's result cache was out of sight at the last pass (logged when it starts and when it ends). */
  outOfSight?: Lasting<{ why: string }>;
  /** What each fix's step keeps across passes (Pass.state), by step. */
  steps?: Map<string, unknown>;
}

export interface PassReport {
  network: string | undefined;
  steps: Partial<Record<string, PassStepOutcome>>;
  /** Attachments left for the next pass because a CNI call held their lock (or re-recorded them). */
  busy: number;
  /** gc: leaked attachments found (released in apply mode). */
  leaked: number;
  released: number;
  /** gc, report mode: chained records of provably dead pods forgotten. */
  forgotten: number;
  /** pods: attachments in the runtime's cache and those not in the ledger; undefined: could not look. */
  runtimePods?: number;
  unseenPods?: number;
  /** Cache entries left out because libcni would refuse their names (src/gc/from-cache.ts `ignored`). */
  cacheIgnored?: number;
  /** What the fixes' steps noted (Pass.note): residueRemoved, probeRestored, reservedPods, … */
  fixes: Record<string, number | boolean>;
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
    leaked: 0,
    released: 0,
    forgotten: 0,
    fixes: {},
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
    // The runtime's result cache, read once for the GC and pods steps (a read that throws fails both).
    let reading: Promise<CacheView> | undefined;
    const cache = () => (reading ??= cachedAttachments(o.gc.cacheDir, n.conf.name).then((v) => noteIgnored(o, n, report, v)));
    await step('gc', (signal) => gcStep(o, n, report, cache, signal));
    // One ledger listing for the pods step and the fixes' steps (taken after GC: what it released is gone from it).
    let listing: Promise<LedgerRecord[]> | undefined;
    const records = () => (listing ??= n.ledger.list().then((l) => l.records));
    let runtime: PodsView | undefined;
    await step('pods', async () => {
      const r = await podsStep(o, n, report, cache, records);
      runtime = r.view;
      return r.outcome;
    });
    for (const fix of FIXES) {
      if (!fix.agent) continue;
      const { step: name, load } = fix.agent;
      await step(name, async (signal) => (await load()).reconcile(passFor(o, n, report, name, records, runtime, signal)));
    }
  }

  report.stopped = stopped(o);
  report.durationMs = sinceStart() - t0;
  const outcome = report.stopped ? 'stopped' : report.errors ? 'error' : 'ok';
  o.metrics.passes.inc({ outcome });
  o.metrics.lastDuration.set(report.durationMs / 1000);
  o.metrics.lastPass.set(Date.now() / 1000);
  const { steps, leaked, released, forgotten, fixes, errors, network, busy, runtimePods, unseenPods, cacheIgnored } = report;
  o.log.info(
    {
      network,
      steps,
      leaked,
      released,
      forgotten,
      runtimePods,
      unseenPods,
      cacheIgnored,
      ...fixes,
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

/** Logs the cache entries left out for names libcni would refuse, by file name, when they first appear; counts them. */
function noteIgnored(o: ReconcileOptions, net: OpenNetwork, report: PassReport, view: CacheView): CacheView {
  report.cacheIgnored = view.ignored.length;
  const before = o.memory?.ignored ?? new Set<string>();
  const fresh = view.ignored.filter((i) => !before.has(i.file));
  if (o.memory) o.memory.ignored = new Set(view.ignored.map((i) => i.file));
  if (fresh.length)
    net.log.warn(
      { step: 'gc', count: view.ignored.length, new: fresh.slice(0, 20) },
      "runtime cache entries with a container ID or interface name libcni would refuse: ignored (never a pod of this node's, never a path)",
    );
  return view;
}

async function gcStep(
  o: ReconcileOptions,
  net: OpenNetwork,
  report: PassReport,
  cache: () => Promise<CacheView>,
  signal: AbortSignal,
): Promise<StepOutcome> {
  const apply = o.gc.mode === 'apply';
  const {
    valid,
    refused,
    report: gc,
  } = await gcFromCache(net, {
    cacheDir: o.gc.cacheDir,
    cache: await cache(),
    apply,
    graceMs: o.gc.graceMs,
    allowEmptyCache: o.gc.allowEmptyCache,
    signal,
    lockWaitMs: AGENT_LOCK_WAIT_MS,
    // Report mode releases nothing. A provably dead pod's chained record with no delegate behind it is only a note
    // that nothing of ours can ever release through: forgotten, so it cannot wedge the address. With a delegate it is
    // the evidence an apply releases through, and the leak must stay reported (ipam_shim_agent_gc_leaked, the
    // shipped alert): kept. Either way an ADD given the address takes it from the dead holder (src/gc/stale.ts).
    forgetChained: !net.delegate,
  });
  const name = net.conf.name;
  report.busy += gc.skipped.length;
  if (refused) net.log.warn({ step: 'gc', refused }, 'gc: refusing to release anything');
  report.leaked = gc.plan.release.length;
  report.released = gc.released.length;
  report.forgotten = gc.forgotten.length;
  o.metrics.forgotten.inc({ network: name }, gc.forgotten.length);
  if (gc.forgotten.length)
    net.log.warn(
      { step: 'gc', forgotten: gc.forgotten },
      'gc: forgot the chained records of provably dead pods (no address released: chained, the main plugin holds it)',
    );
  o.metrics.leaked.reset();
  o.metrics.leaked.set({ network: name, mode: o.gc.mode }, gc.plan.release.length);
  o.metrics.released.inc({ network: name }, gc.released.length);
  for (const e of gc.errors) {
    o.metrics.errors.inc({ step: 'gc' });
    net.log.error({ step: 'gc', attachment: e.attachment, code: e.code, error: e.error }, 'gc: release failed');
  }
  report.errors += gc.errors.length;
  const leaked = gc.plan.release.map((r) => ({ containerID: r.record.containerID, ifname: r.record.ifname, ips: r.record.ips, why: r.reason }));
  if (leaked.length) {
    net.log.warn(
      { step: 'gc', mode: o.gc.mode, leaked, released: gc.released },
      apply ? 'gc: released leaked attachments' : 'gc: leaked attachments found (report mode: set gc mode apply to release them)',
    );
  } else net.log.debug({ step: 'gc', cached: valid.length, kept: gc.plan.kept.length }, 'gc: nothing leaked');
  return gc.errors.length ? 'error' : refused && apply ? 'skipped' : 'ok';
}

/**
 * Every pod the runtime knows (its result cache, with GC's guards: a file of this network that cannot be read
 * makes the list unknowable and fails the step). "Could not look" never reads as "found nothing": then the
 * gauges are removed (no series, not 0) and ipam_shim_agent_runtime_cache_readable is 0.
 */
async function podsStep(
  o: ReconcileOptions,
  net: OpenNetwork,
  report: PassReport,
  cache: () => Promise<CacheView>,
  ledger: () => Promise<LedgerRecord[]>,
): Promise<{ outcome: StepOutcome; view?: PodsView }> {
  const network = net.conf.name;
  const m = o.metrics;
  const blind = () => {
    m.cacheReadable.set({ network }, 0);
    for (const g of [m.runtimePods, m.unseenPods]) g.remove({ network });
  };
  let view: CacheView;
  try {
    view = await cache();
  } catch (e) {
    blind();
    throw e;
  }
  // A cache out of sight lasts (no runtime has written one yet, a wrong --cache-dir): said when it starts and ends.
  // (An unreadable cache fails the step: PersistingProblems says when that starts and ends.)
  if (view.blind?.kind === 'unreadable') {
    blind();
    throw new Error(view.blind.why);
  }
  const outOfSight = o.memory ? (o.memory.outOfSight ??= new Lasting((c) => c.why)) : new Lasting<{ why: string }>((c) => c.why);
  const sight = outOfSight.update(view.blind?.kind === 'missing' ? [{ why: view.blind.why }] : []);
  for (const c of sight.ended) net.log.info({ step: 'pods', was: c.why, since: c.since }, "pods: the runtime's result cache is in sight again");
  if (view.blind?.kind === 'missing') {
    blind();
    for (const c of sight.started)
      net.log.warn(
        { step: 'pods', why: c.why },
        "pods: the runtime's result cache is out of sight: pods the shim never saw are not looked at (check --cache-dir; logged again when it changes or ends)",
      );
    return { outcome: 'skipped' };
  }
  const v = viewNetworkPods(net.conf, view.pods, await ledger());
  m.cacheReadable.set({ network }, 1);
  m.runtimePods.set({ network }, view.pods.length);
  m.unseenPods.set({ network }, v.unseen.length);
  report.runtimePods = view.pods.length;
  report.unseenPods = v.unseen.length;
  // Unseen pods are logged when they first appear (a pod started before the shim was installed stays unseen
  // until it ends); the gauge tells the rest.
  const before = o.memory?.unseen ?? new Set<string>();
  const now = new Set(v.unseen.map(attachmentKey));
  const fresh = v.unseen.filter((p) => !before.has(attachmentKey(p)));
  if (o.memory) o.memory.unseen = now;
  if (fresh.length) {
    net.log.warn(
      {
        step: 'pods',
        count: v.unseen.length,
        new: fresh.slice(0, 20).map((p) => ({ pod: podName(p), containerID: p.containerID, ifname: p.ifname, ips: p.ips })),
      },
      "pods: the runtime holds pods the shim never saw (started while it was not in the chain): their residue is removed like the ledger's",
    );
  }
  for (const p of v.unreadable) {
    report.errors++;
    m.errors.inc({ step: 'pods' });
    net.log.error(
      { step: 'pods', pod: podName(p), containerID: p.containerID, ifname: p.ifname, why: p.unreadable },
      "pods: a cache entry's addresses cannot be read: its residue and reserved addresses are not looked at",
    );
  }
  return { outcome: v.unreadable.length ? 'error' : 'ok', view: v };
}

/** What a fix's step gets from this pass (src/fixes/agent-step.ts). */
function passFor(
  o: ReconcileOptions,
  net: OpenNetwork,
  report: PassReport,
  step: string,
  records: () => Promise<LedgerRecord[]>,
  runtime: PodsView | undefined,
  signal: AbortSignal,
): Pass {
  return {
    net,
    signal,
    records,
    runtime,
    counter: (name) => o.metrics.counter(name),
    gauge: (name) => o.metrics.gauge(name),
    error: () => {
      report.errors++;
      o.metrics.errors.inc({ step });
    },
    busy: () => {
      report.busy++;
    },
    note: (fields) => Object.assign(report.fixes, fields),
    state: <T>(init: () => T): T => {
      const kept = o.memory ? (o.memory.steps ??= new Map()) : new Map<string, unknown>();
      if (!kept.has(step)) kept.set(step, init());
      return kept.get(step) as T;
    },
  };
}
