//! Compiled profiles by content.
//!
//! A caller that sends its profile inline sends the same few profiles over
//! and over (the gateway sends its page's profile with every turn).
//! Compiling one means compiling its JSON schemas, about 200 µs for the
//! example pages, so the service and the gateway's in-process fallback keep
//! what they compiled in a [`CompiledCache`], keyed by the profile's encoded
//! bytes (prost encodes a message deterministically: `Struct` fields are a
//! sorted map): at most `capacity` profiles, the oldest forgotten first,
//! those that fail to compile not kept.

use std::sync::Arc;

use parley_proto::parser::v1::ParseProfile;
use prost::Message;

use super::Profile;
use crate::{cache::CompiledCache, error::ProfileError};

/// Profiles kept by default.
pub const DEFAULT_CAPACITY: usize = 256;

/// A bounded cache of compiled profiles. Share it behind an `Arc`.
#[derive(Debug)]
pub struct ProfileCache {
    compiled: CompiledCache<Profile>,
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
            compiled: CompiledCache::new(capacity),
        }
    }

    /// How many profiles are kept now.
    pub fn len(&self) -> usize {
        self.compiled.len()
    }

    /// Whether no profile is kept.
    pub fn is_empty(&self) -> bool {
        self.compiled.is_empty()
    }

    /// The compiled form of `proto`, compiled now only if it is not kept.
    pub fn get_or_compile(&self, proto: &ParseProfile) -> Result<Arc<Profile>, ProfileError> {
        self.compiled
            .get_or_compile(&proto.encode_to_vec(), || Profile::from_proto(proto))
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
