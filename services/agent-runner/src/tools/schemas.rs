//! Compiled tool input schemas, shared by the turns that declare the same
//! schema.
//!
//! A turn's tools are prepared from its request, and a page sends the same
//! tools with every turn: compiling each schema again per turn cost CPU,
//! and every running turn kept its own copy of the compiled validators.
//! Validators are kept here by the schema's JSON text, at most
//! [`CAPACITY`] of them; when that many are kept the cache starts again
//! empty (schemas come from configuration and pages, so a runner sees few).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use jsonschema::{ValidationError, Validator};
use serde_json::Value;

/// The most distinct schemas kept compiled.
pub const CAPACITY: usize = 512;

/// Compiled schemas by their JSON text.
#[derive(Debug, Default)]
pub struct Schemas {
    compiled: Mutex<HashMap<String, Arc<Validator>>>,
}

impl Schemas {
    /// The validator of `schema`, compiled once.
    pub fn validator(&self, schema: &Value) -> Result<Arc<Validator>, ValidationError<'static>> {
        let key = schema.to_string();
        let lock = || self.compiled.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(validator) = lock().get(&key) {
            return Ok(validator.clone());
        }
        // Compiled outside the lock; two turns may both compile a new
        // schema, and the second keeps the first's.
        let validator = Arc::new(jsonschema::validator_for(schema)?);
        let mut compiled = lock();
        if compiled.len() >= CAPACITY {
            compiled.clear();
        }
        Ok(compiled.entry(key).or_insert(validator).clone())
    }

    /// How many schemas are kept compiled.
    pub fn len(&self) -> usize {
        self.compiled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
    fn a_full_cache_starts_again() {
        let schemas = Schemas::default();
        for n in 0..CAPACITY {
            schemas
                .validator(&json!({"type": "object", "maxProperties": n}))
                .expect("valid");
        }
        assert_eq!(schemas.len(), CAPACITY);
        schemas
            .validator(&json!({"type": "object", "minProperties": 1}))
            .expect("valid");
        assert_eq!(schemas.len(), 1);
    }
}
