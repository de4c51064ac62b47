// The removal of the residue find.ts lists for a set of pod IPs: rule by rule with the program of the ebtables
// backend holding it, neighbour by neighbour, and fail loudly when residue stays.
import { CniError, ErrorCode } from '../cni/errors.js';
import { deleteRule } from '../effects/ebtables.js';
import type { Run } from '../effects/exec.js';
import { deleteNeighbour } from '../effects/neigh.js';
import type { ResidueRule } from './parse.js';
import {
  findResidueOnNode,
  listPreroutingResidue,
  mayNameAny,
  messageOf,
  ruleTarget,
  snapshot,
  type BackendStatus,
  type ResidueOptions,
  type ResidueSnapshot,
  type Spared,
} from './find.js';

export interface CleanOptions extends ResidueOptions {
  /** Collect deletion failures in `errors` instead of throwing (DEL and the operator CLI keep going). */
  keepGoing?: boolean;
}

export interface CleanFailure {
  /** The rule text or `neigh <ip> dev <dev>`. */
  target: string;
  message: string;
}

export interface CleanResult {
  ebtablesAvailable: boolean;
  ebtablesBackends: BackendStatus[];
  removed: ResidueSnapshot;
  errors: CleanFailure[];
  /** Residue-shaped, but the node's own: left alone. */
  spared: Spared[];
}

/**
 * Removes the residue for exactly `ips`: one listing (ebtables and neighbours concurrently), then one
 * deletion per rule/entry. Idempotent: residue that disappears meanwhile is not a failure, and a second call
 * removes nothing. Absent ebtables/nat table is tolerated (`ebtablesAvailable: false`). A deletion that
 * really fails — or a rule ebtables calls absent that is still listed afterwards — throws
 * CniError(ResidueCleanupFailed) naming the rules, after every other deletion has been attempted.
 */
export async function cleanResidue(run: Run, ips: readonly string[], opts: CleanOptions = {}): Promise<CleanResult> {
  const snap = await snapshot(run, opts, ips);
  const found = await findResidueOnNode(run, ips, snap, opts);
  const removed: ResidueSnapshot = { rules: [], neighbours: [] };
  const vanished: ResidueRule[] = [];

  const ruleErrors: CleanFailure[] = [];
  const neighErrors: CleanFailure[] = [];
  // Rules and neighbours are independent, so the two sequences run side by side. Within each, one at a time:
  // concurrent nft transactions on one table only make ebtables retry, and results keep the listing order.
  await Promise.all([
    (async () => {
      for (const rule of found.rules) {
        try {
          if ((await deleteRule(run, rule, rule.program)) === 'deleted') removed.rules.push(rule);
          else vanished.push(rule);
        } catch (e) {
          ruleErrors.push({ target: ruleTarget(rule), message: messageOf(e) });
        }
      }
    })(),
    (async () => {
      for (const n of found.neighbours) {
        try {
          if ((await deleteNeighbour(run, n.ip, n.dev)) === 'deleted') removed.neighbours.push(n);
        } catch (e) {
          neighErrors.push({ target: `neigh ${n.ip} dev ${n.dev}`, message: messageOf(e) });
        }
      }
    })(),
  ]);
  const errors = [...ruleErrors, ...neighErrors];

  // "No such rule" is only believable if the rule is really gone: a listing form that does not re-parse into
  // the same rule would otherwise make residue look cleaned. Re-list only in that (rare) case.
  if (vanished.length) {
    try {
      const still = new Set((await listPreroutingResidue(run, mayNameAny(ips), snap.choice)).rules.map(ruleTarget));
      for (const r of vanished) {
        if (still.has(ruleTarget(r)))
          errors.push({ target: ruleTarget(r), message: `${r.program ?? 'ebtables'} -D reported no such rule, but it is still listed` });
      }
    } catch (e) {
      errors.push({ target: vanished.map(ruleTarget).join(' | '), message: `re-listing to confirm removal: ${messageOf(e)}` });
    }
  }

  if (errors.length && !opts.keepGoing) {
    throw new CniError(ErrorCode.ResidueCleanupFailed, `cleaning residue for ${ips.join(', ')}`, {
      details: errors.map((f) => `${f.target}: ${f.message}`).join('; '),
    });
  }
  return { ebtablesAvailable: snap.ebtablesAvailable, ebtablesBackends: snap.backends, removed, errors, spared: found.spared };
}
