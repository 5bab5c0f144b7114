// Helpers shared by the pages: building elements (text always goes in as text nodes, never
// as markup), times and ages, a cluster's health as a colour class plus words, how actions,
// pods' outcomes and shared capacity failures read, and the inline SVG sparklines.

const SVG_NS = "http://www.w3.org/2000/svg";

function append(parent, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    parent.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// h("a", {href: "#/"}, "text", child, ...): an element with attributes and children.
// Attribute values and strings are set as data; nothing is parsed as HTML.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  append(el, children);
  return el;
}

// A <td> with the column's name, which the narrow layout shows before the value.
export function cell(label, ...children) {
  return h("td", {"data-label": label}, ...children);
}

export function plural(n, one, many) {
  return `${n} ${n === 1 ? one : many || one + "s"}`;
}

// "12 s", "4 min", "2 h 5 min", "3 d".
export function span(ms) {
  const sec = Math.max(0, Math.round(ms / 1000));
  if (sec < 60) return `${sec} s`;
  const min = Math.floor(sec / 60);
  if (min < 60) return `${min} min`;
  const hours = Math.floor(min / 60);
  if (hours < 48) return min % 60 ? `${hours} h ${min % 60} min` : `${hours} h`;
  return `${Math.floor(hours / 24)} d`;
}

// "12 s ago" (or "in 4 min" for a time to come), in a <time> with the full date on hover.
export function ago(iso, now) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return h("span", {}, "–");
  const d = now - t;
  const text = d >= -1000 ? `${span(d)} ago` : `in ${span(-d)}`;
  return h("time", {datetime: iso, title: new Date(t).toLocaleString()}, text);
}

export function clock(ms) {
  return new Date(ms).toLocaleTimeString();
}

// "14:03:05 (in 4 min)": a time to come, as a clock time and how far off it is.
export function until(iso, now) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return h("span", {}, "–");
  const far = t - now > 1000 ? `in ${span(t - now)}` : "ended";
  return h("time", {datetime: iso, title: new Date(t).toLocaleString()}, `${clock(t)} (${far})`);
}

// A node group's id is Kind.group/namespace/name: the name is what people recognise.
export function groupName(id) {
  const parts = String(id).split("/");
  return parts[parts.length - 1];
}

export function groupLabel(id) {
  const parts = String(id).split("/");
  const name = parts.pop();
  return h("span", {class: "group", title: id}, h("span", {class: "name"}, name),
    parts.length ? h("span", {class: "kind"}, parts.join(" · ")) : null);
}

// A cluster's health: a level (which only picks the colour) and words that say the same.
export function health(c) {
  switch (c.phase) {
    case "failed":
      return {level: "bad", text: "failed", detail: c.message};
    case "misconfigured":
      // A mistake in fleet.toml or a kubeconfig: to fix, but not an outage.
      return {level: "warn", text: "misconfigured", detail: c.message};
    case "connecting":
    case "syncing":
      return {level: "idle", text: c.phase, detail: c.message};
    case "stopped":
      return {level: "idle", text: "stopped", detail: c.message};
    case "running":
      break;
    default:
      return {level: "idle", text: String(c.phase), detail: c.message};
  }
  if (!c.lastPass) return {level: "idle", text: "waiting for a pass", detail: c.message};
  if (c.lastPass.skipped) return {level: "warn", text: "passes skipped", detail: c.lastPass.skipped};
  if (!c.nodesHealthy) return {level: "warn", text: "unhealthy", detail: c.nodesHealthReason};
  return {level: "ok", text: "healthy", detail: null};
}

// The link to a cluster's page.
export function clusterLink(name) {
  return h("a", {href: `#/clusters/${encodeURIComponent(name)}`}, String(name));
}

// What a capacity failure is about: `m6i.2xlarge in us-east-1a`, as the hub says it.
export function capacityKey(key) {
  if (!key || !key.instanceType) return "an instance type";
  const place = key.zone || key.region;
  return place ? `${key.instanceType} in ${place}` : String(key.instanceType);
}

// How far a shared failure reaches: the same instance type in the zone, or in the region.
export function failureReach(f) {
  const key = f.key || {};
  const type = key.instanceType || "the same instance type";
  if (f.scope === "region" && key.region) return `${type} anywhere in ${key.region}`;
  return key.zone ? `${type} in ${key.zone}` : type;
}

// `m6i.2xlarge in us-east-1a failed in cluster sim-1 (group …, machine …) 2 min ago`, the
// cluster a link to its page.
export function failureHeadline(f, now) {
  const where = [f.nodeGroup ? `group ${groupName(f.nodeGroup)}` : null,
    f.machine ? `machine ${f.machine}` : null].filter(Boolean);
  return [h("strong", {}, capacityKey(f.key)), " failed in cluster ",
    f.cluster ? clusterLink(f.cluster) : "(unknown)",
    where.length ? ` (${where.join(", ")})` : "", " ", ago(f.at, now)];
}

export function badge(level, text) {
  return h("span", {class: `badge ${level}`}, h("span", {class: "dot", "aria-hidden": "true"}), text);
}

const MACHINE_DELETION = {failed: "failed", unregistered: "never registered"};

// One line for an action, as the hub's terminal view says it.
export function describeAction(a) {
  const g = a.group ? groupName(a.group) : "";
  switch (a.type) {
    case "scaleUp": return `scale up ${g} ${a.from} → ${a.to}`;
    case "fixTargetSize": return `lower the target of ${g} ${a.from} → ${a.to}`;
    case "deleteMachine": return `delete machine ${a.machine} (${MACHINE_DELETION[a.why] || a.why})`;
    case "markNode": return `taint node ${a.node} for removal`;
    case "removeNode": return `remove node ${a.node}`;
    case "clearStaleTaint": return `clear a stale taint on node ${a.node}`;
    case "finishDecrement": return `finish the interrupted removal of machine ${a.machine}`;
    default: return String(a.type);
  }
}

// A pending pod's outcome in a plan: [level, words].
export const POD_OUTCOMES = {
  scaleUp: ["ok", "scale-up for it"],
  fitsExisting: ["ok", "fits an existing node"],
  fitsUpcoming: ["ok", "fits a node being added"],
  noScaleUp: ["warn", "stuck: no scale-up helps"],
  belowPriorityCutoff: ["idle", "below the priority cutoff"],
};

export function podOutcome(outcome) {
  return POD_OUTCOMES[outcome] || ["idle", String(outcome)];
}

// Where a setting's value comes from, as `fleetscaler check-config` names it.
const SOURCES = {
  default: "default",
  fleetDefaults: "fleet defaults",
  clusterAutoscaler: "ClusterAutoscaler",
  clusterOverrides: "cluster overrides",
  flags: "flags",
};

export function settingSource(source) {
  return SOURCES[source] || String(source);
}

// A setting's value as text (strings bare, the rest as JSON).
export function showValue(value) {
  if (value === null || value === undefined) return "–";
  if (typeof value === "string") return value;
  return JSON.stringify(value);
}

// {level, text, detail} of an action's outcome.
export function outcome(o) {
  switch (o.result) {
    case "done": return {level: "ok", text: "done", detail: o.detail};
    case "skipped": return {level: "idle", text: "skipped", detail: o.reason};
    case "failed": return {level: "bad", text: `failed (${o.category})`, detail: o.error};
    default: return {level: "idle", text: String(o.result), detail: ""};
  }
}

// An inline SVG line of `key` over a cluster's history (oldest first), x by time. With
// `zero`, the scale starts at 0 (pending pods); else at the lowest value (nodes), so that
// a change of one node in fifty still shows.
export function sparkline(history, key, what, {zero = false, width = 120, height = 28} = {}) {
  const points = (history || []).map((p) => ({t: Date.parse(p.at), v: Number(p[key]) || 0}));
  const label = sparkLabel(points, what);
  const svg = s("svg", {class: "spark", width, height, viewBox: `0 0 ${width} ${height}`,
    role: "img", "aria-label": label}, s("title", {}, label));
  if (points.length === 0) return svg;
  const pad = 3;
  const vs = points.map((p) => p.v);
  const lo = zero ? 0 : Math.min(...vs);
  const hi = Math.max(...vs, lo + 1);
  const t0 = points[0].t;
  const dt = points[points.length - 1].t - t0;
  const x = (p, i) => pad + (width - 2 * pad) *
    (dt > 0 ? (p.t - t0) / dt : points.length > 1 ? i / (points.length - 1) : 1);
  const y = (v) => height - pad - (height - 2 * pad) * (v - lo) / (hi - lo);
  const xy = points.map((p, i) => `${x(p, i).toFixed(1)},${y(p.v).toFixed(1)}`);
  svg.append(s("line", {class: "base", x1: pad, x2: width - pad, y1: y(lo), y2: y(lo)}));
  if (points.length > 1) svg.append(s("polyline", {points: xy.join(" ")}));
  const last = points[points.length - 1];
  svg.append(s("circle", {cx: x(last, points.length - 1), cy: y(last.v), r: 2}));
  return svg;
}

function sparkLabel(points, what) {
  if (points.length === 0) return `${what}: no passes yet`;
  const vs = points.map((p) => p.v);
  const took = span(points[points.length - 1].t - points[0].t);
  return `${what} over the last ${plural(points.length, "pass", "passes")} (${took}): ` +
    `from ${vs[0]} to ${vs[vs.length - 1]}, between ${Math.min(...vs)} and ${Math.max(...vs)}`;
}
