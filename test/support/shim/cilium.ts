// cilium-cni's place in a test's list: the stand-in (test/fixtures/cilium-cni/, docs/testing.md) of a Cilium line,
// chosen by the directory a runtime puts on CNI_PATH. Every suite that needs "what sits where cilium-cni sits" takes
// its plugin dir and its main-plugin config from here.
import { join } from 'node:path';
import { ROOT } from '../paths.js';

/** '1.17': spec <= 1.0.0, no GC, no STATUS (AKS's line, the default); 'newer': 1.1.0 and STATUS, still no GC. */
export type CiliumLine = '1.17' | 'newer';
export const CILIUM_LINES: readonly CiliumLine[] = ['1.17', 'newer'];

/** The directory holding that line's `cilium-cni`: put it first on CNI_PATH. */
export function ciliumCniDir(line: CiliumLine = '1.17'): string {
  return join(ROOT, 'test/fixtures/cilium-cni', line);
}

/** The line that takes a list at `cniVersion`: 1.1.0 needs a newer cilium-cni than 1.17. */
export function ciliumLineFor(cniVersion: string): CiliumLine {
  return cniVersion === '1.1.0' ? 'newer' : '1.17';
}

/** cilium-cni's entry in a list, in delegated-plugin mode: `ipam` is the plugin it delegates IPAM to. */
export function ciliumCni(ipam: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, any> {
  return { type: 'cilium-cni', ipam, ...extra };
}
