// What an operator's terminal receives (issue 34, item 5): pod names and namespaces come from outside, by two
// paths: the runtime's CNI_ARGS at ADD (kept in the ledger record: `ledger`, `doctor`) and the runtime's result
// cache (doctor's runtime-pods check, `gc`). Through the BUILT executable, the text output carries no raw control
// character (ESC[2J clears the screen, BEL rings, a newline forges a row, U+202E reverses what follows), each
// attachment or finding is one row, and --json is the same exact JSON value.
import { execa } from 'execa';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { invoke, PLUGIN_DIR, scratch, SEA_SHIM } from '../support/shim/cni.js';
import { hostLocal, shimKeys } from '../support/shim/conf.js';
import { rawControls } from '../support/shim/terminal.js';

let s: Awaited<ReturnType<typeof scratch>>;
beforeEach(async () => {
  s = await scratch();
});
afterEach(async () => {
  await s.cleanup();
});

const NETWORK = 'textnet';
/** A name whose every part a terminal would act on: a row of its own after the newline, to be forged. */
const NAME = 'web\u001b[2J\u0007-0\nshop/ghost  10.96.0.99  pod  ipam  attached  1s\u009b31m\u202eexe.txt\u2028x';
const NAMESPACE = 'shop\u001b[8m\u0007\r';

const cli = (...args: string[]) =>
  execa(SEA_SHIM, args, { reject: false, env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' }, extendEnv: false, timeout: 60_000 });

/** The shim in the IPAM slot over host-local, in a conflist of its own; run in the host's namespace (no probe table). */
async function network() {
  const ipam = shimKeys({ dirs: s, probeRewrite: false, delegate: hostLocal(s.dataDir, '10.96.0.0/24') });
  const conf = { cniVersion: '1.0.0', name: NETWORK, type: 'ptp', ipam };
  const confDir = join(s.dir, 'net.d');
  await mkdir(confDir, { recursive: true });
  const conflist = join(confDir, `10-${NETWORK}.conflist`);
  await writeFile(conflist, JSON.stringify({ cniVersion: '1.0.0', name: NETWORK, plugins: [{ type: 'ptp', ipam }] }));
  return { conf, conflist };
}

/** ADD as kubelet's runtime calls it, the pod named in CNI_ARGS. */
async function add(conf: unknown, containerID: string, namespace: string, name: string): Promise<string> {
  const args = `IgnoreUnknown=1;K8S_POD_NAMESPACE=${namespace};K8S_POD_NAME=${name};K8S_POD_INFRA_CONTAINER_ID=${containerID}`;
  const r = await invoke(conf, { command: 'ADD', containerID, netns: `/var/run/netns/${containerID}`, ifname: 'eth0', args });
  expect(r.exitCode, r.stdout).toBe(0);
  return (r.json.ips[0].address as string).split('/')[0]!;
}

/** libcni's cache entry (cniCacheV1) for a pod, as containerd writes it. */
async function cached(cacheDir: string, containerID: string, namespace: string, name: string, address: string) {
  await mkdir(join(cacheDir, 'results'), { recursive: true, mode: 0o700 });
  await writeFile(
    join(cacheDir, 'results', `${NETWORK}-${containerID}-eth0`),
    JSON.stringify({
      kind: 'cniCacheV1',
      containerId: containerID,
      ifName: 'eth0',
      networkName: NETWORK,
      cniArgs: [
        ['K8S_POD_NAMESPACE', namespace],
        ['K8S_POD_NAME', name],
      ],
      result: { cniVersion: '1.0.0', ips: [{ address }] },
    }),
    { mode: 0o600 },
  );
}

/** doctor's text: each line is the head, a finding, its fix, a blank, or the verdict; one finding line per finding. */
function expectDoctorRows(text: string, findings: number) {
  const lines = text.trimEnd().split('\n');
  const finding = /^(ok {5}|WARN {3}|PROBLEM|skipped) {2}\S/;
  for (const l of lines.slice(1, -1)) expect(l, 'a finding, its fix, or a blank').toMatch(new RegExp(`${finding.source}|^ +fix: |^$`));
  expect(lines.filter((l) => finding.test(l))).toHaveLength(findings);
}

describe('pod names from outside, as an operator reads them', () => {
  it('from CNI_ARGS at ADD: `ledger` prints one row per attachment, escaped; doctor no raw control character; --json exact', async () => {
    const { conf, conflist } = await network();
    await add(conf, 'pod-a', NAMESPACE, NAME);
    await add(conf, 'pod-b', 'shop', 'web-1');

    const text = await cli('ledger', '--conflist', conflist);
    expect(text.exitCode, text.stderr).toBe(0);
    expect(rawControls(text.stdout)).toEqual([]);
    const lines = text.stdout.trimEnd().split('\n');
    // head, blank, header, one row per attachment: the newline in the name forged no row.
    expect(lines, text.stdout).toHaveLength(5);
    expect(lines[2]).toMatch(/^CONTAINER +IFNAME +POD /);
    const row = lines.find((l) => l.startsWith('pod-a'))!;
    expect(row).toContain('shop\\x1b[8m\\x07\\x0d/web\\x1b[2J\\x07-0\\x0ashop/ghost  10.96.0.99');
    expect(row).toContain('\\u009b31m\\u202eexe.txt\\u2028x');
    // The columns after the pod line up with the header's (nothing in the name moved them).
    expect(row.lastIndexOf('  ipam  ') + 2).toBe(lines[2]!.indexOf('PLACEMENT'));

    const json = await cli('ledger', '--conflist', conflist, '--json');
    expect(json.exitCode, json.stderr).toBe(0);
    expect(rawControls(json.stdout)).toEqual([]);
    const pods = (JSON.parse(json.stdout).attachments as Array<{ containerID: string; pod: { namespace: string; name: string } }>).map((a) => [
      a.containerID,
      a.pod,
    ]);
    expect(pods).toEqual(
      expect.arrayContaining([
        ['pod-a', expect.objectContaining({ namespace: NAMESPACE, name: NAME })],
        ['pod-b', expect.objectContaining({ namespace: 'shop', name: 'web-1' })],
      ]),
    );

    const cacheDir = join(s.dir, 'cache');
    await cached(cacheDir, 'pod-a', NAMESPACE, NAME, '10.96.0.2/24');
    const doctor = await cli('doctor', '--conflist', conflist, '--cni-path', PLUGIN_DIR, '--cache-dir', cacheDir);
    expect(rawControls(doctor.stdout)).toEqual([]);
    const doctorJson = await cli('doctor', '--conflist', conflist, '--cni-path', PLUGIN_DIR, '--cache-dir', cacheDir, '--json');
    expectDoctorRows(doctor.stdout, JSON.parse(doctorJson.stdout).findings.length);
  });

  it("from the runtime's result cache: doctor's runtime-pods findings and `gc` are one row each, escaped; --json exact", async () => {
    const { conf, conflist } = await network();
    const seen = await add(conf, 'pod-a', 'shop', 'web-0');
    const cacheDir = join(s.dir, 'cache');
    await cached(cacheDir, 'pod-a', 'shop', 'web-0', `${seen}/24`);
    // Pods the shim never saw (started outside the chain), named by the runtime; one whose address is not one.
    await cached(cacheDir, 'pod-x', NAMESPACE, NAME, '10.96.0.50/24');
    await cached(cacheDir, 'pod-y', 'shop', `db\n${'PROBLEM  ledger  forged'}`, '10.96.0.51/24');
    await cached(cacheDir, 'pod-z', NAMESPACE, NAME, '10.96.0.52\u001b[31m/24');

    const doctor = await cli('doctor', '--conflist', conflist, '--cni-path', PLUGIN_DIR, '--cache-dir', cacheDir);
    expect(rawControls(doctor.stdout)).toEqual([]);
    const json = await cli('doctor', '--conflist', conflist, '--cni-path', PLUGIN_DIR, '--cache-dir', cacheDir, '--json');
    expect(rawControls(json.stdout)).toEqual([]);
    const findings = JSON.parse(json.stdout).findings as Array<{ check: string; verdict: string; summary: string }>;
    expectDoctorRows(doctor.stdout, findings.length);
    const pods = findings.filter((f) => f.check === 'runtime-pods');
    // --json keeps the names exactly as the runtime gave them.
    expect(pods).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ verdict: 'warn', summary: expect.stringContaining(`${NAMESPACE}/${NAME}`) }),
        expect.objectContaining({ verdict: 'warn', summary: expect.stringContaining("the runtime's cache entry of") }),
      ]),
    );
    const unseen = doctor.stdout.split('\n').find((l) => l.includes('were never seen by the shim'))!;
    expect(unseen).toContain('shop\\x1b[8m\\x07\\x0d/web\\x1b[2J\\x07-0\\x0ashop/ghost');
    expect(unseen).toContain('shop/db\\x0aPROBLEM  ledger  forged');
    expect(doctor.stdout.split('\n').filter((l) => l.startsWith('PROBLEM  ledger'))).toEqual([]);

    const gc = await cli('gc', '--conflist', conflist, '--cni-path', PLUGIN_DIR, '--cache-dir', cacheDir, '--grace-seconds', '0');
    expect(rawControls(gc.stdout + gc.stderr)).toEqual([]);
    const gcJson = await cli('gc', '--conflist', conflist, '--cni-path', PLUGIN_DIR, '--cache-dir', cacheDir, '--grace-seconds', '0', '--json');
    const report = JSON.parse(gcJson.stdout) as { kept: unknown[]; release: unknown[]; errors: unknown[] };
    // The head line, then one line per attachment kept or to release, one per error.
    expect(gc.stdout.trimEnd().split('\n'), gc.stdout).toHaveLength(1 + report.kept.length + report.release.length + report.errors.length);
    // Each row names the pod, as `ledger` does (issue 37).
    expect(
      gc.stdout.split('\n').find((l) => l.includes('pod-a/eth0')),
      gc.stdout,
    ).toMatch(/^keep +pod-a\/eth0 {2}shop\/web-0 {2}10\.96\.0\./);
  });

  it("`gc` names each attachment's pod as `ledger` does: escaped, one row each, whatever the name holds", async () => {
    const { conf, conflist } = await network();
    await add(conf, 'pod-a', NAMESPACE, NAME);
    const ip = await add(conf, 'pod-b', 'shop', 'web-1');
    const cacheDir = join(s.dir, 'cache');
    await cached(cacheDir, 'pod-b', 'shop', 'web-1', `${ip}/24`); // pod-a is gone from the cache: it would be released
    const gc = await cli('gc', '--conflist', conflist, '--cni-path', PLUGIN_DIR, '--cache-dir', cacheDir, '--grace-seconds', '0');
    expect(gc.exitCode, gc.stderr).toBe(1); // the dry run found something to release
    expect(rawControls(gc.stdout)).toEqual([]);
    const lines = gc.stdout.trimEnd().split('\n');
    expect(lines, gc.stdout).toHaveLength(3);
    expect(lines.find((l) => l.includes('pod-a/eth0'))).toContain(
      'would release pod-a/eth0  shop\\x1b[8m\\x07\\x0d/web\\x1b[2J\\x07-0\\x0ashop/ghost  10.96.0.99',
    );
    expect(lines.find((l) => l.includes('pod-b/eth0'))).toContain(`pod-b/eth0  shop/web-1  ${ip}`);
  });
});
