//! A real kube-apiserver with etcd for the Kubernetes tests: the Go
//! program `go/test/integration/cmd/kubeharness` (built from the same
//! Kubernetes modules as the Go build's integration tests). It writes a
//! cluster-admin kubeconfig and runs until its stdin closes: when its
//! [`Harness`] is dropped, or when this process exits. [`harness`] is one
//! shared by a whole test binary; [`Harness::start`] gives a test one of
//! its own, as the Go tests' `kubetest.Start` does (~4 s each). Without
//! Go the tests say so and pass, unless env CI is set.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::Duration;

/// A running harness: where its kubeconfig is.
pub struct Harness {
    pub kubeconfig: PathBuf,
    /// Kept so that its stdin stays open while the tests run.
    child: Mutex<Child>,
}

static HARNESS: OnceLock<Option<Harness>> = OnceLock::new();
static BINARY: OnceLock<Option<PathBuf>> = OnceLock::new();

/// The harness shared by the test binary, started on first use; None
/// (with a line saying why) where Go is missing and CI is not set.
pub fn harness() -> Option<&'static Harness> {
    HARNESS.get_or_init(|| Harness::start(&[])).as_ref()
}

/// The kubeharness binary, built once per test binary; None without Go.
fn binary() -> Option<&'static PathBuf> {
    BINARY.get_or_init(build).as_ref()
}

fn build() -> Option<PathBuf> {
    let go = std::env::var("PARTITA_GO").unwrap_or_else(|_| "go".into());
    if !Command::new(&go)
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but `{go}` cannot run: the Kubernetes tests build their kube-apiserver with Go"
        );
        eprintln!("skipped: no Go (`{go}`) to build the kube-apiserver harness");
        return None;
    }
    let module = Path::new(env!("CARGO_MANIFEST_DIR")).join("go/test/integration");
    let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kubeharness");
    // The first build compiles Kubernetes (tens of minutes on two cores);
    // Go's build cache makes the next ones seconds.
    let built = Command::new(&go)
        .args(["build", "-o"])
        .arg(&bin)
        .arg("./cmd/kubeharness")
        .current_dir(&module)
        .status()
        .expect("run go build");
    assert!(built.success(), "go build ./cmd/kubeharness failed");
    Some(bin)
}

impl Harness {
    /// Starts a kube-apiserver (and etcd) of its own with the extra
    /// kube-apiserver flags, e.g. "--authorization-mode=Node,RBAC"; None
    /// where Go is missing and CI is not set. It stops when dropped.
    pub fn start(apiserver_flags: &[&str]) -> Option<Harness> {
        let bin = binary()?;
        let dir = tempfile::Builder::new()
            .prefix("partita-kube-")
            .tempdir()
            .unwrap()
            .keep();
        let mut child = Command::new(bin)
            .arg("-dir")
            .arg(&dir)
            .arg("--")
            .args(apiserver_flags)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start kubeharness");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(path) = line.strip_prefix("READY ") {
                    let _ = tx.send(PathBuf::from(path));
                }
            }
        });
        let kubeconfig = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("kubeharness: no READY line within 120 s");
        Some(Harness {
            kubeconfig,
            child: Mutex::new(child),
        })
    }
}

impl Drop for Harness {
    /// Closing its stdin ends it at once; the kill is for a harness that
    /// hangs anyway. (The shared one is never dropped: it ends with the
    /// process.)
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        drop(child.stdin.take());
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// A client of the harness's API server, as cluster-admin. One per test:
/// its connection task lives on the test's runtime.
pub async fn client(h: &Harness) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(&h.kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// Installs the CRDs generated from the Rust types and waits until the
/// API server serves them (a second install is a no-op).
pub async fn install_crds(client: &kube::Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Api, PostParams};
    use kube::{CustomResourceExt, ResourceExt};
    use partita::k8s::resources::{PodGroup, Queue};
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in [Queue::crd(), PodGroup::crd()] {
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("creating {}: {e}", crd.name_any()),
        }
        let start = std::time::Instant::now();
        loop {
            let got = crds.get(&crd.name_any()).await.unwrap();
            let established = got
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{} not established",
                crd.name_any()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A worker running jobs as pods (`--cluster kubernetes`) on the cluster
/// of `kubeconfig`, for the database of `w`; its pods name scheduler
/// `scheduler_name` and run the pause image.
pub async fn kube_worker(
    kubeconfig: &Path,
    w: &super::api::World,
    id: &str,
    scheduler_name: &str,
) -> partita::worker::Handle {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let mut opt = super::api::worker_options(1.0, id);
    opt.kube = Some(partita::worker::kube_loop::KubeOptions {
        config,
        template: partita::worker::kube::PodTemplate {
            scheduler_name: scheduler_name.into(),
            image: "registry.k8s.io/pause:3.10".into(),
            command: Vec::new(),
        },
        tick: Duration::from_millis(200),
    });
    partita::worker::spawn(w.pool.clone(), opt)
}
