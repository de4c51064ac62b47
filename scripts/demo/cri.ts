// The kubelet path: a pod through containerd's CRI with the shim in the conflist, chained after cilium-cni (the
// bed's stand-in of Cilium 1.17, AKS's line, and its cilium-agent API stand-in). A private containerd 1.6 runs in
// a netns standing for the node; the demo makes the calls kubelet makes (RunPodSandbox, PodSandboxStatus,
// StopPodSandbox, RemovePodSandbox) over CRI v1 gRPC, and shows the shim's record, a pod refused for a reserved
// address (the CRI error carries the shim's code-100 message) and that nothing is left after removal. On
// containerd 2.x (install-deps' .deps/containerd-2, used where installed) it then shows NetworkReady following the
// shim's STATUS with a 1.1.0 list, which needs a newer Cilium (1.17 refuses it: shown too): Ready, NotReady with the
// shim's message while the state dir is read-only, Ready again.
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { CriBed, hasContainerd } from '../../test/support/runtimes/cri/bed.js';
import { containerdBinDir, containerdBuild, missingTools } from '../../test/support/runtimes/cri/containerd.js';
import { ROOT } from '../../test/support/shim/cni.js';
import { unmountBelow } from '../../test/support/runtimes/mounts.js';
import { CriError } from '../../test/support/runtimes/cri/client.js';
import { shimConfList } from '../../test/support/runtimes/cri/conflists.js';
import { TestNet } from '../../test/support/net/netns.js';
import type { DemoSection } from './section.js';
import { ledgerAttachments } from './lib.js';

export const section: DemoSection = {
  name: 'cri',
  async run(d) {
    d.title('The kubelet path: a pod through containerd CRI, the shim chained after cilium-cni 1.17 (AKS 0.3.1 shape)');
    // containerd 2.x (what current AKS images ship, and the one that sends STATUS) with the plugins that speak
    // 1.1.0, where install-deps put them; else the system's containerd and plugins.
    const c2 = path.join(ROOT, '.deps/containerd-2');
    const p19 = path.join(ROOT, '.deps/cni-plugins-1.9');
    const binDir = !process.env.CONTAINERD_BIN_DIR && missingTools(c2).length === 0 ? c2 : containerdBinDir();
    if (!hasContainerd(binDir)) {
      d.verdict(false, 'containerd, runc or busybox-static is missing: run scripts/install-deps.sh');
      return;
    }
    const net = new TestNet();
    let bed: CriBed | undefined;
    try {
      const on2 = containerdBuild(binDir).major >= 2 && existsSync(path.join(p19, 'host-local'));
      const node = await net.netns('crinode');
      const ranges = [[{ subnet: '10.103.0.0/24' }]];
      const list = (dirs: Parameters<typeof shimConfList>[0]) =>
        shimConfList(dirs, { placement: 'chained', cniVersion: '0.3.1', ranges, shim: { reservedCIDRs: ['10.103.0.3/32'] } });
      d.say(
        `containerd ${containerdBuild(binDir).version} starts in the node netns with its own root, state, socket and CNI dirs; the sandbox image is built offline from busybox-static.`,
      );
      bed = await CriBed.create({ node, confList: list, containerdBinDir: binDir, cilium: '1.17', ...(on2 ? { pluginDir: p19 } : {}) });
      const cri = bed.cri;
      const v = await cri.version();
      d.say(`CRI Version: ${v.runtime_name} ${v.runtime_version}, API ${v.runtime_api_version}`);
      const ready = (await cri.status()).find((c) => c.type === 'NetworkReady');
      d.verdict(ready?.status === true, 'CRI Status: NetworkReady (containerd loaded the conflist with ipam-shim in it)');
      d.say(`conflist ${bed.confListPath}:`);
      d.say(`  ${JSON.stringify(JSON.parse(await readFile(bed.confListPath, 'utf8')))}`);

      d.say(
        '\nRunPodSandbox (kubelet starting a pod): containerd runs cilium-cni (it asks cilium-agent, then host-local), then ipam-shim, through libcni.',
      );
      const pod = await bed.runPod('web-1');
      d.say(`  sandbox ${pod.id.slice(0, 12)}…  ip ${pod.ips.join(', ')}  netns ${pod.netnsPath}`);
      const records = await readdir(path.join(bed.stateDir, bed.network, 'records')).catch(() => [] as string[]);
      d.verdict(records.includes(`${pod.id}:eth0.json`), "the shim recorded the pod's attachment in its ledger");
      const ping = await d.show('nsenter', [`--net=/run/netns/${node}`, 'ping', '-c', '1', '-W', '2', pod.ips[0]!], { maxLines: 2 });
      d.verdict(ping.exitCode === 0, 'the node reaches the pod');

      d.say('\nThe next pod would be handed 10.103.0.3, which is reserved (reservedCIDRs):');
      const refused = await bed.runPod('web-2').then(
        () => undefined,
        (e: unknown) => e,
      );
      const msg = refused instanceof CriError ? refused.details : String(refused);
      d.say(`  RunPodSandbox failed: ${msg}`);
      d.verdict(
        refused instanceof CriError && msg.includes('address 10.103.0.3 is inside reserved CIDR 10.103.0.3/32'),
        "kubelet sees the shim's code-100 message in the CRI error (and retries: the next address is good)",
      );
      const retry = await bed.runPod('web-2');
      d.verdict(retry.ips[0] === '10.103.0.4', `the retried pod gets ${retry.ips[0]}`);

      d.say('\nStopPodSandbox + RemovePodSandbox (kubelet deleting the pods): containerd sends DEL at least twice per pod.');
      for (const p of [pod, retry]) await bed.removePod(p.id);
      // (a chained DEL leaves its record marked deleted until GC sees the pod gone: no attachment)
      const left = await ledgerAttachments(bed.stateDir, bed.network);
      const store = (await readdir(path.join(bed.dataDir, bed.network)).catch(() => [] as string[])).filter((f) => /^\d/.test(f));
      d.verdict(
        left.filter((f) => f.endsWith('.json')).length === 0 && store.length === 0,
        'no attachment left in the ledger, no host-local allocation, every DEL succeeded',
      );

      if (!on2) {
        d.say(
          `\n(The STATUS part needs containerd 2.x and reference plugins 1.9, which scripts/install-deps.sh provides; containerd ${containerdBuild(binDir).version} never sends STATUS.)`,
        );
        return;
      }
      const show = async (what: string, want: boolean) => {
        const started = performance.now();
        const c = await cri.networkReady();
        d.say(
          `  CRI Status after ${what}: NetworkReady=${c.status}${c.message ? `  (${c.reason}: ${c.message})` : ''}  [${(performance.now() - started).toFixed(0)} ms]`,
        );
        return c.status === want ? c : undefined;
      };
      d.say('\nThe same list at cniVersion 1.1.0 in front of cilium-cni 1.17, which supports at most 1.0.0:');
      await bed.setConfList({ ...list(bed), cniVersion: '1.1.0' });
      const refusedStatus = await show('loading the 1.1.0 list', false);
      d.verdict(
        refusedStatus?.message.includes('plugin version does not allow STATUS') === true,
        'NotReady: cilium-cni 1.17 refuses the list (every ADD would fail too): the lists for 1.17 stay at 1.0.0 or 0.3.1',
      );
      d.say('\nWith a newer cilium-cni (1.1.0, STATUS) containerd 2.x runs STATUS on every plugin at each CRI Status call (kubelet');
      d.say("polls every 5 s), so the shim's STATUS is part of the node's NetworkReady (false = NotReady, no new pods).");
      await bed.useCiliumLine('newer');
      d.verdict(
        (await show('the newer cilium-cni', true)) !== undefined,
        'Ready: cilium-agent answers, the shim finds its state dir writable and its delegate there; cilium-cni asks host-local 1.9 itself',
      );
      const stateDir = bed.stateDir;
      try {
        await d.show('mount', ['--bind', stateDir, stateDir]);
        await d.show('mount', ['-o', 'remount,bind,ro', stateDir]);
        const down = await show('making the state dir read-only', false);
        d.verdict(
          down?.message.includes(`state dir ${stateDir} is not writable`) === true,
          "NotReady, and the condition carries the shim's message: what is wrong and where",
        );
        await d.show('mount', ['-o', 'remount,bind,rw', stateDir]);
        d.verdict((await show('making it writable again', true)) !== undefined, 'Ready again on the next poll');
      } finally {
        await unmountBelow(stateDir);
      }
    } finally {
      await bed?.cleanup();
      await net.cleanup();
    }
  },
};
