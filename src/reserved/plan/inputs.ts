// PURE: what `ipam-shim plan` reads from the files an operator has, as parsed documents (read.ts turns
// files into them): Cilium's Helm values, `kubectl get ciliumnodes -o yaml`, `kubectl get ciliumpodippools -o yaml`
// and `az network vnet subnet list` output. Only the fields plan needs are checked; the rest passes untouched.
// Cilium's defaults apply where a value is absent (its chart's values.yaml).
import * as z from '../../cni/zod.js';

/** Cilium's chart defaults for cluster-pool (ipam.operator.*). */
export const CILIUM_DEFAULTS = {
  v4: { cidrs: ['10.0.0.0/8'], mask: 24 },
  v6: { cidrs: ['fd00::/104'], mask: 120 },
} as const;

/** The name plan gives the single pool of cluster-pool mode (CiliumNodes' spec.ipam.podCIDRs). */
export const CLUSTER_POOL = 'cluster-pool';

export interface FamilyPool {
  cidrs: string[];
  mask: number;
}

/** One pool of node CIDRs: cluster-pool's, or a multi-pool CiliumPodIPPool. */
export interface PoolSpec {
  name: string;
  v4?: FamilyPool;
  v6?: FamilyPool;
  /** Where it came from (a file, "Cilium's default", a flag), for the output. */
  source: string;
}

export interface ReservedEntry {
  cidr: string;
  /** The Azure subnet's name. */
  name?: string;
}

/** A document's shape was not what the tool prints: names the file and the field. */
export class InputError extends Error {
  constructor(source: string, detail: string) {
    super(`${source}: ${detail}`);
    this.name = 'InputError';
  }
}

function check<T>(schema: z.ZodMiniType<T>, doc: unknown, source: string): T {
  const r = schema.safeParse(doc);
  if (r.success) return r.data;
  const first = r.error.issues[0]!;
  throw new InputError(
    source,
    `${first.path.length ? `${first.path.join('.')}: ` : ''}${first.message}${r.error.issues.length > 1 ? ` (and ${r.error.issues.length - 1} more)` : ''}`,
  );
}

// A CIDR list may be written as a YAML list or as one comma-separated string (`--set` style).
const CidrList = z.union([
  z.array(z.string()),
  z.pipe(
    z.string(),
    z.transform((s) =>
      s
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean),
    ),
  ),
]);
// A mask may be quoted in values files.
const Mask = z.union([z.int(), z.pipe(z.string().check(z.regex(/^\d{1,3}$/)), z.transform(Number))]);
const Family = z.optional(z.nullable(z.looseObject({ cidrs: z.optional(z.nullable(CidrList)), maskSize: z.optional(z.nullable(Mask)) })));

const HelmValuesSchema = z.nullable(
  z.looseObject({
    ipv4: z.optional(z.nullable(z.looseObject({ enabled: z.optional(z.boolean()) }))),
    ipv6: z.optional(z.nullable(z.looseObject({ enabled: z.optional(z.boolean()) }))),
    ipam: z.optional(
      z.nullable(
        z.looseObject({
          mode: z.optional(z.nullable(z.string())),
          operator: z.optional(
            z.nullable(
              z.looseObject({
                clusterPoolIPv4PodCIDRList: z.optional(z.nullable(CidrList)),
                clusterPoolIPv4MaskSize: z.optional(z.nullable(Mask)),
                clusterPoolIPv6PodCIDRList: z.optional(z.nullable(CidrList)),
                clusterPoolIPv6MaskSize: z.optional(z.nullable(Mask)),
                autoCreateCiliumPodIPPools: z.optional(z.nullable(z.record(z.string(), z.nullable(z.looseObject({ ipv4: Family, ipv6: Family }))))),
              }),
            ),
          ),
        }),
      ),
    ),
  }),
);

export interface HelmPlan {
  /** ipam.mode (Cilium's default: cluster-pool). */
  mode: string;
  /** cluster-pool: the one pool, with Cilium's defaults for what the file leaves out. */
  clusterPool: PoolSpec;
  /** multi-pool: ipam.operator.autoCreateCiliumPodIPPools. */
  autoPools: PoolSpec[];
  /** What came from Cilium's defaults rather than the file. */
  defaulted: string[];
}

/** Cilium's Helm values (`-f values.yaml`): mode, the cluster-pool lists and masks, the auto-created pools. */
export function fromHelmValues(doc: unknown, source: string): HelmPlan {
  const v = check(HelmValuesSchema, doc, source) ?? {};
  const op = v.ipam?.operator ?? {};
  const defaulted: string[] = [];
  const pick = <T>(value: T | null | undefined, fallback: T, key: string): T => {
    if (value !== undefined && value !== null) return value;
    defaulted.push(key);
    return fallback;
  };
  const v4On = v.ipv4?.enabled ?? true;
  const v6On = v.ipv6?.enabled ?? false;
  const clusterPool: PoolSpec = { name: CLUSTER_POOL, source };
  if (v4On) {
    clusterPool.v4 = {
      cidrs: pick(op.clusterPoolIPv4PodCIDRList, [...CILIUM_DEFAULTS.v4.cidrs], 'ipam.operator.clusterPoolIPv4PodCIDRList'),
      mask: pick(op.clusterPoolIPv4MaskSize, CILIUM_DEFAULTS.v4.mask, 'ipam.operator.clusterPoolIPv4MaskSize'),
    };
  }
  if (v6On) {
    clusterPool.v6 = {
      cidrs: pick(op.clusterPoolIPv6PodCIDRList, [...CILIUM_DEFAULTS.v6.cidrs], 'ipam.operator.clusterPoolIPv6PodCIDRList'),
      mask: pick(op.clusterPoolIPv6MaskSize, CILIUM_DEFAULTS.v6.mask, 'ipam.operator.clusterPoolIPv6MaskSize'),
    };
  }
  const autoPools = Object.entries(op.autoCreateCiliumPodIPPools ?? {}).map(([name, p]) =>
    poolOf(name, p?.ipv4, p?.ipv6, `${source}: autoCreateCiliumPodIPPools.${name}`),
  );
  return { mode: v.ipam?.mode ?? pick(undefined, CLUSTER_POOL, 'ipam.mode'), clusterPool, autoPools, defaulted };
}

type FamilyIn = z.infer<typeof Family>;

function poolOf(name: string, v4: FamilyIn, v6: FamilyIn, source: string): PoolSpec {
  const pool: PoolSpec = { name, source };
  const fam = (f: FamilyIn, which: string): FamilyPool | undefined => {
    if (!f?.cidrs?.length) return undefined;
    if (f.maskSize === undefined || f.maskSize === null)
      throw new InputError(source, `pool ${name}: ${which}.maskSize is required with ${which}.cidrs`);
    return { cidrs: f.cidrs, mask: f.maskSize };
  };
  const a = fam(v4, 'ipv4');
  const b = fam(v6, 'ipv6');
  if (a) pool.v4 = a;
  if (b) pool.v6 = b;
  if (!a && !b) throw new InputError(source, `pool ${name} has no ipv4.cidrs or ipv6.cidrs`);
  return pool;
}

// Kubernetes objects: `kubectl get X -o yaml` prints a List (items), `kubectl get X NAME -o yaml` one object.
const ObjectSchema = z.looseObject({ kind: z.optional(z.string()), metadata: z.optional(z.looseObject({ name: z.optional(z.string()) })) });
const ListSchema = z.looseObject({ kind: z.optional(z.string()), items: z.array(z.unknown()) });

/** The objects of `kind` in the documents (Lists unpacked); others are refused, naming what was found. */
function objectsOf(docs: unknown[], kind: string, source: string): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  for (const doc of docs) {
    if (doc === null || doc === undefined) continue;
    if (Array.isArray(doc))
      throw new InputError(
        source,
        `expected kubectl output (a List of ${kind} objects: kubectl get ${kind.toLowerCase()}s -o yaml), found a bare list`,
      );
    const list = ListSchema.safeParse(doc);
    const items = list.success && (list.data.kind === undefined || list.data.kind.endsWith('List')) ? list.data.items : [doc];
    for (const item of items) {
      const o = check(ObjectSchema, item, source);
      if (o.kind !== kind)
        throw new InputError(
          source,
          `expected ${kind} objects (kubectl get ${kind.toLowerCase()}s -o yaml), found ${o.kind ?? 'an object without kind'}${o.metadata?.name ? ` ${o.metadata.name}` : ''}`,
        );
      out.push(o);
    }
  }
  return out;
}

const CiliumNodeSchema = z.looseObject({
  metadata: z.looseObject({ name: z.string() }),
  spec: z.optional(
    z.looseObject({
      ipam: z.optional(
        z.looseObject({
          podCIDRs: z.optional(z.nullable(z.array(z.string()))),
          pools: z.optional(
            z.looseObject({
              allocated: z.optional(z.nullable(z.array(z.looseObject({ pool: z.string(), cidrs: z.optional(z.nullable(z.array(z.string()))) })))),
            }),
          ),
        }),
      ),
    }),
  ),
});

export interface HeldCidrs {
  /** Pool name → node CIDRs held (cluster-pool's podCIDRs under CLUSTER_POOL). */
  byPool: Map<string, string[]>;
  /** Pool name → which node holds each of those CIDRs (plan names the nodes on a reserved subnet). */
  holders: Map<string, Array<{ cidr: string; node: string }>>;
  nodes: number;
  /** Nodes that hold no CIDR yet (the operator has not got to them). */
  pending: string[];
}

/** `kubectl get ciliumnodes -o yaml`: which node CIDRs each node holds (podCIDRs; multi-pool's pools.allocated). */
export function fromCiliumNodes(docs: unknown[], source: string): HeldCidrs {
  const byPool = new Map<string, string[]>();
  const holders = new Map<string, Array<{ cidr: string; node: string }>>();
  const add = (pool: string, cidrs: readonly string[], node: string) => {
    byPool.set(pool, [...(byPool.get(pool) ?? []), ...cidrs]);
    holders.set(pool, [...(holders.get(pool) ?? []), ...cidrs.map((cidr) => ({ cidr, node }))]);
  };
  const pending: string[] = [];
  const nodes = objectsOf(docs, 'CiliumNode', source);
  for (const raw of nodes) {
    const n = check(CiliumNodeSchema, raw, source);
    const ipam = n.spec?.ipam;
    const pod = ipam?.podCIDRs ?? [];
    const pools = ipam?.pools?.allocated ?? [];
    if (pod.length) add(CLUSTER_POOL, pod, n.metadata.name);
    for (const p of pools) add(p.pool, p.cidrs ?? [], n.metadata.name);
    if (!pod.length && !pools.some((p) => p.cidrs?.length)) pending.push(n.metadata.name);
  }
  return { byPool, holders, nodes: nodes.length, pending };
}

const PodIPPoolSchema = z.looseObject({
  metadata: z.looseObject({ name: z.string() }),
  spec: z.looseObject({ ipv4: Family, ipv6: Family }),
});

/** `kubectl get ciliumpodippools -o yaml`: multi-pool's pools (spec.ipv4/ipv6.cidrs and maskSize). */
export function fromPodIPPools(docs: unknown[], source: string): PoolSpec[] {
  return objectsOf(docs, 'CiliumPodIPPool', source).map((raw) => {
    const p = check(PodIPPoolSchema, raw, source);
    return poolOf(p.metadata.name, p.spec.ipv4, p.spec.ipv6, source);
  });
}

const SubnetSchema = z.looseObject({
  name: z.optional(z.string()),
  addressPrefix: z.optional(z.nullable(z.string())),
  addressPrefixes: z.optional(z.nullable(z.array(z.string()))),
});

/** `az network vnet subnet list -o json` (or one subnet, `subnet show`): every subnet's prefixes, reserved. */
export function fromAzureSubnets(doc: unknown, source: string): ReservedEntry[] {
  const subnets = Array.isArray(doc) ? doc : [doc];
  const out: ReservedEntry[] = [];
  subnets.forEach((raw, i) => {
    const s = check(SubnetSchema, raw, `${source} [${i}]`);
    const prefixes = [...(s.addressPrefix ? [s.addressPrefix] : []), ...(s.addressPrefixes ?? [])];
    if (!prefixes.length)
      throw new InputError(
        `${source} [${i}]`,
        `subnet ${s.name ?? '(no name)'} has no addressPrefix or addressPrefixes (is this \`az network vnet subnet list\` output?)`,
      );
    for (const cidr of new Set(prefixes)) out.push({ cidr, ...(s.name ? { name: s.name } : {}) });
  });
  return out;
}
