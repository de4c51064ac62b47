// `ipam-shim plan`: which node CIDRs of a Cilium cluster-pool (or of each multi-pool pool) collide with reserved
// subnets (src/reserved/pool-plan.ts), from flags or from the files an operator has (src/plan/): Helm values,
// CiliumNodes, CiliumPodIPPools, Azure subnets.
import type { CollisionPoint } from './held.js';
import { type FamilyPlan, type Plan, planPool, planToJson } from './pool.js';
import { CLUSTER_POOL, InputError, type ReservedEntry } from './inputs.js';
import { type PlanRequest, PlanRequestError, type PlanSources, planInputOf, requestOf } from './request.js';
import { parseCidr } from '../../net/cidr.js';
import { type Command, type CommandOutput, asUsage, parseArgv, UsageError } from '../../fix/command.js';
import { shown } from '../../terminal.js';

const USAGE = `ipam-shim plan [--values FILE] [--ciliumnodes FILE] [--ippools FILE] [--azure-subnets FILE]…
              [--pool CIDR[,CIDR…]] [--node-mask N] [--node-mask-v6 N] [--reserved CIDR[,CIDR…]] [--allocated K] [--nodes N] [--json]

  FILE is a path, or - for stdin (one input at a time); YAML or JSON, as the tools print it. Cilium's defaults
  fill in what no input says: 10.0.0.0/8 and 24 (IPv6: fd00::/104 and 120).`;

const OPTIONS = {
  pool: { type: 'string', multiple: true },
  'node-mask': { type: 'string' },
  'node-mask-v6': { type: 'string' },
  reserved: { type: 'string', multiple: true },
  allocated: { type: 'string' },
  nodes: { type: 'string' },
  values: { type: 'string', multiple: true },
  ciliumnodes: { type: 'string', multiple: true },
  ippools: { type: 'string', multiple: true },
  'azure-subnets': { type: 'string', multiple: true },
} as const;

export const planCommand: Command = {
  name: 'plan',
  summary: 'which cluster-pool node CIDRs collide with reserved subnets, and how many nodes fit before the first',
  usage: USAGE,
  options: OPTIONS,
  flagHelp: {
    values: {
      value: 'FILE',
      text: "Cilium's Helm values (ipam.mode, ipam.operator.clusterPoolIPv4PodCIDRList, …MaskSize, the IPv6 ones when ipv6.enabled, autoCreateCiliumPodIPPools), e.g. values.yaml",
    },
    ciliumnodes: {
      value: 'FILE',
      text: "kubectl get ciliumnodes -o yaml: the node CIDRs nodes hold (spec.ipam.podCIDRs, multi-pool's spec.ipam.pools.allocated); replaces --allocated, e.g. nodes.yaml or -",
    },
    ippools: { value: 'FILE', text: 'kubectl get ciliumpodippools -o yaml: multi-pool, each pool planned on its own, e.g. pools.yaml' },
    'azure-subnets': {
      value: 'FILE',
      text: "az network vnet subnet list -o json: every subnet's prefixes are reserved (repeatable), e.g. subnets.json",
    },
    pool: { value: 'CIDR[,CIDR…]', text: "cluster-pool's list, over the values file (default 10.0.0.0/8), e.g. 10.0.0.0/8" },
    'node-mask': { value: 'N', text: 'the node CIDR mask, over the values file (default 24; an IPv6-only --pool: 120), e.g. 24' },
    'node-mask-v6': { value: 'N', text: 'the IPv6 node CIDR mask (default 120), e.g. 112' },
    reserved: { value: 'CIDR[,CIDR…]', text: "reserved CIDRs besides the subnets' (without any, every node CIDR is safe), e.g. 10.4.76.0/24" },
    allocated: { value: 'K', text: 'node CIDRs handed out so far (the next node gets index K), when no --ciliumnodes, e.g. 1000' },
    nodes: {
      value: 'N',
      text: 'the node count the proposed pool list must hold (default: the CiliumNodes given), e.g. 300',
    },
  },
  examples: [
    'ipam-shim plan --values values.yaml --ciliumnodes nodes.yaml --azure-subnets subnets.json',
    'kubectl get ciliumnodes -o yaml | ipam-shim plan --ciliumnodes - --azure-subnets subnets.json',
    'ipam-shim plan --pool 10.0.0.0/8 --node-mask 24 --reserved 10.4.76.0/24 --allocated 1000',
    'ipam-shim plan --values values.yaml --ciliumnodes nodes.yaml --reserved 10.3.0.0/24 --nodes 40',
  ],
  exitStatus:
    '0 no node CIDR collides; 1 at least one collides; 2 usage (an unreadable or malformed input file included); 3 could not run (an internal error)',
  async run(argv: string[]): Promise<CommandOutput> {
    const flags = parseFlags(argv);
    const req = await requestOf(flags).catch((e: unknown) => {
      throw e instanceof InputError || e instanceof PlanRequestError ? new UsageError(e.message) : e;
    });
    const planned = req.pools.map((p) => ({ spec: p, plan: asUsage(() => planPool(planInputOf(p, flags, req))) }));
    const collision = planned.some((p) => p.plan.collision);
    const names = reservedNames(req.reserved);
    const nodesFrom = flags.nodes !== undefined ? '--nodes' : req.held ? 'the CiliumNodes given' : undefined;
    const inputs = {
      mode: req.mode,
      files: req.files,
      defaulted: req.defaulted,
      ...(req.held ? { nodes: req.held.nodes, pendingNodes: req.held.pending } : {}),
    };
    const data =
      req.mode === CLUSTER_POOL
        ? { ...(planToJson(planned[0]!.plan) as object), inputs }
        : { pools: planned.map((p) => ({ name: p.spec.name, source: p.spec.source, ...(planToJson(p.plan) as object) })), collision, inputs };
    const head = renderInputs(req);
    const body =
      req.mode === CLUSTER_POOL
        ? renderPlan(planned[0]!.plan, names, { target: (f) => `ipam.operator.clusterPool${f}PodCIDRList`, clusterPool: true, nodesFrom })
        : planned
            .map((p) => {
              const target = (f: string) => `CiliumPodIPPool ${shown(p.spec.name)} spec.${f.toLowerCase()}.cidrs`;
              return `pool ${shown(p.spec.name)} (${shown(p.spec.source)})\n${indent(renderPlan(p.plan, names, { target, clusterPool: false, nodesFrom }))}`;
            })
            .join('\n');
    return { data, text: head + body, exitCode: collision ? 1 : 0 };
  },
};

function parseFlags(argv: string[]): PlanSources {
  const { values } = parseArgv({
    args: argv,
    // --json is src/cli/index.ts's (it strips it); accepted here too for callers that hand it on.
    options: { ...OPTIONS, json: { type: 'boolean' } },
    allowPositionals: false,
    strict: true,
  });
  const out: PlanSources = {
    pools: splitList(values.pool),
    reserved: splitList(values.reserved),
    values: values.values ?? [],
    ciliumnodes: values.ciliumnodes ?? [],
    ippools: values.ippools ?? [],
    azureSubnets: values['azure-subnets'] ?? [],
  };
  const files = [...out.values, ...out.ciliumnodes, ...out.ippools, ...out.azureSubnets];
  if (
    !out.pools.length &&
    !out.reserved.length &&
    !files.length &&
    values['node-mask'] === undefined &&
    values['node-mask-v6'] === undefined &&
    values.allocated === undefined &&
    values.nodes === undefined
  ) {
    throw new UsageError('nothing to plan: give --values, --ippools or --pool (and what is reserved: --azure-subnets, --reserved)');
  }
  if (files.filter((f) => f === '-').length > 1) throw new UsageError('only one input can be read from stdin (-)');
  if (values.allocated !== undefined && out.ciliumnodes.length)
    throw new UsageError('--allocated and --ciliumnodes: the CiliumNodes say what is allocated; give one');
  if (out.pools.length && out.ippools.length) throw new UsageError('--pool is the cluster-pool list; --ippools plans multi-pool pools: give one');
  if (values.allocated !== undefined) out.allocated = bigFlag('--allocated', values.allocated);
  if (values.nodes !== undefined) out.nodes = bigFlag('--nodes', values.nodes);
  if (values['node-mask'] !== undefined) out.nodeMask = intFlag('--node-mask', values['node-mask']);
  if (values['node-mask-v6'] !== undefined) out.nodeMaskV6 = intFlag('--node-mask-v6', values['node-mask-v6']);
  return out;
}

/** Canonical reserved CIDR text → the Azure subnet names it came from, for the output. */
function reservedNames(reserved: ReservedEntry[]): Map<string, string> {
  const names = new Map<string, string>();
  for (const r of reserved) {
    if (!r.name) continue;
    try {
      const text = parseCidr(r.cidr).text;
      names.set(text, names.has(text) ? `${names.get(text)}, ${r.name}` : r.name);
    } catch {
      // planPool reports the bad entry
    }
  }
  return names;
}

function renderInputs(req: PlanRequest): string {
  const lines = req.files.map((f) => `${f.flag} ${shown(f.source)}: ${shown(f.summary)}`);
  if (req.defaulted.length) lines.push(`Cilium's defaults for: ${req.defaulted.join(', ')}`);
  if (req.held?.pending.length)
    lines.push(
      `CiliumNodes holding no node CIDR yet: ${req.held.pending.slice(0, 10).map(shown).join(', ')}${req.held.pending.length > 10 ? ' …' : ''}`,
    );
  return lines.length ? `${lines.join('\n')}\n\n` : '';
}

const indent = (text: string) =>
  text
    .split('\n')
    .map((l) => (l ? `  ${l}` : l))
    .join('\n');

function splitList(values: string[] | undefined): string[] {
  return (values ?? [])
    .flatMap((v) => v.split(','))
    .map((s) => s.trim())
    .filter(Boolean);
}

function intFlag(name: string, v: string): number {
  if (!/^\d{1,3}$/.test(v.trim())) throw new UsageError(`${name}: expected a prefix length, got "${v}"`);
  return Number(v.trim());
}

function bigFlag(name: string, v: string): bigint {
  if (!/^\d+$/.test(v.trim())) throw new UsageError(`${name}: expected a non-negative integer, got "${v}"`);
  return BigInt(v.trim());
}

/** What the proposal edits and where its node count came from. */
interface ProposalContext {
  /** The list's name for a family ("IPv4"/"IPv6"): Helm's key, or the CiliumPodIPPool's field. */
  target: (family: string) => string;
  clusterPool: boolean;
  /** "--nodes", "the CiliumNodes given", or none (then the count is 0). */
  nodesFrom: string | undefined;
}

const CLUSTER_POOL_CONTEXT: ProposalContext = { target: (f) => `ipam.operator.clusterPool${f}PodCIDRList`, clusterPool: true, nodesFrom: undefined };

/** The human rendering: one block per family, then the colliding index ranges as a table, then the proposal. */
export function renderPlan(plan: Plan, names: Map<string, string> = new Map(), ctx: ProposalContext = CLUSTER_POOL_CONTEXT): string {
  return `${plan.families.map((f) => renderFamily(f, names, ctx)).join('\n\n')}\n`;
}

function renderFamily(f: FamilyPlan, names: Map<string, string>, ctx: ProposalContext): string {
  // Subnet names are Azure's, file names and pool names the operator's: escaped where they are shown.
  const named = (cidr: string) => (names.has(cidr) ? `${cidr} ${shown(names.get(cidr)!)}` : cidr);
  const at = (p: { index: bigint; nodeCidr: string; reserved: string }) => `index ${p.index} (${p.nodeCidr} over ${named(p.reserved)})`;
  const lines: string[] = [];
  const pools = f.entries.map((e) => e.cidr).join(', ');
  lines.push(`IPv${f.family} pool ${pools}, /${f.nodeMask} per node: ${f.totalBlocks} node CIDRs`);
  if (f.collidingBlocks === 0n) {
    lines.push(`  no node CIDR touches a reserved subnet; safe capacity ${f.safeCapacity}`);
  } else {
    lines.push(
      `  colliding: ${f.collidingBlocks} node CIDR${f.collidingBlocks === 1n ? '' : 's'} in ${f.collisionRangeCount} range${f.collisionRangeCount === 1 ? '' : 's'}; safe capacity ${f.safeCapacity}`,
    );
    lines.push(`  first collision from the start: ${at(f.fromStart.firstCollision!)}; ${f.fromStart.nodesBefore} nodes fit before it`);
  }
  const t = f.fromTaken;
  if (t) {
    lines.push(`  nodes hold ${t.count} node CIDR${t.count === 1n ? '' : 's'}${t.highest === null ? '' : ` (highest index ${t.highest})`}`);
    const heldAt = (p: CollisionPoint) => `${at(p)}${p.nodes?.length ? ` held by ${p.nodes.map(shown).join(', ')}` : ''}`;
    if (t.collidingCount > 0n)
      lines.push(`  ${t.collidingCount} held node CIDR(s) lie on a reserved subnet NOW: ${t.colliding.map(heldAt).join('; ')}`);
  }
  const a = f.fromAllocated;
  const from = t ? `after the highest held (operator not restarted since)` : `from allocated ${a.allocated}`;
  if (t || a.allocated > 0n) {
    if (a.exhausted) lines.push(`  ${from}: pool exhausted`);
    else if (a.firstCollision) {
      lines.push(
        `  ${from}: next collision at ${at(a.firstCollision)}; ${a.nodesBefore} more nodes fit before it; ${a.safeRemaining} safe node CIDRs left`,
      );
    } else lines.push(`  ${from}: no further collision; ${a.safeRemaining} safe node CIDRs left`);
  }
  if (t) {
    const l = t.lowestFree;
    lines.push(
      l.firstCollision
        ? `  lowest free first (after an operator restart): next collision at ${at(l.firstCollision)}; ${l.nodesBefore} more nodes fit before it; ${t.safeFree} safe free node CIDRs`
        : `  lowest free first (after an operator restart): no free node CIDR collides; ${t.safeFree} safe free node CIDRs`,
    );
  }
  if (f.collisions.length) {
    const rows = f.collisions.map((c) => [
      c.from === c.to ? `${c.from}` : `${c.from}-${c.to}`,
      String(c.count),
      c.from === c.to ? c.fromCidr : `${c.fromCidr} … ${c.toCidr}`,
      c.reserved.map(named).join(', ') + (c.reservedCount > c.reserved.length ? ` (+${c.reservedCount - c.reserved.length} more)` : ''),
    ]);
    lines.push(...table(['INDEXES', 'COUNT', 'NODE CIDRS', 'RESERVED'], rows).map((l) => `  ${l}`));
    if (f.truncated) lines.push(`  … ${f.collisionRangeCount - f.collisions.length} more ranges not listed`);
  }
  if (f.reservedOutsidePool) lines.push(`  ${f.reservedOutsidePool} reserved IPv${f.family} CIDR(s) lie outside the pool`);
  lines.push(...renderProposal(f, named, ctx));
  for (const w of f.warnings) lines.push(`  warning: ${shown(w)}`);
  return lines.join('\n');
}

/** Lists longer than this are cut in the text (--json has them whole). */
const MAX_LISTED_ENTRIES = 40;

/** The proposal (src/reserved/pool-proposal.ts) and how an operator can apply it, honest about what Cilium allows. */
function renderProposal(f: FamilyPlan, named: (cidr: string) => string, ctx: ProposalContext): string[] {
  const p = f.proposal;
  if (!p.changed && p.fits && (p.nodes === 0n || f.collidingBlocks > 0n)) return [];
  const list = ctx.target(`IPv${f.family}`);
  const cut = (xs: string[]) =>
    xs.length > MAX_LISTED_ENTRIES ? `${xs.slice(0, MAX_LISTED_ENTRIES).join(',')},… (${xs.length} entries: --json lists all)` : xs.join(',');
  const forNodes = `${p.nodes} node${p.nodes === 1n ? '' : 's'} (${ctx.nodesFrom ?? 'none given: --nodes N sizes it'})`;
  const out = [`  proposal, the smallest change to ${list} for ${forNodes}:`];
  if (!p.changed) {
    out.push(`    none needed: ${p.capacity} node CIDRs, none on a reserved subnet`);
    return out;
  }
  if (p.tooLong) {
    out.push(
      `    none written out: cut around the reserved subnets the list would take more than 1,000 entries; move the pool to a range free of reserved subnets instead`,
    );
    return out;
  }
  out.push(`    ${list}: ${cut(p.list)}`);
  for (const e of p.entries) {
    if (e.action === 'keep') out.push(`    keep ${e.entry}`);
    else {
      const why = `without ${e.removed.slice(0, MAX_LISTED_ENTRIES).join(', ')}${e.removed.length > MAX_LISTED_ENTRIES ? ', …' : ''} (over ${e.reserved.map(named).join(', ')})`;
      out.push(
        e.action === 'drop' ? `    drop ${e.entry}: every node CIDR of it is reserved` : `    replace ${e.entry} by ${e.into.length} CIDR(s) ${why}`,
      );
    }
  }
  for (const a of p.append) out.push(`    append ${a} (next free in ${p.space}, touching no entry, reserved subnet or held node CIDR)`);
  out.push(
    `    ${p.capacity} node CIDRs, none on a reserved subnet; ${p.heldKept} held stay where they are, ${p.free} free; ` +
      (p.nodes === 0n
        ? 'no node count to check room against'
        : p.fits
          ? `room for ${p.nodes} nodes`
          : `NO room for ${p.nodes} nodes: ${p.missing} node CIDRs missing, ${p.space ? `no free /${p.appendPrefix} left in ${p.space} outside the pool, the reserved subnets and the held node CIDRs` : 'the pool lies in no private range to append from'}; a shorter node CIDR (a longer mask) or a pool elsewhere`),
  );
  if (p.move.length) {
    out.push(
      '    move these nodes once the list is applied (cordon, drain, delete the node and its CiliumNode; its replacement gets a node CIDR from the new list):',
    );
    for (const m of p.move)
      out.push(`      ${m.nodes.length ? m.nodes.map(shown).join(', ') : '(no node named)'} holds ${m.nodeCidr} over ${named(m.reserved)}`);
  }
  if (!ctx.clusterPool) {
    out.push(`    apply: edit the pool (kubectl edit ciliumpodippool); put the reserved subnets into the shim's reservedCIDRs first`);
  } else if (p.appendOnly) {
    out.push(`    apply: append (what Cilium supports in place); the operator hands the new entry out once the entries before it are full`);
  } else {
    out.push(
      `    apply: Cilium's cluster-pool cannot skip a node CIDR inside an entry, and its docs allow only appending entries; appending alone leaves the reserved node CIDRs to be handed out. So this replaces entries, knowingly:`,
      `      1. put the reserved subnets into the shim's reservedCIDRs, so a node CIDR that still lands on one is refused at its first pod`,
      `      2. set the list above (helm upgrade … --set ${list}='{…}') and restart cilium-operator: it takes each node's podCIDRs back from its CiliumNode into the entry containing them; every held node CIDR but the ones to move lies in the new list, so no other node is renumbered`,
      `      3. ${p.move.length ? 'replace the nodes to move (until then the operator cannot place their node CIDR in any entry and reports it in their CiliumNode status)' : 'no node holds a removed node CIDR: nothing to move'}`,
    );
  }
  return out;
}

function table(header: string[], rows: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const fmt = (r: string[]) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [fmt(header), ...rows.map(fmt)];
}
