//! Validation of the page tree: page, tab and subtab names, their context
//! templates, and their lists of payload types, tools and actions, each name
//! resolved to its definition (unknown and repeated names are problems).

use std::collections::HashMap;
use std::sync::Arc;

use super::rules::plain_id;
use super::{Refs, Validator};
use crate::registry::file::{NamedMap, PageEntry, ScopeView};
use crate::registry::model::{McpRule, PageDef, Scope, SubtabDef, TabDef, TemplateRef};
use crate::registry::templates::TemplateSet;

/// Longest model name a page may list, in bytes.
const MAX_MODEL_NAME: usize = 256;

/// Longest media type pattern, in bytes.
const MAX_MEDIA_TYPE: usize = 127;

impl Validator {
    /// A page's `attachments`: each `type/subtype` or `type/*` (RFC 6838
    /// names), none twice.
    fn attachment_types(&mut self, entry: &str, types: &[String]) {
        let name_ok = |name: &str| {
            !name.is_empty()
                && name.bytes().all(|b| {
                    b.is_ascii_alphanumeric()
                        || matches!(
                            b,
                            b'!' | b'#' | b'$' | b'&' | b'-' | b'^' | b'_' | b'.' | b'+'
                        )
                })
        };
        for (i, pattern) in types.iter().enumerate() {
            let at = format!("{entry}.attachments[{i}]");
            let well_formed = pattern.len() <= MAX_MEDIA_TYPE
                && pattern
                    .split_once('/')
                    .is_some_and(|(kind, sub)| name_ok(kind) && (sub == "*" || name_ok(sub)));
            if !well_formed {
                self.problem(
                    at,
                    format!(
                        "`{pattern}` is not a media type (`image/png`) or a family (`image/*`)"
                    ),
                );
            } else if types[..i].iter().any(|t| t.eq_ignore_ascii_case(pattern)) {
                self.problem(at, format!("`{pattern}` is listed twice"));
            }
        }
    }

    /// A page's `model` and `models_allowed`: each a route name or
    /// `provider/model` without spaces, none twice.
    fn models(&mut self, entry: &str, page: &PageEntry) {
        let named = page
            .model
            .iter()
            .map(|model| (format!("{entry}.model"), model))
            .chain(
                page.models_allowed
                    .iter()
                    .enumerate()
                    .map(|(i, model)| (format!("{entry}.models_allowed[{i}]"), model)),
            );
        for (at, model) in named {
            let parts_ok = match model.split_once('/') {
                Some((provider, name)) => !provider.is_empty() && !name.is_empty(),
                None => !model.is_empty(),
            };
            if !parts_ok
                || model.len() > MAX_MODEL_NAME
                || model.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                self.problem(
                    at,
                    format!(
                        "`{model}` must be a route name or `provider/model` (at most {MAX_MODEL_NAME} bytes, no spaces)"
                    ),
                );
            }
        }
        for (i, model) in page.models_allowed.iter().enumerate() {
            if page.models_allowed[..i].contains(model) {
                self.problem(
                    format!("{entry}.models_allowed[{i}]"),
                    format!("`{model}` is listed twice"),
                );
            }
        }
    }

    pub(super) fn pages(
        &mut self,
        map: &NamedMap<PageEntry>,
        refs: &Refs,
        templates: &mut TemplateSet,
    ) -> HashMap<String, PageDef> {
        self.names("pages", map, plain_id);
        let mut out = HashMap::new();
        for (name, p) in &map.0 {
            let entry = format!("pages.{name}");
            self.models(&entry, p);
            self.attachment_types(&entry, &p.attachments);
            if let Some(choice) = &p.attachments_unsupported
                && !matches!(choice.as_str(), "fail" | "describe")
            {
                self.problem(
                    format!("{entry}.attachments_unsupported"),
                    format!("`{choice}` is neither `fail` nor `describe`"),
                );
            }
            let scope = self.scope(&entry, p.scope(), refs, templates);
            self.names(&format!("{entry}.tabs"), &p.tabs, plain_id);
            let mut tabs = Vec::new();
            for (tab_name, t) in &p.tabs.0 {
                let tab_entry = format!("{entry}.tabs.{tab_name}");
                let tab_scope = self.scope(&tab_entry, t.scope(), refs, templates);
                self.names(&format!("{tab_entry}.subtabs"), &t.subtabs, plain_id);
                let mut subtabs = Vec::new();
                for (sub_name, s) in &t.subtabs.0 {
                    let sub_entry = format!("{tab_entry}.subtabs.{sub_name}");
                    let scope = self.scope(&sub_entry, s.scope(), refs, templates);
                    subtabs.push((sub_name.clone(), SubtabDef { scope }));
                }
                tabs.push((
                    tab_name.clone(),
                    TabDef {
                        scope: tab_scope,
                        subtabs,
                    },
                ));
            }
            out.entry(name.clone()).or_insert(PageDef {
                scope,
                tabs,
                mid_answer_failover: p.mid_answer_failover,
                model: p.model.clone(),
                models_allowed: p.models_allowed.clone(),
                attachments: p
                    .attachments
                    .iter()
                    .map(|t| t.to_ascii_lowercase())
                    .collect(),
                describe_unsupported_attachments: p.attachments_unsupported.as_deref()
                    == Some("describe"),
            });
        }
        out
    }

    fn scope(
        &mut self,
        entry: &str,
        view: ScopeView<'_>,
        refs: &Refs,
        templates: &mut TemplateSet,
    ) -> Scope {
        let context_template = view.context_template.map(|src| {
            let key = format!("{entry}.context_template");
            self.template(templates, &key, src);
            TemplateRef {
                key,
                source: src.to_owned(),
            }
        });
        // `SERVER/TOOL` and `SERVER/*` allow MCP tools of the runner.
        let mcp_names = view
            .tools
            .iter()
            .enumerate()
            .filter(|(_, name)| name.contains('/'));
        let mut mcp: Vec<McpRule> = Vec::new();
        for (i, name) in mcp_names {
            let at = format!("{entry}.tools[{i}]");
            match mcp_rule(name) {
                Ok(rule) if mcp.contains(&rule) => {
                    self.problem(at, format!("tool `{name}` is listed twice"))
                }
                Ok(rule) => mcp.push(rule),
                Err(problem) => self.problem(at, problem),
            }
        }
        Scope {
            instructions: view.instructions.trim().to_owned(),
            context_template,
            payload_types: self.refs(
                entry,
                "payload_types",
                "payload type",
                view.payload_types,
                &refs.payload_types,
            ),
            tools: self.refs(entry, "tools", "tool", view.tools, &refs.tools),
            mcp,
            actions: self.refs(entry, "actions", "action", view.actions, &refs.actions),
        }
    }

    /// Resolves a list of names, reporting unknown and repeated ones.
    fn refs<T>(
        &mut self,
        entry: &str,
        field: &str,
        what: &str,
        names: &[String],
        defs: &HashMap<String, Arc<T>>,
    ) -> Vec<Arc<T>> {
        let mut out = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let at = format!("{entry}.{field}[{i}]");
            if field == "tools" && name.contains('/') {
                continue; // an MCP rule, checked by `scope`
            }
            if names[..i].contains(name) {
                self.problem(at, format!("{what} `{name}` is listed twice"));
                continue;
            }
            match defs.get(name) {
                Some(def) => out.push(Arc::clone(def)),
                None => self.problem(at, format!("unknown {what} `{name}`")),
            }
        }
        out
    }
}

/// `SERVER/TOOL` or `SERVER/*`: a server name of letters, digits, `-` and
/// single `_`, and a tool name without `/` or spaces.
fn mcp_rule(name: &str) -> Result<McpRule, String> {
    let bad = || format!("`{name}` is not an MCP tool rule: write `SERVER/TOOL` or `SERVER/*`");
    let (server, tool) = name.split_once('/').ok_or_else(bad)?;
    let server_ok = !server.is_empty()
        && server.len() <= 32
        && !server.contains("__")
        && server
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    let tool_ok = !tool.is_empty()
        && tool.len() <= 128
        && !tool.contains('/')
        && !tool.chars().any(char::is_whitespace);
    if !server_ok || !tool_ok {
        return Err(bad());
    }
    Ok(McpRule {
        server: server.to_owned(),
        tool: (tool != "*").then(|| tool.to_owned()),
    })
}
