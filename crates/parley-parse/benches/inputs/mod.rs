//! The parse bench's inputs, shared with `examples/corpus_passes.rs` (which
//! counts the same work's instructions under callgrind): the example
//! `table_view` profile, the corpus of realistic responses and 64 KiB of
//! marker-free prose.

use std::{error::Error, path::PathBuf, sync::Arc};

use parley_parse::{Profile, ProfileSpec};

/// The example `table_view` profile (deploy/config/parser-profiles.json), plus tools.
pub fn profile() -> Result<Arc<Profile>, Box<dyn Error>> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/parser-profiles.json");
    let file: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    let mut spec: ProfileSpec = serde_json::from_value(file["profiles"]["table_view"].clone())?;
    spec.tools = vec!["search_rows".into(), "create_row".into()];
    Ok(Arc::new(Profile::new(&spec)?))
}

/// Every response of `benches/corpus`, in file-name order.
pub fn corpus() -> Result<Vec<String>, Box<dyn Error>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/corpus");
    let mut paths = std::fs::read_dir(&dir)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()?;
    paths.sort();
    paths
        .into_iter()
        .map(|p| Ok(std::fs::read_to_string(p)?))
        .collect()
}

/// About 64 KiB of prose without markers (an occasional colon, as prose has).
pub fn prose_64k() -> String {
    let paragraph = "The quarterly review showed steady growth across every region, although the \
        northern offices reported slower hiring than planned. Teams that adopted the new planning \
        process shipped more predictably, and customer satisfaction rose for the third quarter in \
        a row. Note: figures for March are preliminary and may change once the audit closes. \
        Looking ahead, the priorities are simple, keep the release cadence, reduce support backlog \
        and invest in onboarding for new customers.\n\n";
    let mut text = String::with_capacity(66 * 1024);
    while text.len() + paragraph.len() <= 64 * 1024 {
        text.push_str(paragraph);
    }
    text
}
