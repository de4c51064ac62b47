// The built plugin against bad input: every case gets one well-formed error object with the exact code,
// a non-zero exit, and leaves nothing behind in the delegate's store or the ledger.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { readFile } from 'node:fs/promises';
import { hostLocalAllocations, invoke, ledgerRecords, scratch, SEA_SHIM, SHIM } from '../support/shim/cni.js';
import { hostLocal, shimConf } from '../support/shim/conf.js';
import { pidsIn, waitGone } from '../support/shim/robust.js';
import { ErrorCode } from '../../src/cni/errors.js';

let s: Awaited<ReturnType<typeof scratch>>;
beforeEach(async () => {
  s = await scratch();
});
afterEach(async () => {
  await s.cleanup();
});

const slot = (over: Record<string, unknown> = {}, ipamOver: Record<string, unknown> = {}) =>
  shimConf({ name: 'proto', dirs: s, delegate: hostLocal(s.dataDir, '10.98.0.0/24'), keys: { delegateTimeoutMs: 1500, ...ipamOver }, top: over });
const add = { command: 'ADD', containerID: 'c1', netns: '/var/run/netns/none', ifname: 'eth0' };

async function expectError(out: Awaited<ReturnType<typeof invoke>>, code: number) {
  expect(out.exitCode, out.stdout + out.stderr).not.toBe(0);
  expect(out.stdout.trim().split('\n')).toHaveLength(1);
  expect(out.json).toMatchObject({ code });
  expect(typeof out.json.msg).toBe('string');
  expect(typeof out.json.cniVersion).toBe('string');
  expect(await hostLocalAllocations(s.dataDir, 'proto')).toEqual([]);
  expect(await ledgerRecords(s.stateDir, 'proto')).toEqual([]);
}

describe('VERSION and about', () => {
  it('answers VERSION with every supported version, echoing a supported config version', async () => {
    for (const v of ['0.3.1', '1.1.0']) {
      const out = await invoke({ cniVersion: v }, { command: 'VERSION' });
      expect(out.exitCode).toBe(0);
      expect(out.json).toEqual({ cniVersion: v, supportedVersions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] });
    }
  });
  it('answers VERSION with empty stdin', async () => {
    const out = await invoke('', { command: 'VERSION' });
    expect(out.json.supportedVersions).toContain('1.1.0');
  });
  it('prints an about line on stderr and exits 0 with no CNI_COMMAND', async () => {
    const r = await execa(SHIM, [], { reject: false, env: { CNI_COMMAND: '' } });
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/ipam-shim CNI plugin/);
  });
});

describe('bad input gets the right CNI error', () => {
  it('malformed JSON → 6', async () => expectError(await invoke('{"cniVersion": ', add), 6));
  it('JSON that is not an object → 6', async () => expectError(await invoke('[1,2]', add), 6));
  it('empty stdin → 6', async () => expectError(await invoke('', add), 6));
  it('NUL bytes → 6', async () => expectError(await invoke('{"cniVersion":"1.0.0"\u0000}', add), 6));
  it('unknown CNI_COMMAND → 4', async () => expectError(await invoke(slot(), { ...add, command: 'FROB' }), 4));
  it('missing CNI_CONTAINERID → 3', async () => expectError(await invoke(slot(), { ...add, containerID: '' }), 3));
  it('missing CNI_NETNS and CNI_IFNAME → 4 naming both', async () => {
    const out = await invoke(slot(), { ...add, netns: '', ifname: '' });
    await expectError(out, 4);
    expect(out.json.msg).toMatch(/CNI_NETNS/);
    expect(out.json.msg).toMatch(/CNI_IFNAME/);
  });
  it('invalid container ID → 4', async () => expectError(await invoke(slot(), { ...add, containerID: '../etc' }), 4));
  it('ifname too long → 4', async () => expectError(await invoke(slot(), { ...add, ifname: 'a'.repeat(16) }), 4));
  it('ifname with a slash → 4', async () => expectError(await invoke(slot(), { ...add, ifname: 'a/b' }), 4));
  it('unsupported cniVersion → 1', async () => expectError(await invoke(slot({ cniVersion: '0.2.0' }), add), 1));
  it('missing cniVersion → 1', async () => expectError(await invoke(slot({ cniVersion: undefined }), add), 1));
  it('CHECK at 0.3.1 → 1', async () => expectError(await invoke(slot({ cniVersion: '0.3.1' }), { ...add, command: 'CHECK' }), 1));
  it('GC at 1.0.0 → 1', async () => expectError(await invoke(slot(), { command: 'GC', path: ['/usr/lib/cni'] }), 1));
  it('missing network name → 7', async () => expectError(await invoke(slot({ name: undefined }), add), 7));
  it('a network name longer than a directory name (300 bytes) → 7 for every verb but VERSION, nothing created', async () => {
    const name = 'n'.repeat(300);
    for (const inv of [add, { ...add, command: 'CHECK' }, { ...add, command: 'DEL' }]) {
      const out = await invoke(slot({ name }), inv);
      await expectError(out, 7);
      expect(out.json.msg, inv.command).toMatch(/network name too long/);
    }
    for (const command of ['GC', 'STATUS'])
      await expectError(await invoke(slot({ name, cniVersion: '1.1.0' }), { command, path: ['/usr/lib/cni'] }), 7);
  });
  it('unknown shim key → 2 naming the key', async () => {
    const out = await invoke(slot({}, { stateDirr: '/tmp/x' }), add);
    await expectError(out, 2);
    expect(out.json.msg).toContain('stateDirr');
  });
  it('bad value → 7 naming the field', async () => {
    const out = await invoke(slot({}, { delegateTimeoutMs: 'soon' }), add);
    await expectError(out, 7);
    expect(out.json.details).toContain('delegateTimeoutMs');
  });
  it('missing delegate in the IPAM slot → 7', async () => expectError(await invoke(slot({}, { delegate: undefined }), add), 7));
  it('delegate type with a slash → 7', async () => {
    for (const type of ['../../bin/sh', '/bin/sh', '.', '']) {
      await expectError(await invoke(slot({}, { delegate: { type } }), add), 7);
    }
  });
  it('delegate not on CNI_PATH → 7', async () => expectError(await invoke(slot({}, { delegate: { type: 'no-such-ipam' } }), add), 7));
  it('delegate that exits 1 with garbage → 101 with its stderr', async () => {
    const out = await invoke(slot({}, { delegate: { type: 'fake-ipam' } }), { ...add, env: { FAKE_IPAM_MODE: 'garbage' } });
    await expectError(out, 101);
    expect(out.json.details).toContain('panic: runtime error');
  });
  it("delegate's own error object passes through unchanged", async () => {
    const out = await invoke(slot({}, { delegate: { type: 'fake-ipam' } }), { ...add, env: { FAKE_IPAM_MODE: 'error' } });
    await expectError(out, 102);
    expect(out.json).toMatchObject({ msg: 'no more addresses in the CNS pool', details: 'pool exhausted' });
  });
  it('delegate that hangs → 11 within the timeout, its process group killed', async () => {
    const started = Date.now();
    const pidFile = `${s.dir}/hang.pids`;
    const out = await invoke(slot({}, { delegate: { type: 'fake-ipam' } }), { ...add, env: { FAKE_IPAM_MODE: 'hang', FAKE_IPAM_PIDS: pidFile } });
    await expectError(out, 11);
    expect(Date.now() - started).toBeLessThan(10_000);
    // Exactly this delegate's processes (a global `pgrep sleep` also saw other suites' hanging delegates). SIGKILL
    // is delivered asynchronously, so "gone" may take a moment after the shim has answered.
    const pids = await pidsIn(pidFile);
    expect(pids).toHaveLength(3);
    expect(await waitGone(pids, 2000)).toEqual([]);
  });
  it('delegate result without IPs → 101, and the delegate is DELed', async () => {
    const log = `${s.dir}/fake.log`;
    const out = await invoke(slot({}, { delegate: { type: 'fake-ipam' } }), { ...add, env: { FAKE_IPAM_MODE: 'noips', FAKE_IPAM_LOG: log } });
    await expectError(out, 101);
    expect((await readFile(log, 'utf8')).split('\n').map((l) => l.split(' ')[0])).toContain('DEL');
  });
  it('reservedCIDRs with a typo → 7 before the delegate is asked for anything', async () => {
    const log = `${s.dir}/fake.log`;
    const conf = slot({}, { delegate: { type: 'fake-ipam' }, reservedCIDRs: ['10.0.0.0/8', '10.1.0.0/33'] });
    const out = await invoke(conf, { ...add, env: { FAKE_IPAM_LOG: log } });
    await expectError(out, 7);
    expect(out.json.msg).toBe('invalid reservedCIDRs');
    await expect(readFile(log, 'utf8')).rejects.toMatchObject({ code: 'ENOENT' }); // not even VERSION
    // DEL does not need the list: a typo added later cannot keep a pod from going away.
    expect((await invoke(conf, { ...add, command: 'DEL', env: { FAKE_IPAM_LOG: log } })).exitCode).toBe(0);
  });
  it('delegate result that is not JSON → 101', async () =>
    expectError(await invoke(slot({}, { delegate: { type: 'fake-ipam' } }), { ...add, env: { FAKE_IPAM_MODE: 'badjson' } }), 101));
  it('stdin too large → 5', async () => expectError(await invoke(JSON.stringify({ ...slot(), pad: 'x'.repeat(5 * 1024 * 1024) }), add), 5));
  it('chained without prevResult → 7', async () => expectError(await invoke(shimConf({ placement: 'chained', name: 'proto', dirs: s }), add), 7));
  it("delegate result with an address that is not an IP → 101 (the delegate's fault), and the delegate is DELed", async () => {
    const log = `${s.dir}/fake.log`;
    const out = await invoke(slot({}, { delegate: { type: 'fake-ipam' } }), { ...add, env: { FAKE_IPAM_MODE: 'notip', FAKE_IPAM_LOG: log } });
    await expectError(out, 101);
    expect(`${out.json.msg} ${out.json.details}`).toContain('banana');
    expect((await readFile(log, 'utf8')).split('\n').map((l) => l.split(' ')[0])).toContain('DEL');
  });
  it("an error raised before the config is read carries the config's cniVersion", async () => {
    for (const [inv, code] of [
      [{ ...add, containerID: '../etc' }, 4],
      [{ ...add, command: 'FROB' }, 4],
      [{ ...add, netns: '' }, 4],
    ] as const) {
      const out = await invoke(slot({ cniVersion: '0.3.1' }), inv);
      await expectError(out, code);
      expect(out.json.cniVersion).toBe('0.3.1');
    }
  });
  it("logs the failure as one message: the CNI error's msg under its own field", async () => {
    await invoke(slot({}, { delegate: { type: 'no-such-ipam' } }), add);
    const text = (await readFile(s.logFile, 'utf8')).trim().split('\n').at(-1)!;
    // JSON.parse keeps the last of duplicate keys: count them in the raw text.
    expect(text.match(/"msg":/g)).toHaveLength(1);
    expect(JSON.parse(text)).toMatchObject({
      msg: 'CNI call failed',
      code: ErrorCode.InvalidNetworkConfig,
      cniMsg: 'failed to find delegate plugin "no-such-ipam" in CNI_PATH',
    });
  });
  it('logs the failure to the configured log file, nothing to stdout but the error', async () => {
    await invoke(slot({}, { delegate: { type: 'no-such-ipam' } }), add);
    const lines = (await readFile(s.logFile, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.at(-1)).toMatchObject({ code: ErrorCode.InvalidNetworkConfig, containerID: 'c1', command: 'ADD', outcome: 'error' });
  });
});

describe('delegate results', () => {
  it('the same address twice in a delegate result is recorded once', async () => {
    const conf = slot({}, { delegate: { type: 'fake-ipam' } });
    const out = await invoke(conf, { ...add, env: { FAKE_IPAM_MODE: 'dupip' } });
    expect(out.exitCode, out.stdout).toBe(0);
    const rec = JSON.parse(await readFile(`${s.stateDir}/proto/records/c1:eth0.json`, 'utf8'));
    expect(rec.ips).toEqual(['10.99.0.7']);
    expect((await invoke(conf, { ...add, command: 'DEL' })).exitCode).toBe(0);
    expect(await ledgerRecords(s.stateDir, 'proto')).toEqual([]);
  });
});

describe('the single executable', () => {
  const sea = SEA_SHIM;
  it('runs VERSION and a real ADD/DEL with no node on PATH', async () => {
    const env = { PATH: '/usr/sbin:/sbin' }; // ip/ebtables/nft live here; node is in /usr/bin
    const version = await execa(sea, [], {
      input: '{"cniVersion":"1.0.0"}',
      env: { ...env, CNI_COMMAND: 'VERSION' },
      extendEnv: false,
      reject: false,
    });
    expect(version.exitCode, version.stderr).toBe(0);
    expect(JSON.parse(version.stdout).supportedVersions).toContain('1.1.0');
    const base = { ...env, CNI_CONTAINERID: 'sea', CNI_NETNS: '/var/run/netns/x', CNI_IFNAME: 'eth0', CNI_PATH: '/usr/lib/cni' };
    const add = await execa(sea, [], { input: JSON.stringify(slot()), env: { ...base, CNI_COMMAND: 'ADD' }, extendEnv: false, reject: false });
    expect(add.exitCode, add.stdout + add.stderr).toBe(0);
    expect(JSON.parse(add.stdout).ips[0].address).toMatch(/^10\.98\.0\./);
    const del = await execa(sea, [], { input: JSON.stringify(slot()), env: { ...base, CNI_COMMAND: 'DEL' }, extendEnv: false, reject: false });
    expect(del.exitCode, del.stdout).toBe(0);
    expect(await hostLocalAllocations(s.dataDir, 'proto')).toEqual([]);
  });
});
