// `ipam-shim plan`'s text (command.ts): the inputs read, then per family the pool, its collisions as a table, and
// the proposal (proposal.ts) with how an operator can apply it. Values from outside are shown through shown().
import type { CollisionPoint } from './held.js';
import type { FamilyPlan, Plan } from './pool.js';
import type { ReservedEntry } from './inputs.js';
import type { PlanRequest } from './request.js';
import { parseCidr } from '../../net/cidr.js';
import { shown } from '../../terminal.js';

/** Canonical reserved CIDR text → the Azure subnet names it came from, for the output. */
export function reservedNames(reserved: ReservedEntry[]): Map<string, string> {
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

export function renderInputs(req: PlanRequest): string {
  const lines = req.files.map((f) => `${f.flag} ${shown(f.source)}: ${shown(f.summary)}`);
  if (req.inferred.length) lines.push(`from the node CIDRs the CiliumNodes hold: ${req.inferred.join(', ')}`);
  if (req.defaulted.length) lines.push(`Cilium's defaults for: ${req.defaulted.join(', ')}`);
  if (req.held?.pending.length)
    lines.push(
      `CiliumNodes holding no node CIDR yet: ${req.held.pending.slice(0, 10).map(shown).join(', ')}${req.held.pending.length > 10 ? ' …' : ''}`,
    );
  return lines.length ? `${lines.join('\n')}\n\n` : '';
}

export const indent = (text: string) =>
  text
    .split('\n')
    .map((l) => (l ? `  ${l}` : l))
    .join('\n');

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
  // What does not fit the plan (held node CIDRs outside the pool, …) comes first: it changes how to read the rest.
  for (const w of f.warnings) lines.push(`  warning: ${shown(w)}`);
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
  return lines.join('\n');
}

/** Lists longer than this are cut in the text (--json has them whole). */
const MAX_LISTED_ENTRIES = 40;

/** The proposal (proposal.ts) and how an operator can apply it, honest about what Cilium allows. */
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
    out.push(
      `    apply: append (what Cilium supports in place); the operator hands the new entry out once the entries before it are full:`,
      ...helmCommands(list, p.list).map((l) => `      ${l}`),
    );
  } else {
    out.push(
      `    apply: Cilium's cluster-pool cannot skip a node CIDR inside an entry, and its docs allow only appending entries; appending alone leaves the reserved node CIDRs to be handed out. So this replaces entries, knowingly:`,
      `      1. put the reserved subnets into the shim's reservedCIDRs, so a node CIDR that still lands on one is refused at its first pod`,
      `      2. set the list and restart cilium-operator: it takes each node's podCIDRs back from its CiliumNode into the entry containing them; every held node CIDR but the ones to move lies in the new list, so no other node is renumbered`,
      ...helmCommands(list, p.list).map((l) => `           ${l}`),
      `      3. ${p.move.length ? 'replace the nodes to move (until then the operator cannot place their node CIDR in any entry and reports it in their CiliumNode status)' : 'no node holds a removed node CIDR: nothing to move'}`,
    );
  }
  return out;
}

/**
 * The commands that set a cluster-pool list, written out whole (the text's list may be cut, these never are):
 * Cilium's release in kube-system, its chart kept at the version it runs, the other values reused.
 */
function helmCommands(key: string, list: string[]): string[] {
  return [
    `# release "cilium" in kube-system from the cilium/cilium chart, at the version it runs: change the names if yours differ`,
    `helm upgrade cilium cilium/cilium --namespace kube-system --reuse-values --version "$(helm get metadata cilium -n kube-system -o json | jq -r .version)" --set ${key}='{${list.join(',')}}'`,
    'kubectl -n kube-system rollout restart deployment/cilium-operator',
  ];
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
