//! Validation of the definitions, which know nothing of pages: payload
//! types (names, markers, schemas, summary templates), tools (names, input
//! schemas, endpoints, timeouts, payload types), actions (handlers, message
//! templates, params schemas) and stream instructions.

use std::collections::HashMap;
use std::sync::Arc;

use super::Validator;
use super::rules::{http_url, lower_snake, plain_id, tool_name, upper_snake};
use crate::registry::file::{
    ActionEntry, FileApproval, FileHandler, FileRuns, NamedMap, PayloadTypeEntry, StreamEntry,
    ToolEntry,
};
use crate::registry::model::{
    ActionDef, Handler, PayloadTypeDef, ServerActionDef, ToolDef, ToolEndpointDef,
};
use crate::registry::templates::TemplateSet;
use crate::registry::wire::json_to_struct;

/// Markers the format rules reserve for suggestions.
const RESERVED_MARKERS: [&str; 2] = ["SUGGESTED_VALUES", "SUGGESTED_ACTIONS"];

impl Validator {
    pub(super) fn payload_types(
        &mut self,
        map: &NamedMap<PayloadTypeEntry>,
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
                schema_wire: json_to_struct(&p.schema),
                llm_instructions: p.llm_instructions.trim().to_owned(),
                summary_template: p.summary_template.clone(),
                global: p.global,
            }));
        }
        out
    }

    pub(super) fn tools(
        &mut self,
        map: &NamedMap<ToolEntry>,
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
                (None, None) if t.runs == Some(FileRuns::Client) => {
                    let output_schema = t.output_schema.as_ref().and_then(|schema| {
                        self.schema(&format!("{entry}.output_schema"), schema)?;
                        json_to_struct(schema)
                    });
                    ToolEndpointDef::Client { output_schema }
                }
                (Some(b), None) if t.runs.is_none() => {
                    if let Err(why) = tool_name(b) {
                        self.problem(
                            format!("{entry}.builtin"),
                            format!("invalid built-in tool name `{b}`: {why}"),
                        );
                    }
                    ToolEndpointDef::Builtin(b.clone())
                }
                (None, Some(url)) if t.runs.is_none() => {
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
                        "exactly one of `builtin`, `grpc` or `runs: client` must say where the tool runs",
                    );
                    ToolEndpointDef::Builtin(String::new())
                }
            };
            let timeout = t.timeout;
            if timeout.is_some_and(|t| t.is_zero()) {
                self.problem(format!("{entry}.timeout"), "must be longer than 0s");
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
                input_schema_wire: json_to_struct(&t.input_schema),
                global: t.global,
                endpoint,
                timeout: timeout.filter(|t| !t.is_zero()),
                payload_type: t.payload_type.clone(),
                needs_approval: t.approval == FileApproval::Always,
            }));
        }
        out
    }

    #[allow(clippy::type_complexity)]
    pub(super) fn actions(
        &mut self,
        map: &NamedMap<ActionEntry>,
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

    pub(super) fn streams(&mut self, map: &NamedMap<StreamEntry>) -> HashMap<String, String> {
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
}
