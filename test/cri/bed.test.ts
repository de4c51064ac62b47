// The CRI bed's own promises: whatever state a failed test leaves (containerd killed with a pod running, its shim
// and pause process alive, the pod's netns mounted), cleanup() leaves nothing of the bed on the machine, and reset()
// (run after each test by useCriBed) gives the next test a clean node.
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hostLocalAllocations, ledgerRecords } from '../support/shim/cni.js';
import { TestNet, uid } from '../support/net/netns.js';
import { bedPids, CriBed, shimSocket } from '../support/runtimes/cri/bed.js';
import { shimConfList } from '../support/runtimes/cri/conflists.js';
import { criOrSkip } from '../support/runtimes/cri/suite.js';

const enabled = criOrSkip();

describe.skipIf(!enabled)('CriBed cleanup and reset', () => {
  const net = new TestNet();
  afterAll(() => net.cleanup());

  it('after containerd was SIGKILLed with a pod running: no process, netns, cache entry, shim socket, cgroup or dir is left', async () => {
    const node = await net.netns('crinode');
    const bed = await CriBed.create({
      node,
      confList: (dirs) => shimConfList(dirs, { placement: 'ipam', cniVersion: '1.0.0', ranges: [[{ subnet: '10.104.0.0/24' }]] }),
    });
    try {
      const pod = await bed.runPod('orphan');
      await bed.stop('SIGKILL'); // a test that failed half-way: no StopPodSandbox, the shim and pause process live on
      expect(await bedPids(bed.baseDir, bed.cgroupParent)).not.toEqual([]);
      expect(existsSync(pod.netnsPath)).toBe(true);
      expect(await bed.cachedResults()).toEqual([`${bed.network}-${pod.id}-eth0`]);
      const socket = shimSocket(bed.socket, pod.id);
      expect(existsSync(socket)).toBe(true); // also proves shimSocket() names containerd's socket path

      await bed.cleanup();
      expect(await bedPids(bed.baseDir, bed.cgroupParent)).toEqual([]);
      expect(existsSync(pod.netnsPath)).toBe(false);
      expect(await bed.cachedResults()).toEqual([]);
      expect(existsSync(path.join('/var/lib/cni/results', `cni-loopback-${pod.id}-lo`))).toBe(false);
      expect(existsSync(socket)).toBe(false);
      const cgroups = (await readdir('/sys/fs/cgroup')).map((c) => path.join('/sys/fs/cgroup', c, bed.cgroupParent));
      expect(cgroups.filter((d) => existsSync(d))).toEqual([]);
      expect(existsSync(bed.baseDir)).toBe(false);
    } finally {
      await bed.cleanup();
    }
  });

  it('reset() after a test that failed half-way (containerd killed, a pod and an agent IP left): containerd runs, no pod, empty ledger and store', async () => {
    const node = await net.netns('crinode');
    const bed = await CriBed.create({
      node,
      confList: (dirs) => shimConfList(dirs, { placement: 'chained', cniVersion: '1.0.0', ranges: [[{ subnet: '10.104.1.0/24' }]] }),
    });
    const owner = `health-${uid()}`;
    try {
      const pod = await bed.runPod('left-behind');
      const agent = await bed.cli(['agent-ip', 'allocate', '--owner', owner]);
      expect(agent.exitCode, agent.stderr).toBe(0);
      await bed.stop('SIGKILL');
      expect(await ledgerRecords(bed.stateDir, bed.network)).toHaveLength(2);
      expect(await hostLocalAllocations(bed.dataDir, bed.network)).toHaveLength(2);

      await bed.reset();
      expect(await bed.cri.listPodSandbox()).toEqual([]);
      expect(await ledgerRecords(bed.stateDir, bed.network)).toEqual([]);
      expect(await hostLocalAllocations(bed.dataDir, bed.network)).toEqual([]);
      // host-local starts over too (its round-robin position is gone): the next pod gets the first address again
      expect((await bed.runPod('next')).ips).toEqual(pod.ips);
    } finally {
      await bed.cleanup();
      await execa('ip', ['netns', 'del', `ipam-shim-agent-${owner}`], { reject: false });
    }
  });
});
