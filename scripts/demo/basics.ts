// The plugin itself: VERSION, then ADD → CHECK → STATUS → DEL through the real libcni (the cnitool harness) in both
// placements behind cilium-cni (the test beds' stand-in of a Cilium line newer than 1.17: the chained list is at
// 1.1.0, which 1.17 refuses), and a real podman container.
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { DemoSection } from './section.js';
import { CNITOOL, ledgerAttachments, stage, SHIM, PLUGIN_DIR } from './lib.js';
import { ciliumCni } from '../../test/support/shim/cilium.js';
import { PodmanBed } from '../../test/support/runtimes/podman.js';

export const section: DemoSection = {
  name: 'basics',
  async run(d) {
    const s = await stage({ cilium: 'newer' });
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
      // cilium-cni in delegated-plugin mode passes its own stdin to the plugin named in its ipam; the newer line takes
      // 1.1.0 (GC, STATUS), the 1.17 line (AKS's) at most 1.0.0.
      await s.conflist('chained', {
        cniVersion: '1.1.0',
        name: 'chained',
        plugins: [ciliumCni(ipam), { type: 'ipam-shim', ...shim, delegate: ipam }],
      });
      await s.conflist('slot', {
        cniVersion: '1.0.0',
        name: 'slot',
        plugins: [ciliumCni({ type: 'ipam-shim', ...shim, delegate: { ...ipam, ranges: [[{ subnet: '10.56.0.0/24' }]] } })],
      });

      const env = s.env();
      for (const network of ['chained', 'slot']) {
        d.say(
          `\nnetwork "${network}": ${network === 'chained' ? 'cilium-cni allocates through host-local, the shim is chained after it' : 'cilium-cni delegates IPAM to the shim, which wraps host-local'}`,
        );
        const att = { containerID: `demo-${network}`, netns: `/run/netns/${await s.net.netns('pod')}` };
        const add = await d.show(...s.cnitool(node, 'add', network, att), { env });
        d.verdict(add.exitCode === 0, `ADD through ${network} gave the pod an address`);
        const chk = await d.show(...s.cnitool(node, 'check', network, att), { env });
        d.verdict(chk.exitCode === 0, 'CHECK passes (ledger, residue, reserved CIDRs, delegate CHECK)');
        if (network === 'chained') {
          const st = await d.show(...s.cnitool(node, 'status', network), { env });
          d.verdict(st.exitCode === 0, 'STATUS (1.1.0): cilium-agent and the delegate answer, state dir writable');
        }
        const records = await readdir(join(s.stateDir, network, 'records'));
        d.say(`ledger: ${records.join(', ')} → ${await readFile(join(s.stateDir, network, 'records', records[0]!), 'utf8')}`);
        const del = await d.show(...s.cnitool(node, 'del', network, att), { env });
        const left = await ledgerAttachments(s.stateDir, network);
        const held = (await readdir(join(s.dataDir, network)).catch(() => [] as string[])).filter((f) => /^\d/.test(f));
        d.verdict(
          del.exitCode === 0 && left.length === 0 && held.length === 0,
          network === 'chained'
            ? 'DEL released the address and ended the attachment (its record stays marked deleted until GC sees the pod gone)'
            : 'DEL released the address and forgot the record',
        );
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
