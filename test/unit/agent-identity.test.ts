// The one rule for cilium-agent's attachments (src/ledger/owner.ts): ADD's owner, agent-ip's owner names
// and the fixes doctor prints agree on every kind of container ID.
import { describe, expect, it } from 'vitest';
import { agentContainerID, agentIpOwner, agentReallocateFix, agentReplaceFix, ownerOf } from '../../src/ledger/owner.js';

const DEFAULT_PATTERNS = ['cilium-agent-*', 'cilium-ingress-*'];

describe('agent identity', () => {
  it('an agent-ip container ID is the agent’s and names its owner back', () => {
    for (const owner of ['health', 'ingress', 'a', 'node-1.x']) {
      const id = agentContainerID(owner);
      expect(ownerOf(id, DEFAULT_PATTERNS)).toBe('agent');
      expect(agentIpOwner(id)).toBe(owner);
      expect(agentReallocateFix(id)).toContain(`agent-ip allocate --owner ${owner} `);
      expect(agentReplaceFix(id)).toContain(`agent-ip release --owner ${owner}\``);
    }
  });

  it('cilium-ingress-<node> is the agent’s, but agent-ip does not manage it: no fix names an --owner', () => {
    const id = 'cilium-ingress-node1';
    expect(ownerOf(id, DEFAULT_PATTERNS)).toBe('agent');
    expect(agentIpOwner(id)).toBeUndefined();
    expect(agentReallocateFix(id)).not.toContain('--owner');
    expect(agentReplaceFix(id)).not.toContain('--owner');
  });

  it('a pod is nobody’s agent; an ID agent-ip could never make is no agent-ip owner', () => {
    expect(ownerOf('0123abcd', DEFAULT_PATTERNS)).toBe('pod');
    expect(agentIpOwner('0123abcd')).toBeUndefined();
    expect(ownerOf('cilium-agent-Bad_Name', DEFAULT_PATTERNS)).toBe('agent');
    expect(agentIpOwner('cilium-agent-Bad_Name')).toBeUndefined();
    expect(ownerOf('x.y', ['x.*'])).toBe('agent');
    expect(ownerOf('xzy', ['x.y'])).toBe('pod'); // "." is itself, not any character
  });
});
