// Floor 1: calls to the `/v1` API. Every call carries the bearer token from sessionStorage;
// the first 401 asks for one (a form, shown once however many calls wait) and tries again.

import { $ } from './util.js';

const TOKEN_KEY = 'agentd.token';

let tokenPrompt = null;
export const token = () => sessionStorage.getItem(TOKEN_KEY);

/** Forgets the token; the next call asks for one again. */
export const forgetToken = () => sessionStorage.removeItem(TOKEN_KEY);

/** Shows the token form (once, however many calls are waiting) and resolves with the token. */
function askToken(refused) {
  if (!tokenPrompt) {
    tokenPrompt = new Promise((resolve) => {
      const modal = $('auth');
      const input = $('auth-token');
      $('auth-error').hidden = !refused;
      $('auth-error').textContent = refused ? 'That token was refused; try again.' : '';
      modal.hidden = false;
      input.focus();
      $('auth-form').onsubmit = (ev) => {
        ev.preventDefault();
        const t = input.value.trim();
        if (!t) return;
        sessionStorage.setItem(TOKEN_KEY, t);
        input.value = '';
        modal.hidden = true;
        $('forget-token').hidden = false;
        tokenPrompt = null;
        resolve(t);
      };
    });
  }
  return tokenPrompt;
}

/** fetch() with the bearer token; on 401 asks for a token and tries again. */
export async function authedFetch(path, init = {}) {
  for (;;) {
    const sent = token();
    const headers = { ...(init.headers || {}) };
    if (sent) headers.Authorization = `Bearer ${sent}`;
    const resp = await fetch(path, { ...init, headers });
    if (resp.status !== 401) return resp;
    if (token() !== sent) continue; // a new token was entered meanwhile
    if (sent) forgetToken();
    await askToken(Boolean(sent));
  }
}

/** An API error: the HTTP status and agentd's `{code, message}`. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Calls the API with a JSON body (if any) and returns the JSON answer, or throws ApiError. */
export async function api(method, path, body) {
  const init = { method, headers: { Accept: 'application/json' } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const resp = await authedFetch(path, init);
  const text = await resp.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  if (!resp.ok) {
    throw new ApiError(resp.status, data?.code || 'http_' + resp.status, data?.message || resp.statusText);
  }
  return data;
}

export const errText = (e) => (e instanceof ApiError ? `${e.code}: ${e.message}` : String(e?.message || e));
