// The node agent's reserved step, two looks on every pass:
// - pods: every pod the runtime knows that holds an address inside reservedCIDRs (the pods step's view) is logged
//   with its namespace/name and counted. Reported only: the address may be the reserved subnet's real owner's too,
//   so neither the pod nor its address is touched.
// - routes: every route that captures a reserved CIDR (THE rule doctor's reserved-routes applies,
//   src/reserved/node-routes.ts; the firewall incident: another node's pod-CIDR route over the firewall subnet)
//   reads 1 in ipam_shim_agent_reserved_routes{network,reserved,route,gateway}, 0 once it is gone; logged once when
//   it appears and once when it goes. Reported only: the route is another component's (Cilium's, the cloud's).
import { attachmentKey } from '../ledger/key.js';
import { podName } from '../pods/view.js';
import type { AgentStep, Pass, StepOutcome } from '../contract/agent-step.js';
import { Lasting } from '../contract/lasting.js';
import { RESERVED, reservedCidrs } from './decision.js';
import { capturingRoutes, lookAtRoutes, routeGateway } from './node-routes.js';

export const reservedStep: AgentStep = {
  async reconcile(pass) {
    const pods = reservedPods(pass);
    const routes = await reservedRoutes(pass);
    // Skipped only when neither look ran (the runtime's cache out of sight and no reserved CIDR or uplink to judge).
    return pods === 'skipped' && routes === 'skipped' ? 'skipped' : 'ok';
  },
};

function reservedPods(pass: Pass): StepOutcome {
  const { net } = pass;
  const gauge = pass.gauge('ipam_shim_agent_reserved_pods');
  const network = net.conf.name;
  // "Could not look" never reads as "found nothing": no series, not 0.
  if (!pass.runtime) {
    gauge.remove({ network });
    return 'skipped';
  }
  const reserved = pass.runtime.held.filter((h) => h.fix === RESERVED);
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
}

/** One capturing route as the gauge labels it (with `network`) and the log names it. */
interface Capture {
  reserved: string;
  route: string;
  gateway: string;
  reason: string;
  fix: string;
}

const captureKey = (c: Capture) => `${c.reserved} ${c.route}`;

/**
 * The routes that capture a reserved CIDR. Routes that cannot be read fail the step (thrown after the pods' look),
 * and the route series are then removed, not left at their last value nor set to 0: could not look.
 */
async function reservedRoutes(pass: Pass): Promise<'ok' | 'skipped'> {
  const { net } = pass;
  const network = net.conf.name;
  const gauge = pass.gauge('ipam_shim_agent_reserved_routes');
  const state = pass.state(() => ({ captures: new Lasting<Capture>(captureKey), blind: new Lasting<{ why: string }>((b) => b.why) }));
  const labels = (c: Capture) => ({ network, reserved: c.reserved, route: c.route, gateway: c.gateway });
  const forget = () => {
    for (const c of state.captures.current()) gauge.remove(labels(c));
  };
  const reserved = reservedCidrs(net.conf);
  if (!reserved.length) {
    forget();
    state.captures.update([]);
    return 'skipped';
  }
  let look: Awaited<ReturnType<typeof lookAtRoutes>>;
  try {
    look = await lookAtRoutes(net.run, net.conf.settings.uplink);
  } catch (e) {
    forget();
    throw e;
  }
  const blind = state.blind.update(
    look.uplink ? [] : [{ why: 'no "uplink" is configured and the node has no default route: routes that capture reserved CIDRs cannot be told' }],
  );
  for (const b of blind.started) net.log.warn({ step: 'reserved', why: b.why }, `reserved: ${b.why} (set "uplink" in the shim's config)`);
  if (!look.uplink) {
    forget();
    return 'skipped';
  }
  for (const b of blind.ended) net.log.info({ step: 'reserved', uplink: look.uplink, since: b.since }, 'reserved: the uplink is known again');
  const found: Capture[] = capturingRoutes(look, reserved).map((c) => ({
    reserved: c.reserved,
    route: c.text,
    gateway: routeGateway(c.route),
    reason: c.reason,
    fix: c.fix,
  }));
  const { started, ended } = state.captures.update(found);
  for (const c of found) gauge.set(labels(c), 1);
  for (const c of ended) gauge.set(labels(c), 0);
  pass.note({ reservedRoutes: found.length });
  for (const c of started)
    net.log.warn(
      { step: 'reserved', route: c.route, gateway: c.gateway, reservedCIDR: c.reserved, reason: c.reason, uplink: look.uplink, fix: c.fix },
      `reserved: route "${c.route}"${c.gateway ? ` (gateway ${c.gateway})` : ''} captures reserved subnet ${c.reserved}: its traffic leaves through something other than ${look.uplink} (reported only: the route is not touched; logged again when it goes)`,
    );
  for (const c of ended)
    net.log.info(
      { step: 'reserved', route: c.route, gateway: c.gateway, reservedCIDR: c.reserved, since: c.since },
      `reserved: route "${c.route}"${c.gateway ? ` (gateway ${c.gateway})` : ''} no longer captures reserved subnet ${c.reserved}`,
    );
  return 'ok';
}
