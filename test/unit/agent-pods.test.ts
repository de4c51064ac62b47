// The node agent's view of the pods the runtime knows (src/fixes/pods.ts) from cache files written as libcni writes
// them (src/gc/from-cache.ts cachedAttachments): addresses from every result version, the pod's namespace/name from
// cniArgs, pods the ledger does not hold, reserved addresses (never residue targets), and entries whose addresses
// cannot be read (unknown, not none).
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cachedAttachments } from '../../src/gc/from-cache.js';
import { podName, viewPods } from '../../src/fixes/pods.js';
import { parseCidrs } from '../../src/net/cidr.js';
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
    const v = viewPods(view.pods, [rec('seen', '10.0.0.2/24')], parseCidrs(['10.0.9.0/24']));
    expect(v.unseen.map((p) => p.containerID).sort()).toEqual(['bad', 'new', 'old', 'res']);
    expect(v.reserved).toEqual([
      { pod: expect.objectContaining({ containerID: 'res', namespace: 'c', name: 'db-0' }), ip: '10.0.9.5', cidr: '10.0.9.0/24' },
    ]);
    // The reserved address is never a residue target; the pod's other address is.
    expect(Object.fromEntries(v.residueTargets.map((p) => [p.containerID, p.ips]))).toEqual({
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
