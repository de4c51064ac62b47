// The node agent's reserved step: every pod the runtime knows that holds an address inside reservedCIDRs (the pods
// step's view) is logged with its namespace/name and counted. Reported only: the address may be the reserved
// subnet's real owner's too, so neither the pod nor its address is touched.
import { attachmentKey } from '../cni/config.js';
import { podName } from '../fixes/pods.js';
import type { AgentStep } from '../fixes/agent-step.js';

export const reservedStep: AgentStep = {
  async reconcile(pass) {
    const { net } = pass;
    const gauge = pass.gauge('ipam_shim_agent_reserved_pods');
    const network = net.conf.name;
    // "Could not look" never reads as "found nothing": no series, not 0.
    if (!pass.runtime) {
      gauge.remove({ network });
      return 'skipped';
    }
    const reserved = pass.runtime.reserved;
    const pods = new Set(reserved.map((r) => attachmentKey(r.pod))).size;
    gauge.set({ network }, pods);
    pass.note({ reservedPods: pods });
    for (const r of reserved) {
      const { namespace, name, containerID, ifname } = r.pod;
      net.log.warn(
        { step: 'reserved', pod: podName(r.pod), namespace, name, containerID, ifname, ip: r.ip, reservedCIDR: r.cidr },
        `reserved: pod ${podName(r.pod)} holds ${r.ip}, inside reserved CIDR ${r.cidr}: replies to it are routed to the reserved subnet's owner and lost (reported only: the pod and its address are not touched; recreate it once the IPAM range avoids ${r.cidr})`,
      );
    }
    return 'ok';
  },
};
