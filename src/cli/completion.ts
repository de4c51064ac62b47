// `ipam-shim completion bash`: a bash completion script made from the commands themselves (their names, the
// flags their --help lists, the words their usage lines name after the command: `residue scan|clean`), so it
// cannot drift from the CLI. The script only offers words; it runs nothing of ours.
import { type Command, parseArgv, UsageError } from '../contract/command.js';

const SHELLS = ['bash'] as const;

/** Words a command's usage lines name right after it ("ipam-shim residue scan  […]", "probe-rewrite ensure | remove"). */
function subcommandsOf(c: Command): string[] {
  const out = new Set<string>();
  const re = new RegExp(`^ipam-shim ${c.name.replaceAll('-', '\\-')} ((?:[a-z][a-z-]*)(?:\\s*\\|\\s*[a-z][a-z-]*)*)(?=\\s|$)`, 'gm');
  for (const m of c.usage.matchAll(re)) for (const w of m[1]!.split('|')) out.add(w.trim());
  return [...out];
}

/** Every flag a command takes as its --help lists it, --json and --help included. */
function flagsOf(c: Command): string[] {
  return [...Object.keys(c.options).map((n) => `--${n}`), ...(c.json === false ? [] : ['--json', '-o']), '--help'];
}

/** A name bash can use in a function name and a case label: the commands' names are [a-z-]. */
const safe = (w: string) => {
  if (!/^-{0,2}[a-z][a-z0-9-]*$/.test(w)) throw new Error(`completion: "${w}" is not a plain word`);
  return w;
};

function bashScript(commands: Command[]): string {
  const names = [...commands.map((c) => c.name), 'help', 'completion'].sort();
  const cases = commands
    .map((c) => {
      const subs = subcommandsOf(c).map(safe);
      const flags = flagsOf(c).map(safe);
      return `    ${safe(c.name)}) subs="${subs.join(' ')}"; flags="${flags.join(' ')}" ;;`;
    })
    .join('\n');
  return `# bash completion for ipam-shim (ipam-shim completion bash; made from the commands' own flags).
# Load it now:       source <(ipam-shim completion bash)
# Or for every shell: ipam-shim completion bash > /etc/bash_completion.d/ipam-shim
_ipam_shim() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}" cmd="\${COMP_WORDS[1]}" subs="" flags=""
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "${names.join(' ')} --help --version -v" -- "$cur"))
    return
  fi
  case "$cmd" in
${cases}
    help) [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W "${commands
      .map((c) => safe(c.name))
      .sort()
      .join(' ')}" -- "$cur")); return ;;
    completion) [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W "${SHELLS.join(' ')}" -- "$cur")); return ;;
    *) return ;;
  esac
  case "$prev" in
    -o|--output) COMPREPLY=($(compgen -W "json text" -- "$cur")); return ;;
    --conflist|--source|--shim-config|--values|--ciliumnodes|--ippools|--azure-subnets) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --conf-dir|--cni-bin-dir|--cache-dir|--state-dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
  esac
  if [ "$COMP_CWORD" -eq 2 ] && [ -n "$subs" ] && [[ "$cur" != -* ]]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  fi
}
complete -F _ipam_shim ipam-shim
`;
}

/** The command, handed every other command's loader (src/cli/index.ts) to read their flags. */
export function completionCommand(load: () => Promise<Command[]>): Command {
  return {
    name: 'completion',
    summary: 'print a shell completion script (bash): commands, their subcommands and flags',
    usage: 'ipam-shim completion bash',
    options: {},
    flagHelp: {},
    examples: ['source <(ipam-shim completion bash)', 'ipam-shim completion bash > /etc/bash_completion.d/ipam-shim'],
    exitStatus: '0 printed; 1 never; 2 usage (no shell, or one it does not write for); 3 never',
    json: false,
    async run(argv) {
      const { positionals } = parseArgv({ args: argv, options: {}, strict: true, allowPositionals: true });
      const [shell, ...extra] = positionals;
      if (!shell) throw new UsageError(`which shell? ${SHELLS.join(', ')}`);
      if (extra.length) throw new UsageError(`one shell at a time, got ${positionals.join(' ')}`);
      if (!(SHELLS as readonly string[]).includes(shell)) throw new UsageError(`no completion for "${shell}": ${SHELLS.join(', ')}`);
      return { data: null, text: bashScript(await load()), exitCode: 0 };
    },
  };
}
