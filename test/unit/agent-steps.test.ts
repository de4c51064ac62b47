// Every step of the agent's pass has one shape (issue 35 part 4): gc, pods and each fix's step are AgentStepEntry
// values (src/agent/steps.ts) that declare their own series, and the pass runner (src/agent/reconcile.ts) names none
// of them.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { AgentMetrics } from '../../src/agent/metrics.js';
import { STEPS } from '../../src/agent/steps.js';
import { FIXES } from '../../src/fix-list/registry.js';

describe('agent steps', () => {
  it('runs gc, pods, then every fix step in registry order, each with its own series', async () => {
    expect(STEPS.map((s) => s.step)).toEqual(['gc', 'pods', ...FIXES.flatMap((f) => (f.agent ? [f.agent.step] : []))]);
    const families = (step: string) => STEPS.find((s) => s.step === step)!.families.map((f) => f.name);
    expect(families('gc')).toEqual([
      'ipam_shim_agent_gc_released_total',
      'ipam_shim_agent_gc_confirmed_released_total',
      'ipam_shim_agent_gc_awaiting_confirmation',
      'ipam_shim_agent_gc_forgotten_total',
      'ipam_shim_agent_gc_queued_total',
      'ipam_shim_agent_gc_withheld',
      'ipam_shim_agent_gc_leaked',
    ]);
    expect(families('pods')).toEqual(['ipam_shim_agent_runtime_cache_readable', 'ipam_shim_agent_runtime_pods', 'ipam_shim_agent_unseen_pods']);
    const m = new AgentMetrics();
    const registered = new Set(m.registry.getMetricsAsArray().map((x) => x.name));
    for (const s of STEPS) {
      expect(typeof (await s.load(FIXES)).reconcile, s.step).toBe('function');
      for (const fam of s.families) {
        expect(registered, fam.name).toContain(fam.name);
        expect(() => (fam.type === 'counter' ? m.counter(fam.name) : m.gauge(fam.name))).not.toThrow();
      }
    }
    // Every step's error series exists at 0 from the start, `network` (the runner's own) included.
    const errors = await m.registry.getSingleMetric('ipam_shim_agent_errors_total')!.get();
    expect(errors.values.map((v) => v.labels.step)).toEqual(['network', ...STEPS.map((s) => s.step)]);
  });

  it('the pass runner names no step and no series of one', () => {
    const runner = readFileSync(new URL('../../src/agent/reconcile.ts', import.meta.url), 'utf8').replace(/^\s*(\/\/|\*|\/\*\*).*$/gm, '');
    for (const s of STEPS) expect(runner, s.step).not.toContain(`'${s.step}'`);
    expect(runner).not.toMatch(/ipam_shim_agent_(gc|runtime|unseen)/);
    expect(runner).not.toMatch(/gcFromCache|viewPods/);
  });
});
