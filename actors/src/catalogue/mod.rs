//! [`ToolCatalogue`]: the tools agents may be shown, with a version that changes whenever that
//! set changes, and the specs built from it. Plain data about tools: what a name resolves to
//! and who may see it. How a tool is shown to an agent and how it runs is the `tools` module's.
//!
//! | module | what it holds |
//! |---|---|
//! | [`tool`] | [`Tool`]: what a call's name resolves to (built-in, configured, or an MCP server's) |
//! | [`builtin`] | [`BuiltinTool`] and its [`ToolGroup`]s: names, aliases, who may see them |
//! | [`configured`] | [`ConfiguredTool`]: `[tools.<name>]`, a service's or a webhook's |
//! | [`mcp`] | [`McpTool`]: a tool of a configured MCP server, its exposed name and spec |
//! | [`pattern`] | the grammar of a type's `tools` and a spawn's `allowed_tools`, checked at start |
//!
//! Building an agent's specs (JSON schemas) costs about as much as handling one message, so
//! they are built once per kind of agent (its type and the tools it sees) and shared, and each
//! agent keeps its own [`VisibleSpecs`]. Both carry the catalogue version they were built
//! for: once the catalogue changes they are stale, and the next look-up builds them again.
//!
//! The tools of MCP servers come and go at run time (a server lists them when it connects, and
//! again when it says they changed): the catalogue asks the [`McpTools`] port for them, and its
//! version moves with the port's.

mod builtin;
mod configured;
mod mcp;
pub mod pattern;
mod tool;

pub(crate) use builtin::unknown;
pub use builtin::{BuiltinTool, ToolGroup};
pub use configured::{Approval, ConfiguredRun, ConfiguredTool, Secret, check_name};
pub use mcp::McpTool;
pub use pattern::{ToolPattern, any_matches, check_type_tools};
pub use tool::Tool;

use crate::hashing::FastHashSet;
use crate::ports::{McpTools, ToolSpec, WebhookClient, split_exposed};
use agentd_proto::AgentdError;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The tools of one process: the built-in ones, those of `[tools.<name>]`, then those of the
/// configured MCP servers.
#[derive(Default)]
pub struct ToolCatalogue {
    /// The tools of `[tools.<name>]`, in name order.
    configured: Vec<Arc<ConfiguredTool>>,
    /// What calls the webhook tools (`None`: a process without any).
    webhooks: Option<Arc<dyn WebhookClient>>,
    /// Bumped by [`Self::changed`].
    version: AtomicU64,
    /// (agent type, visible tools) → the specs shown, with the version they were built for.
    specs: Mutex<HashMap<(String, Vec<Tool>), VisibleSpecs>>,
    /// agent type → tool name → the spec that type is shown and its compiled validator, with
    /// the version they were built for (looked up by `&str`, without building a key).
    checked: Mutex<HashMap<String, CheckedOfType>>,
    /// The MCP servers' tools, if any server is configured.
    mcp: Option<Arc<dyn McpTools>>,
}

/// One tool's spec as one kind of agent is shown it, with the validator its calls' arguments
/// are checked by: compiled once per catalogue version, not once per call.
pub struct CheckedSpec {
    /// What the model is shown.
    pub spec: ToolSpec,
    /// `spec.parameters`, compiled.
    pub validator: jsonschema::Validator,
    /// The property names of a flat schema (an object whose properties hold no objects or
    /// lists of their own), looked up by hash: most calls' fields are all spelled as it says.
    /// `None` for any other schema.
    flat_names: Option<FastHashSet<String>>,
}

impl CheckedSpec {
    /// `spec` with its compiled `validator`.
    pub fn new(spec: ToolSpec, validator: jsonschema::Validator) -> Self {
        let flat_names = spec
            .parameters
            .get("properties")
            .and_then(serde_json::Value::as_object)
            .filter(|props| {
                props
                    .values()
                    .all(|p| p.get("properties").is_none() && p.get("items").is_none())
            })
            .map(|props| props.keys().cloned().collect());
        CheckedSpec {
            spec,
            validator,
            flat_names,
        }
    }

    /// The property names, if the schema is flat (see the field).
    pub fn flat_names(&self) -> Option<&FastHashSet<String>> {
        self.flat_names.as_ref()
    }
}

impl std::fmt::Debug for CheckedSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckedSpec")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

/// One agent type's checked specs: tool name → (the version they were built for, the spec).
type CheckedOfType = HashMap<String, (u64, Arc<CheckedSpec>)>;

/// At most this many checked specs are kept per agent type (then that type's start over): MCP
/// servers whose tool lists change often would otherwise grow the cache without bound.
const CHECKED_PER_TYPE: usize = 512;

/// The specs one kind of agent is shown, and the catalogue version they were built for.
#[derive(Debug, Clone)]
pub struct VisibleSpecs {
    version: u64,
    specs: Arc<Vec<ToolSpec>>,
}

impl ToolCatalogue {
    /// A catalogue with the configured `tools` (names checked: not `mcp__…`, no built-in's,
    /// no two alike), whose webhooks `webhooks` calls.
    pub fn with_configured(
        tools: Vec<ConfiguredTool>,
        webhooks: Option<Arc<dyn WebhookClient>>,
    ) -> Result<Self, AgentdError> {
        let mut configured: Vec<Arc<ConfiguredTool>> = Vec::with_capacity(tools.len());
        for tool in tools {
            check_name(&tool.name)?;
            if configured.iter().any(|t| t.name == tool.name) {
                return Err(AgentdError::new(
                    agentd_proto::ErrorCode::InvalidArgument,
                    format!("[tools.{}] is defined twice", tool.name),
                ));
            }
            configured.push(Arc::new(tool));
        }
        configured.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(ToolCatalogue {
            configured,
            webhooks,
            ..ToolCatalogue::default()
        })
    }

    /// Checks a configured tool's name: `^[A-Za-z0-9_-]{1,64}$`, not `mcp__…`, no built-in
    /// tool's.
    pub fn check_name(name: &str) -> Result<(), AgentdError> {
        check_name(name)
    }

    /// What calls the webhook tools, if this process has any.
    pub fn webhooks(&self) -> Option<&Arc<dyn WebhookClient>> {
        self.webhooks.as_ref()
    }

    /// The tools of `[tools.<name>]`, in name order.
    pub fn configured(&self) -> &[Arc<ConfiguredTool>] {
        &self.configured
    }

    /// A catalogue that offers the tools of `mcp`'s servers besides the built-in ones.
    pub fn with_mcp(mcp: Arc<dyn McpTools>) -> Self {
        ToolCatalogue {
            mcp: Some(mcp),
            ..ToolCatalogue::default()
        }
    }

    /// Offers the tools of `mcp`'s servers besides the others.
    pub fn add_mcp(&mut self, mcp: Arc<dyn McpTools>) {
        self.mcp = Some(mcp);
    }

    /// The MCP servers' tools, if any server is configured.
    pub fn mcp(&self) -> Option<&Arc<dyn McpTools>> {
        self.mcp.as_ref()
    }

    /// The configured MCP server names.
    pub fn mcp_servers(&self) -> Vec<String> {
        self.mcp.as_ref().map(|m| m.servers()).unwrap_or_default()
    }

    /// The version of the set of tools; it changes whenever the set does (its own changes
    /// plus the MCP servers', both only ever growing).
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire) + self.mcp.as_ref().map_or(0, |m| m.version())
    }

    /// Records that the set of tools changed: specs built before are stale. Answers the new
    /// version.
    pub fn changed(&self) -> u64 {
        self.version.fetch_add(1, Ordering::AcqRel);
        self.version()
    }

    /// Every tool, in the order agents are shown them: the built-in ones, then the MCP
    /// servers' as they list them now.
    pub fn tools(&self) -> impl Iterator<Item = Tool> + '_ {
        let mcp = self.mcp.as_ref().map(|m| m.tools()).unwrap_or_default();
        BuiltinTool::ALL
            .into_iter()
            .map(Tool::Builtin)
            .chain(self.configured.iter().cloned().map(Tool::Configured))
            .chain((0..mcp.len()).map(move |i| Tool::Mcp(McpTool(mcp[i].clone()))))
    }

    /// The tool `name` (or an alias) names, if there is one. An MCP tool resolves while its
    /// server lists it.
    pub fn resolve(&self, name: &str) -> Option<Tool> {
        if let Some(tool) = BuiltinTool::named(name) {
            return Some(Tool::Builtin(tool));
        }
        if let Some(tool) = self.configured.iter().find(|t| t.name == name) {
            return Some(Tool::Configured(tool.clone()));
        }
        split_exposed(name)?;
        let mcp = self.mcp.as_ref()?.tools();
        mcp.iter()
            .find(|t| t.exposed == name)
            .map(|t| Tool::Mcp(McpTool(t.clone())))
    }

    /// Tool `name`'s checked spec for agents of `agent_type`, built by `build` unless it was
    /// built for the current version already. Built meanwhile a change is answered but not
    /// kept, as [`Self::specs_for`] does.
    pub(crate) fn checked_for<E>(
        &self,
        agent_type: &str,
        name: &str,
        build: impl FnOnce() -> Result<CheckedSpec, E>,
    ) -> Result<Arc<CheckedSpec>, E> {
        let version = self.version();
        {
            let cache = self.checked.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((built, checked)) = cache.get(agent_type).and_then(|m| m.get(name))
                && *built == version
            {
                return Ok(checked.clone());
            }
        }
        let checked = Arc::new(build()?);
        if version == self.version() {
            let mut cache = self.checked.lock().unwrap_or_else(|p| p.into_inner());
            let of_type = cache.entry(agent_type.to_string()).or_default();
            if of_type.len() >= CHECKED_PER_TYPE {
                of_type.clear();
            }
            of_type.insert(name.to_string(), (version, checked.clone()));
        }
        Ok(checked)
    }

    /// The specs of `tools` for agents of `agent_type`, built by `build` unless they were
    /// built for this `version` already. `version` is the catalogue's version when `tools`
    /// were chosen: specs of a set chosen before a change are built but not kept, and stay
    /// stale.
    pub(crate) fn specs_for(
        &self,
        version: u64,
        agent_type: &str,
        tools: Vec<Tool>,
        build: impl FnOnce(&[Tool]) -> Vec<ToolSpec>,
    ) -> VisibleSpecs {
        let key = (agent_type.to_string(), tools);
        let mut cache = self.specs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(specs) = cache.get(&key)
            && specs.version == version
        {
            return specs.clone();
        }
        let specs = VisibleSpecs {
            version,
            specs: Arc::new(build(&key.1)),
        };
        if version == self.version() {
            cache.insert(key, specs.clone());
        }
        specs
    }
}

/// A copy has the same version and builds its own specs.
impl Clone for ToolCatalogue {
    fn clone(&self) -> Self {
        ToolCatalogue {
            configured: self.configured.clone(),
            webhooks: self.webhooks.clone(),
            version: AtomicU64::new(self.version.load(Ordering::Acquire)),
            specs: Mutex::default(),
            checked: Mutex::default(),
            mcp: self.mcp.clone(),
        }
    }
}

impl std::fmt::Debug for ToolCatalogue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCatalogue")
            .field("version", &self.version())
            .finish_non_exhaustive()
    }
}

impl VisibleSpecs {
    /// The catalogue version they were built for.
    #[cfg(test)]
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The specs, in the order the model is shown them.
    pub fn specs(&self) -> &Arc<Vec<ToolSpec>> {
        &self.specs
    }

    /// Whether they were built for `catalogue`'s current version.
    pub fn is_current(&self, catalogue: &ToolCatalogue) -> bool {
        self.version == catalogue.version()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }

    #[test]
    fn checked_specs_are_built_once_per_version_and_type() {
        let catalogue = ToolCatalogue::default();
        let builds = Cell::new(0);
        let look_up = |agent_type: &str| {
            catalogue
                .checked_for(agent_type, "current_time", || {
                    builds.set(builds.get() + 1);
                    let spec = spec("current_time");
                    let validator =
                        jsonschema::validator_for(&spec.parameters).map_err(|e| e.to_string())?;
                    Ok::<_, String>(CheckedSpec::new(spec, validator))
                })
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let first = look_up("plain");
        let again = look_up("plain");
        assert_eq!(builds.get(), 1, "built once per version and type");
        assert!(Arc::ptr_eq(&first, &again));
        look_up("lead");
        assert_eq!(builds.get(), 2, "each type is shown its own spec");
        catalogue.changed();
        let fresh = look_up("plain");
        assert_eq!(builds.get(), 3, "a new version builds it again");
        assert!(!Arc::ptr_eq(&first, &fresh));
    }

    #[test]
    fn specs_are_shared_within_a_version_and_built_afresh_after_a_change() {
        let catalogue = ToolCatalogue::default();
        let builds = Cell::new(0);
        let look_up = |catalogue: &ToolCatalogue| {
            let tools = vec![Tool::Builtin(BuiltinTool::CurrentTime)];
            catalogue.specs_for(catalogue.version(), "plain", tools, |tools| {
                builds.set(builds.get() + 1);
                tools.iter().map(|t| spec(t.name())).collect()
            })
        };
        let first = look_up(&catalogue);
        let again = look_up(&catalogue);
        assert_eq!(builds.get(), 1, "built once per version");
        assert!(Arc::ptr_eq(first.specs(), again.specs()));
        assert!(first.is_current(&catalogue));

        assert_eq!(catalogue.changed(), 1);
        assert!(
            !first.is_current(&catalogue),
            "a change makes held specs stale"
        );
        let fresh = look_up(&catalogue);
        assert_eq!(builds.get(), 2, "a new version builds them again");
        assert_eq!(fresh.version(), 1);
        assert!(!Arc::ptr_eq(first.specs(), fresh.specs()));
        assert!(fresh.is_current(&catalogue));
    }

    #[test]
    fn specs_chosen_before_a_change_are_not_kept() {
        let catalogue = ToolCatalogue::default();
        let chosen_at = catalogue.version();
        catalogue.changed();
        let tools = || vec![Tool::Builtin(BuiltinTool::CurrentTime)];
        let late = catalogue.specs_for(chosen_at, "plain", tools(), |_| vec![spec("old")]);
        assert!(!late.is_current(&catalogue));
        let now = catalogue.specs_for(catalogue.version(), "plain", tools(), |_| vec![spec("new")]);
        assert_eq!(now.specs()[0].name, "new");
    }

    /// MCP servers whose tools a test sets.
    #[derive(Default)]
    struct FakeMcp {
        version: AtomicU64,
        tools: Mutex<Arc<Vec<Arc<crate::ports::McpToolDef>>>>,
    }

    impl FakeMcp {
        fn list(&self, names: &[&str]) {
            let tools = names
                .iter()
                .map(|n| {
                    Arc::new(crate::ports::McpToolDef {
                        server: "files".into(),
                        tool: (*n).into(),
                        exposed: format!("mcp__files__{n}"),
                        description: String::new(),
                        parameters: serde_json::json!({"type": "object"}),
                        needs_approval: false,
                    })
                })
                .collect();
            *self.tools.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(tools);
            self.version.fetch_add(1, Ordering::AcqRel);
        }
    }

    #[async_trait::async_trait]
    impl McpTools for FakeMcp {
        fn version(&self) -> u64 {
            self.version.load(Ordering::Acquire)
        }
        fn servers(&self) -> Vec<String> {
            vec!["files".into()]
        }
        fn tools(&self) -> Arc<Vec<Arc<crate::ports::McpToolDef>>> {
            self.tools.lock().unwrap_or_else(|p| p.into_inner()).clone()
        }
        fn status(&self) -> Vec<crate::ports::McpServerStatus> {
            Vec::new()
        }
        async fn call(
            &self,
            _: &crate::ports::McpToolDef,
            _: serde_json::Value,
        ) -> Result<crate::ports::McpCallResult, agentd_proto::AgentdError> {
            Err(agentd_proto::AgentdError::new(
                agentd_proto::ErrorCode::ToolFailed,
                "not called in these tests",
            ))
        }
    }

    #[test]
    fn mcp_tools_resolve_while_listed_and_a_new_listing_moves_the_version() {
        let mcp = Arc::new(FakeMcp::default());
        let catalogue = ToolCatalogue::with_mcp(mcp.clone());
        assert_eq!(catalogue.resolve("mcp__files__read_text_file"), None);
        let before = catalogue.version();
        mcp.list(&["read_text_file", "write_file"]);
        assert!(catalogue.version() > before, "a listing is a change");
        let read = catalogue.resolve("mcp__files__read_text_file");
        assert_eq!(
            read.as_ref().map(Tool::name),
            Some("mcp__files__read_text_file")
        );
        assert_eq!(
            catalogue.tools().count(),
            BuiltinTool::ALL.len() + 2,
            "built-in tools, then the servers'"
        );
        assert_eq!(catalogue.clone().version(), catalogue.version());
        mcp.list(&["write_file"]);
        assert_eq!(catalogue.resolve("mcp__files__read_text_file"), None);
    }

    #[test]
    fn names_resolve_to_builtin_tools_or_nothing() {
        let catalogue = ToolCatalogue::default();
        assert_eq!(
            catalogue.resolve("spawn_subagent"),
            Some(Tool::Builtin(BuiltinTool::SpawnAgent))
        );
        assert_eq!(catalogue.resolve("mcp__files__read_text_file"), None);
        assert_eq!(catalogue.tools().count(), BuiltinTool::ALL.len());
    }
}
