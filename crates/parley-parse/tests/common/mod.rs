//! Helpers shared by the integration tests: the test profile with tools,
//! and streaming. The example profiles and responses are
//! `parley_testkit::examples`.

#![allow(dead_code)]

pub mod texts;

use std::sync::Arc;

use parley_parse::{Limits, Parsed, PayloadSpec, Profile, ProfileSpec, StreamItem, StreamParser};
use serde_json::json;

/// The example table_view payloads plus a tool and a server action.
pub fn rich_profile() -> Arc<Profile> {
    let spec = ProfileSpec {
        payloads: vec![
            PayloadSpec {
                name: "schema_proposal".into(),
                marker: "SCHEMA_PROPOSAL".into(),
                schema: Some(json!({"type": "object", "required": ["mode", "operations"]})),
            },
            PayloadSpec {
                name: "data_proposal".into(),
                marker: "DATA_PROPOSAL".into(),
                schema: None,
            },
        ],
        client_actions: vec!["close_chat".into()],
        server_actions: vec!["archive_table".into()],
        tools: vec!["search".into()],
    };
    Arc::new(Profile::new(&spec).unwrap_or_else(|error| panic!("rich profile: {error}")))
}

/// Streams `deltas` through a parser: every item in order, and the result.
pub fn stream(
    profile: &Arc<Profile>,
    limits: Limits,
    deltas: &[&str],
) -> (Vec<StreamItem>, Parsed) {
    let mut parser = StreamParser::new(Arc::clone(profile), limits);
    let mut items = Vec::new();
    for delta in deltas {
        items.extend(
            parser
                .push(delta)
                .unwrap_or_else(|error| panic!("push: {error}")),
        );
    }
    let (tail, parsed) = parser.finish_with_items();
    items.extend(tail);
    (items, parsed)
}

/// The concatenated `Text` items.
pub fn text_of(items: &[StreamItem]) -> String {
    items
        .iter()
        .filter_map(|item| match item {
            StreamItem::Text(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The non-text items, in order.
pub fn elements_of(items: Vec<StreamItem>) -> Vec<StreamItem> {
    items
        .into_iter()
        .filter(|item| !matches!(item, StreamItem::Text(_)))
        .collect()
}
