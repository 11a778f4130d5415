// Floor 4: the live event stream. `/v1/events` is read with fetch() and a streaming reader (so
// that it can carry the bearer token), resumed after a drop with `Last-Event-ID`; each event
// patches what the page knows at once and schedules the refreshes it implies.

import { authedFetch } from './api.js';
import { renderEvents, renderLiveText } from './detail.js';
import {
  scheduleAgentRefresh,
  scheduleApprovalsRefresh,
  scheduleDetailRefresh,
  scheduleRender,
  scheduleTreeReload,
} from './schedule.js';
import { MAX_EVENTS, eventAgents, state, tokensOf } from './state.js';
import { rollUp } from './tree.js';
import { $, sleep } from './util.js';

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
export async function streamEvents() {
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
