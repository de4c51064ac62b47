// `ipam-shim plan`: which node CIDRs of a Cilium cluster-pool collide with reserved subnets (see src/reserved/pool-plan.ts).
import { type FamilyPlan, type Plan, planPool, planToJson } from '../reserved/pool-plan.js';
import { type Command, type CommandOutput, asUsage, parseArgv, UsageError } from './command.js';

const USAGE =
  `ipam-shim plan --pool CIDR[,CIDR…] [--node-mask N] [--node-mask-v6 N] [--reserved CIDR[,CIDR…]] [--allocated K] [--json]
  --node-mask applies to IPv4 pools (and to IPv6 pools when no IPv4 pool is planned); an IPv6-only plan may give
  --node-mask-v6 alone. Without --reserved every node CIDR is safe.`;

export const planCommand: Command = {
  name: 'plan',
  summary: 'which cluster-pool node CIDRs collide with reserved subnets, and how many nodes fit before the first',
  usage: USAGE,
  exitStatus: '0 no node CIDR collides; 1 at least one collides; 2 usage',
  async run(argv: string[]): Promise<CommandOutput> {
    const opts = parseFlags(argv);
    const plan = asUsage(() => planPool(opts));
    return { data: planToJson(plan), text: renderPlan(plan), exitCode: plan.collision ? 1 : 0 };
  },
};

interface PlanFlags {
  pools: string[];
  nodeMask?: number;
  nodeMaskV6?: number;
  reserved: string[];
  allocated: bigint;
}

function parseFlags(argv: string[]): PlanFlags {
  const { values } = parseArgv({
    args: argv,
    options: {
      pool: { type: 'string', multiple: true },
      'node-mask': { type: 'string' },
      'node-mask-v6': { type: 'string' },
      reserved: { type: 'string', multiple: true },
      allocated: { type: 'string' },
      json: { type: 'boolean' },
    },
    allowPositionals: false,
    strict: true,
  });
  const pools = splitList(values.pool);
  const reserved = splitList(values.reserved);
  if (!pools.length) throw new UsageError('--pool is required');
  if (values['node-mask'] === undefined && values['node-mask-v6'] === undefined) throw new UsageError('--node-mask is required');
  const out: PlanFlags = {
    pools,
    reserved,
    allocated: values.allocated === undefined ? 0n : bigFlag('--allocated', values.allocated),
  };
  if (values['node-mask'] !== undefined) out.nodeMask = intFlag('--node-mask', values['node-mask']);
  if (values['node-mask-v6'] !== undefined) out.nodeMaskV6 = intFlag('--node-mask-v6', values['node-mask-v6']);
  return out;
}

function splitList(values: string[] | undefined): string[] {
  return (values ?? []).flatMap((v) => v.split(',')).map((s) => s.trim()).filter(Boolean);
}

function intFlag(name: string, v: string): number {
  if (!/^\d{1,3}$/.test(v.trim())) throw new UsageError(`${name}: expected a prefix length, got "${v}"`);
  return Number(v.trim());
}

function bigFlag(name: string, v: string): bigint {
  if (!/^\d+$/.test(v.trim())) throw new UsageError(`${name}: expected a non-negative integer, got "${v}"`);
  return BigInt(v.trim());
}

/** The human rendering: one block per family, then the colliding index ranges as a table. */
export function renderPlan(plan: Plan): string {
  return `${plan.families.map(renderFamily).join('\n\n')}\n`;
}

function renderFamily(f: FamilyPlan): string {
  const lines: string[] = [];
  const pools = f.entries.map((e) => e.cidr).join(', ');
  lines.push(`IPv${f.family} pool ${pools}, /${f.nodeMask} per node: ${f.totalBlocks} node CIDRs`);
  if (f.collidingBlocks === 0n) {
    lines.push(`  no node CIDR touches a reserved subnet; safe capacity ${f.safeCapacity}`);
  } else {
    lines.push(
      `  colliding: ${f.collidingBlocks} node CIDR${f.collidingBlocks === 1n ? '' : 's'} in ${f.collisionRangeCount} range${f.collisionRangeCount === 1 ? '' : 's'}; safe capacity ${f.safeCapacity}`,
    );
    const s = f.fromStart.firstCollision!;
    lines.push(`  first collision from the start: index ${s.index} (${s.nodeCidr} over ${s.reserved}); ${f.fromStart.nodesBefore} nodes fit before it`);
  }
  const a = f.fromAllocated;
  if (a.allocated > 0n) {
    if (a.exhausted) lines.push(`  from allocated ${a.allocated}: pool exhausted`);
    else if (a.firstCollision) {
      lines.push(
        `  from allocated ${a.allocated}: next collision at index ${a.firstCollision.index} (${a.firstCollision.nodeCidr} over ${a.firstCollision.reserved}); ${a.nodesBefore} more nodes fit before it; ${a.safeRemaining} safe node CIDRs left`,
      );
    } else lines.push(`  from allocated ${a.allocated}: no further collision; ${a.safeRemaining} safe node CIDRs left`);
  }
  if (f.collisions.length) {
    const rows = f.collisions.map((c) => [
      c.from === c.to ? `${c.from}` : `${c.from}-${c.to}`,
      String(c.count),
      c.from === c.to ? c.fromCidr : `${c.fromCidr} … ${c.toCidr}`,
      c.reserved.join(', ') + (c.reservedCount > c.reserved.length ? ` (+${c.reservedCount - c.reserved.length} more)` : ''),
    ]);
    lines.push(...table(['INDEXES', 'COUNT', 'NODE CIDRS', 'RESERVED'], rows).map((l) => `  ${l}`));
    if (f.truncated) lines.push(`  … ${f.collisionRangeCount - f.collisions.length} more ranges not listed`);
  }
  if (f.reservedOutsidePool) lines.push(`  ${f.reservedOutsidePool} reserved IPv${f.family} CIDR(s) lie outside the pool`);
  for (const w of f.warnings) lines.push(`  warning: ${w}`);
  return lines.join('\n');
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
