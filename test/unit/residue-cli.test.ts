// `ipam-shim residue`: target merging, per-IP split, verdicts and the human rendering (pure parts).
import { describe, expect, it } from 'vitest';
import { renderResidue, residueCommand } from '../../src/residue/cli.js';
import { assemble, mergeTargets, summarise, type ResidueCommandReport } from '../../src/residue/report.js';
import { UsageError } from '../../src/contract/command.js';
import { classifyRule, type ResidueRule } from '../../src/residue/parse.js';

const rule = (body: string) => classifyRule(body) as ResidueRule;
const ARP32 = rule('-p ARP --arp-op Request --arp-ip-dst 10.240.0.32 -j arpreply --arpreply-mac 0:d:3a:30:47:42');
const DNAT32 = rule('-p IPv4 -i eth0 --ip-dst 10.240.0.32/32 -j dnat --to-dst 0:d:3a:30:47:42 --dnat-target ACCEPT');
const DNAT3 = rule('-p IPv4 -i eth0 --ip-dst 10.240.0.3 -j dnat --to-dst a2:96:88:20:cb:c6 --dnat-target ACCEPT');
const NEIGH32 = { ip: '10.240.0.32', dev: 'azure0', mac: '00:0d:3a:30:47:42', state: ['PERMANENT'] };

const base = {
  mode: 'scan' as const,
  apply: false,
  network: 'azure',
  conflist: '/etc/cni/net.d/10-azure.conflist',
  corruptLedgerFiles: [],
  ebtablesAvailable: true,
  ebtablesBackends: [],
  errors: [],
};

describe('mergeTargets', () => {
  it('normalises CNI notation and IPv6, de-duplicates, keeps both sources and every attachment', () => {
    const t = mergeTargets(
      [
        { ip: '10.240.0.32/16', attachment: 'c1/eth0' },
        { ip: 'fd00:10:240:0::32/64', attachment: 'c1/eth0' },
        { ip: '10.240.0.32/16', attachment: 'c2/eth0 (intent)' },
      ],
      ['10.240.0.32', '10.240.0.3'],
    );
    expect(t).toEqual([
      { ip: '10.240.0.32', sources: ['ledger', 'named'], attachments: ['c1/eth0', 'c2/eth0 (intent)'] },
      { ip: 'fd00:10:240::32', sources: ['ledger'], attachments: ['c1/eth0'] },
      { ip: '10.240.0.3', sources: ['named'], attachments: [] },
    ]);
  });
  it('refuses what is not an address', () => {
    expect(() => mergeTargets([], ['10.240.0.300'])).toThrow(/not an IP/);
  });
});

describe('assemble and summarise', () => {
  const targets = mergeTargets([{ ip: '10.240.0.32/16', attachment: 'c1/eth0' }], ['10.240.0.33']);
  const split = assemble(targets, { rules: [ARP32, DNAT32], neighbours: [NEIGH32] }, [ARP32, DNAT32, DNAT3]);

  it('puts each rule under its exact address; orphans exclude the targets’ own rules', () => {
    expect(split.targets[0]!.rules.map((r) => r.kind)).toEqual(['arpreply', 'dnat4']);
    expect(split.targets[0]!.neighbours).toEqual([NEIGH32]);
    expect(split.targets[1]!.rules).toEqual([]);
    expect(split.orphans.map((o) => o.ip)).toEqual(['10.240.0.3']);
  });

  it('scan: not ok when a target has residue; orphans alone never fail it', () => {
    expect(summarise({ ...base, ...split }).ok).toBe(false);
    const onlyOrphans = assemble(targets, { rules: [], neighbours: [] }, [DNAT3]);
    const r = summarise({ ...base, ...onlyOrphans });
    expect(r.ok).toBe(true);
    expect(r.counts).toMatchObject({ rules: 0, neighbours: 0, orphans: 1 });
  });

  it('clean --apply: ok only when nothing is left and nothing failed', () => {
    const cleaned = {
      ...base,
      mode: 'clean' as const,
      apply: true,
      orphans: [],
      targets: split.targets.map((t) => ({ ...t, left: { rules: [], neighbours: [] } })),
    };
    expect(summarise(cleaned)).toMatchObject({ ok: true, counts: { rules: 2, neighbours: 1, leftRules: 0 } });
    const left = { ...cleaned, targets: [{ ...cleaned.targets[0]!, left: { rules: [split.targets[0]!.rules[1]!], neighbours: [] } }] };
    expect(summarise(left)).toMatchObject({ ok: false, counts: { leftRules: 1, ipsWithResidue: 1 } });
    expect(summarise({ ...cleaned, errors: [{ target: 'x', message: 'Permission denied' }] }).ok).toBe(false);
  });
});

describe('renderResidue', () => {
  const targets = mergeTargets([{ ip: '10.240.0.32/16', attachment: 'c1/eth0' }], ['10.240.0.40']);
  const split = assemble(targets, { rules: [ARP32, DNAT32], neighbours: [NEIGH32] }, [DNAT3]);

  it('scan lists each rule as it would be deleted, the neighbour, the orphans and a fix', () => {
    const text = renderResidue(summarise({ ...base, ...split }));
    expect(text).toBe(
      [
        'network azure (/etc/cni/net.d/10-azure.conflist)',
        '',
        '10.240.0.32  found 3         (ledger c1/eth0)',
        '    found         ebtables -t nat PREROUTING -p ARP --arp-op Request --arp-ip-dst 10.240.0.32 -j arpreply --arpreply-mac 0:d:3a:30:47:42',
        '    found         ebtables -t nat PREROUTING -p IPv4 -i eth0 --ip-dst 10.240.0.32/32 -j dnat --to-dst 0:d:3a:30:47:42 --dnat-target ACCEPT',
        '    found         neigh 10.240.0.32 dev azure0 lladdr 00:0d:3a:30:47:42 PERMANENT',
        '10.240.0.40  clean           (--ip)',
        '',
        'orphans: 1 per-pod rule whose MAC is on no local interface (reported, never touched; remove with --ip IP --apply once no pod uses the IP):',
        '  10.240.0.3  -p IPv4 -i eth0 --ip-dst 10.240.0.3 -j dnat --to-dst a2:96:88:20:cb:c6 --dnat-target ACCEPT',
        '',
        'found 2 rules and 1 neighbour entry for 1 IP of 2',
        'fix: run "ipam-shim residue clean" with the same flags plus --apply',
        '',
      ].join('\n'),
    );
  });

  it('a dry run says so; --apply shows what was removed and what is LEFT', () => {
    const dry: ResidueCommandReport = summarise({ ...base, mode: 'clean', ...split });
    expect(renderResidue(dry)).toContain('dry run: nothing is changed');
    expect(renderResidue(dry)).toContain('    would remove  ebtables -t nat PREROUTING -p ARP');
    const applied = summarise({
      ...base,
      mode: 'clean',
      apply: true,
      orphans: [],
      targets: split.targets.map((t, i) => ({ ...t, left: { rules: i === 0 ? [t.rules[1]!] : [], neighbours: [] } })),
      errors: [{ target: DNAT32.text, message: 'Permission denied (you must be root)' }],
    });
    const text = renderResidue(applied);
    expect(text).toContain('10.240.0.32  removed 3, 1 LEFT');
    expect(text).toContain('    LEFT          ebtables -t nat PREROUTING -p IPv4 -i eth0 --ip-dst 10.240.0.32/32');
    expect(text).toContain('FAILED  -p IPv4 -i eth0 --ip-dst 10.240.0.32/32 -j dnat');
    expect(text).toContain('removed 2 rules and 1 neighbour entry; 1 entry LEFT; 1 failure');
  });

  it('says when ebtables has no nat table and when no conflist was found', () => {
    const text = renderResidue(
      summarise({
        ...base,
        network: null,
        conflist: null,
        ledgerNote: 'no ipam-shim conflist in /x',
        ebtablesAvailable: false,
        targets: [],
        orphans: [],
      }),
    );
    expect(text).toContain('no ipam-shim network');
    expect(text).toContain('note: no ipam-shim conflist in /x');
    expect(text).toContain('ebtables: no bridge nat table');
    expect(text).toContain('no IPs to look at');
  });

  it('names every ebtables backend: read with its count, or unavailable with the reason (never "no rules")', () => {
    const backends = [
      { name: 'nft' as const, program: 'ebtables-nft', available: true, rules: 2 },
      { name: 'legacy' as const, program: 'ebtables', available: false, reason: "The kernel doesn't support the ebtables 'nat' table." },
      {
        name: 'legacy' as const,
        available: false,
        reason: 'ebtables-legacy is not installed but the kernel has its tables (/sys/module/ebtable_nat present): rules there are not seen',
        blind: true,
      },
    ];
    const nftRules = [
      { ...ARP32, backend: 'nft' as const },
      { ...DNAT32, backend: 'nft' as const },
    ];
    const text = renderResidue(summarise({ ...base, ebtablesBackends: backends, ...assemble(targets, { rules: nftRules, neighbours: [] }, []) }));
    expect(text).toContain('ebtables nft (ebtables-nft): read, 2 per-pod rules');
    expect(text).toContain("ebtables legacy (ebtables): unavailable: The kernel doesn't support the ebtables 'nat' table.");
    expect(text).toContain('ebtables legacy: NOT READ: ebtables-legacy is not installed');
    expect(text).toContain('found         ebtables-nft -t nat PREROUTING -p IPv4 -i eth0 --ip-dst 10.240.0.32/32');
  });
});

describe('flags', () => {
  const run = (argv: string[]) => residueCommand.run(argv, { run: (() => Promise.reject(new Error('no effects in unit tests'))) as never, env: {} });
  it.each([
    [[], /expected "scan" or "clean"/],
    [['sweep'], /unknown subcommand/],
    [['scan', '--apply'], /--apply belongs to "clean"/],
    [['clean', '--ip', '10.240.0.0/16'], /expected a single IPv4 or IPv6 address/],
    [['scan', '--bogus'], /bogus/],
    [['scan', '--ebtables-backend', 'iptables'], /--ebtables-backend iptables/],
    [['scan', '--ebtables-backend', 'nft,nft'], /must not repeat/],
  ])('%j is a usage error', async (argv, msg) => {
    await expect(run(argv as string[])).rejects.toSatisfy((e: unknown) => e instanceof UsageError && msg.test((e as Error).message));
  });
});
