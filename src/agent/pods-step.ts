// The node agent's pods step: every pod the runtime's result cache holds (Pass.cache: GC's reader and guards)
// against the ledger. Pods the shim never saw are counted and logged when they first appear; the view
// (src/pods/view.ts, with every fix's hold) is handed to the steps after this one (Pass.provide).
import { attachmentKey } from '../ledger/key.js';
import type { AgentStep, Pass } from '../contract/agent-step.js';
import type { AgentStepEntry } from '../contract/fix.js';
import { Lasting } from '../contract/lasting.js';
import type { CacheView } from '../pods/cached-pod.js';
import { podName, viewPods } from '../pods/view.js';

/** What the step keeps from pass to pass (Pass.state). */
interface Kept {
  /** The unseen pods of the last pass (attachment keys): replaced every pass, never grows beyond the node's pods. */
  unseen: Set<string>;
  /** Why the runtime's result cache was out of sight (logged when it starts and when it ends). */
  outOfSight: Lasting<{ why: string }>;
}

/**
 * A file of this network that cannot be read makes the list unknowable and fails the step. "Could not look" never
 * reads as "found nothing": then the gauges are removed (no series, not 0) and
 * ipam_shim_agent_runtime_cache_readable is 0.
 */
const podsStep: AgentStep = {
  async reconcile(pass) {
    const { net } = pass;
    const network = net.conf.name;
    const kept = pass.state<Kept>(() => ({ unseen: new Set(), outOfSight: new Lasting((c) => c.why) }));
    const blind = () => {
      pass.gauge('ipam_shim_agent_runtime_cache_readable').set({ network }, 0);
      for (const g of ['ipam_shim_agent_runtime_pods', 'ipam_shim_agent_unseen_pods']) pass.gauge(g).remove({ network });
    };
    let view: CacheView;
    try {
      view = await pass.cache();
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
    const sight = kept.outOfSight.update(view.blind?.kind === 'missing' ? [{ why: view.blind.why }] : []);
    for (const c of sight.ended) net.log.info({ step: 'pods', was: c.why, since: c.since }, "pods: the runtime's result cache is in sight again");
    if (view.blind?.kind === 'missing') {
      blind();
      // A fresh node has no cache until its first pod: with no pod in the ledger either, that is no finding (info);
      // with pods recorded, the cache is out of sight (a wrong --cache-dir, another mount) and an operator acts.
      const podsRecorded = sight.started.length > 0 && (await pass.records()).some((r) => r.owner === 'pod');
      for (const c of sight.started)
        net.log[podsRecorded ? 'warn' : 'info'](
          { step: 'pods', why: c.why, podsRecorded },
          podsRecorded
            ? "pods: the runtime's result cache is out of sight: pods the shim never saw are not looked at (check --cache-dir; logged again when it changes or ends)"
            : 'pods: no runtime result cache yet and no pod recorded (a node before its first pod): looked for again every pass',
        );
      return 'skipped';
    }
    const v = viewPods(view.pods, await pass.records(), pass.holds());
    pass.gauge('ipam_shim_agent_runtime_cache_readable').set({ network }, 1);
    pass.gauge('ipam_shim_agent_runtime_pods').set({ network }, view.pods.length);
    pass.gauge('ipam_shim_agent_unseen_pods').set({ network }, v.unseen.length);
    pass.note({ runtimePods: view.pods.length, unseenPods: v.unseen.length });
    logUnseen(pass, kept, v.unseen);
    for (const p of v.unreadable) {
      pass.error();
      net.log.error(
        { step: 'pods', pod: podName(p), containerID: p.containerID, ifname: p.ifname, why: p.unreadable },
        "pods: a cache entry's addresses cannot be read: its residue and reserved addresses are not looked at",
      );
    }
    pass.provide(v);
    return v.unreadable.length ? 'error' : 'ok';
  },
};

/**
 * Unseen pods are logged when they first appear (a pod started before the shim was installed stays unseen until it
 * ends); the gauge tells the rest.
 */
function logUnseen(pass: Pass, kept: Kept, unseen: ReturnType<typeof viewPods>['unseen']): void {
  const fresh = unseen.filter((p) => !kept.unseen.has(attachmentKey(p)));
  kept.unseen = new Set(unseen.map(attachmentKey));
  if (!fresh.length) return;
  pass.net.log.warn(
    {
      step: 'pods',
      count: unseen.length,
      new: fresh.slice(0, 20).map((p) => ({ pod: podName(p), containerID: p.containerID, ifname: p.ifname, ips: p.ips })),
    },
    "pods: the runtime holds pods the shim never saw (started while it was not in the chain): their residue is removed like the ledger's",
  );
}

export const podsAgent: AgentStepEntry = {
  step: 'pods',
  families: [
    {
      name: 'ipam_shim_agent_runtime_cache_readable',
      type: 'gauge',
      help: "1 when the last pass read the runtime's result cache for the network, 0 when it could not look (missing or unreadable: then the runtime_pods, unseen_pods and reserved_pods series are absent, not 0).",
      labelNames: ['network'],
    },
    {
      name: 'ipam_shim_agent_runtime_pods',
      type: 'gauge',
      help: "Pod attachments in the runtime's result cache for the network (the last pass).",
      labelNames: ['network'],
    },
    {
      name: 'ipam_shim_agent_unseen_pods',
      type: 'gauge',
      help: "Pod attachments in the runtime's result cache that the shim's ledger does not hold: pods started while the shim was not in the chain (their residue is removed all the same).",
      labelNames: ['network'],
    },
  ],
  load: async () => podsStep,
};
