//! The example responses in `tests/fixtures/` (one per element of
//! docs/output-format.md) parse to exactly the typed results they stand for,
//! under the example profiles of `deploy/config/parser-profiles.json`.

use parley_parse::{ActionHandler, Limits, SuggestedAction, SuggestedValue, parse};
use parley_proto::parser::v1 as pb;
use parley_testkit::examples::{fixture, profile};
use pb::{
    data_operation::Operation as DataOp, payload::Typed, schema_operation::Operation as SchemaOp,
};
use serde_json::{Value, json};

fn data_of(text: &str) -> Value {
    let start = text.find('{').unwrap_or(0);
    let end = text.rfind('}').map_or(text.len(), |e| e + 1);
    serde_json::from_str(&text[start..end]).unwrap_or(Value::Null)
}

#[test]
fn schema_proposal_create_is_typed_and_removed() {
    let text = fixture("schema_proposal_create.txt");
    let parsed = parse(&text, &profile("tables_list"), &Limits::default()).expect("within limits");
    assert_eq!(
        parsed.message,
        "I'll set up a customer tracker for you with a name and a status column."
    );
    assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
    let payload = parsed.custom_payload.clone().expect("a payload");
    assert_eq!(payload.payload_type, "schema_proposal");
    assert_eq!(Value::Object(payload.data), data_of(&text));

    let response = parsed.into_proto();
    let payload = response.custom_payload.expect("a payload");
    let Some(Typed::SchemaProposal(view)) = payload.typed else {
        panic!("typed schema proposal")
    };
    assert_eq!(view.mode, pb::SchemaProposalMode::Create as i32);
    assert_eq!(view.reasoning, "Brief explanation");
    assert_eq!(view.table_name.as_deref(), Some("My Table"));
    assert_eq!(
        view.table_description.as_deref(),
        Some("What this table tracks")
    );
    let adds: Vec<_> = view
        .operations
        .iter()
        .map(|op| match &op.operation {
            Some(SchemaOp::Add(add)) => add.column.clone().expect("column"),
            other => panic!("expected add, got {other:?}"),
        })
        .collect();
    assert_eq!(adds[0].name, "Name");
    assert_eq!(adds[0].r#type, pb::ColumnType::Text as i32);
    assert_eq!(adds[0].required, Some(true));
    assert_eq!(adds[1].name, "Status");
    assert_eq!(adds[1].r#type, pb::ColumnType::Select as i32);
    assert_eq!(adds[1].options, ["Active", "Inactive"]);
    assert_eq!(view.sample_rows.len(), 2);
    assert_eq!(
        parley_proto::json::from_struct(&view.sample_rows[1]),
        json!({"Name": "Globex", "Status": "Inactive"})
            .as_object()
            .cloned()
            .unwrap_or_default()
    );
}

#[test]
fn schema_proposal_update_has_every_operation_kind() {
    let text = fixture("schema_proposal_update.txt");
    let parsed = parse(&text, &profile("table_edit"), &Limits::default()).expect("within limits");
    assert_eq!(
        parsed.message,
        "**Plan:** rename the status column, add a due date after it, drop the notes and move priority first."
    );
    let response = parsed.into_proto();
    let Some(Typed::SchemaProposal(view)) = response.custom_payload.and_then(|p| p.typed) else {
        panic!("typed schema proposal")
    };
    assert_eq!(view.mode, pb::SchemaProposalMode::Update as i32);
    assert_eq!(view.table_name, None);
    let ops: Vec<_> = view
        .operations
        .into_iter()
        .filter_map(|op| op.operation)
        .collect();
    let [
        SchemaOp::Modify(modify),
        SchemaOp::Add(add),
        SchemaOp::Remove(remove),
        SchemaOp::Reorder(reorder),
    ] = ops.as_slice()
    else {
        panic!("modify, add, remove, reorder: {ops:?}")
    };
    assert_eq!(modify.column_id, "col_status");
    let changes = modify.changes.clone().expect("changes");
    assert_eq!(changes.name.as_deref(), Some("Stage"));
    assert_eq!(changes.r#type, Some(pb::ColumnType::Select as i32));
    assert_eq!(changes.options, ["Full", "Options", "List"]);
    assert_eq!(changes.required, Some(true));
    assert_eq!(
        changes.filter_display,
        Some(pb::FilterDisplay::Dropdown as i32)
    );
    assert_eq!(add.after_column_id.as_deref(), Some("col_status"));
    let column = add.column.clone().expect("column");
    assert_eq!(
        (column.r#type, column.filter_display),
        (pb::ColumnType::Date as i32, pb::FilterDisplay::Tab as i32)
    );
    assert_eq!(remove.column_id, "col_notes");
    assert_eq!(reorder.column_id, "col_priority");
    assert_eq!(reorder.after_column_id, None);
}

#[test]
fn data_proposal_is_typed_on_table_view_only() {
    let text = fixture("data_proposal.txt");
    let parsed = parse(&text, &profile("table_view"), &Limits::default()).expect("within limits");
    assert_eq!(
        parsed.message,
        "Here are the changes I suggest — review them in the table and apply the ones you like."
    );
    let payload = parsed.custom_payload.clone().expect("a payload");
    assert_eq!(payload.payload_type, "data_proposal");
    assert_eq!(Value::Object(payload.data), data_of(&text));
    let Some(Typed::DataProposal(view)) = parsed.into_proto().custom_payload.and_then(|p| p.typed)
    else {
        panic!("typed data proposal")
    };
    assert_eq!(view.reasoning, "Adding sample job applications");
    let ops: Vec<_> = view
        .operations
        .into_iter()
        .filter_map(|op| op.operation)
        .collect();
    let [
        DataOp::Add(add),
        DataOp::Update(update),
        DataOp::Delete(delete),
    ] = ops.as_slice()
    else {
        panic!("add, update, delete: {ops:?}")
    };
    let added = parley_proto::json::from_struct(add.data.as_ref().expect("data"));
    assert_eq!(
        Value::Object(added),
        json!({"Company": "Acme Corp", "Position": "Engineer", "Status": "Applied"})
    );
    assert_eq!(update.row_id, 5);
    let changes = parley_proto::json::from_struct(update.changes.as_ref().expect("changes"));
    assert_eq!(Value::Object(changes), json!({"Status": "Interview"}));
    assert_eq!(delete.row_id, 12);

    // Not available on tables_list: the marker is plain text there.
    let elsewhere =
        parse(&text, &profile("tables_list"), &Limits::default()).expect("within limits");
    assert!(elsewhere.custom_payload.is_none());
    assert_eq!(elsewhere.message, text);
}

#[test]
fn suggestions_are_typed_and_removed() {
    let text = fixture("suggestions.txt");
    let parsed = parse(&text, &profile("table_view"), &Limits::default()).expect("within limits");
    assert_eq!(
        parsed.message,
        "Your table is ready! What would you like to do next?"
    );
    assert_eq!(
        parsed.suggested_values,
        [
            SuggestedValue {
                label: "Display Text".into(),
                value: "text to send as next message".into()
            },
            SuggestedValue {
                label: "Another Option".into(),
                value: "another thing to send".into()
            },
        ]
    );
    assert_eq!(
        parsed.suggested_actions,
        [SuggestedAction {
            label: "Button Text".into(),
            action: "close_chat".into(),
            handler: ActionHandler::Client,
            params: None
        }]
    );
    assert!(parsed.diagnostics.is_empty());
    let response = parsed.into_proto();
    assert_eq!(
        response.suggested_actions[0].handler,
        pb::ActionHandler::Client as i32
    );
}

#[test]
fn every_marker_form_of_the_seed_parses() {
    let data = r#"{"mode": "update", "operations": [{"action": "remove", "column_id": "c1"}]}"#;
    for marker in [
        "SCHEMA_PROPOSAL:",
        "**SCHEMA_PROPOSAL**:",
        "*SCHEMA_PROPOSAL*:",
        "**SCHEMA_PROPOSAL:**",
        "SCHEMA_PROPOSAL :",
    ] {
        let text = format!("Removing it.\n\n{marker} {data}\n");
        let parsed =
            parse(&text, &profile("table_view"), &Limits::default()).expect("within limits");
        assert_eq!(parsed.message, "Removing it.", "{marker}");
        assert_eq!(
            parsed.custom_payload.map(|p| p.payload_type).as_deref(),
            Some("schema_proposal"),
            "{marker}"
        );
    }
}
