// The small facts with one owner each (issue 42, item 5): every caller asked, one answer.
import { describe, expect, it } from 'vitest';
import { agentCommand, parseAgentArgs } from '../../src/cli/agent.js';
import { gcCommand } from '../../src/cli/gc.js';
import { DEFAULT_CACHE_DIR, DEFAULT_GC_GRACE_S } from '../../src/gc/from-cache.js';

describe("the runtime's cache root and GC's grace: one default each", () => {
  it('the agent and `ipam-shim gc` default to the same root and grace, and say so in their usage', () => {
    expect(parseAgentArgs([]).settings.gc).toMatchObject({ cacheDir: DEFAULT_CACHE_DIR, graceMs: DEFAULT_GC_GRACE_S * 1000 });
    for (const { usage } of [agentCommand, gcCommand]) {
      expect(usage).toContain(`[--cache-dir ${DEFAULT_CACHE_DIR}]`);
      expect(usage).toContain(`[--grace-seconds ${DEFAULT_GC_GRACE_S}]`);
    }
  });
});
