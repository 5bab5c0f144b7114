// The what-if page, `#/what-if?set=KEY=VALUE&cluster=NAME&clusterAutoscaler=YAML`: a form for
// a proposed change of settings, and each cluster's answer from `GET /api/v1/what-if` (read
// only: the hub runs both passes on its caches and writes nothing). The query after `?` in
// the address is the very query the API gets, so a what-if is shared as a link and the back
// button returns to the previous one; opening such a link evaluates it.
//
// The page is built once per address and never rebuilt by the dashboard's polling, so what
// is being typed stays; only the list of clusters follows the fleet.

import {h, clock} from "./dom.js";
import {renderAnswer} from "./what-if-answer.js";

// The hub waits up to 20 s for a cluster, within its request deadline (30 s by default).
const TIMEOUT_MS = 45000;

const WORDS = {
  400: "The hub refused the proposal",
  404: "No such cluster",
  429: "Another what-if is being evaluated",
};

let page = null; // the page on screen: its form's parts, its answer's place, its fetch

// The query of a what-if address (`#/what-if?QUERY`), or null for another page.
export function whatIfQuery(hash) {
  const m = /^#\/what-if\/?(?:\?(.*))?$/.exec(hash);
  return m ? m[1] || "" : null;
}

// The page for `query`, evaluated at once when it proposes something.
export function openWhatIf(query, names) {
  closeWhatIf();
  const params = new URLSearchParams(query);
  const sets = params.getAll("set");
  const asked = params.getAll("cluster");
  const ca = params.get("clusterAutoscaler") || "";
  const settings = h("textarea", {id: "what-if-set", name: "set", rows: 4, spellcheck: "false",
    autocapitalize: "off", "aria-describedby": "what-if-set-hint",
    placeholder: "max_nodes_total=30\ndefaults.scale_down_utilization_threshold=0.4"});
  settings.value = sets.join("\n");
  const yaml = h("textarea", {id: "what-if-ca", name: "clusterAutoscaler", rows: 10,
    spellcheck: "false", autocapitalize: "off", "aria-describedby": "what-if-ca-hint",
    placeholder: "apiVersion: autoscaling.openshift.io/v1\nkind: ClusterAutoscaler\n" +
      "metadata:\n  name: default\nspec:\n  resourceLimits:\n    maxNodesTotal: 30"});
  yaml.value = ca;
  const clusters = h("div", {class: "choices"});
  const button = h("button", {type: "submit"}, "Evaluate");
  const status = h("p", {class: "what-if-status", role: "status", "aria-live": "polite"});
  const answer = h("div", {id: "what-if-answer"});
  const form = h("form", {class: "what-if", id: "what-if-form", "aria-labelledby": "what-if-title"},
    h("div", {class: "field"},
      h("label", {for: "what-if-set"}, "Settings to try, one ", h("code", {}, "KEY=VALUE"), " per line"),
      settings,
      h("p", {class: "detail", id: "what-if-set-hint"}, "A bare key (",
        h("code", {}, "max_nodes_total=30"), ") applies above every layer, as ",
        h("code", {}, "fleetscaler plan --set"), " does; ", h("code", {}, "defaults.KEY"),
        " proposes fleet.toml's [defaults], under each cluster's ClusterAutoscaler and overrides.")),
    h("fieldset", {class: "field"},
      h("legend", {}, "Clusters (none ticked: every cluster)"), clusters),
    h("details", {class: "field", open: ca ? true : null},
      h("summary", {}, "A ClusterAutoscaler to try (optional)"),
      h("label", {for: "what-if-ca", class: "visually-hidden"}, "ClusterAutoscaler YAML"),
      yaml,
      h("p", {class: "detail", id: "what-if-ca-hint"}, "As ", h("code", {}, "oc apply -f"),
        " would take it: one ClusterAutoscaler named default, YAML or JSON. It stands for each " +
        "cluster's own.")),
    h("p", {class: "actions"}, button, " ", status));
  page = {settings, yaml, clusters, button, status, answer, names: undefined, asked, ctl: null};
  showClusters(names);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    submit();
  });
  if (sets.length || ca.trim()) evaluate(query);
  return [
    h("h2", {tabindex: "-1", id: "what-if-title"}, "What if"),
    h("p", {class: "intro"}, "What each cluster would decide now with other settings: its " +
      "scale-ups, removals and pending pods as its last data stands, with the settings in " +
      "force and with those proposed. Nothing is written."),
    form,
    answer,
  ];
}

// Keeps the cluster list in step with the fleet (ticks kept); nothing else is redrawn.
export function updateWhatIf(names) {
  if (page) showClusters(names);
}

// Leaving the page: its evaluation, if any, is dropped.
export function closeWhatIf() {
  if (page && page.ctl) page.ctl.abort();
  page = null;
}

// `names` is null until the fleet's data has come.
function showClusters(names) {
  // Clusters named by the address but unknown to the fleet stay, ticked: the API says so.
  const all = names ? [...new Set([...names, ...page.asked])] : null;
  const key = all ? all.join("\n") : null;
  if (page.names !== undefined && key === page.names) return;
  const ticked = new Set(page.names ? checked() : page.asked);
  page.names = key;
  let content;
  if (!all) content = [h("span", {class: "muted"}, "Loading the clusters…")];
  else if (all.length === 0) content = [h("span", {class: "muted"}, "No clusters are configured.")];
  else {
    content = all.map((name) => h("label", {class: "choice"},
      h("input", {type: "checkbox", name: "cluster", value: name, checked: ticked.has(name)}),
      " ", name));
  }
  page.clusters.replaceChildren(...content);
}

function checked() {
  return [...page.clusters.querySelectorAll("input[name=cluster]:checked")].map((i) => i.value);
}

// The form as the API's query: one set= per non-empty line, the clusters ticked, the YAML.
function query() {
  const q = new URLSearchParams();
  for (const line of page.settings.value.split("\n")) {
    if (line.trim()) q.append("set", line.trim());
  }
  for (const name of checked()) q.append("cluster", name);
  if (page.yaml.value.trim()) q.append("clusterAutoscaler", page.yaml.value);
  return q.toString();
}

// A new address evaluates it (app.js opens the page again); the same one is evaluated again.
function submit() {
  const q = query();
  const before = location.hash;
  if (q) location.hash = `#/what-if?${q}`;
  if (location.hash === before) evaluate(q);
}

async function evaluate(q) {
  const mine = page;
  if (mine.ctl) mine.ctl.abort();
  const ctl = new AbortController();
  mine.ctl = ctl;
  const timeout = setTimeout(() => ctl.abort(), TIMEOUT_MS);
  mine.button.disabled = true;
  mine.answer.setAttribute("aria-busy", "true");
  mine.status.textContent = "Evaluating on each cluster…";
  let shown;
  try {
    const r = await fetch(`/api/v1/what-if?${q}`,
      {signal: ctl.signal, cache: "no-store", headers: {Accept: "application/json"}});
    if (r.ok) {
      const body = await r.json();
      shown = {content: renderAnswer(body), said: `Evaluated at ${clock(Date.now())}.`};
    } else {
      // The API's own words: they name the assignment or the cluster that is wrong.
      const text = (await r.text()).trim();
      shown = refused(WORDS[r.status] || `The hub answered HTTP ${r.status}`, r.status, text);
    }
  } catch (e) {
    if (mine.ctl !== ctl) return; // superseded, or the page was left
    const why = ctl.signal.aborted ? `no answer within ${TIMEOUT_MS / 1000} s` : e.message;
    shown = refused("Cannot reach the hub", null, why);
  } finally {
    clearTimeout(timeout);
  }
  if (mine.ctl !== ctl || page !== mine) return;
  mine.ctl = null;
  mine.button.disabled = false;
  mine.answer.removeAttribute("aria-busy");
  mine.status.textContent = shown.said;
  mine.answer.replaceChildren(...shown.content);
}

function refused(title, status, text) {
  return {
    said: status ? `${title} (HTTP ${status}).` : `${title}.`,
    content: [h("section", {class: "error-box", role: "alert", "aria-labelledby": "what-if-error"},
      h("h3", {id: "what-if-error"}, title, status ? h("small", {}, ` HTTP ${status}`) : null),
      h("p", {class: "api-error"}, text || "(no message)"))],
  };
}
