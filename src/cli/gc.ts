// `ipam-shim gc`: the GC a runtime never sends (0.3.1 conflists): valid = the runtime's result cache,
// then the GC verb's own algorithm and guards. Dry run unless --apply.
import { parseArgs } from 'node:util';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Attachment } from '../cni/config.js';
import { runGc } from '../gc/run-gc.js';
import { NETWORK_FLAGS, openNetwork } from './network.js';
import { UsageError, type Command } from './command.js';

const USAGE = `ipam-shim gc --network NAME [--cache-dir /var/lib/cni] [--grace-seconds 60] [--apply]
  [--conflist PATH | --conf-dir DIR] [--cni-path DIRS] [--json]`;

/**
 * The attachments the runtime knows for `network`: libcni's cache files results/<net>-<cid>-<ifname>. The
 * file name is ambiguous (names contain '-'), so the JSON inside decides; an unreadable cache file makes the
 * list unknowable and aborts (releasing on a partial list could free a live pod's IP).
 */
export async function cachedAttachments(cacheDir: string, network: string): Promise<Attachment[]> {
  const dir = join(cacheDir, 'results');
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (e) {
    if ((e as { code?: string }).code === 'ENOENT') return [];
    throw e;
  }
  const out: Attachment[] = [];
  for (const name of names.filter((n) => n.startsWith(`${network}-`))) {
    const path = join(dir, name);
    let entry: { containerId?: unknown; ifName?: unknown; networkName?: unknown };
    try {
      entry = JSON.parse(await readFile(path, 'utf8'));
    } catch (e) {
      throw new Error(`cannot read runtime cache ${path}: ${(e as Error).message}; refusing to GC on an incomplete list`);
    }
    if (entry.networkName !== network) continue;
    if (typeof entry.containerId !== 'string' || typeof entry.ifName !== 'string') {
      throw new Error(`runtime cache ${path} lacks containerId/ifName; refusing to GC on an incomplete list`);
    }
    out.push({ containerID: entry.containerId, ifname: entry.ifName });
  }
  return out;
}

export const gcCommand: Command = {
  name: 'gc',
  summary: "release leaked IPs for runtimes that never send CNI GC (valid = the runtime's result cache); dry run by default",
  usage: USAGE,
  async run(argv, ctx) {
    let values;
    try {
      ({ values } = parseArgs({
        args: argv,
        strict: true,
        options: { ...NETWORK_FLAGS, 'cache-dir': { type: 'string', default: '/var/lib/cni' }, apply: { type: 'boolean', default: false }, 'grace-seconds': { type: 'string', default: '60' } },
      }));
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
    if (!values.network && !values.conflist) throw new UsageError('--network (or --conflist) is required');
    const grace = Number(values['grace-seconds']);
    if (!Number.isFinite(grace) || grace < 0) throw new UsageError('--grace-seconds takes a number');
    const net = await openNetwork(values, ctx.run, ctx.env);
    const valid = await cachedAttachments(values['cache-dir']!, net.conf.name);
    const report = await runGc({
      conf: net.conf,
      ledger: net.ledger,
      delegate: net.delegate,
      run: net.run,
      log: net.log,
      valid,
      apply: values.apply!,
      // Unlike the runtime's GC this one is not exclusive: an ADD may be between its ledger write and the cache write.
      graceMs: grace * 1000,
      forward: true,
    });
    const rows = [
      ...report.plan.release.map((r) => ({ action: values.apply ? (report.released.some((a) => a.containerID === r.record.containerID && a.ifname === r.record.ifname) ? 'released' : 'FAILED') : 'would release', containerID: r.record.containerID, ifname: r.record.ifname, ips: r.record.ips, why: r.reason })),
      ...report.plan.kept.map((k) => ({ action: 'keep', containerID: k.record.containerID, ifname: k.record.ifname, ips: k.record.ips, why: k.reason })),
    ];
    const text = [
      `network ${net.conf.name}: ${valid.length} cached attachment(s), ${report.plan.kept.length} kept, ${report.plan.release.length} ${values.apply ? 'to release' : 'would be released (dry run; --apply to release)'}`,
      ...rows.map((r) => `${r.action.padEnd(13)} ${r.containerID}/${r.ifname}  ${r.ips.join(',') || '-'}  (${r.why})`),
      ...report.errors.map((e) => `error ${e.code}: ${e.attachment ? `${e.attachment.containerID}/${e.attachment.ifname}: ` : ''}${e.error}`),
    ].join('\n');
    return {
      data: { network: net.conf.name, apply: values.apply, valid, kept: report.plan.kept.map((k) => ({ ...k.record, reason: k.reason })), release: report.plan.release.map((r) => ({ ...r.record, reason: r.reason })), released: report.released, forwarded: report.forwarded, errors: report.errors },
      text,
      // Dry run: non-zero when something leaked, so scripts can alert on it. --apply: non-zero on any error.
      exitCode: report.errors.length || (!values.apply && report.plan.release.length) ? 1 : 0,
    };
  },
};
