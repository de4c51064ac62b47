// Throwaway network namespaces, veths and bridges for tests. Every helper registers its own undo, and
// `cleanup()` runs them all (call it from afterEach/afterAll so a failing test still cleans up).
import { randomBytes } from 'node:crypto';
import { execa } from 'execa';

/** Short unique suffix: interface names are limited to 15 bytes. */
export function uid(len = 6): string {
  return randomBytes(8).toString('hex').slice(0, len);
}

export async function sh(file: string, args: string[], opts: { input?: string; reject?: boolean } = {}) {
  return execa(file, args, { input: opts.input, reject: opts.reject ?? true });
}

/** Runs a command inside netns `ns`. */
export async function inNs(ns: string, file: string, args: string[], opts: { input?: string; reject?: boolean; env?: Record<string, string> } = {}) {
  return execa('ip', ['netns', 'exec', ns, file, ...args], {
    input: opts.input,
    reject: opts.reject ?? true,
    ...(opts.env ? { env: opts.env } : {}),
  });
}

export class TestNet {
  private undo: Array<() => Promise<unknown>> = [];

  /** Creates a netns (lo up) and returns its name; its path is /run/netns/<name>. */
  async netns(prefix = 'ns'): Promise<string> {
    const name = `${prefix}-${uid()}`;
    await sh('ip', ['netns', 'add', name]);
    this.undo.push(() => sh('ip', ['netns', 'del', name], { reject: false }));
    await inNs(name, 'ip', ['link', 'set', 'lo', 'up']);
    return name;
  }

  /** A veth pair: `a` in netns nsA, `b` in nsB (null = host). Names are given. */
  async veth(nsA: string, a: string, nsB: string | null, b: string): Promise<void> {
    const tmpA = `va${uid(8)}`;
    const tmpB = `vb${uid(8)}`;
    await sh('ip', ['link', 'add', tmpA, 'type', 'veth', 'peer', 'name', tmpB]);
    this.undo.push(() => sh('ip', ['link', 'del', tmpA], { reject: false }));
    await sh('ip', ['link', 'set', tmpA, 'netns', nsA]);
    await inNs(nsA, 'ip', ['link', 'set', tmpA, 'name', a]);
    await inNs(nsA, 'ip', ['link', 'set', a, 'up']);
    if (nsB) {
      await sh('ip', ['link', 'set', tmpB, 'netns', nsB]);
      await inNs(nsB, 'ip', ['link', 'set', tmpB, 'name', b]);
      await inNs(nsB, 'ip', ['link', 'set', b, 'up']);
    } else {
      await sh('ip', ['link', 'set', tmpB, 'name', b]);
      await sh('ip', ['link', 'set', b, 'up']);
    }
  }

  /** Registers an extra undo step (runs in reverse order). */
  defer(fn: () => Promise<unknown>): void {
    this.undo.push(fn);
  }

  async cleanup(): Promise<void> {
    const steps = this.undo.reverse();
    this.undo = [];
    for (const step of steps) {
      try {
        await step();
      } catch {
        // best effort: the next steps must still run
      }
    }
  }
}

/** Tests needing root/namespaces: in CI a missing prerequisite is a failure, elsewhere a skip with a reason. */
export function rootOrSkip(): boolean {
  const isRoot = process.getuid?.() === 0;
  if (!isRoot && process.env.CI === 'true') throw new Error('CI must run as root: namespace tests cannot be skipped');
  if (!isRoot) console.warn('skipping: needs root for network namespaces');
  return isRoot;
}
