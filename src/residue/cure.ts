// The residue cure itself, as ADD and the node agent run it: remove what names the addresses, log what went.
import type { NetConf } from '../cni/config.js';
import type { Run } from '../effects/exec.js';
import type { Logger } from '../log.js';
import { cleanResidue } from './clean.js';

/** The listing/cleaning options the settings give (the pod's own interfaces excepted). */
export const residueOptions = (conf: NetConf, ownDevs: readonly string[]) => {
  const { ebtables, neigh, ebtablesBackends } = conf.settings.residue;
  return { ebtables, neigh, backends: ebtablesBackends, excludeDevs: [...ownDevs] };
};

/** Both kinds of residue switched off: nothing to look at. */
export const residueOff = (conf: NetConf): boolean => !conf.settings.residue.ebtables && !conf.settings.residue.neigh;

/**
 * Removes the residue naming `ips` (ADD, and the node agent for ledger addresses and unseen pods); throws CniError
 * 102 when some stays. Returns how many rules and neighbour entries went.
 */
export async function cleanResidueFor(
  c: { conf: NetConf; run: Run; log: Logger },
  ips: readonly string[],
  ownDevs: readonly string[] = [],
): Promise<{ rules: number; neighbours: number }> {
  if (residueOff(c.conf)) return { rules: 0, neighbours: 0 };
  const cleaned = await cleanResidue(c.run, ips, residueOptions(c.conf, ownDevs));
  const { rules, neighbours } = cleaned.removed;
  if (rules.length || neighbours.length) {
    // Which backend held each rule: the operator learns where azure-vnet wrote them.
    const byBackend = rules.map((r) => ({ backend: r.backend, program: r.program, rule: r.text }));
    c.log.warn(
      { ips, rules: rules.map((r) => r.text), ebtables: byBackend, neighbours: neighbours.map((n) => `${n.ip} dev ${n.dev}`) },
      'removed stale residue',
    );
  }
  // The delegate handed out (or the agent was given) an address of the node's own plumbing: never residue.
  if (cleaned.spared.length) c.log.warn({ ips, spared: cleaned.spared }, "residue: left the node's own rules and neighbours alone");
  const blind = cleaned.ebtablesBackends.filter((b) => b.blind);
  if (blind.length) c.log.warn({ ips, backends: blind }, 'an ebtables backend that may hold rules could not be read');
  return { rules: rules.length, neighbours: neighbours.length };
}
