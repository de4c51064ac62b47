// Build time only (scripts/build.mjs, the single executable's V8 startup snapshot): evaluate the modules a CNI
// call needs and run their pure code once on made-up input, so the snapshot holds them evaluated and compiled
// (bytecode, zod's parsers built) and no invocation pays for that again.
//
// Nothing here may read the process (pid, environment, clock, stdio, files) or leave state a call could see:
// the snapshot is shared by every invocation. Only pure functions run, on constants; loggers write nowhere.
import { dispatch, type Verbs } from './cni/skel.js';
import { parseResult, convertResult, resultAddresses } from './cni/result.js';
import { LedgerRecordSchema } from './effects/ledger.js';
import { parsePrerouting, type ResidueRule } from './residue/parse.js';
import { findResidue } from './residue/clean.js';
import { parseNeighbours } from './effects/neigh.js';
import { findReservedHit } from './reserved/ranges.js';
import { parseCidrs } from './net/cidr.js';
import { bridgeVersion } from './cni/versions.js';
import { loggerTo } from './log.js';
import { parseDefaultRouteDev } from './effects/uplink.js';
import { decide } from './probe-rewrite/decide.js';
import { tableState } from './probe-rewrite/node.js';
import { parseProbeTable } from './probe-rewrite/ruleset.js';

const CONF = {
  cniVersion: '1.0.0',
  name: 'warm',
  type: 'ptp',
  ipam: { type: 'ipam-shim', stateDir: '/nonexistent', reservedCIDRs: ['192.0.2.0/24', '2001:db8::/32'], delegate: { type: 'host-local', ranges: [[{ subnet: '10.0.0.0/24' }]] } },
};
const RESULT = {
  cniVersion: '1.0.0',
  interfaces: [{ name: 'eth0', mac: '02:00:00:00:00:01', sandbox: '/run/netns/x' }],
  ips: [
    { address: '10.0.0.2/24', gateway: '10.0.0.1', interface: 0 },
    { address: 'fd00::2/64', gateway: 'fd00::1', interface: 0 },
  ],
  routes: [{ dst: '0.0.0.0/0' }],
  dns: {},
};
const EBTABLES = [
  'Bridge table: nat',
  '',
  'Bridge chain: PREROUTING, entries: 2, policy: ACCEPT',
  '-p ARP -i eth0 --arp-op Request --arp-ip-dst 10.0.0.2 -j arpreply --arpreply-mac 12:34:56:78:9a:bc',
  '-p IPv4 -i eth0 --ip-dst 10.0.0.2 -j dnat --to-dst 12:34:56:78:9a:bc --dnat-target ACCEPT',
  '-p IPv6 -i eth0 --ip6-dst fd00::2 -j dnat --to-dst 12:34:56:78:9a:bc --dnat-target ACCEPT',
].join('\n');
// `nft -j list table ip6 azureSLBProbe` as nft 1.0.6 prints the rewrite this shim installs.
const NFT = "{\"nftables\": [{\"metainfo\": {\"version\": \"1.0.6\", \"release_name\": \"Lester Gooch #5\", \"json_schema_version\": 1}}, {\"table\": {\"family\": \"ip6\", \"name\": \"azureSLBProbe\", \"handle\": 2}}, {\"chain\": {\"family\": \"ip6\", \"table\": \"azureSLBProbe\", \"name\": \"prerouting\", \"handle\": 1, \"type\": \"filter\", \"hook\": \"prerouting\", \"prio\": -300, \"policy\": \"accept\"}}, {\"chain\": {\"family\": \"ip6\", \"table\": \"azureSLBProbe\", \"name\": \"postrouting\", \"handle\": 2, \"type\": \"filter\", \"hook\": \"postrouting\", \"prio\": -300, \"policy\": \"accept\"}}, {\"rule\": {\"family\": \"ip6\", \"table\": \"azureSLBProbe\", \"chain\": \"prerouting\", \"handle\": 4, \"expr\": [{\"match\": {\"op\": \"==\", \"left\": {\"meta\": {\"key\": \"iifname\"}}, \"right\": \"eth0\"}}, {\"match\": {\"op\": \"==\", \"left\": {\"payload\": {\"protocol\": \"icmpv6\", \"field\": \"type\"}}, \"right\": {\"set\": [\"nd-router-advert\", \"nd-neighbor-solicit\", \"nd-neighbor-advert\"]}}}, {\"counter\": {\"packets\": 0, \"bytes\": 0}}, {\"accept\": null}]}}, {\"rule\": {\"family\": \"ip6\", \"table\": \"azureSLBProbe\", \"chain\": \"prerouting\", \"handle\": 5, \"expr\": [{\"match\": {\"op\": \"==\", \"left\": {\"meta\": {\"key\": \"iifname\"}}, \"right\": \"eth0\"}}, {\"match\": {\"op\": \"==\", \"left\": {\"payload\": {\"protocol\": \"ip6\", \"field\": \"saddr\"}}, \"right\": \"fe80::1234:5678:9abc\"}}, {\"mangle\": {\"key\": {\"payload\": {\"protocol\": \"ip6\", \"field\": \"saddr\"}}, \"value\": \"2603:1062:0:1:fe80:1234:5678:9abc\"}}, {\"counter\": {\"packets\": 0, \"bytes\": 0}}]}}, {\"rule\": {\"family\": \"ip6\", \"table\": \"azureSLBProbe\", \"chain\": \"postrouting\", \"handle\": 6, \"expr\": [{\"match\": {\"op\": \"==\", \"left\": {\"meta\": {\"key\": \"oifname\"}}, \"right\": \"eth0\"}}, {\"match\": {\"op\": \"==\", \"left\": {\"payload\": {\"protocol\": \"ip6\", \"field\": \"daddr\"}}, \"right\": \"2603:1062:0:1:fe80:1234:5678:9abc\"}}, {\"mangle\": {\"key\": {\"payload\": {\"protocol\": \"ip6\", \"field\": \"daddr\"}}, \"value\": \"fe80::1234:5678:9abc\"}}, {\"counter\": {\"packets\": 0, \"bytes\": 0}}]}}]}";
const ROUTE6 = '[{"dst":"default","gateway":"fe80::1","dev":"eth0","protocol":"ra","metric":1024,"flags":[],"pref":"medium"}]';
const NEIGH = '[{"dst":"10.0.0.2","dev":"eth0","lladdr":"12:34:56:78:9a:bc","state":["PERMANENT"]},{"dst":"fd00::2","dev":"eth0","state":["STALE"]}]';

export async function warm(): Promise<void> {
  // The built-in modules an ADD needs: child processes, fs/promises, crypto (temp names), pino's worker_threads.
  for (const m of ['node:child_process', 'node:crypto', 'node:fs/promises', 'node:net', 'node:worker_threads']) process.getBuiltinModule(m);
  // The modules the verbs load at run time, evaluated now (their top levels are pure).
  await import('./plugin.js');
  await import('./verbs/add.js');
  await import('./verbs/del.js');
  await import('./verbs/check.js');
  const log = loggerTo({ write() {} }, { level: 'info', base: { command: 'ADD', network: 'warm' } });
  const env = { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'warm', CNI_NETNS: '/run/netns/warm', CNI_IFNAME: 'eth0', CNI_PATH: '/nonexistent' };
  const fail = (): Promise<never> => Promise.reject(new Error('warm'));
  const verbs = async (): Promise<Verbs> => ({
    ADD: async () => {
      const result = convertResult(parseResult(RESULT, 'warm result'), '1.0.0');
      const ips = resultAddresses(result);
      findReservedHit(ips[0]!, parseCidrs(['192.0.2.0/24', '2001:db8::/32']));
      findReservedHit(ips[1]!, parseCidrs(['192.0.2.0/24', '2001:db8::/32']));
      const found = findResidue(ips, { rules: parsePrerouting(EBTABLES).rules.filter((r): r is ResidueRule => r.kind !== 'other'), neighbours: parseNeighbours(NEIGH) });
      decide({ table: tableState({ available: true, table: parseProbeTable(NFT) }, { uplink: parseDefaultRouteDev(ROUTE6) ?? 'eth0' }), uplink: true, bpf: undefined, mode: 'auto', ipv6: true });
      convertResult(result, '0.4.0');
      bridgeVersion('1.0.0', ['0.3.1', '0.4.0', '1.0.0']);
      LedgerRecordSchema.parse({
        v: 1, containerID: 'warm', ifname: 'eth0', network: 'warm', owner: 'pod', state: 'attached', placement: 'ipam',
        ips, netns: '/run/netns/warm', createdAt: '2000-01-01T00:00:00.000Z', updatedAt: '2000-01-01T00:00:00.000Z',
      });
      log.info({ ips, rules: found.rules.map((r) => r.text), timings: { boot: 1.5 } }, 'warm');
      return result;
    },
    DEL: fail,
    CHECK: fail,
    GC: fail,
    STATUS: fail,
  });
  const input = (conf: unknown) => () => Promise.resolve(JSON.stringify(conf));
  const added = await dispatch(env, input(CONF), verbs);
  // A warm-up that quietly took the error path would leave the ADD path cold: fail the build instead.
  if (added.exitCode !== 0) throw new Error(`snapshot warm-up: the sample ADD failed: ${added.stdout}`);
  await dispatch({ ...env, CNI_COMMAND: 'DEL' }, input(CONF), verbs).then((o) => log.error({ code: o.error?.code, msg: o.error?.msg }, 'warm'));
  await dispatch(env, input({ ...CONF, ipam: { ...CONF.ipam, delegate: 'x' } }), verbs); // an invalid config: the error path
}
