// What a node-agent step gets from a reconcile pass and what it answers: the gc and pods steps (src/gc/, src/pods/)
// and every fix's step alike. src/agent/reconcile.ts runs the network step, then each step in order (gc, pods,
// then the fixes' in registry order: src/agent/steps.ts).
import type { Counter, Gauge } from 'prom-client';
import type { CacheView } from '../pods/cached-pod.js';
import type { LedgerRecord } from '../ledger/record.js';
import type { OpenNetwork } from '../network/open.js';
import type { PodHold, PodRanges, PodsView } from '../pods/view.js';

export type StepOutcome = 'ok' | 'error' | 'skipped' | 'stopped';

/** report: leaks only reported; apply: released when found; confirmed: released once found in every pass of a window. */
export type GcMode = 'report' | 'apply' | 'confirmed';

/** The agent's gc flags: the gc step's mode and guards, and where the runtime's result cache is. */
export interface GcFlags {
  mode: GcMode;
  cacheDir: string;
  graceMs: number;
  allowEmptyCache: boolean;
  /** confirmed mode: a leak must be found in every pass for at least this long … */
  confirmAfterMs?: number | undefined;
  /** … and in at least this many passes (defaults: src/gc/confirm.ts's, 15 minutes and 3). */
  confirmPasses?: number | undefined;
}

/** The agent's own flags (src/cli/agent.ts), beside the network's settings (net.conf.settings). */
interface PassFlags {
  gc: GcFlags;
}

export interface Pass {
  net: OpenNetwork;
  signal: AbortSignal;
  flags: PassFlags;
  /** The ledger's records: one listing per pass, taken after GC (what it released is gone from it). */
  records(): Promise<LedgerRecord[]>;
  /** The runtime's result cache for the network: read once per pass (gc, then pods); a read that throws fails both. */
  cache(): Promise<CacheView>;
  /**
   * The network's pod ranges (the IPAM configs' host-local ranges, else the ledger's subnets: src/pods/ranges.ts)
   * from this pass's records: nothing outside them is an unseen pod's address to clean (src/residue/cleanable.ts).
   */
  podRanges(): Promise<PodRanges>;
  /** Every fix's hold on the pods' addresses (Fix.holds), for the pods view; throws what a fix's settings reader does. */
  holds(): Array<{ fix: string; hold: PodHold }>;
  /** Every pod the runtime knows, against the ledger (the pods step); undefined when it could not look. */
  runtime: PodsView | undefined;
  /** Hands the runtime's pods view to the steps after this one (Pass.runtime): the pods step's answer. */
  provide(view: PodsView): void;
  /** One of the series the step declared (AgentStepEntry.families). */
  counter(name: string): Counter;
  gauge(name: string): Gauge;
  /** Counts one error of this step (the pass's `errors` and ipam_shim_agent_errors_total{step}). */
  error(): void;
  /** An attachment left for the next pass: a CNI call held its lock. */
  busy(): void;
  /** Fields for the pass's log line ("reconcile pass ok"), e.g. `residueRemoved`. */
  note(fields: Record<string, number | boolean>): void;
  /**
   * What this step keeps from pass to pass (e.g. which lasting conditions it has logged): made by `init` the first
   * time, the same object every later pass of the agent (a pass run alone starts afresh).
   */
  state<T>(init: () => T): T;
}

export interface AgentStep {
  /** Runs inside its own try: a throw is logged and counted, and the other steps still run. */
  reconcile(pass: Pass): Promise<StepOutcome>;
}
