// Conflists for the CRI suites: AKS-shaped (cilium-cni first: the bed's stand-in of a Cilium line, in
// delegated-plugin mode), with the shim in either placement and the delegated IPAM host-local (the default) or, as
// AKS runs it, azure-ipam over the bed's CNS stand-in, at 0.3.1 (what AKS ships) or 1.0.0 (both taken by every
// Cilium line).
import path from 'node:path';
import type { CriBedDirs } from './bed.js';
import { CILIUM_LINES, ciliumCni, type CiliumLine } from '../../shim/cilium.js';
import { overAzureIpam, type CnsPool, type CnsScheme } from '../../doubles/cns.js';

export type Placement = 'chained' | 'ipam';
export type CniVersion = '0.3.1' | '1.0.0';

export const PLACEMENTS: Placement[] = ['chained', 'ipam'];
export const VERSIONS: CniVersion[] = ['0.3.1', '1.0.0'];

/** The delegated IPAM: host-local (keyed by container ID and ifname), or azure-ipam over CNS (keyed by CNS's scheme). */
export type Delegate = 'host-local' | 'azure-ipam';

/** One way a suite's AKS cases run: the delegate, and for azure-ipam CNS's key scheme. */
export interface DelegateCase {
  delegate: Delegate;
  scheme?: CnsScheme;
  /** For test names: `host-local`, `azure-ipam/CNS pod-name keys`, `azure-ipam/CNS container-ID keys`. */
  label: string;
}

/** host-local, then azure-ipam over CNS in both key schemes: the table the CRI suites' AKS cases run over. */
export const DELEGATE_CASES: DelegateCase[] = [
  { delegate: 'host-local', label: 'host-local' },
  { delegate: 'azure-ipam', scheme: 'pod', label: 'azure-ipam/CNS pod-name keys' },
  { delegate: 'azure-ipam', scheme: 'container', label: 'azure-ipam/CNS container-ID keys' },
];

/** The bed options a case needs: for azure-ipam, a CNS stand-in with `pools` (CriBedOptions.cns). */
export function delegateBed(c: DelegateCase, pools: CnsPool[]): { cns?: { scheme: CnsScheme; pools: CnsPool[] } } {
  return c.delegate === 'azure-ipam' ? { cns: { scheme: c.scheme ?? 'pod', pools } } : {};
}

/**
 * The Cilium line the CRI beds put in cilium-cni's place: CILIUM_LINE (`1.17` or `newer`), 1.17 when unset (AKS's
 * line). CI's containerd-2 pass sets `newer`, so both lines run without a pass of their own.
 */
export function ciliumLine(): CiliumLine {
  const line = process.env.CILIUM_LINE || '1.17';
  if (!(CILIUM_LINES as readonly string[]).includes(line)) throw new Error(`CILIUM_LINE=${line}: not one of ${CILIUM_LINES.join(', ')}`);
  return line as CiliumLine;
}

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
  /** host-local's ranges (one inner list per family); azure-ipam's addresses are the bed's CNS pools. */
  ranges: Range[][];
  /** The delegated IPAM (default host-local); azure-ipam needs a bed started with `cns`. */
  delegate?: Delegate;
  /** Extra shim settings (reservedCIDRs, ipv6ProbeRewrite, …). */
  shim?: Record<string, unknown>;
  /** Append the recording plugin (its log: `loggerLog`). */
  loggerLog?: string;
  /** No shim at all: cilium-cni + host-local (the baseline for benchmarks and "without the shim" checks). */
  withoutShim?: boolean;
}

export function hostLocal(dirs: CriBedDirs, ranges: Range[][]): Record<string, unknown> {
  const v6 = ranges.some((set) => set.some((r) => r.subnet.includes(':')));
  return { type: 'host-local', dataDir: dirs.dataDir, ranges, routes: [{ dst: '0.0.0.0/0' }, ...(v6 ? [{ dst: '::/0' }] : [])] };
}

/** azure-ipam's entry as AKS's list has it (`{"type": "azure-ipam"}`), pointed at the bed's CNS stand-in. */
function azureIpam(dirs: CriBedDirs): Record<string, unknown> {
  if (!dirs.cns) throw new Error('delegate azure-ipam: the bed was started without `cns` (no CNS stand-in)');
  return overAzureIpam({ type: 'azure-ipam' }, dirs.cns);
}

/**
 * cilium-cni first. Chained: cilium-cni delegates IPAM to the delegate, the shim follows with the same delegate (for
 * agent IPs and GC). IPAM slot: cilium-cni delegates to the shim, which wraps the delegate.
 */
export function shimConfList(dirs: CriBedDirs, o: ShimConfListOptions): Record<string, unknown> {
  const delegate = o.delegate === 'azure-ipam' ? azureIpam(dirs) : hostLocal(dirs, o.ranges);
  const shim = { stateDir: dirs.stateDir, logFile: dirs.logFile, ...o.shim };
  const plugins: Array<Record<string, unknown>> = o.withoutShim
    ? [ciliumCni(delegate)]
    : o.placement === 'chained'
      ? [ciliumCni(delegate), { type: 'ipam-shim', delegate, ...shim }]
      : [ciliumCni({ type: 'ipam-shim', delegate, ...shim })];
  if (o.loggerLog) plugins.push({ type: 'cni-logger', logFile: o.loggerLog });
  return { cniVersion: o.cniVersion, name: dirs.network, plugins };
}
