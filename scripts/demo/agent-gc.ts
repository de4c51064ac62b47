// Failure 2: cilium-agent's own IP survives a CNI GC that releases a leaked pod IP.
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { DemoSection } from './section.js';
import { stage, SHIM } from './lib.js';
import { ciliumCni } from '../../test/support/shim/cilium.js';

export const section: DemoSection = {
  name: 'agent-gc',
  async run(d) {
    // cilium-cni of a line newer than 1.17: the runtime's GC needs a 1.1.0 list, which 1.17 refuses.
    const s = await stage({ cilium: 'newer' });
    try {
      d.title("Failure 2: cilium-agent's own IPs under delegated IPAM, and CNI GC");
      const node = await s.net.netns('node');
      const ipam = { type: 'host-local', dataDir: s.dataDir, ranges: [[{ subnet: '10.58.0.0/24' }]] };
      const conflist = await s.conflist('cilium', {
        cniVersion: '1.1.0',
        name: 'cilium',
        plugins: [ciliumCni(ipam), { type: 'ipam-shim', stateDir: s.stateDir, logFile: s.logFile, delegate: ipam }],
      });
      const store = async () => (await readdir(join(s.dataDir, 'cilium')).catch(() => [])).filter((f) => /^\d/.test(f)).sort();
      const agent = (...a: string[]) =>
        d.show('ip', ['netns', 'exec', node, SHIM, 'agent-ip', ...a, '--conflist', conflist, '--cni-path', s.cniPath]);

      d.say('The agent asks for its health IP at start, and again after a restart: same address, one allocation.');
      const first = await agent('allocate', '--owner', 'health');
      const second = await agent('allocate', '--owner', 'health');
      const ip = first.stdout.split('\n')[0];
      d.verdict(first.exitCode === 0 && second.stdout.startsWith(`${ip}\nreused`), `allocate is idempotent (${ip})`);

      d.say('Two pods start; one of them dies without a DEL (its sandbox is gone, the runtime forgot it).');
      const live = await s.net.netns('pod');
      const dead = await s.net.netns('pod');
      await d.show(...s.runner(node, 'add', 'cilium', live), { env: { ...s.env(), CNI_CONTAINERID: 'pod-live' }, maxLines: 3 });
      await d.show(...s.runner(node, 'add', 'cilium', dead), { env: { ...s.env(), CNI_CONTAINERID: 'pod-dead' }, maxLines: 3 });
      await d.show('rm', ['-f', join(s.cacheDir, 'results', 'cilium-pod-dead-eth0')]);
      await d.show('ip', ['netns', 'del', dead]);
      d.say(`host-local now holds: ${(await store()).join(', ')}`);

      d.say("\nThe runtime's GC (CNI 1.1) with a valid list that knows only the live pod — not the agent:");
      const gc = await d.show(...s.runner(node, 'gc', 'cilium', '--valid', 'pod-live:eth0'), { env: s.env() });
      const after = await store();
      d.say(`host-local now holds: ${after.join(', ')}`);
      d.verdict(gc.exitCode === 0 && after.includes(ip!), "the agent's IP survived GC");
      d.verdict(after.length === 2, 'the leaked pod IP was released (host-local itself has no GC: the shim DELed it)');
      await agent('list');
    } finally {
      await s.cleanup();
    }
  },
};
