// cnitool-shaped CLI over CniRunner (see runner.ts for the libcni behaviour it mirrors).
//
//   tsx test/support/runtimes/cnirun.ts add|check|del <network> <netns-path-or-name> [--ifname IF] [--cache-dir DIR]
//   tsx test/support/runtimes/cnirun.ts gc <network> [<netns>] [--valid cid:ifname,...] [--cache-dir DIR]
//   tsx test/support/runtimes/cnirun.ts status <network> [<netns>]
//   tsx test/support/runtimes/cnirun.ts version <plugin-type>
//
// Like cnitool: the conflist named <network> comes from NETCONFPATH (default /etc/cni/net.d, libcni LoadConfList
// rules), plugins from CNI_PATH, CNI_ARGS ("K=V;K2=V2") and CAP_ARGS (JSON) from the environment, the interface
// from CNI_IFNAME (default eth0; --ifname wins), the cache under /var/lib/cni (CNI_CACHE_DIR or --cache-dir
// override it: not in cnitool). The container ID is cnitool's `cnitool-` + the first 10 bytes (20 hex digits) of
// sha512(absolute netns path), unless CNI_CONTAINERID is set. A bare netns name (no "/") that exists under
// /run/netns means /run/netns/<name> (cnitool would take it relative to the working directory).
// `add` prints the result JSON (4-space indent, like cnitool's result.Print()); other verbs print nothing.
// `gc` without --valid behaves like upstream cnitool (no valid list: every cached attachment is DELed);
// `--valid ''` is an explicit empty list. Errors: message on stderr (plus the plugin's error object), exit 1.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { CniRunner, GcError, PluginError, loadConfList, parseCniArgs, type Attachment, type JsonObject } from './runner.js';

const USAGE = `usage: cnirun add|check|del <network> <netns> [--ifname IF] [--cache-dir DIR]
       cnirun gc <network> [<netns>] [--valid cid:ifname,...] [--cache-dir DIR]
       cnirun status <network> [<netns>]
       cnirun version <plugin-type>`;

/** cnitool's container ID for a netns path. */
export function cnitoolContainerID(netnsPath: string): string {
  return `cnitool-${createHash('sha512').update(netnsPath).digest('hex').slice(0, 20)}`;
}

export function resolveNetns(arg: string): string {
  if (!arg.includes('/') && existsSync(path.join('/run/netns', arg))) return path.join('/run/netns', arg);
  return path.resolve(arg);
}

export function parseValid(s: string): Attachment[] {
  if (s.trim() === '') return [];
  return s.split(',').map((item) => {
    const i = item.lastIndexOf(':');
    const containerID = i < 0 ? item : item.slice(0, i);
    const ifname = i < 0 ? 'eth0' : item.slice(i + 1);
    if (!containerID || !ifname) throw new Error(`bad --valid entry "${item}": want containerID:ifname`);
    return { containerID, ifname };
  });
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      ifname: { type: 'string' },
      valid: { type: 'string' },
      'cache-dir': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [cmd, network, netnsArg] = positionals;
  if (values.help || !cmd || !network) {
    process.stderr.write(`${USAGE}\n`);
    return values.help ? 0 : 1;
  }
  const pluginDirs = (process.env.CNI_PATH ?? '').split(':').filter(Boolean);
  const cacheDir = values['cache-dir'] ?? process.env.CNI_CACHE_DIR ?? undefined;

  if (cmd === 'version') {
    const runner = new CniRunner({ confList: { cniVersion: '1.1.0', name: 'version', plugins: [{ type: network }] }, pluginDirs });
    process.stdout.write(`${JSON.stringify(await runner.version(network), null, 4)}\n`);
    return 0;
  }

  const netdir = process.env.NETCONFPATH || '/etc/cni/net.d';
  const loaded = await loadConfList(netdir, network);
  const runner = new CniRunner({ confList: loaded.confList, confListBytes: loaded.bytes, pluginDirs, cacheDir });

  const capArgs = process.env.CAP_ARGS ? (JSON.parse(process.env.CAP_ARGS) as JsonObject) : undefined;
  const cniArgs = process.env.CNI_ARGS ? parseCniArgs(process.env.CNI_ARGS) : undefined;
  const ifname = values.ifname ?? process.env.CNI_IFNAME ?? 'eth0';
  const rtOpts = { args: cniArgs, capabilityArgs: capArgs };

  switch (cmd) {
    case 'add':
    case 'check':
    case 'del': {
      if (!netnsArg) {
        process.stderr.write(`${USAGE}\n`);
        return 1;
      }
      const netns = resolveNetns(netnsArg);
      const containerID = process.env.CNI_CONTAINERID || cnitoolContainerID(netns);
      if (cmd === 'add') {
        const result = await runner.add(containerID, netns, ifname, rtOpts);
        process.stdout.write(`${JSON.stringify(result, null, 4)}\n`);
      } else if (cmd === 'check') {
        await runner.check(containerID, netns, ifname, rtOpts);
      } else {
        await runner.del(containerID, netns, ifname, rtOpts);
      }
      return 0;
    }
    case 'gc':
      await runner.gc(values.valid === undefined ? undefined : parseValid(values.valid));
      return 0;
    case 'status':
      await runner.status();
      return 0;
    default:
      process.stderr.write(`unknown command "${cmd}"\n${USAGE}\n`);
      return 1;
  }
}

function report(e: unknown): void {
  if (e instanceof GcError) {
    for (const x of e.errors) report(x);
    return;
  }
  process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
  const cause = e instanceof Error && e.cause instanceof PluginError ? e.cause : e;
  if (cause instanceof PluginError) process.stderr.write(`${JSON.stringify(cause.toJSON())}\n`);
}

const isEntry = process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href;
if (isEntry) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (e: unknown) => {
      report(e);
      process.exitCode = 1;
    },
  );
}
