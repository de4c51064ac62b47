// The one shape every fix implements (issue 25). A fix is one cure the shim keeps in place: what it refuses and
// does for the addresses an ADD hands out, what CHECK verifies, what makes STATUS fail, what the node agent keeps
// right between calls, what doctor reports, and which metric series it owns. ADD, CHECK, STATUS, the agent,
// doctor, both metric registries and the build's warm-up loop over src/fix-list/registry.ts and know no fix by name.
// This folder (src/contract/) is what a fix is built on; the list of fixes sits above the fix folders (src/fix-list/).
//
// The CNI path loads every fix's module (src/fix-list/registry.ts), so a fix's own module holds only what a call
// runs; its agent step and doctor checks are loaded on demand (`load`, `doctor`), and so stay out of a call.
import type { NetConf } from '../cni/config.js';
import type { Run } from '../effects/exec.js';
import type { RunScript } from '../scripted/scripted-run.js';
import type { Logger } from '../log.js';
import type { DoctorCheck } from './doctor-check.js';
import type { Command } from './command.js';
import type { AgentStep } from './agent-step.js';
import type { PodHold } from '../pods/view.js';

/** What a fix's address hooks get at ADD and CHECK. */
export interface AddressCall {
  conf: NetConf;
  run: Run;
  log: Logger;
  /** The addresses handed out, each once, in canonical text. */
  ips: readonly string[];
  /** Host-side interfaces of this attachment: their neighbour entries are the pod's own. */
  ownDevs: readonly string[];
  /** Adds `by` to one of this call's tallies (a name in the fix's `metrics.tallies`). */
  tally(name: string, by: number): void;
}

/** A family of the plugin's metrics textfile (src/metrics.ts): names and labels are a contract with dashboards. */
export interface CniFamily {
  type: 'counter' | 'gauge' | 'histogram';
  help: string;
}

/** One call's tally and the counter series it adds to (labels beyond `network`). Each exists from 0 on. */
export interface TallySeries {
  tally: string;
  family: string;
  labels?: Record<string, string>;
}

/** A series of the node agent's own registry (src/agent/metrics.ts). */
export interface AgentFamily {
  name: string;
  type: 'counter' | 'gauge';
  help: string;
  labelNames?: string[];
  /** Created at 0 when the agent starts (a counter without labels, e.g.): rate() works from the first scrape. */
  zero?: boolean;
  /**
   * Series created at 0 as soon as a pass knows the network, one per label set given (with `network` added): a
   * counter born at its first increment gives increase() nothing for that first event, so its alert never fires.
   */
  perNetwork?: Array<Record<string, string>>;
}

/** A step of the agent's pass: a fix's (Fix.agent), the gc step's and the pods step's (src/agent/steps.ts). */
export interface AgentStepEntry {
  /** A label value (ipam_shim_agent_steps_total{step}), `step` in its log lines. */
  step: string;
  /** The agent series it owns (src/agent/metrics.ts creates them; Pass.counter/gauge hand them out). */
  families: AgentFamily[];
  /** Fields the pass's log line carries even when the step does not run, with their value then. */
  notes?: Record<string, number | boolean>;
  /** The step; `fixes` is the registry's list (a step that hands out addresses cures them as ADD does). */
  load(fixes: readonly Fix[]): Promise<AgentStep>;
}

/**
 * What a fix's STATUS look found: why no ADD can succeed now, and a lasting condition worth a warning. STATUS runs
 * on every CRI Status (every 5 s per node), so the verb logs a warning when it changes and once an hour while it
 * lasts (src/status/warnings.ts), not on every call.
 */
interface StatusFinding {
  problem?: string;
  warning?: { msg: string; fields: Record<string, unknown> };
}

export interface Fix {
  /** Unique; how logs and docs name the fix. */
  name: string;
  /** What it looks after, in a few words: doctor's and the agent's command summaries list it (src/fix-list/about.ts). */
  about: string;
  /**
   * ADD, first: code 7 for a setting this fix cannot work with, before the delegate allocates anything; `install`
   * asks the same of the settings it is about to write.
   */
  validate?(conf: Pick<NetConf, 'settings'>): void;
  /** ADD in the IPAM slot: reads started now, while the delegate allocates; returns the Run the hooks then get. */
  prefetch?(conf: NetConf, run: Run): Run;
  /** ADD and CHECK, before any fix acts: throws a CniError for an address that must not be used. */
  refuse?(conf: NetConf, ips: readonly string[]): void;
  /** ADD: puts the node right for the addresses; throws a CniError when it cannot. Fixes run side by side. */
  apply?(call: AddressCall): Promise<void>;
  /** CHECK: read-only; throws a CniError when the node is not right for the addresses. */
  verify?(call: AddressCall): Promise<void>;
  /** STATUS: why no ADD can succeed now, or undefined. */
  status?(conf: NetConf): StatusFinding;
  /**
   * The runtime's pods view (src/pods/view.ts): the addresses of the runtime's pods this fix holds apart (listed in
   * the view's `held`, never among the unseen pods' addresses, so no step acts on them); undefined: none here.
   */
  holds?(conf: NetConf): PodHold | undefined;
  /** The plugin's textfile: the families this fix owns, what its tallies add to, and a tally per call outcome. */
  metrics?: {
    families: Record<string, CniFamily>;
    tallies: TallySeries[];
    /** The tally a finished call adds 1 to (a refusal counted by its error code), or undefined. */
    outcome?(verb: string, code: number): string | undefined;
  };
  /** The node agent: the step's name (a label value), the series it owns, and the step itself. */
  agent?: AgentStepEntry;
  /** doctor's checks for this fix. */
  doctor?(): Promise<DoctorCheck[]>;
  /**
   * Its operator commands (`ipam-shim <name>`), each loaded only when it runs (src/cli/index.ts), handed the list of
   * every fix (the registry's: a command that hands out addresses cures them as ADD does, src/contract/address-loop.ts).
   */
  commands?: Record<string, (fixes: readonly Fix[]) => Promise<Command>>;
  /**
   * The build's warm-up (src/warm.ts): the node's tools this fix runs, answered as they print, and the /proc files
   * it reads, so that the sample calls take the branches a real call takes.
   */
  warm?: { run: RunScript; proc?: Record<string, string> };
}
