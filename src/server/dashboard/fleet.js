// The fleet page: totals, the capacity failures shared across the fleet, then one row per
// cluster with its health (colour and words), nodes, pending pods, node groups, last action,
// restarts, and sparklines of nodes and pending pods over its last passes; with sharding,
// the clusters the other replicas run, each replica linked to its own dashboard.

import {h, ago, badge, cell, clusterLink, describeAction, failureHeadline, failureReach, groupName,
  health, outcome, plural, sparkline, until} from "./dom.js";
import {clusterTag, otherReplicas, shardingOf} from "./sharding.js";

export function renderFleet(body, now) {
  const clusters = body.clusters || [];
  const sharding = shardingOf(body.hub);
  const none = sharding ? `Replica ${sharding.identity} runs no cluster now.` : "No clusters are configured.";
  return [
    h("h2", {tabindex: "-1"}, "Fleet"),
    summary(body.fleet, clusters, sharding),
    sharedFailures(body.sharedFailures, clusters, now),
    clusters.length ? table(clusters, now, sharding) : h("p", {class: "notice"}, none),
    otherReplicas(sharding),
  ].filter(Boolean);
}

// Capacity failures one cluster found that back off the other clusters' groups of the same
// instance type in the same zone (or region): what failed, where, the cloud's error, until
// when the others hold back, and which groups do now. Hubs without them show nothing.
function sharedFailures(list, clusters, now) {
  if (!Array.isArray(list) || list.length === 0) return null;
  const items = list.map((f) => {
    const held = heldBack(f, clusters);
    return h("li", {class: "failure"},
      h("p", {class: "what"}, failureHeadline(f, now)),
      f.reason ? h("p", {class: "cloud-error"}, f.reason) : null,
      h("p", {}, `Other clusters' groups of ${failureReach(f)} are backed off until `,
        until(f.until, now), "."),
      held.length ? h("p", {}, "Backed off now: ",
        held.map(({cluster, group}, i) => [i ? ", " : "", clusterLink(cluster),
          ` (${groupName(group)})`]), ".")
        : h("p", {class: "muted"}, "No other cluster's group is backed off for it at its last pass."),
      f.trace && f.trace.traceId
        ? h("p", {class: "detail"}, "Trace of the pass that found it: ", h("code", {}, f.trace.traceId))
        : null);
  });
  return h("section", {class: "failures", "aria-labelledby": "failures"},
    h("h3", {id: "failures"}, `Capacity failures shared across the fleet (${list.length})`),
    h("ul", {}, items));
}

// The groups of other clusters backed off for `f`, as their last passes said.
function heldBack(f, clusters) {
  const same = (b) => b && b.cluster === f.cluster && b.nodeGroup === f.nodeGroup && b.at === f.at;
  return clusters.flatMap((c) => (c.groups || [])
    .filter((g) => same(g.fleetBackoff))
    .map((g) => ({cluster: c.name, group: g.id})));
}

// Fleet totals: from the API's `fleet` object when it has one, else added up here. With
// sharding, the fleet's health counts every replica's clusters, pending pods only this one's.
function summary(fleet, clusters, sharding) {
  const sum = (key) => clusters.reduce((n, c) => n + (Number(c[key]) || 0), 0);
  const f = fleet || {
    clusters: clusters.length,
    unhealthyClusters: clusters.filter((c) => health(c).level !== "ok").length,
    nodes: sum("nodes"),
    unreadyNodes: sum("unreadyNodes"),
  };
  const items = [
    h("li", {}, h("strong", {}, plural(f.clusters, "cluster")),
      f.unhealthyClusters ? ` (${f.unhealthyClusters} not healthy)` : " (all healthy)"),
    h("li", {}, h("strong", {}, plural(f.nodes, "node")),
      ` (${f.unreadyNodes} unready` +
      (typeof f.unreadyRatio === "number" ? `, ${(f.unreadyRatio * 100).toFixed(1)} %` : "") + ")"),
    h("li", {}, h("strong", {}, plural(sum("pendingPods"), "pending pod")),
      ` (${sum("stuckPods")} stuck)`, sharding ? " in this replica's clusters" : ""),
  ];
  if (fleet && fleet.state) {
    items.unshift(h("li", {}, badge(fleet.state === "healthy" ? "ok" : "warn", `fleet ${fleet.state}`)));
  }
  if (fleet && fleet.scaleDownPaused) items.push(h("li", {}, badge("warn", "scale-down paused")));
  return h("ul", {class: "totals", "aria-label": "Fleet totals"}, items);
}

const COLUMNS = ["Cluster", "Health", "Nodes ready / total", "Unready nodes", "Pods pending / stuck",
  "Node groups", "Last action", "Restarts", "Nodes, recent passes", "Pending pods, recent passes"];

const HINTS = {
  "Nodes ready / total": "Total counts every node: ready, starting, unready and being removed",
  "Unready nodes": "Nodes that stopped being ready (nodes still starting are not counted)",
  "Pods pending / stuck": "Pods waiting for a node; stuck: no scale-up can help them now",
};

function table(clusters, now, sharding) {
  return h("div", {class: "scroll"},
    h("table", {class: "clusters", id: "clusters"},
      h("caption", {}, "Clusters"),
      h("thead", {}, h("tr", {}, COLUMNS.map((c) => h("th", {scope: "col", title: HINTS[c]}, c)))),
      h("tbody", {}, clusters.map((c) => row(c, now, sharding)))));
}

function row(c, now, sharding) {
  const hl = health(c);
  const href = `#/clusters/${encodeURIComponent(c.name)}`;
  return h("tr", {class: `cluster ${hl.level}`},
    h("th", {scope: "row", "data-label": "Cluster"},
      h("a", {href}, c.name), c.dryRun ? h("span", {class: "tag"}, "dry run") : null,
      clusterTag(sharding, c.name)),
    cell("Health", badge(hl.level, hl.text), hl.detail ? h("div", {class: "detail"}, hl.detail) : null),
    cell("Nodes ready / total", h("span", {class: "num"}, `${c.readyNodes} / ${c.nodes}`)),
    cell("Unready nodes", h("span", {class: c.unreadyNodes ? "num warn-text" : "num"}, String(c.unreadyNodes))),
    cell("Pods pending / stuck", h("span", {class: c.stuckPods ? "num warn-text" : "num"},
      `${c.pendingPods} / ${c.stuckPods}`)),
    cell("Node groups", h("span", {class: "num"}, String(c.nodeGroups))),
    cell("Last action", lastAction(c, now)),
    cell("Restarts", h("span", {class: c.restarts ? "num warn-text" : "num"}, String(c.restarts))),
    cell("Nodes, recent passes", sparkline(c.history, "nodes", "Nodes", {width: 100})),
    cell("Pending pods, recent passes", sparkline(c.history, "pendingPods", "Pending pods", {zero: true, width: 100})));
}

function lastAction(c, now) {
  const recent = c.recent || [];
  const last = recent[recent.length - 1];
  if (!last) return h("span", {class: "muted"}, "none yet");
  const o = outcome(last.outcome);
  return h("div", {class: "action"},
    h("span", {}, describeAction(last.action)), " ",
    o.level === "ok" ? null : badge(o.level, o.text),
    h("div", {class: "detail"}, ago(last.at, now)));
}
