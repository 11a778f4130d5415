//! The A2A operations, whichever binding carries them: the request's parameters in (JSON as
//! the specification's ProtoJSON shapes them), a response object or an [`A2aError`] out.
//!
//! | module | what it holds |
//! |---|---|
//! | `params` | parameters as the bindings hand them: ids, numbers, booleans, `historyLength` |
//! | `message` | a client's message checked: its parts as the agent's text |
//! | `context` | a `contextId`: a context agentd opened, or one the client chose, mapped to its root |
//! | `send` | `SendMessage` up to the item in the context's inbox, and the wait for its end |
//! | `query` | `GetTask`, `ListTasks` |
//! | `cancel` | `CancelTask`, and the check `SubscribeToTask` makes |

mod cancel;
mod context;
mod message;
mod params;
mod query;
mod send;

pub use cancel::{cancel_task, subscribable};
pub use query::{get_task, list_tasks};
pub use send::{send, wait};
