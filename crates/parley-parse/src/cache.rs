//! A bounded cache of things compiled from bytes, keyed by those bytes.
//!
//! Callers send the same few profiles and schemas over and over (a page's
//! parse profile with every turn, a tool's input schema with every run),
//! and compiling one costs far more than looking it up. The parser's
//! [`ProfileCache`](crate::ProfileCache) and the runner's tool schemas keep
//! what they compiled here, keyed by the source's canonical bytes (an
//! encoded proto, a schema's JSON text).
//!
//! The cache holds at most `capacity` entries and forgets the oldest first.
//! Compiling happens outside the lock: two callers missing the same key at
//! once both compile it, the second is handed the first one's, and nobody
//! waits behind a compile. What fails to compile is not kept, so a bad
//! source costs its compile each time and never displaces a good one.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

/// Compiled values by their source's bytes. Share it behind an `Arc`.
#[derive(Debug)]
pub struct CompiledCache<V> {
    capacity: usize,
    inner: Mutex<Inner<V>>,
}

#[derive(Debug)]
struct Inner<V> {
    by_key: HashMap<Arc<[u8]>, Arc<V>>,
    /// Keys in insertion order, oldest first.
    order: VecDeque<Arc<[u8]>>,
}

impl<V> CompiledCache<V> {
    /// A cache keeping at most `capacity` values; 0 keeps none.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: Mutex::new(Inner {
                by_key: HashMap::new(),
                order: VecDeque::new(),
            }),
        }
    }

    /// How many values are kept now.
    pub fn len(&self) -> usize {
        self.lock().by_key.len()
    }

    /// Whether no value is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, Inner<V>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The value kept for `key`, or `compile`'s, kept from now on when it
    /// succeeds (the oldest value goes when the cache is full).
    pub fn get_or_compile<E>(
        &self,
        key: &[u8],
        compile: impl FnOnce() -> Result<V, E>,
    ) -> Result<Arc<V>, E> {
        if self.capacity == 0 {
            return compile().map(Arc::new);
        }
        if let Some(value) = self.lock().by_key.get(key) {
            return Ok(value.clone());
        }
        let value = Arc::new(compile()?);
        let mut inner = self.lock();
        if let Some(kept) = inner.by_key.get(key) {
            return Ok(kept.clone());
        }
        while inner.order.len() >= self.capacity {
            let Some(oldest) = inner.order.pop_front() else {
                break;
            };
            inner.by_key.remove(&oldest);
        }
        let key: Arc<[u8]> = key.into();
        inner.order.push_back(key.clone());
        inner.by_key.insert(key, value.clone());
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(source: &[u8]) -> Result<String, String> {
        let text = String::from_utf8(source.to_vec()).map_err(|e| e.to_string())?;
        if text.starts_with("bad") {
            Err(format!("cannot compile {text}"))
        } else {
            Ok(text.to_uppercase())
        }
    }

    fn get(cache: &CompiledCache<String>, source: &str) -> Result<Arc<String>, String> {
        cache.get_or_compile(source.as_bytes(), || compile(source.as_bytes()))
    }

    #[test]
    fn the_same_source_is_compiled_once_and_shared() {
        let cache = CompiledCache::new(4);
        let first = get(&cache, "plan").expect("compiles");
        let again = get(&cache, "plan").expect("compiles");
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(*first, "PLAN");
        let other = get(&cache, "chart").expect("compiles");
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn a_kept_value_is_not_compiled_again() {
        let cache = CompiledCache::new(4);
        get(&cache, "plan").expect("compiles");
        let kept = cache
            .get_or_compile(b"plan", || Err::<String, _>("compiled again"))
            .expect("kept");
        assert_eq!(*kept, "PLAN");
    }

    #[test]
    fn the_oldest_goes_first_when_full() {
        let cache = CompiledCache::new(2);
        let plan = get(&cache, "plan").expect("compiles");
        let chart = get(&cache, "chart").expect("compiles");
        get(&cache, "table").expect("compiles");
        assert_eq!(cache.len(), 2);
        let chart_again = get(&cache, "chart").expect("compiles");
        assert!(Arc::ptr_eq(&chart, &chart_again), "CHART is still kept");
        let plan_again = get(&cache, "plan").expect("compiles");
        assert!(!Arc::ptr_eq(&plan, &plan_again), "PLAN was evicted");
    }

    #[test]
    fn failures_are_returned_and_not_kept() {
        let cache = CompiledCache::new(2);
        assert_eq!(
            get(&cache, "bad one").expect_err("fails"),
            "cannot compile bad one"
        );
        assert!(cache.is_empty());
    }

    #[test]
    fn capacity_zero_compiles_every_time() {
        let cache = CompiledCache::new(0);
        let first = get(&cache, "plan").expect("compiles");
        let again = get(&cache, "plan").expect("compiles");
        assert!(!Arc::ptr_eq(&first, &again));
        assert!(cache.is_empty());
    }
}
