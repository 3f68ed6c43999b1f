//! deploy/base's NetworkPolicies restrict egress as well as ingress: every
//! Deployment's pods are selected by a policy whose policyTypes has Egress
//! (so they dial only what egress rules admit), and the rules admit what
//! the services need: the gateway the runner's 50052 and PostgreSQL's
//! 5432, the runner HTTPS (443) to providers, both DNS (53, UDP and TCP)
//! and OTLP (4317). A pure reading of the files: no Docker needed.

use std::path::Path;

use serde::Deserialize;
use serde_yaml_ng::Value;

fn documents(relative: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/base")
        .join(relative);
    let text = std::fs::read_to_string(&path).expect("read a manifest");
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|document| Value::deserialize(document).expect("yaml"))
        .collect()
}

/// Whether a podSelector (matchLabels, matchExpressions with In/NotIn/
/// Exists/DoesNotExist) selects a pod with `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let label = |key: &Value| labels.get(key).and_then(Value::as_str);
    let by_labels = selector["matchLabels"]
        .as_mapping()
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let by_expressions = selector["matchExpressions"].as_sequence().is_none_or(|e| {
        e.iter().all(|expression| {
            let value = label(&expression["key"]);
            let values: Vec<&str> = expression["values"]
                .as_sequence()
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match expression["operator"].as_str() {
                Some("In") => value.is_some_and(|v| values.contains(&v)),
                Some("NotIn") => value.is_none_or(|v| !values.contains(&v)),
                Some("Exists") => value.is_some(),
                Some("DoesNotExist") => value.is_none(),
                other => panic!("unknown operator {other:?}"),
            }
        })
    });
    by_labels && by_expressions
}

/// The egress rules of every policy that restricts the egress of a pod
/// with `labels`.
fn egress_rules(policies: &[Value], labels: &Value) -> Vec<Value> {
    policies
        .iter()
        .filter(|p| {
            p["spec"]["policyTypes"]
                .as_sequence()
                .is_some_and(|t| t.iter().any(|t| t == "Egress"))
                && selects(&p["spec"]["podSelector"], labels)
        })
        .flat_map(|p| {
            p["spec"]["egress"]
                .as_sequence()
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

/// Whether a rule admits `port`/`protocol` to a peer that `to` accepts.
fn admits(rules: &[Value], port: u64, protocol: &str, to: impl Fn(&Value) -> bool) -> bool {
    rules.iter().any(|rule| {
        let port_ok = rule["ports"].as_sequence().is_some_and(|ports| {
            ports.iter().any(|p| {
                p["port"].as_u64() == Some(port)
                    && p["protocol"].as_str().unwrap_or("TCP") == protocol
            })
        });
        let peer_ok = rule["to"]
            .as_sequence()
            .is_some_and(|peers| peers.iter().any(&to));
        port_ok && peer_ok
    })
}

#[test]
fn every_deployment_is_selected_by_an_egress_policy_that_admits_what_it_needs() {
    let policies: Vec<Value> = documents("network-policy.yaml")
        .into_iter()
        .filter(|d| d["kind"] == "NetworkPolicy")
        .collect();
    let mut deployments = 0;
    for file in ["gateway.yaml", "runner.yaml"] {
        for deployment in documents(file)
            .into_iter()
            .filter(|d| d["kind"] == "Deployment")
        {
            deployments += 1;
            let name = deployment["metadata"]["name"].as_str().unwrap_or_default();
            let labels = &deployment["spec"]["template"]["metadata"]["labels"];
            let rules = egress_rules(&policies, labels);
            assert!(
                !rules.is_empty(),
                "no NetworkPolicy with policyTypes Egress selects the pods of {name}"
            );
            let kube_dns = |peer: &Value| {
                peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
                    == "kube-system"
            };
            for protocol in ["UDP", "TCP"] {
                assert!(
                    admits(&rules, 53, protocol, kube_dns),
                    "{name}: DNS {protocol}"
                );
            }
            let anywhere = |peer: &Value| !peer.is_null();
            assert!(admits(&rules, 4317, "TCP", anywhere), "{name}: OTLP");
            match name {
                "chat-gateway" => {
                    let runner = |peer: &Value| {
                        peer["podSelector"]["matchLabels"]["app.kubernetes.io/name"]
                            == "agent-runner"
                    };
                    assert!(admits(&rules, 50052, "TCP", runner), "gateway -> runner");
                    assert!(
                        admits(&rules, 5432, "TCP", anywhere),
                        "gateway -> PostgreSQL"
                    );
                }
                "agent-runner" => {
                    let internet = |peer: &Value| peer["ipBlock"]["cidr"] == "0.0.0.0/0";
                    assert!(admits(&rules, 443, "TCP", internet), "runner -> providers");
                }
                other => panic!("a Deployment this test does not know: {other}"),
            }
        }
    }
    assert_eq!(deployments, 2, "the gateway and the runner");
}
