// deploy/monitoring/ against the code and the DaemonSet, with the real promtool (Debian's `prometheus` package,
// scripts/install-deps.sh): the PrometheusRule's rules pass `promtool check rules`, every alert passes its
// `promtool test rules` case (test/fixtures/monitoring/alerts.test.yaml), every series an alert or a dashboard panel
// reads is one the shim exposes (or the agents' `up`, under the job the PodMonitor gives them), the shipped shim
// config writes the plugin's metrics where the agent reads them, the PodMonitor selects the DaemonSet's pods on its
// `metrics` port, and the agent's /metrics body (its own series, build_info, the plugin's textfile with the duration
// histogram) passes `promtool check metrics`. test/e2e/monitoring.test.ts runs all of it in a real Prometheus.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { execa } from 'execa';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { AgentMetrics } from '../../src/agent/metrics.js';
import { applyUpdate, FAMILIES, renderMetrics, type Update } from '../../src/metrics.js';
import { ErrorCode } from '../../src/cni/errors.js';
import { ShimSettingsSchema } from '../../src/cni/config.js';
import { parseShimConfig } from '../../src/cli/install.js';
import { daemonSet, renderKustomization as kustomizeBuild } from '../support/deploy/daemonset.js';

const ROOT = resolve(import.meta.dirname, '../..');
const RULES_TEST = join(ROOT, 'test/fixtures/monitoring/alerts.test.yaml');

type Obj = Record<string, any>;

const promtoolFound = (await execa('promtool', ['--version'], { reject: false })).exitCode === 0;
if (!promtoolFound && process.env.CI === 'true')
  throw new Error("CI must have promtool (scripts/install-deps.sh installs Debian's prometheus package)");
if (!promtoolFound) console.warn('deploy-monitoring: promtool not installed (scripts/install-deps.sh): its checks are skipped');

const yamlDocs = async (file: string): Promise<Obj[]> => {
  const docs = parseAllDocuments(await readFile(join(ROOT, file), 'utf8'));
  for (const d of docs) expect(d.errors, `${file}: ${String(d.errors)}`).toEqual([]);
  return docs.map((d) => d.toJS() as Obj);
};
const ruleSpec = async (): Promise<Obj> => {
  const [rule] = await yamlDocs('deploy/monitoring/prometheusrule.yaml');
  expect(rule).toMatchObject({ apiVersion: 'monitoring.coreos.com/v1', kind: 'PrometheusRule' });
  return rule!.spec as Obj;
};
const alerts = async (): Promise<Obj[]> => ((await ruleSpec()).groups as Obj[]).flatMap((g) => g.rules as Obj[]);

let dir = '';
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ipam-shim-monitoring-'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** promtool on the rules (the PrometheusRule's spec, as a plain rule file) and the unit tests beside them. */
async function promtool(spec: Obj, ...args: string[]): Promise<{ exitCode: number; out: string }> {
  await writeFile(join(dir, 'rules.yaml'), stringify(spec));
  await copyFile(RULES_TEST, join(dir, 'alerts.test.yaml'));
  const r = await execa('promtool', args, { cwd: dir, reject: false, all: true });
  return { exitCode: r.exitCode ?? -1, out: r.all ?? '' };
}

describe.skipIf(!promtoolFound)('deploy/monitoring/prometheusrule.yaml (promtool)', () => {
  it('passes `promtool check rules`', async () => {
    const spec = await ruleSpec();
    const r = await promtool(spec, 'check', 'rules', 'rules.yaml');
    expect(r.out).toContain(`SUCCESS: ${(await alerts()).length} rules found`);
    expect(r.exitCode, r.out).toBe(0);
  });

  it('every alert fires in its `promtool test rules` case and a healthy node raises none', async () => {
    const r = await promtool(await ruleSpec(), 'test', 'rules', 'alerts.test.yaml');
    expect(r.exitCode, r.out).toBe(0);
    expect(r.out).toContain('SUCCESS');
  });

  it('the cases can fail: a rule with another threshold or without its annotation is caught', async () => {
    const spec = await ruleSpec();
    const stalled = (spec.groups as Obj[]).flatMap((g) => g.rules as Obj[]).find((a) => a.alert === 'IpamShimAgentStalled')!;
    stalled.expr = String(stalled.expr).replace('> 300', '> 3000');
    const refused = (spec.groups as Obj[]).flatMap((g) => g.rules as Obj[]).find((a) => a.alert === 'IpamShimReservedAddressRefused')!;
    delete refused.annotations.summary;
    const r = await promtool(spec, 'test', 'rules', 'alerts.test.yaml');
    expect(r.exitCode).not.toBe(0);
    expect(r.out).toContain('alertname: IpamShimAgentStalled');
    expect(r.out).toContain('alertname: IpamShimReservedAddressRefused');
  });
});

describe('deploy/monitoring/prometheusrule.yaml against the code', () => {
  it('every alert has a firing case in alerts.test.yaml, with a severity and a summary and description', async () => {
    const cases = parse(await readFile(RULES_TEST, 'utf8')) as Obj;
    const firing = new Set(
      (cases.tests as Obj[]).flatMap((t) =>
        (t.alert_rule_test as Obj[]).filter((c) => (c.exp_alerts as Obj[]).length > 0).map((c) => c.alertname as string),
      ),
    );
    const all = await alerts();
    expect(all.length).toBeGreaterThanOrEqual(9);
    for (const a of all) {
      expect(firing, `a promtool case where ${a.alert} fires`).toContain(a.alert);
      expect(['critical', 'warning', 'info']).toContain(a.labels?.severity);
      expect(a.annotations?.summary, a.alert).toBeTruthy();
      expect(a.annotations?.description, a.alert).toBeTruthy();
    }
  });

  it("reads only series the shim exposes (the plugin textfile's families, the agent's registry), or its agents' up", async () => {
    const job = await agentJob();
    for (const a of await alerts()) {
      const names = seriesRead(String(a.expr));
      expect(names.length, a.alert).toBeGreaterThan(0);
      for (const n of names) expect(exposed(), `${a.alert} reads ${n}`).toContain(n);
      // `up` is every target's: only the agents' job is ours.
      for (const m of String(a.expr).matchAll(/\bup\{([^}]*)\}/g)) expect(m[1], a.alert).toBe(`job="${job}"`);
    }
  });

  it('has an alert for an agent that does not answer and for no agent at all, and a `for:` on the agent-errors alert', async () => {
    const job = await agentJob();
    const byName = new Map((await alerts()).map((a) => [a.alert as string, a]));
    expect(byName.get('IpamShimAgentDown')?.expr).toBe(`up{job="${job}"} == 0`);
    expect(byName.get('IpamShimAgentAbsent')?.expr).toBe(`absent(up{job="${job}"})`);
    // A new node's passes fail until cilium-agent writes its conflist (the startup probe allows 10 minutes).
    expect(byName.get('IpamShimAgentErrors')?.for).toBe('20m');
  });

  it('has an alert on a route capturing a reserved subnet (the firewall incident), naming the route, its gateway and the subnet', async () => {
    const byName = new Map((await alerts()).map((a) => [a.alert as string, a]));
    const captured = byName.get('IpamShimReservedSubnetRouteCaptured');
    expect(captured?.expr).toBe('ipam_shim_agent_reserved_routes > 0');
    expect(captured?.labels.severity).toBe('critical');
    for (const label of ['route', 'gateway', 'reserved']) expect(captured?.annotations.description).toContain(`{{ $labels.${label} }}`);
  });

  it("names the DaemonSet's log file, never the plugin's default one", async () => {
    const text = await readFile(join(ROOT, 'deploy/monitoring/prometheusrule.yaml'), 'utf8');
    const logFile = shippedSettings().logFile;
    expect(logFile).toBe('/var/log/ipam-shim/ipam-shim.log');
    expect(text).not.toMatch(/\/var\/log\/ipam-shim\.log/);
    expect(text).toContain(logFile);
  });
});

const exposed = (() => {
  let set: Set<string> | undefined;
  return () => (set ??= new Set(['up', ...Object.keys(FAMILIES), ...new AgentMetrics().registry.getMetricsAsArray().map((m) => m.name)]));
})();
/** The series an expression reads (histogram suffixes dropped). */
const seriesRead = (expr: string): string[] =>
  [...expr.matchAll(/\b(ipam_shim_[a-z0-9_]+|up|process_[a-z_]+)\b/g)].map((m) => m[1]!.replace(/_(bucket|sum|count)$/, ''));
/** deploy/shim-config.json as the plugin reads it (the ConfigMap's shim-config.json). */
const shippedSettings = () => ShimSettingsSchema.parse(parseShimConfig(readFileSync(join(ROOT, 'deploy/shim-config.json'), 'utf8')));
/** The job the PodMonitor gives the agents' series: the value of the pod label its jobLabel names. */
async function agentJob(): Promise<string> {
  const [pm] = await yamlDocs('deploy/monitoring/podmonitor.yaml');
  const { ds } = await daemonSet();
  const job = ds.spec.template.metadata.labels[pm!.spec.jobLabel as string] as string | undefined;
  expect(job, `the pods' ${pm!.spec.jobLabel} label`).toBeTruthy();
  return job!;
}

describe('deploy/shim-config.json: the plugin series every plugin alert reads exist', () => {
  it("sets metricsFile to a .prom file on a host path the agent's container mounts (the agent serves it at /metrics)", async () => {
    const { metricsFile } = shippedSettings();
    expect(metricsFile, 'metricsFile unset: the plugin writes no series, and every alert on them watches nothing').toBeTruthy();
    expect(metricsFile).toMatch(/\.prom$/);
    const { mounts } = await daemonSet();
    const mount = mounts.find((m) => m.volume.hostPath && metricsFile!.startsWith(`${m.mountPath}/`));
    expect(mount, `${metricsFile} under a hostPath mount of the agent`).toBeTruthy();
    // The same path on the host and in the container: the plugin (on the host) writes what the agent reads.
    expect(mount!.volume.hostPath.path).toBe(mount!.mountPath);
    expect(mount!.readOnly).toBe(false);
  });

  it("is not in a node-exporter textfile directory: the agent's /metrics is the one place (no series counted twice)", () => {
    const { metricsFile } = shippedSettings();
    for (const dir of ['/var/lib/node_exporter', '/var/lib/node-exporter', '/var/lib/prometheus/node-exporter'])
      expect(metricsFile!.startsWith(`${dir}/`), dir).toBe(false);
  });
});

/** How every panel names its data source: Grafana's `${datasource}` variable (Grafana's syntax, not a JS template). */
// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable reference, kept literally
const DATASOURCE = { type: 'prometheus', uid: '${datasource}' };

describe('deploy/monitoring/grafana-dashboard.json', () => {
  const dashboard = async (): Promise<Obj> => JSON.parse(await readFile(join(ROOT, 'deploy/monitoring/grafana-dashboard.json'), 'utf8')) as Obj;
  const panels = async () => ((await dashboard()).panels as Obj[]).filter((p) => p.type !== 'row');

  it("is a current Grafana's model with a datasource variable every panel and query uses", async () => {
    const d = await dashboard();
    expect(d.schemaVersion).toBeGreaterThanOrEqual(41);
    expect(d.uid).toBe('ipam-shim');
    const vars = d.templating.list as Obj[];
    expect(vars.find((v) => v.name === 'datasource')).toMatchObject({ type: 'datasource', query: 'prometheus' });
    for (const v of vars.filter((x) => x.type === 'query')) expect(v.datasource, v.name).toEqual(DATASOURCE);
    const all = d.panels as Obj[];
    expect(new Set(all.map((p) => p.id)).size).toBe(all.length);
    for (const p of await panels()) {
      expect(p.datasource, p.title).toEqual(DATASOURCE);
      expect((p.targets as Obj[]).length, p.title).toBeGreaterThan(0);
      for (const t of p.targets as Obj[]) expect(t.datasource, p.title).toEqual(DATASOURCE);
      expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24);
    }
  });

  it('reads only series the shim exposes, and shows calls, errors, p99, refusals, leaks, residue, passes, entry and up', async () => {
    const job = await agentJob();
    const read = new Set<string>();
    for (const p of await panels())
      for (const t of p.targets as Obj[]) {
        const names = seriesRead(String(t.expr));
        expect(names.length, p.title).toBeGreaterThan(0);
        for (const n of names) {
          expect(exposed(), `${p.title} reads ${n}`).toContain(n);
          read.add(n);
        }
        // `up` and process_* are every target's: only the agents' job is ours.
        for (const m of String(t.expr).matchAll(/\b(?:up|process_[a-z_]+)\{([^}]*)\}/g)) expect(m[1], p.title).toContain(`job="${job}"`);
      }
    for (const n of [
      'ipam_shim_invocations_total',
      'ipam_shim_errors_total',
      'ipam_shim_cni_call_duration_seconds',
      'ipam_shim_reserved_refusals_total',
      'ipam_shim_agent_gc_leaked',
      'ipam_shim_residue_removed_total',
      'ipam_shim_agent_residue_removed_total',
      'ipam_shim_agent_reconcile_passes_total',
      'ipam_shim_agent_errors_total',
      'ipam_shim_agent_conflist_entry_in_use',
      'ipam_shim_agent_reserved_routes',
      'up',
    ])
      expect(read, n).toContain(n);
  });
});

describe('deploy/monitoring/podmonitor.yaml', () => {
  it("selects the DaemonSet's pods in their namespace and scrapes the container port named in it", async () => {
    const [pm] = await yamlDocs('deploy/monitoring/podmonitor.yaml');
    const ds = (await yamlDocs('deploy/daemonset.yaml')).find((m) => m.kind === 'DaemonSet')!;
    expect(pm).toMatchObject({ apiVersion: 'monitoring.coreos.com/v1', kind: 'PodMonitor' });
    expect(pm!.spec.namespaceSelector.matchNames).toEqual([ds.metadata.namespace]);
    // The job the rules and the dashboard read (up{job="ipam-shim"}): a label every agent pod carries.
    expect(ds.spec.template.metadata.labels[pm!.spec.jobLabel]).toBe('ipam-shim');
    expect(ds.spec.template.metadata.labels).toMatchObject(pm!.spec.selector.matchLabels);
    const ports = (ds.spec.template.spec.containers as Obj[]).flatMap((c) => (c.ports ?? []) as Obj[]);
    for (const ep of pm!.spec.podMetricsEndpoints as Obj[]) {
      expect(ports.map((p) => p.name)).toContain(ep.port);
      expect(ep.path).toBe('/metrics');
    }
  });
});

describe.skipIf(!promtoolFound)("the agent's /metrics body (promtool check metrics)", () => {
  it('holds build_info and the plugin histogram passed on from the textfile, and is valid exposition text', async () => {
    const base: Update = {
      network: 'cilium',
      verb: 'ADD',
      code: 0,
      counts: { residueRules: 0, residueNeighbours: 0, gcReleased: 0 },
      ledger: { attachments: 2, agentIps: 1 },
      nowSeconds: 1_700_000_000,
    };
    let series = applyUpdate(new Map(), { ...base, durationSeconds: 0.12 });
    series = applyUpdate(series, { ...base, verb: 'DEL', durationSeconds: 0.07 });
    series = applyUpdate(series, { ...base, code: ErrorCode.ReservedAddress, durationSeconds: 3.5 });
    const textfile = join(dir, 'ipam-shim.prom');
    await writeFile(textfile, renderMetrics(series));
    const agent = new AgentMetrics();
    agent.pluginFile = textfile;
    const { body } = await agent.render();
    expect(body).toMatch(/^ipam_shim_build_info\{version="[^"]+",node="[^"]+"\} 1$/m);
    expect(body).toMatch(/^ipam_shim_cni_call_duration_seconds_bucket\{le="\+Inf",network="cilium",verb="ADD"\} 2$/m);
    expect(body).toMatch(/^ipam_shim_invocations_total\{network="cilium",verb="ADD"\} 2$/m);
    // Each family once: HELP/TYPE not repeated by passing the textfile on.
    for (const name of Object.keys(FAMILIES)) expect(body.match(new RegExp(`^# TYPE ${name} `, 'gm')) ?? [], name).toHaveLength(1);
    const r = await execa('promtool', ['check', 'metrics'], { input: body, reject: false, all: true });
    expect(r.exitCode, r.all).toBe(0);
  });
});

// Issue 43, item 5: monitoring an on-call engineer can use.
const RUNBOOKS = 'https://github.com/example/ipam-shim/blob/main/docs/runbooks.md#';
/** GitHub's anchor for a heading: lower case, spaces to '-', punctuation but '-' and '_' dropped. */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
const ksmSpec = async (): Promise<Obj> => {
  const [rule] = await yamlDocs('deploy/monitoring/prometheusrule-kube-state-metrics.yaml');
  expect(rule).toMatchObject({ apiVersion: 'monitoring.coreos.com/v1', kind: 'PrometheusRule' });
  return rule!.spec as Obj;
};
const everyAlert = async (): Promise<Obj[]> => [...(await alerts()), ...((await ksmSpec()).groups as Obj[]).flatMap((g) => g.rules as Obj[])];

describe('runbooks: every alert links a section of docs/runbooks.md that says what to do', () => {
  it('each runbook_url is docs/runbooks.md#<its section>, the section exists with a **Do:**, and no section is orphaned', async () => {
    const md = await readFile(join(ROOT, 'docs/runbooks.md'), 'utf8');
    const sections = new Map<string, string>();
    const parts = md.split(/^## /m).slice(1);
    for (const part of parts) sections.set(slug(part.split('\n')[0]!), part);
    const all = await everyAlert();
    expect(all.length).toBeGreaterThanOrEqual(18);
    for (const a of all) {
      const url = String(a.annotations?.runbook_url ?? '');
      expect(url, a.alert).toBe(`${RUNBOOKS}${slug(a.alert)}`);
      const section = sections.get(url.slice(RUNBOOKS.length));
      expect(section, `docs/runbooks.md has "## ${a.alert}"`).toBeTruthy();
      expect(section, a.alert).toMatch(/\*\*Means:\*\*/);
      expect(section, a.alert).toMatch(/\*\*Do[^*]*:\*\*/);
    }
    expect([...sections.keys()].sort()).toEqual(all.map((a) => slug(a.alert)).sort());
  });

  it("names the node ({{ $labels.node }}), never the target's IP:9740 ({{ $labels.instance }})", async () => {
    const text = await readFile(join(ROOT, 'deploy/monitoring/prometheusrule.yaml'), 'utf8');
    expect(text).not.toContain('$labels.instance');
    // Alerts about no agent at all, or about the DaemonSet, have no node to name.
    const NO_NODE = new Set(['IpamShimAgentAbsent', 'IpamShimAgentPodsUnavailable']);
    for (const a of await everyAlert()) {
      if (NO_NODE.has(a.alert)) continue;
      expect(a.annotations.description, a.alert).toContain('{{ $labels.node }}');
    }
  });

  it("the PodMonitor gives every series the node name (relabeled from the pod's node), in both API groups alike", async () => {
    const [pm] = await yamlDocs('deploy/monitoring/podmonitor.yaml');
    const [az] = await yamlDocs('deploy/monitoring/azure/podmonitor.yaml');
    for (const ep of pm!.spec.podMetricsEndpoints as Obj[])
      expect(ep.relabelings).toContainEqual({ sourceLabels: ['__meta_kubernetes_pod_node_name'], targetLabel: 'node', action: 'replace' });
    expect(az).toMatchObject({ apiVersion: 'azmonitoring.coreos.com/v1', kind: 'PodMonitor' });
    expect(az!.spec).toEqual(pm!.spec);
    expect(az!.metadata).toEqual(pm!.metadata);
  });
});

describe('deploy/monitoring/ renders with one command (kubectl kustomize)', () => {
  it('deploy/monitoring/: the PodMonitor, both PrometheusRules and the dashboard ConfigMap with the sidecar label', async () => {
    const objects = await kustomizeBuild('deploy/monitoring');
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'ConfigMap/ipam-shim-grafana-dashboard',
      'PodMonitor/ipam-shim',
      'PrometheusRule/ipam-shim',
      'PrometheusRule/ipam-shim-kube-state-metrics',
    ]);
    for (const o of objects) {
      expect(o.metadata.namespace, o.kind).toBe('kube-system');
      // The `labels` stanza reaches every object (where a Prometheus selector label goes).
      expect(o.metadata.labels, o.kind).toMatchObject({ 'app.kubernetes.io/part-of': 'ipam-shim', 'app.kubernetes.io/component': 'monitoring' });
    }
    const cm = objects.find((o) => o.kind === 'ConfigMap')!;
    expect(cm.metadata.labels.grafana_dashboard).toBe('1');
    expect(cm.data['ipam-shim.json']).toBe(await readFile(join(ROOT, 'deploy/monitoring/grafana-dashboard.json'), 'utf8'));
    // Not into the pod selector: the PodMonitor still selects the DaemonSet's pods by their own label alone.
    const [pm] = await yamlDocs('deploy/monitoring/podmonitor.yaml');
    expect(objects.find((o) => o.kind === 'PodMonitor')!.spec.selector).toEqual(pm!.spec.selector);
  });

  it("deploy/monitoring/azure/: the azmonitoring.coreos.com PodMonitor; its rules file is the PrometheusRules' groups", async () => {
    const objects = await kustomizeBuild('deploy/monitoring/azure');
    expect(objects.map((o) => `${o.apiVersion} ${o.kind}/${o.metadata.name}`)).toEqual(['azmonitoring.coreos.com/v1 PodMonitor/ipam-shim']);
    const [rules] = await yamlDocs('deploy/monitoring/azure/ipam-shim.rules.yaml');
    expect(rules!.groups).toEqual([...((await ruleSpec()).groups as Obj[]), ...((await ksmSpec()).groups as Obj[])]);
  });
});

describe.skipIf(!promtoolFound)('the other rule files (promtool)', () => {
  it('prometheusrule-kube-state-metrics.yaml passes check rules and its `promtool test rules` case', async () => {
    await writeFile(join(dir, 'ksm-rules.yaml'), stringify(await ksmSpec()));
    await copyFile(join(ROOT, 'test/fixtures/monitoring/kube-state-metrics.test.yaml'), join(dir, 'kube-state-metrics.test.yaml'));
    const check = await execa('promtool', ['check', 'rules', 'ksm-rules.yaml'], { cwd: dir, reject: false, all: true });
    expect(check.exitCode, check.all).toBe(0);
    const t = await execa('promtool', ['test', 'rules', 'kube-state-metrics.test.yaml'], { cwd: dir, reject: false, all: true });
    expect(t.exitCode, t.all).toBe(0);
  });

  it('the Azure rules file passes check rules (what az-prom-rules-converter reads)', async () => {
    const r = await execa('promtool', ['check', 'rules', join(ROOT, 'deploy/monitoring/azure/ipam-shim.rules.yaml')], { reject: false, all: true });
    expect(r.exitCode, r.all).toBe(0);
    expect(r.all).toContain(`SUCCESS: ${(await everyAlert()).length} rules found`);
  });
});

describe('the dashboard at fleet scale', () => {
  const dashboard = async (): Promise<Obj> => JSON.parse(await readFile(join(ROOT, 'deploy/monitoring/grafana-dashboard.json'), 'utf8')) as Obj;
  const targets = (d: Obj) =>
    (d.panels as Obj[])
      .filter((p) => p.type !== 'row')
      .flatMap((p) => (p.targets as Obj[]).map((t) => ({ p, expr: String(t.expr), legend: String(t.legendFormat ?? '') })));

  it('no stat panel draws a box per node: each of its queries is one aggregated value', async () => {
    const d = await dashboard();
    const stats = (d.panels as Obj[]).filter((p) => p.type === 'stat');
    expect(stats.length).toBeGreaterThanOrEqual(4);
    for (const p of stats)
      for (const t of p.targets as Obj[]) {
        const expr = String(t.expr);
        expect(expr, p.title).toMatch(/^(sum|count|max|min|avg)\(/);
        expect(expr, p.title).not.toMatch(/\b(by|without) \(/);
      }
  });

  it('a per-node time series shows at most 10 nodes (topk), the routes panel (only nodes with a route) aside', async () => {
    for (const { p, expr } of targets(await dashboard()).filter(({ p }) => p.type === 'timeseries')) {
      const perNode = /\bby \([^)]*\bnode\b/.test(expr) || !/^(sum|count|max|min|avg|quantile|histogram_quantile|topk)\b/.test(expr);
      if (perNode && !/reserved_routes/.test(expr)) expect(expr, p.title).toMatch(/^topk\(10, /);
    }
  });

  it('nodes are named by node, not instance; a version table, a per-node table, unseen pods, cache, agent RSS and fds', async () => {
    const d = await dashboard();
    const all = targets(d);
    for (const { p, expr, legend } of all) {
      expect(expr, p.title).not.toContain('instance');
      expect(legend, p.title).not.toContain('instance');
    }
    const vars = (d.templating.list as Obj[]).map((v) => v.name);
    expect(vars).toEqual(['datasource', 'job', 'node']);
    const tables = (d.panels as Obj[]).filter((p) => p.type === 'table');
    expect(tables.some((p) => (p.targets as Obj[]).some((t) => /count by \(version\) \(ipam_shim_build_info/.test(t.expr)))).toBe(true);
    expect(tables.some((p) => (p.targets as Obj[]).every((t) => /by \(node\)/.test(t.expr)))).toBe(true);
    const read = new Set(all.flatMap(({ expr }) => seriesRead(expr)));
    for (const n of [
      'ipam_shim_agent_unseen_pods',
      'ipam_shim_agent_runtime_cache_readable',
      'process_resident_memory_bytes',
      'process_open_fds',
      'ipam_shim_build_info',
    ])
      expect(read, n).toContain(n);
  });
});
