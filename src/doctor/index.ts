// The checks `ipam-shim doctor` runs, in order. Each lives in its own module; add new ones here.
import type { DoctorCheck } from './check.js';

export const CHECKS: DoctorCheck[] = [];
