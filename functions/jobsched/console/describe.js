// Pure helpers of the console: a schedule in words, run statistics, times. No DOM, no network.

const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const MONTHS = ["", "January", "February", "March", "April", "May", "June", "July", "August", "September",
  "October", "November", "December"];
const MACROS = {
  "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
  "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
};

const pad = (n) => String(n).padStart(2, "0");
const plural = (n, unit) => (Number(n) === 1 ? unit : `${n} ${unit}s`);
const isNumber = (text) => /^\d+$/.test(text);

function clock(hour, minute, second) {
  return `${pad(hour)}:${pad(minute)}${second && Number(second) ? `:${pad(second)}` : ""}`;
}

function dayOfWeek(field) {
  if (field === "1-5") return "on weekdays";
  const names = field.split(",").map((part) => (isNumber(part) ? DAYS[Number(part) % 7] : null));
  return names.every(Boolean) ? `on ${names.join(", ")}` : null;
}

// Words for a cron expression whose fields are simple enough, as [words, zoned]; null otherwise (the
// console then shows the expression as written only: a wrong description is worse than none).
function cronWords(fields) {
  const [second, minute, hour, dom, month, dow] = fields.length === 6 ? fields : ["0", ...fields];
  const step = (field) => (field === "*" ? 1 : /^\*\/\d+$/.test(field) ? Number(field.slice(2)) : null);
  let when;
  if (step(second) && minute === "*" && hour === "*") when = `every ${plural(step(second), "second")}`;
  else if (second === "0" && step(minute) && hour === "*") when = `every ${plural(step(minute), "minute")}`;
  else if (isNumber(second) && isNumber(minute) && hour === "*") when = `every hour at minute ${Number(minute)}`;
  else if (isNumber(second) && isNumber(minute) && isNumber(hour)) when = `at ${clock(hour, minute, second)}`;
  else return null;
  const days = dow === "*" ? "" : dayOfWeek(dow.toLowerCase());
  if (days === null) return null;
  let on;
  if (dom === "*" && month === "*") on = days || (when.startsWith("at ") ? "every day" : "");
  else if (dow === "*" && month === "*" && isNumber(dom)) on = `on day ${Number(dom)} of the month`;
  else if (dow === "*" && month === "*" && dom === "L") on = "on the last day of the month";
  else if (dow === "*" && isNumber(month) && isNumber(dom)) on = `on ${MONTHS[Number(month)]} ${Number(dom)}`;
  else return null;
  const words = when.startsWith("at ") ? `${on} ${when}` : [when, on].filter(Boolean).join(" ");
  return [words, Boolean(on) || !when.startsWith("every") || when.startsWith("every hour")];
}

// "every day at 02:00, Europe/Berlin" for the common forms of the README's schedule table; null when
// unsure. The zone is named where it matters (wall-clock times), not for sub-hour steps or rates.
export function describeSchedule(schedule, timezone = "UTC") {
  const text = String(schedule || "").trim();
  const zone = `, ${timezone || "UTC"}`;
  const lower = text.toLowerCase();
  let match = lower.match(/^(?:every\s+|rate\(\s*)(\d+)\s+(second|minute|hour|day)s?\s*\)?$/);
  if (match) return `every ${plural(match[1], match[2])}`;
  match = lower.match(/^daily\s+(\d{1,2}):(\d{2})(?::(\d{2}))?$/);
  if (match) return `every day at ${clock(match[1], match[2], match[3])}${zone}`;
  match = text.match(/^at\s*\(?\s*([^)]+?)\s*\)?$/i);
  if (match) return `once, at ${match[1]}${/(z|[+-]\d\d:?\d\d)$/i.test(match[1]) ? "" : zone}`;
  if (/^cron\(/i.test(text)) return null; // EventBridge numbering and year field: shown as written
  const fields = (MACROS[lower] || text).split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) return null;
  const described = cronWords(fields);
  if (!described) return null;
  const [words, zoned] = described;
  return zoned ? `${words}${zone}` : words;
}

// The q-quantile (0..1) of numbers by nearest rank; null for none.
export function quantile(values, q) {
  const sorted = values.filter((v) => typeof v === "number").sort((a, b) => a - b);
  if (!sorted.length) return null;
  const rank = Math.max(1, Math.ceil(q * sorted.length));
  return sorted[rank - 1];
}

// Summary of runs (API JSON): last status, success rate over finished runs, start lateness p50/p99 (ms).
export function runStats(runs) {
  const finished = runs.filter((r) => r.status === "succeeded" || r.status === "dead");
  const succeeded = finished.filter((r) => r.status === "succeeded").length;
  const lateness = runs.map((r) => r.lateness_ms).filter((v) => typeof v === "number");
  return {
    count: runs.length,
    last: runs.length ? runs[0].status : null,
    successRate: finished.length ? succeeded / finished.length : null,
    finished: finished.length,
    p50: quantile(lateness, 0.5),
    p99: quantile(lateness, 0.99),
  };
}

// Start lateness (ms) per priority of runs (API JSON), each run's priority its job's (jobs: API JSON; a job not
// listed counts as normal): [{priority, runs, p50, p99}] for the priorities with runs, high first.
export function latenessByPriority(runs, jobs) {
  const priorityOf = Object.fromEntries(jobs.map((job) => [job.id, job.priority || "normal"]));
  return ["high", "normal", "low"].map((priority) => {
    const lateness = runs.filter((r) => (priorityOf[r.job_id] || "normal") === priority)
      .map((r) => r.lateness_ms).filter((v) => typeof v === "number");
    return { priority, runs: lateness.length, p50: quantile(lateness, 0.5), p99: quantile(lateness, 0.99) };
  }).filter((row) => row.runs);
}

// GET /health's figures (API JSON) as table rows: one per priority of each top owner, then of the other owners;
// each row [owner, backlog, priority, runs, p50, p99, max] in words (another owner's name is not shown); a top
// owner none of whose runs was dispatched in the window keeps one row, with no figures.
export function healthOwnerRows(health) {
  const rows = [];
  const add = (who, backlog, lines) => lines.forEach((line, i) => rows.push([i ? "" : who, i ? "" : backlog,
    line.priority, String(line.runs), seconds(line.p50_ms), seconds(line.p99_ms), seconds(line.max_ms)]));
  for (const owner of health.top_owners || []) {
    const who = owner.you ? `#${owner.rank} you (${owner.owner})` : `#${owner.rank} another owner`;
    if (owner.by_priority.length) add(who, String(owner.backlog), owner.by_priority);
    else rows.push([who, String(owner.backlog), "\u2013", "0", "\u2013", "\u2013", "\u2013"]);
  }
  add("every other owner", "–", health.other || []);
  return rows;
}

// Runs per minute by status over [now - minutes, now): [{minute: epoch ms, counts: {status: n}}].
export function perMinute(runs, nowMs, minutes = 60) {
  const start = Math.floor(nowMs / 60000) * 60000 - (minutes - 1) * 60000;
  const buckets = Array.from({ length: minutes }, (_, i) => ({ minute: start + i * 60000, counts: {} }));
  for (const run of runs) {
    const at = Date.parse(run.scheduled_for);
    const index = Math.floor((at - start) / 60000);
    if (index < 0 || index >= minutes) continue;
    const counts = buckets[index].counts;
    counts[run.status] = (counts[run.status] || 0) + 1;
  }
  return buckets;
}

export function seconds(ms) {
  if (ms === null || ms === undefined) return "–";
  return ms < 10000 ? `${(ms / 1000).toFixed(2)}s` : `${Math.round(ms / 1000)}s`;
}

export function percent(ratio) {
  return ratio === null || ratio === undefined ? "–" : `${Math.round(ratio * 100)}%`;
}

// An ISO instant as "2026-12-01 18:00:00Z" with "in 5s"/"3m ago" relative to nowMs.
export function when(iso, nowMs = Date.now()) {
  if (!iso) return "–";
  const at = Date.parse(iso);
  if (Number.isNaN(at)) return String(iso);
  const text = new Date(at).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z").replace(/\.000Z$/, "Z");
  return `${text} (${relative(at - nowMs)})`;
}

export function relative(deltaMs) {
  const abs = Math.abs(deltaMs);
  const [n, unit] = abs < 60000 ? [Math.round(abs / 1000), "s"] : abs < 3600000 ? [Math.round(abs / 60000), "m"]
    : abs < 86400000 ? [Math.round(abs / 3600000), "h"] : [Math.round(abs / 86400000), "d"];
  return deltaMs >= 0 ? `in ${n}${unit}` : `${n}${unit} ago`;
}
