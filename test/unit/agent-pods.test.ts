// The node agent's view of the pods the runtime knows (src/pods/view.ts) from cache files written as libcni writes
// them (src/gc/from-cache.ts cachedAttachments): addresses from every result version, the pod's namespace/name from
// cniArgs, pods the ledger does not hold, reserved addresses (never residue targets), and entries whose addresses
// cannot be read (unknown, not none).
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cachedAttachments } from '../../src/gc/from-cache.js';
import { podName, viewPods, type PodHold } from '../../src/pods/view.js';
import { podHolds } from '../../src/fix-list/pod-holds.js';
import type { NetConf } from '../../src/cni/config.js';
import { reservedHold } from '../../src/reserved/decision.js';
import { podRecord } from '../support/doubles/ledger-record.js';

let dir: string | undefined;
afterEach(async () => dir && rm(dir, { recursive: true, force: true }));

const rec = (containerID: string, ip: string) => podRecord(containerID, ip);
const args = (ns: string, name: string) => [
  ['IgnoreUnknown', '1'],
  ['K8S_POD_NAMESPACE', ns],
  ['K8S_POD_NAME', name],
];

async function cache(entries: Record<string, unknown>[]): Promise<string> {
  dir = await mkdtemp(join(tmpdir(), 'agent-pods-'));
  await mkdir(join(dir, 'results'));
  for (const e of entries) {
    await writeFile(
      join(dir, 'results', `${String(e.networkName)}-${String(e.containerId)}-${String(e.ifName)}`),
      JSON.stringify({ kind: 'cniCacheV1', config: 'e30=', ...e }),
    );
  }
  return dir;
}

describe('the runtime pods the agent sees', () => {
  it('reads addresses of every result version and the pod from cniArgs; unseen, reserved and residue targets apart', async () => {
    const d = await cache([
      {
        containerId: 'seen',
        ifName: 'eth0',
        networkName: 'net',
        cniArgs: args('a', 'seen'),
        result: { cniVersion: '1.0.0', ips: [{ address: '10.0.0.2/24' }] },
      },
      {
        containerId: 'new',
        ifName: 'eth0',
        networkName: 'net',
        cniArgs: args('b', 'web-1'),
        result: {
          cniVersion: '0.3.1',
          ips: [
            { address: '10.0.0.3/24', version: '4' },
            { address: 'fd00:0:0::3/64', version: '6' },
          ],
        },
      },
      { containerId: 'old', ifName: 'eth0', networkName: 'net', result: { cniVersion: '0.2.0', ip4: { ip: '10.0.0.4/24' } } },
      {
        containerId: 'res',
        ifName: 'eth0',
        networkName: 'net',
        cniArgs: args('c', 'db-0'),
        result: { cniVersion: '1.0.0', ips: [{ address: '10.0.9.5/24' }, { address: '10.0.0.5/24' }] },
      },
      { containerId: 'bad', ifName: 'eth0', networkName: 'net', result: { cniVersion: '1.0.0', ips: [{ address: 'not-an-ip' }] } },
      { containerId: 'other', ifName: 'eth0', networkName: 'net-b', result: { ips: [{ address: '10.0.0.9/24' }] } },
    ]);
    const view = await cachedAttachments(d, 'net');
    expect(view.blind).toBeUndefined();
    expect(view.pods.map((p) => p.containerID).sort()).toEqual(['bad', 'new', 'old', 'res', 'seen']);
    // The reserved fix's hold (Fix.holds), as the pods step and doctor get it.
    const reserved = { settings: { reservedCIDRs: ['10.0.9.0/24'] } } as unknown as Parameters<typeof reservedHold>[0];
    const v = viewPods(view.pods, [rec('seen', '10.0.0.2/24')], [{ fix: 'reserved', hold: reservedHold(reserved)! }]);
    expect(v.unseen.map((p) => p.containerID).sort()).toEqual(['bad', 'new', 'old', 'res']);
    expect(v.held).toEqual([
      { pod: expect.objectContaining({ containerID: 'res', namespace: 'c', name: 'db-0' }), ip: '10.0.9.5', cidr: '10.0.9.0/24', fix: 'reserved' },
    ]);
    // The reserved address is never a residue target; the pod's other address is.
    expect(Object.fromEntries(v.unseenAddresses.map((p) => [p.containerID, p.ips]))).toEqual({
      new: ['10.0.0.3', 'fd00::3'],
      old: ['10.0.0.4'],
      res: ['10.0.0.5'],
    });
    expect(v.unreadable.map((p) => [p.containerID, p.ips])).toEqual([['bad', []]]);
    expect(v.unreadable[0]!.unreadable).toContain('not-an-ip');
    expect(podName(v.unseen.find((p) => p.containerID === 'new')!)).toBe('b/web-1');
    expect(podName(v.unseen.find((p) => p.containerID === 'old')!)).toMatch(/^old\/eth0 \(no K8S_POD_NAME/);
  });

  it('a cache entry of this network with cniArgs of the wrong shape is unreadable for its addresses, still an attachment for GC', async () => {
    const d = await cache([
      { containerId: 'x', ifName: 'eth0', networkName: 'net', cniArgs: 'K8S_POD_NAME=x', result: { ips: [{ address: '10.0.0.7/24' }] } },
    ]);
    const view = await cachedAttachments(d, 'net');
    expect(view.attachments).toEqual([{ containerID: 'x', ifname: 'eth0' }]);
    expect(view.pods[0]).toMatchObject({ containerID: 'x', ips: [], unreadable: expect.stringContaining('cniArgs') });
  });

  it('a missing results directory is "could not look", not zero pods', async () => {
    dir = await mkdtemp(join(tmpdir(), 'agent-pods-'));
    const view = await cachedAttachments(dir, 'net');
    expect(view.blind?.kind).toBe('missing');
  });
});

// The view is fix-neutral: a fix holds addresses apart through its own hook (Fix.holds), so a fifth fix that wants
// unseen pods' addresses, or holds some back, edits no shared view.
const conf = (reservedCIDRs: string[]) => ({ name: 'n', settings: { reservedCIDRs } }) as unknown as NetConf;

describe('the pods view is fix-neutral', () => {
  const pod = (containerID: string, ...ips: string[]) => ({ containerID, ifname: 'eth0', ips });

  it("keeps every fix's held addresses out of the unseen pods' addresses, naming the fix that holds each", () => {
    // A fifth fix's hold, beside the reserved fix's: nothing of the view changes for it.
    const other: PodHold = (ip) => (ip === '10.0.0.7' ? { ip, cidr: '10.0.0.7/32' } : undefined);
    const holds = [...podHolds(conf(['10.0.9.0/24'])), { fix: 'fifth', hold: other }];
    const v = viewPods(
      [pod('seen', '10.0.9.1'), pod('a', '10.0.9.5', '10.0.0.5'), pod('b', '10.0.0.7'), pod('c', '10.0.0.8')],
      [podRecord('seen', '10.0.9.1/24')],
      holds,
    );
    expect(v.unseen.map((p) => p.containerID)).toEqual(['a', 'b', 'c']);
    expect(v.held.map(({ pod, ip, cidr, fix }) => [pod.containerID, ip, cidr, fix])).toEqual([
      ['seen', '10.0.9.1', '10.0.9.0/24', 'reserved'],
      ['a', '10.0.9.5', '10.0.9.0/24', 'reserved'],
      ['b', '10.0.0.7', '10.0.0.7/32', 'fifth'],
    ]);
    // b is left with no address: not among them at all.
    expect(v.unseenAddresses.map((p) => [p.containerID, p.ips])).toEqual([
      ['a', ['10.0.0.5']],
      ['c', ['10.0.0.8']],
    ]);
  });

  it("takes the reserved fix's hold from its Fix (Fix.holds), none without reservedCIDRs", () => {
    expect(podHolds(conf(['10.0.9.0/24'])).map((h) => h.fix)).toEqual(['reserved']);
    expect(podHolds(conf([]))).toEqual([]);
    expect(() => podHolds(conf(['not-a-cidr']))).toThrow();
  });
});
