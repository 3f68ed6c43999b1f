//! Compiled profiles by content.
//!
//! A caller that sends its profile inline sends the same few profiles over
//! and over (the gateway sends its page's profile with every turn).
//! Compiling one means compiling its JSON schemas, about 200 µs for the
//! example pages, so the service and the gateway's in-process fallback keep
//! what they compiled, keyed by the profile's encoded bytes (prost encodes a
//! message deterministically: `Struct` fields are a sorted map). The cache
//! holds at most `capacity` profiles and forgets the oldest first; profiles
//! that fail to compile are not kept, so a bad one costs its compile each
//! time and never displaces a good one.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex, PoisonError},
};

use parley_proto::parser::v1::ParseProfile;
use prost::Message;

use crate::{Profile, ProfileError};

/// Profiles kept by default.
pub const DEFAULT_CAPACITY: usize = 256;

/// A bounded cache of compiled profiles. Share it behind an `Arc`.
#[derive(Debug)]
pub struct ProfileCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_bytes: HashMap<Arc<[u8]>, Arc<Profile>>,
    /// Keys in insertion order, oldest first.
    order: VecDeque<Arc<[u8]>>,
}

impl Default for ProfileCache {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY)
    }
}

impl ProfileCache {
    /// A cache keeping at most `capacity` profiles; 0 keeps none.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: Mutex::default(),
        }
    }

    /// How many profiles are kept now.
    pub fn len(&self) -> usize {
        self.lock().by_bytes.len()
    }

    /// Whether no profile is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The compiled form of `proto`, compiled now only if it is not kept.
    /// Compiling happens outside the lock: two callers missing the same
    /// profile at once both compile it, and nobody waits behind a compile.
    pub fn get_or_compile(&self, proto: &ParseProfile) -> Result<Arc<Profile>, ProfileError> {
        if self.capacity == 0 {
            return Profile::from_proto(proto).map(Arc::new);
        }
        let key: Arc<[u8]> = proto.encode_to_vec().into();
        if let Some(profile) = self.lock().by_bytes.get(&key) {
            return Ok(profile.clone());
        }
        let profile = Arc::new(Profile::from_proto(proto)?);
        let mut inner = self.lock();
        if inner.by_bytes.contains_key(&key) {
            return Ok(profile);
        }
        while inner.order.len() >= self.capacity {
            let Some(oldest) = inner.order.pop_front() else {
                break;
            };
            inner.by_bytes.remove(&oldest);
        }
        inner.order.push_back(key.clone());
        inner.by_bytes.insert(key, profile.clone());
        Ok(profile)
    }
}

#[cfg(test)]
mod tests {
    use parley_proto::parser::v1::PayloadSpec;

    use super::*;

    fn profile(marker: &str) -> ParseProfile {
        ParseProfile {
            payloads: vec![PayloadSpec {
                name: marker.to_lowercase(),
                marker: marker.into(),
                schema: None,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn the_same_profile_is_compiled_once() {
        let cache = ProfileCache::new(4);
        let first = cache.get_or_compile(&profile("PLAN")).expect("compiles");
        let again = cache.get_or_compile(&profile("PLAN")).expect("compiles");
        assert!(Arc::ptr_eq(&first, &again));
        let other = cache.get_or_compile(&profile("CHART")).expect("compiles");
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn the_oldest_profile_goes_first_when_full() {
        let cache = ProfileCache::new(2);
        let plan = cache.get_or_compile(&profile("PLAN")).expect("compiles");
        cache.get_or_compile(&profile("CHART")).expect("compiles");
        cache.get_or_compile(&profile("TABLE")).expect("compiles");
        assert_eq!(cache.len(), 2);
        let plan_again = cache.get_or_compile(&profile("PLAN")).expect("compiles");
        assert!(!Arc::ptr_eq(&plan, &plan_again), "PLAN was evicted");
    }

    #[test]
    fn invalid_profiles_are_refused_and_not_kept() {
        let cache = ProfileCache::new(2);
        assert!(cache.get_or_compile(&profile("not a marker!")).is_err());
        assert!(cache.is_empty());
    }

    #[test]
    fn capacity_zero_compiles_every_time() {
        let cache = ProfileCache::new(0);
        let first = cache.get_or_compile(&profile("PLAN")).expect("compiles");
        let again = cache.get_or_compile(&profile("PLAN")).expect("compiles");
        assert!(!Arc::ptr_eq(&first, &again));
        assert!(cache.is_empty());
    }
}
