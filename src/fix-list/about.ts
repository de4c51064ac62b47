// The commands' one-line summaries that name the fixes (doctor's checks, the agent's steps), from the registry: a
// new fix shows up in `ipam-shim --help` without an edit here.
import { FIXES } from './registry.js';

const about = (pick: (f: (typeof FIXES)[number]) => unknown): string =>
  FIXES.filter(pick)
    .map((f) => f.about)
    .join(', ');

/** `ipam-shim doctor`'s summary: the node's own checks, then every fix with doctor checks. */
export const doctorSummary = (): string =>
  `check this node: conflist (and whether the runtime uses it), main plugin, delegate, ledger, pods the shim never saw, ${about((f) => f.doctor)}`;

/** `ipam-shim agent`'s summary: GC and the pods step, then every fix with an agent step. */
export const agentSummary = (): string =>
  `the node agent (DaemonSet): keep the shim installed, reconcile GC, pods, ${about((f) => f.agent)} every interval, serve /metrics`;
