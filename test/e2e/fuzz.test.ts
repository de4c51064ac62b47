// Hostile input against the BUILT shim: fast-check over stdin configs and CNI_* variables, plus explicit
// cases (huge, deep, NUL, huge numbers, __proto__, limits, path-like delegate types, planted symlinks,
// corrupt ledger records). Every call: exactly one JSON document on stdout (a result, a VERSION answer, or an
// error with a catalogued code) or nothing on a silent success, an exit within a bound, and no file written
// outside the paths its config names (state dir, log file, the delegate's own data dir).
//
//   IPAM_SHIM_FUZZ_RUNS  generated cases (default 150)   IPAM_SHIM_FUZZ_SEED  replay one campaign
import { execa } from 'execa';
import fc from 'fast-check';
import { lstatSync } from 'node:fs';
import { lstat, mkdir, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FIXTURE_BIN, invoke, PLUGIN_DIR, scratch, SHIM } from '../support/shim/cni.js';
import { uid } from '../support/net/netns.js';
import { hostLocal, shimConf } from '../support/shim/conf.js';
import { disagreements, envInt, hostLocalStore, pool, readLedger, WRAP_IPAM } from '../support/shim/robust.js';
import { ErrorCode } from '../../src/cni/errors.js';

const RUNS = envInt('IPAM_SHIM_FUZZ_RUNS', 150);
const SEED = process.env.IPAM_SHIM_FUZZ_SEED ? Number(process.env.IPAM_SHIM_FUZZ_SEED) : Date.now() % 2 ** 31;
/** Any single call must be over within this (delegate timeouts in the generated configs are ≤ 2 s). */
const EXIT_BOUND_MS = 20_000;
/** The spec's codes and the shim's catalogue (docs/errors.md); a delegate's own error objects may add others. */
const VALID_CODES = new Set([1, 2, 3, 4, 5, 6, 7, 11, 50, 51, 100, 101, 102, 103]);
const VERBS = ['ADD', 'DEL', 'CHECK', 'GC', 'STATUS', 'VERSION'];

let s: Awaited<ReturnType<typeof scratch>>;
beforeEach(async () => {
  s = await scratch();
});
afterEach(async () => {
  await s.cleanup();
});

interface Outcome {
  exitCode: number;
  stdout: string;
  stderr: string;
  ms: number;
  timedOut: boolean;
}

/** Runs the shim with exactly this environment and stdin, in an empty working directory of our own. */
async function run(env: Record<string, string>, input: string | Buffer): Promise<Outcome> {
  const started = Date.now();
  const r = await execa(SHIM, [], {
    input,
    env: { PATH: process.env.PATH!, ...env },
    extendEnv: false,
    reject: false,
    timeout: EXIT_BOUND_MS,
    killSignal: 'SIGKILL',
    cwd: join(s.dir, 'cwd'),
    encoding: 'utf8',
  });
  return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), stderr: String(r.stderr), ms: Date.now() - started, timedOut: Boolean(r.timedOut) };
}

/**
 * The JSON documents in a delegate's recorded output, one or more per call. Go plugins print their error objects
 * indented over several lines (skel's Print), so a document is the shortest run of lines from a `{` line that parses.
 */
function jsonDocuments(text: string): Array<{ code?: unknown; msg?: unknown }> {
  const lines = text.split('\n');
  const docs: Array<{ code?: unknown; msg?: unknown }> = [];
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i]!.startsWith('{')) continue;
    for (let j = i; j < lines.length; j++) {
      try {
        docs.push(JSON.parse(lines.slice(i, j + 1).join('\n')));
        i = j;
        break;
      } catch {
        // not complete yet
      }
    }
  }
  return docs;
}

/** What the protocol allows the shim to print for this call; returns a list of violations (empty = fine). */
function protocolViolations(command: string, o: Outcome, delegateErrors: Array<{ code?: unknown; msg?: unknown }> = []): string[] {
  const bad: string[] = [];
  if (o.timedOut) return [`did not exit within ${EXIT_BOUND_MS} ms`];
  const verb = command.toUpperCase();
  if (command === '') {
    if (o.exitCode !== 0 || o.stdout !== '')
      bad.push(`no CNI_COMMAND: want the about line and exit 0, got exit ${o.exitCode} stdout ${JSON.stringify(o.stdout.slice(0, 200))}`);
    return bad;
  }
  const text = o.stdout.trim();
  if (o.exitCode === 0 && text === '') {
    if (verb === 'ADD' || verb === 'VERSION') bad.push(`${verb} succeeded with empty stdout`);
    return bad;
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return [`stdout is not one JSON document: ${JSON.stringify(o.stdout.slice(0, 300))}`];
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) return [`stdout is not a JSON object: ${text.slice(0, 200)}`];
  const d = doc as Record<string, unknown>;
  if (typeof d.cniVersion !== 'string') bad.push(`no cniVersion in ${text.slice(0, 200)}`);
  if (o.exitCode === 0) {
    if (verb === 'ADD' && !Array.isArray(d.ips)) bad.push(`ADD result without ips: ${text.slice(0, 200)}`);
    if (verb === 'VERSION' && !Array.isArray(d.supportedVersions)) bad.push(`VERSION answer without supportedVersions: ${text.slice(0, 200)}`);
    if (!['ADD', 'VERSION'].includes(verb)) bad.push(`${verb} succeeded but printed ${text.slice(0, 200)}`);
  } else {
    const passedThrough = delegateErrors.some((x) => x.code === d.code && x.msg === d.msg);
    if (typeof d.code !== 'number' || (!VALID_CODES.has(d.code) && !passedThrough))
      bad.push(`error code ${String(d.code)} is neither catalogued nor the delegate's own: ${text.slice(0, 300)}`);
    if (typeof d.msg !== 'string' || d.msg === '') bad.push(`error without msg: ${text.slice(0, 200)}`);
  }
  return bad;
}

/** Every path under `dir` (files, dirs, links), relative, with size+mtime so changes show up too. */
async function listing(dir: string, rel = ''): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  let entries: string[];
  try {
    entries = await readdir(join(dir, rel));
  } catch {
    return out;
  }
  for (const n of entries) {
    const p = rel ? `${rel}/${n}` : n;
    const st = await lstat(join(dir, p)).catch(() => undefined);
    if (!st) continue;
    out.set(p, st.isDirectory() ? 'dir' : `${st.size}:${st.mtimeMs}`);
    if (st.isDirectory()) for (const [k, v] of await listing(dir, p)) out.set(k, v);
  }
  return out;
}

function changed(before: Map<string, string>, after: Map<string, string>): string[] {
  return [...after].filter(([k, v]) => before.get(k) !== v).map(([k]) => k);
}

// ---------------------------------------------------------------------------------------------------------------
// generators

const NET = 'fuzznet';

function arbitraries(root: string) {
  const longId = (n: number) => 'c'.repeat(n);
  const containerID = fc.oneof(
    fc.constantFrom(
      'pod-1',
      'a'.repeat(64),
      '0123456789abcdef'.repeat(4),
      'cilium-agent-health',
      longId(216),
      longId(217),
      longId(5000),
      '',
      '-x',
      '../etc',
      'a:b',
      'a b',
      'ä',
    ),
    fc.string({ maxLength: 40 }),
    fc.stringMatching(/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,80}$/),
  );
  const ifname = fc.oneof(
    fc.constantFrom('eth0', 'abcdefghijklmno', 'abcdefghijklmnop', 'ééééééé', 'éééééééé', '.', '..', 'a/b', 'a:b', 'e th', ''),
    fc.string({ maxLength: 20 }),
  );
  const command = fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom(...VERBS) },
    { weight: 1, arbitrary: fc.constantFrom('add', 'del', '', 'FROB', 'ADD ') },
    { weight: 1, arbitrary: fc.string({ maxLength: 8 }) },
  );
  const wildEnv = fc.record({
    CNI_COMMAND: command,
    CNI_CONTAINERID: containerID,
    CNI_NETNS: fc.constantFrom('', '/run/netns/fuzz-none', '/proc/self/ns/net', '../../etc/passwd', 'relative'),
    CNI_IFNAME: ifname,
    CNI_ARGS: fc.oneof(
      fc.constantFrom('', 'IgnoreUnknown=1;K8S_POD_NAMESPACE=a;K8S_POD_NAME=b', '=x', 'novalue', ';;', 'K=V=W'),
      fc.string({ maxLength: 30 }),
    ),
    CNI_PATH: fc.constantFrom(PLUGIN_DIR, `${PLUGIN_DIR}:${FIXTURE_BIN}`, '', '/nonexistent', `${FIXTURE_BIN}:${PLUGIN_DIR}`, '::'),
  });
  // Mostly a well-formed environment, so the configs (not the env checks) are what gets exercised.
  const saneEnv = fc.record({
    CNI_COMMAND: fc.constantFrom(...VERBS),
    CNI_CONTAINERID: fc.constantFrom('pod-1', 'pod-2', 'cilium-agent-health'),
    CNI_NETNS: fc.constantFrom('/run/netns/fuzz-none', '/proc/self/ns/net'),
    CNI_IFNAME: fc.constantFrom('eth0', 'net1'),
    CNI_ARGS: fc.constantFrom('', 'IgnoreUnknown=1;K8S_POD_NAMESPACE=a;K8S_POD_NAME=b'),
    CNI_PATH: fc.constantFrom(FIXTURE_BIN, `${PLUGIN_DIR}:${FIXTURE_BIN}`),
  });
  const env = fc.oneof({ weight: 3, arbitrary: saneEnv }, { weight: 1, arbitrary: wildEnv });
  const anyJson = fc.jsonValue({ maxDepth: 4 });
  const hostile = fc.oneof(
    anyJson,
    fc.constantFrom(1e308, -1e308, 2 ** 64, -0, 0.5, '', '\u0000', 'x'.repeat(10_000), null, true, [], {}, { __proto__: { polluted: true } }),
  );
  // Never "/" or another real directory: the shim would (rightly) create <dir>/<network> there.
  const stateDir = fc.constantFrom(join(root, 'state'), join(root, 'state2/deeper'), 'relative/state', '');
  const logFile = fc.constantFrom(join(root, 'shim.log'), join(root, 'logs/shim.log'), 'relative.log', '');
  // The working delegate is wrap-ipam (host-local behind it, recording host-local's output): host-local prints
  // code 999 for its own failures, and those must pass through; the recording tells them from the shim's own.
  const delegateType = fc.constantFrom(
    WRAP_IPAM,
    WRAP_IPAM,
    '../../bin/sh',
    '/bin/sh',
    '.',
    '..',
    '',
    'no-such-ipam',
    'host-local/',
    ' host-local',
    'host\u0000local',
  );
  // The delegate always keeps its dataDir inside our root: host-local's default would be the machine's store.
  const delegate = fc
    .record(
      {
        type: delegateType,
        ranges: fc.oneof(fc.constant([[{ subnet: '10.238.0.0/24' }]]), fc.constant([[{ subnet: 'fd00:238::/120' }]]), hostile),
        extra: hostile,
      },
      { requiredKeys: ['type'] },
    )
    .map(({ extra, ...d }) => ({ ...d, dataDir: join(root, 'hl'), ...(extra === undefined ? {} : { fuzzKey: extra }) }));
  const shimKeys = fc
    .record(
      {
        stateDir,
        logFile,
        delegate,
        delegateTimeoutMs: fc.oneof(fc.constantFrom(100, 2000, 0, -1, Number.POSITIVE_INFINITY, 600_001, 1.5), hostile),
        logLevel: fc.oneof(fc.constantFrom('info', 'silent', 'trace', 'loud'), hostile),
        reservedCIDRs: fc.oneof(fc.constant(['10.238.0.128/25']), fc.constant(['not-a-cidr']), hostile),
        residue: fc.oneof(fc.constant({ ebtables: false, neigh: false }), hostile),
        // Never "auto"/"on": an IPv6 address would make the shim install its nftables table in this host's netns.
        ipv6ProbeRewrite: fc.constantFrom('off', 'sometimes'),
        agentContainerIDs: fc.oneof(fc.constant(['cilium-agent-*']), hostile),
        unknownKey: hostile,
      },
      { requiredKeys: ['stateDir', 'logFile'] },
    )
    .map((k) => ({ ipv6ProbeRewrite: 'off', residue: { ebtables: false, neigh: false }, ...k }));
  const prevResult = fc.oneof(
    fc.constant({ cniVersion: '1.0.0', ips: [{ address: '10.238.0.9/24' }] }),
    fc.constant({ cniVersion: '0.3.1', ips: [{ version: '4', address: '10.238.0.9/24' }], interfaces: [{ name: 'veth0' }] }),
    hostile,
  );
  const config = fc
    .record(
      {
        placement: fc.constantFrom('ipam', 'chained'),
        cniVersion: fc.oneof(
          { weight: 4, arbitrary: fc.constantFrom('0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0') },
          { weight: 1, arbitrary: fc.oneof(fc.constantFrom('0.2.0', '2.0.0', ''), hostile) },
        ),
        name: fc.oneof(fc.constant(NET), fc.constantFrom('', '-bad', 'a/b', '..'), hostile),
        shim: shimKeys,
        prevResult,
        valid: fc.oneof(fc.constant([{ containerID: 'pod-1', ifname: 'eth0' }]), hostile),
        topExtra: hostile,
        protoKey: fc.boolean(),
      },
      { requiredKeys: ['placement', 'cniVersion', 'name', 'shim'] },
    )
    .map((c) => {
      const base: Record<string, unknown> =
        c.placement === 'ipam' ? { type: 'ptp', ipam: { type: 'ipam-shim', ...c.shim } } : { type: 'ipam-shim', ...c.shim };
      const conf: Record<string, unknown> = { cniVersion: c.cniVersion, name: c.name, ...base };
      if (c.prevResult !== undefined) conf.prevResult = c.prevResult;
      if (c.valid !== undefined) conf['cni.dev/valid-attachments'] = c.valid;
      if (c.topExtra !== undefined) conf.runtimeConfig = c.topExtra;
      let text = JSON.stringify(conf);
      if (c.protoKey) text = text.replace(/^\{/, '{"__proto__":{"stateDir":"/etc","type":"ipam-shim"},');
      return text;
    });
  // A fifth of the inputs are mangled as text: truncated, a byte flipped, garbage appended, or not JSON at all.
  const stdin = fc.oneof(
    { weight: 4, arbitrary: config },
    {
      weight: 1,
      arbitrary: fc.tuple(config, fc.nat(), fc.constantFrom('truncate', 'flip', 'append', 'nul')).map(([t, n, how]) => {
        const i = n % Math.max(1, t.length);
        if (how === 'truncate') return t.slice(0, i);
        if (how === 'flip') return t.slice(0, i) + String.fromCharCode((t.charCodeAt(i) + 1) % 128) + t.slice(i + 1);
        if (how === 'nul') return `${t.slice(0, i)}\u0000${t.slice(i)}`;
        return `${t}{"second":"document"}`;
      }),
    },
    { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
  );
  return { env, stdin };
}

const cleanEnv = (env: Record<string, string>): Record<string, string> =>
  Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v.replaceAll('\u0000', '')]));

// ---------------------------------------------------------------------------------------------------------------

describe('fuzz: generated configs and environments', () => {
  it(`${RUNS} cases: one JSON document or a silent success, a catalogued code, a bounded exit, no write outside its paths (seed ${SEED})`, async () => {
    const root = s.dir;
    await mkdir(join(root, 'cwd'));
    const { env, stdin } = arbitraries(root);
    const cases = fc.sample(fc.tuple(env, stdin), { numRuns: RUNS, seed: SEED });
    const machineDirs = ['/var/lib/cni/ipam-shim', '/var/lib/cni/networks', '/etc/cni/net.d'];
    const machineBefore = await Promise.all(machineDirs.map((d) => listing(d)));
    const before = await listing(root);

    const failures: string[] = [];
    const codes = new Map<string, number>();
    await mkdir(join(root, 'wrapout'));
    await pool(cases, 4, async ([e, input], i) => {
      const out = join(root, 'wrapout', String(i));
      const ev: Record<string, string> = { ...cleanEnv(e), WRAP_IPAM_OUT: out };
      const o = await run(ev, input);
      const delegateErrors = jsonDocuments(await readFile(out, 'utf8').catch(() => ''));
      const code =
        o.exitCode === 0
          ? 'ok'
          : String(
              (() => {
                try {
                  return JSON.parse(o.stdout).code;
                } catch {
                  return 'unparsed';
                }
              })(),
            );
      codes.set(code, (codes.get(code) ?? 0) + 1);
      const bad = protocolViolations(ev.CNI_COMMAND ?? '', o, delegateErrors);
      if (bad.length) failures.push(`${bad.join('; ')}\n  env ${JSON.stringify(ev)}\n  stdin ${JSON.stringify(input).slice(0, 600)}`);
    });
    console.log(`fuzz seed ${SEED}: ${RUNS} cases, outcomes by code`, Object.fromEntries([...codes].sort()));
    expect(failures.slice(0, 5)).toEqual([]);

    // Writes only where configs point: state dirs, log files, host-local's data dir (the delegate's own).
    const allowed = [/^state(\/|$)/, /^state2(\/|$)/, /^shim\.log$/, /^logs(\/|$)/, /^hl(\/|$)/, /^wrapout(\/|$)/];
    expect(changed(before, await listing(root)).filter((p) => !allowed.some((re) => re.test(p)))).toEqual([]);
    expect(await readdir(join(root, 'cwd'))).toEqual([]);
    const machineAfter = await Promise.all(machineDirs.map((d) => listing(d)));
    for (const [i, d] of machineDirs.entries()) expect(changed(machineBefore[i]!, machineAfter[i]!), d).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------------------------

describe('explicit hostile input', () => {
  const env = (over: Record<string, string> = {}) => ({
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: 'pod-1',
    CNI_NETNS: '/run/netns/fuzz-none',
    CNI_IFNAME: 'eth0',
    CNI_ARGS: '',
    CNI_PATH: `${PLUGIN_DIR}:${FIXTURE_BIN}`,
    ...over,
  });
  const slot = (ipamOver: Record<string, unknown> = {}, top: Record<string, unknown> = {}) =>
    shimConf({ name: NET, dirs: s, probeRewrite: false, delegate: hostLocal(s.dataDir, '10.238.0.0/24'), keys: ipamOver, top });
  async function expectCode(o: Outcome, code: number, command = 'ADD'): Promise<Record<string, any>> {
    expect(protocolViolations(command, o)).toEqual([]);
    expect(o.exitCode).not.toBe(0);
    const doc = JSON.parse(o.stdout);
    expect(doc, o.stdout).toMatchObject({ code });
    return doc;
  }
  async function expectNothingAllocated(): Promise<void> {
    expect(await hostLocalStore(s.dataDir, NET)).toEqual(new Map());
    expect([...(await readLedger(s.stateDir, NET)).records.keys()]).toEqual([]);
  }
  beforeEach(async () => {
    await mkdir(join(s.dir, 'cwd'));
  });

  it('50 MB on stdin → 5, promptly, without reading it all', async () => {
    const big = Buffer.alloc(50 * 1024 * 1024, 0x20);
    big.write(`${JSON.stringify(slot()).slice(0, -1)},"pad":"`, 0);
    big.write('"}', big.length - 2);
    const o = await run(env(), big);
    await expectCode(o, 5);
    await expectNothingAllocated();
  });

  it('100 000 levels of nesting anywhere → 6 (no stack overflow, no 999)', async () => {
    const deepArr = '['.repeat(100_000) + ']'.repeat(100_000);
    const deepObj = `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`;
    const base = JSON.stringify(slot());
    for (const text of [
      deepArr,
      `{"cniVersion":"1.0.0","x":${deepObj}}`,
      base.replace('"type":"ipam-shim",', `"type":"ipam-shim","zz":${deepArr},`),
      base.replace('"type":"host-local",', `"type":"host-local","zz":${deepObj},`),
      base.replace('"cniVersion":"1.0.0",', `"cniVersion":"1.0.0","prevResult":${deepObj},`),
      base.replace('"cniVersion":"1.0.0",', `"cniVersion":"1.0.0","args":${deepArr},`),
    ]) {
      const doc = await expectCode(await run(env(), text), 6);
      expect(doc.details).toMatch(/nested deeper than/);
    }
    await expectNothingAllocated();
    // Depth an ordinary config has (and more) is fine.
    const ok = await run(env(), JSON.stringify(slot({}, { runtimeConfig: JSON.parse(`${'{"a":'.repeat(50)}1${'}'.repeat(50)}`) })));
    expect(ok.exitCode, ok.stdout).toBe(0);
  });

  it('NUL bytes, raw or escaped, in any field → an error object, nothing written outside its paths', async () => {
    const before = await listing(s.dir);
    const cases: Array<[Record<string, unknown>, number]> = [
      [slot({ stateDir: `${s.stateDir}\u0000x` }), 5],
      [slot({ delegate: { type: 'host\u0000local', dataDir: s.dataDir } }), 7],
      [slot({}, { name: 'fuzz\u0000net' }), 7],
      [slot({}, { cniVersion: '1.0.0\u0000' }), 1],
    ];
    for (const [conf, code] of cases) await expectCode(await run(env(), JSON.stringify(conf)), code);
    await expectCode(await run(env(), JSON.stringify(slot()).replace('"name"', '"na\u0000me"')), 6);
    // A NUL inside the log file name only loses the log (stderr instead), never the answer.
    const o = await run(env(), JSON.stringify(slot({ logFile: `${s.logFile}\u0000.evil` })));
    expect(o.exitCode, o.stdout).toBe(0);
    expect(changed(before, await listing(s.dir)).filter((p) => !/^(state|host-local|cwd)(\/|$)|^shim\.log$/.test(p))).toEqual([]);
  });

  it('huge and odd numbers → 7 naming the field, or 1 for a numeric version', async () => {
    for (const n of ['1e400', '-1e400', '18446744073709551616', '1e-400', '0.5', '-0']) {
      const text = JSON.stringify(slot()).replace('"type":"ipam-shim",', `"type":"ipam-shim","delegateTimeoutMs":${n},`);
      const doc = await expectCode(await run(env(), text), 7);
      expect(doc.details).toContain('delegateTimeoutMs');
    }
    await expectCode(await run(env(), JSON.stringify(slot()).replace('"cniVersion":"1.0.0"', '"cniVersion":1e400')), 1);
    await expectNothingAllocated();
  });

  it('__proto__ keys stay data: never a shim setting, never the delegate type', async () => {
    const log = join(s.dir, 'wrap.log');
    const base = JSON.stringify(slot());
    // In the shim's own settings: an unknown key (2), not a stateDir override.
    const inIpam = await run(env(), base.replace('"type":"ipam-shim",', '"type":"ipam-shim","__proto__":{"stateDir":"/etc/evil"},'));
    expect((await expectCode(inIpam, 2)).msg).toContain('__proto__');
    // In the delegate with no own type: no inherited type is executed (7), wrap-ipam never runs.
    const noType = base.replace(/"delegate":\{"type":"host-local",/, `"delegate":{"__proto__":{"type":"${WRAP_IPAM}"},`);
    await expectCode(await run(env({ WRAP_IPAM_LOG: log }), noType), 7);
    await expect(stat(log)).rejects.toMatchObject({ code: 'ENOENT' });
    // Chained: an unknown key (2).
    const chained = shimConf({
      placement: 'chained',
      name: NET,
      dirs: s,
      top: { prevResult: { cniVersion: '1.0.0', ips: [{ address: '10.238.0.9/24' }] } },
    });
    await expectCode(await run(env(), JSON.stringify(chained).replace('"name"', '"__proto__":{"polluted":1},"name"')), 2);
    // At the top level of the IPAM slot (not ours to judge): the ADD works and the delegate gets its own type.
    const top = await run(env(), base.replace('{"cniVersion"', '{"__proto__":{"type":"/bin/sh"},"cniVersion"'));
    expect(top.exitCode, top.stdout).toBe(0);
    expect([...(await hostLocalStore(s.dataDir, NET)).keys()]).toEqual(['10.238.0.2']);
    expect(existsSyncNot('/etc/evil')).toBe(true);
  });

  it('container IDs and ifnames at and past the limits', async () => {
    // The ledger keys files by "<cid>:<ifname>.json": 231 bytes for both together (NAME_MAX with the temp suffix).
    const atLimit = { CNI_CONTAINERID: 'c'.repeat(216), CNI_IFNAME: 'abcdefghijklmno' };
    const added = await run(env(atLimit), JSON.stringify(slot()));
    expect(added.exitCode, added.stdout).toBe(0);
    const check = await run(env({ ...atLimit, CNI_COMMAND: 'CHECK' }), JSON.stringify(slot({}, { prevResult: JSON.parse(added.stdout) })));
    expect(check.exitCode, check.stdout).toBe(0);
    expect((await run(env({ ...atLimit, CNI_COMMAND: 'DEL' }), JSON.stringify(slot()))).exitCode).toBe(0);
    await expectNothingAllocated();

    const pastLimit: Array<Record<string, string>> = [
      { CNI_CONTAINERID: 'c'.repeat(217), CNI_IFNAME: 'abcdefghijklmno' },
      { CNI_CONTAINERID: 'c'.repeat(10_000) },
    ];
    for (const over of pastLimit) {
      const doc = await expectCode(await run(env(over), JSON.stringify(slot())), 4);
      expect(doc.msg).toMatch(/CNI_CONTAINERID too long/);
      // DEL of such an ID has nothing to forget and is not an error.
      expect((await run(env({ ...over, CNI_COMMAND: 'DEL' }), JSON.stringify(slot()))).exitCode).toBe(0);
    }
    for (const ifname of ['abcdefghijklmnop', 'éééééééé', 'a\tb', '..'])
      await expectCode(await run(env({ CNI_IFNAME: ifname }), JSON.stringify(slot())), 4);
    const uni = await run(env({ CNI_IFNAME: 'ééééééé' }), JSON.stringify(slot())); // 14 bytes
    expect(uni.exitCode, uni.stdout).toBe(0);
    expect((await run(env({ CNI_IFNAME: 'ééééééé', CNI_COMMAND: 'DEL' }), JSON.stringify(slot()))).exitCode).toBe(0);
    await expectNothingAllocated();
  });

  it('delegate.type "../../bin/sh", "/bin/sh", ".", ".." → 7 for every verb but DEL and both placements, nothing executed', async () => {
    for (const type of ['../../bin/sh', '/bin/sh', '.', '..', 'host-local/../../../bin/sh']) {
      for (const command of ['ADD', 'CHECK']) {
        await expectCode(await run(env({ CNI_COMMAND: command }), JSON.stringify(slot({ delegate: { type, dataDir: s.dataDir } }))), 7, command);
      }
      // A config mistake never fails DEL (docs/failure-model.md): with no readable delegate it executes nothing.
      const del = await run(env({ CNI_COMMAND: 'DEL' }), JSON.stringify(slot({ delegate: { type, dataDir: s.dataDir } })));
      expect(protocolViolations('DEL', del)).toEqual([]);
      expect(del.exitCode, del.stdout).toBe(0);
      for (const command of ['GC', 'STATUS']) {
        const conf = slot({ delegate: { type, dataDir: s.dataDir } }, { cniVersion: '1.1.0' });
        await expectCode(
          await run(env({ CNI_COMMAND: command, CNI_CONTAINERID: '', CNI_IFNAME: '', CNI_NETNS: '' }), JSON.stringify(conf)),
          7,
          command,
        );
      }
      const chained = shimConf({ placement: 'chained', cniVersion: '1.1.0', name: NET, dirs: s, delegate: { type } });
      await expectCode(
        await run(env({ CNI_COMMAND: 'STATUS', CNI_CONTAINERID: '', CNI_IFNAME: '', CNI_NETNS: '' }), JSON.stringify(chained)),
        7,
        'STATUS',
      );
    }
    // A directory of that name on CNI_PATH is not a plugin either.
    await mkdir(join(s.dir, 'bin', 'dirplug'), { recursive: true });
    await expectCode(await run(env({ CNI_PATH: join(s.dir, 'bin') }), JSON.stringify(slot({ delegate: { type: 'dirplug' } }))), 7);
    await expectNothingAllocated();
  });
});

function existsSyncNot(path: string): boolean {
  try {
    lstatSync(path);
    return false;
  } catch {
    return true;
  }
}

// ---------------------------------------------------------------------------------------------------------------

describe('planted symlinks and a corrupt ledger', () => {
  const network = () => `lnk-${uid()}`;
  const slotFor = (net: string, cniVersion = '1.0.0') =>
    shimConf({ cniVersion, name: net, dirs: s, probeRewrite: false, delegate: hostLocal(s.dataDir, '10.239.0.0/24') });
  const call = (net: string, command: string, cid = 'pod-1', extra: Record<string, unknown> = {}, cniVersion = '1.0.0') =>
    invoke(
      { ...slotFor(net, cniVersion), ...extra },
      {
        command,
        containerID: command === 'GC' ? '' : cid,
        // A gone netns whose directory exists (the scratch dir): provably dead, also on a fresh machine without /run/netns.
        netns: command === 'GC' ? '' : join(s.dir, `gone-${cid}`),
        ifname: command === 'GC' ? '' : 'eth0',
        path: [PLUGIN_DIR],
      },
    );
  async function target(): Promise<string> {
    const t = join(s.dir, 'precious');
    await writeFile(t, 'PRECIOUS');
    return t;
  }
  const untouched = async (t: string) => expect(await readFile(t, 'utf8')).toBe('PRECIOUS');

  it('a symlink at the record path: ADD refuses with 103 naming it and allocates nothing; the target is never written', async () => {
    const net = network();
    expect((await call(net, 'ADD', 'other')).exitCode).toBe(0); // creates the ledger directories
    const t = await target();
    const rec = join(s.stateDir, net, 'records', 'pod-1:eth0.json');
    await symlink(t, rec);
    const add = await call(net, 'ADD');
    expect(add.json).toMatchObject({ code: ErrorCode.LedgerCorrupt });
    expect(add.json.msg).toContain(rec);
    expect([...(await hostLocalStore(s.dataDir, net)).values()]).toEqual(['other:eth0']);
    expect((await call(net, 'CHECK')).json).toMatchObject({ code: ErrorCode.LedgerCorrupt });
    // DEL forgets it: the link is removed, not followed.
    expect((await call(net, 'DEL')).exitCode).toBe(0);
    await expect(lstat(rec)).rejects.toMatchObject({ code: 'ENOENT' });
    await untouched(t);
    // And ADD works again.
    expect((await call(net, 'ADD')).exitCode).toBe(0);
    await untouched(t);
  });

  it('symlinks at the IP index entry, the lock and temp-file names are replaced or refused, never written through', async () => {
    const net = network();
    expect((await call(net, 'ADD', 'first')).exitCode).toBe(0); // 10.239.0.2
    const t = await target();
    // The next address host-local hands out is 10.239.0.3: plant its index entry.
    await symlink(t, join(s.stateDir, net, 'ips', '10.239.0.3'));
    const add = await call(net, 'ADD', 'second');
    expect(add.json).toMatchObject({ code: ErrorCode.LedgerCorrupt });
    expect(add.json.msg).toContain(join(s.stateDir, net, 'ips', '10.239.0.3'));
    expect([...(await hostLocalStore(s.dataDir, net)).values()]).toEqual(['first:eth0']); // released again
    await rm(join(s.stateDir, net, 'ips', '10.239.0.3'));
    // A symlinked lock: never written through (the lock is created O_EXCL|O_NOFOLLOW; a dead holder's link is removed).
    await symlink(t, join(s.stateDir, net, 'lock'));
    // Temp names (".<name>.<pid>.<attempt>.tmp") are opened O_CREAT|O_EXCL|O_NOFOLLOW: a planted one is skipped, never
    // written through (a name that is taken for the writer's own pid: test/unit/fs-atomic.test.ts).
    for (let i = 0; i < 16; i++) await symlink(t, join(s.stateDir, net, 'records', `.second:eth0.json.${i + 1}.${i % 4}.tmp`));
    const again = await call(net, 'ADD', 'second');
    expect(again.exitCode, again.stdout).toBe(0);
    await untouched(t);
    const ledger = await readLedger(s.stateDir, net);
    // The planted temp-name links are still there, still links (never opened, never renamed over).
    expect(ledger.temps).toHaveLength(16);
    for (const p of ledger.temps) expect((await lstat(p)).isSymbolicLink()).toBe(true);
    expect(disagreements({ ...ledger, temps: [] }, await hostLocalStore(s.dataDir, net))).toEqual([]);
    expect([...ledger.records.keys()].sort()).toEqual(['first:eth0', 'second:eth0']);
  });

  it('symlinked ledger directories are refused with 103 before anything is allocated', async () => {
    for (const which of ['stateDir', 'network', 'records', 'ips'] as const) {
      await rm(s.stateDir, { recursive: true, force: true });
      const net = network();
      const elsewhere = join(s.dir, `elsewhere-${which}`);
      await mkdir(elsewhere, { recursive: true, mode: 0o700 });
      const at = {
        stateDir: s.stateDir,
        network: join(s.stateDir, net),
        records: join(s.stateDir, net, 'records'),
        ips: join(s.stateDir, net, 'ips'),
      }[which];
      await mkdir(join(at, '..'), { recursive: true, mode: 0o700 });
      await symlink(elsewhere, at);
      const add = await call(net, 'ADD');
      expect(add.json, `${which}: ${add.stdout}`).toMatchObject({ code: ErrorCode.LedgerCorrupt });
      expect(add.json.details ?? add.json.msg).toContain(at);
      expect(await hostLocalStore(s.dataDir, net)).toEqual(new Map());
      expect(await readdir(elsewhere)).toEqual([]);
    }
  });

  for (const [what, content] of [
    ['truncated', '{"v":1,"containerID":"pod-1","ifn'],
    ['garbage', '\u0007\u0000binary garbage\n'],
    ['empty', ''],
    ['valid JSON, wrong shape', '{"v":2,"ips":"10.0.0.1"}'],
  ] as const) {
    it(`a ${what} record → 103 naming the file on ADD/CHECK for it; GC releases nothing until it is fixed`, async () => {
      const net = network();
      // One live (valid) attachment, one dead one (not valid, sandbox gone): GC would release the dead one.
      expect((await call(net, 'ADD', 'live')).exitCode).toBe(0);
      expect((await call(net, 'ADD', 'dead')).exitCode).toBe(0);
      const corrupt = join(s.stateDir, net, 'records', 'pod-1:eth0.json');
      await writeFile(corrupt, content, { mode: 0o600 });

      for (const command of ['ADD', 'CHECK']) {
        const o = await call(net, command);
        expect(o.json, `${command}: ${o.stdout}`).toMatchObject({ code: ErrorCode.LedgerCorrupt });
        expect(o.json.msg).toContain(corrupt);
      }
      const valid = { 'cni.dev/valid-attachments': [{ containerID: 'live', ifname: 'eth0' }] };
      const refused = await call(net, 'GC', '', valid, '1.1.0');
      expect(refused.json).toMatchObject({ code: ErrorCode.LedgerCorrupt });
      expect(refused.json.details).toContain(corrupt);
      expect([...(await hostLocalStore(s.dataDir, net)).values()].sort()).toEqual(['dead:eth0', 'live:eth0']);

      // Fixed (the operator removes the file): GC releases the dead attachment and keeps the live one.
      await rm(corrupt);
      const gc = await call(net, 'GC', '', valid, '1.1.0');
      expect(gc.exitCode, gc.stdout).toBe(0);
      expect([...(await hostLocalStore(s.dataDir, net)).values()]).toEqual(['live:eth0']);
      expect([...(await readLedger(s.stateDir, net)).records.keys()]).toEqual(['live:eth0']);
    });
  }
});
