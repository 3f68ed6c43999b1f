//! The `current_time` built-in: the current date and time at a UTC offset.
//!
//! Models do not know what day it is; this tool tells them, in RFC 3339 with
//! the weekday, at the offset they ask for (`+02:00`, `-05:30`, `Z`; UTC when
//! absent). Time zones by name would need a zone database, so the model is
//! asked for the offset instead.

use time::{OffsetDateTime, UtcOffset, format_description::well_known::Rfc3339};

/// Why an offset is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a UTC offset like +02:00, -05:30 or Z")]
pub struct BadOffset(pub String);

/// Parses `Z`, `+HH:MM`, `-HH:MM` or `+HHMM` (at most 14 hours).
pub fn parse_offset(text: &str) -> Result<UtcOffset, BadOffset> {
    let bad = || BadOffset(text.to_owned());
    let trimmed = text.trim();
    if trimmed.is_empty()
        || trimmed.eq_ignore_ascii_case("z")
        || trimmed.eq_ignore_ascii_case("utc")
    {
        return Ok(UtcOffset::UTC);
    }
    let (sign, rest) = match trimmed.as_bytes()[0] {
        b'+' => (1, &trimmed[1..]),
        b'-' => (-1, &trimmed[1..]),
        _ => return Err(bad()),
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    if digits.len() != 4 || !digits.chars().all(|c| c.is_ascii_digit()) || rest.len() > 5 {
        return Err(bad());
    }
    let hours: i8 = digits[..2].parse().map_err(|_| bad())?;
    let minutes: i8 = digits[2..].parse().map_err(|_| bad())?;
    if hours > 14 {
        return Err(bad());
    }
    UtcOffset::from_hms(sign * hours, sign * minutes, 0).map_err(|_| bad())
}

/// The current time at `offset`, formatted by [`format_time`].
pub fn now(offset: UtcOffset) -> String {
    format_time(OffsetDateTime::now_utc().to_offset(offset))
}

/// `2026-11-22T14:05:09+01:00 (Sunday)`: RFC 3339 to the second (`Z` for
/// UTC), then the weekday.
pub fn format_time(at: OffsetDateTime) -> String {
    let at = at.replace_nanosecond(0).unwrap_or(at);
    // Rfc3339 refuses only years outside 0..=9999 and offsets with seconds,
    // neither of which `now` and `parse_offset` can produce.
    let stamp = at.format(&Rfc3339).unwrap_or_else(|_| at.to_string());
    format!("{stamp} ({})", at.weekday())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(unix_seconds: i64, offset_minutes: i32) -> String {
        let offset = UtcOffset::from_whole_seconds(offset_minutes * 60).expect("offset in range");
        let instant = OffsetDateTime::from_unix_timestamp(unix_seconds).expect("instant in range");
        format_time(instant.to_offset(offset))
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(at(0, 0), "1970-01-01T00:00:00Z (Thursday)");
        assert_eq!(at(951_782_400, 0), "2000-02-29T00:00:00Z (Tuesday)");
        assert_eq!(at(1_700_000_000, 60), "2023-11-14T23:13:20+01:00 (Tuesday)");
        assert_eq!(
            at(1_700_000_000, -330),
            "2023-11-14T16:43:20-05:30 (Tuesday)"
        );
        assert_eq!(at(-1, 0), "1969-12-31T23:59:59Z (Wednesday)");
    }

    #[test]
    fn pins_leap_days_and_year_boundaries() {
        let cases = [
            (1_709_164_800, 0, "2024-02-29T00:00:00Z (Thursday)"),
            (1_709_251_199, 0, "2024-02-29T23:59:59Z (Thursday)"),
            (1_709_251_199, 60, "2024-03-01T00:59:59+01:00 (Friday)"),
            (4_107_456_000, 0, "2100-02-28T00:00:00Z (Sunday)"),
            (4_107_542_400, 0, "2100-03-01T00:00:00Z (Monday)"),
            (13_574_563_200, 0, "2400-02-29T00:00:00Z (Tuesday)"),
            (-2_203_891_200, 0, "1900-03-01T00:00:00Z (Thursday)"),
            (1_767_225_599, 0, "2025-12-31T23:59:59Z (Wednesday)"),
            (1_767_225_599, 60, "2026-01-01T00:59:59+01:00 (Thursday)"),
            (1_767_225_600, -330, "2025-12-31T18:30:00-05:30 (Wednesday)"),
            (1_740_787_200, -1, "2025-02-28T23:59:00-00:01 (Friday)"),
            (1_740_787_200, 899, "2025-03-01T14:59:00+14:59 (Saturday)"),
            (-62_135_596_800, 0, "0001-01-01T00:00:00Z (Monday)"),
            (253_402_300_799, 0, "9999-12-31T23:59:59Z (Friday)"),
        ];
        for (seconds, minutes, expected) in cases {
            assert_eq!(at(seconds, minutes), expected, "{seconds} at {minutes} min");
        }
    }

    #[test]
    fn drops_fractions_of_a_second() {
        let instant = OffsetDateTime::from_unix_timestamp_nanos(1_700_000_000_999_999_999)
            .expect("instant in range");
        assert_eq!(format_time(instant), "2023-11-14T22:13:20Z (Tuesday)");
    }

    #[test]
    fn parses_offsets() {
        let minutes = |text| parse_offset(text).map(|offset| offset.whole_minutes());
        assert_eq!(minutes("Z"), Ok(0));
        assert_eq!(minutes(""), Ok(0));
        assert_eq!(minutes("utc"), Ok(0));
        assert_eq!(minutes("+02:00"), Ok(120));
        assert_eq!(minutes("-0530"), Ok(-330));
        assert_eq!(minutes("+14:59"), Ok(899));
        assert!(parse_offset("Europe/Paris").is_err());
        assert!(parse_offset("+25:00").is_err());
        assert!(parse_offset("+1:00").is_err());
        assert!(parse_offset("+02:000").is_err());
        assert!(parse_offset("+02:60").is_err());
        assert!(parse_offset("02:00").is_err());
    }
}
