// What `ipam-shim plan` plans, settled from its sources: the files an operator has (inputs.ts reads their
// shapes), the flags over them, Cilium's defaults under both. Cluster-pool gives one pool, multi-pool one per
// pool; each becomes one planPool input (pool.ts).
import type { planPool } from './pool.js';
import {
  CILIUM_DEFAULTS,
  CLUSTER_POOL,
  type FamilyPool,
  fromAzureSubnets,
  fromCiliumNodes,
  fromHelmValues,
  fromPodIPPools,
  type HelmPlan,
  type HeldCidrs,
  type PoolSpec,
  type ReservedEntry,
} from './inputs.js';
import { readInputFile } from './read.js';
import { familyOf } from '../../net/ip.js';
import { fitHeld } from './fit.js';

/** The flags' view of the sources: file paths ("-": stdin) and the values given directly. */
export interface PlanSources {
  pools: string[];
  nodeMask?: number;
  nodeMaskV6?: number;
  reserved: string[];
  allocated?: bigint;
  /** How many nodes the proposed list must hold (--nodes; default: the CiliumNodes given). */
  nodes?: bigint;
  values: string[];
  ciliumnodes: string[];
  ippools: string[];
  azureSubnets: string[];
}

/** The sources contradict each other or ask for what plan does not model (the CLI: a usage error). */
export class PlanRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PlanRequestError';
  }
}

export interface PlanRequest {
  mode: string;
  pools: PoolSpec[];
  reserved: ReservedEntry[];
  held?: HeldCidrs;
  /** Each file read, with what it gave. */
  files: Array<{ flag: string; source: string; summary: string }>;
  /** Values that came from Cilium's defaults. */
  defaulted: string[];
  /** Values taken from the node CIDRs the CiliumNodes hold, in place of Cilium's defaults (fit.ts). */
  inferred: string[];
}

/** Reads the files (the YAML parser loads on the first) and settles mode, pools, reserved and held CIDRs. */
export async function requestOf(f: PlanSources): Promise<PlanRequest> {
  const files: PlanRequest['files'] = [];
  // Helm merges -f files in order (maps key by key, anything else replaced): so does plan, then reads the result.
  let values: unknown;
  const valueSources: string[] = [];
  for (const path of f.values) {
    const file = await readInputFile(path);
    for (const d of file.docs) values = mergeValues(values, d);
    valueSources.push(file.source);
  }
  const helm = valueSources.length ? fromHelmValues(values ?? null, valueSources.join(' + ')) : undefined;
  if (helm) files.push({ flag: '--values', source: helm.clusterPool.source, summary: `ipam.mode ${helm.mode}` });
  const pools: PoolSpec[] = [];
  for (const path of f.ippools) {
    const file = await readInputFile(path);
    const got = fromPodIPPools(file.docs, file.source);
    pools.push(...got);
    files.push({ flag: '--ippools', source: file.source, summary: `${got.length} CiliumPodIPPool(s): ${got.map((p) => p.name).join(', ')}` });
  }
  let held: HeldCidrs | undefined;
  for (const path of f.ciliumnodes) {
    const file = await readInputFile(path);
    const got = fromCiliumNodes(file.docs, file.source);
    held = held
      ? {
          nodes: held.nodes + got.nodes,
          pending: [...held.pending, ...got.pending],
          byPool: mergeHeld(held.byPool, got.byPool),
          holders: mergeHeld(held.holders, got.holders),
        }
      : got;
    files.push({
      flag: '--ciliumnodes',
      source: file.source,
      summary: `${got.nodes} CiliumNode(s)${got.pending.length ? `, ${got.pending.length} holding no node CIDR yet` : ''}`,
    });
  }
  const reserved: ReservedEntry[] = f.reserved.map((cidr) => ({ cidr }));
  for (const path of f.azureSubnets) {
    const file = await readInputFile(path);
    const got = file.docs.flatMap((d) => fromAzureSubnets(d, file.source));
    reserved.push(...got);
    files.push({
      flag: '--azure-subnets',
      source: file.source,
      summary: `${got.length} reserved CIDR(s) from ${new Set(got.map((r) => r.name)).size} subnet(s)`,
    });
  }

  const mode = f.ippools.length ? 'multi-pool' : (helm?.mode ?? CLUSTER_POOL);
  if (mode !== CLUSTER_POOL && mode !== 'multi-pool') {
    throw new PlanRequestError(`ipam.mode ${mode}: plan models cluster-pool and multi-pool, where Cilium cuts node CIDRs from a pool`);
  }
  if (f.ippools.length && helm && !helm.defaulted.includes('ipam.mode') && helm.mode !== 'multi-pool') {
    throw new PlanRequestError(`--ippools plans multi-pool, but the values say ipam.mode ${helm.mode}`);
  }
  if (mode === 'multi-pool') {
    if (f.pools.length) throw new PlanRequestError('--pool is the cluster-pool list; in multi-pool mode the pools come from --ippools or the values');
    // The auto-created pools first, then the cluster's objects; a CiliumPodIPPool replaces an auto one of its name.
    const byName = new Map<string, PoolSpec>();
    for (const p of [...(helm?.autoPools ?? []), ...pools]) byName.set(p.name, p);
    if (!byName.size) throw new PlanRequestError('multi-pool with no pool: give --ippools (kubectl get ciliumpodippools -o yaml)');
    // cluster-pool's defaults do not apply: each pool names its own CIDRs and mask.
    const fitted = [...byName.values()].map((p) => fitHeld(p, { held, defaulted: [], maskFrom: {} }).pool);
    return { mode, pools: fitted, reserved, ...(held ? { held } : {}), files, defaulted: [], inferred: [] };
  }
  const defaulted = helm ? [...helm.defaulted] : [];
  const { pool, inferred } = fitHeld(clusterPoolOf(f, helm, defaulted), {
    held,
    defaulted,
    maskFrom: maskSources(f, helm),
    keys: { mask: (x) => `ipam.operator.clusterPool${x}MaskSize`, list: (x) => `ipam.operator.clusterPool${x}PodCIDRList` },
  });
  return { mode, pools: [pool], reserved, ...(held ? { held } : {}), files, defaulted, inferred };
}

/** Where cluster-pool's masks came from: a flag, the values file, else Cilium's default (clusterPoolOf's order). */
function maskSources(f: PlanSources, helm: HelmPlan | undefined): { v4: string; v6: string } {
  const file = (key: string) => (helm && !helm.defaulted.includes(key) ? `${key} in ${helm.clusterPool.source}` : "Cilium's default");
  const v4Pool = f.pools.some((c) => !c.includes(':'));
  return {
    v4: f.nodeMask !== undefined ? '--node-mask' : file('ipam.operator.clusterPoolIPv4MaskSize'),
    v6:
      f.nodeMaskV6 !== undefined
        ? '--node-mask-v6'
        : f.pools.length && !v4Pool && f.nodeMask !== undefined
          ? '--node-mask'
          : file('ipam.operator.clusterPoolIPv6MaskSize'),
  };
}

/** cluster-pool's pool: --pool and the masks over the values file, Cilium's defaults for the rest. */
function clusterPoolOf(f: PlanSources, helm: HelmPlan | undefined, defaulted: string[]): PoolSpec {
  const fromFile = helm?.clusterPool;
  if (f.pools.length) {
    const v4 = f.pools.filter((c) => familyOf(c) === 4);
    const v6 = f.pools.filter((c) => familyOf(c) === 6);
    // --node-mask alone applies to an IPv6-only pool (as before the defaults).
    // A family's default is taken (and reported) only when --pool lists that family.
    const mask4 = () => f.nodeMask ?? fromFile?.v4?.mask ?? defaultMask(defaulted, 'v4');
    const mask6 = () => f.nodeMaskV6 ?? (v4.length ? undefined : f.nodeMask) ?? fromFile?.v6?.mask ?? defaultMask(defaulted, 'v6');
    return {
      name: CLUSTER_POOL,
      source: '--pool',
      ...(v4.length ? { v4: { cidrs: v4, mask: mask4() } } : {}),
      ...(v6.length ? { v6: { cidrs: v6, mask: mask6() } } : {}),
    };
  }
  const over = (fam: FamilyPool | undefined, mask: number | undefined): FamilyPool | undefined =>
    fam ? { cidrs: fam.cidrs, mask: mask ?? fam.mask } : undefined;
  if (fromFile) {
    const v4 = over(fromFile.v4, f.nodeMask);
    const v6 = over(fromFile.v6, f.nodeMaskV6);
    return { name: CLUSTER_POOL, source: fromFile.source, ...(v4 ? { v4 } : {}), ...(v6 ? { v6 } : {}) };
  }
  defaulted.push('ipam.operator.clusterPoolIPv4PodCIDRList');
  return {
    name: CLUSTER_POOL,
    source: "Cilium's default",
    v4: { cidrs: [...CILIUM_DEFAULTS.v4.cidrs], mask: f.nodeMask ?? defaultMask(defaulted, 'v4') },
  };
}

function defaultMask(defaulted: string[], family: 'v4' | 'v6'): number {
  const key = `ipam.operator.clusterPool${family === 'v4' ? 'IPv4' : 'IPv6'}MaskSize`;
  if (!defaulted.includes(key)) defaulted.push(key);
  return CILIUM_DEFAULTS[family].mask;
}

export function planInputOf(p: PoolSpec, f: PlanSources, req: PlanRequest): Parameters<typeof planPool>[0] {
  const pools = [...(p.v4?.cidrs ?? []), ...(p.v6?.cidrs ?? [])];
  const taken = req.held ? (req.held.byPool.get(p.name) ?? []) : undefined;
  const holders = req.held?.holders.get(p.name) ?? [];
  return {
    nodes: nodesFor(p, f, req),
    ...(holders.length ? { holders } : {}),
    pools,
    ...(p.v4 ? { nodeMask: p.v4.mask } : p.v6 ? { nodeMask: p.v6.mask } : {}),
    ...(p.v6 ? { nodeMaskV6: p.v6.mask } : {}),
    reserved: req.reserved.map((r) => r.cidr),
    ...(taken ? { taken } : { allocated: f.allocated ?? 0n }),
  };
}

/**
 * How many nodes the proposal must hold: --nodes, else every CiliumNode given (cluster-pool: each needs a block,
 * those holding none yet too), else in multi-pool the nodes holding a block of this pool; 0 without either.
 */
function nodesFor(p: PoolSpec, f: PlanSources, req: PlanRequest): bigint {
  if (f.nodes !== undefined) return f.nodes;
  if (!req.held) return 0n;
  if (p.name === CLUSTER_POOL) return BigInt(req.held.nodes);
  return BigInt(new Set((req.held.holders.get(p.name) ?? []).map((h) => h.node)).size);
}

/** Helm's merge of values files: maps merged key by key, anything else replaced by the later file. */
function mergeValues(a: unknown, b: unknown): unknown {
  const isMap = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  if (!isMap(a) || !isMap(b)) return b === undefined ? a : b;
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = mergeValues(a[k], v);
  return out;
}

function mergeHeld<T>(a: Map<string, T[]>, b: Map<string, T[]>): Map<string, T[]> {
  const out = new Map(a);
  for (const [k, v] of b) out.set(k, [...(out.get(k) ?? []), ...v]);
  return out;
}
