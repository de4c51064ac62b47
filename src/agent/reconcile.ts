// One reconcile pass of the node agent, on the shim's network as the plugin sees it (src/cli/network.ts):
//   gc       leaked pod attachments, from the runtime's result cache, with every guard of `ipam-shim gc`
//            (src/gc/); released only in `apply` mode, reported in `report` mode;
//   residue  azure-vnet residue naming a ledger address, removed with the function ADD uses;
//   probe    the IPv6 probe rewrite put back where due (the ledger holds an IPv6 address, or `on`), with ADD's
//            decision.
// Every step is its own try: one failing step is logged and counted, the others still run. SIGTERM (`signal`)
// is honoured between steps and between attachments, never inside a release or a cleanup.
import type { Attachment } from '../cni/config.js';
import type { Run } from '../effects/exec.js';
import { listNeighbours } from '../effects/neigh.js';
import type { LedgerRecord } from '../effects/ledger.js';
import { findResidueOnNode, listPreroutingResidue, nodeBackends } from '../residue/clean.js';
import { cleanResidueFor, ensureProbeRewriteIfDue } from '../verbs/address-steps.js';
import { openConflistNetwork, type NetworkSelection, type OpenNetwork } from '../network/open.js';
import type { Logger } from '../log.js';
import { sinceStart } from '../spans.js';
import { gcFromCache } from '../gc/from-cache.js';
import type { AgentMetrics, Step } from './metrics.js';
import { AGENT_LOCK_WAIT_MS, AttachmentBusy, exclusiveAttachment } from './lock.js';

export type GcMode = 'report' | 'apply';

export interface ReconcileOptions {
  network: NetworkSelection;
  env: NodeJS.ProcessEnv;
  run: Run;
  log: Logger;
  metrics: AgentMetrics;
  gc: { mode: GcMode; cacheDir: string; graceMs: number; allowEmptyCache: boolean };
  signal: AbortSignal;
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
  probeRestored: boolean;
  errors: number;
  durationMs: number;
  stopped: boolean;
}

const stopped = (o: ReconcileOptions) => o.signal.aborted;

export async function reconcileOnce(o: ReconcileOptions): Promise<PassReport> {
  const t0 = sinceStart();
  const report: PassReport = { network: undefined, steps: {}, busy: 0, leaked: 0, released: 0, forgotten: 0, residueRemoved: 0, probeRestored: false, errors: 0, durationMs: 0, stopped: false };
  const step = async (name: Step, fn: () => Promise<StepOutcome>): Promise<void> => {
    if (stopped(o)) {
      report.steps[name] = 'stopped';
      return;
    }
    let outcome: StepOutcome;
    try {
      outcome = await fn();
    } catch (e) {
      outcome = 'error';
      report.errors++;
      o.metrics.errors.inc({ step: name });
      o.log.error({ step: name, err: e }, `${name}: failed`);
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
    await step('gc', () => gcStep(o, n, report));
    // One ledger listing for the residue and probe steps (taken after GC: what it released is gone from it).
    let listing: Promise<LedgerRecord[]> | undefined;
    const records = () => (listing ??= n.ledger.list().then((l) => l.records));
    await step('residue', () => residueStep(o, n, report, records));
    await step('probe', () => probeStep(o, n, report, records));
  }

  report.stopped = stopped(o);
  report.durationMs = sinceStart() - t0;
  const outcome = report.stopped ? 'stopped' : report.errors ? 'error' : 'ok';
  o.metrics.passes.inc({ outcome });
  o.metrics.lastDuration.set(report.durationMs / 1000);
  o.metrics.lastPass.set(Date.now() / 1000);
  const { steps, leaked, released, forgotten, residueRemoved, probeRestored, errors, network, busy } = report;
  o.log.info({ network, steps, leaked, released, forgotten, residueRemoved, probeRestored, busy, errors, stopped: report.stopped, rssMiB: Math.round(process.memoryUsage.rss() / 1048576), durationMs: Math.round(report.durationMs) }, `reconcile pass ${outcome}`);
  return report;
}

async function gcStep(o: ReconcileOptions, net: OpenNetwork, report: PassReport): Promise<StepOutcome> {
  const apply = o.gc.mode === 'apply';
  const { valid, refused, report: gc } = await gcFromCache(net, {
    cacheDir: o.gc.cacheDir,
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
  if (gc.forgotten.length) net.log.warn({ step: 'gc', forgotten: gc.forgotten }, 'gc: forgot the chained records of provably dead pods (no address released: chained, the main plugin holds it)');
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
    net.log.warn({ step: 'gc', mode: o.gc.mode, leaked, released: gc.released }, apply ? 'gc: released leaked attachments' : 'gc: leaked attachments found (report mode: set gc mode apply to release them)');
  } else net.log.debug({ step: 'gc', cached: valid.length, kept: gc.plan.kept.length }, 'gc: nothing leaked');
  return gc.errors.length ? 'error' : refused && apply ? 'skipped' : 'ok';
}

/** The ledger attachment holding each address. */
function holders(records: LedgerRecord[]): Map<string, LedgerRecord> {
  const out = new Map<string, LedgerRecord>();
  for (const r of records) for (const ip of r.ips) out.set(ip.split('/')[0]!, r);
  return out;
}

async function residueStep(o: ReconcileOptions, net: OpenNetwork, report: PassReport, ledger: () => Promise<LedgerRecord[]>): Promise<StepOutcome> {
  const { residue } = net.conf.settings;
  if (!residue.ebtables && !residue.neigh) return 'skipped';
  const records = await ledger();
  const ips = records.flatMap((r) => r.ips);
  if (!ips.length) return 'ok';
  // One look at the node for every ledger address (ADD looks per call); only attachments with residue are then
  // cleaned, each under its attachment's lock and with ADD's own function, after re-reading its record.
  // Every ebtables backend that can hold tables (the image's `ebtables` is nft; azure-vnet may have used legacy).
  const [eb, neighbours] = await Promise.all([
    residue.ebtables ? listPreroutingResidue(net.run, undefined, nodeBackends(residue.ebtablesBackends)) : { available: false, rules: [], backends: [] },
    residue.neigh ? listNeighbours(net.run) : [],
  ]);
  const blind = eb.backends.filter((b) => b.blind);
  if (blind.length) net.log.warn({ step: 'residue', backends: blind }, 'residue: an ebtables backend that may hold rules could not be read');
  // The pod-own neighbour rule (src/residue/own.ts) as cleanResidue applies it: no false 'dirty' every pass.
  const found = await findResidueOnNode(net.run, ips, { rules: eb.rules, neighbours });
  const byIp = holders(records);
  const dirty = new Map<string, LedgerRecord>();
  for (const x of [...found.rules, ...found.neighbours]) {
    const rec = byIp.get(x.ip);
    if (rec) dirty.set(`${rec.containerID}:${rec.ifname}`, rec);
  }
  let failed = 0;
  for (const rec of dirty.values()) {
    if (stopped(o)) return 'stopped';
    const attachment: Attachment = { containerID: rec.containerID, ifname: rec.ifname };
    try {
      const removed = await exclusiveAttachment(net.ledger, attachment, async () => {
        const current = await net.ledger.get(attachment);
        if (!current?.ips.length) return { rules: 0, neighbours: 0 }; // DEL'd meanwhile: not ours any more
        return cleanResidueFor({ conf: net.conf, run: net.run, log: net.log }, current.ips, { ownDevs: [] });
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
      net.log.error({ step: 'residue', ...attachment, ips: rec.ips, err: e }, 'residue: cleanup failed');
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
