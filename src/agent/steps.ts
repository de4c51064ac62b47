// Every step of a reconcile pass after `network` (which opens the shim's network), in the order they run: gc (its
// releases come first, so the ledger listing the later steps share no longer holds what it released), pods (the
// runtime's view the fixes' steps work on), then every fix's step in registry order. One shape for all of them
// (AgentStepEntry): the pass runner and the agent's metrics know no step by name.
import type { AgentStepEntry } from '../contract/fix.js';
import { FIXES } from '../fix-list/registry.js';
import { gcAgent } from '../gc/agent-step.js';
import { podsAgent } from './pods-step.js';

export const STEPS: readonly AgentStepEntry[] = [gcAgent, podsAgent, ...FIXES.flatMap((f) => (f.agent ? [f.agent] : []))];
