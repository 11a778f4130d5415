// Floor 3, panel: the selected agent — its facts, thread (with the answer it is streaming),
// checkpoints and events, and the status line of its controls.

import { awaitingLinks } from './approvals.js';
import { api, errText } from './api.js';
import { agentHash, forgetSelectionInUrl, scheduleRender, select } from './schedule.js';
import { awaitingOf, eventAgents, humanReason, resumeAtOf, state, titleOf, tokensOf, agentPath } from './state.js';
import { patchNode, rollUp } from './tree.js';
import { $, badge, el, fmtCost, fmtDateTime, fmtIn, fmtTime } from './util.js';

let detailSeq = 0;
let lastThreadKey = '';

/** Shows the selected agent (`changed`: another one than before) and refreshes its details. */
export function showSelection(changed) {
  if (changed) {
    lastThreadKey = '';
    $('thread').replaceChildren(el('p', { class: 'muted', text: 'loading…' }));
    $('checkpoints').replaceChildren();
    setActionStatus('');
  }
  $('detail-empty').hidden = true;
  $('detail').hidden = false;
  renderEvents();
  renderLiveText();
  refreshDetail();
}

export function deselect(message) {
  state.selected = null;
  forgetSelectionInUrl();
  $('detail').hidden = true;
  $('detail-empty').hidden = false;
  $('detail-empty').textContent = message || 'Select an agent in the tree.';
  scheduleRender();
}

export function setActionStatus(text, isError) {
  const p = $('action-status');
  p.textContent = text;
  p.classList.toggle('error', Boolean(isError));
}

export async function refreshDetail() {
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

export function renderDetailHead() {
  const id = state.selected;
  if (!id) return;
  const n = state.nodes.get(id) || (state.detailView?.agent_id === id ? state.detailView : null);
  if (!n) return;
  const usage = n.usage || {};
  const rows = [
    ['id', el('code', { text: n.agent_id })],
    ['type', n.agent_type],
    ['status', [badge(n.status), n.status_reason ? ` ${humanReason(n.status_reason)}` : '']],
    n.parent_id ? ['parent', el('a', { href: agentHash(n.parent_id), onclick: (ev) => (ev.preventDefault(), select(n.parent_id)), text: titleOf(n.parent_id) })] : null,
    ['priority', n.priority || 'normal'],
    n.phase != null || n.progress > 0
      ? ['phase', [n.phase != null ? String(n.phase) : '', n.progress > 0 ? ` (${Math.round(n.progress * 100)}%)` : '']]
      : null,
    n.current_step ? ['step', n.current_step] : null,
    ['turns', `${n.turns ?? 0}${n.attempts > 1 ? ` (attempt ${n.attempts})` : ''}`],
    n.trace_id
      ? [
          'trace',
          state.traceUrl
            ? el('a', { href: state.traceUrl.replaceAll('{trace_id}', n.trace_id), target: '_blank', rel: 'noopener', text: n.trace_id })
            : el('code', { text: n.trace_id }),
        ]
      : null,
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

/** The selected agent's answer while it arrives, below its thread. */
export function renderLiveText() {
  const box = $('live-text');
  const live = state.liveText.get(state.selected);
  box.hidden = !live;
  box.dataset.stepId = live ? live.stepId : '';
  $('live-text-body').textContent = live ? live.text : '';
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

export function renderEvents() {
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
