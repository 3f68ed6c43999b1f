//! The repository's parsing examples, for the parsing library's and the
//! parser service's tests: the example profiles file
//! (`deploy/config/parser-profiles.json`) and the example model responses
//! (`crates/parley-parse/tests/fixtures`).

use std::sync::Arc;

use parley_parse::{Profile, Profiles};

use crate::process::repo_root;

/// The repository's example profiles (`deploy/config/parser-profiles.json`).
pub fn profiles() -> Profiles {
    let path = repo_root().join("deploy/config/parser-profiles.json");
    Profiles::load(&path).unwrap_or_else(|error| panic!("example profiles load: {error}"))
}

/// One example profile by name.
pub fn profile(name: &str) -> Arc<Profile> {
    profiles()
        .get(name)
        .unwrap_or_else(|| panic!("profile {name} exists"))
}

/// The text of an example response (`crates/parley-parse/tests/fixtures/<name>`).
pub fn fixture(name: &str) -> String {
    let path = repo_root()
        .join("crates/parley-parse/tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("fixture {}: {error}", path.display()))
}
