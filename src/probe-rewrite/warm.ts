// The build's warm-up answers for what the probe-rewrite fix reads (src/warm.ts): the rewrite table as this shim
// installs it (so ensure finds it in place) and the IPv6 default route naming the uplink.
import type { RunScript } from '../scripted/scripted-run.js';

// `nft -j list table ip6 azureSLBProbe` as nft 1.0.6 prints the rewrite this shim installs.
const NFT =
  '{"nftables": [{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}}, {"table": {"family": "ip6", "name": "azureSLBProbe", "handle": 2}}, {"chain": {"family": "ip6", "table": "azureSLBProbe", "name": "prerouting", "handle": 1, "type": "filter", "hook": "prerouting", "prio": -300, "policy": "accept"}}, {"chain": {"family": "ip6", "table": "azureSLBProbe", "name": "postrouting", "handle": 2, "type": "filter", "hook": "postrouting", "prio": -300, "policy": "accept"}}, {"rule": {"family": "ip6", "table": "azureSLBProbe", "chain": "prerouting", "handle": 4, "expr": [{"match": {"op": "==", "left": {"meta": {"key": "iifname"}}, "right": "eth0"}}, {"match": {"op": "==", "left": {"payload": {"protocol": "icmpv6", "field": "type"}}, "right": {"set": ["nd-router-advert", "nd-neighbor-solicit", "nd-neighbor-advert"]}}}, {"counter": {"packets": 0, "bytes": 0}}, {"accept": null}]}}, {"rule": {"family": "ip6", "table": "azureSLBProbe", "chain": "prerouting", "handle": 5, "expr": [{"match": {"op": "==", "left": {"meta": {"key": "iifname"}}, "right": "eth0"}}, {"match": {"op": "==", "left": {"payload": {"protocol": "ip6", "field": "saddr"}}, "right": "fe80::1234:5678:9abc"}}, {"mangle": {"key": {"payload": {"protocol": "ip6", "field": "saddr"}}, "value": "2603:1062:0:1:fe80:1234:5678:9abc"}}, {"counter": {"packets": 0, "bytes": 0}}]}}, {"rule": {"family": "ip6", "table": "azureSLBProbe", "chain": "postrouting", "handle": 6, "expr": [{"match": {"op": "==", "left": {"meta": {"key": "oifname"}}, "right": "eth0"}}, {"match": {"op": "==", "left": {"payload": {"protocol": "ip6", "field": "daddr"}}, "right": "2603:1062:0:1:fe80:1234:5678:9abc"}}, {"mangle": {"key": {"payload": {"protocol": "ip6", "field": "daddr"}}, "value": "fe80::1234:5678:9abc"}}, {"counter": {"packets": 0, "bytes": 0}}]}}]}';
const ROUTE6 = '[{"dst":"default","gateway":"fe80::1","dev":"eth0","protocol":"ra","metric":1024,"flags":[],"pref":"medium"}]';

export const warmRun: RunScript = (file, args) => {
  const cmd = `${file} ${args.join(' ')}`;
  if (cmd.startsWith('nft -j list table ip6')) return NFT;
  if (cmd === 'ip -j -6 route show default') return ROUTE6;
  return undefined;
};
