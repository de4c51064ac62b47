// Every command's help against what it parses: `--help` lists the options run() parses (commandHelp reads them
// from the same object), so here: each of them is described, flagHelp describes nothing else, each flag that takes
// a value shows an example or its default, and each command has an example naming it. "Did you mean" picks the
// near command and nothing far.
import { describe, expect, it } from 'vitest';
import { runCli, suggest } from '../../src/cli/index.js';
import { commandHelp, type Command } from '../../src/contract/command.js';
import { agentCommand } from '../../src/cli/agent.js';
import { doctorCommand } from '../../src/cli/doctor.js';
import { gcCommand } from '../../src/cli/gc.js';
import { installCommand, uninstallCommand } from '../../src/cli/install.js';
import { ledgerCommand } from '../../src/cli/ledger.js';
import { versionCommand } from '../../src/cli/version.js';
import { completionCommand } from '../../src/cli/completion.js';
import { isAgentCommandLine } from '../../src/cli/agent-reload.js';
import { FIXES } from '../../src/fix-list/registry.js';

/** Each fix's own commands (Fix.commands), as the CLI loads them: a new fix's are checked without a line here. */
const FIX_COMMANDS: Command[] = await Promise.all(FIXES.flatMap((f) => Object.values(f.commands ?? {}).map((load) => load(FIXES))));

const ALL: Command[] = [
  agentCommand,
  doctorCommand,
  gcCommand,
  installCommand,
  uninstallCommand,
  ledgerCommand,
  versionCommand,
  completionCommand(async () => []),
  ...FIX_COMMANDS,
];

describe('command help', () => {
  it('covers every command the CLI lists', async () => {
    const top = (await runCli(['--help'], {})).stdout;
    const names = top
      .slice(top.indexOf('commands:\n') + 10)
      .split('\n\n')[0]!
      .split('\n')
      .map((l) => l.trim().split(/\s+/)[0]);
    expect(ALL.map((c) => c.name).sort()).toEqual(names);
  });

  it.each(ALL.map((c) => [c.name, c] as const))(
    '%s: every parsed flag described (nothing else), values with an example, an example command',
    (name, c) => {
      expect(Object.keys(c.flagHelp).sort(), `${name}: flagHelp keys = the parser's options`).toEqual(Object.keys(c.options).sort());
      for (const [flag, h] of Object.entries(c.flagHelp)) {
        expect(h.text.length, `${name} --${flag}`).toBeGreaterThan(10);
        const takesValue = (c.options[flag] as { type: string }).type === 'string';
        expect(Boolean(h.value), `${name} --${flag}: a placeholder exactly when it takes a value`).toBe(takesValue);
        if (takesValue) expect(h.text, `${name} --${flag}`).toMatch(/e\.g\. |default/);
      }
      expect(c.examples.length).toBeGreaterThan(0);
      for (const e of c.examples) expect(e).toContain(`ipam-shim ${name}`);
      expect(c.exitStatus).toMatch(/\b0\b.*\b1\b.*\b2\b.*\b3\b/);
    },
  );

  it('--json is offered by every command that prints a result, not by the agent (its output is its log lines) or completion (a script)', async () => {
    const offersJson = (help: string) => /^ {2}--json +print the result/m.test(help);
    for (const c of ALL) expect(offersJson(commandHelp(c)), c.name).toBe(c.name !== 'agent' && c.name !== 'completion');
    const r = await runCli(['agent', '--json'], {});
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('--json: this command has no JSON output');
    expect(offersJson((await runCli(['agent', '--help'], {})).stdout)).toBe(false);
  });

  it('agent reload signals only a running `ipam-shim agent`, whatever pid 1 is', () => {
    expect(isAgentCommandLine(['/usr/local/bin/ipam-shim', 'agent', '--gc', 'report'])).toBe(true);
    expect(isAgentCommandLine(['/usr/bin/node', '/work/dist/ipam-shim.js', 'agent'])).toBe(true);
    expect(isAgentCommandLine(['/sbin/init', 'splash'])).toBe(false); // systemd reloads on SIGHUP
    expect(isAgentCommandLine(['/usr/local/bin/ipam-shim', 'doctor'])).toBe(false);
    expect(isAgentCommandLine(['/usr/local/bin/ipam-shim', 'agent', 'reload'])).toBe(false);
    expect(isAgentCommandLine(['sh', '-c', 'ipam-shim agent'])).toBe(false);
    expect(isAgentCommandLine([])).toBe(false);
  });

  it('suggests the command a typo most likely meant', () => {
    expect(suggest('doctr')).toEqual(['doctor']);
    expect(suggest('ledgr')).toEqual(['ledger']);
    expect(suggest('instal')).toEqual(['install']);
    expect(suggest('agnet')).toEqual(['agent']);
    expect(suggest('probe')).toEqual(['probe-rewrite']);
    expect(suggest('kubectl')).toEqual([]);
  });
});
