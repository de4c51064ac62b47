import { describe, expect, it } from 'vitest';
import { needsProbe, planGc } from '../../src/gc/plan.js';
import type { LedgerRecord, Liveness } from '../../src/ledger/record.js';

const rec = (containerID: string, over: Partial<LedgerRecord> = {}): LedgerRecord => ({
  v: 1,
  containerID,
  ifname: 'eth0',
  network: 'n',
  owner: 'pod',
  state: 'attached',
  placement: 'chained',
  ips: ['10.0.0.1'],
  netns: `/run/netns/${containerID}`,
  createdAt: '2026-01-01T00:00:00Z',
  updatedAt: '2026-01-01T00:00:00Z',
  cniArgs: '',
  ...over,
});
const now = Date.parse('2026-06-01T00:00:00Z');

describe('planGc', () => {
  const records = [
    rec('valid'),
    rec('cilium-agent-health', { owner: 'agent' }),
    rec('alive'),
    rec('dead'),
    rec('unknown'),
    rec('intent', { state: 'intent', ips: [] }),
  ];
  const liveness = new Map<string, Liveness>([
    ['alive:eth0', 'alive'],
    ['dead:eth0', 'dead'],
    ['intent:eth0', 'dead'],
  ]);
  const plan = planGc({
    records,
    valid: [
      { containerID: 'valid', ifname: 'eth0' },
      { containerID: 'elsewhere', ifname: 'eth0' },
    ],
    liveness,
    now,
    graceMs: 0,
  });

  it('keeps valid, agent, alive and unknowable attachments; releases only proven-dead ones', () => {
    expect(plan.kept.map((k) => [k.record.containerID, k.reason])).toEqual([
      ['valid', 'valid'],
      ['cilium-agent-health', 'agent'],
      ['alive', 'alive'],
      ['unknown', 'unknown'],
    ]);
    expect(plan.release.map((r) => r.record.containerID)).toEqual(['dead', 'intent']);
  });
  it("passes the runtime's list plus everything kept to the delegate", () => {
    expect(plan.keep.map((a) => a.containerID).sort()).toEqual(['alive', 'cilium-agent-health', 'elsewhere', 'unknown', 'valid']);
  });
  it('keeps records younger than the grace period whatever their liveness', () => {
    const fresh = rec('fresh', { updatedAt: new Date(now - 5_000).toISOString() });
    const p = planGc({ records: [fresh], valid: [], liveness: new Map([['fresh:eth0', 'dead']]), now, graceMs: 60_000 });
    expect(p.kept[0]?.reason).toBe('recent');
    expect(p.release).toEqual([]);
  });
  it('probes only what is neither valid nor the agent', () => {
    expect(needsProbe(records, [{ containerID: 'valid', ifname: 'eth0' }]).map((r) => r.containerID)).toEqual(['alive', 'dead', 'unknown', 'intent']);
  });
  it('matches attachments by container ID and ifname together', () => {
    const p = planGc({
      records: [rec('c', { ifname: 'net1' })],
      valid: [{ containerID: 'c', ifname: 'eth0' }],
      liveness: new Map([['c:net1', 'dead']]),
      now,
      graceMs: 0,
    });
    expect(p.release).toHaveLength(1);
  });
});

describe('probeAttachment (netns liveness)', () => {
  it('a missing netns path is proof of death only when its directory is in sight (another mount namespace proves nothing)', async () => {
    const { probeAttachment } = await import('../../src/effects/netns-probe.js');
    const noRun = (() => Promise.reject(new Error('no program runs for a missing path'))) as never;
    const { mkdtemp, rm } = await import('node:fs/promises');
    const { join } = await import('node:path');
    const dir = await mkdtemp(join((await import('node:os')).tmpdir(), 'netns-probe-'));
    try {
      expect(await probeAttachment(noRun, { netns: join(dir, 'cni-gone'), ips: ['10.0.0.1'] })).toBe('dead');
      expect(await probeAttachment(noRun, { netns: join(dir, 'not-mounted', 'cni-1234'), ips: ['10.0.0.1'] })).toBe('unknown');
    } finally {
      await rm(dir, { recursive: true });
    }
  });
});

describe('planGc: the identity a release DELs under (issue 47)', () => {
  const pod = (name: string) => `IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=${name};K8S_POD_INFRA_CONTAINER_ID=x`;
  const dead = new Map<string, Liveness>();
  const plan = (records: LedgerRecord[], valid: string[] = []) => {
    for (const r of records) dead.set(`${r.containerID}:eth0`, 'dead');
    return planGc({ records, valid: valid.map((containerID) => ({ containerID, ifname: 'eth0' })), liveness: dead, now, graceMs: 0 });
  };

  it("withholds an older shim's record that names no pod: a DEL naming none would release the empty key's addresses", () => {
    const old = rec('old', { cniArgs: undefined });
    const p = plan([old, rec('new', { cniArgs: pod('web-1') })]);
    expect(p.release.map((r) => r.record.containerID)).toEqual(['new']);
    expect(p.withheld).toMatchObject([{ record: { containerID: 'old' }, why: 'no-identity' }]);
    expect(p.withheld[0]!.fix).toMatch(/K8S_POD_NAME/);
    // Not released, so the delegate's own GC must keep it too.
    expect(p.keep.map((a) => a.containerID)).toContain('old');
  });

  it("releases an older shim's record that names its pod (the identity rebuilt from `pod`)", () => {
    const old = rec('old', { cniArgs: undefined, pod: { namespace: 'default', name: 'web-1' } });
    expect(plan([old]).release.map((r) => r.record.containerID)).toEqual(['old']);
  });

  it("withholds a leak whose pod (namespace/name) is also a kept attachment's: a StatefulSet pod re-created under its name", () => {
    const p = plan([rec('web-0-old', { cniArgs: pod('web-0') }), rec('web-0-new', { cniArgs: pod('web-0') })], ['web-0-new']);
    expect(p.release).toEqual([]);
    expect(p.withheld).toMatchObject([{ record: { containerID: 'web-0-old' }, why: 'shared-identity' }]);
  });

  it("withholds a leak whose DEL names no pod while an older shim's agent-ip record (allocated naming none) is kept", () => {
    const legacyAgent = rec('cilium-agent-health', { owner: 'agent', placement: 'cli', cniArgs: undefined });
    const p = plan([legacyAgent, rec('nameless', { cniArgs: '' }), rec('named', { cniArgs: pod('web-3') })]);
    expect(p.release.map((r) => r.record.containerID)).toEqual(['named']);
    expect(p.withheld).toMatchObject([{ record: { containerID: 'nameless' }, why: 'shared-identity' }]);
    expect(p.withheld[0]!.fix).toContain('agent-ip release --owner');
  });

  it('without a delegate (a release only forgets the record) nothing is withheld', () => {
    const p = planGc({
      records: [rec('old', { cniArgs: undefined })],
      valid: [],
      liveness: new Map([['old:eth0', 'dead']]),
      now,
      graceMs: 0,
      delegateDels: false,
    });
    expect(p.release).toHaveLength(1);
    expect(p.withheld).toEqual([]);
  });
});
