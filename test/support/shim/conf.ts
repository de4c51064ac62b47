// One builder for the shim's network configs in tests: the shim in the IPAM slot of a main plugin (ptp by
// default), or chained as its own plugin. Each test passes only what it is about; the rest is the scratch dirs.

/** The scratch directories a config points at (test/support/shim/cni.ts scratch(), useScratchNet()). */
export interface ShimDirs {
  stateDir: string;
  logFile: string;
}

export interface ShimConfOptions {
  /** 'ipam' (default): { type: main, ipam: <shim> }; 'chained': the shim is the config's own plugin. */
  placement?: 'ipam' | 'chained';
  cniVersion?: string;
  name: string;
  dirs: ShimDirs;
  /** The main plugin around the IPAM slot (default ptp). */
  main?: string;
  /** false: ipv6ProbeRewrite 'off' (the test runs in the host's netns, or nftables is not its business). */
  probeRewrite?: false;
  delegate?: Record<string, unknown>;
  /** Any other shim key (reservedCIDRs, delegateTimeoutMs, residue, …) or a deliberately wrong one. */
  keys?: Record<string, unknown>;
  /** Top-level keys beside the plugin (prevResult, runtimeConfig, …), or ones that override it. */
  top?: Record<string, unknown>;
}

/** host-local with one range set per subnet, storing under dataDir. */
export const hostLocal = (dataDir: string, ...subnets: string[]) => ({ type: 'host-local', dataDir, ranges: subnets.map((subnet) => [{ subnet }]) });

/** The shim's own keys: type, state dir, log file, then the test's. */
export function shimKeys(o: Pick<ShimConfOptions, 'dirs' | 'probeRewrite' | 'delegate' | 'keys'>): Record<string, unknown> {
  return {
    type: 'ipam-shim',
    stateDir: o.dirs.stateDir,
    logFile: o.dirs.logFile,
    ...(o.probeRewrite === false ? { ipv6ProbeRewrite: 'off' } : {}),
    ...(o.delegate ? { delegate: o.delegate } : {}),
    ...o.keys,
  };
}

/** A single-plugin network config with the shim in it (loosely typed: tests reach in and change a key). */
export function shimConf(o: ShimConfOptions): Record<string, any> {
  const head = { cniVersion: o.cniVersion ?? '1.0.0', name: o.name };
  if (o.placement === 'chained') return { ...head, ...shimKeys(o), ...o.top };
  return { ...head, type: o.main ?? 'ptp', ipam: shimKeys(o), ...o.top };
}
