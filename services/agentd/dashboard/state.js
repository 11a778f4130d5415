// Floor 1: what the page knows (one `state` object, written by the panels and the event
// stream) and the lookups every panel makes in it.

import { fmtTime } from './util.js';

export const PRIORITY_RANK = { critical: 0, high: 1, normal: 2, low: 3 };
export const MAX_EVENTS = 500;

export const state = {
  roots: [],
  nodes: new Map(), // agent id → tree node (children: nodes)
  collapsed: new Set(),
  selected: null,
  traceUrl: null, // /v1/info's trace_url: a link template for an agent's trace_id
  detailView: null, // the selected agent's last inspect view (also when it is not in the tree)
  events: [], // newest first: {at, type, data}
  resumeAt: new Map(), // agent id → resume time (ms) from rate_limited events
  liveText: new Map(), // agent id → {stepId, text}: the answer it is streaming now (text_delta events)
  lastEventId: null, // the id of the last event received, to resume the stream after a drop
  eventCount: 0,
  approvals: [], // open calls awaiting approval, oldest first (GET /v1/tool_calls)
  approvalsLoaded: false,
};

export const agentPath = (id, rest = '') => `/v1/agents/${encodeURIComponent(id)}${rest}`;
export const titleOf = (id) => state.nodes.get(id)?.title || id;
export const awaitingOf = (agentId) => state.approvals.filter((c) => c.agent_id === agentId);

export const tokensOf = (u) =>
  u ? (Number(u.input) || 0) + (Number(u.output) || 0) + (Number(u.cache_write) || 0) + (Number(u.cache_read) || 0) : 0;

/** The agents an event is about. */
export function eventAgents(data) {
  return [data?.agent_id, data?.parent_id, data?.child_id].filter((x) => typeof x === 'string');
}

export function isWaiting(status) {
  return status === 'queued' || (typeof status === 'string' && status.startsWith('waiting_'));
}

/** When a rate-limited agent resumes: the record's field, the `rate_limited` event, or the
 * time in its status reason ("provider rate limit; resumes at <ms>"). */
export function resumeAtOf(n) {
  const fromReason = /resumes at (\d{12,})/.exec(n.status_reason || '')?.[1];
  return n.resume_at_ms ?? state.resumeAt.get(n.agent_id) ?? (fromReason ? Number(fromReason) : null);
}

/** A status reason with agent ids replaced by titles and epoch times by clock times. */
export function humanReason(reason) {
  if (!reason) return '';
  return String(reason)
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, (id) => titleOf(id))
    .replace(/\b(1\d{12})\b/g, (ms) => fmtTime(Number(ms)));
}
