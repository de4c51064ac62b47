// The node agent's residue step: azure-vnet residue naming a ledger address or the address of a pod the shim never
// saw (the pods view's unseenAddresses: addresses a fix holds apart, the reserved ones, excepted), removed with the
// function ADD uses. A cache entry is the runtime's word and may name anything: an unseen pod's address is a target
// only when THE rule (src/residue/cleanable.ts) allows it, judged against the node's addresses read this pass; when
// they cannot be read, no unseen pod's address is cleaned this pass.
import { attachmentKey, attachmentOfKey } from '../ledger/key.js';
import { listNeighbours } from '../effects/neigh.js';
import { addressOf } from '../net/ip.js';
import type { LedgerRecord } from '../ledger/record.js';
import type { CachedPod } from '../pods/cached-pod.js';
import { podName, type PodRanges } from '../pods/view.js';
import { AttachmentBusy, exclusiveAttachment } from '../contract/attachment-lock.js';
import type { AgentStep } from '../contract/agent-step.js';
import { findResidueOnNode, listPreroutingResidue, nodeBackends, readNodeFacts } from './find.js';
import { refusal, type NodeFacts, type Refusal } from './cleanable.js';
import { cleanResidueFor } from './cure.js';
import { Lasting } from '../contract/lasting.js';

/** An address of a cache entry THE rule refuses, with the pod and the entry (its attachment key). */
type Refused = Refusal & { pod: string; entry: string };

/** The ledger attachment holding each address. */
function holders(records: LedgerRecord[]): Map<string, LedgerRecord> {
  const out = new Map<string, LedgerRecord>();
  for (const r of records) {
    for (const text of r.ips) {
      const ip = addressOf(text);
      if (ip) out.set(ip, r);
    }
  }
  return out;
}

export const residueStep: AgentStep = {
  async reconcile(pass) {
    const { net } = pass;
    const { residue } = net.conf.settings;
    pass.note({ residueRemoved: 0 });
    if (!residue.ebtables && !residue.neigh) return 'skipped';
    const records = await pass.records();
    const candidates = pass.runtime?.unseenAddresses ?? [];
    if (!records.some((r) => r.ips.length) && !candidates.length) return 'ok';
    // The node's own addresses, MACs and next hops: what no address of a pod can be. Could not look: no unseen pod's
    // address is cleaned (ledger addresses still go to cleanResidueFor, which reads them again and fails loudly).
    let node: NodeFacts | undefined;
    try {
      node = await readNodeFacts(net.run);
    } catch (e) {
      pass.error();
      net.log.error(
        { step: 'residue', err: e },
        "residue: the node's addresses could not be read: the addresses of pods the shim never saw are not cleaned this pass",
      );
    }
    const unseen = node ? admitted(candidates, node, await pass.podRanges(), pass) : [];
    const ips = [...records.flatMap((r) => r.ips), ...unseen.flatMap((p) => p.ips)];
    if (!ips.length) return node ? 'ok' : 'error';
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
    const found = await findResidueOnNode(net.run, ips, { rules: eb.rules, neighbours }, node ? { node } : {});
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
    return failed || !node ? 'error' : 'ok';
  },
};

/**
 * Unseen pods with only the addresses THE rule lets the agent clean: never the node's own, never outside the
 * network's pod ranges. What is left out is logged (the pod, the address, why) and counted in the pass's line.
 */
function admitted(pods: readonly CachedPod[], node: NodeFacts, ranges: PodRanges, pass: Parameters<AgentStep['reconcile']>[0]): CachedPod[] {
  const out: CachedPod[] = [];
  const refused: Refused[] = [];
  for (const pod of pods) {
    const ips = pod.ips.filter((ip) => {
      const r = refusal(ip, node, ranges);
      if (r) refused.push({ ...r, pod: podName(pod), entry: attachmentKey(pod) });
      return !r;
    });
    if (ips.length) out.push({ ...pod, ips });
  }
  pass.note({ residueRefused: refused.length });
  // A rogue entry lasts as long as its pod: logged once per (entry, address) when it appears and when it goes.
  const { started, ended } = pass.state(() => new Lasting<Refused>((r) => `${r.entry} ${r.ip}`)).update(refused);
  if (started.length)
    pass.net.log.warn(
      { step: 'residue', refused: started.slice(0, 20).map(({ entry: _e, ...r }) => r), count: started.length },
      "residue: addresses in the runtime's cache that cannot be a pod's of this network are not cleaned (logged again when their entry goes)",
    );
  if (ended.length)
    pass.net.log.info(
      { step: 'residue', gone: ended.slice(0, 20).map(({ entry: _e, ...r }) => r), count: ended.length },
      "residue: cache entries whose addresses could not be a pod's are gone (or now can be)",
    );
  return out;
}
