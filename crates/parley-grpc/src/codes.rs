//! gRPC status codes by number, as the wire carries them: their names
//! (`rpc.response.status_code`, the audit line's `code`) and which of them
//! mean the server failed.

/// The name of a gRPC status code, as `rpc.response.status_code` wants it.
pub fn code_name(code: i32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "UNKNOWN",
    }
}

/// Whether `code` marks a SERVER span as an error (the server failed).
pub fn is_server_error(code: i32) -> bool {
    matches!(code, 2 | 4 | 12 | 13 | 14 | 15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_error_classes() {
        assert_eq!(code_name(0), "OK");
        assert_eq!(code_name(4), "DEADLINE_EXCEEDED");
        assert_eq!(code_name(99), "UNKNOWN");
        assert!(is_server_error(13) && is_server_error(14));
        assert!(!is_server_error(3) && !is_server_error(5) && !is_server_error(16));
    }
}
