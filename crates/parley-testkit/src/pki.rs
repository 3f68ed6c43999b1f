//! Certificates made at test time: a CA and the `localhost` certificates
//! it signs, as PEM text or files. Each certificate gets a name of its own: OpenSSL (a Python test
//! server, for one) takes a certificate whose subject equals its issuer's
//! for a self-signed one.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// A certificate and its private key, as PEM files.
#[derive(Debug, Clone)]
pub struct PemFiles {
    /// The certificate.
    pub cert: PathBuf,
    /// Its private key (PKCS#8).
    pub key: PathBuf,
}

/// A test certificate authority.
pub struct TestCa {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

impl TestCa {
    /// A new CA named `name`.
    pub fn new(name: &str) -> Self {
        let key = KeyPair::generate().expect("a CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("the CA certificate");
        Self {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// The CA's certificate, PEM.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A certificate for `localhost` named `name`, and its key: PEM.
    pub fn leaf(&self, name: &str) -> (String, String) {
        let key = KeyPair::generate().expect("a key");
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).expect("leaf params");
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("a leaf certificate");
        (cert.pem(), key.serialize_pem())
    }

    /// Writes the CA's certificate to `dir/file`.
    pub fn write_ca(&self, dir: &Path, file: &str) -> PathBuf {
        let path = dir.join(file);
        std::fs::write(&path, &self.pem).expect("write the CA certificate");
        path
    }

    /// Writes a [`TestCa::leaf`] to `dir/NAME.crt` and `dir/NAME.key`.
    pub fn write_leaf(&self, dir: &Path, name: &str) -> PemFiles {
        let (cert, key) = self.leaf(name);
        let files = PemFiles {
            cert: dir.join(format!("{name}.crt")),
            key: dir.join(format!("{name}.key")),
        };
        std::fs::write(&files.cert, cert).expect("write a certificate");
        std::fs::write(&files.key, key).expect("write a key");
        files
    }
}
