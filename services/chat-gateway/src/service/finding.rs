//! Finding conversations again: `UpdateConversation`'s checks (title,
//! metadata, flags) and `ListConversations`' filters, full-text query and
//! search page tokens.
//!
//! A search page is a position in the ranking (ranks move as the index
//! changes, so a position is what a page can name); its token holds the
//! position and a fingerprint of the query and filters, so that it is
//! refused with another request, and a list token (a time and an id) is
//! refused by a search, and the other way round.

use std::collections::BTreeMap;

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use parley_proto::gateway::v1 as gw;

use crate::{
    error::GatewayError,
    store::search::{Archived, ConversationUpdate, ListFilter, MAX_METADATA_ENTRIES, query_terms},
};

/// The longest title, in characters.
pub const MAX_TITLE_CHARS: usize = 200;
/// The longest metadata key, in characters (`a-zA-Z0-9_.-`).
pub const MAX_METADATA_KEY_CHARS: usize = 64;
/// The longest metadata value, in bytes.
pub const MAX_METADATA_VALUE_BYTES: usize = 512;
/// The longest search query, in bytes.
pub const MAX_QUERY_BYTES: usize = 256;
/// The most words a search query may have.
pub const MAX_QUERY_TERMS: usize = 16;

fn bad_metadata(field: String, problem: impl Into<String>) -> GatewayError {
    GatewayError::InvalidArgument {
        reason: "INVALID_METADATA",
        violations: vec![(field, problem.into())],
    }
}

/// Checks a metadata key (`field` names it in the error).
fn metadata_key(key: &str, field: impl Fn() -> String) -> Result<(), GatewayError> {
    if key.is_empty() || key.chars().count() > MAX_METADATA_KEY_CHARS {
        return Err(bad_metadata(
            field(),
            format!("a key must be 1 to {MAX_METADATA_KEY_CHARS} characters"),
        ));
    }
    if !key
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    {
        return Err(bad_metadata(
            field(),
            "a key may hold only a-z, A-Z, 0-9, `_`, `.` and `-`",
        ));
    }
    Ok(())
}

/// Checks metadata entries of a request (`field`: the map's name).
fn metadata_entries(
    entries: &std::collections::HashMap<String, String>,
    field: &str,
) -> Result<BTreeMap<String, String>, GatewayError> {
    if entries.len() > MAX_METADATA_ENTRIES {
        return Err(bad_metadata(
            field.to_owned(),
            format!("at most {MAX_METADATA_ENTRIES} entries"),
        ));
    }
    let mut checked = BTreeMap::new();
    for (key, value) in entries {
        let named = || format!("{field}[{key}]");
        metadata_key(key, named)?;
        if value.len() > MAX_METADATA_VALUE_BYTES {
            return Err(bad_metadata(
                named(),
                format!("a value must be at most {MAX_METADATA_VALUE_BYTES} bytes"),
            ));
        }
        checked.insert(key.clone(), value.clone());
    }
    Ok(checked)
}

/// The change an `UpdateConversationRequest` asks for, checked (the
/// conversation id is checked by the caller).
pub fn update(request: &gw::UpdateConversationRequest) -> Result<ConversationUpdate, GatewayError> {
    let title = match &request.title {
        None => None,
        Some(title) => {
            let title = title.trim();
            let invalid =
                |problem: String| GatewayError::invalid("INVALID_TITLE", "title", problem);
            if title.is_empty() {
                return Err(invalid("must not be empty".into()));
            }
            if title.chars().count() > MAX_TITLE_CHARS {
                return Err(invalid(format!(
                    "must be at most {MAX_TITLE_CHARS} characters"
                )));
            }
            if title.chars().any(char::is_control) {
                return Err(invalid("must not hold control characters".into()));
            }
            Some(title.to_owned())
        }
    };
    let set_metadata = metadata_entries(&request.metadata, "metadata")?;
    for (index, key) in request.remove_metadata_keys.iter().enumerate() {
        let field = || format!("remove_metadata_keys[{index}]");
        metadata_key(key, field)?;
        if set_metadata.contains_key(key) {
            return Err(bad_metadata(
                field(),
                "is also set in `metadata`: set it or remove it",
            ));
        }
    }
    if request.remove_metadata_keys.len() > MAX_METADATA_ENTRIES {
        return Err(bad_metadata(
            "remove_metadata_keys".into(),
            format!("at most {MAX_METADATA_ENTRIES} keys"),
        ));
    }
    Ok(ConversationUpdate {
        title,
        set_metadata,
        remove_metadata: request.remove_metadata_keys.clone(),
        pinned: request.pinned,
        archived: request.archived,
    })
}

/// A `ListConversationsRequest`'s filters and query words, checked:
/// `None` for the words when it has no query.
pub fn list_filter(
    request: &gw::ListConversationsRequest,
) -> Result<(ListFilter, Option<Vec<String>>), GatewayError> {
    let archived = match gw::ArchivedFilter::try_from(request.archived) {
        Ok(gw::ArchivedFilter::Unspecified | gw::ArchivedFilter::Exclude) => Archived::Exclude,
        Ok(gw::ArchivedFilter::Only) => Archived::Only,
        Ok(gw::ArchivedFilter::Include) => Archived::Include,
        // A value from a newer contract: the default.
        Err(_) => Archived::Exclude,
    };
    let filter = ListFilter {
        metadata: metadata_entries(&request.metadata, "metadata")?,
        archived,
        pinned_only: request.pinned_only,
    };
    if request.query.trim().is_empty() {
        return Ok((filter, None));
    }
    let invalid = |problem: String| GatewayError::invalid("INVALID_QUERY", "query", problem);
    if request.query.len() > MAX_QUERY_BYTES {
        return Err(invalid(format!("must be at most {MAX_QUERY_BYTES} bytes")));
    }
    let terms = query_terms(&request.query);
    if terms.len() > MAX_QUERY_TERMS {
        return Err(invalid(format!(
            "must have at most {MAX_QUERY_TERMS} words"
        )));
    }
    Ok((filter, Some(terms)))
}

/// What marks a search page token.
const SEARCH_TOKEN_PREFIX: &str = "search:";

/// The token of the search page at `offset` of the request `fingerprint`
/// names ([`ListFilter::fingerprint`]).
pub fn encode_search_token(offset: u32, fingerprint: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{SEARCH_TOKEN_PREFIX}{offset}:{fingerprint}"))
}

/// Reads a search page token back: its offset. A token of another request
/// (or not one) is refused.
pub fn decode_search_token(token: &str, fingerprint: &str) -> Result<u32, GatewayError> {
    let invalid = || {
        GatewayError::invalid(
            "INVALID_PAGE_TOKEN",
            "page_token",
            "is not a token from a previous response to the same query and filters",
        )
    };
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let rest = text.strip_prefix(SEARCH_TOKEN_PREFIX).ok_or_else(invalid)?;
    let (offset, print) = rest.split_once(':').ok_or_else(invalid)?;
    if print != fingerprint {
        return Err(invalid());
    }
    offset.parse().map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn reason(error: GatewayError) -> (&'static str, String) {
        match error {
            GatewayError::InvalidArgument { reason, violations } => {
                (reason, violations[0].0.clone())
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn titles_and_metadata_are_bounded() {
        let request = |title: &str| gw::UpdateConversationRequest {
            title: Some(title.into()),
            ..Default::default()
        };
        for bad in ["", "   ", &"x".repeat(MAX_TITLE_CHARS + 1), "a\u{7}b"] {
            assert_eq!(
                reason(update(&request(bad)).expect_err(bad)),
                ("INVALID_TITLE", "title".into())
            );
        }
        let ok = update(&request("  Trip to Oslo ")).expect("valid");
        assert_eq!(ok.title.as_deref(), Some("Trip to Oslo"));
        assert_eq!(
            update(&request(&"é".repeat(MAX_TITLE_CHARS)))
                .expect("200 characters")
                .title
                .map(|title| title.chars().count()),
            Some(MAX_TITLE_CHARS)
        );

        let with = |key: &str, value: &str| gw::UpdateConversationRequest {
            metadata: HashMap::from([(key.to_owned(), value.to_owned())]),
            ..Default::default()
        };
        for (key, value) in [
            ("", "v"),
            ("has space", "v"),
            ("ünï", "v"),
            (&"k".repeat(MAX_METADATA_KEY_CHARS + 1), "v"),
            ("ok", &"v".repeat(MAX_METADATA_VALUE_BYTES + 1)),
        ] {
            let (reason, field) = reason(update(&with(key, value)).expect_err(key));
            assert_eq!(reason, "INVALID_METADATA");
            assert_eq!(field, format!("metadata[{key}]"));
        }
        update(&with(
            "project.id-2_x",
            &"v".repeat(MAX_METADATA_VALUE_BYTES),
        ))
        .expect("valid");
        let too_many = gw::UpdateConversationRequest {
            metadata: (0..=MAX_METADATA_ENTRIES)
                .map(|n| (format!("k{n}"), "v".to_owned()))
                .collect(),
            ..Default::default()
        };
        assert_eq!(
            reason(update(&too_many).expect_err("17")),
            ("INVALID_METADATA", "metadata".into())
        );
        let both = gw::UpdateConversationRequest {
            metadata: HashMap::from([("k".to_owned(), "v".to_owned())]),
            remove_metadata_keys: vec!["k".into()],
            ..Default::default()
        };
        assert_eq!(
            reason(update(&both).expect_err("both")),
            ("INVALID_METADATA", "remove_metadata_keys[0]".into())
        );
    }

    #[test]
    fn queries_are_bounded_and_tokens_hold_for_their_request() {
        let request = |query: &str| gw::ListConversationsRequest {
            query: query.into(),
            ..Default::default()
        };
        assert_eq!(list_filter(&request("  ")).expect("no query").1, None);
        assert_eq!(
            list_filter(&request("Oslo, trip!")).expect("query").1,
            Some(vec!["oslo".to_owned(), "trip".to_owned()])
        );
        for bad in [
            "x".repeat(MAX_QUERY_BYTES + 1),
            (0..=MAX_QUERY_TERMS).map(|n| format!("w{n} ")).collect(),
        ] {
            assert_eq!(
                reason(list_filter(&request(&bad)).expect_err("too long")),
                ("INVALID_QUERY", "query".into())
            );
        }
        let token = encode_search_token(50, "abc");
        assert_eq!(decode_search_token(&token, "abc").expect("valid"), 50);
        for (bad, print) in [
            (token.as_str(), "abd"),
            ("", "abc"),
            ("%%", "abc"),
            (&URL_SAFE_NO_PAD.encode("17:conv"), "abc"),
            (&URL_SAFE_NO_PAD.encode("search:x:abc"), "abc"),
        ] {
            assert_eq!(
                decode_search_token(bad, print).expect_err(bad).reason(),
                "INVALID_PAGE_TOKEN"
            );
        }
    }
}
