//! Start-up validation: turns the parsed file into the domain model, checking
//! everything that would otherwise fail later (or silently) at run time —
//! names, duplicates, markers, JSON schemas, templates, tool endpoints,
//! references from pages to definitions. It collects every problem, each
//! naming its entry path, instead of stopping at the first.

use std::collections::HashMap;
use std::sync::Arc;

mod definitions;
mod pages;
mod rules;

#[cfg(test)]
mod tests;

use super::error::Problem;
use super::file::{FileLimits, NamedMap, RegistryFile};
use super::model::{ActionDef, Limits, PageDef, PayloadTypeDef, ToolDef};
use super::templates::TemplateSet;

/// The validated content of a registry file.
#[derive(Debug)]
pub(crate) struct Built {
    pub limits: Limits,
    pub preamble: String,
    pub help: String,
    pub payload_types: Vec<Arc<PayloadTypeDef>>,
    pub tools: Vec<Arc<ToolDef>>,
    pub actions: Vec<Arc<ActionDef>>,
    pub streams: HashMap<String, String>,
    pub pages: HashMap<String, PageDef>,
    pub templates: TemplateSet,
    pub param_validators: HashMap<String, Arc<jsonschema::Validator>>,
}

/// Validates `file`; on failure returns every problem in file order.
pub(crate) fn build(file: RegistryFile) -> Result<Built, Vec<Problem>> {
    let mut v = Validator::default();
    if file.version != 1 {
        v.problem(
            "version",
            format!(
                "unsupported version {} (this gateway reads version 1)",
                file.version
            ),
        );
    }
    let limits = v.limits(&file.limits);
    let mut templates = TemplateSet::new(limits.template_fuel);

    let payload_types = v.payload_types(&file.payload_types, &mut templates);
    let payload_names = index(&payload_types, |p| &p.name);
    let tools = v.tools(&file.tools, &payload_names);
    let (actions, param_validators) = v.actions(&file.actions, &mut templates);
    let streams = v.streams(&file.streams);
    let refs = Refs {
        payload_types: payload_names,
        tools: index(&tools, |t| &t.name),
        actions: index(&actions, |a| &a.action),
    };
    let pages = v.pages(&file.pages, &refs, &mut templates);

    if !v.problems.is_empty() {
        return Err(v.problems);
    }
    Ok(Built {
        limits,
        preamble: file.preamble.trim().to_owned(),
        help: file.help.trim().to_owned(),
        payload_types,
        tools,
        actions,
        streams,
        pages,
        templates,
        param_validators,
    })
}

/// Definitions by name, the first of duplicates winning.
struct Refs {
    payload_types: HashMap<String, Arc<PayloadTypeDef>>,
    tools: HashMap<String, Arc<ToolDef>>,
    actions: HashMap<String, Arc<ActionDef>>,
}

fn index<T>(items: &[Arc<T>], name: impl Fn(&T) -> &String) -> HashMap<String, Arc<T>> {
    let mut map = HashMap::new();
    for item in items {
        map.entry(name(item).clone())
            .or_insert_with(|| Arc::clone(item));
    }
    map
}

#[derive(Default)]
struct Validator {
    problems: Vec<Problem>,
}

impl Validator {
    fn problem(&mut self, entry: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem::new(entry, message));
    }

    fn limits(&mut self, file: &FileLimits) -> Limits {
        let d = Limits::default();
        let mut positive = |name: &str, value: Option<u64>, default: u64| -> u64 {
            match value {
                Some(0) => {
                    self.problem(format!("limits.{name}"), "must be greater than 0");
                    default
                }
                Some(v) => v,
                None => default,
            }
        };
        let as_u64 = |v: Option<usize>| v.map(|v| v as u64);
        Limits {
            max_context_chars: positive(
                "max_context_chars",
                as_u64(file.max_context_chars),
                d.max_context_chars as u64,
            ) as usize,
            max_manifest_entries: positive(
                "max_manifest_entries",
                as_u64(file.max_manifest_entries),
                d.max_manifest_entries as u64,
            ) as usize,
            max_summary_chars: positive(
                "max_summary_chars",
                as_u64(file.max_summary_chars),
                d.max_summary_chars as u64,
            ) as usize,
            template_fuel: positive("template_fuel", file.template_fuel, d.template_fuel),
            mcp_tools_refresh: match file.mcp_tools_refresh {
                Some(refresh) if refresh.is_zero() => {
                    self.problem("limits.mcp_tools_refresh", "must be greater than 0");
                    d.mcp_tools_refresh
                }
                Some(refresh) => refresh,
                None => d.mcp_tools_refresh,
            },
        }
    }

    /// Reports names defined more than once in `map` and invalid names.
    fn names<V>(
        &mut self,
        section: &str,
        map: &NamedMap<V>,
        valid: fn(&str) -> Result<(), String>,
    ) {
        let mut seen = HashMap::new();
        for (i, (name, _)) in map.0.iter().enumerate() {
            let entry = format!("{section}.{name}");
            if let Err(why) = valid(name) {
                self.problem(&entry, format!("invalid name `{name}`: {why}"));
            }
            if let Some(first) = seen.insert(name.as_str(), i) {
                self.problem(
                    &entry,
                    format!(
                        "duplicate name `{name}` (entries {} and {} of `{section}`)",
                        first + 1,
                        i + 1
                    ),
                );
                seen.insert(name.as_str(), first);
            }
        }
    }

    /// Checks that `schema` is an object and a valid JSON schema.
    fn schema(&mut self, entry: &str, schema: &serde_json::Value) -> Option<jsonschema::Validator> {
        if !schema.is_object() {
            self.problem(entry, "a JSON schema here must be an object");
            return None;
        }
        match jsonschema::validator_for(schema) {
            Ok(v) => Some(v),
            Err(e) => {
                self.problem(
                    entry,
                    format!("invalid JSON schema: {e} (at `{}`)", e.schema_path()),
                );
                None
            }
        }
    }

    fn template(&mut self, templates: &mut TemplateSet, entry: &str, source: &str) {
        if let Err(why) = templates.add(entry, source) {
            self.problem(entry, format!("invalid template: {why}"));
        }
    }
}
