//! Partial values: what a document, a suggestion list or a payload is *so
//! far*, while the model is still writing it. [`PartialJson`] closes a JSON
//! document where it is open; `lists` and `payloads` use it for a stream's
//! partial suggestion lists and partial payloads.
//!
//! # Partial JSON
//!
//! The value a JSON document has *so far*, while it is still being written.
//!
//! A model writes a payload's JSON a few bytes at a time. [`PartialJson`]
//! takes those bytes as they come ([`PartialJson::feed`]) and says at any
//! point what the value is so far ([`PartialJson::value`]): the JSON written
//! up to now, closed where it is open, so a UI can render a card growing
//! field by field.
//!
//! | written so far | value so far | complete paths |
//! |---|---|---|
//! | `{"title": "Quarterly rev` | `{"title": "Quarterly rev"}` | |
//! | `{"title": "Q", "rows": [12` | `{"title": "Q", "rows": []}` | `/title` |
//! | `{"title": "Q", "rows": [12, {"n` | `{"title": "Q", "rows": [12, {}]}` | `/title`, `/rows/0` |
//! | `{"title": "Q", "rows": [12, {"n": tr` | `{"title": "Q", "rows": [12, {}]}` | `/title`, `/rows/0` |
//! | `{"title": "Q", "rows": [12, {"n": true}]` | `{"title": "Q", "rows": [12, {"n": true}]}` | `/title`, `/rows` |
//! | `{"title": "Q", "rows": [12, {"n": true}]}` | the same | (the root, `""`) |
//!
//! # How an open document is closed
//!
//! - A string is cut after its last whole character: a multi-byte UTF-8
//!   character, a `\uXXXX` escape (or a surrogate pair) or a `\n`-style
//!   escape cut in the middle is left out until it is whole.
//! - A number is shown only once something follows it (`,`, `]`, `}` or
//!   whitespace): `12` at the very end may still become `123`, and `-`,
//!   `1.` and `1e` are not numbers yet. A number that *is* the whole
//!   document is known only at [`PartialJson::finish`].
//! - `true`, `false` and `null` are shown only once whole.
//! - An object member is shown once its value has started (a string, array
//!   or object) or is whole (a number or keyword); a key alone is left out.
//! - Open arrays and objects are closed.
//!
//! # Complete paths
//!
//! [`PartialJson::complete_paths`] lists the values that are final, as JSON
//! Pointers (RFC 6901): `""` is the whole document, `/rows/0/name` the
//! member `name` of the first item of `rows`; a `~` in a key is written
//! `~0` and a `/` is written `~1`. A closed string, a number, a keyword and
//! a closed array or object are final. The list is kept short: when an
//! array or object closes, its own path replaces those of its members, so a
//! path is final when it *or one of its ancestors* is listed
//! ([`is_complete_path`] answers that). Until the document is whole, the
//! list holds the finished members of the arrays and objects still open, in
//! document order.
//!
//! # Guarantees
//!
//! For successive prefixes of one valid document:
//!
//! - each value so far *extends* the one before: objects keep their
//!   members and gain new ones, arrays keep their items and gain new ones,
//!   the one string being written grows at its end, nothing else changes;
//! - a value at a complete path never changes again, and the path stays
//!   complete;
//! - once the whole document has been fed, the value equals what
//!   `serde_json` makes of the document.
//!
//! [`PartialJson::version`] changes exactly when the value or the complete
//! paths do, so a caller can tell cheaply whether there is anything new to
//! show.
//!
//! # What stops it
//!
//! The closer stops at the first byte that cannot continue a valid JSON
//! document, and then keeps the value it had; every later
//! [`PartialJson::feed`] returns the same [`PartialError`]. Besides invalid
//! JSON, that is: nesting deeper than [`Limits::max_depth`], more bytes than
//! [`Limits::max_bytes`], and a key repeated in one object (`serde_json`
//! keeps the last one, so the value shown for the first could otherwise
//! change). A trailing comma before `]` or `}` is accepted, as the parser
//! repairs it. Whatever stops the closer, the final parse of the payload is
//! what counts.
//!
//! # Cost
//!
//! [`PartialJson::feed`] costs time proportional to the bytes fed (it never
//! re-reads earlier ones). [`PartialJson::value`] builds the value so far,
//! in time proportional to its size. The complete paths are bounded by
//! `Limits::max_bytes` bytes in all: a final value whose path would not fit
//! (only absurdly long keys do that) is left out of the list until an
//! enclosing array or object closes.
//!
//! # Example
//!
//! ```
//! use parley_parse::{Limits, partial::PartialJson};
//! use serde_json::json;
//!
//! let mut json = PartialJson::new(Limits::default());
//! json.feed(br#"{"mode": "update", "operations": [{"action": "remo"#)?;
//! assert_eq!(
//!     json.value(),
//!     Some(json!({"mode": "update", "operations": [{"action": "remo"}]}))
//! );
//! assert_eq!(json.complete_paths(), ["/mode"]);
//!
//! json.feed(br#"ve", "column_id": 12"#)?;
//! // `12` might still become `123`: not shown yet.
//! assert_eq!(
//!     json.value(),
//!     Some(json!({"mode": "update", "operations": [{"action": "remove"}]}))
//! );
//! assert_eq!(json.complete_paths(), ["/mode", "/operations/0/action"]);
//!
//! json.feed(b"}]}")?;
//! assert_eq!(json.complete_paths(), [""]);
//! assert!(json.is_complete());
//! # Ok::<(), parley_parse::PartialError>(())
//! ```

mod json;
pub(crate) mod lists;
pub(crate) mod payloads;

pub use self::json::{PartialJson, is_complete_path};
