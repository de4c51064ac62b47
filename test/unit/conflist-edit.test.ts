// The conflist splice: our entry goes in right after cilium-cni in the file's own style, every other byte
// stays, insert-then-remove is the identity, and a second install changes nothing.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { ConflistEditError, inspectConflist, removeShimEntry, upsertShimEntry } from '../../src/install/conflist-edit.js';

// AKS's 05-cilium.conflist as a node shows it (tab-indented, cniVersion 0.3.1).
const AKS =
  '{\n\t"cniVersion": "0.3.1",\n\t"name": "cilium",\n\t"plugins": [\n\t\t{\n\t\t\t"type": "cilium-cni",\n\t\t\t"ipam": {\n\t\t\t\t"type": "azure-ipam"\n\t\t\t},\n\t\t\t"enable-debug": true,\n\t\t\t"log-file": "/var/log/cilium-cni.log"\n\t\t}\n\t]\n}\n';
const ENTRY = { type: 'ipam-shim', delegate: { type: 'azure-ipam' }, reservedCIDRs: ['10.224.0.0/24'] };

describe('upsertShimEntry', () => {
  it('inserts after cilium-cni in the file’s indentation and leaves every other byte alone', () => {
    const r = upsertShimEntry(AKS, ENTRY);
    expect(r.action).toBe('inserted');
    expect(r.index).toBe(1);
    expect(JSON.parse(r.text).plugins[1]).toEqual(ENTRY);
    expect(JSON.parse(r.text).plugins[0]).toEqual(JSON.parse(AKS).plugins[0]);
    expect(r.text).toBe(
      AKS.replace(
        '"/var/log/cilium-cni.log"\n\t\t}',
        '"/var/log/cilium-cni.log"\n\t\t},\n\t\t{\n\t\t\t"type": "ipam-shim",\n\t\t\t"delegate": {\n\t\t\t\t"type": "azure-ipam"\n\t\t\t},\n\t\t\t"reservedCIDRs": [\n\t\t\t\t"10.224.0.0/24"\n\t\t\t]\n\t\t}',
      ),
    );
  });

  it('is idempotent: the same entry again changes nothing', () => {
    const once = upsertShimEntry(AKS, ENTRY).text;
    const twice = upsertShimEntry(once, { ...ENTRY });
    expect(twice).toMatchObject({ action: 'unchanged', changed: false, text: once });
  });

  it('updates a different entry in place and keeps the rest', () => {
    const once = upsertShimEntry(AKS, ENTRY).text;
    const r = upsertShimEntry(once, { ...ENTRY, reservedCIDRs: [] });
    expect(r.action).toBe('updated');
    expect(JSON.parse(r.text).plugins[1].reservedCIDRs).toEqual([]);
    expect(removeShimEntry(r.text).text).toBe(AKS);
  });

  it('moves a misplaced entry and drops duplicates', () => {
    const list = { cniVersion: '0.3.1', name: 'c', plugins: [ENTRY, { type: 'portmap' }, { type: 'cilium-cni' }, ENTRY] };
    const r = upsertShimEntry(JSON.stringify(list, null, 2), ENTRY);
    expect(r.action).toBe('moved');
    expect(JSON.parse(r.text).plugins.map((p: { type: string }) => p.type)).toEqual(['portmap', 'cilium-cni', 'ipam-shim']);
  });

  it('inserts between cilium-cni and a later plugin', () => {
    const text = '{"cniVersion":"0.3.1","name":"c","plugins":[{"type":"cilium-cni"},{"type":"portmap","snat":true}]}';
    const r = upsertShimEntry(text, ENTRY);
    expect(r.text).toBe(
      '{"cniVersion":"0.3.1","name":"c","plugins":[{"type":"cilium-cni"},{"type":"ipam-shim","delegate":{"type":"azure-ipam"},"reservedCIDRs":["10.224.0.0/24"]},{"type":"portmap","snat":true}]}',
    );
    expect(removeShimEntry(r.text).text).toBe(text);
  });

  it('keeps CRLF line endings and spaced compact style', () => {
    const crlf = AKS.replaceAll('\n', '\r\n');
    const r = upsertShimEntry(crlf, ENTRY);
    expect(r.text.replaceAll('\r\n', '')).not.toContain('\n');
    expect(removeShimEntry(r.text).text).toBe(crlf);
    const spaced = '{"cniVersion": "0.3.1", "name": "c", "plugins": [{"type": "cilium-cni", "ipam": {"type": "azure-ipam"}}]}';
    expect(upsertShimEntry(spaced, ENTRY).text).toContain(
      '}, {"type": "ipam-shim", "delegate": {"type": "azure-ipam"}, "reservedCIDRs": ["10.224.0.0/24"]}]',
    );
  });

  it('leaves a list with the shim in an IPAM slot alone', () => {
    const text = JSON.stringify({
      cniVersion: '1.0.0',
      name: 'n',
      plugins: [{ type: 'cilium-cni', ipam: { type: 'ipam-shim', delegate: { type: 'azure-ipam' } } }],
    });
    expect(upsertShimEntry(text, ENTRY)).toMatchObject({ action: 'ipam-slot', changed: false, text });
  });

  it('refuses what it cannot place', () => {
    expect(() => upsertShimEntry('{"name":"x","plugins":[{"type":"ptp"}]}', ENTRY)).toThrow(/no "cilium-cni" plugin/);
    expect(() => upsertShimEntry('{"name":"x","type":"cilium-cni"}', ENTRY)).toThrow(ConflistEditError);
    expect(() => upsertShimEntry('{"name":', ENTRY)).toThrow(/not valid JSON/);
    expect(() => upsertShimEntry(AKS, { type: 'other' })).toThrow(/must be "ipam-shim"/);
  });

  it('copes with strings holding brackets, commas and escapes', () => {
    const text = '{"name":"a,b]","x":"\\"}{","plugins":[ {"type":"cilium-cni","k":"[,]\\\\"} ],"z":[1,{"plugins":[]}]}';
    const r = upsertShimEntry(text, ENTRY);
    expect(JSON.parse(r.text).plugins).toHaveLength(2);
    expect(JSON.parse(r.text).z).toEqual([1, { plugins: [] }]);
    expect(removeShimEntry(r.text).text).toBe(text);
  });

  it('property: for any formatting, insert keeps every other plugin and remove restores the bytes', () => {
    const plugin = fc.record({
      type: fc.constantFrom('portmap', 'bandwidth', 'tuning', 'sbr'),
      v: fc.oneof(fc.integer(), fc.string(), fc.boolean()),
    });
    fc.assert(
      fc.property(
        fc.array(plugin, { maxLength: 3 }),
        fc.array(plugin, { maxLength: 3 }),
        fc.constantFrom(undefined, 2, 4, '\t'),
        fc.boolean(),
        (before, after, indent, crlf) => {
          const list = { cniVersion: '0.3.1', name: 'cilium', plugins: [...before, { type: 'cilium-cni', ipam: { type: 'azure-ipam' } }, ...after] };
          let text = JSON.stringify(list, null, indent);
          if (crlf) text = text.replaceAll('\n', '\r\n');
          const r = upsertShimEntry(text, ENTRY);
          const parsed = JSON.parse(r.text);
          expect(parsed.plugins).toEqual([...before, list.plugins[before.length], ENTRY, ...after]);
          expect(upsertShimEntry(r.text, ENTRY).changed).toBe(false);
          expect(removeShimEntry(r.text).text).toBe(text);
        },
      ),
    );
  });
});

describe('inspectConflist / removeShimEntry', () => {
  it('finds anchor, chained entries and the IPAM slot', () => {
    const s = inspectConflist(JSON.stringify({ name: 'n', plugins: [{ type: 'ptp', ipam: { type: 'ipam-shim' } }, { type: 'ipam-shim' }] }), 'ptp');
    expect(s).toMatchObject({ anchor: 0, chained: [1], ipamSlot: 0 });
  });
  it('removes nothing from a list without the shim', () => {
    expect(removeShimEntry(AKS)).toEqual({ text: AKS, changed: false, removed: 0, ipamSlotLeft: false });
  });
});
