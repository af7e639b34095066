//! The webhook's TLS server (src/k8s/serve.rs), a port of the Go build's
//! TestWebhookServerReloadsItsCertificate: it starts without its
//! certificate (the Secret is optional in the Deployment), serves once the
//! files appear, picks up a renewal without a restart, and keeps the last
//! good pair when a renewal cannot be read. Certificates are made with the
//! openssl command, as cert-manager would write them into the Secret.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use axum::Router;
use axum::routing::post;
use partita::k8s::serve::{CertFiles, bind, spawn_https};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Writes a self-signed serving certificate for 127.0.0.1 with `serial`;
/// the key first, so a handshake between the two writes sees a mismatched
/// pair and keeps the last good one. Returns the certificate's DER and PEM.
fn write_pair(dir: &Path, serial: u32) -> (Vec<u8>, Vec<u8>) {
    let work = tempfile::tempdir().unwrap();
    let (cert, key) = (work.path().join("c.pem"), work.path().join("k.pem"));
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        .args(["-set_serial", &serial.to_string()])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("run openssl");
    assert!(
        status.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    std::fs::write(dir.join("tls.key"), std::fs::read(&key).unwrap()).unwrap();
    let pem = std::fs::read(&cert).unwrap();
    std::fs::write(dir.join("tls.crt"), &pem).unwrap();
    (CertificateDer::from_pem_slice(&pem).unwrap().to_vec(), pem)
}

/// Trusts any certificate (Go's InsecureSkipVerify): the test compares
/// the certificate served with the one written instead.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[allow(deprecated)] // ring's provider, as the server's
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Connects, returns the certificate served and the answer to a POST.
async fn call(addr: std::net::SocketAddr) -> Result<(Vec<u8>, String), String> {
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider())))
        .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .map_err(|e| e.to_string())?;
    let served = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
    tls.write_all(
        b"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .await
    .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    // rustls reports a close without close_notify as an error; what was
    // read before it is the answer.
    let _ = tls.read_to_string(&mut answer).await;
    Ok((served, answer))
}

#[tokio::test]
async fn the_webhook_server_reloads_its_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let certs = Arc::new(CertFiles::new(
        dir.path().join("tls.crt"),
        dir.path().join("tls.key"),
    ));
    let router = Router::new().route("/validate", post(|| async { "allowed" }));
    let listener = bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = spawn_https(listener, router, certs, async {
        let _ = stopped.await;
    });

    // No certificate yet: handshakes fail, the server keeps running.
    assert!(
        call(addr).await.is_err(),
        "a handshake succeeded without a certificate"
    );
    assert!(
        !server.is_finished(),
        "the server stopped without its certificate"
    );

    let (first, _) = write_pair(dir.path(), 1);
    let (served, answer) = call(addr).await.expect("after the certificate appeared");
    assert_eq!(served, first, "not the certificate written");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("allowed"), "{answer}");

    // A renewal: new files in place, no restart.
    let (second, second_pem) = write_pair(dir.path(), 2);
    assert_ne!(first, second);
    let (served, _) = call(addr).await.expect("after a renewal");
    assert_eq!(served, second, "the renewal was not picked up");

    // An unreadable renewal keeps the last good pair.
    std::fs::write(dir.path().join("tls.crt"), "garbage").unwrap();
    let (served, _) = call(addr).await.expect("after a bad renewal");
    assert_eq!(served, second);
    // So does a key renewed before its certificate.
    let (third, _) = write_pair(dir.path(), 3);
    std::fs::write(dir.path().join("tls.crt"), &second_pem).unwrap();
    let (served, _) = call(addr).await.expect("with a key that does not match");
    assert_eq!(served, second);
    assert_ne!(served, third);

    let _ = stop.send(());
    server.await.unwrap().unwrap();
}
