// The fix registry (src/fix-list/registry.ts) is the one place ADD, CHECK, STATUS, the agent, doctor, the metrics and
// the warm-up learn which fixes exist. These tests hold its contract: what a fix declares is what every loop sees.
import { describe, expect, it } from 'vitest';
import { FIXES } from '../../src/fix-list/registry.js';
import { FAMILIES, applyUpdate, renderMetrics } from '../../src/metrics.js';
import { AgentMetrics } from '../../src/agent/metrics.js';
import { doctorChecks } from '../../src/doctor/index.js';

describe('fix registry', () => {
  it('names each fix, agent step, doctor check and metric family once', async () => {
    const names = FIXES.map((f) => f.name);
    expect(new Set(names).size).toBe(names.length);
    const steps = FIXES.flatMap((f) => (f.agent ? [f.agent.step] : []));
    expect(new Set([...steps, 'network', 'gc', 'pods']).size).toBe(steps.length + 3);
    const checks = (await doctorChecks()).map((c) => c.name);
    expect(new Set(checks).size).toBe(checks.length);
    const families = FIXES.flatMap((f) => Object.keys(f.metrics?.families ?? {}));
    expect(new Set(families).size).toBe(families.length);
  });

  it("puts every fix's doctor checks in doctor's list", async () => {
    const checks = new Set((await doctorChecks()).map((c) => c.name));
    for (const fix of FIXES) for (const c of (await fix.doctor?.()) ?? []) expect(checks, `${fix.name}: ${c.name}`).toContain(c.name);
  });

  it("writes every fix's tallies into the textfile from the first call, at 0, under the fix's own families", () => {
    const text = renderMetrics(applyUpdate(new Map(), { network: 'n', verb: 'ADD', code: 0, counts: {}, nowSeconds: 0 }));
    for (const fix of FIXES) {
      for (const t of fix.metrics?.tallies ?? []) {
        expect(Object.keys(fix.metrics!.families), `${fix.name}: ${t.family} is its own`).toContain(t.family);
        expect(FAMILIES[t.family], t.family).toBeDefined();
        const labels = Object.entries({ network: 'n', ...t.labels })
          .sort(([a], [b]) => (a < b ? -1 : 1))
          .map(([k, v]) => `${k}="${v}"`)
          .join(',');
        expect(text).toContain(`${t.family}{${labels}} 0\n`);
      }
    }
  });

  it("counts a fix's tally where the fix says, and its outcome tally per finished call", () => {
    const series = applyUpdate(new Map(), { network: 'n', verb: 'ADD', code: 100, counts: { residueRules: 2 }, nowSeconds: 0 });
    const value = (key: string) => series.get(key)?.value;
    expect(value('ipam_shim_residue_removed_total{kind="ebtables",network="n"}')).toBe(2);
    expect(value('ipam_shim_reserved_refusals_total{network="n"}')).toBe(1);
  });

  it("registers every fix's agent series with the agent, and hands out only declared ones", () => {
    const m = new AgentMetrics();
    const registered = new Set(m.registry.getMetricsAsArray().map((x) => x.name));
    for (const fam of FIXES.flatMap((f) => f.agent?.families ?? [])) {
      expect(registered, fam.name).toContain(fam.name);
      expect(() => (fam.type === 'counter' ? m.counter(fam.name) : m.gauge(fam.name))).not.toThrow();
    }
    expect(() => m.counter('ipam_shim_agent_nobody_declared_total')).toThrow(/no agent counter/);
  });

  it('loads every agent step', async () => {
    for (const fix of FIXES) if (fix.agent) expect(typeof (await fix.agent.load(FIXES)).reconcile, fix.name).toBe('function');
  });
});
