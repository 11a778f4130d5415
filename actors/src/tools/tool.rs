//! How a [`Tool`] shows itself to an agent and runs: the half of [`Tool`] that needs the
//! system (the data half lives in `crate::catalogue`).

use super::{Call, ToolContext, ToolOutcome, schema};
use crate::catalogue::{CheckedSpec, Tool};
use crate::deps::Deps;
use crate::ports::ToolSpec;
use agentd_proto::{AgentRecord, AgentdError};
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;

impl Tool {
    /// The spec `rec` is shown.
    pub fn spec(&self, rec: &AgentRecord, deps: &Deps) -> ToolSpec {
        match self {
            Tool::Builtin(tool) => tool.spec(rec, deps),
            Tool::Mcp(tool) => tool.spec(),
            Tool::Configured(tool) => tool.spec(),
        }
    }

    /// `args` checked against the spec `rec` is shown, as the tool takes them
    /// ([`schema::check`]): borrowed when nothing needed renaming.
    pub(crate) fn check_args<'a>(
        &self,
        rec: &AgentRecord,
        deps: &Deps,
        args: &'a Value,
    ) -> Result<Cow<'a, Value>, AgentdError> {
        let checked = self.checked(rec, deps)?;
        schema::check(&checked, args)
    }

    /// The spec `rec` is shown with its compiled validator, built once per catalogue version
    /// and agent type (what `rec` is shown depends on its type only).
    fn checked(&self, rec: &AgentRecord, deps: &Deps) -> Result<Arc<CheckedSpec>, AgentdError> {
        deps.tools.checked_for(&rec.agent_type, self.name(), || {
            let spec = self.spec(rec, deps);
            let validator = schema::compile(&spec.parameters)?;
            Ok(CheckedSpec::new(spec, validator))
        })
    }

    /// Runs the tool for `ctx.caller` on arguments that fit its spec, as `call`.
    pub(crate) async fn run(
        &self,
        ctx: &ToolContext,
        call: Call,
        args: &Value,
    ) -> Result<ToolOutcome, AgentdError> {
        match self {
            Tool::Builtin(tool) => tool.run(ctx, call, args).await,
            Tool::Mcp(tool) => tool.run(ctx, args).await.map(ToolOutcome::Value),
            Tool::Configured(tool) => tool.run(ctx, call.id, args).await,
        }
    }
}
