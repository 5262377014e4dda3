// The console's client of the jobsched API: same origin (local mode, or `jobsched ui`'s signing proxy).
// Errors are thrown as ApiError with the API's own words ({"error": {"code", "message", "field"}}).

const TOKEN_KEY = "jobsched.token";

export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status; // HTTP status, 0 when no response arrived
    this.code = code;
    this.field = field || null;
  }
  toString() {
    const where = this.field ? ` (field: ${this.field})` : "";
    const prefix = this.status ? `${this.status} ${this.code}: ` : "";
    return `${prefix}${this.message}${where}`;
  }
}

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

async function errorOf(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  const error = body && typeof body === "object" ? body.error : null;
  if (error && error.message) return new ApiError(response.status, error.code || "error", error.message, error.field);
  if (body && body.message) return new ApiError(response.status, `http_${response.status}`, body.message);
  return new ApiError(response.status, `http_${response.status}`, response.statusText || "request failed");
}

// One call; resolves to the JSON body ({} for 204), rejects with ApiError.
export async function request(method, path, { body, params, headers } = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== "") query.set(key, value);
  }
  const url = query.toString() ? `${path}?${query}` : path;
  // X-Jobsched-Console: `jobsched ui` takes a change only with it (a page of another site cannot send it)
  const sent = { Accept: "application/json", "X-Jobsched-Console": "1", ...(headers || {}) };
  const bearer = token.get();
  if (bearer) sent.Authorization = `Bearer ${bearer}`;
  if (body !== undefined) sent["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, { method, headers: sent, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (error) {
    throw new ApiError(0, "unreachable", `cannot reach the API: ${error.message}`);
  }
  if (!response.ok) throw await errorOf(response);
  if (response.status === 204) return {};
  const text = await response.text();
  return text ? JSON.parse(text) : {};
}

const seg = (value) => encodeURIComponent(value);

// Every item of a paged listing ({"items", "next_cursor"}), at most `max`.
export async function collect(path, params = {}, max = 1000) {
  const items = [];
  let cursor = null;
  do {
    const page = await request("GET", path, { params: { ...params, limit: Math.min(100, max), cursor } });
    items.push(...(page.items || []));
    cursor = page.next_cursor;
  } while (cursor && items.length < max);
  return items.slice(0, max);
}

// --- routes of today's API -------------------------------------------------------------------
export const listJobs = () => collect("/jobs");
export const getJob = (id) => request("GET", `/jobs/${seg(id)}`);
export const deleteJob = (id) => request("DELETE", `/jobs/${seg(id)}`);
export const updateJob = (id, fields) => request("PATCH", `/jobs/${seg(id)}`, { body: fields });
export const pauseJob = (id, reason) =>
  request("POST", `/jobs/${seg(id)}/pause`, reason ? { body: { reason } } : {});
export const resumeJob = (id) => request("POST", `/jobs/${seg(id)}/resume`);
export const triggerJob = (id, idempotencyKey) =>
  request("POST", `/jobs/${seg(id)}/trigger`, { headers: { "Idempotency-Key": idempotencyKey } });
export const listRuns = (id, { status, max = 100 } = {}) => collect(`/jobs/${seg(id)}/runs`, { status }, max);

// --- routes a deployment may lack, used only when GET /openapi.json lists them (see `features`) ----
export const listAllRuns = ({ status, job_id, kind, since, until, max = 500 } = {}) =>
  collect("/runs", { status, job_id, kind, since, until }, max);
export const getRun = (id, runId) => request("GET", `/jobs/${seg(id)}/runs/${seg(runId)}`);
export const retryRun = (id, runId, idempotencyKey) =>
  request("POST", `/jobs/${seg(id)}/runs/${seg(runId)}/retry`, { headers: { "Idempotency-Key": idempotencyKey } });
export const cancelRun = (id, runId, reason) =>
  request("POST", `/jobs/${seg(id)}/runs/${seg(runId)}/cancel`, reason ? { body: { reason } } : {});
export const backfill = (id, start, end, idempotencyKey) =>
  request("POST", `/jobs/${seg(id)}/backfill`, { body: { start, end }, headers: { "Idempotency-Key": idempotencyKey } });
export const getHealth = () => request("GET", "/health");
export const listFires = (id, count = 10) => request("GET", `/jobs/${seg(id)}/fires`, { params: { count } });
export const listEvents = (id) => collect(`/jobs/${seg(id)}/events`, {}, 200);

// Which optional routes the deployment serves, from its OpenAPI document (no token needed).
export async function features() {
  const doc = await request("GET", "/openapi.json");
  const paths = doc.paths || {};
  const has = (path, method) => Boolean(paths[path] && paths[path][method]);
  const pause = (paths["/jobs/{id}/pause"] || {}).post || {};
  return {
    allRuns: has("/runs", "get"),
    runDetail: has("/jobs/{id}/runs/{run_id}", "get"),
    retry: has("/jobs/{id}/runs/{run_id}/retry", "post"),
    cancel: has("/jobs/{id}/runs/{run_id}/cancel", "post"),
    backfill: has("/jobs/{id}/backfill", "post"),
    fires: has("/jobs/{id}/fires", "get"),
    events: has("/jobs/{id}/events", "get"),
    pauseReason: Boolean(pause.requestBody),
    health: has("/health", "get"),
  };
}

export const newKey = () =>
  (crypto.randomUUID ? crypto.randomUUID() : `${Date.now()}-${Math.random().toString(16).slice(2)}`);
