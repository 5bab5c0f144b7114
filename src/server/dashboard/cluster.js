// One cluster's page: its state, node groups (bounds, counts, health, backoff: its own, or
// for another cluster's capacity failure), pending pods with why they wait, recent actions
// and how they went, the last error, and the effective settings with where each came from.

import {h, ago, badge, cell, describeAction, failureHeadline, groupLabel, groupName, health,
  outcome, podOutcome, settingSource, showValue, sparkline} from "./dom.js";
import {clusterTag, elsewhere} from "./sharding.js";

export function renderCluster({name, body, missing, sharding, now, open}) {
  const back = h("p", {class: "back"}, h("a", {href: "#/"}, "← All clusters"));
  if (missing) {
    // With sharding, a cluster this replica does not run may be another replica's.
    return [back, h("h2", {tabindex: "-1"}, name), elsewhere(sharding, name) ||
      h("p", {class: "notice"}, `The hub has no cluster named “${name}”.`)];
  }
  if (!body) return [back, h("h2", {tabindex: "-1"}, name), h("p", {class: "notice"}, "Loading…")];
  const hl = health(body);
  return [
    back,
    h("h2", {tabindex: "-1"}, body.name, " ", badge(hl.level, hl.text),
      body.dryRun ? h("span", {class: "tag"}, "dry run") : null, clusterTag(sharding, body.name)),
    hl.detail ? h("p", {class: `why ${hl.level}`}, hl.detail) : null,
    facts(body, now),
    trends(body),
    lastError(body, now),
    groups(body.groups || [], now),
    pending(body),
    actions(body.recent || [], now),
    settings(body.settings, open),
  ].filter(Boolean);
}

function facts(c, now) {
  const pass = c.lastPass;
  const rows = [
    ["Phase", [c.phase, ", since ", ago(c.since, now)]],
    ["Nodes ready / total", `${c.readyNodes} / ${c.nodes}, ${c.unreadyNodes} unready`],
    ["Pods pending / stuck", `${c.pendingPods} / ${c.stuckPods}`],
    ["Node groups", `${c.nodeGroups} autoscaled`],
    ["Last pass", pass ? [ago(pass.at, now), `, ${pass.tookMs.toFixed(1)} ms ` +
      `(engine ${pass.engineMs.toFixed(1)} ms)`] : "none yet"],
    ["Restarts", String(c.restarts)],
  ];
  if (pass && pass.skipped) rows.push(["Pass skipped", pass.skipped]);
  if (c.warnings && c.warnings.length) rows.push(["Warnings", c.warnings.join("; ")]);
  if (c.cache) {
    const k = c.cache;
    rows.push(["Cache", `${k.nodes} nodes, ${k.pods} pods, ${k.machines} machines, ` +
      `${k.nodeGroups} groups, ${k.other} other`]);
  }
  return h("dl", {class: "facts"}, rows.map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v))));
}

function trends(c) {
  const big = {width: 320, height: 48};
  return h("section", {class: "trends", "aria-labelledby": "trends"},
    h("h3", {id: "trends"}, "Recent passes"),
    h("div", {class: "trend"}, h("span", {}, `Nodes: ${c.nodes}`),
      sparkline(c.history, "nodes", "Nodes", big)),
    h("div", {class: "trend"}, h("span", {}, `Pending pods: ${c.pendingPods}`),
      sparkline(c.history, "pendingPods", "Pending pods", {...big, zero: true})));
}

function lastError(c, now) {
  if (!c.lastError) return null;
  return h("section", {class: "error-box", "aria-labelledby": "last-error"},
    h("h3", {id: "last-error"}, "Last error ", h("small", {}, ago(c.lastError.at, now))),
    h("p", {}, c.lastError.message));
}

function section(id, title, ...content) {
  return h("section", {"aria-labelledby": id}, h("h3", {id}, title), ...content);
}

function tableOf(caption, columns, rows, cls) {
  return h("div", {class: "scroll"},
    h("table", {class: cls},
      h("caption", {class: "visually-hidden"}, caption),
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", {scope: "col"}, c)))),
      h("tbody", {}, rows)));
}

const num = (v) => (v === undefined || v === null ? "–" : String(v));

function groups(list, now) {
  if (list.length === 0) return section("groups", "Node groups", h("p", {class: "muted"}, "No node groups found."));
  const rows = list.map((g) => {
    // The fleet's backoff is set only where the group has none of its own (which says more).
    const fleet = g.fleetBackoff || null;
    const own = g.backoffUntil && Date.parse(g.backoffUntil) > now;
    const [level, text] = !g.eligible ? ["idle", "set aside"]
      : own ? ["warn", "backed off"]
        : fleet ? ["warn", fleet.cluster ? `backed off for cluster ${fleet.cluster}` : "backed off for the fleet"]
          : g.healthy ? ["ok", "healthy"] : ["warn", "unhealthy"];
    const until = !own && fleet ? fleet.until : g.backoffUntil;
    return h("tr", {},
      h("th", {scope: "row", "data-label": "Node group"}, groupLabel(g.id)),
      cell("Min", num(g.min)), cell("Target", num(g.target)), cell("Max", num(g.max)),
      cell("Ready", String(g.ready)), cell("Registered", String(g.registered)),
      cell("Upcoming", String(g.upcoming)),
      cell("Health", badge(level, text), g.reason ? h("div", {class: "detail"}, g.reason) : null,
        fleet ? fleetBackoff(fleet, now) : null),
      cell("Backoff until", until ? ago(until, now) : "–"));
  });
  return section("groups", `Node groups (${list.length})`,
    tableOf("Node groups", ["Node group", "Min", "Target", "Max", "Ready", "Registered", "Upcoming",
      "Health", "Backoff until"], rows, "groups"));
}

// Whose failure holds the group back: the fleet's shared knowledge, with the cloud's error.
function fleetBackoff(f, now) {
  return h("div", {class: "detail fleet"}, "Fleet backoff: ", failureHeadline(f, now),
    f.reason ? [": ", h("span", {class: "cloud-error"}, f.reason)] : null);
}

const RANK = {noScaleUp: 0, scaleUp: 1, fitsUpcoming: 2, fitsExisting: 3, belowPriorityCutoff: 4};

function pending(c) {
  const list = c.pending || [];
  const title = list.length < c.pendingPods
    ? `Pending pods (${list.length} of ${c.pendingPods} shown)` : `Pending pods (${list.length})`;
  if (list.length === 0) return section("pending", title, h("p", {class: "muted"}, "No pod is waiting for a node."));
  // Stuck pods first: they are the ones a person has to do something about.
  const rank = (p) => RANK[p.outcome] ?? Object.keys(RANK).length;
  const sorted = [...list].sort((a, b) => rank(a) - rank(b));
  const rows = sorted.map((p) => {
    const [level, text] = podOutcome(p.outcome);
    const where = p.node ? `node ${p.node}` : p.nodeGroup ? `group ${groupName(p.nodeGroup)}` : null;
    return h("tr", {},
      h("th", {scope: "row", "data-label": "Pod"}, p.pod),
      cell("Outcome", badge(level, text), where ? h("div", {class: "detail"}, where) : null),
      cell("Why", reasons(p.reasons || [])));
  });
  return section("pending", title, tableOf("Pending pods", ["Pod", "Outcome", "Why"], rows, "pending"));
}

function reasons(list) {
  if (list.length === 0) return h("span", {class: "muted"}, "–");
  return h("ul", {class: "reasons"}, list.map((r) => h("li", {},
    r.nodeGroup ? h("span", {class: "for", title: r.nodeGroup}, `${groupName(r.nodeGroup)}: `) : null,
    r.message, " ", h("code", {}, r.code))));
}

function actions(recent, now) {
  if (recent.length === 0) return section("actions", "Recent actions", h("p", {class: "muted"}, "No action yet."));
  const rows = [...recent].reverse().map((a) => {
    const o = outcome(a.outcome);
    return h("tr", {},
      cell("When", ago(a.at, now)),
      h("th", {scope: "row", "data-label": "Action"}, describeAction(a.action)),
      cell("Outcome", badge(o.level, o.text)),
      cell("Detail", o.detail || "–"));
  });
  return section("actions", `Recent actions (${recent.length}, newest first)`,
    tableOf("Recent actions", ["When", "Action", "Outcome", "Detail"], rows, "actions"));
}

function settings(all, open) {
  if (!all) return null;
  const names = Object.keys(all).sort();
  const rows = names.map((k) => {
    const s = all[k] || {};
    return h("tr", {class: s.source === "default" ? "default" : "set"},
      h("th", {scope: "row", "data-label": "Setting"}, h("code", {}, k)),
      cell("Value", h("code", {}, showValue(s.value))),
      cell("Source", settingSource(s.source)));
  });
  const changed = names.filter((k) => all[k] && all[k].source !== "default").length;
  return h("section", {"aria-labelledby": "settings"},
    h("details", {"data-key": "settings", open: open.has("settings")},
      h("summary", {}, h("h3", {id: "settings"}, `Effective settings (${names.length}, ` +
        `${changed} not default)`)),
      tableOf("Effective settings", ["Setting", "Value", "Source"], rows, "settings")));
}
