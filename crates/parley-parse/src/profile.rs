//! Profiles: which payload types (marker and schema), client and server
//! actions and tools a response may contain.
//!
//! A [`ProfileSpec`] is the plain description (from a request or from the
//! profiles file); [`Profile`] is its compiled form: validated markers in a
//! `MarkerSet`, JSON schemas compiled once with `jsonschema`, and the byte
//! triggers the scanner looks for. Compiling is the only place a profile can
//! be rejected; a compiled profile parses any text.
//!
//! Beside them: [`Profiles`], the named profiles of a file (`named`), and
//! [`ProfileCache`], compiled profiles kept by content ([`cache`]).

pub mod cache;
mod named;

use std::collections::HashSet;

use parley_proto::json;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use self::{cache::ProfileCache, named::Profiles};
use crate::{
    error::ProfileError,
    syntax::marker::{Element, MAX_NAME_LEN, MarkerSet, is_name_byte},
};

/// The marker of the suggested values array.
pub const SUGGESTED_VALUES_MARKER: &str = "SUGGESTED_VALUES";
/// The marker of the suggested actions array.
pub const SUGGESTED_ACTIONS_MARKER: &str = "SUGGESTED_ACTIONS";
/// Longest tool name a profile accepts.
pub const MAX_TOOL_NAME_LEN: usize = 128;

/// A profile as written: the proto3 JSON mapping of `ParseProfile`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProfileSpec {
    /// Payload types in priority order.
    pub payloads: Vec<PayloadSpec>,
    /// Allowed client action identifiers; empty allows any.
    #[serde(alias = "clientActions")]
    pub client_actions: Vec<String>,
    /// Action identifiers handled by the server.
    #[serde(alias = "serverActions")]
    pub server_actions: Vec<String>,
    /// Tool names recognised when written into the text.
    pub tools: Vec<String>,
}

/// One custom payload type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PayloadSpec {
    /// The payload type name, for example `schema_proposal`.
    pub name: String,
    /// The marker without decoration; a trailing colon is ignored.
    pub marker: String,
    /// The JSON schema the payload must satisfy; `None` accepts any object.
    #[serde(default)]
    pub schema: Option<Value>,
}

/// A payload type ready to validate.
#[derive(Debug)]
pub(crate) struct CompiledPayload {
    pub(crate) name: String,
    pub(crate) validator: Option<jsonschema::Validator>,
}

/// A compiled profile. Cheap to share (`Arc<Profile>`), immutable.
#[derive(Debug)]
pub struct Profile {
    pub(crate) markers: MarkerSet,
    pub(crate) payloads: Vec<CompiledPayload>,
    pub(crate) client_actions: HashSet<String>,
    pub(crate) server_actions: HashSet<String>,
    pub(crate) tools: HashSet<String>,
    /// The bytes at which something may start: `:` (markers), `{` and `` ` ``
    /// (text tool calls).
    pub(crate) triggers: Vec<u8>,
}

impl Default for Profile {
    /// Suggestions only: no payload types, any action, no tools.
    fn default() -> Self {
        Self::build(Vec::new(), &[], &[], Vec::new(), true)
    }
}

impl Profile {
    /// Compiles a profile from its description.
    pub fn new(spec: &ProfileSpec) -> Result<Self, ProfileError> {
        let mut markers: Vec<String> = vec![
            SUGGESTED_VALUES_MARKER.into(),
            SUGGESTED_ACTIONS_MARKER.into(),
        ];
        let mut payloads = Vec::with_capacity(spec.payloads.len());
        let mut names = HashSet::new();
        for (index, payload) in spec.payloads.iter().enumerate() {
            let name = payload.name.trim().to_owned();
            if name.is_empty() {
                return Err(ProfileError::EmptyPayloadName { index });
            }
            if !names.insert(name.clone()) {
                return Err(ProfileError::DuplicatePayload { index, name });
            }
            let marker = normalise_marker(&payload.marker).map_err(|reason| {
                ProfileError::InvalidMarker {
                    index,
                    name: name.clone(),
                    marker: payload.marker.clone(),
                    reason,
                }
            })?;
            if markers.contains(&marker) {
                return Err(ProfileError::DuplicateMarker {
                    index,
                    name,
                    marker: payload.marker.clone(),
                });
            }
            let validator = match &payload.schema {
                None => None,
                Some(schema) => Some(jsonschema::validator_for(schema).map_err(|error| {
                    ProfileError::InvalidSchema {
                        index,
                        name: name.clone(),
                        reason: error.to_string(),
                    }
                })?),
            };
            markers.push(marker);
            payloads.push(CompiledPayload { name, validator });
        }
        let mut tools = Vec::with_capacity(spec.tools.len());
        for (index, tool) in spec.tools.iter().enumerate() {
            check_tool_name(tool).map_err(|reason| ProfileError::InvalidToolName {
                index,
                name: tool.clone(),
                reason,
            })?;
            tools.push(tool.clone());
        }
        let mut profile = Self::build(
            payloads,
            &spec.client_actions,
            &spec.server_actions,
            tools,
            true,
        );
        profile.markers = MarkerSet::new(
            markers
                .into_iter()
                .enumerate()
                .map(|(i, marker)| {
                    let element = match i {
                        0 => Element::SuggestedValues,
                        1 => Element::SuggestedActions,
                        n => Element::Payload(n - 2),
                    };
                    (marker, element)
                })
                .collect(),
        );
        Ok(profile)
    }

    /// Compiles a `parley.parser.v1.ParseProfile`.
    pub fn from_proto(
        proto: &parley_proto::parser::v1::ParseProfile,
    ) -> Result<Self, ProfileError> {
        Self::new(&ProfileSpec::from_proto(proto))
    }

    /// A profile that recognises only text tool calls naming one of `tools`
    /// (no suggestions, no payloads). Names that no profile could accept
    /// (empty, longer than 128 bytes, with quotes, backslashes or control
    /// characters) are ignored.
    pub fn tools_only(tools: impl IntoIterator<Item = String>) -> Self {
        let tools = tools
            .into_iter()
            .filter(|tool| check_tool_name(tool).is_ok())
            .collect();
        Self::build(Vec::new(), &[], &[], tools, false)
    }

    fn build(
        payloads: Vec<CompiledPayload>,
        client_actions: &[String],
        server_actions: &[String],
        tools: Vec<String>,
        suggestions: bool,
    ) -> Self {
        let markers = if suggestions {
            MarkerSet::new(vec![
                (SUGGESTED_VALUES_MARKER.into(), Element::SuggestedValues),
                (SUGGESTED_ACTIONS_MARKER.into(), Element::SuggestedActions),
            ])
        } else {
            MarkerSet::new(Vec::new())
        };
        let mut triggers = Vec::new();
        if suggestions || !payloads.is_empty() {
            triggers.push(b':');
        }
        if !tools.is_empty() {
            triggers.extend_from_slice(b"{`");
        }
        Self {
            markers,
            payloads,
            client_actions: client_actions.iter().cloned().collect(),
            server_actions: server_actions.iter().cloned().collect(),
            tools: tools.into_iter().collect(),
            triggers,
        }
    }

    /// What a [`StreamParser`](crate::StreamParser) hands out for `delta`
    /// when `delta` cannot change anything but the text, or `None` when it
    /// might.
    ///
    /// The stream must have decided all the text before `delta` (outside
    /// any element, no marker begun) and hold back only `held`, the
    /// whitespace at its end: a stream whose every `Text` item so far
    /// continued its input exactly and that has handed out all of it but
    /// that whitespace. Then a `delta` with none of the profile's trigger
    /// bytes (`:`, and `{` and `` ` `` with text tool calls) and no end
    /// that could begin a marker is handed out whole: `held`, then `delta`
    /// without its own trailing whitespace, which the stream holds back in
    /// turn (an empty string when `delta` is all whitespace). The stream is
    /// then in the same kind of state again. A `held` that is not all
    /// whitespace is not such a state: `None`.
    ///
    /// This is how a caller whose parser is elsewhere (the gateway and its
    /// parser sidecar) shows plain text at once instead of after a round
    /// trip; it still sends the text to the parser later, which repeats
    /// what was shown (see `tests/pass_through.rs`, which checks this
    /// against the stream parser for any text and split).
    pub fn pass_through(&self, held: &str, delta: &str) -> Option<String> {
        let t = delta.as_bytes();
        if t.is_empty()
            || !held.bytes().all(crate::is_ws)
            || t.iter().any(|b| self.triggers.contains(b))
        {
            return None;
        }
        if self.markers.hold_from(t, 0) != t.len() {
            return None;
        }
        let Some(last) = t.iter().rposition(|&b| !crate::is_ws(b)) else {
            return Some(String::new());
        };
        let mut shown = String::with_capacity(held.len() + last + 1);
        shown.push_str(held);
        // Whitespace never splits a UTF-8 sequence: a char boundary.
        shown.push_str(&delta[..=last]);
        Some(shown)
    }

    /// The name diagnostics use for an element.
    pub(crate) fn element_name(&self, element: Element) -> &str {
        match element {
            Element::SuggestedValues => "suggested_values",
            Element::SuggestedActions => "suggested_actions",
            Element::Payload(index) => &self.payloads[index].name,
        }
    }

    /// True when `tool` is a registered tool name.
    pub(crate) fn has_tool(&self, tool: &str) -> bool {
        self.tools.contains(tool)
    }
}

impl ProfileSpec {
    /// The description carried by a `parley.parser.v1.ParseProfile`.
    pub fn from_proto(proto: &parley_proto::parser::v1::ParseProfile) -> Self {
        Self {
            payloads: proto
                .payloads
                .iter()
                .map(|p| PayloadSpec {
                    name: p.name.clone(),
                    marker: p.marker.clone(),
                    schema: p
                        .schema
                        .as_ref()
                        .map(|s| Value::Object(json::from_struct(s))),
                })
                .collect(),
            client_actions: proto.client_actions.clone(),
            server_actions: proto.server_actions.clone(),
            tools: proto.tools.clone(),
        }
    }
}

/// The marker without its optional trailing colon, if it is a valid name.
fn normalise_marker(marker: &str) -> Result<String, &'static str> {
    let trimmed = marker.trim();
    let trimmed = trimmed.strip_suffix(':').unwrap_or(trimmed).trim_end();
    if trimmed.is_empty() {
        return Err("a marker cannot be empty");
    }
    if trimmed.len() > MAX_NAME_LEN {
        return Err("a marker is at most 64 bytes");
    }
    if !trimmed.bytes().all(is_name_byte) {
        return Err("a marker may only use ASCII letters, digits, `_` and `-`");
    }
    Ok(trimmed.to_owned())
}

fn check_tool_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("a tool name cannot be empty");
    }
    if name.len() > MAX_TOOL_NAME_LEN {
        return Err("a tool name is at most 128 bytes");
    }
    if name
        .chars()
        .any(|c| c == '"' || c == '\\' || c.is_control())
    {
        return Err("a tool name cannot contain quotes, backslashes or control characters");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn payload(name: &str, marker: &str, schema: Option<Value>) -> PayloadSpec {
        PayloadSpec {
            name: name.into(),
            marker: marker.into(),
            schema,
        }
    }

    #[test]
    fn compiles_markers_schemas_and_triggers() {
        let spec = ProfileSpec {
            payloads: vec![payload(
                "schema_proposal",
                "SCHEMA_PROPOSAL:",
                Some(json!({"type": "object"})),
            )],
            tools: vec!["search".into()],
            ..ProfileSpec::default()
        };
        let profile = Profile::new(&spec).expect("valid profile");
        assert_eq!(profile.triggers, b":{`");
        assert_eq!(profile.element_name(Element::Payload(0)), "schema_proposal");
        assert!(profile.has_tool("search"));
    }

    #[test]
    fn rejects_bad_markers_names_and_schemas_with_their_field() {
        let cases = [
            (vec![payload("", "X", None)], "payloads[0].name"),
            (
                vec![payload("a", "X", None), payload("a", "Y", None)],
                "payloads[1].name",
            ),
            (vec![payload("a", "**X**", None)], "payloads[0].marker"),
            (
                vec![payload("a", "SUGGESTED_VALUES", None)],
                "payloads[0].marker",
            ),
            (
                vec![payload("a", "X", Some(json!({"type": 12})))],
                "payloads[0].schema",
            ),
        ];
        for (payloads, field) in cases {
            let error = Profile::new(&ProfileSpec {
                payloads,
                ..ProfileSpec::default()
            })
            .expect_err("invalid");
            assert_eq!(error.field(), field, "{error}");
        }
        let error = Profile::new(&ProfileSpec {
            tools: vec![String::new()],
            ..ProfileSpec::default()
        });
        assert_eq!(error.expect_err("empty tool").field(), "tools[0]");
    }

    #[test]
    fn tools_only_has_no_markers() {
        let profile = Profile::tools_only(["search".to_owned(), String::new()]);
        assert!(profile.markers.is_empty());
        assert_eq!(profile.triggers, b"{`");
        assert_eq!(profile.tools.len(), 1);
    }

    #[test]
    fn spec_reads_both_json_spellings() {
        let spec: ProfileSpec = serde_json::from_value(
            json!({"clientActions": ["close_chat"], "server_actions": ["archive"]}),
        )
        .expect("valid spec");
        assert_eq!(spec.client_actions, ["close_chat"]);
        assert_eq!(spec.server_actions, ["archive"]);
        assert!(serde_json::from_value::<ProfileSpec>(json!({"tool": []})).is_err());
    }
}
