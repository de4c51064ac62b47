// Which spans (the log line's `timings`, src/spans.ts) each verb records, on success and on each way it fails: a
// failed step's span is still there, with how long it took; a step never reached has none. The e2e view of the
// same line: test/e2e/call-log.test.ts.
import { afterEach, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { CniError, ErrorCode } from '../../src/cni/errors.js';
import type { Result } from '../../src/cni/result.js';
import { takeSpans } from '../../src/spans.js';
import { cmdAdd } from '../../src/verbs/add.js';
import { cmdCheck } from '../../src/verbs/check.js';
import { cmdDel } from '../../src/verbs/del.js';
import { ScriptedDelegate, type DelegateScript } from '../support/doubles/scripted-delegate.js';
import { chainedConf, fakes, ipamConf, record, resultWith, verbContext, type Fakes } from '../support/doubles/verb-context.js';

const names = () => takeSpans().map(([name]) => name);
const spans = () => new Map(takeSpans());

/** A delegate whose ADD takes `ms` and then answers `answer` (a result, or an error to throw). */
class SlowDelegate extends ScriptedDelegate {
  constructor(
    private readonly ms: number,
    private readonly answer: Result | Error,
    script: Partial<DelegateScript> = {},
  ) {
    super({ add: () => resultWith('10.0.0.5'), ...script });
  }
  override async add(conf: Record<string, unknown>, v: string, env?: NodeJS.ProcessEnv): Promise<Result> {
    await super.add(conf, v, env);
    await sleep(this.ms);
    if (this.answer instanceof Error) throw this.answer;
    return this.answer;
  }
}

/** A delegate that cannot say which versions it speaks. */
class MuteDelegate extends ScriptedDelegate {
  override async supportedVersions(): Promise<string[]> {
    throw new CniError(ErrorCode.DelegateFailed, 'no answer');
  }
}

const withDelegate = (f: Fakes, delegate: ScriptedDelegate): Fakes => ({ ...f, delegate });

afterEach(() => void takeSpans());

describe('the spans of ADD in the IPAM slot', () => {
  it('every step, in the order each ended', async () => {
    await cmdAdd(verbContext('ADD', ipamConf(), fakes()));
    expect(names()).toEqual(['delegate.version', 'ledger.lock', 'ledger.intent', 'delegate.add', 'address', 'ledger.write']);
  });

  it("a failed delegate ADD: its span holds the wait, then the undo's DEL; nothing after it", async () => {
    const f = withDelegate(fakes(), new SlowDelegate(40, new CniError(ErrorCode.DelegateFailed, 'no addresses left')));
    await expect(cmdAdd(verbContext('ADD', ipamConf(), f))).rejects.toMatchObject({ code: ErrorCode.DelegateFailed });
    const s = spans();
    expect([...s.keys()]).toEqual(['delegate.version', 'ledger.lock', 'ledger.intent', 'delegate.add', 'delegate.del']);
    expect(s.get('delegate.add')).toBeGreaterThanOrEqual(35);
  });

  it('an address a fix refuses: the address span, then the undo', async () => {
    const f = fakes();
    const conf = ipamConf({ reservedCIDRs: ['10.0.0.0/28'] });
    await expect(cmdAdd(verbContext('ADD', conf, f))).rejects.toMatchObject({ code: ErrorCode.ReservedAddress });
    expect(names()).toEqual(['delegate.version', 'ledger.lock', 'ledger.intent', 'delegate.add', 'address', 'delegate.del']);
  });

  it('a delegate that cannot say its versions: that span alone (no lock taken, no intent written)', async () => {
    const f = withDelegate(fakes(), new MuteDelegate({ add: () => resultWith('10.0.0.5') }));
    await expect(cmdAdd(verbContext('ADD', ipamConf(), f))).rejects.toMatchObject({ code: ErrorCode.DelegateFailed });
    expect(names()).toEqual(['delegate.version']);
  });

  it('a repeated ADD: the lock, no intent (nothing was written)', async () => {
    const f = fakes({ records: [record('c1', { ips: ['10.0.0.5'] })] });
    await expect(cmdAdd(verbContext('ADD', ipamConf(), f))).rejects.toMatchObject({ code: ErrorCode.InvalidEnvironment });
    expect(names()).toEqual(['delegate.version', 'ledger.lock']);
  });
});

describe('the spans of the other verbs', () => {
  it('chained ADD: the lock, the address steps, the write', async () => {
    await cmdAdd(verbContext('ADD', chained, fakes()));
    expect(names()).toEqual(['ledger.lock', 'address', 'ledger.write']);
  });

  it('DEL: the lock, the delegate VERSION and DEL, the removal', async () => {
    const f = fakes({ records: [record('c1', { ips: ['10.0.0.5'] })] });
    await cmdDel(verbContext('DEL', ipamConf(), f));
    expect(names()).toEqual(['ledger.lock', 'delegate.version', 'delegate.del', 'ledger.remove']);
  });

  it("CHECK: the lock, the delegate's VERSION and CHECK; a failed CHECK keeps its span", async () => {
    const f = fakes({ records: [record('c1', { ips: ['10.0.0.5'] })] });
    await cmdCheck(verbContext('CHECK', ipamConf(), f));
    expect(names()).toEqual(['ledger.lock', 'delegate.version', 'delegate.check']);
    const failing = withDelegate(
      f,
      new ScriptedDelegate({
        add: () => resultWith('10.0.0.5'),
        check: () => {
          throw new CniError(ErrorCode.DelegateFailed, 'not allocated');
        },
      }),
    );
    await expect(cmdCheck(verbContext('CHECK', ipamConf(), failing))).rejects.toMatchObject({ code: ErrorCode.DelegateFailed });
    expect(names()).toEqual(['ledger.lock', 'delegate.version', 'delegate.check']);
  });
});

/** The shim chained after the plugin that allocated 10.0.0.7. */
const chained = chainedConf(resultWith('10.0.0.7'));
