// doctor: reserved subnets (issue 7, docs/reserved.md). Three looks, one registered check:
// - reserved-routes: routes on this node that capture all or part of a reserved CIDR through something other
//   than the uplink (the seed case: a node CIDR handed out over a firewall subnet, routed to another node);
// - reserved-ledger: addresses the ledger holds that lie inside reserved CIDRs (handed out before the CIDR was
//   reserved: CHECK already fails for them);
// - reserved-ranges: host-local ranges (the delegate's, and in the chained placement the main plugin's `ipam`)
//   that overlap reserved CIDRs: a warning while some addresses are usable, a problem when none is.
// Read-only: every finding carries the command or config change that fixes it; nothing is repaired here.
import type { OpenNetwork } from '../network/open.js';
import type { ActiveTables, Route } from '../net/route.js';
import type { CapturingRoute } from './capture.js';
import { capturingRoutes, lookAtRoutes } from './node-routes.js';
import { assessRanges, everySetWhollyReserved, findReservedHit, type RangeSetAssessment } from './ranges.js';
import { reservedCidrs } from './decision.js';
import { podIpamSources, type IpamSource } from '../conflist.js';
import { formatIp } from '../net/ip.js';
import type { Cidr, IpRange } from '../net/cidr.js';
import type { LedgerRecord } from '../ledger/record.js';
import { agentReplaceFix } from '../ledger/owner.js';
import { attachmentName } from '../cni/config.js';
import { CniError, ErrorCode } from '../cni/errors.js';
import { failedCheck, type DoctorCheck, type Finding } from '../contract/doctor-check.js';

export const ROUTES_CHECK = 'reserved-routes';
export const LEDGER_CHECK = 'reserved-ledger';
export const RANGES_CHECK = 'reserved-ranges';

/** (a) PURE: findings for the node's routes. `uplink` undefined = none configured and no default route. */
export function routeFindings(
  routes: readonly Route[],
  reserved: readonly Cidr[],
  uplink: string | undefined,
  uplinkSource: 'config' | 'default route',
  activeTables?: ActiveTables,
): Finding[] {
  if (!uplink) {
    return [
      {
        check: ROUTES_CHECK,
        verdict: 'warn',
        summary: `cannot judge ${routes.length} routes: no "uplink" is configured and the node has no default route`,
        fix: 'set "uplink" in the shim\'s config to the interface reserved subnets are reached through (e.g. "eth0")',
      },
    ];
  }
  const found = capturingRoutes({ routes, uplink, ...(activeTables ? { tables: activeTables } : {}) }, reserved);
  if (!found.length) {
    return [
      {
        check: ROUTES_CHECK,
        verdict: 'ok',
        summary: `no route captures a reserved CIDR (${routes.length} routes, ${reserved.length} reserved CIDRs, uplink ${uplink} from ${uplinkSource})`,
      },
    ];
  }
  return found.map((c) => routeFinding(c, uplink));
}

const REASON_TEXT: Record<CapturingRoute['reason'], string> = {
  'other-device': 'through another device',
  'other-gateway': 'to another host on the uplink',
  blackhole: 'into a blackhole',
  unreachable: 'as unreachable',
  prohibit: 'as prohibited',
  'no-nexthop': 'with no nexthop',
};

function routeFinding(c: CapturingRoute, uplink: string): Finding {
  const part = c.overlap === 'full' ? 'all of' : 'part of';
  return {
    check: ROUTES_CHECK,
    verdict: 'problem',
    summary: `route "${c.text}" sends ${part} reserved ${c.reserved} ${REASON_TEXT[c.reason]} instead of ${uplink}`,
    fix: c.fix,
    data: { route: c.text, table: c.route.table, family: c.route.family, reserved: c.reserved, overlap: c.overlap, reason: c.reason, uplink },
  };
}

/** (b) PURE: ledger records holding addresses inside reserved CIDRs. */
export function ledgerFindings(records: readonly LedgerRecord[], reserved: readonly Cidr[], network: string): Finding[] {
  const out: Finding[] = [];
  let addresses = 0;
  for (const rec of records) {
    for (const ip of rec.ips) {
      addresses++;
      let hit;
      try {
        hit = findReservedHit(ip, reserved);
      } catch {
        continue; // an unparseable address is the ledger check's business, not ours
      }
      if (!hit) continue;
      const who = attachmentName(rec);
      const fix =
        rec.owner === 'agent'
          ? `release and re-allocate cilium-agent's address: ${agentReplaceFix(rec.containerID)}, after moving the delegate's range off ${hit.cidr.text}`
          : `delete the pod using container ${rec.containerID} (its DEL releases ${hit.ip}); its replacement gets an address outside ${hit.cidr.text} once the range avoids it (see the ${RANGES_CHECK} finding)`;
      out.push({
        check: LEDGER_CHECK,
        verdict: 'problem',
        summary: `${rec.owner} attachment ${who} holds ${hit.ip}, inside reserved ${hit.cidr.text} (network ${network}${rec.state === 'intent' ? ', unfinished ADD' : ''})`,
        fix,
        data: { containerID: rec.containerID, ifname: rec.ifname, owner: rec.owner, state: rec.state, ip: hit.ip, reserved: hit.cidr.text, network },
      });
    }
  }
  if (!out.length) {
    out.push({
      check: LEDGER_CHECK,
      verdict: 'ok',
      summary: `no ledger address lies in a reserved CIDR (${records.length} attachments, ${addresses} addresses)`,
    });
  }
  return out;
}

const MAX_PIECES = 8;

/** (c) PURE: host-local ranges overlapping reserved CIDRs. */
export function rangeFindings(sources: readonly IpamSource[], reserved: readonly Cidr[]): Finding[] {
  const out: Finding[] = [];
  let checked = 0;
  for (const src of sources) {
    // host-local hands out one address from each range set: a set with no usable address refuses every ADD.
    let sets: RangeSetAssessment[];
    try {
      sets = assessRanges(src.ipam, reserved);
    } catch (e) {
      out.push({
        check: RANGES_CHECK,
        verdict: 'warn',
        summary: `cannot read the ranges of ${src.where}: ${(e as Error).message}`,
        fix: `fix ${src.where} in the conflist (host-local needs "subnet" CIDRs and rangeStart/rangeEnd inside them)`,
      });
      continue;
    }
    const type = (src.ipam as { type?: unknown }).type;
    const results = sets.flatMap((set) => set.ranges.map((r) => ({ ...r, set })));
    if (!results.length) continue;
    checked += results.length;
    const allDead = everySetWhollyReserved(sets);
    for (const r of results) {
      if (!r.reserved.length) continue;
      const touching = r.reserved.map((c) => c.text);
      const reservedCount = r.size - r.usable;
      const where = `${src.where}${type ? ` (${String(type)})` : ''} range ${r.range.text} of ${r.range.subnet}`;
      const listed = [...new Set(touching)].slice(0, 5).join(', ') + (touching.length > 5 ? ` (+${touching.length - 5} more)` : '');
      const data = {
        source: src.where,
        subnet: r.range.subnet,
        range: r.range.text,
        reserved: [...new Set(touching)],
        addresses: r.size.toString(),
        reservedAddresses: reservedCount.toString(),
        usable: r.unreserved.map((p) => pieceText(p)),
      };
      if (r.usable === 0n) {
        const dead = r.set.whollyReserved;
        const why = !dead
          ? ''
          : allDead
            ? `: every ADD is refused (STATUS reports ${ErrorCode.PluginNotAvailable})`
            : `: host-local takes an address from every range set, so every ADD is refused (STATUS reports ${ErrorCode.PluginNotAvailable})`;
        out.push({
          check: RANGES_CHECK,
          verdict: dead ? 'problem' : 'warn',
          summary: `${where}: every address lies in reserved ${listed}${why}`,
          fix: `move ${src.where}'s range out of ${listed}: pick a subnet (or rangeStart/rangeEnd) that no reserved CIDR covers, or drop the range`,
          data,
        });
        continue;
      }
      const pieces = r.unreserved
        .slice(0, MAX_PIECES)
        .map((p) => ({ subnet: r.range.subnet, rangeStart: formatIp(p.family, p.first), rangeEnd: formatIp(p.family, p.last) }));
      out.push({
        check: RANGES_CHECK,
        verdict: 'warn',
        summary: `${where}: ${reservedCount} of ${r.size} addresses lie in reserved ${listed}; ADDs handed one of them are refused with code ${ErrorCode.ReservedAddress}`,
        fix:
          `replace the range in ${src.where} with its unreserved parts (one range set): ${JSON.stringify(pieces)}` +
          (r.unreserved.length > MAX_PIECES ? ` … and ${r.unreserved.length - MAX_PIECES} more pieces` : ''),
        data,
      });
    }
  }
  if (!out.length) {
    out.push(
      checked
        ? { check: RANGES_CHECK, verdict: 'ok', summary: `no host-local range overlaps a reserved CIDR (${checked} ranges)` }
        : {
            check: RANGES_CHECK,
            verdict: 'skipped',
            summary: `no host-local ranges to compare (${sources.map((s) => s.where).join(', ') || 'no IPAM config'})`,
          },
    );
  }
  return out;
}

function pieceText(p: IpRange): string {
  return p.first === p.last ? formatIp(p.family, p.first) : `${formatIp(p.family, p.first)}-${formatIp(p.family, p.last)}`;
}

/** Runs one part, turning a crash into that part's own finding (failedCheck) so the others still report. */
async function guarded(net: OpenNetwork, check: string, fn: () => Promise<Finding[]> | Finding[]): Promise<Finding[]> {
  try {
    return await fn();
  } catch (e) {
    return [failedCheck(check, e, net)];
  }
}

export const reservedCheck: DoctorCheck = {
  name: 'reserved',
  async run(net: OpenNetwork): Promise<Finding[]> {
    let reserved: Cidr[];
    try {
      reserved = reservedCidrs(net.conf);
    } catch (e) {
      // The list's own message (the code-7 error ADD gives carries it as details).
      const summary = e instanceof CniError && e.details ? e.details : (e as Error).message;
      return [
        { check: 'reserved', verdict: 'problem', summary, fix: 'correct reservedCIDRs in the conflist: every ADD fails with code 7 until then' },
      ];
    }
    if (!reserved.length) {
      return [{ check: 'reserved', verdict: 'skipped', summary: 'no reservedCIDRs configured: routes, ledger and ranges not compared' }];
    }
    const routes = await guarded(net, ROUTES_CHECK, async () => {
      const look = await lookAtRoutes(net.run, net.conf.settings.uplink);
      const found = routeFindings(look.routes, reserved, look.uplink, look.uplinkSource, look.tables);
      for (const f of found) if (f.verdict === 'problem') net.log.warn({ finding: f.data }, f.summary);
      return found;
    });
    const ledger = await guarded(net, LEDGER_CHECK, async () => {
      const { records } = await net.ledger.list();
      return ledgerFindings(records, reserved, net.conf.name);
    });
    const ranges = await guarded(net, RANGES_CHECK, () => rangeFindings(podIpamSources(net), reserved));
    return [...routes, ...ledger, ...ranges];
  },
};
