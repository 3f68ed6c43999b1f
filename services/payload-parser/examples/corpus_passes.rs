//! Runs `parse` (or a stream in 16-byte deltas) over the bench corpus a
//! given number of times, for instruction counts that do not depend on the
//! machine's load:
//!
//! ```text
//! cargo build --release -p payload-parser --example corpus_passes
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/corpus_passes parse 0
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/corpus_passes parse 1000
//! ```
//!
//! (the difference of the two totals over 1000 is the cost of one pass;
//! `stream` instead of `parse` measures the stream, `prose-parse` and
//! `prose-stream` the bench's 64 KiB of marker-free prose).

use std::{hint::black_box, path::PathBuf, sync::Arc};

use payload_parser::{Limits, Profile, ProfileSpec, StreamParser, parse};

/// The bench's profile: `table_view` from deploy/config/parser-profiles.json, plus tools.
fn profile() -> Result<Arc<Profile>, Box<dyn std::error::Error>> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/parser-profiles.json");
    let file: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    let mut spec: ProfileSpec = serde_json::from_value(file["profiles"]["table_view"].clone())?;
    spec.tools = vec!["search_rows".into(), "create_row".into()];
    Ok(Arc::new(Profile::new(&spec)?))
}

fn corpus() -> Result<Vec<String>, Box<dyn std::error::Error>> {
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

/// The bench's 64 KiB of marker-free prose.
fn prose_64k() -> String {
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

fn stream(profile: &Arc<Profile>, text: &str, items: &mut Vec<payload_parser::StreamItem>) {
    let mut parser = StreamParser::new(Arc::clone(profile), Limits::default());
    let mut rest = text;
    while !rest.is_empty() {
        let cut = rest.ceil_char_boundary(16.min(rest.len()));
        if parser.push_into(&rest[..cut], items).is_err() {
            return;
        }
        black_box(&items);
        items.clear();
        rest = &rest[cut..];
    }
    black_box(parser.end());
    black_box(parser.finish());
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "parse".into());
    let passes: usize = args.next().as_deref().unwrap_or("1000").parse()?;
    let profile = profile()?;
    // `prose-parse` and `prose-stream` take the 64 KiB of prose instead.
    let corpus = match mode.strip_prefix("prose-") {
        Some(_) => vec![prose_64k()],
        None => corpus()?,
    };
    let limits = Limits::default();
    let mut items = Vec::new();
    for _ in 0..passes {
        for text in &corpus {
            match mode.as_str() {
                "stream" | "prose-stream" => stream(&profile, black_box(text), &mut items),
                _ => {
                    black_box(parse(black_box(text), &profile, &limits)?);
                }
            }
        }
    }
    Ok(())
}
