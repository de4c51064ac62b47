// The node agent's Prometheus registry (prom-client renders the exposition format): the agent's own counters,
// build_info, and the plugin's invocation series read from its textfile (setting `metricsFile`) at scrape time.
// With the agent running, its /metrics is the one place to scrape; node-exporter's textfile collector is for nodes
// without it (both at once count every plugin series twice: docs/operations.md#monitoring).
import { readdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { Counter, Gauge, Registry } from 'prom-client';
import type { EntryInUse } from '../conflist.js';
import { isErrno } from '../effects/fs-atomic.js';
import { HeldDir, readRegularSync, splitPath } from '../effects/safe-open.js';
import type { Logger } from '../log.js';
import { errorSeriesAtZero, FAMILIES, METRICS_MAX_BYTES, parseMetrics, renderMetrics, type Series, seriesKey } from '../metrics.js';
import type { AgentFamily } from '../contract/fix.js';
import { STEPS } from './steps.js';

/** Labels any plugin series may carry (src/metrics.ts applyUpdate). */
const PLUGIN_LABELS = ['network', 'verb', 'code', 'kind'] as const;

/** Every step a pass runs, in order: `network` (the pass runner's own), then the steps (src/agent/steps.ts). */
const STEP_NAMES: readonly string[] = ['network', ...STEPS.map((s) => s.step)];

/** Every series the steps declared (AgentStepEntry.families). */
const FAMILIES_OF_STEPS: readonly AgentFamily[] = STEPS.flatMap((s) => s.families);

export class AgentMetrics {
  readonly registry = new Registry();
  /** The plugin's textfile; set once a pass has read the shim's config. */
  pluginFile: string | undefined;
  /** Whether the shim's entry is in the network config the runtime uses (the daemon sets it; /readyz asks it too). */
  entry: (() => Promise<EntryInUse>) | undefined;

  readonly passes = new Counter({
    name: 'ipam_shim_agent_reconcile_passes_total',
    help: 'Reconcile passes run to the end (or abandoned at SIGTERM, outcome="stopped").',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly steps = new Counter({
    name: 'ipam_shim_agent_steps_total',
    help: 'Reconcile steps by step and outcome.',
    labelNames: ['step', 'outcome'],
    registers: [this.registry],
  });
  readonly errors = new Counter({
    name: 'ipam_shim_agent_errors_total',
    help: 'Errors met by reconcile steps (each failed release, cleanup or restore counts once).',
    labelNames: ['step'],
    registers: [this.registry],
  });
  readonly entryInUse = new Gauge({
    name: 'ipam_shim_agent_conflist_entry_in_use',
    help: "1 when the shim's entry is in the network config the runtime uses now (the first in the conf dir; with installing disabled, the configured conflist), else 0: pods start without the shim. Checked at each scrape.",
    registers: [this.registry],
    collect: async () => {
      if (this.entry) this.entryInUse.set((await this.entry()).inUse ? 1 : 0);
    },
  });
  readonly listVersion = new Gauge({
    name: 'ipam_shim_agent_list_version',
    help: "1 for the state of the runtime's list against its plugins' VERSION answers, 0 for the others: taken (every plugin takes the version the runtime sends), refused (one does not: every ADD fails, the entry is kept out), not-asked (one could not be asked: not installed yet, or no answer). All 0 before a list was judged.",
    labelNames: ['state'],
    registers: [this.registry],
  });
  /** Sets ipam_shim_agent_list_version: `state` at 1, the others at 0 (all 0 for undefined). */
  listVersionState(state: 'taken' | 'refused' | 'not-asked' | undefined): void {
    for (const s of ['taken', 'refused', 'not-asked'] as const) this.listVersion.set({ state: s }, s === state ? 1 : 0);
  }
  readonly lastDuration = new Gauge({
    name: 'ipam_shim_agent_last_pass_duration_seconds',
    help: 'Wall time of the last reconcile pass.',
    registers: [this.registry],
  });
  readonly lastPass = new Gauge({
    name: 'ipam_shim_agent_last_pass_timestamp_seconds',
    help: 'Unix time the last reconcile pass ended.',
    registers: [this.registry],
  });
  // The join table for every other series (`* on(instance) group_left(version, node)`): which shim runs where.
  readonly buildInfo = new Gauge({
    name: 'ipam_shim_build_info',
    help: "Always 1: the agent's shim version and its node's name (NODE_NAME, else the host name: the pod shares the node's).",
    labelNames: ['version', 'node'],
    registers: [this.registry],
  });

  /** `log`: where a textfile that cannot be used is said (once per reason). */
  constructor(private readonly log?: Pick<Logger, 'warn'>) {
    for (const k of ['ok', 'error', 'stopped']) this.passes.inc({ outcome: k }, 0);
    this.listVersionState(undefined);
    for (const s of STEP_NAMES) this.errors.inc({ step: s }, 0);
    for (const fam of FAMILIES_OF_STEPS) this.stepFamily(fam);
    this.buildInfo.set({ version: process.env.IPAM_SHIM_VERSION ?? 'unbundled', node: process.env.NODE_NAME || hostname() }, 1);
    for (const [name, fam] of Object.entries(FAMILIES)) if (fam.type !== 'histogram') this.pluginFamily(name, fam.type, fam.help);
    this.processGauges();
  }

  private readonly stepSeries = new Map<string, Counter | Gauge>();
  /** Every network a pass opened: its plugin error series are served at 0 before the textfile has them. */
  private readonly networks = new Set<string>();

  /** A series a step declared (AgentStepEntry.families), created with the registry. */
  private stepFamily(fam: AgentFamily): void {
    const opts = { name: fam.name, help: fam.help, labelNames: fam.labelNames ?? [], registers: [this.registry] };
    const series = fam.type === 'counter' ? new Counter(opts) : new Gauge(opts);
    if (fam.zero) series instanceof Counter ? series.inc(0) : series.set(0);
    this.stepSeries.set(fam.name, series);
  }

  /** The steps' per-network series (AgentFamily.perNetwork), created at 0 once a pass has opened `network`; idempotent. */
  networkKnown(network: string): void {
    this.networks.add(network);
    for (const fam of FAMILIES_OF_STEPS) {
      const series = this.stepSeries.get(fam.name);
      for (const labels of fam.perNetwork ?? []) {
        // inc(0) and set(+0) leave an existing series' value as it is.
        if (series instanceof Counter) series.inc({ ...labels, network }, 0);
        else if (series instanceof Gauge) series.inc({ ...labels, network }, 0);
      }
    }
  }

  /** A step's counter by name; throws for a name no step declared as a counter (a bug, caught by any pass). */
  counter(name: string): Counter {
    const s = this.stepSeries.get(name);
    if (!(s instanceof Counter)) throw new TypeError(`no agent counter ${name} is declared by a step`);
    return s;
  }

  gauge(name: string): Gauge {
    const s = this.stepSeries.get(name);
    if (!(s instanceof Gauge)) throw new TypeError(`no agent gauge ${name} is declared by a step`);
    return s;
  }

  /**
   * The process's own resources, under prom-client's default names: a node agent runs for months, and what it holds
   * must be seen not to grow (test/soak/agent.ts reads them). Not collectDefaultMetrics: its gauges named
   * `*_total` fail `promtool check metrics`, and most of its series watch nothing this process can leak.
   */
  private processGauges(): void {
    const gauge = (name: string, help: string, value: () => number) =>
      new Gauge({
        name,
        help,
        registers: [this.registry],
        collect(this: Gauge) {
          this.set(value());
        },
      });
    gauge('process_open_fds', 'Open file descriptors of the agent process.', () => readdirSync('/proc/self/fd').length);
    gauge('process_resident_memory_bytes', 'Resident memory of the agent process, in bytes.', () => process.memoryUsage().rss);
    gauge('nodejs_heap_size_used_bytes', 'V8 heap in use, in bytes.', () => process.memoryUsage().heapUsed);
    gauge('nodejs_heap_size_total_bytes', 'V8 heap committed, in bytes.', () => process.memoryUsage().heapTotal);
  }

  /** One plugin family: each scrape replaces its series with the textfile's. */
  private pluginFamily(name: string, type: 'counter' | 'gauge', help: string): void {
    const metrics = this;
    const collect = async function (this: Counter | Gauge): Promise<void> {
      this.reset();
      for (const s of (await metrics.pluginSeries()).filter((s) => s.name === name)) {
        if (this instanceof Counter) this.inc(s.labels, s.value);
        else this.set(s.labels, s.value);
      }
    };
    const opts = { name, help: `${help} (the plugin's textfile)`, labelNames: PLUGIN_LABELS, registers: [this.registry], collect };
    if (type === 'counter') new Counter(opts);
    else new Gauge(opts);
  }

  private cache: { at: number; series: Series[] } | undefined;
  /** Why the textfile was last not read (said once until it changes or the file is read again). */
  private refused: string | undefined;

  /**
   * The textfile's series, read once per scrape (every family's collect asks), then every opened network's error
   * series at 0 where the file has none (src/metrics.ts errorSeriesAtZero). Missing file: only those. The file is
   * read as the plugin reads it (src/effects/safe-open.ts: no symlink, no FIFO or device, within METRICS_MAX_BYTES):
   * a FIFO there left every scrape unanswered and SIGTERM hung, /dev/zero grew the agent without bound.
   */
  private async pluginSeries(): Promise<Series[]> {
    if (this.cache && Date.now() - this.cache.at < 500) return this.cache.series;
    const series = parseMetrics(this.pluginFile ? this.readPluginFile(this.pluginFile) : '');
    for (const network of this.networks)
      for (const z of errorSeriesAtZero(network)) if (!series.has(seriesKey(z.name, z.labels))) series.set(seriesKey(z.name, z.labels), z);
    this.cache = { at: Date.now(), series: [...series.values()] };
    return this.cache.series;
  }

  /**
   * The textfile's text; '' when missing, unreadable or not ours to read (said once, on the log). Its directory is
   * held no-follow and the file named through it, as the plugin writes it (src/metrics.ts updateMetricsFile): a
   * directory swapped for a symlink served another directory's file of the same name on /metrics.
   */
  private readPluginFile(file: string): string {
    const { dir: dirPath, name } = splitPath(file);
    let dir: HeldDir | undefined;
    try {
      try {
        dir = HeldDir.open(dirPath);
      } catch (e) {
        if (!isErrno(e, 'ENOENT')) throw e;
      }
      const text = (dir && readRegularSync(dir.at(name), METRICS_MAX_BYTES, file)) ?? '';
      this.refused = undefined;
      return text;
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e);
      if (why !== this.refused) this.log?.warn({ metricsFile: file, err: e }, "metrics: the plugin's textfile not read; its series are not served");
      this.refused = why;
      return '';
    } finally {
      dir?.close();
    }
  }

  async render(): Promise<{ contentType: string; body: string }> {
    this.cache = undefined;
    const body = await this.registry.metrics();
    // Histograms cannot be set from outside in prom-client: the plugin's are passed on as the textfile has them.
    const series = await this.pluginSeries();
    const histograms = series.length
      ? renderMetrics(new Map(series.map((s) => [seriesKey(s.name, s.labels), s])), (n) => FAMILIES[n]?.type === 'histogram')
      : '';
    return { contentType: this.registry.contentType, body: histograms.trim() ? `${body}${histograms}` : body };
  }
}
