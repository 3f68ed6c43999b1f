//! Throughput of `parse` and of `StreamParser` (16-byte deltas) on the same
//! bytes: a corpus of realistic responses (prose, markdown, every marker
//! kind, pretty and compact JSON, a text tool call) and 64 KiB of
//! marker-free prose.
//!
//! `cargo bench -p parley-parse --bench parse -- --warm-up-time 1 --measurement-time 3`
//! Responses per second = (responses per iteration) / (time per iteration);
//! the realistic group parses all corpus files once per iteration.

mod inputs;

use std::{hint::black_box, sync::Arc};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use parley_parse::{Limits, Parsed, Profile, StreamParser, parse};

/// Every JSON value written in a corpus response, for the serde floor.
fn json_parts(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(['{', '[']) {
        let candidate = &rest[start..];
        let mut stream =
            serde_json::Deserializer::from_str(candidate).into_iter::<serde_json::Value>();
        match stream.next() {
            Some(Ok(_)) => {
                let end = stream.byte_offset();
                parts.push(&candidate[..end]);
                rest = &candidate[end..];
            }
            _ => rest = &candidate[1..],
        }
    }
    parts
}

fn stream(profile: &Arc<Profile>, text: &str) -> Parsed {
    stream_in(profile, text, 16)
}

fn stream_in(profile: &Arc<Profile>, text: &str, delta: usize) -> Parsed {
    let mut parser = StreamParser::new(Arc::clone(profile), Limits::default());
    let mut items = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let cut = rest.ceil_char_boundary(delta.min(rest.len()));
        parser
            .push_into(&rest[..cut], &mut items)
            .expect("within limits");
        // A consumer hands each item on (here: drops it) and reuses the vector.
        black_box(&items);
        items.clear();
        rest = &rest[cut..];
    }
    black_box(parser.end());
    parser.finish()
}

fn sanity(profile: &Profile, corpus: &[String]) {
    let limits = Limits::default();
    let found: Vec<_> = corpus
        .iter()
        .map(|text| {
            let p = parse(text, profile, &limits).expect("within limits");
            assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
            (
                p.custom_payload.is_some(),
                !p.suggested_values.is_empty(),
                !p.tool_calls.is_empty(),
            )
        })
        .collect();
    assert_eq!(
        found.iter().filter(|f| f.0).count(),
        3,
        "three payloads in the corpus"
    );
    assert_eq!(
        found.iter().filter(|f| f.1).count(),
        3,
        "three suggestion lists in the corpus"
    );
    assert_eq!(
        found.iter().filter(|f| f.2).count(),
        1,
        "one tool call in the corpus"
    );
}

fn benches(c: &mut Criterion) {
    let profile = inputs::profile().expect("the example profile compiles");
    let corpus = inputs::corpus().expect("the bench corpus reads");
    sanity(&profile, &corpus);
    let limits = Limits::default();
    let bytes: usize = corpus.iter().map(String::len).sum();

    let mut group = c.benchmark_group("realistic");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("parse", |b| {
        b.iter(|| {
            for text in &corpus {
                black_box(parse(black_box(text), &profile, &limits).expect("within limits"));
            }
        })
    });
    group.bench_function("stream_16B", |b| {
        b.iter(|| {
            for text in &corpus {
                black_box(stream(&profile, black_box(text)));
            }
        })
    });
    // Reference floor, not a target: serde_json building a `Value` from just
    // the JSON of every element, which any parse of these responses must do.
    let json: Vec<&str> = corpus.iter().flat_map(|text| json_parts(text)).collect();
    group.bench_function("floor_serde_value", |b| {
        b.iter(|| {
            for part in &json {
                black_box(
                    serde_json::from_str::<serde_json::Value>(black_box(part)).expect("valid JSON"),
                );
            }
        })
    });
    // The part of that floor no parse can skip: the custom payloads' JSON,
    // which the result carries as an owned `Map` (the suggestion lists and
    // the tool call are read without a `Value`).
    let payloads: Vec<&str> = corpus
        .iter()
        .filter(|text| text.contains("_PROPOSAL"))
        .filter_map(|text| json_parts(text).into_iter().next())
        .collect();
    assert_eq!(payloads.len(), 3, "three payloads in the corpus");
    group.bench_function("floor_payload_value", |b| {
        b.iter(|| {
            for part in &payloads {
                black_box(
                    serde_json::from_str::<serde_json::Value>(black_box(part)).expect("valid JSON"),
                );
            }
        })
    });
    group.finish();

    let prose = inputs::prose_64k();
    let mut group = c.benchmark_group("prose_64KiB");
    group.throughput(Throughput::Bytes(prose.len() as u64));
    group.bench_function("parse", |b| {
        b.iter(|| black_box(parse(black_box(&prose), &profile, &limits).expect("ok")))
    });
    group.bench_function("stream_16B", |b| {
        b.iter(|| black_box(stream(&profile, black_box(&prose))))
    });
    group.bench_function("stream_256B", |b| {
        b.iter(|| black_box(stream_in(&profile, black_box(&prose), 256)))
    });
    // Reference floor: copying the bytes into a new message string.
    group.bench_function("floor_copy", |b| {
        b.iter(|| black_box(black_box(&prose).to_owned()))
    });
    group.finish();

    println!(
        "realistic corpus: {} responses, {} bytes; prose: {} bytes",
        corpus.len(),
        bytes,
        prose.len()
    );
}

criterion_group!(parse_benches, benches);
criterion_main!(parse_benches);
