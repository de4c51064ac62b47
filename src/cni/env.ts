// CNI_* environment: which variables each verb needs and what a valid value looks like (the CNI spec's
// parameters; the error codes: docs/errors.md).
import { CniError, ErrorCode } from './errors.js';

const COMMANDS = ['ADD', 'DEL', 'CHECK', 'GC', 'STATUS', 'VERSION'] as const;
export type Command = (typeof COMMANDS)[number];

export interface CniEnv {
  command: Command;
  containerID: string;
  netns: string;
  ifname: string;
  args: Record<string, string>;
  /** CNI_ARGS as the runtime gave them (the text `args` was parsed from): what ADD records for later DELs. */
  rawArgs?: string;
  path: string[];
  /** The pod this call is for, from CNI_ARGS (the runtime's K8S_POD_*); absent when the runtime names none. */
  pod?: PodRef;
}

/** A Kubernetes pod as the runtime names it in CNI_ARGS: what joins a log line or a ledger record to `kubectl get pod`. */
export interface PodRef {
  namespace?: string;
  name?: string;
  uid?: string;
}

/** CNI_ARGS keys of the pod's identity (containerd and CRI-O pass all three on every call for a pod). */
const POD_ARGS = { namespace: 'K8S_POD_NAMESPACE', name: 'K8S_POD_NAME', uid: 'K8S_POD_UID' } as const;
/** Kubernetes' own limit on a name (DNS subdomain); namespaces (63) and UIDs (36) are shorter. */
const MAX_POD_ARG_BYTES = 253;

/** The pod named in CNI_ARGS; undefined when none of its keys is set. A value longer than Kubernetes allows is an env error (code 4). */
export function podOf(args: Record<string, string>): PodRef | undefined {
  const pod: PodRef = {};
  for (const [field, key] of Object.entries(POD_ARGS) as [keyof PodRef, string][]) {
    const value = args[key];
    if (value === undefined || value === '') continue;
    if (Buffer.byteLength(value) > MAX_POD_ARG_BYTES) {
      throw new CniError(ErrorCode.InvalidEnvironment, 'invalid CNI_ARGS', { details: `${key} is longer than ${MAX_POD_ARG_BYTES} bytes` });
    }
    pod[field] = value;
  }
  return Object.keys(pod).length ? pod : undefined;
}

const CONTAINER_ID = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

type Need = 'req' | 'opt' | 'no';
// Columns: ADD DEL CHECK GC STATUS VERSION
const NEEDS: Record<string, Record<Command, Need>> = {
  CNI_CONTAINERID: { ADD: 'req', DEL: 'req', CHECK: 'req', GC: 'no', STATUS: 'no', VERSION: 'no' },
  CNI_NETNS: { ADD: 'req', DEL: 'opt', CHECK: 'req', GC: 'no', STATUS: 'no', VERSION: 'no' },
  CNI_IFNAME: { ADD: 'req', DEL: 'req', CHECK: 'req', GC: 'no', STATUS: 'no', VERSION: 'no' },
  CNI_PATH: { ADD: 'opt', DEL: 'opt', CHECK: 'opt', GC: 'req', STATUS: 'opt', VERSION: 'no' },
};

/**
 * libcni's ValidateInterfaceName: non-empty, under IFNAMSIZ (16) bytes, not "." or "..", no '/', ':' or whitespace
 * (Go's unicode.IsSpace: JS's \s plus U+0085). Why it fails, or undefined. CNI_IFNAME and the runtime's result
 * cache entries (src/gc/from-cache.ts) both pass through it: the name becomes part of a file name.
 */
export function validInterfaceName(name: string): string | undefined {
  if (name === '') return 'is empty';
  if (Buffer.byteLength(name) > 15) return 'longer than 15 bytes';
  if (name === '.' || name === '..') return 'is "." or ".."';
  if (/[/:\s\u0085]/.test(name)) return 'contains "/", ":" or whitespace';
  return undefined;
}

/** libcni's ValidateContainerID (the spec's regex): CNI_CONTAINERID, network names, the result cache's entries. */
export function validContainerID(id: string): string | undefined {
  return CONTAINER_ID.test(id) ? undefined : `must match ${CONTAINER_ID.source}`;
}

/** Parses CNI_ARGS "K=V;K2=V2". Malformed pairs are an env error (code 4). */
export function parseCniArgs(raw: string): Record<string, string> {
  const out: Record<string, string> = Object.create(null);
  for (const pair of raw.split(';')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new CniError(ErrorCode.InvalidEnvironment, 'invalid CNI_ARGS', { details: `pair "${pair}" is not K=V` });
    out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return out;
}

/** DEL's reading: a pod name it cannot record must not block teardown (as a config mistake does not): left out. */
function podOfLenient(args: Record<string, string>): PodRef | undefined {
  try {
    return podOf(args);
  } catch {
    return undefined;
  }
}

/** Reads and validates the environment for `command`; "" counts as unset; all missing names in one error. */
export function readCniEnv(env: NodeJS.ProcessEnv): CniEnv {
  const raw = env.CNI_COMMAND ?? '';
  const command = raw.toUpperCase() as Command;
  if (!COMMANDS.includes(command)) {
    throw new CniError(ErrorCode.InvalidEnvironment, `unknown CNI_COMMAND: ${JSON.stringify(raw)}`, {
      details: `expected one of ${COMMANDS.join(', ')}`,
    });
  }
  const get = (k: string) => (env[k] ?? '') as string;
  const missing = Object.keys(NEEDS).filter((k) => NEEDS[k]![command] === 'req' && get(k) === '');
  if (missing.length) {
    // An empty container ID has its own code in the spec (3); other missing names are code 4.
    const code = missing.length === 1 && missing[0] === 'CNI_CONTAINERID' ? ErrorCode.UnknownContainer : ErrorCode.InvalidEnvironment;
    throw new CniError(code, `required env variables [${missing.join(',')}] missing`);
  }
  const containerID = NEEDS.CNI_CONTAINERID![command] === 'no' ? '' : get('CNI_CONTAINERID');
  const ifname = NEEDS.CNI_IFNAME![command] === 'no' ? '' : get('CNI_IFNAME');
  const bad: string[] = [];
  if (containerID) {
    const why = validContainerID(containerID);
    if (why) bad.push(`CNI_CONTAINERID ${why}`);
  }
  if (ifname) {
    const why = validInterfaceName(ifname);
    if (why) bad.push(`CNI_IFNAME ${why}`);
  }
  if (bad.length) throw new CniError(ErrorCode.InvalidEnvironment, 'invalid env variables', { details: bad.join('; ') });
  const args = command === 'VERSION' ? {} : parseCniArgs(get('CNI_ARGS'));
  const pod = command === 'DEL' ? podOfLenient(args) : podOf(args);
  return {
    command,
    containerID,
    netns: NEEDS.CNI_NETNS![command] === 'no' ? '' : get('CNI_NETNS'),
    ifname,
    args,
    rawArgs: command === 'VERSION' ? '' : get('CNI_ARGS'),
    path: cniPathOf(get('CNI_PATH')),
    ...(pod && { pod }),
  };
}

/** THE reading of a CNI path (CNI_PATH, `--cni-path`): directories joined by `:`, as libcni splits it; empty ones dropped. */
export const cniPathOf = (text: string): string[] => text.split(':').filter(Boolean);
