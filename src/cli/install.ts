// `ipam-shim install` and `ipam-shim uninstall`: put the shim on a node (binary + chained conflist entry after
// cilium-cni) and take it off again. `install --watch` is what the DaemonSet in deploy/ runs.
import { DEFAULT_CONF_DIR } from '../conflist.js';
import { CniError } from '../cni/errors.js';
import { createLogger } from '../log.js';
import { DEFAULT_CNI_PATH } from '../network/open.js';
import { asUsage, parseArgv, ProblemFound, UsageError, type Command, type CommandOutput } from '../contract/command.js';
import { shown } from '../terminal.js';
import { checkSource, defaultSource, installBinary } from '../install/binary.js';
import { installConflist, renderConflist, validateShimKeys, type ConflistOutcome } from '../install/conflist.js';
import { uninstall, uninstallWhenUnreferenced, watchInstall, type UninstallOutcome } from '../install/install.js';
import { purgeState, type PurgeOutcome } from '../install/purge.js';

export const DEFAULT_WATCH_INTERVAL_S = 30;

const INSTALL_USAGE = `ipam-shim install [--cni-bin-dir DIR] [--conf-dir DIR] [--source PATH] [--shim-config JSON] [--watch [--interval SECONDS]] [--json]
ipam-shim install --print [--conf-dir DIR] [--cni-bin-dir DIR] [--shim-config JSON]
ipam-shim install --binary-only [--cni-bin-dir DIR] [--source PATH] [--json]
  --print writes the conflist with the shim's entry to stdout and changes no file: the list for Cilium's own route
  (Helm cni.customConf=true with cni.configMap), where cilium-agent writes it and nothing edits it from outside.
  --binary-only puts only the executable in the bin dir and never looks at a conflist: that route's init container,
  which must succeed on a fresh node before cilium-agent has written any list.
  Before the entry goes in, the list's plugins in the bin dir are asked their VERSION: a list whose plugin does
  not take the version the runtime sends (cilium-cni 1.17 and older stop at 1.0.0) is left as it is (exit 1, with
  both versions and the one to use); a plugin not installed yet is named, and install goes on.`;
const UNINSTALL_USAGE = `ipam-shim uninstall [--cni-bin-dir DIR] [--conf-dir DIR] [--keep-binary] [--purge [--shim-config JSON]] [--json]
ipam-shim uninstall --keep-lists [--source-list FILE] [--wait] [--purge [--shim-config JSON]] [--cni-bin-dir DIR] [--conf-dir DIR] [--json]
  The executable goes only once no list on the node names the shim (an IPAM slot, a list install did not edit).
  --keep-lists is Cilium's route: the list is cilium-agent's (written from its cni.configMap at every start), so it
  is left as it is; take the entry out of the ConfigMap and restart cilium-agent, and the executable goes once the
  list it writes no longer names the shim. --source-list names that ConfigMap's list as mounted: the executable
  stays while it names the shim (cilium-agent would write it back at its next start). --wait keeps looking (every
  second) until the executable can go, instead of leaving it there and exiting.
  --purge also removes what the shim leaves on the node, once the executable is gone: the ledger (stateDir), the
  log and its rotated files (logFile) and the metrics file (metricsFile), at the paths --shim-config sets (the
  plugin's defaults without it: pass the DaemonSet's shim-config.json). cilium-agent's own addresses the ledger
  held are named: they stay allocated to it in the delegate's store (agent-ip release before, to give them back).`;

/**
 * --shim-config: a JSON object of the entry's keys, checked as the plugin checks them. Absent: undefined (keep
 * the keys of the entry already in the conflist).
 */
export function parseShimConfig(text: string | undefined): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  if (text.trim() === '') return {};
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new UsageError(`--shim-config is not JSON: ${(e as Error).message}`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new UsageError('--shim-config must be a JSON object');
  try {
    validateShimKeys(v as Record<string, unknown>);
  } catch (e) {
    if (e instanceof CniError) throw new UsageError(`--shim-config: ${e.message}`);
    throw e;
  }
  return v as Record<string, unknown>;
}

function conflistLine(c: ConflistOutcome, confDir: string): string {
  const where = c.path ?? confDir;
  switch (c.action) {
    case 'missing':
      return `conflist: no conflist with cilium-cni in ${confDir}`;
    case 'ipam-slot':
      return `conflist: ${where} already has the shim in an IPAM slot; left as it is`;
    case 'refused':
      return `conflist: ${where} left as it is: its plugins do not take its version`;
    default:
      return `conflist: ${where}: shim entry ${c.action}`;
  }
}

/**
 * What the list's plugins answered to VERSION, as lines: the refusal (both versions and the one to use), or that
 * they could not be asked (cilium-cni not installed yet: install goes on, the agent asks again on every check).
 */
function versionLines(c: ConflistOutcome): string[] {
  const v = c.versions;
  if (!v || v.state === 'taken') return [];
  if (v.state === 'refused') return [`refused: ${shown(v.message)}`];
  return [
    `warning: ${shown(v.message)}; the entry went in unchecked: run install again (or doctor) once it is there; the agent checks on every pass`,
  ];
}

const INSTALL_OPTIONS = {
  'cni-bin-dir': { type: 'string' },
  'conf-dir': { type: 'string' },
  source: { type: 'string' },
  'shim-config': { type: 'string' },
  watch: { type: 'boolean' },
  interval: { type: 'string' },
  print: { type: 'boolean' },
  'binary-only': { type: 'boolean' },
} as const;
const UNINSTALL_OPTIONS = {
  'cni-bin-dir': { type: 'string' },
  'conf-dir': { type: 'string' },
  'keep-binary': { type: 'boolean' },
  'keep-lists': { type: 'boolean' },
  'source-list': { type: 'string', multiple: true },
  wait: { type: 'boolean' },
  purge: { type: 'boolean' },
  'shim-config': { type: 'string' },
} as const;
const DIR_HELP = {
  'cni-bin-dir': { value: 'DIR', text: `the CNI bin dir (default ${DEFAULT_CNI_PATH}), e.g. /host/opt/cni/bin` },
  'conf-dir': { value: 'DIR', text: `where cilium's conflist is (default ${DEFAULT_CONF_DIR}), e.g. /host/etc/cni/net.d` },
};

export const installCommand: Command = {
  name: 'install',
  summary: 'copy the executable into the CNI bin dir and chain the shim after cilium-cni; --watch keeps it there',
  usage: INSTALL_USAGE,
  options: INSTALL_OPTIONS,
  flagHelp: {
    ...DIR_HELP,
    source: { value: 'PATH', text: 'the executable to copy (default: this one), e.g. /ipam-shim' },
    'shim-config': {
      value: 'JSON',
      text: 'the chained entry\'s settings, checked as the plugin checks them (default: keep the entry\'s), e.g. \'{"reservedCIDRs":["10.224.0.0/24"]}\'',
    },
    watch: { text: 'keep running and put the binary and the entry back whenever they go (what the DaemonSet does)' },
    interval: { value: 'SECONDS', text: `--watch: how often to check (default ${DEFAULT_WATCH_INTERVAL_S}), e.g. 10` },
    print: { text: "write the conflist with the shim's entry to stdout and change no file (for Cilium's cni.customConf/cni.configMap)" },
    'binary-only': { text: "copy only the executable; no conflist is read or needed (Cilium's route, on a fresh node too)" },
  },
  examples: [
    'ipam-shim install',
    'ipam-shim install --conf-dir /host/etc/cni/net.d --cni-bin-dir /host/opt/cni/bin --watch',
    'ipam-shim install --shim-config \'{"reservedCIDRs":["10.224.0.0/24"]}\' --json',
    'ipam-shim install --print --conf-dir /etc/cni/net.d',
    'ipam-shim install --binary-only --cni-bin-dir /host/opt/cni/bin',
  ],
  exitStatus:
    '0 installed or already in place (or the shim is in an IPAM slot; with --print: the list was printed; with --binary-only: the executable is in place); 1 no conflist holds cilium-cni, or one does not parse, or a plugin of the list (cilium-cni) does not take the version the runtime would send it (the list is left as it is); 2 usage, a --shim-config the plugin would reject, or a --source that is not ipam-shim; 3 could not run (a write failed); with --watch: 0 when stopped by a signal',
  async run(argv): Promise<CommandOutput> {
    const { values: v } = parseArgv({
      args: argv,
      strict: true,
      options: INSTALL_OPTIONS,
    });
    const binDir = v['cni-bin-dir'] ?? DEFAULT_CNI_PATH;
    const confDir = v['conf-dir'] ?? DEFAULT_CONF_DIR;
    const shimKeys = parseShimConfig(v['shim-config']);
    const intervalText = v.interval;
    if (intervalText !== undefined && (!v.watch || !/^\d+(\.\d+)?$/.test(intervalText) || Number(intervalText) < 0.1)) {
      throw new UsageError('--interval takes seconds (≥ 0.1) and only goes with --watch');
    }
    if (v.print) {
      if (v.watch || v['binary-only'] || v.source !== undefined)
        throw new UsageError('--print changes nothing: it goes with --conf-dir, --cni-bin-dir and --shim-config only');
      const r = await renderConflist(confDir, shimKeys, { cniPath: [binDir] });
      if (r.versions?.state === 'refused') throw new ProblemFound(`nothing to print: ${r.path}: ${r.versions.message}`);
      if (r.text === undefined) {
        const why = [conflistLine(r, confDir), ...(r.unreadable ?? []).map((u) => `cannot parse ${u.path}: ${u.error}`)];
        throw new ProblemFound(`nothing to print: ${why.join('; ')}`);
      }
      // The list goes to stdout; that its plugins could not be asked goes to stderr, where a pipe does not take it.
      for (const line of versionLines(r)) process.stderr.write(`${line}\n`);
      // stdout is the list itself (a ConfigMap's content); --json wraps it with where it came from.
      const { text, ...rest } = r;
      return { data: { ...rest, conflist: text }, text, exitCode: 0 };
    }
    if (v['binary-only'] && (v.watch || v['conf-dir'] !== undefined || v['shim-config'] !== undefined))
      throw new UsageError('--binary-only copies the executable only: it goes with --cni-bin-dir and --source only');
    const source = asUsage(() => v.source ?? defaultSource());
    await checkSource(source).catch((e: Error) => {
      throw new UsageError(e.message);
    });
    if (v['binary-only']) {
      // No conflist is looked at: on a fresh node cilium-agent has not written one yet, and on Cilium's route the
      // list is cilium-agent's to write (from the cni.configMap), never ours to edit.
      const binary = await installBinary(source, binDir);
      return { data: { binary }, text: `binary: ${binary.path} ${binary.action}`, exitCode: 0 };
    }

    if (v.watch) {
      const ac = new AbortController();
      const stop = () => ac.abort();
      process.once('SIGTERM', stop);
      process.once('SIGINT', stop);
      // A long-running command logs its progress as JSON lines on stderr (the container log).
      const log = createLogger({ level: 'info', base: { command: 'install --watch' } });
      try {
        const summary = await watchInstall({
          source,
          binDir,
          confDir,
          shimKeys,
          intervalMs: Number(intervalText ?? DEFAULT_WATCH_INTERVAL_S) * 1000,
          signal: ac.signal,
          log,
        });
        const text = `stopped after ${summary.checks} checks: ${summary.restores} restores, ${summary.binaryReinstalls} binary reinstalls, ${summary.errors} errors`;
        return { data: { watch: true, ...summary }, text, exitCode: 0 };
      } finally {
        process.removeListener('SIGTERM', stop);
        process.removeListener('SIGINT', stop);
      }
    }

    const binary = await installBinary(source, binDir);
    const conflist = await installConflist(confDir, shimKeys, { cniPath: [binDir] });
    const ok = conflist.action !== 'missing' && conflist.versions?.state !== 'refused';
    // File names and parse errors are the node's: one line each, escaped.
    const text = [`binary: ${shown(binary.path)} ${binary.action}`, shown(conflistLine(conflist, confDir))];
    // A file that does not parse may be the very conflist we are after: name it and why, so it gets fixed.
    for (const u of conflist.unreadable ?? []) text.push(`cannot parse ${shown(u.path)}: ${shown(u.error)}`);
    for (const w of conflist.warnings ?? []) text.push(`warning: ${shown(w)}`);
    text.push(...versionLines(conflist));
    if (!ok && conflist.versions?.state === 'refused') {
      text.push(
        `change the list's version where it is written (cilium-agent's cni.configMap, or CNS on AKS), or run a Cilium whose cilium-cni takes ${conflist.versions.picked ?? conflist.versions.written}; then run again`,
      );
    } else if (!ok) {
      text.push(
        conflist.unreadable?.length
          ? 'fix the file(s) that do not parse (runtimes cannot read them either), then run again'
          : 'the conflist is written by cilium-agent: run again once it exists, or run with --watch',
      );
    }
    return { data: { binary, conflist }, text: text.join('\n'), exitCode: ok ? 0 : 1 };
  },
};

export const uninstallCommand: Command = {
  name: 'uninstall',
  summary: 'take the chained shim entry out of the cilium-cni conflist and remove the executable (--purge: its state too)',
  usage: UNINSTALL_USAGE,
  options: UNINSTALL_OPTIONS,
  flagHelp: {
    ...DIR_HELP,
    'keep-binary': { text: 'take the entry out but leave the executable in the bin dir' },
    'keep-lists': {
      text: "leave every conflist as it is (Cilium's route: cilium-agent writes the list); the executable goes once none names the shim",
    },
    'source-list': {
      value: 'FILE',
      text: 'a list cilium-agent writes at its next start (its cni.configMap, mounted): the executable stays while it names the shim, e.g. /etc/ipam-shim/cni-configuration/cni-config',
    },
    wait: { text: 'wait (looking every second) until no list names the shim and the executable can go' },
    purge: { text: 'also remove the ledger, the log and the metrics file once the executable is gone' },
    'shim-config': {
      value: 'JSON',
      text: "--purge: the entry's settings whose paths to remove (stateDir, logFile, metricsFile; default: the plugin's defaults)",
    },
  },
  examples: [
    'ipam-shim uninstall',
    'ipam-shim uninstall --keep-binary --json',
    'ipam-shim uninstall --purge --shim-config "$(cat deploy/shim-config.json)"',
    'ipam-shim uninstall --keep-lists --source-list /etc/ipam-shim/cni-configuration/cni-config --wait --purge',
  ],
  exitStatus:
    '0 done (also when there was nothing to remove; without --wait, also when the executable stays because a list still names it: said); 1 --purge kept something it would not remove (named, with why), or --wait was stopped before the executable could go; 2 usage; 3 could not run (the conf dir does not exist or cannot be read: nothing touched; a write failed)',
  async run(argv): Promise<CommandOutput> {
    const { values: v } = parseArgv({ args: argv, strict: true, options: UNINSTALL_OPTIONS });
    if (v['shim-config'] !== undefined && !v.purge) throw new UsageError('--shim-config goes with --purge (it names the paths to remove)');
    if (v.purge && v['keep-binary']) throw new UsageError('--purge removes the state only once the executable is gone: not with --keep-binary');
    if ((v['source-list'] ?? []).some((p) => !p.startsWith('/'))) throw new UsageError('--source-list takes an absolute path');
    const keys = parseShimConfig(v['shim-config']);
    const settings = asUsage(() => validateShimKeys(keys ?? {}));
    const o = {
      binDir: v['cni-bin-dir'] ?? DEFAULT_CNI_PATH,
      confDir: v['conf-dir'] ?? DEFAULT_CONF_DIR,
      keepBinary: Boolean(v['keep-binary']),
      keepLists: Boolean(v['keep-lists']),
      sourceLists: v['source-list'] ?? [],
    };
    let out: UninstallOutcome;
    let stopped = false;
    if (v.wait) {
      const ac = new AbortController();
      const stop = () => ac.abort();
      process.once('SIGTERM', stop);
      process.once('SIGINT', stop);
      try {
        out = await uninstallWhenUnreferenced({
          ...o,
          signal: ac.signal,
          // stderr: the container's log says what the removal waits for (stdout is the result).
          onWaiting: (lists) =>
            process.stderr.write(
              `waiting: the executable stays while ${lists.map(shown).join(', ')} name${lists.length === 1 ? 's' : ''} the shim\n`,
            ),
        });
      } finally {
        process.removeListener('SIGTERM', stop);
        process.removeListener('SIGINT', stop);
      }
      stopped = ac.signal.aborted && out.binary.action === 'kept';
    } else out = await uninstall(o);
    const lines = out.conflists.length
      ? out.conflists.map((c) => `conflist: ${shown(c.path)}: removed ${c.removed} shim entr${c.removed === 1 ? 'y' : 'ies'}`)
      : [o.keepLists ? 'conflist: left as it is (--keep-lists)' : 'conflist: no chained shim entry found'];
    lines.push(`binary: ${shown(out.binary.path)} ${out.binary.action}`);
    if (out.stillReferenced.length) lines.push(`still referenced by ${out.stillReferenced.map(shown).join(', ')}: binary kept`);
    if (stopped) lines.push('stopped while waiting: the executable stays');
    let purge: PurgeOutcome | undefined;
    if (v.purge) {
      if (out.binary.action === 'kept') lines.push('purge: nothing removed: the executable stays, and with it what it writes');
      else {
        purge = await purgeState(settings);
        for (const p of purge.removed) lines.push(`purge: ${shown(p)} removed`);
        for (const k of purge.kept) lines.push(`purge: ${shown(k.path)} kept: ${shown(k.why)}`);
        for (const n of purge.notes) lines.push(`purge: note: ${shown(n)}`);
        if (purge.removed.length === 0 && purge.kept.length === 0) lines.push('purge: nothing left to remove');
      }
    }
    const problem = stopped || (purge?.kept.length ?? 0) > 0;
    return { data: { ...out, ...(purge ? { purge } : {}) }, text: lines.join('\n'), exitCode: problem ? 1 : 0 };
  },
};
