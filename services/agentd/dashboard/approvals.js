// Floor 3, panel: the tool calls that wait for a person's decision, with Approve and Reject.

import { ApiError, api, errText } from './api.js';
import {
  scheduleAgentRefresh,
  scheduleApprovalsRefresh,
  scheduleDetailRefresh,
  scheduleRender,
  select,
} from './schedule.js';
import { agentPath, awaitingOf, state, titleOf } from './state.js';
import { $, badge, el, fmtDateTime, fmtIn, fmtTime } from './util.js';

/** How much of a call's arguments the panel shows (they can be any size). */
const MAX_ARGS_CHARS = 2000;

let approvalsSeq = 0;

/**
 * The calls that wait for a person's decision (the whole service: the page sends no scope).
 * Loads may overlap; only the newest one's answer is shown.
 */
export async function loadApprovals() {
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
  if (state.selected) scheduleRender(); // the selected agent's details list its gated calls
}

/** The selected agent's gated calls in its details: links to their rows in the panel. */
export function awaitingLinks(agentId) {
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

export function renderApprovals() {
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
