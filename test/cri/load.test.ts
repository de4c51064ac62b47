// Load through CRI: 24 pods started in parallel (containerd restarted half-way, with 12 running) get 24 distinct
// addresses, each with its ledger record and host-local allocation; after they are removed in parallel, the
// ledger, host-local's store and libcni's cache are empty.
import { describe, expect, it } from 'vitest';
import { hostLocalAllocations, ledgerRecords } from '../support/shim/cni.js';
import { PLACEMENTS, shimConfList, VERSIONS, type CniVersion, type Placement } from '../support/runtimes/cri/conflists.js';
import { criOrSkip, useCriBed } from '../support/runtimes/cri/suite.js';

const enabled = criOrSkip();
const HALF = 12;

describe.skipIf(!enabled)('24 pods in parallel through containerd CRI', () => {
  const s = useCriBed({
    confList: (dirs) => shimConfList(dirs, { placement: 'chained', cniVersion: '0.3.1', ranges: [[{ subnet: '10.99.0.0/24' }]] }),
  });

  it.each(PLACEMENTS.flatMap((p) => VERSIONS.map((v) => [p, v] as [Placement, CniVersion])))(
    '%s at %s: distinct addresses, a restart loses nothing, removal leaves nothing',
    async (placement, cniVersion) => {
      await s.bed.setConfList(shimConfList(s.bed, { placement, cniVersion, ranges: [[{ subnet: '10.99.0.0/24' }]] }));
      const batch = (from: number) => Promise.all(Array.from({ length: HALF }, (_, i) => s.bed.runPod(`load-${placement}-${from + i}`)));
      const first = await batch(0);
      await s.bed.restart();
      const second = await batch(HALF);
      const pods = [...first, ...second];

      const ips = pods.map((p) => p.ips[0]!);
      expect(new Set(ips).size).toBe(2 * HALF);
      expect(ips.every((ip) => /^10\.99\.0\.\d+$/.test(ip))).toBe(true);
      // the restart lost nothing: containerd still reports the first batch ready with the same addresses
      for (const p of first) expect((await s.bed.inspect(p.id)).ips).toEqual(p.ips);
      expect(await ledgerRecords(s.bed.stateDir, s.bed.network)).toEqual(pods.map((p) => `${p.id}:eth0.json`).sort());
      expect(await hostLocalAllocations(s.bed.dataDir, s.bed.network)).toEqual([...ips].sort());

      await Promise.all(pods.map((p) => s.bed.removePod(p.id)));
      expect(await s.bed.cri.listPodSandbox()).toEqual([]);
      expect(await ledgerRecords(s.bed.stateDir, s.bed.network)).toEqual([]);
      expect(await hostLocalAllocations(s.bed.dataDir, s.bed.network)).toEqual([]);
      expect(await s.bed.cachedResults()).toEqual([]);
    },
  );
});
