// `ipam-shim gc`: the GC a runtime never sends (0.3.1 conflists): valid = the runtime's result cache,
// then the GC verb's own algorithm and guards. Dry run unless --apply.
import { attachmentName } from '../cni/config.js';
import { DEFAULT_CACHE_DIR, DEFAULT_GC_GRACE_S, gcFromCache } from '../gc/from-cache.js';
import type { GcReport } from '../gc/run-gc.js';
import { shown } from '../terminal.js';
import { NETWORK_FLAG_HELP, NETWORK_FLAGS, openNetwork } from '../contract/network-flags.js';
import { parseArgv, UsageError, type Command } from '../contract/command.js';
import { podName } from './ledger.js';

const USAGE = `ipam-shim gc [--network NAME] [--cache-dir ${DEFAULT_CACHE_DIR}] [--grace-seconds ${DEFAULT_GC_GRACE_S}] [--apply] [--allow-empty-cache]
  [--conflist PATH | --conf-dir DIR] [--cni-path DIRS] [--json]
  The network is found as \`ledger\` finds it: the conflist in --conf-dir that holds the shim (--network picks one
  when several do).
  When the cache is missing, unreadable or holds no entry for the network while the ledger holds pod
  attachments, nothing is released (the cache may be out of sight, e.g. another mount namespace):
  --allow-empty-cache overrides that after checking by hand.`;

const same = (a: { containerID: string; ifname: string }, b: { containerID: string; ifname: string }) =>
  a.containerID === b.containerID && a.ifname === b.ifname;

/** What --apply did with one planned release. */
function releaseAction(report: GcReport, r: { containerID: string; ifname: string }): string {
  if (report.released.some((a) => same(a, r)))
    return report.queueUnseen.some((a) => same(a, r)) ? "released (azure-ipam's DEL queue not visible: maybe only queued)" : 'released';
  if (report.queued.some((a) => same(a, r))) return 'queued by the delegate';
  const skipped = report.skipped.find((a) => same(a, r));
  if (skipped) return `left (${skipped.why})`;
  return report.errors.some((e) => e.attachment && same(e.attachment, r)) ? 'FAILED' : 'not started';
}

const OPTIONS = {
  ...NETWORK_FLAGS,
  'cache-dir': { type: 'string', default: DEFAULT_CACHE_DIR },
  apply: { type: 'boolean', default: false },
  'allow-empty-cache': { type: 'boolean', default: false },
  'grace-seconds': { type: 'string', default: String(DEFAULT_GC_GRACE_S) },
} as const;

export const gcCommand: Command = {
  name: 'gc',
  summary: "release leaked IPs for runtimes that never send CNI GC (valid = the runtime's result cache); dry run by default",
  usage: USAGE,
  options: OPTIONS,
  flagHelp: {
    ...NETWORK_FLAG_HELP,
    'cache-dir': { value: 'DIR', text: `the runtime's CNI cache, holding results/ (default ${DEFAULT_CACHE_DIR}), e.g. /host/var/lib/cni` },
    apply: { text: 'release what the dry run lists (default: only list it)' },
    'allow-empty-cache': { text: 'release even when the cache is missing or empty while pods are recorded (check by hand first)' },
    'grace-seconds': { value: 'N', text: `keep attachments younger than this (default ${DEFAULT_GC_GRACE_S}), e.g. 300` },
  },
  examples: ['ipam-shim gc', 'ipam-shim gc --network cilium --apply -o json'],
  exitStatus:
    '0 nothing to release (dry run) or everything released; 1 the dry run found something to release, a release failed, a leak was withheld (no identity to release it under, or its pod is alive again), or the cache was out of sight (refused); 2 usage; 3 could not run (no conflist, an unreadable ledger)',
  async run(argv, ctx) {
    const { values } = parseArgv({
      args: argv,
      strict: true,
      options: OPTIONS,
    });
    const grace = Number(values['grace-seconds']);
    if (!Number.isFinite(grace) || grace < 0) throw new UsageError('--grace-seconds takes a number');
    const net = await openNetwork(values, ctx.run, ctx.env);
    const { cache, valid, refused, apply, report } = await gcFromCache(net, {
      cacheDir: values['cache-dir']!,
      apply: values.apply!,
      graceMs: grace * 1000,
      allowEmptyCache: values['allow-empty-cache']!,
    });
    const rows = [
      ...report.plan.release.map((r) => ({
        action: apply ? releaseAction(report, r.record) : 'would release',
        containerID: r.record.containerID,
        ifname: r.record.ifname,
        pod: podName(r.record),
        ips: r.record.ips,
        why: r.reason,
      })),
      ...report.plan.withheld.map((w) => ({
        action: 'withheld',
        containerID: w.record.containerID,
        ifname: w.record.ifname,
        pod: podName(w.record),
        ips: w.record.ips,
        why: `${w.reason}; what to do: ${w.fix}`,
      })),
      ...report.plan.kept.map((k) => ({
        action: 'keep',
        containerID: k.record.containerID,
        ifname: k.record.ifname,
        pod: podName(k.record),
        ips: k.record.ips,
        why: k.reason,
      })),
    ];
    const text = [
      `network ${shown(net.conf.name)}: ${valid.length} cached attachment(s), ${report.plan.kept.length} kept, ${report.plan.release.length} ${apply ? 'to release' : refused ? 'would be released, but nothing is (refused)' : 'would be released (dry run; --apply to release)'}`,
      ...(refused ? [`REFUSED: ${shown(refused)}`] : []),
      ...cache.ignored.map((i) => `ignored cache entry ${shown(i.file)} (${shown(i.why)}: libcni never writes such an entry)`),
      // The container IDs, interface names and pod names (CNI_ARGS at ADD, as `ledger` shows them) come from
      // outside: one line per attachment, escaped.
      ...rows.map((r) => `${shown(r.action).padEnd(13)} ${shown(attachmentName(r))}  ${shown(r.pod)}  ${r.ips.join(',') || '-'}  (${shown(r.why)})`),
      ...report.errors.map((e) => `error ${e.code}: ${e.attachment ? `${shown(attachmentName(e.attachment))}: ` : ''}${shown(e.error)}`),
    ].join('\n');
    return {
      data: {
        network: net.conf.name,
        apply,
        ...(refused ? { refused } : {}),
        valid,
        ignoredCacheEntries: cache.ignored,
        kept: report.plan.kept.map((k) => ({ ...k.record, reason: k.reason })),
        release: report.plan.release.map((r) => ({ ...r.record, reason: r.reason })),
        released: report.released,
        queued: report.queued,
        queueUnseen: report.queueUnseen,
        withheld: report.plan.withheld.map((w) => ({ ...w.record, why: w.why, reason: w.reason, fix: w.fix })),
        skipped: report.skipped,
        forwarded: report.forwarded,
        errors: report.errors,
      },
      text,
      // Dry run: non-zero when something leaked, so scripts can alert on it. --apply: non-zero on any error.
      exitCode: refused || report.errors.length || report.plan.withheld.length || (!apply && report.plan.release.length) ? 1 : 0,
    };
  },
};
