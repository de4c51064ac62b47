// Running an ipam-shim executable to ask who it is: the installer's check of its source (the about line) and
// doctor's check of the installed copy (CNI VERSION).
import { run as defaultRun, type Run, type RunResult } from './exec.js';

/** Runs `path` with no arguments and no CNI_ variables (an ipam-shim prints its about line on stderr). */
export async function runBare(path: string): Promise<RunResult> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CNI_')));
  return defaultRun(path, [], { env, extendEnv: false, timeoutMs: 15_000, check: false });
}

/** What a plugin answered to CNI VERSION: its `supportedVersions` when the answer had them (an array), else undefined. */
export interface VersionAnswer {
  result: RunResult;
  versions: unknown[] | undefined;
}

/** Asks the plugin at `path` CNI VERSION in `cniVersion`. Never throws for a bad answer: the caller judges it. */
export async function askVersion(run: Run, path: string, cniVersion: string): Promise<VersionAnswer> {
  const result = await run(path, [], {
    input: JSON.stringify({ cniVersion }),
    env: { CNI_COMMAND: 'VERSION', CNI_CONTAINERID: '', CNI_NETNS: 'dummy', CNI_IFNAME: 'dummy', CNI_PATH: 'dummy' },
    timeoutMs: 10_000,
    check: false,
  });
  let versions: unknown;
  try {
    versions = (JSON.parse(result.stdout) as { supportedVersions?: unknown }).supportedVersions;
  } catch {
    versions = undefined;
  }
  return { result, versions: Array.isArray(versions) ? versions : undefined };
}
