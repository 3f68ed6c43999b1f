//! The naming rules of the registry, and what a tool endpoint URL must be.

/// Longest name accepted for payload types, tools and actions (the providers'
/// limit for tool names).
const MAX_NAME_LEN: usize = 64;

/// Payload type and action names: `lower_snake_case`.
pub(super) fn lower_snake(name: &str) -> Result<(), String> {
    let ok = name.len() <= MAX_NAME_LEN
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    ok.then_some(()).ok_or_else(|| {
        format!(
            "use lower_snake_case (a-z, 0-9, `_`, starting with a letter, at most {MAX_NAME_LEN})"
        )
    })
}

/// Markers: `UPPER_SNAKE_CASE`.
pub(super) fn upper_snake(marker: &str) -> Result<(), String> {
    let ok = marker.len() <= MAX_NAME_LEN
        && marker.starts_with(|c: char| c.is_ascii_uppercase())
        && marker
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    ok.then_some(()).ok_or_else(|| {
        format!(
            "use UPPER_SNAKE_CASE (A-Z, 0-9, `_`, starting with a letter, at most {MAX_NAME_LEN})"
        )
    })
}

/// Tool names: what every provider accepts (`[A-Za-z0-9_-]{1,64}`).
pub(super) fn tool_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    ok.then_some(())
        .ok_or_else(|| format!("use 1 to {MAX_NAME_LEN} letters, digits, `_` or `-`"))
}

/// Page, tab, subtab and stream ids: non-empty, no spaces or dots.
pub(super) fn plain_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    ok.then_some(())
        .ok_or_else(|| "use letters, digits, `_` or `-`".to_owned())
}

/// A tool endpoint: an absolute `http://` or `https://` URL with a host.
pub(super) fn http_url(url: &str) -> Result<(), String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("not a URL ({e})"))?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        Some(other) => return Err(format!("scheme `{other}` is not http or https")),
        None => return Err("needs an http:// or https:// scheme".to_owned()),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err("needs a host".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_their_rules() {
        assert!(lower_snake("schema_proposal2").is_ok());
        for bad in ["", "Schema", "2x", "a-b", "a b", &"a".repeat(65)] {
            assert!(lower_snake(bad).is_err(), "{bad}");
        }
        assert!(upper_snake("DATA_PROPOSAL").is_ok());
        for bad in ["", "Data", "_X", "X-Y"] {
            assert!(upper_snake(bad).is_err(), "{bad}");
        }
        assert!(tool_name("lookup-rows_2").is_ok());
        for bad in ["", "a.b", "a b", &"t".repeat(65)] {
            assert!(tool_name(bad).is_err(), "{bad}");
        }
        assert!(plain_id("sales-pipeline_1").is_ok());
        assert!(plain_id("a.b").is_err());
    }

    #[test]
    fn endpoints_are_absolute_http_urls() {
        assert!(http_url("http://127.0.0.1:50061").is_ok());
        assert!(http_url("https://tools.internal:7000/").is_ok());
        assert!(http_url("grpc://tools:7000").is_err());
        assert!(http_url("tools:7000").is_err());
        assert!(http_url("/relative").is_err());
        assert!(http_url("http://").is_err());
    }
}
