// The shape of a doctor check: it looks at one thing and returns findings; it never prints or repairs.
import type { OpenNetwork } from '../cli/network.js';

export type Verdict = 'ok' | 'warn' | 'problem' | 'skipped';

export interface Finding {
  check: string;
  verdict: Verdict;
  summary: string;
  /** What the operator should do about it (problems and warnings). */
  fix?: string;
  data?: unknown;
}

export interface DoctorCheck {
  name: string;
  run(net: OpenNetwork): Promise<Finding[]>;
}
