//! Typed views of the built-in payload types `SchemaProposal` and
//! `DataProposal` (docs/output-format.md#payload-markers), read from the JSON
//! object the model wrote.
//!
//! A view is produced only when the whole object has the expected shape;
//! otherwise the payload is carried in `data` alone. Unknown column types and
//! filter displays map to `UNSPECIFIED` (the raw value stays in `data`).

use parley_proto::parser::v1 as pb;
use serde_json::{Map, Value};

use parley_proto::json::to_struct;

/// The typed view of `data` for payload type `payload_type`, if it has one.
pub fn typed_view(payload_type: &str, data: &Map<String, Value>) -> Option<pb::payload::Typed> {
    match payload_type {
        "schema_proposal" => schema_proposal(data).map(pb::payload::Typed::SchemaProposal),
        "data_proposal" => data_proposal(data).map(pb::payload::Typed::DataProposal),
        _ => None,
    }
}

/// `Some(None)` when absent or null, `Some(Some(s))` for a string, `None`
/// (shape mismatch) otherwise.
fn opt_str(map: &Map<String, Value>, key: &str) -> Option<Option<String>> {
    match map.get(key) {
        None | Some(Value::Null) => Some(None),
        Some(Value::String(s)) => Some(Some(s.clone())),
        Some(_) => None,
    }
}

fn opt_bool(map: &Map<String, Value>, key: &str) -> Option<Option<bool>> {
    match map.get(key) {
        None | Some(Value::Null) => Some(None),
        Some(Value::Bool(b)) => Some(Some(*b)),
        Some(_) => None,
    }
}

fn opt_object<'a>(
    map: &'a Map<String, Value>,
    key: &str,
) -> Option<Option<&'a Map<String, Value>>> {
    match map.get(key) {
        None | Some(Value::Null) => Some(None),
        Some(Value::Object(o)) => Some(Some(o)),
        Some(_) => None,
    }
}

fn strings(map: &Map<String, Value>, key: &str) -> Option<Vec<String>> {
    match map.get(key) {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect(),
        Some(_) => None,
    }
}

fn objects<'a>(map: &'a Map<String, Value>, key: &str) -> Option<Vec<&'a Map<String, Value>>> {
    match map.get(key) {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::Array(items)) => items.iter().map(Value::as_object).collect(),
        Some(_) => None,
    }
}

fn column_type(map: &Map<String, Value>, key: &str) -> Option<Option<i32>> {
    Some(opt_str(map, key)?.map(|t| {
        (match t.as_str() {
            "text" => pb::ColumnType::Text,
            "number" => pb::ColumnType::Number,
            "date" => pb::ColumnType::Date,
            "boolean" => pb::ColumnType::Boolean,
            "select" => pb::ColumnType::Select,
            _ => pb::ColumnType::Unspecified,
        }) as i32
    }))
}

fn filter_display(map: &Map<String, Value>) -> Option<Option<i32>> {
    let key = if map.contains_key("filterDisplay") {
        "filterDisplay"
    } else {
        "filter_display"
    };
    Some(opt_str(map, key)?.map(|f| {
        (match f.as_str() {
            "tab" => pb::FilterDisplay::Tab,
            "dropdown" => pb::FilterDisplay::Dropdown,
            _ => pb::FilterDisplay::Unspecified,
        }) as i32
    }))
}

fn row_id(map: &Map<String, Value>) -> Option<i64> {
    let value = map.get("row_id")?;
    value.as_i64().or_else(|| {
        // A whole float such as `5.0` is still a row id; the range check makes the cast exact.
        value
            .as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
            .map(|f| f as i64)
    })
}

/// The `SchemaProposal` view of a `schema_proposal` object.
pub fn schema_proposal(data: &Map<String, Value>) -> Option<pb::SchemaProposal> {
    let mode = match data.get("mode")?.as_str()? {
        "create" => pb::SchemaProposalMode::Create,
        "update" => pb::SchemaProposalMode::Update,
        _ => return None,
    };
    let operations = match data.get("operations")? {
        Value::Array(items) => items
            .iter()
            .map(schema_operation)
            .collect::<Option<Vec<_>>>()?,
        _ => return None,
    };
    Some(pb::SchemaProposal {
        mode: mode as i32,
        reasoning: opt_str(data, "reasoning")?.unwrap_or_default(),
        table_name: opt_str(data, "table_name")?,
        table_description: opt_str(data, "table_description")?,
        operations,
        sample_rows: objects(data, "sample_rows")?
            .into_iter()
            .map(to_struct)
            .collect(),
    })
}

fn schema_operation(value: &Value) -> Option<pb::SchemaOperation> {
    use pb::schema_operation::Operation;
    let op = value.as_object()?;
    let operation = match op.get("action")?.as_str()? {
        "add" => Operation::Add(pb::AddColumn {
            column: Some(column_definition(op.get("column")?.as_object()?)?),
            after_column_id: opt_str(op, "after_column_id")?,
        }),
        "modify" => Operation::Modify(pb::ModifyColumn {
            column_id: op.get("column_id")?.as_str()?.to_owned(),
            changes: Some(column_changes(op.get("changes")?.as_object()?)?),
        }),
        "remove" => Operation::Remove(pb::RemoveColumn {
            column_id: op.get("column_id")?.as_str()?.to_owned(),
        }),
        "reorder" => Operation::Reorder(pb::ReorderColumn {
            column_id: op.get("column_id")?.as_str()?.to_owned(),
            after_column_id: opt_str(op, "after_column_id")?,
        }),
        _ => return None,
    };
    Some(pb::SchemaOperation {
        operation: Some(operation),
    })
}

fn column_definition(column: &Map<String, Value>) -> Option<pb::ColumnDefinition> {
    Some(pb::ColumnDefinition {
        name: column.get("name")?.as_str()?.to_owned(),
        r#type: column_type(column, "type")?.unwrap_or_default(),
        required: opt_bool(column, "required")?,
        options: strings(column, "options")?,
        filter_display: filter_display(column)?.unwrap_or_default(),
    })
}

fn column_changes(changes: &Map<String, Value>) -> Option<pb::ColumnChanges> {
    Some(pb::ColumnChanges {
        name: opt_str(changes, "name")?,
        r#type: column_type(changes, "type")?,
        options: strings(changes, "options")?,
        required: opt_bool(changes, "required")?,
        filter_display: filter_display(changes)?,
    })
}

/// The `DataProposal` view of a `data_proposal` object.
pub fn data_proposal(data: &Map<String, Value>) -> Option<pb::DataProposal> {
    let operations = match data.get("operations")? {
        Value::Array(items) => items
            .iter()
            .map(data_operation)
            .collect::<Option<Vec<_>>>()?,
        _ => return None,
    };
    Some(pb::DataProposal {
        reasoning: opt_str(data, "reasoning")?.unwrap_or_default(),
        operations,
    })
}

fn data_operation(value: &Value) -> Option<pb::DataOperation> {
    use pb::data_operation::Operation;
    let op = value.as_object()?;
    let operation = match op.get("action")?.as_str()? {
        "add" => Operation::Add(pb::AddRow {
            data: Some(to_struct(op.get("data")?.as_object()?)),
        }),
        "update" => Operation::Update(pb::UpdateRow {
            row_id: row_id(op)?,
            changes: Some(to_struct(opt_object(op, "changes")?.unwrap_or(&Map::new()))),
        }),
        "delete" => Operation::Delete(pb::DeleteRow {
            row_id: row_id(op)?,
        }),
        _ => return None,
    };
    Some(pb::DataOperation {
        operation: Some(operation),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn schema_operations_of_every_kind() {
        let data = map(json!({
            "mode": "update",
            "operations": [
                {"action": "add", "column": {"name": "Due", "type": "date"}, "after_column_id": "col_1"},
                {"action": "modify", "column_id": "col_2", "changes": {"type": "select", "options": ["A", "B"], "filterDisplay": "dropdown"}},
                {"action": "remove", "column_id": "col_3"},
                {"action": "reorder", "column_id": "col_4"}
            ]
        }));
        let view = schema_proposal(&data).expect("has the shape");
        assert_eq!(view.mode, pb::SchemaProposalMode::Update as i32);
        assert_eq!(view.operations.len(), 4);
        let Some(pb::schema_operation::Operation::Modify(modify)) = &view.operations[1].operation
        else {
            panic!("second operation is a modify");
        };
        let changes = modify.changes.as_ref().expect("changes");
        assert_eq!(changes.r#type, Some(pb::ColumnType::Select as i32));
        assert_eq!(
            changes.filter_display,
            Some(pb::FilterDisplay::Dropdown as i32)
        );
        assert_eq!(changes.name, None);
    }

    #[test]
    fn shape_mismatches_give_no_view() {
        assert!(schema_proposal(&map(json!({"mode": "delete", "operations": []}))).is_none());
        assert!(
            schema_proposal(&map(
                json!({"mode": "create", "operations": [{"action": "explode"}]})
            ))
            .is_none()
        );
        assert!(
            data_proposal(&map(
                json!({"operations": [{"action": "update", "row_id": "five"}]})
            ))
            .is_none()
        );
        assert!(typed_view("chart", &map(json!({"x": 1}))).is_none());
    }

    #[test]
    fn data_operations_of_every_kind() {
        let data = map(json!({"operations": [
            {"action": "add", "data": {"Company": "Acme"}},
            {"action": "update", "row_id": 5, "changes": {"Status": "Interview"}},
            {"action": "delete", "row_id": 12.0}
        ]}));
        let view = data_proposal(&data).expect("has the shape");
        let Some(pb::data_operation::Operation::Delete(delete)) = &view.operations[2].operation
        else {
            panic!("third operation is a delete");
        };
        assert_eq!(delete.row_id, 12);
    }
}
