//! The cost of showing a payload while it is written: the partial-JSON
//! closer per 16-byte delta, and a stream with and without partials.
//!
//! `cargo bench -p parley-parse --bench partial -- --warm-up-time 1 --measurement-time 3`
//!
//! Throughput is in deltas (elements), so the time per element is the cost
//! of one delta:
//! - `closer/feed`: `PartialJson::feed` alone (what each delta always costs);
//! - `closer/feed_value`: `feed` then `value()` after every delta (the most a
//!   stream pays: a partial every push);
//! - `closer/feed_value_pointers`: the same plus a copy of the complete paths
//!   (all a `PartialPayload` holds);
//! - `stream/*`: `StreamParser` over a response carrying the payload, with and
//!   without partials (the difference is what partials add per delta).

use std::{hint::black_box, path::PathBuf, sync::Arc};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use parley_parse::{Limits, Profile, ProfileSpec, StreamParser, partial::PartialJson};
use serde_json::json;

const DELTA: usize = 16;

/// The example `table_view` profile (deploy/config/parser-profiles.json).
fn profile() -> Arc<Profile> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/parser-profiles.json");
    let text = std::fs::read_to_string(&path).expect("example profiles");
    let file: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let spec: ProfileSpec =
        serde_json::from_value(file["profiles"]["table_view"].clone()).expect("table_view profile");
    Arc::new(Profile::new(&spec).expect("compiles"))
}

/// The pretty-printed schema proposal of the corpus (about 1 KiB of JSON).
fn small_payload() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("benches/corpus/02_schema_create_pretty.txt");
    let text = std::fs::read_to_string(path).expect("corpus file");
    let start = text.find('{').expect("a JSON object");
    let end = text.rfind('}').expect("its end");
    text[start..=end].to_owned()
}

/// A data proposal adding 40 rows (about 8 KiB of JSON, multi-byte text).
fn large_payload() -> String {
    let operations: Vec<_> = (0..40)
        .map(|i| {
            json!({"action": "add", "data": {
                "Name": format!("Société Générale n°{i}"),
                "Status": if i % 2 == 0 { "Active" } else { "Inactive" },
                "Revenue": 1250.5 * f64::from(i),
                "Notes": "Rencontre prévue à Zürich — 日本 office follows up."
            }})
        })
        .collect();
    let value = json!({
        "reasoning": "Import the accounts listed in the attached spreadsheet",
        "operations": operations,
    });
    serde_json::to_string_pretty(&value).expect("serializes")
}

fn deltas(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let cut = rest.ceil_char_boundary(DELTA.min(rest.len()));
        out.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    out
}

fn closer(c: &mut Criterion, name: &str, json: &str) {
    let pieces = deltas(json);
    let mut group = c.benchmark_group(format!("closer_{name}"));
    group.throughput(Throughput::Elements(pieces.len() as u64));
    group.bench_function("feed", |b| {
        b.iter(|| {
            let mut partial = PartialJson::new(Limits::default());
            for piece in &pieces {
                partial.feed(black_box(piece.as_bytes())).expect("valid");
            }
            black_box(partial.is_complete())
        })
    });
    group.bench_function("feed_value", |b| {
        b.iter(|| {
            let mut partial = PartialJson::new(Limits::default());
            for piece in &pieces {
                partial.feed(black_box(piece.as_bytes())).expect("valid");
                black_box(partial.value());
            }
        })
    });
    group.bench_function("feed_value_pointers", |b| {
        b.iter(|| {
            let mut partial = PartialJson::new(Limits::default());
            for piece in &pieces {
                partial.feed(black_box(piece.as_bytes())).expect("valid");
                black_box((partial.value(), partial.complete_paths().to_vec()));
            }
        })
    });
    group.finish();
}

fn stream(profile: &Arc<Profile>, pieces: &[&str], partials: bool) -> usize {
    let mut parser = StreamParser::new(Arc::clone(profile), Limits::default());
    if partials {
        parser = parser.with_partial_payloads();
    }
    let mut items = Vec::new();
    let mut count = 0;
    for piece in pieces {
        parser.push_into(piece, &mut items).expect("within limits");
        count += items.len();
        black_box(&items);
        items.clear();
    }
    count + parser.end().len()
}

fn streams(c: &mut Criterion, name: &str, json: &str) {
    let profile = profile();
    let marker = if json.contains("\"mode\"") {
        "SCHEMA_PROPOSAL"
    } else {
        "DATA_PROPOSAL"
    };
    let text = format!("Here is the proposal.\n\n{marker}: {json}\n\nTell me what to change.");
    let pieces = deltas(&text);
    let shown = stream(&profile, &pieces, true) - stream(&profile, &pieces, false);
    assert!(shown > 10, "{name}: {shown} partials");
    println!(
        "{name}: {} bytes of JSON, {} deltas of {DELTA} bytes, {shown} partials",
        json.len(),
        pieces.len()
    );
    let mut group = c.benchmark_group(format!("stream_{name}"));
    group.throughput(Throughput::Elements(pieces.len() as u64));
    group.bench_function("without_partials", |b| {
        b.iter(|| black_box(stream(&profile, &pieces, false)))
    });
    group.bench_function("with_partials", |b| {
        b.iter(|| black_box(stream(&profile, &pieces, true)))
    });
    group.finish();
}

fn benches(c: &mut Criterion) {
    let small = small_payload();
    let large = large_payload();
    closer(c, "1KiB", &small);
    closer(c, "8KiB", &large);
    streams(c, "1KiB", &small);
    streams(c, "8KiB", &large);
}

criterion_group!(partial_benches, benches);
criterion_main!(partial_benches);
