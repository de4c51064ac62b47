// The protocol layer in process: env rules, version gates, result conversion, config parsing, dispatch.
import { describe, expect, it } from 'vitest';
import { Readable } from 'node:stream';
import { readCniEnv, parseCniArgs } from '../../src/cni/env.js';
import { convertResult, parseResult } from '../../src/cni/result.js';
import { parseNetConf, delegateConf } from '../../src/cni/config.js';
import { bridgeVersion, assertVersionAllows } from '../../src/cni/versions.js';
import { dispatch, type Verbs } from '../../src/cni/skel.js';
import { readStdin } from '../../src/cni/stdin.js';
import { CniError, ErrorCode } from '../../src/cni/errors.js';

const codeOf = (fn: () => unknown): number | undefined => {
  try {
    fn();
  } catch (e) {
    return (e as CniError).code;
  }
  return undefined;
};

describe('env', () => {
  const base = { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'abc', CNI_NETNS: '/n', CNI_IFNAME: 'eth0', CNI_PATH: '/opt/cni/bin' };
  it('reads a full ADD environment', () => {
    expect(readCniEnv({ ...base, CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAME=p' })).toMatchObject({
      command: 'ADD',
      containerID: 'abc',
      args: { IgnoreUnknown: '1', K8S_POD_NAME: 'p' },
      path: ['/opt/cni/bin'],
    });
  });
  it('reads the pod from CNI_ARGS once: K8S_POD_NAMESPACE/NAME/UID, absent when none is set, code 4 when longer than Kubernetes allows', () => {
    const args = 'IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-0;K8S_POD_UID=0f0e5a3c-7c1d-4b7e-9a51-3c7c2f0b6d11';
    expect(readCniEnv({ ...base, CNI_ARGS: args }).pod).toEqual({ namespace: 'shop', name: 'web-0', uid: '0f0e5a3c-7c1d-4b7e-9a51-3c7c2f0b6d11' });
    expect(readCniEnv({ ...base, CNI_ARGS: 'K8S_POD_NAME=web-0;K8S_POD_NAMESPACE=' }).pod).toEqual({ name: 'web-0' });
    expect(readCniEnv({ ...base, CNI_ARGS: 'IgnoreUnknown=1' }).pod).toBeUndefined();
    expect(readCniEnv({ ...base, CNI_COMMAND: 'VERSION', CNI_ARGS: args }).pod).toBeUndefined();
    expect(codeOf(() => readCniEnv({ ...base, CNI_ARGS: `K8S_POD_NAME=${'a'.repeat(254)}` }))).toBe(4);
    // DEL never fails on it (teardown must go on): the pod is left out.
    expect(readCniEnv({ ...base, CNI_COMMAND: 'DEL', CNI_ARGS: `K8S_POD_NAMESPACE=shop;K8S_POD_NAME=${'a'.repeat(254)}` }).pod).toBeUndefined();
  });
  it('treats "" as unset and lists every missing name', () => {
    const e = (() => {
      try {
        readCniEnv({ ...base, CNI_NETNS: '', CNI_IFNAME: '' });
      } catch (err) {
        return err as CniError;
      }
    })();
    expect(e?.code).toBe(ErrorCode.InvalidEnvironment);
    expect(e?.msg).toContain('CNI_NETNS,CNI_IFNAME');
  });
  it('DEL tolerates a missing netns; GC needs CNI_PATH only; STATUS nothing', () => {
    expect(readCniEnv({ ...base, CNI_COMMAND: 'DEL', CNI_NETNS: '' }).netns).toBe('');
    expect(codeOf(() => readCniEnv({ CNI_COMMAND: 'GC', CNI_PATH: '' }))).toBe(4);
    expect(readCniEnv({ CNI_COMMAND: 'GC', CNI_PATH: '/x', CNI_CONTAINERID: '', CNI_IFNAME: '' }).command).toBe('GC');
    expect(readCniEnv({ CNI_COMMAND: 'STATUS' }).command).toBe('STATUS');
  });
  it('validates container IDs and ifnames by the spec rules', () => {
    expect(codeOf(() => readCniEnv({ ...base, CNI_CONTAINERID: '' }))).toBe(3);
    for (const id of ['-x', 'a b', 'a/b', 'a:b']) expect(codeOf(() => readCniEnv({ ...base, CNI_CONTAINERID: id }))).toBe(4);
    for (const ifname of ['.', '..', 'a'.repeat(16), 'a:b', 'a b', 'é'.repeat(8)])
      expect(codeOf(() => readCniEnv({ ...base, CNI_IFNAME: ifname }))).toBe(4);
    expect(readCniEnv({ ...base, CNI_IFNAME: 'a'.repeat(15) }).ifname).toHaveLength(15);
  });
  it('rejects malformed CNI_ARGS', () => {
    expect(codeOf(() => parseCniArgs('novalue'))).toBe(4);
    expect(parseCniArgs('A=1;;B=x=y')).toEqual({ A: '1', B: 'x=y' });
  });
});

describe('versions', () => {
  it('gates CHECK, GC and STATUS', () => {
    expect(codeOf(() => assertVersionAllows('CHECK', '0.3.1'))).toBe(1);
    expect(codeOf(() => assertVersionAllows('CHECK', '0.4.0'))).toBeUndefined();
    expect(codeOf(() => assertVersionAllows('GC', '1.0.0'))).toBe(1);
    expect(codeOf(() => assertVersionAllows('STATUS', '1.1.0'))).toBeUndefined();
  });
  it('bridges to the highest common version not newer than wanted', () => {
    expect(bridgeVersion('1.1.0', ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0'])).toBe('1.0.0');
    expect(bridgeVersion('0.4.0', ['0.3.1', '0.4.0', '1.0.0'])).toBe('0.4.0');
    expect(bridgeVersion('0.3.0', ['0.4.0', '1.0.0'])).toBeUndefined();
  });
});

describe('results', () => {
  const r100 = {
    cniVersion: '1.0.0',
    interfaces: [{ name: 'eth0', sandbox: '/n' }],
    ips: [{ address: '10.0.0.2/24', interface: 0 }, { address: 'fd00::2/64' }],
  };
  it('adds ips[].version going down and drops it going up', () => {
    const down = convertResult(parseResult(r100, 't'), '0.3.1');
    expect(down.ips?.map((i) => i.version)).toEqual(['4', '6']);
    expect(down.cniVersion).toBe('0.3.1');
    const up = convertResult(down, '1.1.0');
    expect(up.ips?.every((i) => !('version' in i))).toBe(true);
    expect(up.interfaces).toEqual(r100.interfaces);
  });
  it('refuses a result whose ips are not objects with an address (code 6)', () => {
    expect(codeOf(() => parseResult({ ips: [{ gateway: '1.2.3.4' }] }, 't'))).toBe(6);
  });
});

describe('config', () => {
  const chained = { cniVersion: '1.1.0', name: 'net', type: 'ipam-shim', reservedCIDRs: ['10.224.0.0/24'] };
  it('detects the placement and applies defaults', () => {
    const c = parseNetConf(chained);
    expect(c.placement).toBe('chained');
    expect(c.settings.stateDir).toBe('/var/lib/cni/ipam-shim');
    expect(c.settings.agentContainerIDs).toEqual(['cilium-agent-*', 'cilium-ingress-*']);
    expect(
      parseNetConf({ cniVersion: '1.0.0', name: 'n', type: 'cilium-cni', ipam: { type: 'ipam-shim', delegate: { type: 'azure-ipam' } } }).placement,
    ).toBe('ipam');
  });
  it('unknown keys are code 2 naming the key; bad values code 7; foreign main-plugin keys are not ours', () => {
    expect(codeOf(() => parseNetConf({ ...chained, reservedCidrs: [] }))).toBe(2);
    expect(codeOf(() => parseNetConf({ ...chained, residue: { ebtables: true, arp: true } }))).toBe(2);
    expect(codeOf(() => parseNetConf({ ...chained, ipv6ProbeRewrite: 'maybe' }))).toBe(7);
    expect(
      codeOf(() =>
        parseNetConf({ cniVersion: '1.0.0', name: 'n', type: 'ptp', mtu: 1400, ipam: { type: 'ipam-shim', delegate: { type: 'host-local' } } }),
      ),
    ).toBeUndefined();
  });
  it("bad values are explained in the operator's words: the path, then zod's English message or ours", () => {
    const details = (raw: Record<string, unknown>) => {
      try {
        parseNetConf(raw);
      } catch (e) {
        return (e as { details?: string }).details;
      }
      return undefined;
    };
    // zod/mini ships no locale of its own (src/cni/zod.ts configures English): without it these read "Invalid input".
    expect(details({ ...chained, delegateTimeoutMs: 1.5 })).toBe('delegateTimeoutMs: Invalid input: expected int, received number');
    expect(details({ ...chained, delegateTimeoutMs: 50 })).toBe('delegateTimeoutMs: Too small: expected number to be >=100');
    expect(details({ ...chained, ipv6ProbeRewrite: 'maybe' })).toBe('ipv6ProbeRewrite: Invalid option: expected one of "auto"|"on"|"off"');
    expect(details({ ...chained, stateDir: 'var/lib' })).toBe('stateDir: must be an absolute path');
    expect(details({ cniVersion: '1.0.0', name: 'n', type: 'ptp', ipam: { type: 'ipam-shim', delegate: { type: '../x' } } })).toBe(
      'ipam.delegate.type: must be a plain plugin name (no "/")',
    );
  });
  it('reads valid-attachments, falls back to the legacy key; absent (undefined) and null (null) are told apart for the log, [] is an empty list', () => {
    const a = [{ containerID: 'c', ifname: 'eth0' }];
    expect(parseNetConf({ ...chained, 'cni.dev/valid-attachments': a }).validAttachments).toEqual(a);
    expect(parseNetConf({ ...chained, 'cni.dev/attachments': a }).validAttachments).toEqual(a);
    expect(parseNetConf({ ...chained, 'cni.dev/valid-attachments': null, 'cni.dev/attachments': a }).validAttachments).toEqual(a);
    expect(parseNetConf({ ...chained, 'cni.dev/valid-attachments': [] }).validAttachments).toEqual([]);
    expect(parseNetConf(chained).validAttachments).toBeUndefined();
    // libcni's GCArgs{ValidAttachments: nil} (CRI-O after a reboot) sends both keys null.
    expect(parseNetConf({ ...chained, 'cni.dev/valid-attachments': null, 'cni.dev/attachments': null }).validAttachments).toBeNull();
    expect(parseNetConf({ ...chained, 'cni.dev/valid-attachments': null }).validAttachments).toBeNull();
    expect(parseNetConf({ ...chained, 'cni.dev/attachments': null }).validAttachments).toBeNull();
    expect(codeOf(() => parseNetConf({ ...chained, 'cni.dev/valid-attachments': 'all' }))).toBe(7);
  });
  it('a network name is at most 255 bytes (it names the ledger directory): longer is 7', () => {
    expect(parseNetConf({ ...chained, name: 'n'.repeat(255) }).name).toHaveLength(255);
    expect(codeOf(() => parseNetConf({ ...chained, name: 'n'.repeat(256) }))).toBe(7);
  });
  it('gives the delegate our config with ipam := delegate, minus our keys and the GC lists', () => {
    const c = parseNetConf({ ...chained, delegate: { type: 'host-local', subnet: '10.1.0.0/16' }, 'cni.dev/valid-attachments': [] });
    expect(delegateConf(c, '1.0.0')).toEqual({
      cniVersion: '1.0.0',
      name: 'net',
      type: 'ipam-shim',
      ipam: { type: 'host-local', subnet: '10.1.0.0/16' },
    });
  });
});

describe('dispatch', () => {
  const verbs: Verbs = {
    ADD: async () => ({ cniVersion: '1.0.0', ips: [{ address: '10.0.0.9/24' }] }),
    DEL: async () => {
      throw new CniError(11, 'busy');
    },
    CHECK: async () => {
      throw new Error('boom');
    },
    GC: async () => undefined,
    STATUS: async () => undefined,
  };
  const env = { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'c', CNI_NETNS: '/n', CNI_IFNAME: 'eth0' };
  const conf = JSON.stringify({ cniVersion: '1.0.0', name: 'n', type: 'ipam-shim', prevResult: { ips: [] } });
  const go = (e: Record<string, string>, stdin: string) =>
    dispatch(
      e,
      async () => stdin,
      async () => verbs,
    );
  it('prints exactly the result on success', async () => {
    const o = await go(env, conf);
    expect(o.exitCode).toBe(0);
    expect(JSON.parse(o.stdout).ips[0].address).toBe('10.0.0.9/24');
  });
  it('passes a typed CniError through and turns anything else into 999', async () => {
    expect(JSON.parse((await go({ ...env, CNI_COMMAND: 'DEL' }, conf)).stdout)).toEqual({
      cniVersion: '1.0.0',
      code: ErrorCode.TryAgainLater,
      msg: 'busy',
    });
    const o = await go({ ...env, CNI_COMMAND: 'CHECK' }, conf);
    expect(o.exitCode).toBe(1);
    expect(JSON.parse(o.stdout)).toMatchObject({ code: ErrorCode.Internal, msg: 'boom' });
  });
  it('an env error answers in the cniVersion of the config on stdin, which it reads only for that', async () => {
    let reads = 0;
    const o = await dispatch(
      { CNI_COMMAND: 'ADD' },
      async () => {
        reads++;
        return JSON.stringify({ cniVersion: '0.3.1' });
      },
      async () => verbs,
    );
    expect(JSON.parse(o.stdout)).toMatchObject({ code: ErrorCode.InvalidEnvironment, cniVersion: '0.3.1' });
    expect(reads).toBe(1);
    // stdin that cannot be read or parsed leaves the env error as it was, in the latest version.
    for (const input of [async () => Promise.reject(new Error('EIO')), async () => 'not json']) {
      const bad = await dispatch({ CNI_COMMAND: 'ADD' }, input, async () => verbs);
      expect(JSON.parse(bad.stdout)).toMatchObject({ code: ErrorCode.InvalidEnvironment, cniVersion: '1.1.0' });
    }
  });
});

describe('stdin', () => {
  it('refuses more than the limit with code 5', async () => {
    await expect(readStdin(Readable.from([Buffer.alloc(10)]), 5)).rejects.toMatchObject({ code: ErrorCode.IoFailure });
  });
  it('returns "" for a TTY without waiting', async () => {
    const tty = Object.assign(Readable.from([]), { isTTY: true });
    expect(await readStdin(tty)).toBe('');
  });
});
