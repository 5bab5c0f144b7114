// The dashboard's loop: which page the address asks for (`#/` the fleet,
// `#/clusters/<name>` one cluster, `#/what-if?QUERY` a what-if; the browser's history and
// back button just work), polling the hub's JSON API every few seconds while the tab is
// visible, the header with the hub's status, the fleet-wide banner, and a stale-data warning
// when the API stops answering.

import {h, ago, badge, clock, span} from "./dom.js";
import {renderFleet} from "./fleet.js";
import {renderCluster} from "./cluster.js";
import {closeWhatIf, openWhatIf, updateWhatIf, whatIfQuery} from "./what-if.js";
import {shardingHeader, shardingOf} from "./sharding.js";

const PERIOD_MS = 3000;
const TIMEOUT_MS = 8000;

const state = {
  fleet: null, // the last /api/v1/fleet body
  cluster: null, // the last /api/v1/clusters/<name> body, for the cluster page
  clusterName: null, // whose body `cluster` is
  missing: null, // the cluster page's cluster does not exist (its name)
  okAt: 0, // when the last fetch succeeded (ms)
  error: null, // why the last fetch failed
  timer: 0,
  inflight: null,
};

function route() {
  const query = whatIfQuery(location.hash);
  if (query !== null) return {page: "what-if", query};
  const m = /^#\/clusters\/([^/]+)\/?$/.exec(location.hash);
  if (m) {
    try {
      return {page: "cluster", name: decodeURIComponent(m[1])};
    } catch {
      // A malformed escape: show the fleet rather than fail.
    }
  }
  return {page: "fleet"};
}

async function getJson(path, signal) {
  const r = await fetch(path, {signal, cache: "no-store", headers: {Accept: "application/json"}});
  if (r.status === 404) return {missing: true};
  if (!r.ok) throw new Error(`${path} answered HTTP ${r.status}`);
  return {body: await r.json()};
}

async function refresh() {
  clearTimeout(state.timer);
  if (state.inflight) state.inflight.abort();
  const ctl = new AbortController();
  state.inflight = ctl;
  const timeout = setTimeout(() => ctl.abort(), TIMEOUT_MS);
  const r = route();
  try {
    const [f, c] = await Promise.all([
      getJson("/api/v1/fleet", ctl.signal),
      r.page === "cluster" ? getJson(`/api/v1/clusters/${encodeURIComponent(r.name)}`, ctl.signal) : null,
    ]);
    if (f.missing) throw new Error("/api/v1/fleet answered HTTP 404");
    state.fleet = f.body;
    if (c) {
      state.cluster = c.body || null;
      state.clusterName = r.name;
      state.missing = c.missing ? r.name : null;
    }
    state.okAt = Date.now();
    state.error = null;
  } catch (e) {
    if (ctl.signal.aborted && state.inflight !== ctl) return; // superseded by a newer fetch
    state.error = ctl.signal.aborted ? `no answer within ${TIMEOUT_MS / 1000} s` : e.message;
  } finally {
    clearTimeout(timeout);
  }
  if (state.inflight !== ctl) return;
  state.inflight = null;
  render();
  schedule();
}

function schedule() {
  clearTimeout(state.timer);
  if (!document.hidden) state.timer = setTimeout(refresh, PERIOD_MS);
}

function render() {
  const now = Date.now();
  renderNav();
  renderHub(now);
  renderBanner();
  renderRefresh(now);
  renderPage(now);
}

// The header's links say which page is shown (a cluster's page belongs to the fleet's).
function renderNav() {
  const whatIf = route().page === "what-if";
  const mark = (id, on) => {
    const a = document.getElementById(id);
    if (!a) return;
    if (on) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  };
  mark("nav-fleet", !whatIf);
  mark("nav-what-if", whatIf);
}

function renderHub(now) {
  const ul = document.getElementById("hub");
  const hub = state.fleet && state.fleet.hub;
  if (!hub) return;
  const items = [];
  const sharding = shardingOf(hub);
  // With sharding, the replicas share the clusters instead of electing a leader.
  if (sharding) items.push(...shardingHeader(sharding));
  else if (!hub.leaderElection) items.push(badge("ok", "leading (no leader election)"));
  else if (hub.leading) items.push(badge("ok", "leader"));
  else {
    const holder = hub.leader && hub.leader.holder;
    items.push(badge("idle", holder ? `standby (leader: ${holder})` : "standby"));
  }
  if (hub.dryRun) items.push(badge("warn", "dry run: nothing is written"));
  const reload = hub.lastReload;
  if (reload && reload.ok) items.push(h("span", {title: reload.message}, "config reloaded ", ago(reload.at, now)));
  else if (reload) items.push(badge("bad", `reload refused ${span(now - Date.parse(reload.at))} ago: ${reload.message}`));
  else items.push(h("span", {}, "started ", ago(hub.started, now)));
  ul.replaceChildren(...items.map((i) => h("li", {}, i)));
}

// The fleet-wide verdict, when the API gives one (older hubs do not).
function renderBanner() {
  const el = document.getElementById("banner");
  const f = state.fleet && state.fleet.fleet;
  if (!f || f.state !== "degraded") {
    el.hidden = true;
    el.replaceChildren();
    return;
  }
  el.hidden = false;
  el.setAttribute("role", "alert");
  el.replaceChildren(h("strong", {}, "Fleet degraded: "), f.reason || "no reason given",
    f.scaleDownPaused ? h("span", {class: "note"}, " Scale-down is paused across the fleet.") : null);
}

// The state of the data (live, paused, stale) in a live region, announced when it changes;
// the time of the data beside it, not announced at every poll.
function renderRefresh(now) {
  document.body.classList.toggle("stale", Boolean(state.error));
  document.getElementById("refresh").classList.toggle("error", Boolean(state.error));
  let said;
  let time;
  if (state.error) {
    said = `${state.okAt ? "Stale: c" : "C"}annot reach the hub (${state.error}); retrying.`;
    time = state.okAt ? `Showing data from ${clock(state.okAt)}, ${span(now - state.okAt)} old.` : "";
  } else {
    said = document.hidden ? "Paused while the tab is hidden." : "";
    time = `Updated ${clock(state.okAt)}`;
  }
  const live = document.getElementById("refresh-state");
  if (live.textContent !== said) live.textContent = said;
  document.getElementById("refresh-time").textContent = time;
}

// Open <details>, by key, kept across refreshes.
const open = new Set();

function renderPage(now) {
  const main = document.getElementById("main");
  const r = route();
  if (r.page === "what-if") {
    renderWhatIf(main, r.query);
    return;
  }
  if (main.dataset.page === "what-if") closeWhatIf();
  main.dataset.page = r.page;
  let content;
  if (!state.fleet) {
    content = [h("p", {class: "notice"}, state.error ? "No data yet." : "Loading…")];
  } else if (r.page === "cluster") {
    content = renderCluster({name: r.name, body: state.clusterName === r.name ? state.cluster : null,
      missing: state.missing === r.name, sharding: shardingOf(state.fleet.hub), now, open});
  } else {
    content = renderFleet(state.fleet, now);
  }
  // Keep keyboard focus where it was across a refresh (the same link, toggle or heading).
  const focused = main.contains(document.activeElement) ? focusKey(document.activeElement) : null;
  main.replaceChildren(...content);
  if (focused) {
    const again = [...main.querySelectorAll("a[href], summary, h2")].find((e) => focusKey(e) === focused);
    if (again) again.focus({preventScroll: true});
  }
  for (const d of main.querySelectorAll("details[data-key]")) {
    d.addEventListener("toggle", () => {
      if (d.open) open.add(d.dataset.key);
      else open.delete(d.dataset.key);
    });
  }
}

// The what-if page is built once per address (a refresh must not wipe what is being typed);
// a refresh only brings the list of clusters up to date.
function renderWhatIf(main, query) {
  const names = state.fleet ? (state.fleet.clusters || []).map((c) => c.name) : null;
  if (main.dataset.page === "what-if" && main.dataset.query === query) {
    updateWhatIf(names);
    return;
  }
  main.dataset.page = "what-if";
  main.dataset.query = query;
  main.replaceChildren(...openWhatIf(query, names));
}

function focusKey(el) {
  if (el.tagName === "A") return `a ${el.getAttribute("href")}`;
  if (el.tagName === "SUMMARY") return `summary ${el.parentElement.dataset.key}`;
  if (el.tagName === "H2") return "h2";
  return null;
}

function title() {
  const r = route();
  if (r.page === "cluster") return `${r.name} · fleetscaler`;
  if (r.page === "what-if") return "What if · fleetscaler";
  return "fleetscaler";
}

function navigated() {
  // Show what is known at once (the fleet's data, or a loading line), then fetch.
  renderNav();
  renderPage(Date.now());
  document.title = title();
  const heading = document.querySelector("#main h2");
  if (heading) heading.focus({preventScroll: true});
  window.scrollTo(0, 0);
  refresh();
}

window.addEventListener("hashchange", navigated);
document.addEventListener("visibilitychange", () => {
  if (document.hidden) {
    clearTimeout(state.timer);
    renderRefresh(Date.now());
  } else {
    refresh();
  }
});

document.title = title();
refresh();
