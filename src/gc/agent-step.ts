// The node agent's gc step: leaked pod attachments, from the runtime's result cache (read once a pass, Pass.cache),
// with every guard of `ipam-shim gc` (gcFromCache); released at once in `apply` mode, once found in every pass of
// the confirmation window in `confirmed` mode (src/gc/confirm.ts), only reported in `report` mode.
import type { AgentStep, Pass, StepOutcome } from '../contract/agent-step.js';
import type { AgentStepEntry } from '../contract/fix.js';
import { AGENT_LOCK_WAIT_MS } from '../contract/attachment-lock.js';
import type { CacheView } from '../pods/cached-pod.js';
import { gcFromCache } from './from-cache.js';
import { attachmentKey } from '../ledger/key.js';
import {
  DEFAULT_CONFIRM_AFTER_MS,
  DEFAULT_CONFIRM_PASSES,
  confirmLeaks,
  forgetAll,
  newConfirmations,
  type Confirmations,
  type Sighting,
} from './confirm.js';
import { releasePlanned } from './run-gc.js';

/** What the gc step keeps from pass to pass (Pass.state): the ignored cache entries it has logged, the leaks seen. */
interface GcState {
  ignored: Set<string>;
  confirmations: Confirmations;
}
const gcState = (pass: Pass): GcState => pass.state<GcState>(() => ({ ignored: new Set(), confirmations: newConfirmations() }));

const gcStep: AgentStep = {
  async reconcile(pass) {
    if (pass.flags.gc.mode !== 'confirmed') return gcPass(pass);
    try {
      return await gcPass(pass);
    } catch (e) {
      // The pass could not look (the cache unreadable, the ledger corrupt, …): no leak was seen in it.
      forgetAll(gcState(pass).confirmations);
      throw e;
    }
  },
};

async function gcPass(pass: Pass): Promise<StepOutcome> {
  const { net } = pass;
  const { mode, cacheDir, graceMs, allowEmptyCache } = pass.flags.gc;
  const { confirmAfterMs = DEFAULT_CONFIRM_AFTER_MS, confirmPasses = DEFAULT_CONFIRM_PASSES } = pass.flags.gc;
  const apply = mode === 'apply';
  const {
    cache,
    valid,
    refused,
    report: gc,
  } = await gcFromCache(net, {
    cacheDir,
    cache: noteIgnored(pass, await pass.cache()),
    apply,
    graceMs,
    allowEmptyCache,
    signal: pass.signal,
    lockWaitMs: AGENT_LOCK_WAIT_MS,
    // Report mode releases nothing (confirmed mode nothing unconfirmed, below). A provably dead pod's chained record with no delegate behind it is only a note
    // that nothing of ours can ever release through: forgotten, so it cannot wedge the address. With a delegate it
    // is the evidence an apply releases through, and the leak must stay reported (ipam_shim_agent_gc_leaked, the
    // shipped alert): kept. Either way an ADD given the address takes it from the dead holder (src/gc/stale.ts).
    forgetChained: !net.delegate,
    // A record the runtime DELed that is gone from its cache is no leak: report mode forgets it, as DEL once did.
    forgetDeleted: true,
  });
  const network = net.conf.name;
  // confirmed: this pass's leaks (every proof apply needs; the chained records report mode forgot are gone) are
  // counted toward their window; those found in every pass of it are released as apply would. A pass that could
  // not look (the cache out of sight; with --allow-empty-cache, any blindness but a cache missing or empty, which
  // that flag declares the truth) starts every clock again.
  const confirming = mode === 'confirmed';
  const state = gcState(pass).confirmations;
  let awaiting: Array<{ record: { containerID: string; ifname: string; ips: string[] }; sighting: Sighting }> = [];
  const couldNotLook = refused !== undefined || (cache.blind !== undefined && cache.blind.kind !== 'missing' && cache.blind.kind !== 'empty');
  if (confirming && couldNotLook) forgetAll(state);
  else if (confirming) {
    const gone = new Set(gc.forgotten.map(attachmentKey));
    const leaks = gc.plan.release.filter((r) => !gone.has(attachmentKey(r.record)));
    const seen = confirmLeaks(state, leaks, performance.now(), new Date().toISOString(), { afterMs: confirmAfterMs, passes: confirmPasses });
    awaiting = seen.awaiting;
    const byKey = new Map(seen.confirmed.map((c) => [attachmentKey(c.record), c]));
    const out = await releasePlanned(
      { ...net, signal: pass.signal, lockWaitMs: AGENT_LOCK_WAIT_MS },
      seen.confirmed,
      'released a confirmed leak (found leaked in every pass of the confirmation window)',
      (record) => {
        const c = byKey.get(attachmentKey(record));
        return {
          step: 'gc',
          mode,
          reason: c?.reason,
          firstSeenAt: c?.sighting.firstSeenAt,
          passes: c?.sighting.passes,
          leakedForS: c ? Math.round((performance.now() - c.sighting.firstSeenMs) / 1000) : undefined,
        };
      },
    );
    gc.released.push(...out.released);
    gc.queued.push(...out.queued);
    gc.queueUnseen.push(...out.queueUnseen);
    gc.errors.push(...out.errors);
    gc.skipped.push(...out.skipped);
    pass.counter('ipam_shim_agent_gc_confirmed_released_total').inc({ network }, out.released.length + out.queued.length);
  }
  const awaitingGauge = pass.gauge('ipam_shim_agent_gc_awaiting_confirmation');
  awaitingGauge.reset();
  awaitingGauge.set({ network }, awaiting.length);
  for (const _ of gc.skipped) pass.busy();
  if (refused) net.log.warn({ step: 'gc', refused }, 'gc: refusing to release anything');
  pass.note({
    leaked: gc.plan.release.length,
    released: gc.released.length,
    queued: gc.queued.length,
    withheld: gc.plan.withheld.length,
    forgotten: gc.forgotten.length,
    awaiting: awaiting.length,
  });
  pass.counter('ipam_shim_agent_gc_queued_total').inc({ network }, gc.queued.length);
  const withheldGauge = pass.gauge('ipam_shim_agent_gc_withheld');
  withheldGauge.reset();
  withheldGauge.set({ network }, gc.plan.withheld.length);
  if (gc.plan.withheld.length)
    net.log.warn(
      {
        step: 'gc',
        withheld: gc.plan.withheld.map((w) => ({
          containerID: w.record.containerID,
          ifname: w.record.ifname,
          ips: w.record.ips,
          why: w.why,
          fix: w.fix,
        })),
      },
      'gc: leaked attachments withheld: no DEL is sent for them (what to do: fix)',
    );
  pass.counter('ipam_shim_agent_gc_forgotten_total').inc({ network }, gc.forgotten.length);
  if (gc.forgotten.length)
    net.log.warn(
      { step: 'gc', forgotten: gc.forgotten },
      'gc: forgot the chained records of provably dead pods (no address released: chained, the main plugin holds it)',
    );
  const leakedGauge = pass.gauge('ipam_shim_agent_gc_leaked');
  leakedGauge.reset();
  leakedGauge.set({ network, mode }, gc.plan.release.length);
  pass.counter('ipam_shim_agent_gc_released_total').inc({ network }, gc.released.length);
  for (const e of gc.errors) {
    pass.error();
    net.log.error({ step: 'gc', attachment: e.attachment, code: e.code, error: e.error }, 'gc: release failed');
  }
  const leaked = gc.plan.release.map((r) => ({
    containerID: r.record.containerID,
    ifname: r.record.ifname,
    pod: r.record.pod ?? null,
    ips: r.record.ips,
    why: r.reason,
  }));
  if (leaked.length) {
    net.log.warn(
      {
        step: 'gc',
        mode,
        leaked,
        released: gc.released,
        queued: gc.queued,
        ...(gc.queueUnseen.length ? { queueUnseen: gc.queueUnseen } : {}),
        ...(confirming
          ? {
              awaiting: awaiting.map((a) => ({
                containerID: a.record.containerID,
                ifname: a.record.ifname,
                firstSeenAt: a.sighting.firstSeenAt,
                passes: a.sighting.passes,
              })),
              confirmAfterS: confirmAfterMs / 1000,
              confirmPasses,
            }
          : {}),
      },
      apply
        ? 'gc: released leaked attachments'
        : confirming
          ? 'gc: leaked attachments found (confirmed mode: each is released once found leaked in every pass of the confirmation window)'
          : 'gc: leaked attachments found (report mode: set gc mode confirmed or apply to release them)',
    );
  } else net.log.debug({ step: 'gc', cached: valid.length, kept: gc.plan.kept.length }, 'gc: nothing leaked');
  return gc.errors.length ? 'error' : refused && mode !== 'report' ? 'skipped' : 'ok';
}

/** Logs the cache entries left out for names libcni would refuse, by file name, when they first appear; counts them. */
function noteIgnored(pass: Pass, view: CacheView): CacheView {
  pass.note({ cacheIgnored: view.ignored.length });
  const kept = gcState(pass);
  const fresh = view.ignored.filter((i) => !kept.ignored.has(i.file));
  kept.ignored = new Set(view.ignored.map((i) => i.file));
  if (fresh.length)
    pass.net.log.warn(
      { step: 'gc', count: view.ignored.length, new: fresh.slice(0, 20) },
      "runtime cache entries with a container ID or interface name libcni would refuse: ignored (never a pod of this node's, never a path)",
    );
  return view;
}

export const gcAgent: AgentStepEntry = {
  step: 'gc',
  families: [
    {
      name: 'ipam_shim_agent_gc_released_total',
      type: 'counter',
      help: 'Leaked pod attachments released by the agent (gc mode apply or confirmed).',
      labelNames: ['network'],
    },
    {
      name: 'ipam_shim_agent_gc_confirmed_released_total',
      type: 'counter',
      help: 'Leaked pod attachments released in gc mode confirmed: found leaked in every pass of the confirmation window (also in ipam_shim_agent_gc_released_total).',
      labelNames: ['network'],
    },
    {
      name: 'ipam_shim_agent_gc_awaiting_confirmation',
      type: 'gauge',
      help: 'Leaked attachments the last pass found that gc mode confirmed has not yet seen leaked for the whole confirmation window (0 in other modes).',
      labelNames: ['network'],
    },
    {
      name: 'ipam_shim_agent_gc_forgotten_total',
      type: 'counter',
      help: 'Chained records of provably dead pods the agent forgot in report mode (no address released: chained, the main plugin holds it).',
      labelNames: ['network'],
    },
    {
      name: 'ipam_shim_agent_gc_queued_total',
      type: 'counter',
      help: 'Leaked pod attachments whose delegate DEL only queued the release (azure-ipam with CNS unreachable): the address returns when CNS runs.',
      labelNames: ['network'],
    },
    {
      name: 'ipam_shim_agent_gc_withheld',
      type: 'gauge',
      help: "Leaked attachments the last pass sent no DEL for: no identity recorded (an older shim), or their pod is also a live attachment's (the log says what to do).",
      labelNames: ['network'],
    },
    {
      name: 'ipam_shim_agent_gc_leaked',
      type: 'gauge',
      help: "Attachments the last pass found leaked (not in the runtime's cache, proven dead, past the grace period): released in apply mode, once confirmed in confirmed mode, reported in report mode.",
      labelNames: ['network', 'mode'],
    },
  ],
  // The pass's line always says what gc found, 0 when it did not run.
  notes: { leaked: 0, released: 0, queued: 0, withheld: 0, forgotten: 0, awaiting: 0 },
  load: async () => gcStep,
};
