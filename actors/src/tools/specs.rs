//! The specs an agent is shown: its visible tools' specs, shared per kind of agent through the
//! [`ToolCatalogue`](crate::catalogue::ToolCatalogue)'s cache and rebuilt when it changes.

use super::visibility::visible_tools;
use crate::catalogue::VisibleSpecs;
use crate::deps::Deps;
use agentd_proto::AgentRecord;

impl VisibleSpecs {
    /// Builds them again for `rec` if the catalogue changed since they were built.
    pub fn refresh(&mut self, rec: &AgentRecord, deps: &Deps) {
        if !self.is_current(&deps.tools) {
            *self = visible_specs(rec, deps);
        }
    }
}

/// The specs the model is shown for `rec` (shared by every agent of its type that sees the
/// same tools).
pub fn visible_specs(rec: &AgentRecord, deps: &Deps) -> VisibleSpecs {
    let catalogue = &deps.tools;
    let version = catalogue.version();
    let tools = visible_tools(rec, deps);
    catalogue.specs_for(version, &rec.agent_type, tools, |tools| {
        tools.iter().map(|t| t.spec(rec, deps)).collect()
    })
}
