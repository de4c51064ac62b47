// Fix 4, pod addresses inside someone else's subnet: an address inside reservedCIDRs is refused at ADD (100) and
// fails CHECK; STATUS fails when the delegate can only hand out such addresses; the node agent reports every pod
// the runtime knows that holds one (never touches it); doctor and the agent find the routes that capture reserved subnets;
// `ipam-shim plan` (plan/) tells which node CIDRs of a Cilium pool land on a reserved subnet.
import { ErrorCode } from '../cni/errors.js';
import type { Fix } from '../contract/fix.js';
import { delegateRangesVerdict, RESERVED, refuseReserved, reservedCidrs, reservedHold } from './decision.js';

export const reservedFix: Fix = {
  name: RESERVED,
  about: 'reserved subnets',
  // A bad reservedCIDRs list fails the ADD before the delegate allocates anything.
  validate: (conf) => void reservedCidrs(conf),
  refuse: refuseReserved,
  status(conf) {
    const { problem, overlapping } = delegateRangesVerdict(conf);
    return {
      ...(problem && { problem }),
      ...(overlapping.length && {
        warning: {
          msg: 'delegate ranges overlap reserved CIDRs: some ADDs will be refused',
          fields: { ranges: overlapping, reserved: reservedCidrs(conf).map((c) => c.text) },
        },
      }),
    };
  },
  holds: reservedHold,
  metrics: {
    families: {
      ipam_shim_reserved_refusals_total: { type: 'counter', help: 'ADDs refused because the address lies in a reserved CIDR (error 100).' },
    },
    tallies: [{ tally: 'reservedRefusals', family: 'ipam_shim_reserved_refusals_total' }],
    outcome: (verb, code) => (verb === 'ADD' && code === ErrorCode.ReservedAddress ? 'reservedRefusals' : undefined),
  },
  agent: {
    step: 'reserved',
    families: [
      {
        name: 'ipam_shim_agent_reserved_pods',
        type: 'gauge',
        help: "Pods in the runtime's result cache holding an address inside reservedCIDRs (reported, never touched; the log names each pod).",
        labelNames: ['network'],
      },
      {
        name: 'ipam_shim_agent_reserved_routes',
        type: 'gauge',
        help: "1 while a route on the node captures the reserved CIDR (doctor's reserved-routes rule: it sends the subnet elsewhere than the uplink, e.g. another node's pod-CIDR route), 0 once gone; absent when the routes could not be read.",
        labelNames: ['network', 'reserved', 'route', 'gateway'],
      },
    ],
    load: async () => (await import('./agent-step.js')).reservedStep,
  },
  doctor: async () => [(await import('./doctor.js')).reservedCheck],
  // Which node CIDRs of a Cilium pool collide with reserved subnets: an operator's command, off the CNI path.
  commands: { plan: async () => (await import('./plan/command.js')).planCommand },
};
