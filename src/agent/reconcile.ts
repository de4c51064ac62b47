// One reconcile pass of the node agent, on the shim's network as the plugin sees it (src/cli/network.ts):
//   gc       leaked pod attachments, from the runtime's result cache, with every guard of `ipam-shim gc`
//            (src/gc/); released only in `apply` mode, reported in `report` mode;
//   pods     every pod the runtime's result cache holds (GC's source and guards): pods the shim never saw are
//            counted, a pod holding an address inside reservedCIDRs is reported (never touched);
//   residue  azure-vnet residue naming a ledger address or the address of a pod the shim never saw, removed
//            with the function ADD uses;
//   probe    the IPv6 probe rewrite put back where due (the ledger holds an IPv6 address, or `on`), with ADD's
//            decision.
// Every step is its own try: one failing step is logged and counted, the others still run. SIGTERM (`signal`)
// is honoured between steps and between attachments, never inside a release or a cleanup.
import { type Attachment, attachmentKey, attachmentOfKey } from '../cni/config.js';
import type { Run } from '../effects/exec.js';
import { listNeighbours } from '../effects/neigh.js';
import type { LedgerRecord } from '../effects/ledger.js';
import { findResidueOnNode, listPreroutingResidue, nodeBackends } from '../residue/clean.js';
import { cleanResidueFor, ensureProbeRewriteIfDue } from '../verbs/address-steps.js';
import { openConflistNetwork, type NetworkSelection, type OpenNetwork } from '../network/open.js';
import type { Logger } from '../log.js';
import { sinceStart } from '../spans.js';
import { cachedAttachments, gcFromCache, type CacheView, type CachedPod } from '../gc/from-cache.js';
import { reservedCidrs } from '../reserved/decision.js';
import { podName, viewPods } from './pods.js';
import type { AgentMetrics, Step } from './metrics.js';
import { AGENT_LOCK_WAIT_MS, AttachmentBusy, exclusiveAttachment } from './lock.js';
import { PersistingProblems } from './problems.js';

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
}

export interface PassMemory {
  /** The unseen pods of the last pass (attachment keys): replaced every pass, never grows beyond the node's pods. */
  unseen: Set<string>;
}

type StepOutcome = 'ok' | 'error' | 'skipped' | 'stopped';

export interface PassReport {
  network: string | undefined;
  steps: Partial<Record<Step, StepOutcome>>;
  /** Attachments left for the next pass because a CNI call held their lock (or re-recorded them). */
  busy: number;
  /** gc: leaked attachments found (released in apply mode). */
  leaked: number;
  released: number;
  /** gc, report mode: chained records of provably dead pods forgotten. */
  forgotten: number;
  residueRemoved: number;
  /** pods: attachments in the runtime's cache, those not in the ledger, those holding a reserved address; undefined: could not look. */
  runtimePods?: number;
  unseenPods?: number;
  reservedPods?: number;
  probeRestored: boolean;
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
    residueRemoved: 0,
    probeRestored: false,
    errors: 0,
    durationMs: 0,
    stopped: false,
  };
  const problems = o.problems ?? new PersistingProblems();
  const step = async (name: Step, fn: () => Promise<StepOutcome>): Promise<void> => {
    if (stopped(o)) {
      report.steps[name] = 'stopped';
      return;
    }
    let outcome: StepOutcome;
    try {
      outcome = await fn();
      problems.succeeded(name, o.log);
    } catch (e) {
      outcome = 'error';
      report.errors++;
      if (name === 'network') report.networkError = (e as Error).message;
      o.metrics.errors.inc({ step: name });
      problems.failed(name, e, o.log);
    }
    report.steps[name] = outcome;
    o.metrics.steps.inc({ step: name, outcome });
  };

  let net: OpenNetwork | undefined;
  await step('network', async () => {
    // The agent's own logger (its stdout): a pass opens no log file.
    const opened = await openConflistNetwork(o.network, o.run, o.env, { log: o.log });
    net = opened;
    report.network = opened.conf.name;
    o.metrics.pluginFile = opened.conf.settings.metricsFile;
    return 'ok';
  });
  if (net) {
    const n = net;
    // The runtime's result cache, read once for the GC and pods steps (a read that throws fails both).
    let reading: Promise<CacheView> | undefined;
    const cache = () => (reading ??= cachedAttachments(o.gc.cacheDir, n.conf.name));
    await step('gc', () => gcStep(o, n, report, cache));
    // One ledger listing for the pods, residue and probe steps (taken after GC: what it released is gone from it).
    let listing: Promise<LedgerRecord[]> | undefined;
    const records = () => (listing ??= n.ledger.list().then((l) => l.records));
    let unseen: CachedPod[] = [];
    await step('pods', async () => {
      const r = await podsStep(o, n, report, cache, records);
      unseen = r.targets;
      return r.outcome;
    });
    await step('residue', () => residueStep(o, n, report, records, unseen));
    await step('probe', () => probeStep(o, n, report, records));
  }

  report.stopped = stopped(o);
  report.durationMs = sinceStart() - t0;
  const outcome = report.stopped ? 'stopped' : report.errors ? 'error' : 'ok';
  o.metrics.passes.inc({ outcome });
  o.metrics.lastDuration.set(report.durationMs / 1000);
  o.metrics.lastPass.set(Date.now() / 1000);
  const { steps, leaked, released, forgotten, residueRemoved, probeRestored, errors, network, busy, runtimePods, unseenPods, reservedPods } = report;
  o.log.info(
    {
      network,
      steps,
      leaked,
      released,
      forgotten,
      runtimePods,
      unseenPods,
      reservedPods,
      residueRemoved,
      probeRestored,
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

async function gcStep(o: ReconcileOptions, net: OpenNetwork, report: PassReport, cache: () => Promise<CacheView>): Promise<StepOutcome> {
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
    signal: o.signal,
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
): Promise<{ outcome: StepOutcome; targets: CachedPod[] }> {
  const network = net.conf.name;
  const m = o.metrics;
  const blind = () => {
    m.cacheReadable.set({ network }, 0);
    for (const g of [m.runtimePods, m.unseenPods, m.reservedPods]) g.remove({ network });
  };
  let view: CacheView;
  try {
    view = await cache();
  } catch (e) {
    blind();
    throw e;
  }
  if (view.blind && view.blind.kind !== 'empty') {
    blind();
    if (view.blind.kind === 'unreadable') throw new Error(view.blind.why);
    net.log.warn(
      { step: 'pods', why: view.blind.why },
      "pods: the runtime's result cache is out of sight: pods the shim never saw are not looked at (check --cache-dir)",
    );
    return { outcome: 'skipped', targets: [] };
  }
  const v = viewPods(view.pods, await ledger(), reservedCidrs(net.conf));
  const reservedPods = new Set(v.reserved.map((r) => attachmentKey(r.pod))).size;
  m.cacheReadable.set({ network }, 1);
  m.runtimePods.set({ network }, view.pods.length);
  m.unseenPods.set({ network }, v.unseen.length);
  m.reservedPods.set({ network }, reservedPods);
  report.runtimePods = view.pods.length;
  report.unseenPods = v.unseen.length;
  report.reservedPods = reservedPods;
  for (const r of v.reserved) {
    const { namespace, name, containerID, ifname } = r.pod;
    net.log.warn(
      { step: 'pods', pod: podName(r.pod), namespace, name, containerID, ifname, ip: r.ip, reservedCIDR: r.cidr },
      `pods: pod ${podName(r.pod)} holds ${r.ip}, inside reserved CIDR ${r.cidr}: replies to it are routed to the reserved subnet's owner and lost (reported only: the pod and its address are not touched; recreate it once the IPAM range avoids ${r.cidr})`,
    );
  }
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
  return { outcome: v.unreadable.length ? 'error' : 'ok', targets: v.residueTargets };
}

/** The ledger attachment holding each address. */
function holders(records: LedgerRecord[]): Map<string, LedgerRecord> {
  const out = new Map<string, LedgerRecord>();
  for (const r of records) for (const ip of r.ips) out.set(ip.split('/')[0]!, r);
  return out;
}

async function residueStep(
  o: ReconcileOptions,
  net: OpenNetwork,
  report: PassReport,
  ledger: () => Promise<LedgerRecord[]>,
  unseen: CachedPod[],
): Promise<StepOutcome> {
  const { residue } = net.conf.settings;
  if (!residue.ebtables && !residue.neigh) return 'skipped';
  const records = await ledger();
  const ips = [...records.flatMap((r) => r.ips), ...unseen.flatMap((p) => p.ips)];
  if (!ips.length) return 'ok';
  // One look at the node for every ledger address and every address of a pod the shim never saw (ADD looks per
  // call); only attachments with residue are then cleaned, each under its attachment's lock and with ADD's own
  // function, after re-reading its record (a pod the shim never saw: its cached addresses, unless an ADD has
  // recorded it meanwhile).
  // Every ebtables backend that can hold tables (the image's `ebtables` is nft; azure-vnet may have used legacy).
  const [eb, neighbours] = await Promise.all([
    residue.ebtables
      ? listPreroutingResidue(net.run, undefined, nodeBackends(residue.ebtablesBackends))
      : { available: false, rules: [], backends: [] },
    residue.neigh ? listNeighbours(net.run) : [],
  ]);
  const blind = eb.backends.filter((b) => b.blind);
  if (blind.length) net.log.warn({ step: 'residue', backends: blind }, 'residue: an ebtables backend that may hold rules could not be read');
  // The pod-own neighbour rule (src/residue/own.ts) as cleanResidue applies it: no false 'dirty' every pass.
  const found = await findResidueOnNode(net.run, ips, { rules: eb.rules, neighbours });
  const byIp = holders(records);
  const cachedByIp = new Map(unseen.flatMap((p) => p.ips.map((ip) => [ip, p] as const)));
  // attachment key → the unseen pod it is (undefined: a ledger attachment)
  const dirty = new Map<string, CachedPod | undefined>();
  for (const x of [...found.rules, ...found.neighbours]) {
    const rec = byIp.get(x.ip);
    const pod = rec ? undefined : cachedByIp.get(x.ip);
    if (rec) dirty.set(attachmentKey(rec), undefined);
    else if (pod) dirty.set(attachmentKey(pod), pod);
  }
  let failed = 0;
  for (const [key, pod] of dirty) {
    if (stopped(o)) return 'stopped';
    const attachment: Attachment = attachmentOfKey(key);
    try {
      const removed = await exclusiveAttachment(net.ledger, attachment, async () => {
        const current = await net.ledger.get(attachment);
        const ips = current?.ips.length ? current.ips : pod?.ips;
        if (!ips?.length) return { rules: 0, neighbours: 0 }; // DEL'd meanwhile: not ours any more
        if (pod && !current)
          net.log.info({ step: 'residue', pod: podName(pod), ...attachment, ips }, 'residue: cleaning for a pod the shim never saw');
        return cleanResidueFor({ conf: net.conf, run: net.run, log: net.log }, ips, { ownDevs: [] });
      });
      o.metrics.residue.inc({ network: net.conf.name, kind: 'ebtables' }, removed.rules);
      o.metrics.residue.inc({ network: net.conf.name, kind: 'neigh' }, removed.neighbours);
      report.residueRemoved += removed.rules + removed.neighbours;
    } catch (e) {
      if (e instanceof AttachmentBusy) {
        report.busy++;
        net.log.info({ step: 'residue', ...attachment }, 'residue: the attachment is busy (a CNI call holds it); next pass');
        continue;
      }
      failed++;
      report.errors++;
      o.metrics.errors.inc({ step: 'residue' });
      net.log.error({ step: 'residue', ...attachment, ...(pod ? { pod: podName(pod), ips: pod.ips } : {}), err: e }, 'residue: cleanup failed');
    }
  }
  return failed ? 'error' : 'ok';
}

async function probeStep(o: ReconcileOptions, net: OpenNetwork, report: PassReport, ledger: () => Promise<LedgerRecord[]>): Promise<StepOutcome> {
  const mode = net.conf.settings.ipv6ProbeRewrite;
  if (mode === 'off') return 'skipped';
  if (mode === 'auto') {
    const records = await ledger();
    if (!records.some((r) => r.ips.some((ip) => ip.includes(':')))) return 'skipped';
  }
  const outcome = await ensureProbeRewriteIfDue({ conf: net.conf, run: net.run, log: net.log });
  if (outcome === 'ensured') {
    report.probeRestored = true;
    o.metrics.probeRestores.inc();
    net.log.warn({ step: 'probe' }, 'probe: the IPv6 probe rewrite table was missing or drifted: put back');
  }
  if (outcome === 'failed') throw new Error('IPv6 probe rewrite not ensured (see the warning above)');
  return 'ok';
}
