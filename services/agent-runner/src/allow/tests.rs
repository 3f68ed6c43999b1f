//! Endpoint and model patterns: what they accept, what they allow.

use super::*;

fn endpoints(patterns: &[&str]) -> AllowedEndpoints {
    AllowedEndpoints::parse(patterns.iter().copied()).expect("valid patterns")
}

#[test]
fn endpoint_patterns_are_host_port_with_a_first_label_or_port_wildcard() {
    for good in [
        "127.0.0.1:50061",
        "*.tools.svc.cluster.local:443",
        "tools.example.com:*",
        "Tools.Example.COM:8443",
        "[::1]:50061",
        "lookup_rows-1:7000",
    ] {
        assert!(EndpointPattern::parse(good).is_ok(), "{good}");
    }
    for (bad, problem) in [
        ("127.0.0.1", "needs a port"),
        ("http://127.0.0.1:50061", "without a scheme"),
        ("127.0.0.1:50061/x", "without a scheme or a path"),
        ("*:443", "`*` alone"),
        ("*:*", "`*` alone"),
        ("tools*.example.com:443", "whole first label"),
        ("a.*.example.com:443", "whole first label"),
        ("*.*.example.com:443", "whole first label"),
        ("**.example.com:443", "whole first label"),
        ("example.com:0", "1-65535"),
        ("example.com:65536", "1-65535"),
        ("example.com:8*", "1-65535"),
        ("example..com:80", "not a host name"),
        (".example.com:80", "not a host name"),
        ("*.:80", "not a host name"),
        (":80", "not a host name"),
        ("::1:50061", "in brackets"),
        ("[::1]", "[IPV6]:PORT"),
        ("[nope]:1", "not an IPv6 address"),
    ] {
        let error = EndpointPattern::parse(bad).expect_err(bad);
        assert!(error.contains(problem), "{bad}: {error}");
    }
}

#[test]
fn endpoints_match_host_and_port_as_the_runner_dials_them() {
    let allowed = endpoints(&[
        "127.0.0.1:50061",
        "*.tools.svc.cluster.local:443",
        "tools.example.com:*",
        "[::1]:7000",
        "plain:80",
    ]);
    for yes in [
        "http://127.0.0.1:50061",
        "https://127.0.0.1:50061/",
        "http://user@127.0.0.1:50061",
        "https://search.tools.svc.cluster.local",
        "https://search.tools.svc.cluster.local:443",
        "http://SEARCH.Tools.svc.cluster.local:443",
        "http://tools.example.com:1",
        "https://tools.example.com",
        "http://[::1]:7000",
        "http://[0:0:0:0:0:0:0:1]:7000",
        "http://plain",
    ] {
        assert!(allowed.allows(yes), "{yes}");
    }
    for no in [
        "http://127.0.0.1:50062",
        "http://localhost:50061",
        "http://127.0.0.2:50061",
        "http://search.tools.svc.cluster.local",
        "https://tools.svc.cluster.local",
        "https://a.b.tools.svc.cluster.local",
        "https://searchtools.svc.cluster.local",
        "https://x.tools.svc.cluster.local.evil.com",
        "https://tools.example.com.evil.com",
        "http://[::2]:7000",
        "https://plain",
        "tools.example.com:1",
        "not a url",
    ] {
        assert!(!allowed.allows(no), "{no}");
    }
    assert!(!AllowedEndpoints::none().allows("http://127.0.0.1:50061"));
}

#[test]
fn a_label_wildcard_never_matches_an_ip_address() {
    let allowed = endpoints(&["*.0.0.1:80"]);
    assert!(!allowed.allows("http://127.0.0.1"));
}

#[test]
fn the_shipped_registry_allows_its_lookup_rows_endpoint() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/registry.yaml");
    let endpoints = AllowedEndpoints {
        patterns: registry_endpoints(&path).expect("the registry reads"),
    };
    assert_eq!(endpoints.describe(), vec!["127.0.0.1:50061".to_owned()]);
    assert!(endpoints.allows("http://127.0.0.1:50061"));
}

#[test]
fn a_registry_that_cannot_be_read_or_has_a_bad_endpoint_is_an_error() {
    let dir = tempfile::tempdir().expect("directory");
    let missing = registry_endpoints(&dir.path().join("missing.yaml")).expect_err("missing");
    assert!(missing.contains("cannot read"), "{missing}");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "tools:\n  t: { grpc: \"tools:7000\" }\n").expect("write");
    let error = registry_endpoints(&bad).expect_err("not a URL");
    assert!(error.contains("tool `t`"), "{error}");
}

#[test]
fn model_patterns_name_a_configured_provider_and_end_in_at_most_one_star() {
    let providers = ["openai", "scripted"];
    let parse = |p: &str| ModelPattern::parse(p, &providers);
    for good in [
        "openai/gpt-4.1*",
        "openai/gpt-4.1",
        "scripted/*",
        "openai/org/model",
    ] {
        assert!(parse(good).is_ok(), "{good}");
    }
    for (bad, problem) in [
        ("gpt-4.1", "PROVIDER/MODEL"),
        ("*", "PROVIDER/MODEL"),
        ("openai/", "names no model"),
        ("openai/gpt-*-mini", "may only end"),
        ("*/gpt-4.1", "may only end"),
        ("other/gpt-4.1", "`other` is not in [providers]"),
    ] {
        let error = parse(bad).expect_err(bad);
        assert!(error.contains(problem), "{bad}: {error}");
    }
    let allowed =
        AllowedModels::parse(["openai/gpt-4.1*", "scripted/demo"], &providers).expect("valid");
    assert!(allowed.allows("openai", "gpt-4.1"));
    assert!(allowed.allows("openai", "gpt-4.1-mini"));
    assert!(!allowed.allows("openai", "gpt-4o"));
    assert!(allowed.allows("scripted", "demo"));
    assert!(!allowed.allows("scripted", "demo-2"));
    assert!(!allowed.allows("scripted", "openai/gpt-4.1"));
}
