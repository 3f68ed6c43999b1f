//! Secret values of the configuration: the shared helpers of
//! [`parley_grpc::secret`] (one value, `*_env` or `*_file`; placeholders
//! refused; URLs printed without their password), re-exported here where
//! the gateway has always called them. The test below checks that the
//! default deployment mounts the gateway's secrets as files.

pub use parley_grpc::secret::*;

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    fn deploy() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
    }

    #[test]
    fn the_default_deployment_applies_no_secret_and_mounts_the_gateways_as_files() {
        let kustomization: serde_yaml_ng::Value = serde_yaml_ng::from_str(
            &std::fs::read_to_string(deploy().join("kustomization.yaml")).expect("read"),
        )
        .expect("yaml");
        let resources: Vec<&str> = kustomization["resources"]
            .as_sequence()
            .expect("resources")
            .iter()
            .filter_map(|r| r.as_str())
            .collect();
        for resource in &resources {
            let path = deploy().join(resource);
            if path.is_file() {
                let text = std::fs::read_to_string(&path).expect("read");
                assert!(
                    !text.lines().any(|line| line.trim() == "kind: Secret"),
                    "`kubectl apply -k deploy` applies the Secret of {resource}"
                );
            }
        }
        let gateway = std::fs::read_to_string(deploy().join("base/gateway.yaml")).expect("read");
        assert!(
            !gateway.contains("secretKeyRef"),
            "the gateway's secrets are files, not variables"
        );
        for mounted in ["secretName: parley-auth", "secretName: parley-postgres"] {
            assert!(gateway.contains(mounted), "{mounted}");
        }
        let config =
            std::fs::read_to_string(deploy().join("config/gateway.kubernetes.toml")).expect("read");
        assert!(
            config.contains("secret_file = \"/var/run/secrets/parley/auth/jwt-secret\""),
            "{config}"
        );
        assert!(gateway.contains("/var/run/secrets/parley/postgres/url"));
        // The example, outside the composition, shows only refused values.
        let example =
            std::fs::read_to_string(deploy().join("example/secrets.example.yaml")).expect("read");
        for document in serde_yaml_ng::Deserializer::from_str(&example) {
            let secret = serde_yaml_ng::Value::deserialize(document).expect("yaml");
            let data = secret["stringData"].as_mapping().expect("stringData");
            for (key, value) in data {
                let value = value.as_str().unwrap_or_default();
                assert!(
                    value.is_empty()
                        || is_placeholder(value)
                        || url_has_placeholder_password(value),
                    "{key:?} = {value}"
                );
            }
        }
    }
}
