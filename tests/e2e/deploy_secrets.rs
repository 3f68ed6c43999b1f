//! deploy/ gives both pods their secrets as files, never as variables: no
//! container takes a Secret through envFrom or secretKeyRef; the runner
//! mounts parley-provider-keys (one file per key, named by api_key_file in
//! the runner configuration the composition ships) and parley-runner-token
//! (auth.token_file), the gateway the same token
//! (upstream.runner_token_file), each with defaultMode 0440 and the pod's
//! fsGroup, so the non-root user can read them. A pure reading of the
//! files: no Docker needed.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_yaml_ng::Value;

fn deploy(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(relative)
}

fn documents(relative: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(deploy(relative)).expect("read a manifest");
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|document| Value::deserialize(document).expect("yaml"))
        .collect()
}

fn pod(relative: &str, name: &str) -> Value {
    documents(relative)
        .into_iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no Deployment {name} in {relative}"))["spec"]["template"]["spec"]
        .clone()
}

fn seq(value: &Value) -> Vec<Value> {
    value.as_sequence().cloned().unwrap_or_default()
}

/// The mount path of the Secret `secret` in `pod`'s container `container`,
/// after checking the volume's mode (0440, which serde_yaml_ng reads as
/// the string \"0440\": Kubernetes reads YAML 1.1, where it is octal).
fn secret_mount(pod: &Value, container: &str, secret: &str) -> String {
    let volume = seq(&pod["volumes"])
        .into_iter()
        .find(|v| v["secret"]["secretName"] == secret)
        .unwrap_or_else(|| panic!("{container}: no volume of the Secret {secret}"));
    let mode = &volume["secret"]["defaultMode"];
    assert!(
        mode.as_u64() == Some(0o440) || mode.as_str() == Some("0440"),
        "{secret}: defaultMode {mode:?}, not 0440"
    );
    let container = seq(&pod["containers"])
        .into_iter()
        .find(|c| c["name"] == container)
        .unwrap_or_else(|| panic!("no container {container}"));
    seq(&container["volumeMounts"])
        .into_iter()
        .find(|m| m["name"] == volume["name"])
        .and_then(|m| m["mountPath"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("{secret} is not mounted"))
}

fn env(pod: &Value, container: &str, name: &str) -> Option<String> {
    seq(&pod["containers"])
        .into_iter()
        .find(|c| c["name"] == container)
        .map(|c| seq(&c["env"]))
        .unwrap_or_default()
        .into_iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_str().map(str::to_owned))
}

#[test]
fn both_pods_get_their_secrets_as_files_readable_by_their_group() {
    for (file, name) in [
        ("base/gateway.yaml", "chat-gateway"),
        ("base/runner.yaml", "agent-runner"),
        ("components/mtls/gateway.yaml", "chat-gateway"),
        ("components/mtls/runner.yaml", "agent-runner"),
    ] {
        let pod = pod(file, name);
        for container in seq(&pod["containers"]) {
            let from = seq(&container["envFrom"]);
            assert!(
                from.iter().all(|f| f["secretRef"].is_null()),
                "{file}: envFrom a Secret: {from:?}"
            );
            let secret_vars: Vec<_> = seq(&container["env"])
                .into_iter()
                .filter(|e| !e["valueFrom"]["secretKeyRef"].is_null())
                .collect();
            assert!(secret_vars.is_empty(), "{file}: {secret_vars:?}");
        }
    }

    let runner = pod("base/runner.yaml", "agent-runner");
    let context = &runner["securityContext"];
    assert!(
        !context["fsGroup"].is_null() && context["fsGroup"] == context["runAsGroup"],
        "the runner's Secret files (group fsGroup, 0440) need fsGroup = runAsGroup: {context:?}"
    );
    let keys = secret_mount(&runner, "agent-runner", "parley-provider-keys");
    let token = secret_mount(&runner, "agent-runner", "parley-runner-token");
    assert_eq!(
        env(&runner, "agent-runner", "PARLEY_AUTH__TOKEN_FILE"),
        Some(format!("{token}/token"))
    );
    let gateway = pod("base/gateway.yaml", "chat-gateway");
    let gateway_token = secret_mount(&gateway, "chat-gateway", "parley-runner-token");
    assert_eq!(
        env(
            &gateway,
            "chat-gateway",
            "PARLEY_UPSTREAM__RUNNER_TOKEN_FILE"
        ),
        Some(format!("{gateway_token}/token"))
    );

    // The runner configuration the composition ships names the key files,
    // each one a key of the example Secret.
    let kustomization = std::fs::read_to_string(deploy("kustomization.yaml")).expect("read");
    let shipped = kustomization
        .lines()
        .find_map(|l| l.trim().strip_prefix("- runner.toml="))
        .expect("the composition's runner.toml");
    let config: toml::Table = std::fs::read_to_string(deploy(shipped))
        .expect("read")
        .parse()
        .expect("toml");
    let example_keys: Vec<String> = documents("example/secrets.example.yaml")
        .into_iter()
        .find(|d| d["metadata"]["name"] == "parley-provider-keys")
        .and_then(|d| d["stringData"].as_mapping().cloned())
        .expect("parley-provider-keys in the example")
        .keys()
        .filter_map(|k| k.as_str().map(str::to_owned))
        .collect();
    let mut with_keys = 0;
    for (name, provider) in config["providers"].as_table().expect("providers") {
        let Some(provider) = provider.as_table() else {
            continue;
        };
        assert!(
            !provider.contains_key("api_key_env"),
            "{shipped}: {name} takes its key from a variable"
        );
        if let Some(file) = provider.get("api_key_file").and_then(|f| f.as_str()) {
            with_keys += 1;
            let key = file
                .strip_prefix(&format!("{keys}/"))
                .unwrap_or_else(|| panic!("{name}: {file} is not under {keys}"));
            assert!(example_keys.iter().any(|k| k == key), "{name}: {key}");
        }
    }
    assert!(with_keys > 0, "{shipped}: no provider reads a key file");
    let example = std::fs::read_to_string(deploy("example/secrets.example.yaml")).expect("read");
    assert!(example.contains(
        "create secret generic parley-runner-token \\\n#       --from-literal=token=$(openssl rand -base64 48)"
    ));
}
