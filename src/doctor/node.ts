// Doctor checks for the node itself, one module each: the conflists and the shim's place in them, whether the
// runtime uses the shim's entry, the shim and its delegate on
// the CNI path, the state directory, and the ledger against the delegate's own store. Read-only: they report,
// never repair (not even the delegate's VERSION cache is written).
import type { DoctorCheck } from '../contract/doctor-check.js';
import { binaryCheck } from './binary.js';
import { mainPluginCheck } from './main-plugin.js';
import { conflistCheck } from './conflist.js';
import { installedCheck } from './installed.js';
import { delegateCheck } from './delegate.js';
import { ledgerCheck } from './ledger.js';
import { stateDirCheck } from './state-dir.js';

/** In the order doctor runs them (before the feature checks). */
export const NODE_CHECKS: DoctorCheck[] = [conflistCheck, installedCheck, mainPluginCheck, binaryCheck, delegateCheck, stateDirCheck, ledgerCheck];
