//! Named profiles loaded from a JSON file (`--profiles FILE`), so requests
//! can say `profile_name: "table_view"` instead of sending the whole profile.
//!
//! Format: `{"profiles": {"<name>": <ParseProfile in the proto3 JSON
//! mapping>}}`. Every profile is compiled at load time: a bad schema stops
//! the server at start-up, not at the first request that needs it.

use std::{collections::BTreeMap, path::Path, sync::Arc};

use serde::Deserialize;

use super::{Profile, ProfileSpec};
use crate::error::ProfileError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfilesFile {
    profiles: BTreeMap<String, ProfileSpec>,
}

/// Compiled profiles by name.
#[derive(Debug, Clone, Default)]
pub struct Profiles {
    by_name: BTreeMap<String, Arc<Profile>>,
}

impl Profiles {
    /// No named profiles.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Loads and compiles the profiles file at `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ProfileError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_json(&text).map_err(|error| match error {
            ProfileError::Malformed { reason, .. } => ProfileError::Malformed {
                path: path.to_owned(),
                reason,
            },
            other => other,
        })
    }

    /// Compiles profiles from the text of a profiles file.
    pub fn from_json(text: &str) -> Result<Self, ProfileError> {
        let file: ProfilesFile =
            serde_json::from_str(text).map_err(|error| ProfileError::Malformed {
                path: Default::default(),
                reason: error.to_string(),
            })?;
        let mut by_name = BTreeMap::new();
        for (name, spec) in file.profiles {
            let profile = Profile::new(&spec).map_err(|source| ProfileError::InProfile {
                profile: name.clone(),
                source: Box::new(source),
            })?;
            by_name.insert(name, Arc::new(profile));
        }
        Ok(Self { by_name })
    }

    /// The profile called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Profile>> {
        self.by_name.get(name).cloned()
    }

    /// The loaded names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    /// How many profiles are loaded.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// True when no profile is loaded.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_named_profiles() {
        let profiles = Profiles::from_json(
            r#"{"profiles": {"a": {"payloads": [{"name": "p", "marker": "P:"}], "clientActions": ["x"]}, "b": {}}}"#,
        )
        .expect("valid file");
        assert_eq!(profiles.names().collect::<Vec<_>>(), ["a", "b"]);
        assert!(profiles.get("a").is_some());
        assert!(profiles.get("c").is_none());
    }

    #[test]
    fn reports_the_profile_and_field_at_fault() {
        let error = Profiles::from_json(r#"{"profiles": {"bad": {"payloads": [{"name": "p", "marker": "P", "schema": {"type": 3}}]}}}"#)
            .expect_err("bad schema");
        assert!(error.to_string().contains("profile `bad`"), "{error}");
        assert_eq!(error.field(), "payloads[0].schema");
        assert!(matches!(
            Profiles::from_json("{}"),
            Err(ProfileError::Malformed { .. })
        ));
        assert!(matches!(
            Profiles::load("/nonexistent/profiles.json"),
            Err(ProfileError::Read { .. })
        ));
    }
}
