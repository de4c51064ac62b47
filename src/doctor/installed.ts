// Doctor's installed check: the fact the agent's /readyz and ipam_shim_agent_conflist_entry_in_use report (one
// function, src/conflist.ts shimEntryInUse): the shim's entry is in the network config the runtime uses now, the
// first in the conf dir. The shim found in a later file is a conflist pods never get.
import { dirname } from 'node:path';
import { shimEntryInUse } from '../conflist.js';
import type { DoctorCheck } from '../contract/doctor-check.js';

export const installedCheck: DoctorCheck = {
  name: 'installed',
  async run(net) {
    const entry = await shimEntryInUse({ confDir: dirname(net.shim.path) });
    if (entry.inUse) return [{ check: this.name, verdict: 'ok', summary: `the runtime uses ${entry.path}, which holds the shim's entry` }];
    return [
      {
        check: this.name,
        verdict: 'problem',
        summary: entry.reason,
        fix: "make the shim's conflist the first network config in the directory (runtimes use the first in lexical order), or chain the shim into that one: ipam-shim install (or the agent) puts it after cilium-cni",
        data: entry,
      },
    ];
  },
};
