// The conf dir as containerd's CRI reads it (go-cni over libcni: the first network config file) against the shim's
// one reader (src/conflist.ts: shimEntryInUse, the fact /readyz, the agent's metric and doctor report): a
// directory named like a conflist and a file Cilium disabled (.cilium_bak) are no configs; a single-plugin .conf
// with the shim in its IPAM slot is the network pods get; a list saved as .conf is refused. What CRI Status says
// containerd loaded is the truth the shim's answer is held to.
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { shimEntryInUse } from '../../src/conflist.js';
import { ledgerRecords } from '../support/shim/cni.js';
import { hostLocal, shimConfList } from '../support/runtimes/cri/conflists.js';
import { ciliumCni } from '../support/shim/cilium.js';
import { criOrSkip, useCriBed } from '../support/runtimes/cri/suite.js';

const enabled = criOrSkip();

describe.skipIf(!enabled)('the conf dir: containerd and the shim agree on the network config in use', () => {
  const s = useCriBed({
    confList: (dirs) => shimConfList(dirs, { placement: 'chained', cniVersion: '1.0.0', ranges: [[{ subnet: '10.97.0.0/24' }]] }),
  });
  const added: string[] = [];

  /** Adds files (null: a directory) to the conf dir and waits until containerd has reloaded it. */
  async function add(files: Record<string, string | null>): Promise<void> {
    const before = await s.bed.reloadCount();
    for (const [name, text] of Object.entries(files)) {
      const p = path.join(s.bed.confDir, name);
      added.push(p);
      if (text === null) await mkdir(p);
      else await writeFile(p, text);
    }
    const deadline = Date.now() + 10_000;
    while ((await s.bed.reloadCount()) <= before) {
      if (Date.now() > deadline) throw new Error(`containerd did not reload ${s.bed.confDir}\n${await s.bed.logTail()}`);
      await sleep(50);
    }
    await sleep(300); // one reload per event: let the last one land
  }

  afterEach(async () => {
    for (const p of added.splice(0)) await rm(p, { recursive: true, force: true });
    await sleep(300);
  });

  it('a directory named *.conflist and a disabled .cilium_bak file sorting first: both keep the bed’s conflist', async () => {
    const other = { cniVersion: '1.0.0', name: 'other', plugins: [{ type: 'bridge', ipam: hostLocal(s.bed, [[{ subnet: '10.97.9.0/24' }]]) }] };
    await add({ '00-dir.conflist': null, '01-old.conflist.cilium_bak': JSON.stringify(other) });
    const loaded = await s.bed.loadedConfList();
    expect(loaded.loadStatus).toBe('OK');
    expect(loaded.source).toBeDefined();
    expect((await s.bed.loadedConfList('other')).source).toBeUndefined();
    await expect(shimEntryInUse({ confDir: s.bed.confDir })).resolves.toEqual({ inUse: true, path: s.bed.confListPath });
  });

  it('a single-plugin .conf sorting first, the shim in its IPAM slot: containerd runs it for pods, and the shim calls its entry in use', async () => {
    const slot = {
      cniVersion: '1.0.0',
      name: 'slot',
      ...ciliumCni({
        type: 'ipam-shim',
        stateDir: s.bed.stateDir,
        logFile: s.bed.logFile,
        delegate: hostLocal(s.bed, [[{ subnet: '10.97.1.0/24' }]]),
      }),
    };
    await add({ '05-slot.conf': JSON.stringify(slot) });
    expect((await s.bed.loadedConfList('slot')).source).toBeDefined();
    await expect(shimEntryInUse({ confDir: s.bed.confDir })).resolves.toEqual({ inUse: true, path: path.join(s.bed.confDir, '05-slot.conf') });
    const pod = await s.bed.runPod('slot-pod');
    try {
      expect(pod.ips[0]).toMatch(/^10\.97\.1\./);
      expect(await ledgerRecords(s.bed.stateDir, 'slot')).toHaveLength(1); // the shim ran for it
    } finally {
      await s.bed.removePod(pod.id);
    }
  });

  it('a list saved as .conf sorting first: containerd refuses it (no network), and the shim says its entry is not in use', async () => {
    const list = shimConfList(s.bed, { placement: 'chained', cniVersion: '1.0.0', ranges: [[{ subnet: '10.97.2.0/24' }]] });
    await add({ '05-list.conf': JSON.stringify({ ...list, name: 'aslist' }) });
    const loaded = await s.bed.loadedConfList('aslist');
    expect(loaded.source).toBeUndefined();
    expect(loaded.loadStatus).toMatch(/05-list\.conf/);
    const entry = await shimEntryInUse({ confDir: s.bed.confDir });
    expect(entry).toMatchObject({ inUse: false, path: path.join(s.bed.confDir, '05-list.conf') });
  });
});
