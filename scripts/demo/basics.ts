// The plugin itself: VERSION, then ADD → CHECK → STATUS → DEL through the real libcni (the cnitool harness) in both
// placements, and a real podman container.
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { DemoSection } from './section.js';
import { CNITOOL, stage, SHIM, PLUGIN_DIR } from './lib.js';
import { PodmanBed } from '../../test/support/runtimes/podman.js';

export const section: DemoSection = {
  name: 'basics',
  async run(d) {
    const s = await stage();
    try {
      d.title('The plugin: VERSION, and both placements through ADD/CHECK/STATUS/DEL, driven by the real libcni (cnitool harness)');
      const v = await d.show(SHIM, [], { input: '{"cniVersion":"1.1.0"}', env: { CNI_COMMAND: 'VERSION' } });
      d.verdict(
        v.exitCode === 0 && JSON.parse(v.stdout).supportedVersions.includes('0.3.1'),
        'the single executable answers VERSION for 0.3.0 … 1.1.0',
      );

      if (!existsSync(CNITOOL)) {
        d.verdict(false, `the cnitool harness (${CNITOOL}) is missing: run scripts/install-deps.sh`);
        return;
      }
      const node = await s.net.netns('node');
      const ipam = { type: 'host-local', dataDir: s.dataDir, ranges: [[{ subnet: '10.55.0.0/24' }]] };
      const shim = { stateDir: s.stateDir, logFile: s.logFile };
      // Debian's ptp speaks ≤ 1.0.0; the ptp-1.1 fixture runs it at 1.0.0 so the list can be 1.1.0 (GC, STATUS).
      await s.conflist('chained', {
        cniVersion: '1.1.0',
        name: 'chained',
        plugins: [
          { type: 'ptp-1.1', ipMasq: false, ipam },
          { type: 'ipam-shim', ...shim, delegate: ipam },
        ],
      });
      await s.conflist('slot', {
        cniVersion: '1.0.0',
        name: 'slot',
        plugins: [
          { type: 'ptp', ipMasq: false, ipam: { type: 'ipam-shim', ...shim, delegate: { ...ipam, ranges: [[{ subnet: '10.56.0.0/24' }]] } } },
        ],
      });

      for (const network of ['chained', 'slot']) {
        d.say(
          `\nnetwork "${network}": ${network === 'chained' ? 'ptp allocates through host-local, the shim is chained after it' : "the shim sits in ptp's IPAM slot and wraps host-local"}`,
        );
        const att = { containerID: `demo-${network}`, netns: `/run/netns/${await s.net.netns('pod')}` };
        const add = await d.show(...s.cnitool(node, 'add', network, att));
        d.verdict(add.exitCode === 0, `ADD through ${network} gave the pod an address`);
        const chk = await d.show(...s.cnitool(node, 'check', network, att));
        d.verdict(chk.exitCode === 0, 'CHECK passes (ledger, residue, reserved CIDRs, delegate CHECK)');
        if (network === 'chained') {
          const st = await d.show(...s.cnitool(node, 'status', network));
          d.verdict(st.exitCode === 0, 'STATUS (1.1.0): delegate answers, state dir writable');
        }
        const records = await readdir(join(s.stateDir, network, 'records'));
        d.say(`ledger: ${records.join(', ')} → ${await readFile(join(s.stateDir, network, 'records', records[0]!), 'utf8')}`);
        const del = await d.show(...s.cnitool(node, 'del', network, att));
        const left = await readdir(join(s.stateDir, network, 'records'));
        d.verdict(del.exitCode === 0 && left.length === 0, 'DEL released the address and forgot the record');
      }

      d.say('\nA real runtime: podman 4.3 on its CNI backend, with the shim in the IPAM slot.');
      const bed = await PodmanBed.create({
        netns: node,
        pluginDirs: [s.cniPath.split(':')[0]!, PLUGIN_DIR],
        confList: (dirs) => ({
          cniVersion: '1.0.0',
          name: dirs.network,
          plugins: [
            {
              type: 'ptp',
              ipMasq: false,
              ipam: { type: 'ipam-shim', ...shim, delegate: { type: 'host-local', dataDir: dirs.dataDir, ranges: [[{ subnet: '10.57.0.0/24' }]] } },
            },
          ],
        }),
      });
      try {
        await bed.startContainer('demo');
        const ips = await bed.containerIPs('demo');
        d.say(`podman run → container "demo" has ${ips.join(', ')}`);
        d.verdict(ips.length === 1, 'podman ADD went through the shim');
        await bed.rm('demo', { force: true });
        const records = await readdir(join(s.stateDir, bed.network, 'records')).catch(() => []);
        d.verdict(records.length === 0, 'podman rm → DEL: no ledger record left');
      } finally {
        await bed.cleanup();
      }
    } finally {
      await s.cleanup();
    }
  },
};
