//! The runner image reads its mTLS key as the manifests mount it.
//!
//! The pod's security context (deploy/base/runner.yaml: runAsUser,
//! runAsGroup, fsGroup) and the key Secret's volume
//! (deploy/components/mtls/runner.yaml: defaultMode, mountPath, the
//! --tls-* flags and PARLEY_CLIENT_TLS__* variables) are read from the
//! manifests, and the agent-runner image runs exactly so: user
//! runAsUser:runAsGroup, fsGroup as its supplementary group (what the
//! kubelet adds), the files owned by root with group fsGroup (root without
//! fsGroup) and mode defaultMode, mounted read-only at mountPath. It must
//! start and serve grpc.health.v1 over mutual TLS. Docker CLI, not
//! testcontainers: `--group-add` is the point of the test.

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use parley_grpc::tls::{ClientTls, ClientTlsConfig};
use parley_testkit::pki::TestCa;
use serde::Deserialize;
use serde_yaml_ng::Value;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

use crate::support::gate::TAG;

const TEST: &str = "runner_tls_key::the_runner_image_reads_its_tls_key_as_the_manifests_mount_it";
const IMAGE: &str = "parley/agent-runner";

fn repo(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative)
}

/// The Deployment named `name` among the documents of `relative`.
fn deployment(relative: &str, name: &str) -> Value {
    let text = std::fs::read_to_string(repo(relative)).expect("read a manifest");
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|document| Value::deserialize(document).expect("yaml"))
        .find(|doc| doc["kind"] == "Deployment" && doc["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no Deployment {name} in {relative}"))
}

fn int(value: &Value, what: &str) -> u32 {
    value
        .as_u64()
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or_else(|| panic!("{what} is not a number: {value:?}"))
}

/// A Secret's `defaultMode` as Kubernetes reads it: YAML 1.1, so a leading
/// 0 (`0440`) is octal; serde_yaml_ng (YAML 1.2) reads `0440` as a string.
fn default_mode(value: &Value) -> u32 {
    if let Some(mode) = value.as_u64() {
        return u32::try_from(mode).expect("defaultMode");
    }
    let written = value
        .as_str()
        .unwrap_or_else(|| panic!("defaultMode {value:?}"));
    match written.strip_prefix('0').filter(|rest| !rest.is_empty()) {
        Some(octal) => u32::from_str_radix(octal, 8).expect("octal defaultMode"),
        None => written.parse().expect("defaultMode"),
    }
}

/// What the manifests say about the runner's TLS files.
#[derive(Debug)]
struct Mounted {
    user: u32,
    group: u32,
    fs_group: Option<u32>,
    mode: u32,
    mount_path: String,
    /// The container's --tls-* flags.
    args: Vec<String>,
    /// Its variables that name files under the mount path.
    env: Vec<(String, String)>,
}

fn manifests() -> Mounted {
    let base = deployment("deploy/base/runner.yaml", "agent-runner");
    let context = &base["spec"]["template"]["spec"]["securityContext"];
    let mtls_file = "deploy/components/mtls/runner.yaml";
    let mtls = deployment(mtls_file, "agent-runner");
    let pod = &mtls["spec"]["template"]["spec"];
    let container = pod["containers"]
        .as_sequence()
        .and_then(|c| c.iter().find(|c| c["name"] == "agent-runner"))
        .expect("the agent-runner container in the mtls component");
    let volume = pod["volumes"]
        .as_sequence()
        .and_then(|v| v.iter().find(|v| !v["secret"].is_null()))
        .expect("a Secret volume in the mtls component");
    let mount_path = container["volumeMounts"]
        .as_sequence()
        .and_then(|m| m.iter().find(|m| m["name"] == volume["name"]))
        .and_then(|m| m["mountPath"].as_str())
        .expect("the Secret volume's mountPath")
        .to_owned();
    let args = container["args"]
        .as_sequence()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .filter(|arg| arg.starts_with("--tls-"))
        .map(str::to_owned)
        .collect();
    let env = container["env"]
        .as_sequence()
        .expect("env")
        .iter()
        .filter_map(|e| Some((e["name"].as_str()?, e["value"].as_str()?)))
        .filter(|(_, value)| value.starts_with(&mount_path))
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect();
    Mounted {
        user: int(&context["runAsUser"], "runAsUser"),
        group: int(&context["runAsGroup"], "runAsGroup"),
        fs_group: (!context["fsGroup"].is_null()).then(|| int(&context["fsGroup"], "fsGroup")),
        mode: default_mode(&volume["secret"]["defaultMode"]),
        mount_path,
        args,
        env,
    }
}

fn docker(args: &[&str]) -> Result<String, String> {
    let output = Command::new("docker")
        .args(args)
        .output()
        .map_err(|error| format!("docker: {error}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).trim().to_owned())
    }
}

/// Removes the container when the test ends, passed or not.
struct Container(String);

impl Container {
    fn logs(&self) -> String {
        match Command::new("docker").args(["logs", &self.0]).output() {
            Ok(o) => format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(error) => format!("(no logs: {error})"),
        }
    }

    fn running(&self) -> bool {
        docker(&["inspect", "-f", "{{.State.Running}}", &self.0]).is_ok_and(|s| s == "true")
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", &self.0]);
    }
}

/// The Secret's files as the kubelet writes them: owned by root, group
/// fsGroup (root without one), mode defaultMode.
fn write_secret(dir: &Path, files: &[(&str, &str)], group: u32, mode: u32) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod dir");
    for (name, content) in files {
        let path = dir.join(name);
        std::fs::write(&path, content).expect("write a secret file");
        std::os::unix::fs::chown(&path, Some(0), Some(group)).expect("chown (needs root)");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }
}

#[tokio::test]
async fn the_runner_image_reads_its_tls_key_as_the_manifests_mount_it() {
    // The manifests first: what they say is checked whatever the host.
    let mounted = manifests();
    assert!(
        mounted.args.iter().any(|a| a.starts_with("--tls-key=")),
        "{mounted:?}"
    );
    let image = format!("{IMAGE}:{TAG}");
    if let Err(why) = docker(&["image", "inspect", "-f", "{{.Id}}", &image]) {
        parley_testkit::not_run(
            TEST,
            &format!("no Docker or no {image} ({why}): build it with scripts/images.sh"),
        );
        return;
    }
    if !rustix::process::geteuid().is_root() {
        parley_testkit::not_run(
            TEST,
            "needs root: the Secret's files are owned by root, as the kubelet writes them",
        );
        return;
    }

    let ca = TestCa::new("parley runner-key test CA");
    let (cert, key) = ca.leaf("agent-runner");
    // In the target directory: the Docker engine shares the workspace's
    // file system (tests/e2e mounts deploy/ files the same way).
    let secret = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    write_secret(
        secret.path(),
        &[("tls.crt", &cert), ("tls.key", &key), ("ca.crt", ca.pem())],
        mounted.fs_group.unwrap_or(0),
        mounted.mode,
    );
    let client_dir = tempfile::tempdir().expect("tempdir");
    let client = ca.write_leaf(client_dir.path(), "gateway");
    let ca_file = ca.write_ca(client_dir.path(), "ca.pem");

    let user = format!("{}:{}", mounted.user, mounted.group);
    let volume = format!("{}:{}:ro", secret.path().display(), mounted.mount_path);
    let mut args: Vec<String> = [
        "run",
        "-d",
        "--user",
        &user,
        "--read-only",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "-v",
        &volume,
        "-p",
        "127.0.0.1::50052",
    ]
    .map(str::to_owned)
    .to_vec();
    if let Some(fs_group) = mounted.fs_group {
        args.extend(["--group-add".into(), fs_group.to_string()]);
    }
    for (name, value) in &mounted.env {
        args.extend(["-e".into(), format!("{name}={value}")]);
    }
    args.push(image);
    args.extend([
        "--listen=0.0.0.0:50052".into(),
        "--metrics-listen=off".into(),
        "--drain-timeout=1s".into(),
    ]);
    args.extend(mounted.args.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let container = Container(docker(&args).expect("docker run"));
    // No published port once the container has exited.
    let port = docker(&["port", &container.0, "50052/tcp"]).unwrap_or_else(|why| {
        panic!(
            "the runner, run as the manifests run it ({mounted:?}), exited ({why}):\n{}",
            container.logs()
        )
    });
    let port = port
        .lines()
        .next()
        .and_then(|l| l.rsplit_once(':'))
        .and_then(|(_, p)| p.parse::<u16>().ok())
        .expect("the published port");

    let tls = ClientTls::from_config(&ClientTlsConfig {
        ca: Some(ca_file),
        cert: Some(client.cert.clone()),
        key: Some(client.key.clone()),
    })
    .expect("client TLS");
    let started = Instant::now();
    loop {
        let endpoint = tls
            .endpoint(&format!("https://localhost:{port}"))
            .expect("a valid URL")
            .configure(|endpoint| endpoint.connect_timeout(Duration::from_secs(2)));
        if let Ok(channel) = endpoint.connect().await
            && let Ok(reply) = HealthClient::new(channel)
                .check(HealthCheckRequest::default())
                .await
            && reply.into_inner().status == 1
        {
            break;
        }
        assert!(
            container.running() && started.elapsed() < Duration::from_secs(60),
            "the runner, run as the manifests run it ({mounted:?}), does not serve health over TLS:\n{}",
            container.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
