//! Tests of loading, validating and resolving registries: resolution order
//! and deduplication, unknown pages and tabs, the seed 000 availability
//! matrix on the example, the wire conversions, and one test per kind of
//! validation error with the exact entry path in the message. Invalid
//! registries are fixtures in `testdata/`.

use std::path::PathBuf;

use parley_proto::parser::v1::ActionHandler;
use parley_proto::runner::v1::tool_endpoint::Kind;
use serde_json::json;

use super::*;

fn names<T>(items: &[Arc<T>], name: impl Fn(&T) -> &str) -> Vec<String> {
    items.iter().map(|i| name(i).to_owned()).collect()
}

fn resolve(r: &Registry, page: &str, tab: &str, subtab: &str) -> ResolvedPage {
    r.resolve(&PageRef::new(page, tab, subtab))
}

fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/registry/testdata")
        .join(name)
}

/// Loads an invalid fixture and returns its error's text.
fn load_error(name: &str) -> String {
    match Registry::load(&testdata(name)) {
        Ok(_) => panic!("{name} must not load"),
        Err(e) => e.to_string(),
    }
}

// ---- the example registry -------------------------------------------------

#[test]
fn the_example_loads_from_the_deploy_file() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/registry.yaml");
    let r = Registry::load(&path).expect("the deploy registry is valid");
    assert!(r.origin().ends_with("registry.yaml"));
    assert_eq!(*r.limits(), Limits::default());
    assert!(
        r.preamble()
            .starts_with("You are the assistant built into Tables")
    );
    assert!(!r.help().is_empty());
}

#[test]
fn availability_matrix_of_seed_000() {
    let r = Registry::example();
    // (page, schema_proposal available, data_proposal available)
    for (page, schema, data) in [
        ("tables_list", true, false),
        ("table_edit", true, false),
        ("table_view", true, true),
    ] {
        let resolved = resolve(&r, page, "", "");
        assert!(resolved.known, "{page}");
        let markers: Vec<&str> = resolved
            .marker_payload_types()
            .map(|p| p.marker.as_str())
            .collect();
        assert_eq!(
            markers.contains(&"SCHEMA_PROPOSAL"),
            schema,
            "{page}: {markers:?}"
        );
        assert_eq!(
            markers.contains(&"DATA_PROPOSAL"),
            data,
            "{page}: {markers:?}"
        );
        // suggestions are available everywhere: close_chat is a global action
        assert!(
            resolved.actions.iter().any(|a| a.action == "close_chat"),
            "{page}"
        );
    }
}

#[test]
fn resolution_is_global_then_page_then_tab_then_subtab() {
    let r = Registry::example();
    let p = resolve(&r, "table_view", "rows", "selection");
    assert!(p.known && p.tab_known && p.subtab_known);
    assert_eq!(
        names(&p.tools, |t| &t.name),
        ["current_time", "calculator", "lookup_rows"]
    );
    assert_eq!(
        names(&p.actions, |a| &a.action),
        ["close_chat", "run_analysis"]
    );
    assert_eq!(
        names(&p.payload_types, |t| &t.name),
        ["schema_proposal", "data_proposal", "row_matches"]
    );
    assert_eq!(p.instructions.len(), 3);
    assert!(p.instructions[0].starts_with("The user is looking at the rows of one table."));
    assert!(p.instructions[1].starts_with("The rows tab"));
    assert!(p.instructions[2].starts_with("The user has selected some rows"));
    assert_eq!(
        p.context_template_keys,
        [
            "pages.table_view.context_template",
            "pages.table_view.tabs.rows.subtabs.selection.context_template"
        ]
    );

    let charts = resolve(&r, "table_view", "charts", "");
    assert_eq!(
        names(&charts.actions, |a| &a.action),
        ["close_chat", "run_analysis", "configure_chart"]
    );
}

#[test]
fn unknown_page_gets_the_globals_only() {
    let r = Registry::example();
    let p = resolve(&r, "settings", "general", "");
    assert!(!p.known && !p.tab_known && !p.subtab_known);
    assert_eq!(names(&p.tools, |t| &t.name), ["current_time", "calculator"]);
    assert_eq!(names(&p.actions, |a| &a.action), ["close_chat"]);
    assert!(p.payload_types.is_empty());
    assert!(p.instructions.is_empty());
    assert!(p.context_template.is_none());
    assert_eq!(p.page_ref.page, "settings");
}

#[test]
fn unknown_tab_and_subtab_add_nothing() {
    let r = Registry::example();
    let page_only = resolve(&r, "table_view", "", "");
    let bad_tab = resolve(&r, "table_view", "nope", "selection");
    assert!(bad_tab.known && !bad_tab.tab_known && !bad_tab.subtab_known);
    assert_eq!(
        names(&bad_tab.actions, |a| &a.action),
        names(&page_only.actions, |a| &a.action)
    );
    assert_eq!(bad_tab.instructions, page_only.instructions);

    let bad_sub = resolve(&r, "table_view", "rows", "nope");
    assert!(bad_sub.tab_known && !bad_sub.subtab_known);
    assert_eq!(bad_sub.instructions.len(), 2);
    // a subtab without its tab is not looked up
    let orphan = resolve(&r, "table_view", "", "selection");
    assert!(!orphan.subtab_known);
}

#[test]
fn items_listed_at_several_levels_appear_once_at_the_first() {
    let r = Registry::from_str(
        r#"
version: 1
payload_types:
  a: { marker: A, schema: { type: object } }
  b: { marker: B, schema: { type: object }, global: true }
tools:
  t: { builtin: t, global: true, input_schema: { type: object } }
pages:
  p:
    payload_types: [a, b]
    tools: [t]
    tabs:
      x:
        payload_types: [b, a]
        subtabs:
          y: { payload_types: [a] }
"#,
        "inline",
    )
    .expect("valid");
    let p = resolve(&r, "p", "x", "y");
    assert_eq!(names(&p.payload_types, |t| &t.name), ["b", "a"]);
    assert_eq!(names(&p.tools, |t| &t.name), ["t"]);
}

#[test]
fn parse_profile_carries_payloads_actions_and_tools() {
    let r = Registry::example();
    let profile = resolve(&r, "table_view", "charts", "").parse_profile();
    let payloads: Vec<(&str, &str)> = profile
        .payloads
        .iter()
        .map(|p| (p.name.as_str(), p.marker.as_str()))
        .collect();
    // row_matches has no marker: tools return it, the model never writes it
    assert_eq!(
        payloads,
        [
            ("schema_proposal", "SCHEMA_PROPOSAL"),
            ("data_proposal", "DATA_PROPOSAL")
        ]
    );
    let schema = profile.payloads[0].schema.as_ref().expect("schema");
    assert!(schema.fields.contains_key("definitions"));
    assert_eq!(
        profile.client_actions,
        ["close_chat", "run_analysis", "configure_chart"]
    );
    assert_eq!(profile.server_actions, ["run_analysis"]);
    assert_eq!(profile.tools, ["current_time", "calculator", "lookup_rows"]);

    let list = resolve(&r, "tables_list", "", "").parse_profile();
    assert_eq!(list.payloads.len(), 1);
    assert_eq!(list.client_actions, ["close_chat", "open_table"]);
    assert!(list.server_actions.is_empty());
}

#[test]
fn runner_tools_carry_endpoint_and_timeout() {
    let r = Registry::example();
    let tools = resolve(&r, "table_view", "", "").runner_tools();
    assert_eq!(tools.len(), 3);
    let builtin = &tools[0];
    assert_eq!(builtin.name, "current_time");
    assert_eq!(
        builtin.endpoint.as_ref().and_then(|e| e.kind.clone()),
        Some(Kind::Builtin("current_time".into()))
    );
    assert_eq!(
        builtin.timeout,
        Some(prost_types::Duration {
            seconds: 1,
            nanos: 0
        })
    );
    let remote = &tools[2];
    assert_eq!(remote.name, "lookup_rows");
    assert_eq!(
        remote.endpoint.as_ref().and_then(|e| e.kind.clone()),
        Some(Kind::Grpc("http://127.0.0.1:50061".into()))
    );
    assert_eq!(
        remote.timeout,
        Some(prost_types::Duration {
            seconds: 5,
            nanos: 0
        })
    );
    let schema = remote.input_schema.as_ref().expect("input schema");
    assert!(schema.fields.contains_key("properties"));
}

#[test]
fn describe_lists_what_the_page_resolves_to() {
    let r = Registry::example();
    let d = resolve(&r, "table_view", "charts", "").describe();
    assert!(d.known_page);
    assert!(d.system_prompt.is_empty());
    assert_eq!(d.payload_types.len(), 3);
    assert_eq!(d.payload_types[1].marker, "DATA_PROPOSAL");
    assert!(!d.payload_types[1].global);
    assert!(d.payload_types[1].schema.is_some());
    assert_eq!(d.tools.len(), 3);
    assert!(d.tools[0].global && !d.tools[2].global);
    let actions: Vec<(&str, i32)> = d
        .client_actions
        .iter()
        .map(|a| (a.action.as_str(), a.handler))
        .collect();
    assert_eq!(
        actions,
        [
            ("close_chat", ActionHandler::Client as i32),
            ("run_analysis", ActionHandler::Server as i32),
            ("configure_chart", ActionHandler::Client as i32),
        ]
    );
    assert!(!resolve(&r, "elsewhere", "", "").describe().known_page);
}

#[test]
fn lookups_by_name() {
    let r = Registry::example();
    assert_eq!(
        r.stream_instructions("sales-pipeline")
            .map(|s| s.contains("EUR")),
        Some(true)
    );
    assert!(r.stream_instructions("other").is_none());
    let a = r.action("run_analysis").expect("action");
    assert_eq!(a.handler, Handler::Server);
    assert!(
        a.server
            .as_ref()
            .is_some_and(|s| s.message_template.contains("focus"))
    );
    assert!(
        r.action("close_chat")
            .is_some_and(|a| a.server.is_none() && a.global)
    );
    assert!(r.action("nope").is_none());
    assert_eq!(
        r.payload_type("data_proposal").map(|p| p.marker.as_str()),
        Some("DATA_PROPOSAL")
    );
    assert!(r.payload_type("nope").is_none());
    assert_eq!(
        r.tool("lookup_rows")
            .and_then(|t| t.payload_type.as_deref()),
        Some("row_matches")
    );
}

#[test]
fn server_action_messages_render_from_checked_params() {
    let r = Registry::example();
    assert_eq!(
        r.render_action_message("run_analysis", &json!({"focus": "Status"}))
            .expect("renders"),
        "Analyse the rows of the current table, focusing on Status, and summarise the main patterns."
    );
    assert_eq!(
        r.render_action_message("run_analysis", &json!({}))
            .expect("renders"),
        "Analyse the rows of the current table, and summarise the main patterns."
    );
    let err = r
        .render_action_message("run_analysis", &json!({"focus": 3}))
        .expect_err("focus must be a string");
    assert!(
        matches!(&err, ActionError::InvalidParams { violations, .. } if violations[0].0 == "/focus"),
        "{err}"
    );
    assert!(matches!(
        r.render_action_message("close_chat", &json!({})),
        Err(ActionError::NotServer(_))
    ));
    assert!(matches!(
        r.render_action_message("nope", &json!({})),
        Err(ActionError::Unknown(_))
    ));
}

#[test]
fn summaries_render_with_the_payload_fields() {
    let r = Registry::example();
    let s = r
        .render_summary(
            "data_proposal",
            &json!({"reasoning": "cleanup", "operations": [{"action": "add"}, {"action": "delete"}, {"action": "delete"}]}),
        )
        .expect("renders");
    assert_eq!(s.as_deref(), Some("1 add, 0 update, 2 delete: cleanup"));
    assert_eq!(
        r.render_summary("nope", &json!({})).expect("no error"),
        None
    );
}

// ---- validation -----------------------------------------------------------

#[test]
fn duplicate_names_are_reported_with_their_entry() {
    let e = load_error("duplicates.yaml");
    assert!(
        e.contains(
            "duplicates.yaml: pages.home: duplicate name `home` (entries 1 and 2 of `pages`)"
        ),
        "{e}"
    );
    assert!(
        e.contains(
            "duplicates.yaml: tools.clock: duplicate name `clock` (entries 1 and 2 of `tools`)"
        ),
        "{e}"
    );
    assert!(
        e.contains("duplicates.yaml: pages.home.tabs.a: duplicate name `a` (entries 1 and 2 of `pages.home.tabs`)"),
        "{e}"
    );
    assert!(
        e.contains("duplicates.yaml: pages.home.tools[1]: tool `clock` is listed twice"),
        "{e}"
    );
    assert!(e.contains("(4 problems)"), "{e}");
}

#[test]
fn unknown_references_are_reported_with_their_index() {
    let e = load_error("unknown_refs.yaml");
    assert!(
        e.contains(
            "unknown_refs.yaml: pages.table_view.tabs.rows.tools[1]: unknown tool `lookup_rowz`"
        ),
        "{e}"
    );
    assert!(
        e.contains(
            "unknown_refs.yaml: pages.table_view.payload_types[0]: unknown payload type `nope`"
        ),
        "{e}"
    );
    assert!(
        e.contains("unknown_refs.yaml: pages.table_view.tabs.rows.subtabs.sel.actions[0]: unknown action `zap`"),
        "{e}"
    );
    assert!(
        e.contains("unknown_refs.yaml: tools.clock.payload_type: unknown payload type `ghost`"),
        "{e}"
    );
    assert!(e.contains("(4 problems)"), "{e}");
}

#[test]
fn invalid_schemas_are_reported() {
    let e = load_error("bad_schemas.yaml");
    assert!(
        e.contains("bad_schemas.yaml: payload_types.p.schema: invalid JSON schema:"),
        "{e}"
    );
    assert!(
        e.contains("bad_schemas.yaml: tools.t.input_schema: a JSON schema here must be an object"),
        "{e}"
    );
    assert!(
        e.contains(
            "bad_schemas.yaml: tools.u.input_schema: a tool's input schema must have `type: object`"
        ),
        "{e}"
    );
    assert!(
        e.contains("bad_schemas.yaml: actions.a.params_schema: invalid JSON schema:"),
        "{e}"
    );
    assert!(e.contains("(4 problems)"), "{e}");
}

#[test]
fn invalid_and_duplicate_markers_are_reported() {
    let e = load_error("bad_markers.yaml");
    assert!(
        e.contains("bad_markers.yaml: payload_types.lower.marker: invalid marker `Schema_Proposal`: use UPPER_SNAKE_CASE"),
        "{e}"
    );
    assert!(
        e.contains("bad_markers.yaml: payload_types.second.marker: marker `FIRST` is already used by payload type `first`"),
        "{e}"
    );
    assert!(
        e.contains("bad_markers.yaml: payload_types.reserved.marker: marker `SUGGESTED_VALUES` is reserved for suggestions"),
        "{e}"
    );
    assert!(e.contains("(3 problems)"), "{e}");
}

#[test]
fn invalid_names_are_reported() {
    let e = load_error("bad_names.yaml");
    assert!(
        e.contains("bad_names.yaml: tools.my tool: invalid name `my tool`: use 1 to 64 letters, digits, `_` or `-`"),
        "{e}"
    );
    assert!(
        e.contains(
            "bad_names.yaml: payload_types.Proposal: invalid name `Proposal`: use lower_snake_case"
        ),
        "{e}"
    );
    assert!(
        e.contains("bad_names.yaml: actions.close-chat: invalid name `close-chat`"),
        "{e}"
    );
    assert!(
        e.contains("bad_names.yaml: tools.ok.builtin: invalid built-in tool name `bad name`"),
        "{e}"
    );
    assert!(e.contains("(4 problems)"), "{e}");
}

#[test]
fn tool_endpoints_must_be_http_urls_and_exactly_one() {
    let e = load_error("bad_endpoints.yaml");
    assert!(
        e.contains("bad_endpoints.yaml: tools.ftp.grpc: invalid endpoint `ftp://tools:21`: scheme `ftp` is not http or https"),
        "{e}"
    );
    assert!(
        e.contains("bad_endpoints.yaml: tools.relative.grpc: invalid endpoint `tools:7000`: needs an http:// or https:// scheme"),
        "{e}"
    );
    assert!(
        e.contains("bad_endpoints.yaml: tools.both: exactly one of `builtin` or `grpc` must say where the tool runs"),
        "{e}"
    );
    assert!(
        e.contains("bad_endpoints.yaml: tools.neither: exactly one of `builtin` or `grpc` must say where the tool runs"),
        "{e}"
    );
    assert!(
        e.contains("bad_endpoints.yaml: tools.zero.timeout_ms: must be greater than 0"),
        "{e}"
    );
    assert!(e.contains("(5 problems)"), "{e}");
}

#[test]
fn server_actions_need_a_message_template_and_templates_must_compile() {
    let e = load_error("bad_actions.yaml");
    assert!(
        e.contains("bad_actions.yaml: actions.run: a server action needs a `message_template` (the message its turn sends)"),
        "{e}"
    );
    assert!(e.contains("bad_actions.yaml: actions.open.message_template: only server actions have a message template"), "{e}");
    assert!(
        e.contains(
            "bad_actions.yaml: actions.broken.message_template: invalid template: syntax error"
        ),
        "{e}"
    );
    assert!(
        e.contains("bad_actions.yaml: pages.p.context_template: invalid template: syntax error"),
        "{e}"
    );
    assert!(e.contains("(template line 2)"), "{e}");
    assert!(e.contains("(4 problems)"), "{e}");
}

#[test]
fn misc_file_level_problems() {
    let e = load_error("bad_misc.yaml");
    assert!(
        e.contains("bad_misc.yaml: version: unsupported version 2"),
        "{e}"
    );
    assert!(
        e.contains("bad_misc.yaml: limits.max_context_chars: must be greater than 0"),
        "{e}"
    );
    assert!(
        e.contains("bad_misc.yaml: streams.empty.instructions: must not be empty"),
        "{e}"
    );
    assert!(e.contains("(3 problems)"), "{e}");
}

#[test]
fn shape_errors_name_the_entry_and_line() {
    let err = Registry::from_str("version: 1\npages:\n  p:\n    toolz: [a]\n", "shape.yaml")
        .expect_err("unknown field");
    let e = err.to_string();
    assert!(
        e.starts_with("shape.yaml: pages.p.toolz: unknown field `toolz`"),
        "{e}"
    );
    assert!(e.contains("line 4"), "{e}");

    let err = Registry::from_str(
        "version: 1\npages:\n  p:\n    tools: [a, {b: 1}]\n",
        "shape.yaml",
    )
    .expect_err("a map is not a name");
    assert!(
        err.to_string()
            .starts_with("shape.yaml: pages.p.tools[1]: invalid type: map"),
        "{err}"
    );

    let err = Registry::from_str(
        "version: 1\nactions:\n  a: { handler: browser }\n",
        "shape.yaml",
    )
    .expect_err("bad handler");
    assert!(
        err.to_string()
            .starts_with("shape.yaml: actions.a.handler: unknown variant `browser`"),
        "{err}"
    );

    let err = Registry::from_str("version: [\n", "syntax.yaml").expect_err("not yaml");
    assert!(err.to_string().starts_with("syntax.yaml: "), "{err}");
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let err = Registry::load(&testdata("does_not_exist.yaml")).expect_err("missing");
    assert!(matches!(err, RegistryError::Io { .. }));
    assert!(
        err.to_string()
            .contains("does_not_exist.yaml: cannot read the registry file"),
        "{err}"
    );
}

#[test]
fn a_minimal_registry_is_valid() {
    let r = Registry::from_str("version: 1\n", "min.yaml").expect("valid");
    let p = resolve(&r, "any", "", "");
    assert!(p.tools.is_empty() && p.actions.is_empty() && p.payload_types.is_empty());
    assert!(p.parse_profile().payloads.is_empty());
}
