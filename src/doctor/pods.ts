// Doctor's runtime-pods check: every pod the runtime's result cache holds (the agent's pods step, the same reader
// and guards as GC, src/gc/from-cache.ts), against the ledger: pods the shim never saw (started outside the chain)
// and pods holding an address inside reservedCIDRs. "Could not look" is its own finding, never "no pods".
import { cachedAttachments, DEFAULT_CACHE_DIR } from '../gc/from-cache.js';
import { podName, viewPods } from '../pods/view.js';
import { podHolds } from '../fix-list/pod-holds.js';
import { type DoctorCheck, type Finding, list } from '../contract/doctor-check.js';

const NAME = 'runtime-pods';

export const podsCheck: DoctorCheck = {
  name: NAME,
  async run(net, opts) {
    const cacheDir = opts?.cacheDir ?? DEFAULT_CACHE_DIR;
    const fix = `point --cache-dir at the runtime's CNI cache root (libcni's, default ${DEFAULT_CACHE_DIR}; results/ below it)`;
    let view;
    try {
      view = await cachedAttachments(cacheDir, net.conf.name);
    } catch (e) {
      return [{ check: NAME, verdict: 'warn', summary: `could not look at the pods the runtime knows: ${(e as Error).message}`, fix }];
    }
    if (view.blind?.kind === 'missing') {
      // libcni creates results/ at the first pod's ADD: on a fresh node it is not there yet. That is "no pods yet"
      // only while the ledger agrees (no pod attachment recorded, as GC's guard): else the cache is out of sight.
      const pods = await net.ledger.list().then(
        ({ records, corrupt }) => (corrupt.length ? undefined : records.filter((r) => r.owner !== 'agent').length),
        () => undefined,
      );
      if (pods === 0)
        return [
          {
            check: NAME,
            verdict: 'ok',
            summary: `no pods yet: ${view.blind.why} (libcni creates it at the first pod) and the ledger holds no pod attachment`,
          },
        ];
      const held = pods === undefined ? '' : `, while the ledger holds ${pods} pod attachment(s)`;
      return [{ check: NAME, verdict: 'warn', summary: `could not look at the pods the runtime knows: ${view.blind.why}${held}`, fix }];
    }
    if (view.blind && view.blind.kind !== 'empty')
      return [{ check: NAME, verdict: 'warn', summary: `could not look at the pods the runtime knows: ${view.blind.why}`, fix }];
    const { records } = await net.ledger.list();
    const v = viewPods(view.pods, records, podHolds(net.conf));
    const out: Finding[] = v.held.map(({ fix: _fix, ...r }) => ({
      check: NAME,
      verdict: 'problem' as const,
      summary: `pod ${podName(r.pod)} (${r.pod.containerID}) holds ${r.ip}, inside reserved CIDR ${r.cidr}: replies to it are routed to the reserved subnet's owner and lost`,
      fix: `shrink the IPAM range so it avoids ${r.cidr}, then recreate the pod (neither the agent nor doctor touches it)`,
      data: r,
    }));
    if (v.unseen.length) {
      out.push({
        check: NAME,
        verdict: 'warn',
        summary: `${v.unseen.length} pod(s) the runtime knows were never seen by the shim (started while it was not in the chain): ${list(v.unseen.map(podName))}`,
        fix: "the agent removes their residue each pass; keep the shim's entry in the conflist the runtime uses (the installed check, the agent's /readyz) so new pods pass through it",
        data: v.unseen,
      });
    }
    for (const p of v.unreadable)
      out.push({ check: NAME, verdict: 'warn', summary: `the runtime's cache entry of ${podName(p)} does not give its addresses: ${p.unreadable}` });
    if (!out.length)
      out.push({
        check: NAME,
        verdict: 'ok',
        summary: `${view.pods.length} pod(s) in the runtime's cache (${cacheDir}), all seen by the shim, none holding a reserved address`,
      });
    return out;
  },
};
