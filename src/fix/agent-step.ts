// What a fix's node-agent step gets from a reconcile pass (src/agent/reconcile.ts runs the network, gc and pods
// steps, then every fix's step in registry order) and what it answers.
import type { Counter, Gauge } from 'prom-client';
import type { LedgerRecord } from '../ledger/record.js';
import type { OpenNetwork } from '../network/open.js';
import type { PodsView } from '../fixes/pods.js';

export type StepOutcome = 'ok' | 'error' | 'skipped' | 'stopped';

export interface Pass {
  net: OpenNetwork;
  signal: AbortSignal;
  /** The ledger's records: one listing per pass, taken after GC (what it released is gone from it). */
  records(): Promise<LedgerRecord[]>;
  /** Every pod the runtime knows, against the ledger (the pods step); undefined when it could not look. */
  runtime: PodsView | undefined;
  /** One of the series the fix declared (Fix.agent.families). */
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
