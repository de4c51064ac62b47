// The small facts with one owner each (issue 42, item 5): every caller asked, one answer.
import { describe, expect, it } from 'vitest';
import { agentCommand, parseAgentArgs } from '../../src/cli/agent.js';
import { gcCommand } from '../../src/cli/gc.js';
import { doctorCommand } from '../../src/cli/doctor.js';
import { FIXES } from '../../src/fix-list/registry.js';
import { readCniEnv } from '../../src/cni/env.js';
import { convertResult } from '../../src/cni/result.js';
import { hostPrevResult } from '../../src/effects/check-proof.js';
import { familyOf } from '../../src/net/ip.js';
import { attachmentKey, attachmentOfKey, attachmentOfRecord } from '../../src/ledger/key.js';
import { cmdAdd } from '../../src/verbs/add.js';
import { fakes, ipamConf, verbContext } from '../support/doubles/verb-context.js';
import { warm, warmRun } from '../../src/warm.js';
import { DEFAULT_CNI_PATH, selectedCniPath } from '../../src/network/open.js';
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

describe('the CNI path: one reading (cniPathOf)', () => {
  it("the plugin's CNI_PATH, an operator command's CNI_PATH and its --cni-path read alike", () => {
    const text = '/opt/cni/bin::/usr/lib/cni:';
    const env = readCniEnv({ CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'c1', CNI_NETNS: '/run/netns/c1', CNI_IFNAME: 'eth0', CNI_PATH: text });
    expect(env.path).toEqual(['/opt/cni/bin', '/usr/lib/cni']);
    expect(selectedCniPath({}, { CNI_PATH: text })).toEqual(env.path);
    expect(selectedCniPath({ cniPath: text }, { CNI_PATH: '/elsewhere' })).toEqual(env.path);
    expect(selectedCniPath({}, {})).toEqual([DEFAULT_CNI_PATH]);
  });
});

describe("the node's tools on the ADD path: every call bounded", () => {
  it('the warm-up ADD (every fix, residue cleanup included) starts no node tool without a time bound', async () => {
    warmRun.calls.length = 0;
    await warm();
    const tools = warmRun.calls.filter((c) => !c.file.includes('/'));
    expect(tools.map((c) => c.file)).toEqual(expect.arrayContaining(['ip', 'ebtables']));
    expect(tools.filter((c) => c.timeoutMs === undefined).map((c) => `${c.file} ${c.args.join(' ')}`)).toEqual([]);
  });
});

describe("an address's family: one rule (familyOf)", () => {
  it('a 0.4.0 result, the CHECK proof and the residue targets name each address by the same family', () => {
    const ips = ['10.0.0.5', 'fd00::5', '10.0.0.6/24', 'FD00:0::6/64'];
    expect(ips.map(familyOf)).toEqual([4, 6, 4, 6]);
    const converted = convertResult({ ips: ips.map((address) => ({ address })) }, '0.4.0');
    expect(converted.ips?.map((i) => i.version)).toEqual(['4', '6', '4', '6']);
    const proof = hostPrevResult(['10.0.0.5', 'fd00::5'], '0.4.0') as { ips: Array<{ address: string; version: string }> };
    expect(proof.ips).toEqual([
      { address: '10.0.0.5/32', version: '4' },
      { address: 'fd00::5/128', version: '6' },
    ]);
  });
});

describe("a record's attachment: one helper (attachmentOfRecord)", () => {
  it("strips a record to its attachment, which the ledger's key spells back", async () => {
    const f = fakes();
    await cmdAdd(verbContext('ADD', ipamConf(), f));
    const [rec] = (await f.ledger.list()).records;
    const att = attachmentOfRecord(rec!);
    expect(att).toEqual({ containerID: 'c1', ifname: 'eth0' });
    expect(attachmentOfKey(attachmentKey(att))).toEqual(att);
  });
});

describe("doctor's and the agent's summaries: from the registry", () => {
  it('name every fix with doctor checks, and every fix with an agent step', () => {
    for (const f of FIXES) {
      if (f.doctor) expect(doctorCommand.summary).toContain(f.about);
      if (f.agent) expect(agentCommand.summary).toContain(f.about);
    }
  });
});
