// The delegate misbehaving, beyond the bad-input cases of protocol.test.ts: the real host-local behind
// test/fixtures/bin/wrap-ipam, which allocates and then fails (or fails first), hangs, dies by a signal, is not
// executable, or vanishes between ADD and DEL. Each case: the right CNI error, and nothing leaked in
// host-local's store or the ledger (what ADD allocated before failing is released again).
import { execa } from 'execa';
import { chmod, copyFile, mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { invoke, PLUGIN_DIR, scratch, SEA_SHIM, type PluginOutput } from '../support/shim/cni.js';
import { hostLocal, shimConf } from '../support/shim/conf.js';
import { uid } from '../support/net/netns.js';
import { disagreements, hostLocalStore, pidsIn, readLedger, waitGone, waitReaped, WRAP_IPAM, WRAP_IPAM_PATH } from '../support/shim/robust.js';

let s: Awaited<ReturnType<typeof scratch>>;
let network: string;
let bin: string;
beforeEach(async () => {
  s = await scratch();
  network = `flt-${uid()}`;
  // A private plugin dir: the wrapper (copied, so it can be chmodded or removed) and host-local next to it.
  bin = join(s.dir, 'bin');
  await mkdir(bin);
  await copyFile(WRAP_IPAM_PATH, join(bin, WRAP_IPAM));
  await chmod(join(bin, WRAP_IPAM), 0o755);
  await symlink(join(PLUGIN_DIR, 'host-local'), join(bin, 'host-local'));
});
afterEach(async () => {
  // Whatever a failing test left running from this scratch dir is ended by pid (never by name).
  for (const pid of await pidsIn(join(s.dir, 'pids'))) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  await s.cleanup();
});

const conf = (cniVersion = '1.0.0', ipamOver: Record<string, unknown> = {}) =>
  shimConf({
    cniVersion,
    name: network,
    dirs: s,
    delegate: { ...hostLocal(s.dataDir, '10.235.0.0/24'), type: WRAP_IPAM },
    keys: { delegateTimeoutMs: 1500, ...ipamOver },
  });

function call(
  command: string,
  wrap: Record<string, string> = {},
  extra: Partial<Parameters<typeof invoke>[1]> = {},
  ipamOver: Record<string, unknown> = {},
) {
  return invoke(conf('1.0.0', ipamOver), {
    command,
    containerID: 'ctr-1',
    netns: '/run/netns/does-not-exist',
    ifname: 'eth0',
    path: [bin],
    env: { WRAP_IPAM_PIDFILE: join(s.dir, 'pids'), WRAP_IPAM_LOG: join(s.dir, 'calls'), ...wrap },
    ...extra,
  });
}

function expectError(out: PluginOutput, code: number): void {
  expect(out.exitCode, out.stdout + out.stderr).not.toBe(0);
  expect(out.stdout.trim().split('\n')).toHaveLength(1);
  expect(out.json, out.stdout).toMatchObject({ code, cniVersion: '1.0.0' });
  expect(typeof out.json.msg).toBe('string');
}

async function expectNothingLeft(): Promise<void> {
  expect(await hostLocalStore(s.dataDir, network)).toEqual(new Map());
  const ledger = await readLedger(s.stateDir, network);
  expect([...ledger.records.keys()]).toEqual([]);
  expect(disagreements(ledger, new Map())).toEqual([]);
  expect(ledger.attachmentLocks).toEqual([]);
}

async function calls(): Promise<string[]> {
  return (await readFile(join(s.dir, 'calls'), 'utf8').catch(() => '')).split('\n').filter(Boolean);
}

describe('delegate faults during ADD: the right error, and what it allocated is released', () => {
  it('allocates, then prints garbage with exit 0 → 101, delegate DELed', async () => {
    const out = await call('ADD', { WRAP_IPAM_MODE: 'garbage-after' });
    expectError(out, 101);
    expect(out.json.details).toContain('panic: runtime error');
    expect(await calls()).toEqual(['VERSION  ', 'ADD ctr-1 eth0', 'DEL ctr-1 eth0']);
    await expectNothingLeft();
  });

  it('allocates, then prints more than the 64 MiB output cap → 101 saying so (not "no IP addresses", not "exit signal"), delegate DELed', async () => {
    const out = await call('ADD', { WRAP_IPAM_MODE: 'huge-after' });
    expectError(out, 101);
    expect(out.json.msg).toMatch(/printed more than 64 MiB/);
    expect(await calls()).toEqual(['VERSION  ', 'ADD ctr-1 eth0', 'DEL ctr-1 eth0']);
    await expectNothingLeft();
  });

  it('allocates, then returns a result with no IPs → 101, delegate DELed', async () => {
    const out = await call('ADD', { WRAP_IPAM_MODE: 'noips-after' });
    expectError(out, 101);
    expect(out.json.msg).toMatch(/no IP addresses/);
    await expectNothingLeft();
  });

  it('allocates, then prints its own error object → passed through unchanged, delegate DELed', async () => {
    const out = await call('ADD', { WRAP_IPAM_MODE: 'error-after', WRAP_IPAM_CODE: '102', WRAP_IPAM_MSG: 'CNS pool exhausted' });
    expectError(out, 102);
    expect(out.json).toMatchObject({ msg: 'CNS pool exhausted', details: 'wrap-ipam error-after on ADD' });
    await expectNothingLeft();
  });

  it('exits 1 without any CNI error → 101 carrying its stderr', async () => {
    const out = await call('ADD', { WRAP_IPAM_MODE: 'exit-before' });
    expectError(out, 101);
    expect(out.json.details).toContain('refusing without a CNI error');
    await expectNothingLeft();
  });

  for (const mode of ['crash-before', 'crash-after']) {
    it(`dies by SIGSEGV (${mode}) → 101 naming the signal, nothing left`, async () => {
      const out = await call('ADD', { WRAP_IPAM_MODE: mode });
      expectError(out, 101);
      expect(out.json.msg).toMatch(/failed without a CNI error \(exit signal\)/);
      await expectNothingLeft();
    });
  }

  for (const mode of ['hang-before', 'hang-after']) {
    it(`hangs (${mode}) → 11 within the timeout, its whole process group killed, no zombie, nothing left`, async () => {
      const started = Date.now();
      const out = await call('ADD', { WRAP_IPAM_MODE: mode });
      expectError(out, 11);
      expect(out.json.msg).toMatch(/timed out after 1500 ms/);
      expect(Date.now() - started).toBeLessThan(15_000);
      // wrap-ipam wrote its own pid and its two `sleep 300` children: all of them are gone, none is a zombie.
      const pids = await pidsIn(join(s.dir, 'pids'));
      expect(pids.length).toBeGreaterThanOrEqual(3);
      // Killed at once (nothing still running a moment later)...
      expect(await waitGone(pids, 2000)).toEqual([]);
      // ...and no zombie stays: the shim reaped its child, the orphaned sleeps are reaped by init.
      expect(await waitReaped(pids)).toEqual([]);
      await expectNothingLeft();
    });
  }

  it('is not executable (chmod -x) → 7 before anything is allocated or recorded', async () => {
    await chmod(join(bin, WRAP_IPAM), 0o644);
    const out = await call('ADD');
    expectError(out, 7);
    expect(out.json.msg).toMatch(/failed to find delegate plugin "wrap-ipam"/);
    expect(await calls()).toEqual([]);
    await expectNothingLeft();
  });
});

describe('delegateTimeoutMs bounds the call when a child escaped the process group and holds stdout', () => {
  // A child in its own session (setsid) survives the group kill and keeps the delegate's stdout open: the shim
  // must stop reading at the deadline instead of waiting for end-of-file (it used to wait out the child's sleep).
  const T = 1000;
  async function timedCall(command: string, wrap: Record<string, string>) {
    const started = Date.now();
    const out = await call(command, wrap, { timeoutMs: 30_000 }, { delegateTimeoutMs: T });
    return { out, ms: Date.now() - started };
  }

  it('ADD and its undo DEL both hang with an escaped child: 11 within 2 × delegateTimeoutMs plus start-up', async () => {
    const { out, ms } = await timedCall('ADD', { WRAP_IPAM_ON: 'any', WRAP_IPAM_MODE: 'hang-escaped-after' });
    console.log(`ADD + undo DEL, both hanging with an escaped child holding stdout, delegateTimeoutMs ${T}: ${ms} ms`);
    expectError(out, 11);
    expect(out.json.msg).toMatch(/timed out after 1000 ms/);
    expect(ms).toBeLessThan(2 * T + 4000);
    // The undo DEL's host-local ran before it hung: the allocation is released; its record stays for GC
    // (the DEL did not confirm), as an intent record.
    expect(await hostLocalStore(s.dataDir, network)).toEqual(new Map());
    expect([...(await readLedger(s.stateDir, network)).records.values()].map((r) => r.state)).toEqual(['intent']);
  });

  it('ADD hangs with an escaped child before allocating: 11 within delegateTimeoutMs plus start-up, nothing left', async () => {
    const { out, ms } = await timedCall('ADD', { WRAP_IPAM_MODE: 'hang-escaped-before' });
    console.log(`ADD hanging with an escaped child holding stdout, delegateTimeoutMs ${T}: ${ms} ms`);
    expectError(out, 11);
    expect(ms).toBeLessThan(T + 4000);
    await expectNothingLeft();
  });

  it('a delegate that answers and exits but leaves a child holding stdout: ADD succeeds without waiting for the child', async () => {
    const { out, ms } = await timedCall('ADD', { WRAP_IPAM_MODE: 'escaped-after' });
    expect(out.exitCode, out.stdout).toBe(0);
    expect(out.json.ips[0].address).toBe('10.235.0.2/24');
    expect(ms).toBeLessThan(T + 4000);
    expect([...(await hostLocalStore(s.dataDir, network)).keys()]).toEqual(['10.235.0.2']);
  });
});

describe('delegate faults during DEL', () => {
  async function addOk(): Promise<PluginOutput> {
    const out = await call('ADD');
    expect(out.exitCode, out.stdout).toBe(0);
    expect([...(await hostLocalStore(s.dataDir, network)).keys()]).toEqual(['10.235.0.2']);
    return out;
  }

  it('its error object passes through, the record stays (GC can still find it), and a retried DEL cleans up', async () => {
    const added = await addOk();
    const out = await call(
      'DEL',
      { WRAP_IPAM_ON: 'DEL', WRAP_IPAM_MODE: 'error-before', WRAP_IPAM_CODE: '11', WRAP_IPAM_MSG: 'CNS unreachable' },
      {},
    );
    expectError(out, 11);
    expect(out.json).toMatchObject({ msg: 'CNS unreachable', details: 'wrap-ipam error-before on DEL' });
    expect([...(await readLedger(s.stateDir, network)).records.keys()]).toEqual(['ctr-1:eth0']);
    expect([...(await hostLocalStore(s.dataDir, network)).keys()]).toEqual(['10.235.0.2']);
    const retry = await invoke({ ...conf(), prevResult: added.json }, { command: 'DEL', containerID: 'ctr-1', ifname: 'eth0', path: [bin] });
    expect(retry.exitCode, retry.stdout).toBe(0);
    await expectNothingLeft();
  });

  it('a hung DEL → 11, group killed, record kept; the retry succeeds', async () => {
    await addOk();
    const out = await call('DEL', { WRAP_IPAM_ON: 'DEL', WRAP_IPAM_MODE: 'hang-before' });
    expectError(out, 11);
    expect(await waitGone(await pidsIn(join(s.dir, 'pids')), 5000)).toEqual([]);
    expect([...(await readLedger(s.stateDir, network)).records.keys()]).toEqual(['ctr-1:eth0']);
    expect((await call('DEL')).exitCode).toBe(0);
    await expectNothingLeft();
  });

  it('the delegate disappears between ADD and DEL → DEL fails with 7 and keeps the record; back in place, DEL releases', async () => {
    // By the spec DEL is best effort about *missing resources*; a missing IPAM plugin is not that: succeeding
    // would leak the address silently. The reference plugins fail the same way (ipam.ExecDel: plugin not found).
    await addOk();
    await rm(join(bin, WRAP_IPAM));
    const out = await call('DEL');
    expectError(out, 7);
    expect(out.json.msg).toMatch(/failed to find delegate plugin "wrap-ipam"/);
    expect([...(await readLedger(s.stateDir, network)).records.keys()]).toEqual(['ctr-1:eth0']);
    expect([...(await hostLocalStore(s.dataDir, network)).keys()]).toEqual(['10.235.0.2']);
    // DEL without a netns and without prevResult (libcni after a lost cache) after the plugin is reinstalled.
    await copyFile(WRAP_IPAM_PATH, join(bin, WRAP_IPAM));
    await chmod(join(bin, WRAP_IPAM), 0o755);
    const again = await call('DEL', {}, { netns: '' });
    expect(again.exitCode, again.stdout).toBe(0);
    await expectNothingLeft();
  });

  it('the delegate loses its state (store wiped) → DEL still succeeds and forgets the record', async () => {
    await addOk();
    await rm(join(s.dataDir, network), { recursive: true, force: true });
    const out = await call('DEL');
    expect(out.exitCode, out.stdout).toBe(0);
    await expectNothingLeft();
  });

  it('a delegate that handed out an address the ledger already holds (lost state) → ADD refused with 11, no double record', async () => {
    // The holder is not provably gone (its netns cannot be looked into from here): a provably dead one would give
    // the address up (test/e2e/stale-records.test.ts).
    expect((await call('ADD', {}, { netns: '/run/ipam-shim-no-such-dir/ctr-1' })).exitCode).toBe(0);
    await rm(join(s.dataDir, network), { recursive: true, force: true }); // host-local forgets 10.235.0.2
    const out = await call('ADD', {}, { containerID: 'ctr-2' });
    expectError(out, 11);
    expect(out.json.msg).toMatch(/10\.235\.0\.2 is already recorded for ctr-1:eth0/);
    // The second allocation was released again; the first attachment's record is untouched.
    expect(await hostLocalStore(s.dataDir, network)).toEqual(new Map());
    expect([...(await readLedger(s.stateDir, network)).records.keys()]).toEqual(['ctr-1:eth0']);
  });
});

describe('a repeated ADD for one attachment never allocates twice and never frees the live address', () => {
  async function expectOnlyTheFirst(address: string): Promise<void> {
    const store = await hostLocalStore(s.dataDir, network);
    expect(store).toEqual(new Map([[address, 'ctr-1:eth0']]));
    const ledger = await readLedger(s.stateDir, network);
    expect([...ledger.records.values()].map((r) => [r.containerID, r.state, r.ips])).toEqual([['ctr-1', 'attached', [address]]]);
    expect(disagreements(ledger, store)).toEqual([]);
  }

  it('ADD, then ADD again for the same container ID and ifname: refused, the first allocation and record untouched', async () => {
    const first = await call('ADD');
    expect(first.exitCode, first.stdout).toBe(0);
    const before = await readFile(join(s.stateDir, network, 'records', 'ctr-1:eth0.json'), 'utf8');
    const again = await call('ADD');
    expectError(again, 4);
    expect(again.json.msg).toMatch(/already attached/);
    await expectOnlyTheFirst('10.235.0.2');
    expect(await readFile(join(s.stateDir, network, 'records', 'ctr-1:eth0.json'), 'utf8')).toBe(before);
    // The delegate was not asked to allocate or release anything for the second ADD.
    expect((await calls()).filter((c) => !c.startsWith('VERSION'))).toEqual(['ADD ctr-1 eth0']);
    // DEL still releases it.
    expect((await call('DEL')).exitCode).toBe(0);
    await expectNothingLeft();
  });

  it('N ADDs for one attachment at once: one allocation, recorded in host-local and the ledger, and every success reports it', async () => {
    // The delegate is slowed so the ADDs overlap inside it.
    const outs = await Promise.all(
      Array.from({ length: 8 }, () => call('ADD', { WRAP_IPAM_PRE: '0.2' }, { timeoutMs: 60_000 }, { delegateTimeoutMs: 20_000 })),
    );
    const ok = outs.filter((o) => o.exitCode === 0);
    expect(ok.length, outs.map((o) => o.stdout).join('\n')).toBeGreaterThanOrEqual(1);
    const addresses = new Set(ok.map((o) => o.json.ips[0].address.split('/')[0]));
    expect(addresses.size).toBe(1);
    for (const o of outs.filter((o) => o.exitCode !== 0)) expect(o.json.code, o.stdout).toBe(4);
    await expectOnlyTheFirst([...addresses][0]!);
    expect((await call('DEL')).exitCode).toBe(0);
    await expectNothingLeft();
  });

  it("GC forgetting an attachment also removes the attachment lock a killed shim left for it; a live holder's attachment waits for the next GC", async () => {
    expect((await call('ADD')).exitCode).toBe(0);
    expect((await call('ADD', {}, { containerID: 'ctr-2' })).exitCode).toBe(0);
    const lock = (cid: string) => join(s.stateDir, network, `.attach-${cid}:eth0.lock`);
    await writeFile(lock('ctr-1'), '999999999 1'); // no such process: its holder died
    await writeFile(lock('ctr-2'), `${process.pid} ?`); // a live holder (this test process)
    const gc = await invoke({ ...conf('1.1.0'), 'cni.dev/valid-attachments': [] }, { command: 'GC', path: [bin] });
    expect(gc.exitCode, gc.stdout).toBe(0);
    // GC takes each attachment's lock, as ADD/DEL do: ctr-1's dead holder is broken and its address released;
    // ctr-2's live holder (a CNI call or the node agent at work) keeps it for the next GC.
    expect([...(await hostLocalStore(s.dataDir, network)).values()]).toEqual(['ctr-2:eth0']);
    expect((await readLedger(s.stateDir, network)).attachmentLocks).toEqual([lock('ctr-2')]);
    await rm(lock('ctr-2'));
    const again = await invoke({ ...conf('1.1.0'), 'cni.dev/valid-attachments': [] }, { command: 'GC', path: [bin] });
    expect(again.exitCode, again.stdout).toBe(0);
    await expectNothingLeft();
  });

  it("the attachment lock names the process that holds it (pid and start time of this call, never the snapshot build's)", async () => {
    // The startup snapshot's warm-up takes locks too (src/warm.ts): the single executable, which starts from that heap.
    const lock = join(s.stateDir, network, '.attach-ctr-1:eth0.lock');
    const adding = call('ADD', { WRAP_IPAM_PRE: '1' }, { timeoutMs: 60_000, bin: SEA_SHIM }, { delegateTimeoutMs: 20_000 });
    let held = '';
    for (let i = 0; i < 400 && !held; i++) {
      held = await readFile(lock, 'utf8').catch(() => '');
      if (!held) await new Promise((r) => setTimeout(r, 10));
    }
    const out = await adding;
    expect(out.exitCode, out.stdout).toBe(0);
    const pid = (await readFile(s.logFile, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
      .find((l) => l.msg === 'CNI call done').pid;
    expect(held, 'the lock was never seen while the delegate ran').toMatch(/^\d+ \d+$/);
    expect(Number(held.split(' ')[0])).toBe(pid);
    expect((await call('DEL')).exitCode).toBe(0);
    await expectNothingLeft();
  });

  it("chained: a repeated ADD (sequential and concurrent) records the runtime's address once and never drops it", async () => {
    const chained = shimConf({
      placement: 'chained',
      name: network,
      dirs: s,
      probeRewrite: false,
      keys: { residue: { ebtables: false, neigh: false } },
      top: { prevResult: { cniVersion: '1.0.0', ips: [{ address: '10.236.0.9/24' }] } },
    });
    const env = { command: 'ADD', containerID: 'ctr-1', netns: '/run/netns/does-not-exist', ifname: 'eth0', path: [bin] };
    expect((await invoke(chained, env)).exitCode).toBe(0);
    const outs = await Promise.all(Array.from({ length: 6 }, () => invoke(chained, env)));
    for (const o of outs) expect(o.exitCode, o.stdout).toBe(0);
    const ledger = await readLedger(s.stateDir, network);
    expect([...ledger.records.values()].map((r) => [r.containerID, r.state, r.ips])).toEqual([['ctr-1', 'attached', ['10.236.0.9']]]);
    expect(ledger.index.get('10.236.0.9')).toBe('ctr-1:eth0');
    expect(ledger.attachmentLocks).toEqual([]);
  });
});

describe('a config mistake never blocks teardown: DEL does what it can, logs the mistake and succeeds', () => {
  async function addOk(): Promise<void> {
    const out = await call('ADD');
    expect(out.exitCode, out.stdout).toBe(0);
    expect([...(await hostLocalStore(s.dataDir, network)).keys()]).toEqual(['10.235.0.2']);
  }
  async function mistakeLogged(code: number): Promise<void> {
    const lines = (await readFile(s.logFile, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.filter((l) => l.command === 'DEL' && /config mistake/.test(l.msg)).map((l) => l.code)).toEqual([code]);
    expect(lines.at(-1)).toMatchObject({ command: 'DEL', outcome: 'ok' });
  }
  const records = async () => [...(await readLedger(s.stateDir, network)).records.keys()];

  for (const [what, over, code] of [
    ['an unknown key', { reservedCIDR: ['10.0.0.0/8'] }, 2],
    ['a bad value', { delegateTimeoutMs: 'soon' }, 7],
    ['a bad value DEL does not use', { residue: { ebtables: 'yes' } }, 7],
  ] as const) {
    it(`${what}: the delegate releases, the record is forgotten, DEL succeeds`, async () => {
      await addOk();
      const out = await call('DEL', {}, {}, over);
      expect(out.exitCode, out.stdout).toBe(0);
      expect(out.stdout).toBe('');
      await expectNothingLeft();
      await mistakeLogged(code);
      // ADD and STATUS still refuse the config: the mistake is reported where a call can fail without harm.
      expect((await call('ADD', {}, {}, over)).json).toMatchObject({ code });
      expect((await invoke(conf('1.1.0', over), { command: 'STATUS', path: [bin] })).json).toMatchObject({ code });
      expect(await hostLocalStore(s.dataDir, network)).toEqual(new Map());
    });
  }

  it('an unreadable stateDir: the delegate releases, no ledger is touched (the record stays for GC), DEL succeeds', async () => {
    await addOk();
    const out = await call('DEL', {}, {}, { stateDir: 'relative/state' });
    expect(out.exitCode, out.stdout).toBe(0);
    expect(await hostLocalStore(s.dataDir, network)).toEqual(new Map());
    expect(await records()).toEqual(['ctr-1:eth0']);
    await mistakeLogged(7);
    // With the config fixed, DEL forgets it (the delegate has nothing left to release).
    expect((await call('DEL')).exitCode).toBe(0);
    await expectNothingLeft();
  });

  it('an unreadable delegate in the IPAM slot: nothing can release the address, so the record stays; DEL succeeds', async () => {
    await addOk();
    const out = await call('DEL', {}, {}, { delegate: { type: '../bin/sh' } });
    expect(out.exitCode, out.stdout).toBe(0);
    expect([...(await hostLocalStore(s.dataDir, network)).keys()]).toEqual(['10.235.0.2']);
    expect(await records()).toEqual(['ctr-1:eth0']);
    await mistakeLogged(7);
    expect((await call('DEL')).exitCode).toBe(0);
    await expectNothingLeft();
  });

  it('no network name: nothing says which ledger or allocation is meant, DEL fails (7) and touches nothing', async () => {
    await addOk();
    const out = await invoke({ ...conf(), name: undefined }, { command: 'DEL', containerID: 'ctr-1', ifname: 'eth0', path: [bin] });
    expectError(out, 7);
    expect(await records()).toEqual(['ctr-1:eth0']);
    expect([...(await hostLocalStore(s.dataDir, network)).keys()]).toEqual(['10.235.0.2']);
  });

  it('chained: an unknown key does not keep DEL from forgetting the record', async () => {
    const chained = (over: Record<string, unknown> = {}) =>
      shimConf({ placement: 'chained', name: network, dirs: s, probeRewrite: false, keys: { residue: { ebtables: false, neigh: false }, ...over } });
    const env = { containerID: 'ctr-1', netns: '/run/netns/does-not-exist', ifname: 'eth0', path: [bin] };
    const add = await invoke({ ...chained(), prevResult: { cniVersion: '1.0.0', ips: [{ address: '10.236.0.9/24' }] } }, { command: 'ADD', ...env });
    expect(add.exitCode, add.stdout).toBe(0);
    expect(await records()).toEqual(['ctr-1:eth0']);
    const del = await invoke(chained({ stateDirr: '/tmp/typo' }), { command: 'DEL', ...env });
    expect(del.exitCode, del.stdout).toBe(0);
    expect(await records()).toEqual([]);
    await mistakeLogged(2);
  });
});

describe('no stray processes', () => {
  it('a normal ADD/DEL leaves no child of the shim behind', async () => {
    expect((await call('ADD')).exitCode).toBe(0);
    expect((await call('DEL')).exitCode).toBe(0);
    const pids = await pidsIn(join(s.dir, 'pids'));
    expect(await waitGone(pids, 5000)).toEqual([]);
    const r = await execa('pgrep', ['-f', join(bin, WRAP_IPAM)], { reject: false });
    expect(r.stdout.trim()).toBe('');
  });
});
