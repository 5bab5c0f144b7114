// A what-if's answer (`GET /api/v1/what-if`, docs/plan-format.md): the totals, then each
// cluster with the settings the proposal changes there (current → proposed, and where the
// proposed value comes from), notes on what does not reach it, and every decision that
// differs, now and as proposed, with why. Fields an older hub leaves out are skipped.

import {h, badge, cell, clock, clusterLink, groupName, plural, podOutcome,
  settingSource, showValue} from "./dom.js";

export function renderAnswer(a) {
  const clusters = Array.isArray(a.clusters) ? a.clusters : [];
  const s = a.summary || {};
  const count = (key, fallback) => (typeof s[key] === "number" ? s[key] : fallback);
  const changed = count("changed", clusters.filter((c) => (c.changes || []).length).length);
  const errors = count("errors", clusters.filter((c) => c.error).length);
  const at = Date.parse(a.at);
  return [
    h("h3", {id: "what-if-result"}, "What would change"),
    h("p", {class: "proposal"}, "Proposed: ",
      (a.proposal || []).map((p, i) => [i ? ", " : "", h("code", {}, p)]),
      Number.isNaN(at) ? null : ` · evaluated at ${clock(at)}`),
    h("ul", {class: "totals", "aria-label": "What-if totals"},
      h("li", {}, h("strong", {}, plural(count("clusters", clusters.length), "cluster")), " evaluated"),
      h("li", {}, h("strong", {}, String(changed)), ` with decisions that change`),
      h("li", {}, h("strong", {}, plural(count("scaleUpsChanged", 0), "scale-up")), " changed"),
      h("li", {}, h("strong", {}, plural(count("removalsChanged", 0), "removal")), " changed"),
      h("li", {}, h("strong", {}, plural(count("podsChanged", 0), "pending pod")), " with another outcome"),
      count("overLimits", 0) ? h("li", {}, badge("warn",
        `${plural(count("overLimits", 0), "cluster")} already at or over a proposed limit`)) : null,
      errors ? h("li", {}, badge("bad", `${plural(errors, "cluster")} not evaluated`)) : null),
    notes(a.notes),
    clusters.length ? clusters.map(cluster) : h("p", {class: "notice"}, "No cluster was evaluated."),
  ].flat().filter(Boolean);
}

function notes(list) {
  if (!Array.isArray(list) || list.length === 0) return null;
  return h("ul", {class: "notes"}, list.map((n) => h("li", {}, n)));
}

function cluster(c) {
  const changes = Array.isArray(c.changes) ? c.changes : [];
  const notShown = Number(c.notShown) || 0;
  const [level, words] = c.error ? ["bad", "not evaluated"]
    : changes.length ? ["warn", plural(changes.length + notShown, "change")] : ["ok", "no change"];
  const id = `what-if-${c.name}`;
  const head = h("h4", {id}, clusterLink(c.name), " ", badge(level, words));
  if (c.error) {
    return h("section", {class: "what-if-cluster bad", "aria-labelledby": id}, head,
      h("p", {class: "why bad"}, c.error));
  }
  const settings = Array.isArray(c.settings) ? c.settings : [];
  return h("section", {class: `what-if-cluster ${level}`, "aria-labelledby": id}, head,
    settings.length ? settingsTable(c.name, settings)
      : h("p", {class: "muted"}, "No setting changes here: the proposal does not reach this cluster."),
    overLimits(c.overLimits),
    notes(c.notes),
    changes.length ? changesTable(c.name, changes)
      : h("p", {class: "no-change"}, "No decision changes: with the proposed settings this " +
        "cluster would do what it does now."),
    counts(c, changes, notShown));
}

// What a proposed limit the cluster is already at or over holds back, whether or not a
// decision changes now (with nothing pending, none does).
function overLimits(list) {
  if (!Array.isArray(list) || list.length === 0) return null;
  const unit = (limit) => ({maxNodesTotal: "nodes", cores: "cores", memoryGiB: "GiB"}[limit]
    || String(limit).replace(/^gpus\//, ""));
  return h("ul", {class: "over-limits"}, list.map((o) => {
    const over = Number(o.used) > Number(o.proposed);
    const has = `${showValue(o.used)} ${unit(o.limit)}, proposed ${showValue(o.proposed)}`;
    return h("li", {}, badge("warn", over ? "already over" : "already at it"), " ",
      h("code", {}, String(o.limit)), `: ${has}; ` +
      (over ? "nothing added until it is back under" : "nothing added while it stays there"));
  }));
}

function tableOf(caption, columns, rows, cls) {
  return h("div", {class: "scroll"},
    h("table", {class: cls},
      h("caption", {class: "visually-hidden"}, caption),
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", {scope: "col"}, c)))),
      h("tbody", {}, rows)));
}

// The proposal's own layer is the "flags" one (above every layer, as `plan --set`).
const source = (s) => (s === "flags" ? "the proposal" : settingSource(s));

function settingsTable(name, settings) {
  const rows = settings.map((s) => h("tr", {},
    h("th", {scope: "row", "data-label": "Setting"}, h("code", {}, String(s.key))),
    cell("Current", h("code", {}, showValue(s.current))),
    cell("Proposed", h("code", {}, showValue(s.proposed))),
    cell("Source", source(s.source))));
  return tableOf(`Settings that change in ${name}`, ["Setting", "Current", "Proposed", "Source"],
    rows, "what-if-settings");
}

function changesTable(name, changes) {
  const rows = changes.map((x) => {
    const d = describe(x);
    return h("tr", {class: `change ${x.kind}`},
      h("th", {scope: "row", "data-label": "Decision"}, d.what),
      cell("Now", d.now), cell("Proposed", d.proposed), cell("Why", d.why || "–"));
  });
  return tableOf(`Decisions that change in ${name}`, ["Decision", "Now", "Proposed", "Why"],
    rows, "what-if-changes");
}

function counts(c, changes, notShown) {
  const pods = Number(c.podsChanged) || 0;
  const listed = changes.filter((x) => x.kind === "pod").length;
  const parts = [];
  if (pods) {
    parts.push(`${plural(pods, "pending pod")} would have another outcome` +
      (listed < pods ? ` (${listed} listed)` : ""));
  }
  if (notShown) parts.push(`${plural(notShown, "more change")} not listed`);
  return parts.length ? h("p", {class: "counts"}, `${parts.join("; ")}.`) : null;
}

const resize = (r) => (r ? `scale up ${r.from} → ${r.to}` : "no scale-up");
const yesNo = (yes, no) => (v) => (v ? yes : no);

function fate(f) {
  if (!f) return "–";
  const [level, text] = podOutcome(f.outcome);
  return [badge(level, text), f.nodeGroup ? h("div", {class: "detail"}, `group ${groupName(f.nodeGroup)}`) : null];
}

// One change: what it is about, the decision now and as proposed, and why, in words.
function describe(x) {
  const group = x.nodeGroup ? h("span", {title: x.nodeGroup}, groupName(x.nodeGroup)) : "a group";
  const of = x.nodeGroup
    ? h("div", {class: "detail", title: x.nodeGroup}, `group ${groupName(x.nodeGroup)}`) : null;
  switch (x.kind) {
    case "scaleUp":
      return {what: ["Scale-up of ", group], now: resize(x.current), proposed: resize(x.proposed), why: x.reason};
    case "pod":
      return {what: ["Pod ", String(x.pod)], now: fate(x.current), proposed: fate(x.proposed), why: x.reason};
    case "limit": {
      const said = yesNo("reached", "not reached");
      return {what: ["Limit ", h("code", {}, String(x.limit))], now: said(x.current),
        proposed: said(x.proposed), why: x.reason};
    }
    case "removal": {
      const said = yesNo("removed now", "kept");
      return {what: ["Node ", String(x.node), of], now: said(x.current), proposed: said(x.proposed), why: x.reason};
    }
    case "unneeded": {
      const said = yesNo("unneeded (its timer runs)", "needed");
      return {what: ["Node ", String(x.node), of], now: said(x.current), proposed: said(x.proposed), why: x.reason};
    }
    case "scaleDownPaused": {
      const said = (v) => (v ? `paused: ${v}` : "not paused");
      return {what: "Scale-down", now: said(x.current), proposed: said(x.proposed), why: null};
    }
    case "clusterHealth": {
      const said = yesNo("healthy", "unhealthy");
      return {what: "Cluster health", now: said(x.current), proposed: said(x.proposed), why: x.reason};
    }
    case "machineDeletion": {
      const said = yesNo("deleted now", "kept");
      return {what: ["Machine ", String(x.machine), of], now: said(x.current),
        proposed: said(x.proposed), why: x.reason};
    }
    default:
      // A kind this page does not know yet (a newer hub): shown as the API says it.
      return {what: String(x.kind), now: showValue(x.current), proposed: showValue(x.proposed), why: x.reason};
  }
}
