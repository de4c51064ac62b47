// The probe rewrite's node facts have one owner (src/probe-rewrite/node.ts probeFacts), and so does a probe address
// (ruleset.ts plainIPv6): ADD's and the agent's ensure, and doctor's and `probe-rewrite status`'s assessment, read
// the same node and must reach the same verdict; the CLI's flags and the config's settings take the same addresses.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseNetConf } from '../../src/cni/config.js';
import { scriptedRun } from '../../src/scripted/scripted-run.js';
import type { RunResult } from '../../src/effects/exec.js';
import { silentLogger } from '../../src/log.js';
import { assessProbeRewrite } from '../../src/probe-rewrite/assess.js';
import { probeRewriteCommand } from '../../src/probe-rewrite/cli.js';
import { ensureProbeRewriteIfDue, type ProbeOutcome } from '../../src/probe-rewrite/ensure.js';
import { checkProbeSettings } from '../../src/probe-rewrite/ruleset.js';
import type { ProbeVerdict } from '../../src/probe-rewrite/decide.js';
import { UsageError } from '../../src/contract/command.js';
import { ipamConf } from '../support/doubles/verb-context.js';

const fixture = (name: string) => readFileSync(new URL(`../fixtures/nft/${name}`, import.meta.url), 'utf8');
const LIST = 'nft -j list table ip6 azureSLBProbe';

type Answer = string | Partial<RunResult> | undefined;
const TABLES: Record<string, Answer> = {
  matching: fixture('list-table-after-probes.json'),
  drifted: fixture('list-table-drifted.json'),
  absent: { stderr: fixture('list-table-absent.stderr'), exitCode: 1 },
  'nft missing': undefined,
};
const UPLINKS: Record<string, Record<string, Answer>> = {
  'default route': { 'ip -j -6 route show default': fixture('ip-6-route-default.json') },
  none: { 'ip -j -6 route show default': '[]\n', 'ip -j route show default': '[]\n' },
};
const BPF: Record<string, Record<string, Answer>> = {
  'a BPF handler': {
    'tc -j qdisc show dev eth0': fixture('tc-qdisc-clsact.json'),
    'tc -j filter show dev eth0 ingress': fixture('tc-filter-ingress-ebpf.json'),
  },
  'no BPF handler': { 'tc -j qdisc show dev eth0': fixture('tc-qdisc-plain.json') },
};

/**
 * The verdicts each of ensure's outcomes agrees with (ADD's side of the same decision). ensure looks for a BPF handler
 * only when it would act, so a matching table it leaves in place may be one assess calls handled by BPF.
 */
const VERDICTS_OF: Record<ProbeOutcome, ProbeVerdict[]> = {
  off: ['not-needed'],
  'in-place': ['ok', 'not-needed', 'handled-by-bpf'],
  bpf: ['handled-by-bpf'],
  ensured: ['absent', 'drifted'],
  failed: ['nft-unavailable', 'no-uplink'],
};

const cases = Object.keys(TABLES).flatMap((table) =>
  Object.keys(UPLINKS).flatMap((uplink) => Object.keys(BPF).map((bpf) => [table, uplink, bpf] as const)),
);

describe('the probe rewrite: ensure (ADD, agent) and assess (doctor, status) judge one node alike', () => {
  it.each(cases)('table %s, uplink %s, %s', async (table, uplink, bpf) => {
    const script: Record<string, Answer> = { [LIST]: TABLES[table], 'nft -f -': '', ...UPLINKS[uplink], ...BPF[bpf] };
    const run = () => scriptedRun((file, args) => script[[file, ...args].join(' ')]);
    const conf = parseNetConf(ipamConf({ ipv6ProbeRewrite: 'auto' }));
    const outcome = await ensureProbeRewriteIfDue({ conf, run: run(), log: silentLogger });
    const { verdict } = await assessProbeRewrite(run(), { settings: conf.settings });
    expect(VERDICTS_OF[outcome], `ensure: ${outcome}, assess: ${verdict}`).toContain(verdict);
  });
});

describe('a probe address: the CLI flags and the settings take the same ones', () => {
  const flagTakes = async (v: string): Promise<boolean> => {
    const ctx = { run: scriptedRun(() => undefined), env: {} };
    try {
      await probeRewriteCommand.run(['status', '--conf-dir', '/nonexistent/probe-facts', '--probe-source', v], ctx);
    } catch (e) {
      if (e instanceof UsageError && e.message.startsWith('--probe-source')) return false;
    }
    return true;
  };
  const settingTakes = (v: string): boolean => {
    try {
      checkProbeSettings({ probeSource: v });
      return true;
    } catch {
      return false;
    }
  };
  it.each([
    'fe80::1234:5678:9abc',
    'FE80:0:0::1',
    '2603:1062:0:1:fe80:1234:5678:9abc',
    '::',
    '::10.0.0.1',
    '::ffff:10.0.0.1',
    'fe80::1%eth0',
    'fe80::1/64',
    '10.0.0.1',
    'banana',
    ' fe80::1',
  ])('%j', async (v) => {
    expect({ flag: await flagTakes(v) }).toEqual({ flag: settingTakes(v) });
  });
});
