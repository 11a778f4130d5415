//! The Claude Code CLI's stream-json protocol, as plain code (no I/O): the flags agentd starts
//! the CLI with, the `user` line each agentd message becomes, and the assembly of the lines
//! the CLI writes during one turn into one [`ModelResponse`](agentd_ports::ModelResponse).
//!
//! The CLI writes, per turn: a `system` line with `subtype: "init"` (its `session_id`), then
//! `assistant` lines (one message's content blocks: `text`, `tool_use`, `thinking`, each with
//! the message's `id` and its `usage` as known then), `user` lines with the `tool_result`s of the
//! tools it ran itself, and one `result` line that ends the turn: `is_error` (not `subtype`,
//! which says `success` on a failed request), `result` (the answer), `usage` in four kinds, and
//! its own cost figures. A request its usage limits refused is reported by a
//! `rate_limit_event` whose `rate_limit_info` has `status: "rejected"` and `resetsAt` (seconds
//! since the epoch), before the `result` line that fails with `api_error_status: 429`. Lines of
//! its sub-agents (a non-null `parent_tool_use_id`) are its own business and are skipped.
//!
//! | module | what it holds |
//! |---|---|
//! | [`launch`] | the flags the CLI is started with |
//! | [`message`] | the `user` line an agentd message becomes: what the CLI has not seen yet |
//! | [`turn`] | the lines of one turn assembled into one [`ModelResponse`](agentd_ports::ModelResponse) |
//! | [`usage`] | usage in four kinds, and the turn's cost, as the CLI reports them |

mod launch;
mod message;
mod turn;
mod usage;

pub use launch::{Launch, flags};
pub use message::{COMPACT, message_text, user_line};
pub use turn::{DEFAULT_RATE_LIMIT_WAIT_MS, Ended, Reading, TurnAssembly, rate_limit_wait};
pub use usage::four_kinds;
