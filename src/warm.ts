// Build time only (scripts/build.mjs, the single executable's V8 startup snapshot, src/snapshot.ts): evaluate the
// modules a CNI call needs and run the real verbs once on made-up input, so the snapshot holds them evaluated and
// compiled (bytecode, zod's parsers built) and no invocation pays for that again.
//
// The sample ADD and DEL are real CNI calls through runPlugin (the dispatcher, the logger on a file, the context
// builder with the file-backed ledger, the delegate runner, the verbs), with a scripted Run answering for a
// stand-in delegate and for the node's tools with their real output: every ADD and DEL step is
// warmed, a new one included, without a copy of the steps here. Code a call runs that the warm-up did not is
// parsed and compiled on every call (~0.1 ms per function).
//
// Nothing here may leave state a call could see: the snapshot is shared by every invocation. Files: a private
// temp dir (the ledger, the log, the stand-in delegate), removed before the snapshot is written; the lock module
// reads the process's identity per process (src/effects/lock.ts). The spans the verbs record go.
// The node's tools (ebtables, ip, nft) are never run here: the build machine's network is not ours.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { scriptedRun } from './doubles/scripted-run.js';
import { takeSpans } from './spans.js';

const DELEGATE = 'warm-ipam';
const conf = (dir: string) => ({
  cniVersion: '1.0.0',
  name: 'warm',
  type: 'ptp',
  ipam: {
    type: 'ipam-shim',
    stateDir: join(dir, 'state'),
    logFile: join(dir, 'shim.log'),
    reservedCIDRs: ['192.0.2.0/24', '2001:db8::/32'],
    delegate: { type: DELEGATE, ranges: [[{ subnet: '10.0.0.0/24' }]] },
  },
});
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
const NFT =
  '{"nftables": [{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}}, {"table": {"family": "ip6", "name": "azureSLBProbe", "handle": 2}}, {"chain": {"family": "ip6", "table": "azureSLBProbe", "name": "prerouting", "handle": 1, "type": "filter", "hook": "prerouting", "prio": -300, "policy": "accept"}}, {"chain": {"family": "ip6", "table": "azureSLBProbe", "name": "postrouting", "handle": 2, "type": "filter", "hook": "postrouting", "prio": -300, "policy": "accept"}}, {"rule": {"family": "ip6", "table": "azureSLBProbe", "chain": "prerouting", "handle": 4, "expr": [{"match": {"op": "==", "left": {"meta": {"key": "iifname"}}, "right": "eth0"}}, {"match": {"op": "==", "left": {"payload": {"protocol": "icmpv6", "field": "type"}}, "right": {"set": ["nd-router-advert", "nd-neighbor-solicit", "nd-neighbor-advert"]}}}, {"counter": {"packets": 0, "bytes": 0}}, {"accept": null}]}}, {"rule": {"family": "ip6", "table": "azureSLBProbe", "chain": "prerouting", "handle": 5, "expr": [{"match": {"op": "==", "left": {"meta": {"key": "iifname"}}, "right": "eth0"}}, {"match": {"op": "==", "left": {"payload": {"protocol": "ip6", "field": "saddr"}}, "right": "fe80::1234:5678:9abc"}}, {"mangle": {"key": {"payload": {"protocol": "ip6", "field": "saddr"}}, "value": "2603:1062:0:1:fe80:1234:5678:9abc"}}, {"counter": {"packets": 0, "bytes": 0}}]}}, {"rule": {"family": "ip6", "table": "azureSLBProbe", "chain": "postrouting", "handle": 6, "expr": [{"match": {"op": "==", "left": {"meta": {"key": "oifname"}}, "right": "eth0"}}, {"match": {"op": "==", "left": {"payload": {"protocol": "ip6", "field": "daddr"}}, "right": "2603:1062:0:1:fe80:1234:5678:9abc"}}, {"mangle": {"key": {"payload": {"protocol": "ip6", "field": "daddr"}}, "value": "fe80::1234:5678:9abc"}}, {"counter": {"packets": 0, "bytes": 0}}]}}]}';
const ROUTE6 = '[{"dst":"default","gateway":"fe80::1","dev":"eth0","protocol":"ra","metric":1024,"flags":[],"pref":"medium"}]';
const NEIGH = '[{"dst":"10.0.0.2","dev":"eth0","lladdr":"12:34:56:78:9a:bc","state":["PERMANENT"]},{"dst":"fd00::2","dev":"eth0","state":["STALE"]}]';

/**
 * The answers of the stand-in delegate (VERSION, ADD with RESULT, DEL) and of the node's tools: the residue listings,
 * the probe table, the uplink; deletions succeed; the rest is absent.
 */
export const warmRun = scriptedRun((file, args, opts) => {
  if (file.endsWith(`/${DELEGATE}`)) {
    const command = opts.env?.CNI_COMMAND;
    return command === 'VERSION'
      ? JSON.stringify({ cniVersion: '1.1.0', supportedVersions: ['0.3.1', '0.4.0', '1.0.0', '1.1.0'] })
      : command === 'ADD'
        ? JSON.stringify(RESULT)
        : '';
  }
  const cmd = `${file} ${args.join(' ')}`;
  if (cmd === 'ebtables -t nat -L PREROUTING') return EBTABLES;
  if (cmd === 'ip -j neigh show') return NEIGH;
  if (cmd.startsWith('nft -j list table ip6')) return NFT;
  if (cmd === 'ip -j -6 route show default') return ROUTE6;
  if (/^ip -j -[46] route show table all$/.test(cmd)) return '[]';
  if (cmd === 'ip -j link show') return '[{"ifname":"eth0","address":"02:00:00:00:00:09"}]';
  if (file === 'ebtables' || (file === 'ip' && args[0] === 'neigh')) return '';
  return undefined;
});

export async function warm(): Promise<void> {
  // The one built-in module an ADD needs beyond Node's own start-up: child processes. Its file calls are
  // synchronous (no fs/promises); pino's worker threads are not bundled.
  process.getBuiltinModule('node:child_process');
  // The modules the verbs load at run time, evaluated now (their top levels are pure).
  const { runPlugin } = await import('./plugin.js');
  await import('./verbs/add.js');
  await import('./verbs/del.js');
  await import('./verbs/check.js');
  // STATUS too: containerd ≥ 2.0.1 sends it every 5 s per node when the list is at 1.1.0 (docs/performance.md).
  await import('./verbs/status.js');
  const dir = mkdtempSync(join(tmpdir(), 'ipam-shim-warm-'));
  try {
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    // The delegate is found on CNI_PATH as a real one is, but never started: warmRun answers for it. A warm-up
    // that started it through the exec wrapper (a child process, its pipes and timers) built a snapshot in which
    // a call's later timer wait (the ledger lock's retry) never fired: the call ran out of work and exited 0 with
    // nothing on stdout (45 of 64 concurrent ADDs; test/e2e/concurrency.test.ts keeps it from coming back).
    // Nothing here starts a program.
    writeFileSync(join(bin, DELEGATE), '');
    chmodSync(join(bin, DELEGATE), 0o755);
    const env = { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'warm', CNI_NETNS: '/run/netns/warm', CNI_IFNAME: 'eth0', CNI_PATH: bin };
    const call = (command: string, c: unknown) => runPlugin({ ...env, CNI_COMMAND: command }, () => Promise.resolve(JSON.stringify(c)), {}, warmRun);
    const good = conf(dir);
    // A warm-up that quietly took the error path would leave the ADD path cold: fail the build instead.
    const added = await call('ADD', good);
    if (added.exitCode !== 0) throw new Error(`snapshot warm-up: the sample ADD failed: ${added.stdout}`);
    const deleted = await call('DEL', good);
    if (deleted.exitCode !== 0) throw new Error(`snapshot warm-up: the sample DEL failed: ${deleted.stdout}`);
    const status = await call('STATUS', { ...good, cniVersion: '1.1.0' });
    if (status.exitCode !== 0) throw new Error(`snapshot warm-up: the sample STATUS failed: ${status.stdout}`);
    await call('ADD', { ...good, ipam: { ...good.ipam, delegate: 'x' } }); // an invalid config: the error path
  } finally {
    rmSync(dir, { recursive: true, force: true });
    // The spans the verbs recorded (the log lines' timings) must not show up in a real call's.
    takeSpans();
  }
}
