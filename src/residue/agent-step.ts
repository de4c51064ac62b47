// The node agent's residue step: azure-vnet residue naming a ledger address or the address of a pod the shim never
// saw (the pods step's residueTargets: reserved addresses excepted), removed with the function ADD uses.
import { attachmentKey, attachmentOfKey } from '../cni/config.js';
import { listNeighbours } from '../effects/neigh.js';
import type { LedgerRecord } from '../ledger/record.js';
import type { CachedPod } from '../gc/cached-pod.js';
import { podName } from '../fixes/pods.js';
import { AttachmentBusy, exclusiveAttachment } from '../fixes/attachment-lock.js';
import type { AgentStep } from '../fixes/agent-step.js';
import { findResidueOnNode, listPreroutingResidue, nodeBackends } from './clean.js';
import { cleanResidueFor } from './cure.js';

/** The ledger attachment holding each address. */
function holders(records: LedgerRecord[]): Map<string, LedgerRecord> {
  const out = new Map<string, LedgerRecord>();
  for (const r of records) for (const ip of r.ips) out.set(ip.split('/')[0]!, r);
  return out;
}

export const residueStep: AgentStep = {
  async reconcile(pass) {
    const { net } = pass;
    const { residue } = net.conf.settings;
    pass.note({ residueRemoved: 0 });
    if (!residue.ebtables && !residue.neigh) return 'skipped';
    const records = await pass.records();
    const unseen = pass.runtime?.residueTargets ?? [];
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
    let removedTotal = 0;
    const removedSeries = pass.counter('ipam_shim_agent_residue_removed_total');
    for (const [key, pod] of dirty) {
      if (pass.signal.aborted) return 'stopped';
      const attachment = attachmentOfKey(key);
      try {
        const removed = await exclusiveAttachment(net.ledger, attachment, async () => {
          const current = await net.ledger.get(attachment);
          const ips = current?.ips.length ? current.ips : pod?.ips;
          if (!ips?.length) return { rules: 0, neighbours: 0 }; // DEL'd meanwhile: not ours any more
          if (pod && !current)
            net.log.info({ step: 'residue', pod: podName(pod), ...attachment, ips }, 'residue: cleaning for a pod the shim never saw');
          return cleanResidueFor(net, ips);
        });
        removedSeries.inc({ network: net.conf.name, kind: 'ebtables' }, removed.rules);
        removedSeries.inc({ network: net.conf.name, kind: 'neigh' }, removed.neighbours);
        removedTotal += removed.rules + removed.neighbours;
        pass.note({ residueRemoved: removedTotal });
      } catch (e) {
        if (e instanceof AttachmentBusy) {
          pass.busy();
          net.log.info({ step: 'residue', ...attachment }, 'residue: the attachment is busy (a CNI call holds it); next pass');
          continue;
        }
        failed++;
        pass.error();
        net.log.error({ step: 'residue', ...attachment, ...(pod ? { pod: podName(pod), ips: pod.ips } : {}), err: e }, 'residue: cleanup failed');
      }
    }
    return failed ? 'error' : 'ok';
  },
};
