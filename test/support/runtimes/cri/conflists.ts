// Conflists for the CRI suites: AKS-shaped (cilium-cni, here Debian's ptp standing in for it, first), with the
// shim in either placement and host-local as the delegated IPAM, at 0.3.1 (what AKS ships) or 1.0.0.
import path from 'node:path';
import type { CriBedDirs } from './bed.js';

export type Placement = 'chained' | 'ipam';
export type CniVersion = '0.3.1' | '1.0.0';

export const PLACEMENTS: Placement[] = ['chained', 'ipam'];
export const VERSIONS: CniVersion[] = ['0.3.1', '1.0.0'];

/** The recording chained plugin (test/fixtures/cri/cni-logger.cjs), for CriBedOptions.plugins. */
export const CNI_LOGGER = { 'cni-logger': path.join(import.meta.dirname, '../../../fixtures/cri/cni-logger.cjs') };

export interface Range {
  subnet: string;
  rangeStart?: string;
  rangeEnd?: string;
  gateway?: string;
}

export interface ShimConfListOptions {
  placement: Placement;
  cniVersion: CniVersion;
  /** host-local's ranges (one inner list per family). */
  ranges: Range[][];
  /** Extra shim settings (reservedCIDRs, ipv6ProbeRewrite, …). */
  shim?: Record<string, unknown>;
  /** Append the recording plugin (its log: `loggerLog`). */
  loggerLog?: string;
  /** No shim at all: ptp + host-local (the baseline for benchmarks and "without the shim" checks). */
  withoutShim?: boolean;
}

export function hostLocal(dirs: CriBedDirs, ranges: Range[][]): Record<string, unknown> {
  const v6 = ranges.some((set) => set.some((r) => r.subnet.includes(':')));
  return { type: 'host-local', dataDir: dirs.dataDir, ranges, routes: [{ dst: '0.0.0.0/0' }, ...(v6 ? [{ dst: '::/0' }] : [])] };
}

/**
 * ptp in cilium-cni's slot. Chained: ptp allocates through host-local, the shim follows with the same delegate
 * (for agent IPs and GC). IPAM slot: ptp's ipam is the shim wrapping host-local.
 */
export function shimConfList(dirs: CriBedDirs, o: ShimConfListOptions): Record<string, unknown> {
  const delegate = hostLocal(dirs, o.ranges);
  const shim = { stateDir: dirs.stateDir, logFile: dirs.logFile, ...o.shim };
  const main = { type: 'ptp', ipMasq: false, mtu: 1500 };
  const plugins: Array<Record<string, unknown>> = o.withoutShim
    ? [{ ...main, ipam: delegate }]
    : o.placement === 'chained'
      ? [
          { ...main, ipam: delegate },
          { type: 'ipam-shim', delegate, ...shim },
        ]
      : [{ ...main, ipam: { type: 'ipam-shim', delegate, ...shim } }];
  if (o.loggerLog) plugins.push({ type: 'cni-logger', logFile: o.loggerLog });
  return { cniVersion: o.cniVersion, name: dirs.network, plugins };
}
