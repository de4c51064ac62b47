// The routed node both reserved-subnet route tests use (test/integration/routes.test.ts, test/e2e/doctor-routes.test.ts):
// a "node" netns with an uplink up0 → netns vnet (VNet gateway 10.240.0.1 / fd00:240::1, the default routes)
// and a local device vx0 → netns peer (another node at 10.99.0.2 / fd00:99::2). Each test plants its own
// routes on top. Names are unique per call (TestNet.netns); net.cleanup() removes everything.
import { inNs, type TestNet } from './netns.js';

/** Builds the node and returns its netns name. `prefix` starts the three netns names (e.g. `d` → dnode-…). */
export async function routedNode(net: TestNet, prefix = ''): Promise<string> {
  const node = await net.netns(`${prefix}node`);
  const vnet = await net.netns(`${prefix}vnet`);
  const peer = await net.netns(`${prefix}peer`);
  await net.veth(node, 'up0', vnet, 'eth0');
  await net.veth(node, 'vx0', peer, 'eth0');
  const ip = (...args: string[]) => inNs(node, 'ip', args);
  await ip('addr', 'add', '10.240.0.5/16', 'dev', 'up0');
  await ip('addr', 'add', '10.99.0.1/24', 'dev', 'vx0');
  await ip('-6', 'addr', 'add', 'fd00:240::5/64', 'dev', 'up0', 'nodad');
  await ip('-6', 'addr', 'add', 'fd00:99::1/64', 'dev', 'vx0', 'nodad');
  await ip('route', 'add', 'default', 'via', '10.240.0.1', 'dev', 'up0');
  await ip('-6', 'route', 'add', 'default', 'via', 'fd00:240::1', 'dev', 'up0');
  return node;
}
