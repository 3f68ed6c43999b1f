//! Reads the caller's deadline from the `grpc-timeout` header.
//!
//! tonic enforces an incoming deadline on the unary part of a call but does
//! not propagate it: services read it here and pass the remainder to each
//! downstream call and provider request.

use std::time::Duration;

use tonic::metadata::MetadataMap;

/// The `grpc-timeout` of a request, if it sent a valid one.
pub fn grpc_timeout(metadata: &MetadataMap) -> Option<Duration> {
    let value = metadata.get("grpc-timeout")?.to_str().ok()?;
    parse_grpc_timeout(value)
}

/// Parses a `grpc-timeout` value: up to 8 digits and a unit (`H M S m u n`).
pub fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    if value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    let amount: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount.checked_mul(3600)?),
        "M" => Duration::from_secs(amount.checked_mul(60)?),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit() {
        assert_eq!(parse_grpc_timeout("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_grpc_timeout("3M"), Some(Duration::from_secs(180)));
        assert_eq!(parse_grpc_timeout("5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_grpc_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_grpc_timeout("7u"), Some(Duration::from_micros(7)));
        assert_eq!(parse_grpc_timeout("9n"), Some(Duration::from_nanos(9)));
    }

    #[test]
    fn rejects_malformed_values() {
        for bad in ["", "S", "10", "10x", "123456789S", "-1S"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad}");
        }
    }
}
