// PURE: which ebtables backends residue detection reads. `ebtables-legacy` and `ebtables-nft` see different
// tables, and azure-vnet wrote its rules with whichever `ebtables` the node had; so every backend that can hold
// tables is read (src/net/backend-probe.ts is the question, src/effects/ebtables-probe.ts answers it from files),
// and none the kernel cannot serve is started: ADD pays one process per backend that may hold rules, not one per
// backend installed.
import { basename } from 'node:path';
import type { BackendProbe, KernelNeed } from '../net/backend-probe.js';

/** `ebtables`: the node's `ebtables` when it is neither known backend (a wrapper, an old standalone build). */
export type BackendName = 'nft' | 'legacy' | 'ebtables';

/** The `residue.ebtablesBackends` setting: `auto`, or exactly these backends (no kernel probe). */
export type BackendSetting = 'auto' | readonly BackendName[];

interface Backend {
  name: BackendName;
  /** The program run for it: the node's `ebtables` when that is this backend, else `ebtables-nft`/`ebtables-legacy`. */
  program: string;
}

interface SkippedBackend {
  name: BackendName;
  /** not-installed: no program for it on PATH; kernel: the kernel cannot hold its tables; not-selected: the setting. */
  why: 'not-installed' | 'kernel' | 'not-selected';
  reason: string;
  /** not-installed while the kernel may hold its tables: rules there cannot be seen (a warning, not "no rules"). */
  blind?: boolean;
}

export interface BackendChoice {
  read: Backend[];
  skipped: SkippedBackend[];
}

const NEEDS: Record<'nft' | 'legacy', KernelNeed> = {
  nft: { module: 'nf_tables', config: 'CONFIG_NF_TABLES_BRIDGE' },
  legacy: { module: 'ebtable_nat', config: 'CONFIG_BRIDGE_EBT_T_NAT' },
};
const PROGRAMS = { nft: 'ebtables-nft', legacy: 'ebtables-legacy' } as const;

/** Which known backend a resolved program path is (xtables-nft-multi, ebtables-nft, ebtables-legacy), if any. */
function kindOf(path: string, nft: string | undefined, legacy: string | undefined): BackendName {
  if (path === nft || /nft/.test(basename(path))) return 'nft';
  if (path === legacy || /legacy/.test(basename(path))) return 'legacy';
  return 'ebtables';
}

/**
 * The backends to read, the node's own `ebtables` first (the program the node's tools use, as before), and the
 * ones left out with the reason. `auto` reads a known backend unless the kernel provably cannot hold its nat
 * table ("unknown" is read: could not tell is not "none"); an explicit list reads exactly those that are installed.
 */
export function chooseBackends(probe: BackendProbe, setting: BackendSetting = 'auto'): BackendChoice {
  const nodeProgram = probe.program('ebtables');
  const installed = { nft: probe.program(PROGRAMS.nft), legacy: probe.program(PROGRAMS.legacy) };
  const nodeKind = nodeProgram === undefined ? undefined : kindOf(nodeProgram, installed.nft, installed.legacy);
  const wanted = (name: BackendName) => setting === 'auto' || setting.includes(name) || (name === nodeKind && setting.includes('ebtables'));

  const out: BackendChoice = { read: [], skipped: [] };
  const order: BackendName[] = [...(nodeKind ? [nodeKind] : []), 'nft', 'legacy'];
  for (const name of [...new Set(order)]) {
    if (!wanted(name)) {
      out.skipped.push({ name, why: 'not-selected', reason: `not in residue.ebtablesBackends (${[...setting].join(', ')})` });
      continue;
    }
    if (name === 'ebtables') {
      out.read.push({ name, program: 'ebtables' }); // not a backend we know: read as before, no kernel probe
      continue;
    }
    const program = name === nodeKind ? 'ebtables' : installed[name] ? PROGRAMS[name] : undefined;
    if (!program) {
      // The node's unclassified `ebtables` may well be this backend (an old standalone ebtables is legacy): no warning then.
      const k = nodeKind === 'ebtables' ? undefined : probe.kernel(NEEDS[name]);
      const blind = k !== undefined && k.has !== 'no';
      out.skipped.push({
        name,
        why: 'not-installed',
        reason: `${PROGRAMS[name]} is not installed${blind ? ` but the kernel ${k.has === 'yes' ? 'has' : 'may have'} its tables (${k.evidence}): rules there are not seen` : ''}`,
        ...(blind ? { blind } : {}),
      });
      continue;
    }
    if (setting === 'auto') {
      const k = probe.kernel(NEEDS[name]);
      if (k.has === 'no') {
        out.skipped.push({ name, why: 'kernel', reason: `the kernel cannot hold its tables: ${k.evidence}` });
        continue;
      }
    }
    out.read.push({ name, program });
  }
  return out;
}
