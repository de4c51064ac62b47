// Metrics without a daemon: every CNI invocation updates one Prometheus text-format file for node-exporter's
// textfile collector (setting `metricsFile`). Read-modify-write under a small lock (concurrent invocations must
// not lose counts), written atomically (the collector never reads half a file), mode 0644 (it runs as another
// user). Nothing here may change a CNI outcome: every failure is logged and swallowed. The file is an operator's
// path: read through src/effects/safe-open.ts (no symlink, no FIFO or device, within METRICS_MAX_BYTES), its
// directory held without following a symlink at its name; what cannot be used is skipped (one log line), untouched.
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { writeFileAtomic } from './effects/fs-atomic.js';
import { HeldDir, readRegularSync, splitPath } from './effects/safe-open.js';
import { ErrorCode } from './cni/errors.js';
import { ownerOf } from './ledger/owner.js';
import { Ledger } from './effects/ledger.js';
import { withLock } from './effects/lock.js';
import type { Outcome } from './cni/skel.js';
import type { Logger } from './log.js';
import type { InvocationCounters } from './verbs/context.js';
import type { CniFamily, TallySeries } from './contract/fix.js';
import { FIXES } from './fix-list/registry.js';

export const METRICS_LOCK_TIMEOUT_MS = 2_000;

/**
 * The largest metrics file read (plugin and agent). One network's file is ~15 KB (every verb × error code at 0, the
 * histogram, the tallies), so this holds ~65 networks; a larger file, sparse or not, is refused from its size and
 * never read (a symlink to /dev/zero and a sparse file cost each CNI call 673 / 585 MiB when read whole).
 */
export const METRICS_MAX_BYTES = 1024 * 1024;

/** The verbs whose calls are recorded (VERSION has no network config, so no file). */
const RECORDED_VERBS = ['ADD', 'DEL', 'CHECK', 'GC', 'STATUS'] as const;

/** The core's families, then every fix's own (Fix.metrics.families). */
const CORE_FAMILIES: Record<string, CniFamily> = {
  ipam_shim_invocations_total: { type: 'counter', help: 'CNI invocations by network and verb.' },
  ipam_shim_errors_total: { type: 'counter', help: 'Failed CNI invocations by network, verb and CNI error code.' },
  ipam_shim_gc_released_total: { type: 'counter', help: 'Attachments released by the GC verb.' },
  ipam_shim_stale_records_taken_total: {
    type: 'counter',
    help: 'ADDs whose address the ledger held for a provably dead pod: that record gave the address up (forgotten, or kept for its other addresses).',
  },
  ipam_shim_del_records_kept_total: {
    type: 'counter',
    help: 'DELs that released the address but could not forget its record (the ledger could not be written): the record stays for GC.',
  },
  ipam_shim_agent_ips: { type: 'gauge', help: 'Addresses held for cilium-agent (agentContainerIDs) in the ledger.' },
  ipam_shim_ledger_attachments: { type: 'gauge', help: 'Attachments recorded in the ledger.' },
  ipam_shim_last_invocation_timestamp_seconds: { type: 'gauge', help: 'Unix time of the last invocation, by network and verb.' },
  ipam_shim_cni_call_duration_seconds: {
    type: 'histogram',
    help: "CNI calls' wall time by network and verb, process start to the outcome (what the runtime waits for, less the metrics update).",
  },
};

/** The core's tallies (src/verbs/context.ts InvocationCounters) and the counters they add to. */
const CORE_TALLIES: TallySeries[] = [
  { tally: 'gcReleased', family: 'ipam_shim_gc_released_total' },
  { tally: 'staleTaken', family: 'ipam_shim_stale_records_taken_total' },
  { tally: 'delRecordsKept', family: 'ipam_shim_del_records_kept_total' },
];

/** Every series the shim writes. Names and labels are a contract with dashboards: add, never rename. */
export const FAMILIES: Record<string, CniFamily> = Object.assign({}, CORE_FAMILIES, ...FIXES.map((f) => f.metrics?.families ?? {}));

/** Every tally a call may carry, core's and fixes'. */
const TALLIES: TallySeries[] = [...CORE_TALLIES, ...FIXES.flatMap((f) => f.metrics?.tallies ?? [])];

/** Upper bounds (seconds) of the duration histogram: an ADD takes ~0.1 s; the delegate's timeout is 30 s by default. */
export const DURATION_BUCKETS = [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30] as const;

const HISTOGRAM_SUFFIXES = ['_bucket', '_sum', '_count'] as const;

// ---------------------------------------------------------------------------------------------------------------
// the text format (PURE)

export type Labels = Record<string, string>;

export interface Series {
  name: string;
  labels: Labels;
  value: number;
}

const escapeLabel = (v: string) => v.replaceAll('\\', '\\\\').replaceAll('"', '\\"').replaceAll('\n', '\\n');
const unescapeLabel = (v: string) => v.replace(/\\(.)/g, (_m, c: string) => (c === 'n' ? '\n' : c));

export const seriesKey = (name: string, labels: Labels): string =>
  `${name}{${Object.keys(labels)
    .sort()
    .map((k) => `${k}="${escapeLabel(labels[k]!)}"`)
    .join(',')}}`;

/** Parses the series of a text-format file (comments skipped; lines it does not understand dropped). */
export function parseMetrics(text: string): Map<string, Series> {
  const out = new Map<string, Series>();
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)\s*$/.exec(line.trim());
    if (!m || line.startsWith('#')) continue;
    const labels: Labels = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = unescapeLabel(l[2]!);
    const value = Number(m[3]);
    if (!Number.isFinite(value)) continue;
    out.set(seriesKey(m[1]!, labels), { name: m[1]!, labels, value });
  }
  return out;
}

/** Renders known families (HELP/TYPE once each), series sorted for stable diffs; `only` picks families. */
export function renderMetrics(series: Map<string, Series>, only: (family: string) => boolean = () => true): string {
  // Every CNI call renders the file once, interpreted (no JIT tiers in the single executable): one pass to group
  // the series by name, code-unit order (ICU's localeCompare costs more and orders nothing anyone reads).
  const byName = new Map<string, Row[]>();
  for (const row of series) {
    const list = byName.get(row[1].name);
    if (list) list.push(row);
    else byName.set(row[1].name, [row]);
  }
  const lines: string[] = [];
  for (const [name, fam] of Object.entries(FAMILIES)) {
    if (!only(name)) continue;
    const rows = fam.type === 'histogram' ? histogramRows(byName, name) : (byName.get(name) ?? []).sort(([a], [b]) => codeUnitOrder(a, b));
    if (!rows.length) continue;
    lines.push(`# HELP ${name} ${fam.help}`, `# TYPE ${name} ${fam.type}`);
    for (const [key, s] of rows) lines.push(`${key.replace('{}', '')} ${s.value}`);
  }
  return `${lines.join('\n')}\n`;
}

type Row = [key: string, series: Series];

const codeUnitOrder = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** A series key's labels without `le` (a label value cannot hold an unescaped quote: the match is a real label). */
const withoutLe = (labels: string) => labels.replace(/\{le="[^"]*",?|,le="[^"]*"/, (m) => (m.startsWith('{') ? '{' : ''));

/** A histogram's series, one label set after another: its buckets by ascending `le`, then `_sum`, then `_count`. */
function histogramRows(byName: Map<string, Row[]>, name: string): Row[] {
  const rows: Array<{ row: Row; group: string; suffix: number; le: number }> = [];
  HISTOGRAM_SUFFIXES.forEach((suffix, i) => {
    for (const row of byName.get(name + suffix) ?? []) {
      const labels = row[0].slice(name.length + suffix.length);
      rows.push({ row, group: i === 0 ? withoutLe(labels) : labels, suffix: i, le: i === 0 ? Number(row[1].labels.le) : 0 });
    }
  });
  return rows.sort((a, b) => codeUnitOrder(a.group, b.group) || a.suffix - b.suffix || a.le - b.le).map((r) => r.row);
}

export interface Update {
  network: string;
  verb: string;
  /** 0 for success, else the CNI error code. */
  code: number;
  /** What the call did, by tally (src/verbs/context.ts InvocationCounters). */
  counts: InvocationCounters;
  /** undefined when the ledger could not be read (gauges keep their last value). */
  ledger?: { attachments: number; agentIps: number };
  nowSeconds: number;
  /** The call's wall time (the histogram); undefined: not observed. */
  durationSeconds?: number;
}

/**
 * PURE: `ipam_shim_errors_total` at 0 for every recorded verb and CNI error code (src/cni/errors.ts) of `network`:
 * a counter born at its first increment has no earlier sample, so increase() missed the first failure with a new
 * code. The plugin writes them with every call, the agent serves them for every network it has opened.
 */
export function errorSeriesAtZero(network: string): Series[] {
  return RECORDED_VERBS.flatMap((verb) =>
    Object.values(ErrorCode).map((code) => ({ name: 'ipam_shim_errors_total', labels: { network, verb, code: String(code) }, value: 0 })),
  );
}

/** PURE: applies one invocation to the series. */
export function applyUpdate(series: Map<string, Series>, u: Update): Map<string, Series> {
  const add = (name: string, labels: Labels, by: number) => {
    const key = seriesKey(name, labels);
    series.set(key, { name, labels, value: (series.get(key)?.value ?? 0) + by });
  };
  const set = (name: string, labels: Labels, value: number) => series.set(seriesKey(name, labels), { name, labels, value });
  const net = { network: u.network };
  add('ipam_shim_invocations_total', { ...net, verb: u.verb }, 1);
  for (const z of errorSeriesAtZero(u.network)) add(z.name, z.labels, 0);
  if (u.code !== 0) add('ipam_shim_errors_total', { ...net, verb: u.verb, code: String(u.code) }, 1);
  const counts = { ...u.counts };
  for (const fix of FIXES) {
    const t = fix.metrics?.outcome?.(u.verb, u.code);
    if (t) counts[t] = (counts[t] ?? 0) + 1;
  }
  // Every tally's series exists from the first invocation on, so rate() works from zero.
  for (const t of TALLIES) add(t.family, { ...net, ...t.labels }, counts[t.tally] ?? 0);
  if (u.ledger) {
    set('ipam_shim_ledger_attachments', net, u.ledger.attachments);
    set('ipam_shim_agent_ips', net, u.ledger.agentIps);
  }
  set('ipam_shim_last_invocation_timestamp_seconds', { ...net, verb: u.verb }, Math.floor(u.nowSeconds));
  if (u.durationSeconds !== undefined) {
    const h = 'ipam_shim_cni_call_duration_seconds';
    const labels = { ...net, verb: u.verb };
    for (const le of DURATION_BUCKETS) add(`${h}_bucket`, { ...labels, le: String(le) }, u.durationSeconds <= le ? 1 : 0);
    add(`${h}_bucket`, { ...labels, le: '+Inf' }, 1);
    add(`${h}_sum`, labels, u.durationSeconds);
    add(`${h}_count`, labels, 1);
  }
  return series;
}

// ---------------------------------------------------------------------------------------------------------------
// effects

/** Ledger gauges (the ledger counts its records; agent ones by agentContainerIDs). */
export function ledgerGauges(
  stateDir: string,
  network: string,
  agentPatterns: readonly string[],
): Promise<{ attachments: number; agentIps: number }> {
  return new Ledger(stateDir, network).census((containerID) => ownerOf(containerID, agentPatterns) === 'agent');
}

/**
 * Applies `u` to the file under its lock. `gauges` runs inside the lock, so the last writer's gauges are read
 * after every earlier writer's ledger change: the file ends with the ledger's final state. Throws on failure
 * (callers in CNI mode use recordInvocation): UnsafePathError when the file or its directory is not ours to use
 * (a symlink, a FIFO, a device, a file over METRICS_MAX_BYTES); it is then left as it is.
 */
export async function updateMetricsFile(file: string, u: Update, gauges?: () => Promise<Update['ledger']>): Promise<void> {
  await mkdir(dirname(file), { recursive: true, mode: 0o755 });
  const { dir: dirPath, name } = splitPath(file);
  // Every name (the file, its lock, the temp file) through the held directory: a symlink there is never followed.
  const dir = HeldDir.open(dirPath);
  try {
    await withLock(
      dir.at(`${name}.lock`),
      async () => {
        const text = readRegularSync(dir.at(name), METRICS_MAX_BYTES, file) ?? '';
        const ledger = gauges ? await gauges() : u.ledger;
        // Not durable (fs-atomic.ts): written on every CNI call; lost to a power loss, the counters restart (a reset
        // Prometheus expects) and the gauges are recounted from the ledger on the next call.
        await writeFileAtomic(dir.at(name), renderMetrics(applyUpdate(parseMetrics(text), { ...u, ...(ledger ? { ledger } : {}) })), {
          durable: false,
          mode: 0o644,
        });
      },
      METRICS_LOCK_TIMEOUT_MS,
    );
  } finally {
    dir.close();
  }
}

/** CNI mode: one call after the outcome, `ms` the call's wall time so far. Never throws, never changes the outcome. */
export async function recordInvocation(outcome: Outcome, counters: InvocationCounters, log: Logger, ms?: number): Promise<void> {
  const conf = outcome.conf;
  const file = conf?.settings.metricsFile;
  if (!conf || !file || !outcome.command) return;
  try {
    const gauges = () =>
      ledgerGauges(conf.settings.stateDir, conf.name, conf.settings.agentContainerIDs).catch((e) => {
        log.warn({ err: e }, 'metrics: ledger not readable; gauges keep their last value');
        return undefined;
      });
    await updateMetricsFile(
      file,
      {
        network: conf.name,
        verb: outcome.command,
        code: outcome.error?.code ?? 0,
        counts: counters,
        nowSeconds: Date.now() / 1000,
        ...(ms === undefined ? {} : { durationSeconds: ms / 1000 }),
      },
      gauges,
    );
  } catch (e) {
    log.warn({ err: e, metricsFile: file }, 'metrics not written (the CNI outcome is unaffected)');
  }
}
