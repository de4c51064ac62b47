// What the shim does with every address it hands out or passes through, in both placements.
import type { VerbContext } from './context.js';

export interface AddressContext {
  /** Host-side interfaces of this attachment: their neighbour entries are the pod's own, not residue. */
  ownDevs: string[];
}

/** ADD: runs the per-address steps; throws a CniError when the address must not be used. */
export async function prepareAddresses(_ctx: VerbContext, _ips: string[], _ac: AddressContext): Promise<void> {}

/** CHECK: the same conditions, read-only. */
export async function checkAddresses(_ctx: VerbContext, _ips: string[]): Promise<void> {}

/** STATUS: a reason ADD cannot succeed now (e.g. every delegate range is reserved), or undefined. */
export async function statusProblems(_ctx: VerbContext): Promise<string | undefined> {
  return undefined;
}
