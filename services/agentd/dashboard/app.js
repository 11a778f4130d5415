// agentd dashboard: the live agent tree, one agent's thread, checkpoints and events, its
// controls, the queue, and the tool calls that wait for a person's approval. Vanilla JS, no
// build step, everything from this origin. Every API call carries the bearer token from
// sessionStorage (asked for on the first 401); the event stream is read with fetch() and a
// streaming reader so that it can carry the header too.

const TOKEN_KEY = 'agentd.token';
const PRIORITY_RANK = { critical: 0, high: 1, normal: 2, low: 3 };
const MAX_EVENTS = 500;
const REFRESH_DEBOUNCE_MS = 150;
/** How much of a call's arguments the approvals panel shows (they can be any size). */
const MAX_ARGS_CHARS = 2000;

const state = {
  roots: [],
  nodes: new Map(), // agent id → tree node (children: nodes)
  collapsed: new Set(),
  selected: null,
  events: [], // newest first: {at, type, data}
  resumeAt: new Map(), // agent id → resume time (ms) from rate_limited events
  liveText: new Map(), // agent id → {stepId, text}: the answer it is streaming now (text_delta events)
  lastEventId: null, // the id of the last event received, to resume the stream after a drop
  eventCount: 0,
  approvals: [], // open calls awaiting approval, oldest first (GET /v1/tool_calls)
  approvalsLoaded: false,
};

const $ = (id) => document.getElementById(id);

/** Builds an element: attributes (`class`, `data-*`, …), then children (strings or nodes). */
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const fmtTime = (ms) => (ms ? new Date(ms).toLocaleTimeString() : '');
const fmtDateTime = (ms) => (ms ? new Date(ms).toLocaleString() : '');
function fmtTokens(n) {
  n = Number(n) || 0;
  if (n >= 1e6) return (n / 1e6).toFixed(1) + 'M';
  if (n >= 1e4) return (n / 1e3).toFixed(0) + 'k';
  if (n >= 1e3) return (n / 1e3).toFixed(1) + 'k';
  return String(n);
}
function fmtCost(c) {
  c = Number(c) || 0;
  return '$' + (c === 0 ? '0' : c < 0.01 ? c.toFixed(5) : c.toFixed(2));
}
function fmtIn(ms) {
  const s = Math.round((ms - Date.now()) / 1000);
  if (s <= 0) return 'due now';
  return s < 120 ? `in ${s}s` : `in ${Math.round(s / 60)} min`;
}
const agentPath = (id, rest = '') => `/v1/agents/${encodeURIComponent(id)}${rest}`;
const titleOf = (id) => state.nodes.get(id)?.title || id;

// ---------------------------------------------------------------- auth and API calls

let tokenPrompt = null;
const token = () => sessionStorage.getItem(TOKEN_KEY);

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
async function authedFetch(path, init = {}) {
  for (;;) {
    const sent = token();
    const headers = { ...(init.headers || {}) };
    if (sent) headers.Authorization = `Bearer ${sent}`;
    const resp = await fetch(path, { ...init, headers });
    if (resp.status !== 401) return resp;
    if (token() !== sent) continue; // a new token was entered meanwhile
    if (sent) sessionStorage.removeItem(TOKEN_KEY);
    await askToken(Boolean(sent));
  }
}

/** An API error: the HTTP status and agentd's `{code, message}`. */
class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Calls the API with a JSON body (if any) and returns the JSON answer, or throws ApiError. */
async function api(method, path, body) {
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

const errText = (e) => (e instanceof ApiError ? `${e.code}: ${e.message}` : String(e?.message || e));

// ---------------------------------------------------------------- the tree

function indexTree() {
  state.nodes = new Map();
  const walk = (n) => {
    n.children = Array.isArray(n.children) ? n.children : [];
    state.nodes.set(n.agent_id, n);
    n.children.forEach(walk);
  };
  state.roots.forEach(walk);
  rollUp();
}

/** Tokens and cost per subtree (the server sends them too; recomputed after live patches). */
function rollUp() {
  const walk = (n) => {
    let tokens = Number(n.tokens_used) || 0;
    let cost = Number(n.cost_usd) || 0;
    for (const c of n.children) {
      walk(c);
      tokens += c.tree_tokens;
      cost += c.tree_cost_usd;
    }
    n.tree_tokens = tokens;
    n.tree_cost_usd = cost;
  };
  state.roots.forEach(walk);
}

async function loadTree() {
  const data = await api('GET', '/v1/tree');
  state.roots = Array.isArray(data?.roots) ? data.roots : [];
  indexTree();
  if (state.selected && !state.nodes.has(state.selected)) {
    // The selected agent may have been deleted; the detail refresh tells.
    scheduleDetailRefresh();
  }
  scheduleRender();
}

/** Puts a fresh inspect view into the tree node (keeping its child nodes). */
function patchNode(view) {
  const node = state.nodes.get(view.agent_id);
  if (!node) return false;
  const children = node.children;
  Object.assign(node, view, { children });
  return true;
}

// ---------------------------------------------------------------- refreshes, debounced

const pending = { ids: new Set(), tree: false, detail: false, approvals: false, timer: null };

function schedule() {
  if (pending.timer) return;
  pending.timer = setTimeout(flush, REFRESH_DEBOUNCE_MS);
}
function scheduleTreeReload() {
  pending.tree = true;
  schedule();
}
function scheduleAgentRefresh(id) {
  pending.ids.add(id);
  schedule();
}
function scheduleDetailRefresh() {
  pending.detail = true;
  schedule();
}
function scheduleApprovalsRefresh() {
  pending.approvals = true;
  schedule();
}

async function flush() {
  const ids = [...pending.ids];
  const tree = pending.tree;
  const detail = pending.detail || (state.selected && pending.ids.has(state.selected));
  const approvals = pending.approvals;
  pending.ids.clear();
  pending.tree = false;
  pending.detail = false;
  pending.approvals = false;
  if (approvals) loadApprovals(); // on its own: a slow list holds up no other refresh
  try {
    if (tree || ids.some((id) => !state.nodes.has(id))) {
      await loadTree();
    } else {
      const views = await Promise.allSettled(ids.map((id) => api('GET', agentPath(id))));
      let reload = false;
      views.forEach((r) => {
        if (r.status === 'fulfilled') patchNode(r.value);
        else reload = true; // gone (deleted) or unreachable: take the whole tree again
      });
      if (reload) await loadTree();
      rollUp();
      scheduleRender();
    }
    if (detail) await refreshDetail();
  } catch (e) {
    console.warn('refresh failed', e);
  } finally {
    pending.timer = null;
    if (pending.tree || pending.ids.size || pending.detail || pending.approvals) schedule();
  }
}

// ---------------------------------------------------------------- the event stream

function setStream(s, text) {
  const badge = $('stream');
  badge.dataset.state = s;
  badge.textContent = text || { live: 'live', connecting: 'connecting…', down: 'disconnected' }[s];
}

/** One SSE frame (`id:` / `event:` / `data:` lines) → {id, type, data}, or null for comments. */
function parseFrame(frame) {
  let type = 'message';
  let id = null;
  const data = [];
  for (const line of frame.split('\n')) {
    if (!line || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') type = value;
    else if (field === 'id') id = value;
    else if (field === 'data') data.push(value);
  }
  if (!data.length) return null;
  const raw = data.join('\n');
  try {
    return { id, type, data: JSON.parse(raw) };
  } catch {
    return { id, type, data: { raw } };
  }
}

/**
 * Reads `/v1/events` for ever: reconnects with backoff, resuming after the last event seen
 * (`Last-Event-ID`), and reloads the tree after each reconnect.
 */
async function streamEvents() {
  let backoff = 500;
  for (;;) {
    setStream('connecting');
    try {
      const headers = { Accept: 'text/event-stream' };
      if (state.lastEventId) headers['Last-Event-ID'] = state.lastEventId;
      const resp = await authedFetch('/v1/events', {
        headers,
        cache: 'no-store',
      });
      if (!resp.ok || !resp.body) throw new Error(`HTTP ${resp.status}`);
      setStream('live');
      backoff = 500;
      scheduleTreeReload(); // whatever happened while we were not listening
      scheduleApprovalsRefresh();
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf = (buf + value).replace(/\r\n/g, '\n');
        let cut;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const frame = parseFrame(buf.slice(0, cut));
          buf = buf.slice(cut + 2);
          if (frame?.id) state.lastEventId = frame.id;
          if (frame) onEvent(frame.type, frame.data);
        }
      }
    } catch (e) {
      console.warn('event stream', e);
    }
    setStream('down');
    await sleep(backoff);
    backoff = Math.min(backoff * 2, 10000);
  }
}

/** The agents an event is about. */
function eventAgents(data) {
  return [data?.agent_id, data?.parent_id, data?.child_id].filter((x) => typeof x === 'string');
}

function onEvent(type, data) {
  state.eventCount += 1;
  document.body.dataset.events = String(state.eventCount);
  if (type === 'text_delta') {
    onTextDelta(data);
    return; // the text shows in the thread as it arrives; not one list item per piece
  }
  state.events.unshift({ at: Date.now(), type, data });
  if (state.events.length > MAX_EVENTS) state.events.length = MAX_EVENTS;

  const ids = eventAgents(data);
  const node = state.nodes.get(data?.agent_id);
  if (type === 'status_changed' && node) {
    node.status = data.to; // at once; the debounced refresh brings the rest
    node.status_reason = data.reason ?? null;
  }
  if (type === 'status_changed' && data.to !== 'running' && state.liveText.delete(data.agent_id)) {
    // The turn is over (or stopped): its text is in the thread, or was never an answer.
    if (data.agent_id === state.selected) renderLiveText();
  }
  if (type === 'rate_limited' && data?.agent_id) state.resumeAt.set(data.agent_id, data.resume_at_ms);
  if (type === 'token_usage' && node) {
    node.tokens_used = (Number(node.tokens_used) || 0) + tokensOf(data.usage);
    node.cost_usd = (Number(node.cost_usd) || 0) + (Number(data.cost_usd) || 0);
    rollUp();
  }
  if (type === 'spawned' || type === 'deleted' || type === 'lagged') scheduleTreeReload();
  if (touchesApprovals(type, data)) scheduleApprovalsRefresh();
  if (type === 'deleted' && data?.agent_id === state.selected) scheduleDetailRefresh();
  ids.forEach(scheduleAgentRefresh);
  scheduleRender();
  if (state.selected && ids.includes(state.selected)) renderEvents();
}

/**
 * Whether an event may change the calls that await approval: a gated call makes its agent
 * wait in `waiting_review`, every decision is a `tool_call_decided`, and a timeout or a cancel
 * ends the wait; a rejected or timed-out call also finishes as a tool call.
 */
function touchesApprovals(type, data) {
  if (type === 'status_changed') return data?.to === 'waiting_review' || data?.from === 'waiting_review';
  return ['tool_call_requested', 'tool_call_decided', 'tool_call_finished', 'deleted', 'lagged'].includes(type);
}

/** A piece of the answer an agent is streaming: appended to its live text. */
function onTextDelta(d) {
  if (typeof d?.agent_id !== 'string') return;
  let live = state.liveText.get(d.agent_id);
  if (!live || live.stepId !== d.step_id) live = { stepId: d.step_id, text: '' };
  live.text += d.text || '';
  state.liveText.set(d.agent_id, live);
  if (d.agent_id === state.selected) renderLiveText();
}

/** The selected agent's answer while it arrives, below its thread. */
function renderLiveText() {
  const box = $('live-text');
  const live = state.liveText.get(state.selected);
  box.hidden = !live;
  box.dataset.stepId = live ? live.stepId : '';
  $('live-text-body').textContent = live ? live.text : '';
}

const tokensOf = (u) =>
  u ? (Number(u.input) || 0) + (Number(u.output) || 0) + (Number(u.cache_write) || 0) + (Number(u.cache_read) || 0) : 0;

// ---------------------------------------------------------------- rendering

let renderQueued = false;
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    renderTree();
    renderQueue();
    renderApprovals();
    if (state.selected) renderDetailHead();
  });
}

function badge(status) {
  return el('span', { class: 'badge', 'data-status': status, text: String(status || '').replace(/_/g, ' ') });
}

function renderTree() {
  const box = $('tree');
  if (!state.roots.length) {
    box.replaceChildren(el('p', { class: 'muted', text: 'No agents yet.' }));
    return;
  }
  box.replaceChildren(el('ul', { role: 'group' }, state.roots.map(renderNode)));
}

function renderNode(n) {
  const open = !state.collapsed.has(n.agent_id);
  const hasKids = n.children.length > 0;
  const toggle = el('span', {
    class: 'toggle',
    text: hasKids ? (open ? '▾' : '▸') : '',
    title: hasKids ? (open ? 'collapse' : 'expand') : null,
    onclick: (ev) => {
      ev.stopPropagation();
      if (!hasKids) return;
      if (open) state.collapsed.add(n.agent_id);
      else state.collapsed.delete(n.agent_id);
      scheduleRender();
    },
  });
  const sub = el(
    'div',
    { class: 'sub' },
    badge(n.status),
    n.phase != null ? el('span', { class: 'phase', text: `phase ${n.phase}` }) : null,
    typeof n.progress === 'number' && n.progress > 0 && n.progress <= 1
      ? el('span', { class: 'progress' }, progressBar(n.progress))
      : null,
    n.current_step ? el('span', { class: 'step', text: n.current_step }) : null,
    n.status_reason ? el('span', { class: 'reason', text: humanReason(n.status_reason), title: n.status_reason }) : null,
  );
  const figures = el('span', {
    class: 'figures',
    text: `${fmtTokens(n.tree_tokens)} tok · ${fmtCost(n.tree_cost_usd)}`,
    title: `this agent: ${n.tokens_used || 0} tokens, ${fmtCost(n.cost_usd)}; with its subtree: ${n.tree_tokens} tokens, ${fmtCost(n.tree_cost_usd)}`,
  });
  const row = el(
    'div',
    {
      class: 'node' + (state.selected === n.agent_id ? ' selected' : ''),
      'data-agent-id': n.agent_id,
      'data-status': n.status,
      'data-title': n.title,
      role: 'treeitem',
      'aria-selected': state.selected === n.agent_id ? 'true' : 'false',
      tabindex: 0,
      onclick: () => select(n.agent_id),
      onkeydown: (ev) => {
        if (ev.key === 'Enter' || ev.key === ' ') {
          ev.preventDefault();
          select(n.agent_id);
        }
      },
    },
    toggle,
    el('span', { class: 'dot', title: n.status }),
    el('span', { class: 'title', title: n.agent_id }, n.title, el('span', { class: 'type', text: n.agent_type })),
    figures,
    sub,
  );
  const li = el('li', {}, row);
  if (hasKids && open) li.append(el('ul', { role: 'group' }, n.children.map(renderNode)));
  return li;
}

function progressBar(fraction) {
  const bar = el('span');
  bar.style.width = `${Math.round(fraction * 100)}%`;
  return bar;
}

function isWaiting(status) {
  return status === 'queued' || (typeof status === 'string' && status.startsWith('waiting_'));
}

/** When a rate-limited agent resumes: the record's field, the `rate_limited` event, or the
 * time in its status reason ("provider rate limit; resumes at <ms>"). */
function resumeAtOf(n) {
  const fromReason = /resumes at (\d{12,})/.exec(n.status_reason || '')?.[1];
  return n.resume_at_ms ?? state.resumeAt.get(n.agent_id) ?? (fromReason ? Number(fromReason) : null);
}

/** A status reason with agent ids replaced by titles and epoch times by clock times. */
function humanReason(reason) {
  if (!reason) return '';
  return String(reason)
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, (id) => titleOf(id))
    .replace(/\b(1\d{12})\b/g, (ms) => fmtTime(Number(ms)));
}

function renderQueue() {
  const box = $('queue');
  const waiting = [...state.nodes.values()]
    .filter((n) => isWaiting(n.status))
    .sort(
      (a, b) =>
        (PRIORITY_RANK[a.priority] ?? 2) - (PRIORITY_RANK[b.priority] ?? 2) ||
        (a.created_at_ms || 0) - (b.created_at_ms || 0),
    );
  if (!waiting.length) {
    box.replaceChildren(el('p', { class: 'muted', text: 'Nothing queued or waiting.' }));
    return;
  }
  const rows = waiting.map((n) => {
    const prio = n.priority || 'normal';
    const deps = (n.depends_on || []).map((id) =>
      el('span', { class: 'dep' }, titleOf(id), ' ', badge(state.nodes.get(id)?.status || 'unknown')),
    );
    const why = [];
    if (deps.length) why.push(el('div', {}, 'depends on: ', ...deps.flatMap((d, i) => (i ? [', ', d] : [d]))));
    const resume = n.status === 'waiting_rate_limit' ? resumeAtOf(n) : null;
    // The reason, unless the lines below already say it.
    const said = (deps.length && /^depends on/.test(n.status_reason || '')) || (resume && /rate limit/.test(n.status_reason || ''));
    if (n.status_reason && !said) why.push(el('div', { class: 'muted', text: humanReason(n.status_reason) }));
    if (resume) {
      why.push(el('div', { class: 'resume', text: `rate limited; resumes at ${fmtTime(resume)} (${fmtIn(resume)})` }));
    } else if (n.status === 'waiting_rate_limit') {
      why.push(el('div', { class: 'muted', text: 'rate limited; resume time not known yet' }));
    }
    return el(
      'tr',
      { 'data-agent-id': n.agent_id, 'data-status': n.status, onclick: () => select(n.agent_id) },
      el('td', {}, el('span', { class: `prio prio-${prio}`, text: prio })),
      el('td', { text: n.title }),
      el('td', {}, badge(n.status)),
      el('td', {}, why),
    );
  });
  box.replaceChildren(
    el(
      'table',
      {},
      el('thead', {}, el('tr', {}, ['Priority', 'Agent', 'Status', 'Waiting on'].map((h) => el('th', { text: h })))),
      el('tbody', {}, rows),
    ),
  );
}

// ---------------------------------------------------------------- one agent

let detailSeq = 0;
let lastThreadKey = '';

function select(id) {
  if (state.selected !== id) {
    state.selected = id;
    lastThreadKey = '';
    $('thread').replaceChildren(el('p', { class: 'muted', text: 'loading…' }));
    $('checkpoints').replaceChildren();
    setActionStatus('');
  }
  $('detail-empty').hidden = true;
  $('detail').hidden = false;
  scheduleRender();
  renderEvents();
  renderLiveText();
  refreshDetail();
}

function deselect(message) {
  state.selected = null;
  $('detail').hidden = true;
  $('detail-empty').hidden = false;
  $('detail-empty').textContent = message || 'Select an agent in the tree.';
  scheduleRender();
}

async function refreshDetail() {
  const id = state.selected;
  if (!id) return;
  const seq = ++detailSeq;
  const [agent, thread, checkpoints] = await Promise.allSettled([
    api('GET', agentPath(id)),
    api('GET', agentPath(id, '/thread')),
    api('GET', agentPath(id, '/checkpoints')),
  ]);
  if (seq !== detailSeq || id !== state.selected) return; // a newer refresh or selection won
  if (agent.status === 'rejected' && agent.reason?.status === 404) {
    deselect('That agent was deleted.');
    return;
  }
  if (agent.status === 'fulfilled') {
    if (patchNode(agent.value)) rollUp();
    state.detailView = agent.value;
  }
  renderDetailHead();
  if (thread.status === 'fulfilled') renderThread(thread.value?.entries || []);
  else $('thread').replaceChildren(el('p', { class: 'error', text: errText(thread.reason) }));
  renderCheckpoints(checkpoints);
  scheduleRender();
}

function renderDetailHead() {
  const id = state.selected;
  const n = state.nodes.get(id) || (state.detailView?.agent_id === id ? state.detailView : null);
  if (!n) return;
  const usage = n.usage || {};
  const rows = [
    ['id', el('code', { text: n.agent_id })],
    ['type', n.agent_type],
    ['status', [badge(n.status), n.status_reason ? ` ${humanReason(n.status_reason)}` : '']],
    n.parent_id ? ['parent', el('a', { href: '#', onclick: (ev) => (ev.preventDefault(), select(n.parent_id)), text: titleOf(n.parent_id) })] : null,
    ['priority', n.priority || 'normal'],
    n.phase != null || n.progress > 0
      ? ['phase', [n.phase != null ? String(n.phase) : '', n.progress > 0 ? ` (${Math.round(n.progress * 100)}%)` : '']]
      : null,
    n.current_step ? ['step', n.current_step] : null,
    ['turns', `${n.turns ?? 0}${n.attempts > 1 ? ` (attempt ${n.attempts})` : ''}`],
    [
      'tokens',
      `${n.tokens_used ?? 0} (in ${usage.input ?? 0}, out ${usage.output ?? 0}, cache w ${usage.cache_write ?? 0}, r ${usage.cache_read ?? 0})` +
        (n.tree_tokens != null && n.tree_tokens !== n.tokens_used ? ` · subtree ${n.tree_tokens}` : ''),
    ],
    [
      'cost',
      fmtCost(n.cost_usd) +
        (n.tree_cost_usd != null && n.tree_cost_usd !== n.cost_usd ? ` · subtree ${fmtCost(n.tree_cost_usd)}` : ''),
    ],
    n.depends_on?.length ? ['depends on', n.depends_on.map(titleOf).join(', ')] : null,
    awaitingOf(n.agent_id).length ? ['approval', awaitingLinks(n.agent_id)] : null,
    resumeAtOf(n) && n.status === 'waiting_rate_limit' ? ['resumes', `${fmtDateTime(resumeAtOf(n))} (${fmtIn(resumeAtOf(n))})`] : null,
    n.last_error ? ['last error', el('span', { class: 'error', text: n.last_error })] : null,
    n.result != null ? ['result', typeof n.result === 'string' ? n.result : JSON.stringify(n.result)] : null,
    ['live', n.live ? `yes · inbox ${n.inbox ?? 0}${n.turn_running ? ' · turn running' : ''}` : 'no'],
    ['updated', fmtDateTime(n.updated_at_ms)],
  ].filter(Boolean);
  $('detail-head').replaceChildren(
    el('h3', { 'data-agent-id': n.agent_id, 'data-status': n.status, text: n.title }),
    el('dl', {}, rows.flatMap(([k, v]) => [el('dt', { text: k }), el('dd', {}, v)])),
  );
}

function renderThread(entries) {
  const live = state.liveText.get(state.selected);
  if (live && entries.some((e) => e.id === live.stepId)) {
    // The streamed answer is stored: the thread shows it now.
    state.liveText.delete(state.selected);
    renderLiveText();
  }
  const key = entries.length + ':' + (entries.at(-1)?.id || '');
  $('thread-count').textContent = `(${entries.length})`;
  if (key === lastThreadKey) return;
  lastThreadKey = key;
  const box = $('thread');
  if (!entries.length) {
    box.replaceChildren(el('p', { class: 'muted', text: 'The thread is empty.' }));
    return;
  }
  const callNames = new Map();
  entries.forEach((e) => (e.tool_calls || []).forEach((c) => callNames.set(c.id, c.name)));
  box.replaceChildren(
    ...entries.map((e) => {
      const meta = el(
        'div',
        { class: 'meta' },
        el('span', { class: 'role', text: e.role }),
        el('span', { text: fmtTime(e.at_ms) }),
        e.from_agent ? el('span', { class: 'tag', text: `forwarded from ${titleOf(e.from_agent)}` }) : null,
        e.tool_call_id ? el('span', { text: `result of ${callNames.get(e.tool_call_id) || e.tool_call_id}` }) : null,
        e.interrupted ? el('span', { class: 'tag interrupted', text: 'interrupted' }) : null,
        e.usage ? el('span', { text: `${tokensOf(e.usage)} tok` }) : null,
      );
      const calls = (e.tool_calls || []).map((c) =>
        el(
          'div',
          { class: 'call' },
          el('span', { class: 'mono', text: `→ ${c.name}` }),
          el('pre', { text: JSON.stringify(c.arguments ?? {}, null, 1) }),
        ),
      );
      return el(
        'div',
        { class: 'entry' + (e.from_agent ? ' forwarded' : ''), 'data-role': e.role },
        meta,
        e.text ? el('p', { class: 'text', text: e.text }) : null,
        calls,
      );
    }),
  );
}

function renderCheckpoints(result) {
  const box = $('checkpoints');
  const none = (text, cls = 'muted none') => box.replaceChildren(el('p', { class: cls, text }));
  if (result.status === 'rejected') {
    // Older agentd versions have no checkpoints route.
    if (result.reason?.status === 404) none('no checkpoints');
    else none(errText(result.reason), 'error none');
    return;
  }
  const list = Array.isArray(result.value) ? result.value : result.value?.checkpoints;
  if (!Array.isArray(list) || !list.length) {
    none('no checkpoints');
    return;
  }
  box.replaceChildren(
    ...list.map((cp) => {
      const when = cp.created_at_ms ?? cp.at_ms;
      const name = [cp.reason, cp.trigger].filter(Boolean).join(' — ') || cp.checkpoint_id || cp.id || 'checkpoint';
      const facts = [
        cp.phase != null ? `phase ${cp.phase}` : null,
        typeof cp.progress === 'number' ? `${Math.round(cp.progress * 100)}%` : null,
        cp.current_step || null,
        cp.entries != null ? `${cp.entries} entries` : null,
        cp.pending_actions != null ? `${Array.isArray(cp.pending_actions) ? cp.pending_actions.length : cp.pending_actions} pending` : null,
        cp.tokens_used != null ? `${cp.tokens_used} tok` : null,
        cp.cost_usd != null ? fmtCost(cp.cost_usd) : null,
      ].filter(Boolean);
      return el(
        'div',
        { class: 'cp', 'data-checkpoint-id': cp.checkpoint_id ?? cp.id },
        el(
          'div',
          {},
          el('strong', { text: String(name) }),
          ' ',
          cp.status ? badge(cp.status) : null,
          when ? el('span', { class: 'muted', text: ` ${fmtDateTime(when)}` }) : null,
        ),
        facts.length ? el('div', { class: 'muted small', text: facts.join(' · ') }) : null,
        el('details', {}, el('summary', { class: 'small', text: 'raw' }), el('pre', { text: JSON.stringify(cp, null, 1) })),
      );
    }),
  );
}

function renderEvents() {
  const id = state.selected;
  const list = $('events');
  const mine = state.events.filter((e) => eventAgents(e.data).includes(id)).slice(0, 100);
  if (!mine.length) {
    list.replaceChildren(el('li', { class: 'muted', text: 'No events since the page was opened.' }));
    return;
  }
  list.replaceChildren(
    ...mine.map((e) => {
      const rest = { ...e.data };
      delete rest.type;
      if (rest.agent_id === id) delete rest.agent_id;
      let summary = JSON.stringify(rest);
      if (e.type === 'status_changed') summary = `${e.data.from} → ${e.data.to}${e.data.reason ? ` (${e.data.reason})` : ''}`;
      if (summary.length > 300) summary = summary.slice(0, 300) + '…';
      return el(
        'li',
        { 'data-type': e.type },
        el('span', { class: 'muted', text: fmtTime(e.at) + ' ' }),
        el('span', { class: 'etype', text: e.type }),
        ' ',
        summary,
      );
    }),
  );
}

// ---------------------------------------------------------------- approvals

let approvalsSeq = 0;

/**
 * The calls that wait for a person's decision (the whole service: the page sends no scope).
 * Loads may overlap; only the newest one's answer is shown.
 */
async function loadApprovals() {
  const seq = ++approvalsSeq;
  try {
    const data = await api('GET', '/v1/tool_calls?status=awaiting_approval');
    if (seq !== approvalsSeq) return;
    const calls = Array.isArray(data?.tool_calls) ? data.tool_calls : [];
    // Oldest first, ties in a fixed order: rows do not swap places between refreshes.
    calls.sort(
      (a, b) =>
        (a.requested_at_ms || 0) - (b.requested_at_ms || 0) ||
        String(a.agent_id).localeCompare(String(b.agent_id)) ||
        String(a.call_id).localeCompare(String(b.call_id)),
    );
    state.approvals = calls;
    state.approvalsLoaded = true;
  } catch (e) {
    console.warn('approvals', e);
    if (seq !== approvalsSeq) return;
    if (!state.approvalsLoaded) {
      $('approvals').replaceChildren(el('p', { class: 'error', text: errText(e) }));
      return;
    }
  }
  renderApprovals();
  if (state.selected) renderDetailHead();
}

const awaitingOf = (agentId) => state.approvals.filter((c) => c.agent_id === agentId);

/** The selected agent's gated calls in its details: links to their rows in the panel. */
function awaitingLinks(agentId) {
  return awaitingOf(agentId).flatMap((c, i) => [
    i ? ', ' : '',
    el('a', {
      href: '#',
      class: 'mono',
      text: c.tool,
      title: 'decide it in the Approvals panel',
      onclick: (ev) => {
        ev.preventDefault();
        const row = approvalRows.get(c.call_id);
        row?.scrollIntoView({ block: 'nearest' });
        row?.querySelector('.approval-reason')?.focus();
      },
    }),
  ]);
}

/** A call's arguments as JSON (on one line when short), cut at MAX_ARGS_CHARS. */
function boundedArgs(args) {
  let text;
  try {
    text = JSON.stringify(args ?? {});
    if (text.length > 80) text = JSON.stringify(args, null, 1);
  } catch {
    text = String(args);
  }
  if (text.length <= MAX_ARGS_CHARS) return text;
  return `${text.slice(0, MAX_ARGS_CHARS)}… (${text.length - MAX_ARGS_CHARS} more characters)`;
}

function setApprovalStatus(text, isError) {
  const p = $('approval-status');
  p.textContent = text;
  p.classList.toggle('error', Boolean(isError));
  p.dataset.outcome = isError ? 'error' : 'ok';
}

/**
 * Rows are kept per call id across renders, so that a reason being typed (and the focus)
 * survives the refreshes the event stream brings; only the facts that change are rewritten.
 */
const approvalRows = new Map();

function renderApprovals() {
  const box = $('approvals');
  if (!state.approvalsLoaded) return;
  const calls = state.approvals;
  $('approvals-panel').dataset.count = String(calls.length);
  $('approvals-count').textContent = calls.length ? `(${calls.length})` : '';
  const open = new Set(calls.map((c) => c.call_id));
  for (const id of [...approvalRows.keys()]) if (!open.has(id)) approvalRows.delete(id);
  if (!calls.length) {
    if (!box.querySelector(':scope > .none')) {
      box.replaceChildren(el('p', { class: 'muted none', text: 'No calls await approval.' }));
    }
    return;
  }
  let list = box.querySelector(':scope > ol');
  if (!list) {
    list = el('ol', { class: 'approval-list' });
    box.replaceChildren(list);
  }
  [...list.children].forEach((row) => {
    if (!open.has(row.dataset.callId)) row.remove();
  });
  calls.forEach((c, i) => {
    let row = approvalRows.get(c.call_id);
    if (!row) {
      row = approvalRow(c);
      approvalRows.set(c.call_id, row);
    }
    updateApprovalRow(row, c);
    if (list.children[i] !== row) list.insertBefore(row, list.children[i] || null);
  });
}

function approvalRow(c) {
  const reason = el('input', {
    type: 'text',
    class: 'approval-reason',
    maxlength: 2000,
    placeholder: 'reason (needed to reject)',
    title: 'the model is told the reason of a rejection',
    'aria-label': `reason for the decision on ${c.tool}`,
  });
  const row = el(
    'li',
    { class: 'approval', 'data-call-id': c.call_id, 'data-agent-id': c.agent_id, 'data-tool': c.tool },
    el(
      'div',
      { class: 'approval-head' },
      el('span', { class: 'mono tool', text: c.tool }),
      el('span', { class: 'kind', text: c.kind || '' }),
      el('span', { class: 'muted', text: 'for' }),
      el('a', {
        href: '#',
        class: 'agent',
        title: c.agent_id,
        onclick: (ev) => {
          ev.preventDefault();
          select(c.agent_id);
        },
      }),
      el('span', { class: 'agent-status' }),
    ),
    el('pre', { class: 'args', text: boundedArgs(c.arguments) }),
    el(
      'div',
      { class: 'times muted small' },
      el('span', { text: `requested ${fmtDateTime(c.requested_at_ms)}` }),
      ' · ',
      el('span', { class: 'deadline' }),
    ),
    el(
      'form',
      { class: 'approval-actions', onsubmit: (ev) => ev.preventDefault() },
      reason,
      el('button', { type: 'button', 'data-decision': 'approve', onclick: () => decide(c, true, row), text: 'Approve' }),
      el('button', {
        type: 'button',
        class: 'danger',
        'data-decision': 'reject',
        onclick: () => decide(c, false, row),
        text: 'Reject',
      }),
    ),
  );
  return row;
}

/** What changes while a call waits: its agent's title and status, the time left. */
function updateApprovalRow(row, c) {
  const node = state.nodes.get(c.agent_id);
  const agent = row.querySelector('.agent');
  if (agent.textContent !== titleOf(c.agent_id)) agent.textContent = titleOf(c.agent_id);
  const status = node?.status || '';
  const holder = row.querySelector('.agent-status');
  if (holder.dataset.status !== status) {
    holder.dataset.status = status;
    holder.replaceChildren(status ? badge(status) : '');
  }
  row.classList.toggle('selected', c.agent_id === state.selected);
  const deadline = c.deadline_ms
    ? `deadline ${fmtTime(c.deadline_ms)} (${fmtIn(c.deadline_ms)})`
    : 'no deadline (waits for a decision)';
  const cell = row.querySelector('.deadline');
  if (cell.textContent !== deadline) cell.textContent = deadline;
}

/** Approves or rejects one call; a rejection needs its reason, which the model is given. */
async function decide(c, approve, row) {
  const box = row.querySelector('.approval-reason');
  const reason = box.value.trim();
  const what = `${c.tool} for ${titleOf(c.agent_id)}`;
  if (!approve && !reason) {
    setApprovalStatus(`To reject ${what}, give a reason: the model is told it.`, true);
    box.focus();
    return;
  }
  const buttons = row.querySelectorAll('button');
  buttons.forEach((b) => (b.disabled = true));
  setApprovalStatus(`${approve ? 'approving' : 'rejecting'} ${what}…`);
  try {
    const body = reason ? { approve, reason } : { approve };
    const res = await api('POST', agentPath(c.agent_id, `/approvals/${encodeURIComponent(c.call_id)}`), body);
    setApprovalStatus(`${what}: ${res?.decision || (approve ? 'approved' : 'rejected')}`);
  } catch (e) {
    const why = { 409: ' — it was closed already', 404: ' — no such call' }[e instanceof ApiError ? e.status : 0] || '';
    setApprovalStatus(`${approve ? 'approve' : 'reject'} ${what} failed${why} (${errText(e)})`, true);
    buttons.forEach((b) => (b.disabled = false));
  }
  scheduleApprovalsRefresh();
  scheduleAgentRefresh(c.agent_id);
  if (c.agent_id === state.selected) scheduleDetailRefresh();
}

// ---------------------------------------------------------------- actions

const control = (name) => (id) => api('POST', agentPath(id, '/control'), { control: name });
const ACTIONS = {
  pause: { run: control('pause') },
  resume: { run: control('resume') },
  cancel: { confirm: 'Cancel this agent? Its running turn stops.', run: control('cancel') },
  reset: {
    confirm: "Reset this agent's session? Its conversation starts over.",
    run: (id) => api('POST', agentPath(id, '/reset'), {}),
  },
  compact: {
    confirm: "Compact this agent's session? Older entries are replaced by a summary.",
    run: (id) => api('POST', agentPath(id, '/compact'), {}),
  },
  close: { confirm: 'Close this agent? Its actor is freed; its history is kept.', run: control('close') },
  delete: {
    confirm: 'Delete this agent and all its descendants, with their history? This cannot be undone.',
    run: (id) => api('DELETE', agentPath(id)),
  },
};

function setActionStatus(text, isError) {
  const p = $('action-status');
  p.textContent = text;
  p.classList.toggle('error', Boolean(isError));
}

async function runAction(name) {
  const id = state.selected;
  const action = ACTIONS[name];
  if (!id || !action) return;
  const title = titleOf(id);
  if (action.confirm && !window.confirm(`${action.confirm}\n\n${title} (${id})`)) return;
  setActionStatus(`${name}…`);
  try {
    const res = await action.run(id);
    setActionStatus(`${name}: ${res?.status || res?.summary || 'done'}`);
    if (name === 'delete') {
      deselect(`${title} was deleted.`);
      scheduleTreeReload();
      return;
    }
  } catch (e) {
    setActionStatus(`${name} failed — ${errText(e)}`, true);
  }
  scheduleAgentRefresh(id);
  scheduleDetailRefresh();
}

async function sendFollowup(ev) {
  ev.preventDefault();
  const id = state.selected;
  const textBox = $('followup-text');
  const text = textBox.value.trim();
  if (!id || !text) return;
  const interrupt = $('followup-interrupt').checked;
  const button = $('followup-send');
  button.disabled = true;
  try {
    await api('POST', agentPath(id, '/messages'), { text, interrupt });
    textBox.value = '';
    $('followup-interrupt').checked = false;
    setActionStatus(`sent to ${titleOf(id)}${interrupt ? ' (interrupting)' : ''}`);
  } catch (e) {
    setActionStatus(`send failed — ${errText(e)}`, true);
  } finally {
    button.disabled = false;
  }
  scheduleAgentRefresh(id);
  scheduleDetailRefresh();
}

// ---------------------------------------------------------------- start

async function loadInfo() {
  try {
    const info = await api('GET', '/v1/info');
    $('info').textContent = `v${info.version} · model ${info.model_backend} · store ${info.store}`;
  } catch (e) {
    $('info').textContent = errText(e);
  }
}

async function main() {
  document.querySelectorAll('[data-action]').forEach((b) => b.addEventListener('click', () => runAction(b.dataset.action)));
  $('followup').addEventListener('submit', sendFollowup);
  $('followup-text').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) sendFollowup(ev);
  });
  $('refresh').addEventListener('click', () => {
    scheduleTreeReload();
    scheduleApprovalsRefresh();
  });
  $('forget-token').hidden = !token();
  $('forget-token').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    window.location.reload();
  });
  // Rate-limit and approval-deadline countdowns.
  setInterval(() => {
    if ([...state.nodes.values()].some((n) => n.status === 'waiting_rate_limit')) scheduleRender();
    if (state.approvals.some((c) => c.deadline_ms)) renderApprovals();
  }, 1000);

  await Promise.all([
    loadInfo(),
    loadTree().catch((e) => $('tree').replaceChildren(el('p', { class: 'error', text: errText(e) }))),
    loadApprovals(),
  ]);
  document.body.dataset.ready = 'true';
  streamEvents();
}

// A small hook for debugging from the console.
window.agentdDashboard = {
  state,
  refresh: () => {
    scheduleTreeReload();
    scheduleApprovalsRefresh();
  },
};

main();
