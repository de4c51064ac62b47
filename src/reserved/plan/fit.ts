// PURE: does the pool plan works on fit what the CiliumNodes hold? A mask Cilium's default filled in is taken
// from the node CIDRs instead (every one of a family the same size); a mask or a defaulted list the held node
// CIDRs contradict is refused before anything is planned: a plan at the wrong mask proposes a list Cilium cannot
// use and misses the node already on a reserved subnet (issue 43, item 3).
import { type Cidr, parseCidr, rangeOverlap } from '../../net/cidr.js';
import type { FamilyPool, HeldCidrs, PoolSpec } from './inputs.js';

/** What the held node CIDRs settled: the masks taken from them, for the output. */
export interface Fitted {
  pool: PoolSpec;
  /** e.g. "ipam.operator.clusterPoolIPv4MaskSize 16". */
  inferred: string[];
}

/** The held node CIDRs contradict the pool (the CLI: a usage error, before any plan). */
export class FitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FitError';
  }
}

/** How to give plan the cluster's own values, for the refusals. */
const VALUES_HINT =
  'Give the values the cluster runs with: helm get values cilium -n kube-system --all -o yaml > values.yaml, then ipam-shim plan --values values.yaml --ciliumnodes nodes.yaml …';

interface FitContext {
  held: HeldCidrs | undefined;
  /** Keys Cilium's defaults filled in (removed here when the nodes settle them). */
  defaulted: string[];
  /** Where each family's mask came from ("--node-mask", a file, "Cilium's default"), for the refusal. */
  maskFrom: { v4?: string; v6?: string };
  /** The Helm keys of cluster-pool; a multi-pool pool has none (its mask is its own). */
  keys?: { mask: (family: 'IPv4' | 'IPv6') => string; list: (family: 'IPv4' | 'IPv6') => string };
}

const MAX_NAMED = 3;

export function fitHeld(spec: PoolSpec, ctx: FitContext): Fitted {
  const held = ctx.held?.holders.get(spec.name) ?? [];
  const inferred: string[] = [];
  const pool: PoolSpec = { ...spec };
  for (const [fam, family, label] of [
    ['v4', 4, 'IPv4'],
    ['v6', 6, 'IPv6'],
  ] as const) {
    const fp = spec[fam];
    if (!fp) continue;
    // Unparsable held CIDRs are planPool's to report (naming the list); here only what parses counts.
    const mine = held.flatMap((h) => {
      const c = tryCidr(h.cidr);
      return c && c.family === family ? [{ ...h, c }] : [];
    });
    if (!mine.length) continue;
    const sizes = new Map<number, typeof mine>();
    for (const h of mine) sizes.set(h.c.prefix, [...(sizes.get(h.c.prefix) ?? []), h]);
    const hint = ctx.keys ? VALUES_HINT : `Check the pool's ${fam === 'v4' ? 'ipv4' : 'ipv6'} cidrs and maskSize.`;
    const maskKey = ctx.keys?.mask(label);
    let mask = fp.mask;
    if (maskKey && ctx.defaulted.includes(maskKey) && sizes.size === 1) {
      mask = [...sizes.keys()][0]!;
      ctx.defaulted.splice(ctx.defaulted.indexOf(maskKey), 1);
      inferred.push(`${maskKey} ${mask}`);
    }
    const wrong = mine.filter((h) => h.c.prefix !== mask);
    if (wrong.length) {
      const bySize = [...sizes.entries()]
        .sort((a, b) => a[0] - b[0])
        .map(([p, hs]) => `${hs.length} /${p}`)
        .join(', ');
      throw new FitError(
        `the CiliumNodes hold ${label} node CIDRs that are no /${mask} (${named(wrong)}; ${bySize} in all), but this plan cuts ${fp.cidrs.join(', ')} into /${mask} per node (${ctx.maskFrom[fam] ?? spec.source}): nothing it proposed would fit the cluster. ${hint}`,
      );
    }
    // Outside a defaulted list: the cluster's list is another. Outside a given list: one node on a former entry is
    // planPool's warning, but all of them means the list is not this cluster's.
    const listKey = ctx.keys?.list(label);
    const defaultList = listKey !== undefined && ctx.defaulted.includes(listKey);
    const entries = fp.cidrs.flatMap((e) => tryCidr(e) ?? []);
    const outside = mine.filter((h) => !entries.some((e) => rangeOverlap(h.c, e) === 'full'));
    if (outside.length && (defaultList || outside.length === mine.length))
      throw new FitError(
        `the CiliumNodes hold ${label} node CIDRs outside ${defaultList ? "Cilium's default list" : 'the list'} ${fp.cidrs.join(', ')} (${named(outside)}${outside.length === mine.length ? ': all of them' : ''}), from ${defaultList ? "Cilium's default" : spec.source}: the cluster's list is another. ${hint}`,
      );
    pool[fam] = { cidrs: fp.cidrs, mask } satisfies FamilyPool;
  }
  return { pool, inferred };
}

function named(hs: Array<{ cidr: string; node: string }>): string {
  const shown = hs.slice(0, MAX_NAMED).map((h) => `${h.cidr} held by ${h.node}`);
  return `${shown.join(', ')}${hs.length > MAX_NAMED ? `, ${hs.length - MAX_NAMED} more` : ''}`;
}

function tryCidr(text: string): Cidr | undefined {
  try {
    return parseCidr(text);
  } catch {
    return undefined;
  }
}
