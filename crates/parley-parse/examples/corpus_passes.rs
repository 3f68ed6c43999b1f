//! Runs `parse` (or a stream in 16-byte deltas) over the bench corpus a
//! given number of times, for instruction counts that do not depend on the
//! machine's load:
//!
//! ```text
//! cargo build --release -p parley-parse --example corpus_passes
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/corpus_passes parse 0
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/corpus_passes parse 1000
//! ```
//!
//! (the difference of the two totals over 1000 is the cost of one pass;
//! `stream` instead of `parse` measures the stream, `prose-parse` and
//! `prose-stream` the bench's 64 KiB of marker-free prose).

#[path = "../benches/inputs/mod.rs"]
mod inputs;

use std::{hint::black_box, sync::Arc};

use parley_parse::{Limits, Profile, StreamParser, parse};

fn stream(profile: &Arc<Profile>, text: &str, items: &mut Vec<parley_parse::StreamItem>) {
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
    let profile = inputs::profile()?;
    // `prose-parse` and `prose-stream` take the 64 KiB of prose instead.
    let corpus = match mode.strip_prefix("prose-") {
        Some(_) => vec![inputs::prose_64k()],
        None => inputs::corpus()?,
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
