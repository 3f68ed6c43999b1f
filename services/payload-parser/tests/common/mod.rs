//! Helpers of the service's tests: the example profiles file and the
//! parsing library's example responses (`crates/parley-parse/tests/fixtures`).

#![allow(dead_code)]

use std::{path::PathBuf, sync::Arc};

use parley_parse::{Profile, Profiles};

/// The repository's example profiles (`deploy/config/parser-profiles.json`).
pub fn profiles() -> Profiles {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/parser-profiles.json");
    Profiles::load(&path).unwrap_or_else(|error| panic!("example profiles load: {error}"))
}

/// One example profile by name.
pub fn profile(name: &str) -> Arc<Profile> {
    profiles()
        .get(name)
        .unwrap_or_else(|| panic!("profile {name} exists"))
}

/// A fixture file's text.
pub fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../crates/parley-parse/tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("fixture {}: {error}", path.display()))
}
