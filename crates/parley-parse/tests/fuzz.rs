//! A bounded fuzzer: arbitrary bytes, arbitrary strings and long
//! marker-rich texts go through `parse` and `StreamParser` under several
//! profiles and tight limits. Checks: no panic, the streamed text equals the
//! final message, the final result equals `parse` of the whole text.
//!
//! The number of cases comes from `PARLEY_FUZZ_CASES` (default 256, so a
//! normal `cargo test` stays fast; CI sets it higher).

mod common;

use std::sync::Arc;

use common::{rich_profile, stream, text_of, texts};
use parley_parse::{Limits, ParseError, Profile, StreamParser, parse};
use parley_testkit::examples::profile;
use proptest::prelude::*;

fn cases() -> u32 {
    std::env::var("PARLEY_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn profiles() -> Vec<Arc<Profile>> {
    vec![
        rich_profile(),
        Arc::new(Profile::default()),
        Arc::new(Profile::tools_only(["search".to_owned()])),
        profile("table_view"),
    ]
}

fn check(text: &str, sizes: &[usize], limits: Limits) -> Result<(), TestCaseError> {
    for profile in profiles() {
        let whole = match parse(text, &profile, &limits) {
            Ok(parsed) => parsed,
            Err(ParseError::TooLarge { size, limit }) => {
                prop_assert!(size > limit);
                let mut parser = StreamParser::new(Arc::clone(&profile), limits);
                let refused = texts::cut(text, sizes)
                    .into_iter()
                    .any(|delta| parser.push(delta).is_err());
                prop_assert!(refused, "the stream must refuse what parse refuses");
                continue;
            }
        };
        let (items, parsed) = stream(&profile, limits, &texts::cut(text, sizes));
        prop_assert_eq!(&text_of(&items), &parsed.message);
        prop_assert_eq!(&parsed, &whole);
        for diagnostic in &parsed.diagnostics {
            prop_assert!(diagnostic.offset <= text.len());
            prop_assert!(!diagnostic.reason.is_empty());
        }
    }
    Ok(())
}

fn long_response() -> impl Strategy<Value = String> {
    proptest::collection::vec(texts::fragment(), 0..64).prop_map(|parts| parts.concat())
}

fn tight_limits() -> impl Strategy<Value = Limits> {
    (prop_oneof![Just(usize::MAX), 1usize..512], 1usize..12).prop_map(|(max_bytes, max_depth)| {
        Limits {
            max_bytes,
            max_depth,
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512), sizes in texts::splits()) {
        let text = String::from_utf8_lossy(&bytes);
        check(&text, &sizes, Limits::default())?;
    }

    #[test]
    fn arbitrary_strings(text in any::<String>(), sizes in texts::splits()) {
        check(&text, &sizes, Limits::default())?;
    }

    #[test]
    fn marker_rich_text(text in long_response(), sizes in texts::splits(), limits in tight_limits()) {
        check(&text, &sizes, limits)?;
    }

    #[test]
    fn bracket_soup(text in "[\\[\\]{}\"\\\\:*` \nSUGESTD_VALCIONPRHMA,a-z0-9]{0,400}", sizes in texts::splits()) {
        check(&text, &sizes, Limits::default())?;
    }
}
