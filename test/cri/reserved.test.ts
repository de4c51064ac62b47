// Failure 4 through CRI: a pod whose address would fall in a reserved CIDR does not start. RunPodSandbox fails with
// the shim's code-100 message in the CRI error (what kubelet logs and shows in the pod's events), nothing leaks
// (ledger, host-local, libcni cache, netns), and the next pod gets the next, good address.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { hostLocalAllocations, ledgerRecords } from '../support/shim/cni.js';
import { CriError } from '../support/runtimes/cri/client.js';
import { PLACEMENTS, shimConfList, VERSIONS } from '../support/runtimes/cri/conflists.js';
import { criOrSkip, useCriBed } from '../support/runtimes/cri/suite.js';

const enabled = criOrSkip();

describe.skipIf(!enabled)('reserved CIDRs through containerd CRI', () => {
  const s = useCriBed({
    confList: (dirs) => shimConfList(dirs, { placement: 'chained', cniVersion: '0.3.1', ranges: [[{ subnet: '10.98.0.0/24' }]] }),
  });
  let third = 0;

  describe.each(VERSIONS)('cniVersion %s', (cniVersion) => {
    it.each(PLACEMENTS)(
      '%s: the pod that would get a reserved address fails with code 100’s message; nothing leaks; the next pod is fine',
      async (placement) => {
        // A fresh /24 per case: host-local's round-robin starts at .2, which is reserved.
        third++;
        const reserved = `10.98.${third}.2`;
        await s.bed.setConfList(
          shimConfList(s.bed, {
            placement,
            cniVersion,
            ranges: [[{ subnet: `10.98.${third}.0/24` }]],
            shim: { reservedCIDRs: [`${reserved}/32`, '10.224.0.0/24'] },
          }),
        );

        const err = await s.bed.runPod(`refused-${placement}`).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(CriError);
        expect((err as CriError).method).toBe('RunPodSandbox');
        expect((err as CriError).details).toContain(`address ${reserved} is inside reserved CIDR ${reserved}/32 (network ${s.bed.network})`);
        expect((err as CriError).details).toContain(`plugin type="${placement === 'chained' ? 'ipam-shim' : 'cilium-cni'}"`);

        // containerd removed the failed sandbox and ran DEL: nothing is left anywhere.
        expect(await s.bed.cri.listPodSandbox()).toEqual([]);
        expect(await ledgerRecords(s.bed.stateDir, s.bed.network)).toEqual([]);
        expect(await hostLocalAllocations(s.bed.dataDir, s.bed.network)).toEqual([]);
        expect(await s.bed.cachedResults()).toEqual([]);
        const refusal = (await readFile(s.bed.logFile, 'utf8'))
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as { reservedCIDR?: string; ip?: string; netns?: string; level: string })
          .filter((l) => l.reservedCIDR && l.ip === reserved);
        expect(refusal).toHaveLength(1);
        expect(refusal[0]!.level).toBe('error');
        expect(refusal[0]!.netns).toMatch(/^\/var\/run\/netns\/cni-/);
        expect(existsSync(refusal[0]!.netns!)).toBe(false);

        const pod = await s.bed.runPod(`next-${placement}`);
        expect(pod.ips).toEqual([`10.98.${third}.3`]);
        expect(await ledgerRecords(s.bed.stateDir, s.bed.network)).toEqual([`${pod.id}:eth0.json`]);
        await s.bed.removePod(pod.id);
        expect(await ledgerRecords(s.bed.stateDir, s.bed.network)).toEqual([]);
        expect(await hostLocalAllocations(s.bed.dataDir, s.bed.network)).toEqual([]);
      },
    );
  });
});
