//! The `current_time` built-in: the current date and time at a UTC offset.
//!
//! Models do not know what day it is; this tool tells them, in RFC 3339 with
//! the weekday, at the offset they ask for (`+02:00`, `-05:30`, `Z`; UTC when
//! absent). Time zones by name would need a zone database, so the model is
//! asked for the offset instead.

use std::time::{SystemTime, UNIX_EPOCH};

/// Why an offset is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a UTC offset like +02:00, -05:30 or Z")]
pub struct BadOffset(pub String);

/// Parses `Z`, `+HH:MM`, `-HH:MM` or `+HHMM` into minutes east of UTC.
pub fn parse_offset(text: &str) -> Result<i32, BadOffset> {
    let bad = || BadOffset(text.to_owned());
    let trimmed = text.trim();
    if trimmed.is_empty()
        || trimmed.eq_ignore_ascii_case("z")
        || trimmed.eq_ignore_ascii_case("utc")
    {
        return Ok(0);
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
    let hours: i32 = digits[..2].parse().map_err(|_| bad())?;
    let minutes: i32 = digits[2..].parse().map_err(|_| bad())?;
    if hours > 14 || minutes > 59 {
        return Err(bad());
    }
    Ok(sign * (hours * 60 + minutes))
}

/// The current time at `offset_minutes`, formatted by [`format_time`].
pub fn now(offset_minutes: i32) -> String {
    let seconds = match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(elapsed) => elapsed.as_secs() as i64,
        Err(before) => -(before.duration().as_secs() as i64),
    };
    format_time(seconds, offset_minutes)
}

/// `2026-11-22T14:05:09+01:00 (Sunday)` for a Unix time and an offset.
pub fn format_time(unix_seconds: i64, offset_minutes: i32) -> String {
    let local = unix_seconds + i64::from(offset_minutes) * 60;
    let days = local.div_euclid(86_400);
    let second_of_day = local.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let weekday = [
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
    ][days.rem_euclid(7) as usize];
    let offset = if offset_minutes == 0 {
        "Z".to_owned()
    } else {
        let sign = if offset_minutes < 0 { '-' } else { '+' };
        let abs = offset_minutes.abs();
        format!("{sign}{:02}:{:02}", abs / 60, abs % 60)
    };
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}{offset} ({weekday})",
        second_of_day / 3600,
        second_of_day % 3600 / 60,
        second_of_day % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_time(0, 0), "1970-01-01T00:00:00Z (Thursday)");
        assert_eq!(
            format_time(951_782_400, 0),
            "2000-02-29T00:00:00Z (Tuesday)"
        );
        assert_eq!(
            format_time(1_700_000_000, 60),
            "2023-11-14T23:13:20+01:00 (Tuesday)"
        );
        assert_eq!(
            format_time(1_700_000_000, -330),
            "2023-11-14T16:43:20-05:30 (Tuesday)"
        );
        assert_eq!(format_time(-1, 0), "1969-12-31T23:59:59Z (Wednesday)");
    }

    #[test]
    fn parses_offsets() {
        assert_eq!(parse_offset("Z"), Ok(0));
        assert_eq!(parse_offset("+02:00"), Ok(120));
        assert_eq!(parse_offset("-0530"), Ok(-330));
        assert!(parse_offset("Europe/Paris").is_err());
        assert!(parse_offset("+25:00").is_err());
        assert!(parse_offset("+1:00").is_err());
        assert!(parse_offset("+02:000").is_err());
    }
}
