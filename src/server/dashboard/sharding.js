// What the pages say when the hub is one of several replicas sharing the fleet
// (`hub.sharding` in /api/v1/fleet; docs/hub.md, "Sharding"): this replica runs only its own
// clusters, so the header says which replica it is and how many clusters it runs, the fleet
// page lists the clusters the other replicas run with a link to each replica's dashboard,
// and a cluster page asked for another replica's cluster points there. Hubs without
// sharding get null from everything here, and the pages show nothing new.

import {h, badge, plural} from "./dom.js";

// `hub.sharding` read into what the pages need, or null. Every field may be missing (an
// older or newer hub): missing lists are empty.
export function shardingOf(hub) {
  const s = hub && hub.sharding;
  if (!s || typeof s !== "object") return null;
  const owners = s.owners && typeof s.owners === "object" ? s.owners : {};
  const replicas = Array.isArray(s.replicas) ? s.replicas.filter((r) => r && r.identity) : [];
  const writing = new Set(Array.isArray(s.writing) ? s.writing : []);
  const identity = s.identity || (replicas.find((r) => r.self) || {}).identity || "";
  const mine = Object.keys(owners).filter((c) => owners[c] === identity);
  return {
    identity,
    replicas,
    owners,
    writing,
    mine,
    clusters: Object.keys(owners).length,
    // Clusters this replica runs but does not write to yet: their Lease is still held by the
    // replica that ran them before (it lets go once its runner stopped, or the Lease expires).
    takingOver: mine.filter((c) => !writing.has(c)),
  };
}

// Where a replica's dashboard is, with the page's own scheme, or null when its address is
// unknown or not a plain `host:port` (the address comes from the replica's Lease: anything
// else is not followed).
export function replicaBase(replicas, identity) {
  const r = replicas.find((p) => p.identity === identity);
  const address = r && typeof r.address === "string" ? r.address : "";
  if (!/^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}$/.test(address)) return null;
  return {address, href: `${location.protocol}//${address}/`};
}

// The header's items: which replica, of how many, runs how many of the fleet's clusters and
// writes to how many now; the clusters it is still taking over.
export function shardingHeader(s) {
  if (!s) return [];
  if (s.replicas.length === 0) {
    return [badge("bad", `replica ${s.identity}: its own Lease is not renewed, so it runs no cluster`)];
  }
  const items = [badge("ok", `replica ${s.identity} of ${s.replicas.length}, runs ` +
    `${s.mine.length} of ${plural(s.clusters, "cluster")}`),
  h("span", {}, `writes to ${s.writing.size} now`)];
  if (s.takingOver.length) {
    items.push(h("span", {title: "This replica runs these clusters but writes nothing to them " +
      "until it holds their Lease"}, badge("warn", `taking over ${s.takingOver.join(", ")}`)));
  }
  return items;
}

// A tag for a cluster row of this replica: "taking over" until it holds the cluster's Lease,
// "moving to B" while it still runs a cluster another replica now owns.
export function clusterTag(s, name) {
  if (!s) return null;
  const owner = s.owners[name];
  if (owner && owner !== s.identity) return h("span", {class: "tag"}, `moving to ${owner}`);
  if (owner && !s.writing.has(name)) {
    return h("span", {class: "tag", title: "Runs here; writes nothing until it holds the " +
      "cluster's Lease"}, "taking over");
  }
  return null;
}

// The clusters the other replicas run, grouped by replica, each replica with a link to its
// dashboard and each cluster to its page there.
export function otherReplicas(s) {
  if (!s) return null;
  const groups = new Map(s.replicas.filter((r) => r.identity !== s.identity)
    .map((r) => [r.identity, []]));
  for (const [cluster, owner] of Object.entries(s.owners)) {
    if (owner === s.identity) continue;
    // An owner not among the replicas listed is still named (without an address).
    if (!groups.has(owner)) groups.set(owner, []);
    groups.get(owner).push(cluster);
  }
  const others = [...groups.keys()].sort();
  const count = others.reduce((n, r) => n + groups.get(r).length, 0);
  const title = `Clusters the other replicas run (${count})`;
  if (others.length === 0) {
    return h("section", {class: "replicas", "aria-labelledby": "replicas"},
      h("h3", {id: "replicas"}, title), h("p", {class: "muted"}, "No other replica is alive."));
  }
  const items = others.map((identity) => {
    const base = replicaBase(s.replicas, identity);
    const clusters = groups.get(identity).sort();
    return h("li", {class: "replica", "data-replica": identity},
      h("p", {class: "who"}, h("strong", {}, `replica ${identity}`), " ",
        base ? h("a", {href: base.href}, `open its dashboard (${base.address})`)
          : h("span", {class: "muted"}, "(address unknown)")),
      clusters.length
        ? h("p", {}, `runs ${plural(clusters.length, "cluster")}: `,
          clusters.map((c, i) => [i ? ", " : "", base
            ? h("a", {href: `${base.href}#/clusters/${encodeURIComponent(c)}`}, c) : c]))
        : h("p", {class: "muted"}, "runs no cluster now"));
  });
  return h("section", {class: "replicas", "aria-labelledby": "replicas"},
    h("h3", {id: "replicas"}, title), h("ul", {}, items));
}

// A cluster page for a cluster this replica does not serve: which replica runs it and a
// link to its page there; null when the fleet has no such cluster (the page says so).
export function elsewhere(s, name) {
  if (!s) return null;
  const owner = s.owners[name];
  if (!owner) return null;
  if (owner === s.identity) {
    return h("p", {class: "notice"}, `This replica (${s.identity}) runs ${name}, but has not ` +
      "started it yet.");
  }
  const base = replicaBase(s.replicas, owner);
  return h("div", {class: "elsewhere"},
    h("p", {}, `Replica ${owner} runs ${name}, not this replica (${s.identity}).`),
    base
      ? h("p", {}, h("a", {href: `${base.href}#/clusters/${encodeURIComponent(name)}`},
        `Open ${name} on replica ${owner} (${base.address})`))
      : h("p", {class: "muted"}, `The address of replica ${owner} is not known.`));
}
