//! The page registry: the declarative file that says which payload types,
//! tools and actions exist (definitions that know nothing of pages) and which
//! pages, tabs and subtabs use them (docs/architecture.md#registry-and-pages).
//! It is read and validated once
//! at start-up — every problem named by file, entry and cause — and then
//! shared read-only (`Arc<Registry>`) by every turn, which resolves the
//! user's page through it and builds the system prompt from the result.
//!
//! The file format is described in `file`; the shipped example
//! (`deploy/config/registry.yaml`, the "Tables" example app) is
//! [`Registry::example`].

mod error;
mod file;
pub mod mcp;
mod model;
mod resolve;
mod templates;
mod validate;
pub mod wire;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

pub use error::{Problem, RegistryError};
pub use model::{
    ActionDef, Handler, Limits, PageRef, PayloadTypeDef, ServerActionDef, ToolDef, ToolEndpointDef,
};
pub use resolve::ResolvedPage;
pub use templates::TemplateError;

use crate::text::compact;
use model::PageDef;
use templates::TemplateSet;

/// The shipped example registry (the "Tables" example app).
const EXAMPLE: &str = include_str!("../../../deploy/config/registry.yaml");
/// The example's origin in error messages.
const EXAMPLE_ORIGIN: &str = "deploy/config/registry.yaml";

/// A validated, immutable registry.
#[derive(Debug)]
pub struct Registry {
    origin: String,
    limits: Limits,
    preamble: String,
    help: String,
    payload_types: Vec<Arc<PayloadTypeDef>>,
    tools: Vec<Arc<ToolDef>>,
    actions: Vec<Arc<ActionDef>>,
    streams: HashMap<String, String>,
    pages: HashMap<String, PageDef>,
    templates: TemplateSet,
    param_validators: HashMap<String, Arc<jsonschema::Validator>>,
    /// Payload schemas as canonical one-line JSON, rendered once for the prompt.
    payload_schema_texts: HashMap<String, String>,
    /// Action params schemas as canonical one-line JSON, rendered once.
    params_schema_texts: HashMap<String, String>,
    /// The runner's MCP tools, for the pages' `SERVER/TOOL` rules.
    mcp: Arc<mcp::McpCatalog>,
}

/// Why an action's params were refused.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// No such action is registered.
    #[error("unknown action `{0}`")]
    Unknown(String),
    /// The action is handled by the client, not the server.
    #[error("action `{0}` is handled by the client")]
    NotServer(String),
    /// The params do not satisfy the action's `params_schema`.
    #[error("invalid params for action `{action}`: {}", violations.iter().map(|(p, m)| format!("{p}: {m}")).collect::<Vec<_>>().join("; "))]
    InvalidParams {
        /// The action.
        action: String,
        /// `(JSON pointer, problem)` per violation.
        violations: Vec<(String, String)>,
    },
    /// The message template failed to render.
    #[error(transparent)]
    Template(#[from] TemplateError),
}

impl Registry {
    /// Reads and validates the registry file at `path`.
    pub fn load(path: &Path) -> Result<Registry, RegistryError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| RegistryError::Io {
            origin: origin.clone(),
            source,
        })?;
        Self::from_str(&text, &origin)
    }

    /// Parses and validates registry `text`; `origin` names it in errors.
    #[allow(clippy::should_implement_trait)]
    pub fn from_str(text: &str, origin: &str) -> Result<Registry, RegistryError> {
        let de = serde_yaml_ng::Deserializer::from_str(text);
        let file: file::RegistryFile = serde_path_to_error::deserialize(de).map_err(|e| {
            let entry = e.path().to_string();
            RegistryError::Syntax {
                origin: origin.to_owned(),
                message: strip_path_prefix(&e.inner().to_string(), &entry),
                entry,
            }
        })?;
        let built = validate::build(file).map_err(|problems| RegistryError::Invalid {
            origin: origin.to_owned(),
            problems,
        })?;
        let payload_schema_texts = built
            .payload_types
            .iter()
            .map(|p| (p.name.clone(), compact(&p.schema)))
            .collect();
        let params_schema_texts = built
            .actions
            .iter()
            .filter_map(|a| {
                a.params_schema
                    .as_ref()
                    .map(|s| (a.action.clone(), compact(s)))
            })
            .collect();
        Ok(Registry {
            origin: origin.to_owned(),
            limits: built.limits,
            preamble: built.preamble,
            help: built.help,
            payload_types: built.payload_types,
            tools: built.tools,
            actions: built.actions,
            streams: built.streams,
            pages: built.pages,
            templates: built.templates,
            param_validators: built.param_validators,
            payload_schema_texts,
            params_schema_texts,
            mcp: Arc::default(),
        })
    }

    /// The shipped example registry, for tests and as the no-config default.
    pub fn example() -> Registry {
        match Self::from_str(EXAMPLE, EXAMPLE_ORIGIN) {
            Ok(r) => r,
            // The example is validated by this crate's tests; reaching this
            // arm means the binary was built from a broken tree.
            Err(e) => panic!("the shipped example registry is invalid: {e}"),
        }
    }

    /// Where the registry was read from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The prompt limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Prompt section 1, the global preamble (may be empty).
    pub fn preamble(&self) -> &str {
        &self.preamble
    }

    /// Prompt section 7, the app's help text (may be empty).
    pub fn help(&self) -> &str {
        &self.help
    }

    /// The runner's MCP tools as last read.
    pub fn mcp_catalog(&self) -> &Arc<mcp::McpCatalog> {
        &self.mcp
    }

    /// What `page` resolves to: global + page + tab + subtab; the MCP
    /// tools of their rules as the runner last listed them.
    pub fn resolve(&self, page: &PageRef) -> ResolvedPage {
        let mut out = ResolvedPage::globals(
            page.clone(),
            &self.payload_types,
            &self.tools,
            &self.actions,
        );
        let Some(def) = self.pages.get(&page.page) else {
            return out;
        };
        out.known = true;
        out.mid_answer_failover = def.mid_answer_failover;
        out.model.clone_from(&def.model);
        out.models_allowed.clone_from(&def.models_allowed);
        out.attachments.clone_from(&def.attachments);
        out.describe_unsupported_attachments = def.describe_unsupported_attachments;
        out.add_scope(&def.scope, &self.mcp);
        let Some((_, tab)) = def
            .tabs
            .iter()
            .find(|(name, _)| !page.tab.is_empty() && *name == page.tab)
        else {
            return out;
        };
        out.tab_known = true;
        out.add_scope(&tab.scope, &self.mcp);
        if let Some((_, sub)) = tab
            .subtabs
            .iter()
            .find(|(name, _)| !page.subtab.is_empty() && *name == page.subtab)
        {
            out.subtab_known = true;
            out.add_scope(&sub.scope, &self.mcp);
        }
        out
    }

    /// The instructions for a stream id, if any are registered.
    pub fn stream_instructions(&self, stream_id: &str) -> Option<&str> {
        self.streams.get(stream_id).map(String::as_str)
    }

    /// An action (client or server handled) by identifier.
    pub fn action(&self, name: &str) -> Option<&ActionDef> {
        self.actions
            .iter()
            .find(|a| a.action == name)
            .map(Arc::as_ref)
    }

    /// A payload type by name.
    pub fn payload_type(&self, name: &str) -> Option<&PayloadTypeDef> {
        self.payload_types
            .iter()
            .find(|p| p.name == name)
            .map(Arc::as_ref)
    }

    /// Whether `page` is a registered page.
    pub fn has_page(&self, page: &str) -> bool {
        self.pages.contains_key(page)
    }

    /// A tool by name.
    pub fn tool(&self, name: &str) -> Option<&ToolDef> {
        self.tools.iter().find(|t| t.name == name).map(Arc::as_ref)
    }

    /// A payload type's schema as canonical one-line JSON (sorted keys).
    pub fn payload_schema_text(&self, name: &str) -> Option<&str> {
        self.payload_schema_texts.get(name).map(String::as_str)
    }

    /// An action's params schema as canonical one-line JSON (sorted keys).
    pub fn params_schema_text(&self, action: &str) -> Option<&str> {
        self.params_schema_texts.get(action).map(String::as_str)
    }

    /// The user message a server action's turn sends: the action's params
    /// are checked against its `params_schema`, then its `message_template`
    /// is rendered with the params' fields as variables.
    pub fn render_action_message(
        &self,
        action: &str,
        params: &serde_json::Value,
    ) -> Result<String, ActionError> {
        let def = self
            .action(action)
            .ok_or_else(|| ActionError::Unknown(action.to_owned()))?;
        if def.server.is_none() {
            return Err(ActionError::NotServer(action.to_owned()));
        }
        if let Some(validator) = self.param_validators.get(action) {
            let violations: Vec<(String, String)> = validator
                .iter_errors(params)
                .map(|e| (e.instance_path().to_string(), e.to_string()))
                .collect();
            if !violations.is_empty() {
                return Err(ActionError::InvalidParams {
                    action: action.to_owned(),
                    violations,
                });
            }
        }
        let rendered = self
            .templates
            .render(&format!("actions.{action}.message_template"), params)?;
        Ok(rendered.trim().to_owned())
    }

    /// Renders the resolved page's context templates (page, tab, subtab)
    /// with the UI state's fields as variables, joining the non-empty
    /// outputs with newlines; `Ok(None)` when the page has no template.
    pub fn render_context(
        &self,
        page: &ResolvedPage,
        state: &serde_json::Value,
    ) -> Result<Option<String>, TemplateError> {
        if page.context_template_keys.is_empty() {
            return Ok(None);
        }
        let vars = TemplateSet::vars(state);
        let mut parts = Vec::with_capacity(page.context_template_keys.len());
        for key in &page.context_template_keys {
            let text = self.templates.render_value(key, &vars)?;
            let text = text.trim_end();
            if !text.trim().is_empty() {
                parts.push(text.to_owned());
            }
        }
        Ok(Some(parts.join("\n")))
    }

    /// Renders a payload type's summary template with the payload's data;
    /// `Ok(None)` when the type is unknown or has no summary template.
    pub fn render_summary(
        &self,
        payload_type: &str,
        data: &serde_json::Value,
    ) -> Result<Option<String>, TemplateError> {
        match self.payload_type(payload_type) {
            Some(p) if p.summary_template.is_some() => self
                .templates
                .render(
                    &format!("payload_types.{payload_type}.summary_template"),
                    data,
                )
                .map(Some),
            _ => Ok(None),
        }
    }
}

/// serde_yaml_ng prefixes its messages with the path of the enclosing map;
/// the error already carries the (longer) entry path, so drop the repeat.
fn strip_path_prefix(message: &str, entry: &str) -> String {
    if let Some((head, rest)) = message.split_once(": ")
        && !head.contains(' ')
        && entry.starts_with(head)
    {
        return rest.to_owned();
    }
    message.to_owned()
}
