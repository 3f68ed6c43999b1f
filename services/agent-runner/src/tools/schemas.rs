//! Compiled tool input schemas, shared by the turns that declare the same
//! schema.
//!
//! A turn's tools are prepared from its request, and a page sends the same
//! tools with every turn: compiling each schema again per turn cost CPU,
//! and every running turn kept its own copy of the compiled validators.
//! Validators are kept in a [`CompiledCache`] keyed by the schema's JSON
//! text, at most [`CAPACITY`] of them, the oldest forgotten first (schemas
//! come from configuration and pages, so a runner sees few). [`problems`]
//! says how a value fails one.

use std::sync::Arc;

use jsonschema::{ValidationError, Validator};
use parley_parse::CompiledCache;
use serde_json::Value;

/// The most distinct schemas kept compiled.
pub const CAPACITY: usize = 512;

/// Compiled schemas by their JSON text.
#[derive(Debug)]
pub struct Schemas {
    compiled: CompiledCache<Validator>,
}

impl Default for Schemas {
    fn default() -> Self {
        Self {
            compiled: CompiledCache::new(CAPACITY),
        }
    }
}

impl Schemas {
    /// The validator of `schema`, compiled once.
    pub fn validator(&self, schema: &Value) -> Result<Arc<Validator>, ValidationError<'static>> {
        self.compiled
            .get_or_compile(schema.to_string().as_bytes(), || {
                jsonschema::validator_for(schema)
            })
    }

    /// How many schemas are kept compiled.
    pub fn len(&self) -> usize {
        self.compiled.len()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.compiled.is_empty()
    }
}

/// Every way `value` violates `validator`'s schema (the first eight), as
/// `path: message` lines joined by `; `.
pub fn problems(validator: &Validator, value: &Value) -> Result<(), String> {
    let problems: Vec<String> = validator
        .iter_errors(value)
        .take(8)
        .map(|error| {
            let path = error.instance_path().to_string();
            let path = if path.is_empty() {
                "/".to_owned()
            } else {
                path
            };
            format!("{path}: {error}")
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_same_schema_is_compiled_once_and_shared() {
        let schemas = Schemas::default();
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        let first = schemas.validator(&schema).expect("valid");
        let second = schemas.validator(&schema.clone()).expect("valid");
        assert!(Arc::ptr_eq(&first, &second));
        let other = schemas
            .validator(&json!({"type": "object"}))
            .expect("valid");
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(schemas.len(), 2);
        assert!(first.is_valid(&json!({"a": 1})));
        assert!(!first.is_valid(&json!({"a": "x"})));
    }

    #[test]
    fn an_invalid_schema_is_an_error_and_not_kept() {
        let schemas = Schemas::default();
        assert!(schemas.validator(&json!({"type": 12})).is_err());
        assert!(schemas.is_empty());
    }

    #[test]
    fn a_full_cache_forgets_the_oldest_schema() {
        let schemas = Schemas::default();
        let schema = |n: usize| json!({"type": "object", "maxProperties": n});
        let oldest = schemas.validator(&schema(0)).expect("valid");
        for n in 1..CAPACITY - 1 {
            schemas.validator(&schema(n)).expect("valid");
        }
        let newest = schemas.validator(&schema(CAPACITY - 1)).expect("valid");
        assert_eq!(schemas.len(), CAPACITY);
        schemas
            .validator(&json!({"type": "object", "minProperties": 1}))
            .expect("valid");
        assert_eq!(schemas.len(), CAPACITY);
        let newest_again = schemas.validator(&schema(CAPACITY - 1)).expect("valid");
        assert!(Arc::ptr_eq(&newest, &newest_again), "the newest is kept");
        let oldest_again = schemas.validator(&schema(0)).expect("valid");
        assert!(
            !Arc::ptr_eq(&oldest, &oldest_again),
            "the oldest was forgotten"
        );
    }
}
