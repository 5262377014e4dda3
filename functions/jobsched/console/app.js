// The jobsched console: hash-routed views over the API (api.js), refreshed by polling. No framework:
// `h` builds DOM nodes (text is always set as text, never parsed as HTML).
import * as api from "./api.js";
import {
  describeSchedule, healthOwnerRows, latenessByPriority, percent, perMinute, quantile, runStats, seconds, when,
} from "./describe.js";

const POLL_MS = 5000;
const RUNS_PER_JOB = 50; // the jobs page's statistics are over each job's newest runs, at most this many
const STATUSES = ["queued", "running", "retrying", "succeeded", "dead", "skipped", "cancelled"];
const CANCELLABLE = ["queued", "running", "retrying"];
const main = document.getElementById("main");
let features = {};
let current = null; // the mounted view: {refresh()}
let generation = 0; // bumped on each navigation: late answers of a previous view are dropped

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Replace a node's children (null, undefined and false are left out; arrays are spread).
function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

const statusBadge = (status) => (status ? h("span", { class: `status ${status}` }, status) : "–");
const jobLink = (job) => h("a", { href: `#/jobs/${encodeURIComponent(job.id)}` }, job.name);

// A cell given as { wrap: content } wraps its text (an empty content too: never shown as "[object Object]").
const wrapped = (cell) => cell !== null && typeof cell === "object" && !(cell instanceof Node) && "wrap" in cell;

function table(columns, rows, className = "responsive") {
  return h("div", { class: "scroll" }, h("table", { class: className },
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", {}, c)))),
    h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((cell, i) =>
      h("td", { "data-label": columns[i], class: wrapped(cell) ? "wrap" : null }, wrapped(cell) ? cell.wrap : cell)))))));
}

// --- errors, token, confirmation ---------------------------------------------------------------
const errorBox = document.getElementById("error");
function showError(error) {
  errorBox.textContent = error instanceof api.ApiError ? error.toString() : String(error);
  errorBox.hidden = false;
}
const clearError = () => { errorBox.hidden = true; errorBox.textContent = ""; };

function loginView(message) {
  current = null;
  document.getElementById("signout").hidden = true;
  const input = h("input", { id: "token", type: "password", autocomplete: "off", placeholder: "dev-… or a --tokens token" });
  fill(main, h("form", { class: "card login", onsubmit: (event) => {
    event.preventDefault();
    api.token.set(input.value.trim());
    clearError();
    route();
  } },
  h("h1", {}, "Sign in"),
  h("p", { class: "muted" }, message || "This API wants a bearer token: local mode prints the dev token at start (also in .jobsched/dev-token)."),
  input, h("button", { class: "primary", type: "submit", id: "sign-in" }, "Open the console")));
  input.focus();
}

function confirmAction(text, { reason = false } = {}) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-reason-label").hidden = !reason;
  document.getElementById("confirm-reason").value = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"
      ? { reason: document.getElementById("confirm-reason").value.trim() } : null), { once: true });
    dialog.showModal();
  });
}

async function act(text, call, options = {}) {
  const answer = await confirmAction(text, options);
  if (!answer) return;
  try {
    await call(answer);
    clearError();
  } catch (error) {
    showError(error);
  }
  if (current) await refresh(current, generation);
}

// Run `work` for each item, `limit` at a time.
async function pooled(items, limit, work) {
  const results = new Array(items.length);
  let next = 0;
  const worker = async () => { while (next < items.length) { const i = next++; results[i] = await work(items[i]); } };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

// --- jobs --------------------------------------------------------------------------------------
// A job's labels as `key=value` terms, by key (the CLI's `-l` spelling).
const labelTerms = (job) => Object.entries(job.labels || {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => `${k}=${v}`);
const labelChips = (job) => labelTerms(job).map((term) => h("span", { class: "label" }, term));

// Whether the job carries every label of the filter text: `key=value` terms (all must match) or bare keys
// (the job has that label), separated by spaces or commas.
function labelsMatch(job, text) {
  const labels = job.labels || {};
  return text.split(/[\s,]+/).filter(Boolean).every((term) => {
    const at = term.indexOf("=");
    return at < 0 ? term in labels : labels[term.slice(0, at)] === term.slice(at + 1);
  });
}

function jobsView() {
  const filter = { name: "", state: "all", labels: "" };
  const body = h("div", { id: "jobs" });
  let rows = [];
  const matches = ({ job, stats }) => job.name.toLowerCase().includes(filter.name.toLowerCase()) && labelsMatch(job, filter.labels) && (
    filter.state === "all" || (filter.state === "paused" && job.paused) || (filter.state === "active" && !job.paused)
    || (filter.state === "dead" && stats.last === "dead"));
  const render = () => {
    const shown = rows.filter(matches);
    if (!rows.length) {
      fill(body, h("p", { class: "muted" }, "No jobs yet: create one with `jobsched jobs create` or POST /jobs."));
      return;
    }
    fill(body, shown.length
      ? table(["Name", "Schedule", "Next fire", "State", "Last run", "Success", "Lateness p50 / p99", "Runs"],
        shown.map(({ job, stats }) => [
          labelTerms(job).length ? h("span", {}, jobLink(job), h("br"), h("span", { class: "labels" }, labelChips(job))) : jobLink(job),
          job.schedule === null && job.after
            ? { wrap: h("span", {}, "after ", h("a", { href: `#/jobs/${encodeURIComponent(job.after.job)}` }, nameOf(rows, job.after.job))) }
            : { wrap: h("span", {}, h("code", {}, job.schedule), h("br"), h("span", { class: "muted" },
              describeSchedule(job.schedule, job.timezone) || `in ${job.timezone}`)) },
          job.paused ? "– (paused)" : when(job.next_run_at),
          job.paused ? h("span", {}, statusBadge("paused"), job.paused_reason ? ` ${job.paused_reason}` : "") : statusBadge("active"),
          statusBadge(stats.last),
          percent(stats.successRate),
          `${seconds(stats.p50)} / ${seconds(stats.p99)}`,
          String(stats.count),
        ]))
      : h("p", { class: "muted" }, "No job matches the filter."));
  };
  const nameInput = h("input", { id: "filter-name", type: "search", placeholder: "Filter by name",
    oninput: (e) => { filter.name = e.target.value; render(); } });
  const stateSelect = h("select", { id: "filter-state", onchange: (e) => { filter.state = e.target.value; render(); } },
    h("option", { value: "all" }, "All states"), h("option", { value: "active" }, "Active"),
    h("option", { value: "paused" }, "Paused"), h("option", { value: "dead" }, "Last run dead"));
  const labelInput = h("input", { id: "filter-label", type: "search", placeholder: "Labels, e.g. team=billing tier=gold",
    oninput: (e) => { filter.labels = e.target.value; render(); } });
  fill(main, h("h1", {}, "Jobs"), h("div", { class: "toolbar" }, nameInput, labelInput, stateSelect), body,
    h("p", { class: "muted" }, `Last run, success rate (succeeded of succeeded + dead) and start lateness are over each job's newest ${RUNS_PER_JOB} runs.`));
  return {
    async refresh() {
      const jobs = await api.listJobs();
      const runs = await pooled(jobs, 4, (job) => api.listRuns(job.id, { max: RUNS_PER_JOB }));
      rows = jobs.map((job, i) => ({ job, stats: runStats(runs[i]) }));
      render();
    },
  };
}

// --- one job ---------------------------------------------------------------------------------
function nameOf(rows, jobId) {
  const found = rows.find(({ job }) => job.id === jobId);
  return found ? found.job.name : jobId;
}

// A job's chain (design §2.1): its upstream job -> this job -> its downstream jobs, each a link.
function chainView(job) {
  const link = (other) => h("a", { href: `#/jobs/${encodeURIComponent(other.id)}` }, other.name);
  const upstream = job.upstream ? [h("span", { class: "chain-upstream" }, link(job.upstream)), " → "] : [];
  const downstream = (job.downstream || []).map((other) => h("span", { class: "chain-downstream", title: `on ${(other.on || []).join(", ")}` }, link(other)));
  if (!upstream.length && !downstream.length) return null;
  return h("div", { class: "card", id: "chain" }, h("div", { class: "muted" }, "Chain"),
    h("div", {}, ...upstream, h("strong", {}, job.name),
      ...(downstream.length ? [" → ", ...downstream.flatMap((item, i) => (i ? [", ", item] : [item]))] : [])));
}

function timeline(runs, fires) {
  const marks = runs.slice(0, 60).reverse().map((run) => {
    const recovered = run.status === "succeeded" && run.attempt > 1;
    const title = `${run.scheduled_for} ${run.status}${recovered ? ` after ${run.attempt} tries` : ""}${run.error ? `: ${run.error}` : ""}`;
    return h("a", { class: `mark ${recovered ? "recovered" : run.status}`, title,
      href: `#/jobs/${encodeURIComponent(run.job_id)}/runs/${encodeURIComponent(run.id)}` });
  });
  const next = fires.map((fire) => h("span", { class: "mark next", title: `next: ${fire.scheduled_for}${fire.note ? ` (${fire.note})` : ""}` }));
  const legend = [["succeeded", "--succeeded"], ["failed then succeeded", "--retrying"], ["running", "--running"],
    ["retrying", "--retrying"], ["dead", "--dead"], ["skipped", "--skipped"], ["queued", "--queued"],
    ["cancelled", "--cancelled"]];
  return h("div", {}, h("div", { class: "timeline", id: "timeline" }, marks, next),
    h("div", { class: "legend" }, legend.map(([label, color]) => h("span", { style: `--c: var(${color})` }, label)),
      next.length ? h("span", { style: "--c: transparent" }, "dashed: next fires") : null));
}

function specList(fields, skip = []) {
  return h("dl", { class: "spec" }, Object.entries(fields).filter(([key]) => !skip.includes(key)).flatMap(([key, value]) => [
    h("dt", {}, key),
    h("dd", {}, value === null || value === undefined ? "–"
      : typeof value === "object" ? h("pre", {}, JSON.stringify(value, null, 2)) : String(value)),
  ]));
}

// A run's lateness: its first try's, and on a run tried more than once, the last try's too (the one that ended a
// dead run).
const lateness = (run) => (run.last_try_lateness_ms === null || run.last_try_lateness_ms === undefined
  ? seconds(run.lateness_ms) : `${seconds(run.lateness_ms)} (last try ${seconds(run.last_try_lateness_ms)})`);

// `jobNames`: job id -> name, so a listing across jobs names each run's job (a deleted job by its id).
function runsTable(runs, { withJob = false, jobNames = {} } = {}) {
  const job = (run) => (withJob ? [h("a", { href: `#/jobs/${encodeURIComponent(run.job_id)}`, title: run.job_id },
    jobNames[run.job_id] || run.job_id)] : []);
  return table([...(withJob ? ["Job"] : []), "Scheduled for", "Status", "Kind", "Try", "Lateness", "Started", "Finished", "Worker", "Error"],
    runs.map((run) => [
      ...job(run),
      h("a", { href: `#/jobs/${encodeURIComponent(run.job_id)}/runs/${encodeURIComponent(run.id)}` }, run.scheduled_for),
      h("span", {}, statusBadge(run.status), run.skipped_count ? ` ×${run.skipped_count}` : ""),
      run.kind, String(run.attempt ?? 0), lateness(run), when(run.started_at), when(run.finished_at),
      run.worker || "–", { wrap: run.error || "" },
    ]));
}

function jobView(id) {
  const head = h("div");
  const body = h("div");
  fill(main, head, body);
  return {
    async refresh() {
      const [job, runs, fires, events] = await Promise.all([
        api.getJob(id), api.listRuns(id, { max: 100 }),
        features.fires ? api.listFires(id, 10).then((page) => (Array.isArray(page) ? page : page.items || [])) : [],
        features.events ? api.listEvents(id) : [],
      ]);
      const stats = runStats(runs);
      const reason = features.pauseReason;
      fill(head, 
        h("h1", {}, job.name, " ", job.paused ? statusBadge("paused") : statusBadge("active")),
        labelTerms(job).length ? h("p", { id: "labels", class: "labels" }, labelChips(job)) : null,
        job.paused && job.paused_reason ? h("p", { id: "paused-reason" }, `Paused by ${job.paused_by || "?"} at ${job.paused_at || "?"}: ${job.paused_reason}`) : null,
        h("div", { class: "toolbar" },
          job.paused
            ? h("button", { id: "resume", onclick: () => act(`Resume ${job.name}? It continues with its first fire from now; fires of the paused time do not run (backfill runs them).`, () => api.resumeJob(id)) }, "Resume")
            : h("button", { id: "pause", onclick: () => act(`Pause ${job.name}? Its fires do not run while it is paused, and are not caught up on resume.`, (a) => api.pauseJob(id, reason ? a.reason : undefined), { reason }) }, "Pause"),
          h("button", { id: "trigger", class: "primary", onclick: () => act(`Trigger ${job.name} now, outside its schedule?`, () => api.triggerJob(id, api.newKey())) }, "Trigger now"),
          h("button", { id: "delete", class: "danger", onclick: () => act(`Delete ${job.name}? No new runs; its history is kept until retention.`, async () => { await api.deleteJob(id); location.hash = "#/jobs"; }) }, "Delete")),
      );
      fill(body, 
        h("div", { class: "stats" },
          job.schedule === null
            ? h("div", { class: "card" }, h("div", { class: "muted" }, "Runs after"), h("div", {}, job.upstream ? h("a", { href: `#/jobs/${encodeURIComponent(job.upstream.id)}` }, job.upstream.name) : "– (its upstream was deleted)"),
              h("div", { class: "muted" }, `on ${(job.after ? job.after.on : []).join(", ")}`))
            : h("div", { class: "card" }, h("div", { class: "muted" }, "Schedule"), h("div", {}, h("code", {}, job.schedule)),
              h("div", { class: "muted" }, describeSchedule(job.schedule, job.timezone) || `in ${job.timezone}`)),
          h("div", { class: "card" }, h("div", { class: "muted" }, "Next fire"), h("div", { id: "next-fire" }, job.paused ? "– (paused)" : when(job.next_run_at))),
          h("div", { class: "card" }, h("div", { class: "muted" }, "Priority"), h("div", { id: "priority", class: "value" }, job.priority || "normal")),
          h("div", { class: "card" }, h("div", { class: "muted" }, "Success"), h("div", { class: "value" }, percent(stats.successRate))),
          h("div", { class: "card" }, h("div", { class: "muted" }, "Lateness p50 / p99"), h("div", { class: "value" }, `${seconds(stats.p50)} / ${seconds(stats.p99)}`))),
        chainView(job),
        h("h2", {}, `Recent runs (${runs.length})`), timeline(runs, fires),
        priorityForm(id, job),
        features.backfill ? backfillForm(id) : null,
        h("h2", {}, "Runs"), runs.length ? runsTable(runs) : h("p", { class: "muted" }, "No runs yet."),
        features.events ? [h("h2", {}, "Events"), table(["At", "Event", "Actor", "Detail"], events.map((e) =>
          [e.at || e.time || "", e.type || e.kind || "", e.actor || "", { wrap: JSON.stringify(e.fields || e.detail || "") }]))] : null,
        h("h2", {}, "Spec"), h("div", { class: "card" }, specList(job, ["name"])),
      );
    },
  };
}

// The job's priority: among fires due at the same time, high ones are sent first, low ones last.
function priorityForm(id, job) {
  const current = job.priority || "normal";
  const select = h("select", { id: "priority-select" },
    ...["high", "normal", "low"].map((p) => h("option", { value: p, selected: p === current }, p)));
  return h("div", {}, h("h2", {}, "Priority"), h("div", { class: "toolbar" }, select,
    h("button", { id: "set-priority", onclick: () => act(`Set ${job.name}'s priority to ${select.value}? Among fires due at the same time, high ones go first, low ones last.`,
      () => api.updateJob(id, { priority: select.value })) }, "Set priority")));
}

function backfillForm(id) {
  const start = h("input", { id: "backfill-start", placeholder: "start (ISO 8601)" });
  const end = h("input", { id: "backfill-end", placeholder: "end (ISO 8601, exclusive)" });
  return h("div", {}, h("h2", {}, "Backfill"), h("div", { class: "toolbar" }, start, end,
    h("button", { id: "backfill", onclick: () => act(`Create runs for every fire in [${start.value}, ${end.value})?`,
      () => api.backfill(id, start.value, end.value, api.newKey())) }, "Backfill")));
}

// --- one run -----------------------------------------------------------------------------------
function runView(id, runId) {
  const box = h("div");
  fill(main, box);
  return {
    async refresh() {
      const job = await api.getJob(id);
      let run;
      if (features.runDetail) run = await api.getRun(id, runId);
      else run = (await api.listRuns(id, { max: 1000 })).find((r) => r.id === runId);
      if (!run) throw new api.ApiError(404, "not_found", `no run ${runId} among the newest 1000 runs of ${job.name}`);
      const retry = features.retry && (run.status === "dead" || run.status === "skipped");
      const cancel = features.cancel && CANCELLABLE.includes(run.status);
      const { attempts, previous_attempts: previous, ...fields } = run;
      const triesTable = (tries) => table(["Try", "Started", "Finished", "Worker", "Error", "Output"],
        tries.map((a) => [String(a.attempt), when(a.started_at), when(a.finished_at), a.worker || "–",
          { wrap: a.error || "" }, { wrap: h("pre", {}, a.output || "") }]));
      fill(box, 
        h("p", {}, h("a", { href: `#/jobs/${encodeURIComponent(id)}` }, `← ${job.name}`)),
        h("h1", {}, `Run ${run.scheduled_for} `, statusBadge(run.status)),
        retry ? h("div", { class: "toolbar" }, h("button", { id: "retry", class: "primary", onclick: () =>
          act("Run it again with the same run id and scheduled time?", () => api.retryRun(id, runId, api.newKey())) }, "Retry")) : null,
        cancel ? h("div", { class: "toolbar" }, h("button", { id: "cancel-run", class: "danger", onclick: () =>
          act(`Cancel this ${run.status} run? No try of it starts again; a running shell or http try is stopped within a heartbeat, a lambda or sqs target may still finish.`,
            (a) => api.cancelRun(id, runId, a.reason || undefined), { reason: true }) }, "Cancel run")) : null,
        h("div", { class: "card" }, specList(fields)),
        attempts ? [h("h2", {}, "Tries"), triesTable(attempts)] : null,
        previous && previous.length ? [h("h2", {}, "Earlier tries (before each retry)"), triesTable(previous)] : null,
      );
    },
  };
}

// --- failures (GET /runs) -------------------------------------------------------------------------
function failuresView() {
  const box = h("div");
  fill(main, h("h1", {}, "Failures"), box);
  return {
    async refresh() {
      const [dead, retrying, jobs] = await Promise.all([api.listAllRuns({ status: "dead", max: 200 }),
        api.listAllRuns({ status: "retrying", max: 200 }), api.listJobs()]);
      const runs = [...dead, ...retrying].sort((a, b) => Date.parse(b.scheduled_for) - Date.parse(a.scheduled_for));
      const jobNames = Object.fromEntries(jobs.map((job) => [job.id, job.name]));
      fill(box, runs.length ? runsTable(runs, { withJob: true, jobNames }) : h("p", { class: "muted" }, "No dead or retrying runs."));
    },
  };
}

// --- health ---------------------------------------------------------------------------------------
function healthView() {
  const box = h("div");
  fill(main, h("h1", {}, "Health, last hour"), box);
  return {
    async refresh() {
      const now = Date.now();
      const since = new Date(now - 3600000).toISOString();
      let runs;
      const [jobs, health] = await Promise.all([api.listJobs(), features.health ? api.getHealth() : null]);
      if (features.allRuns) runs = await api.listAllRuns({ since, max: 5000 });
      else runs = (await pooled(jobs, 4, (job) => api.listRuns(job.id, { max: 500 }))).flat();
      runs = runs.filter((r) => Date.parse(r.scheduled_for) >= now - 3600000 && !r.skipped_count);
      const start = runs.map((r) => r.lateness_ms);
      const dispatch = runs.filter((r) => r.enqueued_at).map((r) => Date.parse(r.enqueued_at) - Date.parse(r.scheduled_for));
      const buckets = perMinute(runs, now, 60);
      const top = Math.max(1, ...buckets.map((b) => Object.values(b.counts).reduce((x, y) => x + y, 0)));
      const card = (label, value, id) => h("div", { class: "card" }, h("div", { class: "muted" }, label), h("div", { class: "value", id }, value));
      fill(box, 
        h("div", { class: "stats" },
          card("Runs", String(runs.length), "health-runs"),
          card("Dispatch lateness p50 / p99", `${seconds(quantile(dispatch, 0.5))} / ${seconds(quantile(dispatch, 0.99))}`, "health-dispatch"),
          card("Start lateness p50 / p99", `${seconds(quantile(start, 0.5))} / ${seconds(quantile(start, 0.99))}`, "health-start"),
          card("Dead", String(runs.filter((r) => r.status === "dead").length), "health-dead")),
        h("h2", {}, "Runs per minute by status (by scheduled time)"),
        h("div", { class: "card" }, h("div", { class: "bars", id: "health-bars" }, buckets.map((b) => h("div", {
          class: "bar", title: `${new Date(b.minute).toISOString().slice(11, 16)}Z ${JSON.stringify(b.counts)}` },
        STATUSES.filter((s) => b.counts[s]).map((s) => h("span", { style: `height:${(b.counts[s] / top) * 118}px;background:var(--${s})` }))))),
        h("div", { class: "legend" }, STATUSES.map((s) => h("span", { style: `--c: var(--${s})` }, s)))),
        h("p", { class: "muted" }, "Dispatch lateness: enqueued minus scheduled; start lateness: the run's lateness (started minus scheduled)."),
        h("h2", {}, "Your start lateness by priority"),
        h("div", { id: "health-priorities" }, table(["Priority", "Runs", "p50", "p99"],
          latenessByPriority(runs, jobs).map((row) => [row.priority, String(row.runs), seconds(row.p50), seconds(row.p99)]))),
        health ? schedulerHealth(health) : null,
      );
    },
  };
}

// The scheduler's dispatch lateness (GET /health): per priority over every owner, then the top owners by backlog.
function schedulerHealth(health) {
  const line = (l) => [l.priority, String(l.runs), seconds(l.p50_ms), seconds(l.p99_ms), seconds(l.max_ms)];
  const window = health.until ? `${when(health.since)} to ${when(health.until)}` : "no runs dispatched yet";
  return h("div", { id: "health-scheduler" },
    h("h2", {}, "Scheduler: dispatch lateness by priority, every owner"),
    h("p", { class: "muted", id: "health-window" }, `Latest minute of dispatches: ${window}` +
      (health.reporting < health.partitions ? ` (${health.reporting} of ${health.partitions} partitions reporting)` : "")),
    table(["Priority", "Runs", "p50", "p99", "max"], health.by_priority.map(line)),
    h("h2", {}, "Top owners by backlog"),
    h("div", { id: "health-owners" }, table(["Owner", "Backlog", "Priority", "Runs", "p50", "p99", "max"], healthOwnerRows(health))),
    h("p", { class: "muted" }, "Owners with the largest backlog of due jobs (at least 100 in one tick; another owner's name is not shown). The metrics DispatchLatenessMs and RunLatenessMs carry the same priority and owner dimensions."));
}

// --- routing and polling ---------------------------------------------------------------------------
let inFlight = null; // the view being refreshed: refreshes of a view never overlap;
let again = false; // one asked for meanwhile (after an action, say) runs when the current one ends

async function refresh(view, mine) {
  if (inFlight === view) { again = true; return; }
  inFlight = view;
  try {
    await view.refresh();
    if (mine !== generation) return;
    clearError();
    document.getElementById("refreshed").textContent = `refreshed ${new Date().toLocaleTimeString()}`;
  } catch (error) {
    if (mine !== generation) return;
    if (error.status === 401) { loginView(api.token.get() ? `The API refused the token: ${error.message}` : null); return; }
    showError(error);
  } finally {
    if (inFlight === view) inFlight = null;
    if (again && current === view) { again = false; refresh(view, generation); }
  }
}

function route() {
  const mine = ++generation;
  const parts = (location.hash.replace(/^#\/?/, "") || "jobs").split("/").map(decodeURIComponent);
  document.querySelectorAll("#nav a").forEach((a) => a.classList.toggle("active", a.dataset.view === parts[0]));
  document.getElementById("signout").hidden = !api.token.get();
  clearError();
  let view;
  if (parts[0] === "jobs" && parts.length === 1) view = jobsView();
  else if (parts[0] === "jobs" && parts.length === 2) view = jobView(parts[1]);
  else if (parts[0] === "jobs" && parts[2] === "runs" && parts.length === 4) view = runView(parts[1], parts[3]);
  else if (parts[0] === "health") view = healthView();
  else if (parts[0] === "failures" && features.allRuns) view = failuresView();
  else { location.hash = "#/jobs"; return; }
  current = view;
  refresh(view, mine);
}

async function start() {
  try {
    features = await api.features();
  } catch (error) {
    showError(error);
  }
  document.querySelector('#nav a[data-view="failures"]').hidden = !features.allRuns;
  document.getElementById("signout").addEventListener("click", () => { api.token.clear(); loginView(); });
  window.addEventListener("hashchange", route);
  setInterval(() => { if (current && !document.hidden && !document.getElementById("confirm").open) refresh(current, generation); }, POLL_MS);
  route();
}

start();
