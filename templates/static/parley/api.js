// Calls to Parley's REST API with the browser's session, its CSRF token, and one error shape.

let csrfToken = "";
let loginUrl = "/login/";
let extraHeaders = {};

// `login`: where a 401 sends the person (null: nowhere, the page shows the refusal); `headers`:
// sent with every call (an answer link's page sends its link).
export function configureApi({ csrf, login, headers = {} }) {
  csrfToken = csrf;
  loginUrl = login === null ? null : login || loginUrl;
  extraHeaders = headers;
}

// An API refusal: `code` and `message` from the body (`{"error": {...}}`), anything else the
// body carried (the winner's answer on a 409, the active turn, ...) in `details`.
export class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    super(error.message || `The server answered ${status}.`);
    this.status = status;
    this.code = error.code || "error";
    this.details = error;
  }
}

// The cookie's token if there is one (it changes when the person logs in again in another tab),
// else the one the page was rendered with.
function currentCsrfToken() {
  const cookie = document.cookie.split("; ").find((pair) => pair.startsWith("csrftoken="));
  return cookie ? decodeURIComponent(cookie.slice("csrftoken=".length)) : csrfToken;
}

export async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json", ...extraHeaders };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET") headers["X-CSRFToken"] = currentCsrfToken();
  let response;
  try {
    response = await fetch(`/api${path}`, {
      method,
      headers,
      credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, {
      error: { code: "network", message: "Could not reach Parley. Check your connection and try again." },
    });
  }
  const data = await response.json().catch(() => null);
  if (response.status === 401 && loginUrl) {
    // The session ended (logged out elsewhere, or expired): log in again and come back.
    window.location.assign(loginUrl);
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}
