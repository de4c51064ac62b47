// An IPAM delegate that answers from a script instead of running a plugin, for the verbs' unit tests. Every call
// is recorded, so a test can see what the verb asked.
import type { Result } from '../../../src/cni/result.js';
import type { IpamDelegate } from '../../../src/effects/delegate.js';
import { probeCheckProof, type CheckProof } from '../../../src/effects/check-proof.js';

export type DelegateCommand = 'ADD' | 'DEL' | 'CHECK' | 'GC' | 'STATUS';

export interface DelegateCall {
  command: DelegateCommand;
  conf: Record<string, unknown>;
  env: NodeJS.ProcessEnv;
}

export interface DelegateScript {
  type?: string;
  versions?: string[];
  /** ADD's result (or throws); DEL/CHECK/GC/STATUS succeed unless their function throws. */
  add: (call: DelegateCall) => Result;
  del?: (call: DelegateCall) => void;
  check?: (call: DelegateCall) => void;
  gc?: (call: DelegateCall) => void;
  status?: (call: DelegateCall) => void;
}

export class ScriptedDelegate implements IpamDelegate {
  readonly calls: DelegateCall[] = [];
  constructor(private readonly script: DelegateScript) {}

  get type(): string {
    return this.script.type ?? 'scripted';
  }

  async supportedVersions(): Promise<string[]> {
    return this.script.versions ?? ['0.3.1', '0.4.0', '1.0.0', '1.1.0'];
  }

  async versionFor(wanted: string): Promise<string> {
    const versions = await this.supportedVersions();
    return versions.includes(wanted) ? wanted : versions[versions.length - 1]!;
  }

  async speaks(version: string): Promise<boolean> {
    return (await this.supportedVersions()).includes(version);
  }

  async add(conf: Record<string, unknown>, _resultVersion: string, env: NodeJS.ProcessEnv = {}): Promise<Result> {
    return this.script.add(this.note('ADD', conf, env));
  }

  async del(conf: Record<string, unknown>, env: NodeJS.ProcessEnv = {}): Promise<void> {
    const call = this.note('DEL', conf, env);
    this.script.del?.(call);
  }

  async check(conf: Record<string, unknown>, env: NodeJS.ProcessEnv = {}): Promise<void> {
    const call = this.note('CHECK', conf, env);
    this.script.check?.(call);
  }

  /** The real probe (src/effects/check-proof.ts) over the script's CHECK: a script whose check never throws proves nothing. */
  async checkProof(confFor: (prevResult: Record<string, unknown>) => Record<string, unknown>, version: string, netns: string): Promise<CheckProof> {
    return probeCheckProof(
      (c, env) => this.check(c, env),
      confFor,
      version,
      netns,
      () => false,
    );
  }

  async gc(conf: Record<string, unknown>): Promise<void> {
    const call = this.note('GC', conf, {});
    this.script.gc?.(call);
  }

  async status(conf: Record<string, unknown>): Promise<void> {
    const call = this.note('STATUS', conf, {});
    this.script.status?.(call);
  }

  /** The bounds the caller asked for (withTimeout), in order; the scripted answers come at once regardless. */
  readonly timeouts: number[] = [];
  withTimeout(timeoutMs: number): ScriptedDelegate {
    this.timeouts.push(timeoutMs);
    return this;
  }

  private note(command: DelegateCommand, conf: Record<string, unknown>, env: NodeJS.ProcessEnv): DelegateCall {
    const call = { command, conf, env };
    this.calls.push(call);
    return call;
  }
}
