//! Start-up validation: turns the parsed file into the domain model, checking
//! everything that would otherwise fail later (or silently) at run time —
//! names, duplicates, markers, JSON schemas, templates, tool endpoints,
//! references from pages to definitions. It collects every problem, each
//! naming its entry path, instead of stopping at the first.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::error::Problem;
use super::file::{FileHandler, FileLimits, NamedMap, RegistryFile, ScopeView};
use super::model::{
    ActionDef, Handler, Limits, PageDef, PayloadTypeDef, Scope, ServerActionDef, SubtabDef, TabDef,
    TemplateRef, ToolDef, ToolEndpointDef,
};
use super::templates::TemplateSet;

/// Markers the format rules reserve for suggestions.
const RESERVED_MARKERS: [&str; 2] = ["SUGGESTED_VALUES", "SUGGESTED_ACTIONS"];
/// Longest name accepted for payload types, tools and actions (the providers'
/// limit for tool names).
const MAX_NAME_LEN: usize = 64;

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

    fn payload_types(
        &mut self,
        map: &NamedMap<super::file::PayloadTypeEntry>,
        templates: &mut TemplateSet,
    ) -> Vec<Arc<PayloadTypeDef>> {
        self.names("payload_types", map, lower_snake);
        let mut markers: HashMap<String, String> = HashMap::new();
        let mut out = Vec::new();
        for (name, p) in &map.0 {
            let entry = format!("payload_types.{name}");
            let marker = p
                .marker
                .as_deref()
                .map(|m| m.trim().trim_end_matches(':').to_owned());
            if let Some(m) = &marker {
                let at = format!("{entry}.marker");
                if let Err(why) = upper_snake(m) {
                    self.problem(&at, format!("invalid marker `{m}`: {why}"));
                } else if RESERVED_MARKERS.contains(&m.as_str()) {
                    self.problem(&at, format!("marker `{m}` is reserved for suggestions"));
                } else if let Some(other) = markers.get(m) {
                    if other != name {
                        self.problem(
                            &at,
                            format!("marker `{m}` is already used by payload type `{other}`"),
                        );
                    }
                } else {
                    markers.insert(m.clone(), name.clone());
                }
            }
            self.schema(&format!("{entry}.schema"), &p.schema);
            if let Some(src) = &p.summary_template {
                self.template(templates, &format!("{entry}.summary_template"), src);
            }
            out.push(Arc::new(PayloadTypeDef {
                name: name.clone(),
                marker: marker.unwrap_or_default(),
                description: p.description.trim().to_owned(),
                schema: p.schema.clone(),
                llm_instructions: p.llm_instructions.trim().to_owned(),
                summary_template: p.summary_template.clone(),
                global: p.global,
            }));
        }
        out
    }

    fn tools(
        &mut self,
        map: &NamedMap<super::file::ToolEntry>,
        payload_types: &HashMap<String, Arc<PayloadTypeDef>>,
    ) -> Vec<Arc<ToolDef>> {
        self.names("tools", map, tool_name);
        let mut out = Vec::new();
        for (name, t) in &map.0 {
            let entry = format!("tools.{name}");
            if self
                .schema(&format!("{entry}.input_schema"), &t.input_schema)
                .is_some()
                && t.input_schema.get("type").and_then(|v| v.as_str()) != Some("object")
            {
                self.problem(
                    format!("{entry}.input_schema"),
                    "a tool's input schema must have `type: object`",
                );
            }
            let endpoint = match (&t.builtin, &t.grpc) {
                (Some(b), None) => {
                    if let Err(why) = tool_name(b) {
                        self.problem(
                            format!("{entry}.builtin"),
                            format!("invalid built-in tool name `{b}`: {why}"),
                        );
                    }
                    ToolEndpointDef::Builtin(b.clone())
                }
                (None, Some(url)) => {
                    if let Err(why) = http_url(url) {
                        self.problem(
                            format!("{entry}.grpc"),
                            format!("invalid endpoint `{url}`: {why}"),
                        );
                    }
                    ToolEndpointDef::Grpc(url.clone())
                }
                _ => {
                    self.problem(
                        &entry,
                        "exactly one of `builtin` or `grpc` must say where the tool runs",
                    );
                    ToolEndpointDef::Builtin(String::new())
                }
            };
            if t.timeout_ms == Some(0) {
                self.problem(format!("{entry}.timeout_ms"), "must be greater than 0");
            }
            if let Some(pt) = &t.payload_type
                && !payload_types.contains_key(pt)
            {
                self.problem(
                    format!("{entry}.payload_type"),
                    format!("unknown payload type `{pt}`"),
                );
            }
            out.push(Arc::new(ToolDef {
                name: name.clone(),
                description: t.description.trim().to_owned(),
                input_schema: t.input_schema.clone(),
                global: t.global,
                endpoint,
                timeout: t.timeout_ms.filter(|ms| *ms > 0).map(Duration::from_millis),
                payload_type: t.payload_type.clone(),
            }));
        }
        out
    }

    #[allow(clippy::type_complexity)]
    fn actions(
        &mut self,
        map: &NamedMap<super::file::ActionEntry>,
        templates: &mut TemplateSet,
    ) -> (
        Vec<Arc<ActionDef>>,
        HashMap<String, Arc<jsonschema::Validator>>,
    ) {
        self.names("actions", map, lower_snake);
        let mut out = Vec::new();
        let mut validators = HashMap::new();
        for (name, a) in &map.0 {
            let entry = format!("actions.{name}");
            if let Some(schema) = &a.params_schema
                && let Some(v) = self.schema(&format!("{entry}.params_schema"), schema)
            {
                validators
                    .entry(name.clone())
                    .or_insert_with(|| Arc::new(v));
            }
            let handler = match a.handler {
                FileHandler::Client => Handler::Client,
                FileHandler::Server => Handler::Server,
            };
            let server = match (handler, &a.message_template) {
                (Handler::Server, Some(src)) => {
                    self.template(templates, &format!("{entry}.message_template"), src);
                    Some(ServerActionDef {
                        message_template: src.clone(),
                    })
                }
                (Handler::Server, None) => {
                    self.problem(
                        &entry,
                        "a server action needs a `message_template` (the message its turn sends)",
                    );
                    None
                }
                (Handler::Client, Some(_)) => {
                    self.problem(
                        format!("{entry}.message_template"),
                        "only server actions have a message template; the client handles this one",
                    );
                    None
                }
                (Handler::Client, None) => None,
            };
            out.push(Arc::new(ActionDef {
                action: name.clone(),
                description: a.description.trim().to_owned(),
                handler,
                global: a.global,
                params_schema: a.params_schema.clone(),
                server,
            }));
        }
        (out, validators)
    }

    fn streams(&mut self, map: &NamedMap<super::file::StreamEntry>) -> HashMap<String, String> {
        self.names("streams", map, plain_id);
        let mut out = HashMap::new();
        for (id, s) in &map.0 {
            if s.instructions.trim().is_empty() {
                self.problem(format!("streams.{id}.instructions"), "must not be empty");
            }
            out.entry(id.clone())
                .or_insert_with(|| s.instructions.trim().to_owned());
        }
        out
    }

    fn pages(
        &mut self,
        map: &NamedMap<super::file::PageEntry>,
        refs: &Refs,
        templates: &mut TemplateSet,
    ) -> HashMap<String, PageDef> {
        self.names("pages", map, plain_id);
        let mut out = HashMap::new();
        for (name, p) in &map.0 {
            let entry = format!("pages.{name}");
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
            out.entry(name.clone()).or_insert(PageDef { scope, tabs });
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

/// Payload type and action names: `lower_snake_case`.
fn lower_snake(name: &str) -> Result<(), String> {
    let ok = name.len() <= MAX_NAME_LEN
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    ok.then_some(()).ok_or_else(|| {
        format!(
            "use lower_snake_case (a-z, 0-9, `_`, starting with a letter, at most {MAX_NAME_LEN})"
        )
    })
}

/// Markers: `UPPER_SNAKE_CASE`.
fn upper_snake(marker: &str) -> Result<(), String> {
    let ok = marker.len() <= MAX_NAME_LEN
        && marker.starts_with(|c: char| c.is_ascii_uppercase())
        && marker
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    ok.then_some(()).ok_or_else(|| {
        format!(
            "use UPPER_SNAKE_CASE (A-Z, 0-9, `_`, starting with a letter, at most {MAX_NAME_LEN})"
        )
    })
}

/// Tool names: what every provider accepts (`[A-Za-z0-9_-]{1,64}`).
fn tool_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    ok.then_some(())
        .ok_or_else(|| format!("use 1 to {MAX_NAME_LEN} letters, digits, `_` or `-`"))
}

/// Page, tab, subtab and stream ids: non-empty, no spaces or dots.
fn plain_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    ok.then_some(())
        .ok_or_else(|| "use letters, digits, `_` or `-`".to_owned())
}

/// A tool endpoint: an absolute `http://` or `https://` URL with a host.
fn http_url(url: &str) -> Result<(), String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("not a URL ({e})"))?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        Some(other) => return Err(format!("scheme `{other}` is not http or https")),
        None => return Err("needs an http:// or https:// scheme".to_owned()),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err("needs a host".to_owned());
    }
    Ok(())
}
