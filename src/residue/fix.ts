// Fix 1, stale azure-vnet residue: per-pod ebtables rules (nat PREROUTING arpreply/dnat to a dead MAC) and
// permanent neighbour entries naming an address being handed out are removed at ADD, are a failed CHECK when
// back, and are removed by the node agent for every ledger address and every pod the runtime knows.
import { CniError, ErrorCode } from '../cni/errors.js';
import { listPreroutingCall } from '../effects/ebtables.js';
import { prefetching } from '../effects/exec.js';
import type { Fix } from '../contract/fix.js';
import { listResidueFor, nodeBackends } from './find.js';
import { cleanResidueFor, residueOptions, residueOff } from './cure.js';
import { warmProc, warmRun } from './warm.js';

export const residueFix: Fix = {
  name: 'residue',
  about: 'residue',
  prefetch(conf, run) {
    const { ebtables, ebtablesBackends } = conf.settings.residue;
    // Not the neighbours: which families to list is only known from the delegate's answer, and IPv4's are a file
    // read (src/effects/neigh.ts listPermanentNeighbours). One listing per backend that may hold rules.
    const calls = ebtables ? nodeBackends(ebtablesBackends).read.map((b) => listPreroutingCall(b.program)) : [];
    return prefetching(run, calls, 'residue.prefetch');
  },
  async apply(call) {
    const removed = await cleanResidueFor(call, call.ips, call.ownDevs);
    call.tally('residueRules', removed.rules);
    call.tally('residueNeighbours', removed.neighbours);
  },
  async verify(call) {
    if (residueOff(call.conf)) return;
    const found = await listResidueFor(call.run, call.ips, residueOptions(call.conf, call.ownDevs));
    if (found.rules.length || found.neighbours.length) {
      throw new CniError(ErrorCode.ResidueCleanupFailed, `stale residue is back for ${call.ips.join(', ')}`, {
        details: [...found.rules.map((r) => r.text), ...found.neighbours.map((n) => `neigh ${n.ip} dev ${n.dev} lladdr ${n.mac ?? '?'}`)].join('; '),
      });
    }
  },
  metrics: {
    families: {
      ipam_shim_residue_removed_total: {
        type: 'counter',
        help: 'azure-vnet residue removed for handed-out addresses, by kind (ebtables rule, neighbour entry).',
      },
    },
    tallies: [
      { tally: 'residueRules', family: 'ipam_shim_residue_removed_total', labels: { kind: 'ebtables' } },
      { tally: 'residueNeighbours', family: 'ipam_shim_residue_removed_total', labels: { kind: 'neigh' } },
    ],
  },
  agent: {
    step: 'residue',
    families: [
      {
        name: 'ipam_shim_agent_residue_removed_total',
        type: 'counter',
        help: 'azure-vnet residue removed for ledger addresses and the addresses of pods the shim never saw, by kind.',
        labelNames: ['network', 'kind'],
        perNetwork: [{ kind: 'ebtables' }, { kind: 'neigh' }],
      },
    ],
    load: async () => (await import('./agent-step.js')).residueStep,
  },
  doctor: async () => [(await import('./doctor.js')).residueCheck],
  warm: { run: warmRun, proc: warmProc },
  commands: { residue: async () => (await import('./cli.js')).residueCommand },
};
