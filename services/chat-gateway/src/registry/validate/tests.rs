//! One test per kind of validation problem, each checking the exact
//! `file: entry: problem` line and that every problem of the file is
//! collected. The invalid registries are fixtures in `testdata/`.

use std::path::PathBuf;

use crate::registry::{Registry, RegistryError};

fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/registry/validate/testdata")
        .join(name)
}

/// Loads an invalid fixture and returns its error's text.
fn load_error(name: &str) -> String {
    match Registry::load(&testdata(name)) {
        Ok(_) => panic!("{name} must not load"),
        Err(e) => e.to_string(),
    }
}

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
        e.contains("bad_endpoints.yaml: tools.both: exactly one of `builtin`, `grpc` or `runs: client` must say where the tool runs"),
        "{e}"
    );
    assert!(
        e.contains("bad_endpoints.yaml: tools.neither: exactly one of `builtin`, `grpc` or `runs: client` must say where the tool runs"),
        "{e}"
    );
    assert!(
        e.contains("bad_endpoints.yaml: tools.zero.timeout: must be longer than 0s"),
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
fn tool_timeouts_are_durations() {
    let registry = Registry::from_str(
        "version: 1\ntools:\n  \
         new: { builtin: x, timeout: 1500ms, input_schema: { type: object } }\n  \
         none: { builtin: z, input_schema: { type: object } }\n",
        "timeouts.yaml",
    )
    .expect("valid");
    let timeout = |name: &str| registry.tool(name).expect("the tool").timeout;
    assert_eq!(timeout("new"), Some(std::time::Duration::from_millis(1500)));
    assert_eq!(timeout("none"), None);

    let err = Registry::from_str(
        "version: 1\ntools:\n  t: { builtin: x, timeout: 5, input_schema: { type: object } }\n",
        "bare.yaml",
    )
    .expect_err("a bare number");
    assert!(
        err.to_string().contains("tools.t.timeout: `5` has no unit"),
        "{err}"
    );
}
