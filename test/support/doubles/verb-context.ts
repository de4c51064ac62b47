// In-process verb contexts for unit tests: the real config parsing and the real verbs over the in-memory ledger,
// a scripted delegate and a scripted Run (memory-ledger.ts, scripted-delegate.ts here, src/scripted/scripted-run.ts).
import { readCniEnv } from '../../../src/cni/env.js';
import { parseNetConf, parseNetConfForDel } from '../../../src/cni/config.js';
import { convertResult, parseResult, type Result } from '../../../src/cni/result.js';
import { silentLogger } from '../../../src/log.js';
import { MemoryLedger } from './memory-ledger.js';
import { ScriptedDelegate, type DelegateScript } from './scripted-delegate.js';
import { scriptedRun, type RunScript } from '../../../src/scripted/scripted-run.js';
import type { LedgerRecord } from '../../../src/ledger/record.js';
import type { VerbContext } from '../../../src/verbs/context.js';

/** An IPAM-slot config (residue and probe rewrite off unless `ipam` turns them on). */
export function ipamConf(ipam: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    cniVersion: '1.0.0',
    name: 'unit',
    type: 'ptp',
    ipam: {
      type: 'ipam-shim',
      stateDir: '/nonexistent',
      residue: { ebtables: false, neigh: false },
      ipv6ProbeRewrite: 'off',
      delegate: { type: 'host-local', subnet: '10.0.0.0/24' },
      ...ipam,
    },
  };
}

/** The shim chained after the plugin that allocated `prevResult` (its settings at the top level of its entry). */
export function chainedConf(prevResult: unknown): Record<string, unknown> {
  return {
    cniVersion: '1.0.0',
    name: 'unit',
    type: 'ipam-shim',
    stateDir: '/nonexistent',
    residue: { ebtables: false, neigh: false },
    ipv6ProbeRewrite: 'off',
    prevResult,
  };
}

/** A delegate result holding `ips` (host-local's shape). */
export function resultWith(...ips: string[]): Result {
  return convertResult(
    parseResult({ cniVersion: '1.0.0', ips: ips.map((ip) => ({ address: `${ip}/${ip.includes(':') ? 64 : 24}` })) }, 'test result'),
    '1.0.0',
  );
}

export interface Fakes {
  ledger: MemoryLedger;
  delegate: ScriptedDelegate;
  run: ReturnType<typeof scriptedRun>;
}

export function fakes(o: { records?: LedgerRecord[]; delegate?: Partial<DelegateScript>; run?: RunScript } = {}): Fakes {
  return {
    ledger: new MemoryLedger('unit', o.records),
    delegate: new ScriptedDelegate({ add: () => resultWith('10.0.0.5'), ...o.delegate }),
    run: scriptedRun(o.run ?? (() => undefined)),
  };
}

/** The context a verb gets for CNI_COMMAND `command` on `raw`, over `f`. */
export function verbContext(command: string, raw: Record<string, unknown>, f: Fakes, env: Record<string, string> = {}): VerbContext {
  const procEnv = { CNI_COMMAND: command, CNI_CONTAINERID: 'c1', CNI_NETNS: '/run/netns/c1', CNI_IFNAME: 'eth0', CNI_PATH: '/nonexistent', ...env };
  const conf = command === 'DEL' ? parseNetConfForDel(raw) : parseNetConf(raw);
  return {
    env: readCniEnv(procEnv),
    conf,
    procEnv,
    log: silentLogger,
    ledger: f.ledger,
    delegate: f.delegate,
    run: f.run,
    counters: {},
  };
}

export const record = (containerID: string, over: Partial<LedgerRecord> = {}): LedgerRecord => ({
  v: 1,
  containerID,
  ifname: 'eth0',
  network: 'unit',
  owner: 'pod',
  state: 'attached',
  placement: 'ipam',
  ips: ['10.0.0.9'],
  netns: '',
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
  // What today's ADD records when the runtime names no pod (src/ledger/identity.ts); an older shim's record has none.
  cniArgs: '',
  ...over,
});
