//! `partita kube`'s flags: a port of go/cmd/partita/kube.go's, with the
//! same names, defaults and help. Durations are Go's ("30s", "10m",
//! "1h30m"); `--leader-elect=false` turns election off as in Go.

use std::path::PathBuf;

use anyhow::Context;
use std::time::Duration;

use partita_engine::scenario::duration::parse_duration;

use crate::k8s::names::DEFAULT_SCHEDULER_NAME;

/// The MIG reconfiguration modes (the Go build's MIGIdleNodes,
/// MIGKeepInstances, MIGOff).
pub const MIG_IDLE_NODES: &str = "idle-nodes";
pub const MIG_KEEP_INSTANCES: &str = "keep-instances";
pub const MIG_OFF: &str = "off";

/// The flags of `partita kube`: run as a Kubernetes scheduler for pods
/// with schedulerName partita (in-cluster or --kubeconfig).
#[derive(Debug, Clone, clap::Args)]
pub struct KubeArgs {
    /// kubeconfig file; empty: in-cluster config (or $KUBECONFIG)
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// API requests per second this client may make
    #[arg(long, value_name = "QPS", default_value_t = 500.0)]
    pub kube_api_qps: f64,
    /// API request burst
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub kube_api_burst: u32,
    /// comma-separated taint keys to ignore on nodes (nvidia.com/* are always ignored)
    #[arg(long, value_name = "KEYS", default_value = "")]
    pub tolerated_taints: String,
    /// the spec.schedulerName to serve
    #[arg(long, value_name = "NAME", default_value = DEFAULT_SCHEDULER_NAME)]
    pub scheduler_name: String,
    /// engine configuration: partita, gang-drf or naive
    #[arg(long, value_name = "NAME", default_value = "partita")]
    pub preset: String,
    /// grace period of evicted pods (default 30s)
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = go_duration)]
    pub preemption_grace: Duration,
    /// least time between two MIG changes of a GPU (default: the preset's, 10m)
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = go_duration)]
    pub mig_cooldown: Duration,
    /// namespace of the mig-parted ConfigMap the MIG manager reads
    #[arg(long, value_name = "NAMESPACE", default_value = "gpu-operator")]
    pub mig_configmap_namespace: String,
    /// name of that ConfigMap (point ClusterPolicy spec.migManager.config.name at it)
    #[arg(long, value_name = "NAME", default_value = "partita-mig-parted")]
    pub mig_configmap: String,
    /// when to change MIG layouts: idle-nodes, keep-instances or off
    #[arg(long, value_name = "MODE", default_value = MIG_IDLE_NODES, value_parser = mig_mode)]
    pub mig_reconfigure: String,
    /// concurrent binds and evictions
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub bind_workers: usize,
    /// hold a Lease before scheduling (run several replicas)
    #[arg(
        long,
        value_name = "BOOL",
        default_value_t = true,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    pub leader_elect: bool,
    /// namespace of the leader Lease
    #[arg(long, value_name = "NAMESPACE", default_value = "partita-system")]
    pub lease_namespace: String,
    /// name of the leader Lease
    #[arg(long, value_name = "NAME", default_value = "partita-scheduler")]
    pub lease_name: String,
    /// address of /metrics, /healthz and /readyz; empty: off
    #[arg(long, value_name = "ADDR", default_value = ":8080")]
    pub metrics_addr: String,
    /// address of the admission webhook (TLS), e.g. :9443; empty: off
    #[arg(long, value_name = "ADDR", default_value = "")]
    pub webhook_addr: String,
    /// webhook serving certificate
    #[arg(long, value_name = "FILE", default_value = "/etc/partita/tls/tls.crt")]
    pub tls_cert_file: PathBuf,
    /// webhook serving key
    #[arg(long, value_name = "FILE", default_value = "/etc/partita/tls/tls.key")]
    pub tls_key_file: PathBuf,
}

impl KubeArgs {
    /// The taint keys of --tolerated-taints, as Go's strings.Split (none
    /// when the flag is empty).
    pub fn tolerated_taints(&self) -> Vec<String> {
        if self.tolerated_taints.is_empty() {
            return Vec::new();
        }
        self.tolerated_taints.split(',').map(String::from).collect()
    }
}

/// A Go duration ("30s", "10m", "1h30m", "0"); negative ones are refused
/// (a negative grace period or cooldown means nothing here).
pub fn go_duration(text: &str) -> Result<Duration, String> {
    let nanos = parse_duration(text).ok_or_else(|| format!("invalid duration {text:?}"))?;
    let nanos = u64::try_from(nanos).map_err(|_| format!("negative duration {text:?}"))?;
    Ok(Duration::from_nanos(nanos))
}

fn mig_mode(text: &str) -> Result<String, String> {
    match text {
        MIG_IDLE_NODES | MIG_KEEP_INSTANCES | MIG_OFF => Ok(text.to_string()),
        _ => Err(format!(
            "MIG reconfigure mode {text:?}: want {MIG_IDLE_NODES}, {MIG_KEEP_INSTANCES} or {MIG_OFF}"
        )),
    }
}

impl KubeArgs {
    /// The scheduler's options for these flags.
    pub fn run_options(&self) -> anyhow::Result<crate::k8s::run::RunOptions> {
        let scheduler = crate::k8s::scheduler::Options {
            scheduler_name: self.scheduler_name.clone(),
            preset: self.preset.clone(),
            grace: self.preemption_grace,
            reconfig_cooldown: self.mig_cooldown,
            mig_config_namespace: self.mig_configmap_namespace.clone(),
            mig_config_name: self.mig_configmap.clone(),
            mig_reconfigure: self.mig_reconfigure.parse()?,
            bind_workers: self.bind_workers,
            tolerated_taints: self.tolerated_taints(),
            ..crate::k8s::scheduler::Options::default()
        };
        Ok(crate::k8s::run::RunOptions {
            scheduler,
            kubeconfig: self.kubeconfig.clone(),
            qps: self.kube_api_qps,
            burst: self.kube_api_burst,
            leader_elect: self.leader_elect,
            lease_namespace: self.lease_namespace.clone(),
            lease_name: self.lease_name.clone(),
            identity: String::new(),
            metrics_addr: self.metrics_addr.clone(),
            webhook_addr: self.webhook_addr.clone(),
            tls_cert_file: self.tls_cert_file.clone(),
            tls_key_file: self.tls_key_file.clone(),
        })
    }
}

/// `partita kube`: runs until SIGTERM or Ctrl-C, or until the lease is
/// lost.
pub fn run(args: &KubeArgs) -> anyhow::Result<()> {
    super::serve::init_logging();
    let ro = args.run_options()?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(crate::k8s::run::run(ro, super::serve::shutdown_signal()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Kube {
        #[command(flatten)]
        args: KubeArgs,
    }

    fn parse(args: &[&str]) -> Result<KubeArgs, String> {
        Kube::try_parse_from(std::iter::once("kube").chain(args.iter().copied()))
            .map(|k| k.args)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_defaults_are_the_go_builds() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.kubeconfig, None);
        assert_eq!(a.kube_api_qps, 500.0);
        assert_eq!(a.kube_api_burst, 1000);
        assert!(a.tolerated_taints().is_empty());
        assert_eq!(a.scheduler_name, "partita");
        assert_eq!(a.preset, "partita");
        assert_eq!(a.preemption_grace, Duration::ZERO);
        assert_eq!(a.mig_cooldown, Duration::ZERO);
        assert_eq!(a.mig_configmap_namespace, "gpu-operator");
        assert_eq!(a.mig_configmap, "partita-mig-parted");
        assert_eq!(a.mig_reconfigure, "idle-nodes");
        assert_eq!(a.bind_workers, 32);
        assert!(a.leader_elect);
        assert_eq!(a.lease_namespace, "partita-system");
        assert_eq!(a.lease_name, "partita-scheduler");
        assert_eq!(a.metrics_addr, ":8080");
        assert_eq!(a.webhook_addr, "");
        assert_eq!(a.tls_cert_file, PathBuf::from("/etc/partita/tls/tls.crt"));
        assert_eq!(a.tls_key_file, PathBuf::from("/etc/partita/tls/tls.key"));
    }

    #[test]
    fn every_flag_is_read() {
        let a = parse(&[
            "--kubeconfig=/tmp/kc",
            "--kube-api-qps",
            "50.5",
            "--kube-api-burst=100",
            "--tolerated-taints=a/b,c",
            "--scheduler-name=other",
            "--preset=gang-drf",
            "--preemption-grace=1m30s",
            "--mig-cooldown=10m",
            "--mig-configmap-namespace=ns",
            "--mig-configmap=cm",
            "--mig-reconfigure=keep-instances",
            "--bind-workers=4",
            "--leader-elect=false",
            "--lease-namespace=lns",
            "--lease-name=ln",
            "--metrics-addr=",
            "--webhook-addr=:9443",
            "--tls-cert-file=/c",
            "--tls-key-file=/k",
        ])
        .unwrap();
        assert_eq!(a.kubeconfig, Some(PathBuf::from("/tmp/kc")));
        assert_eq!(a.kube_api_qps, 50.5);
        assert_eq!(a.kube_api_burst, 100);
        assert_eq!(a.tolerated_taints(), vec!["a/b", "c"]);
        assert_eq!(a.scheduler_name, "other");
        assert_eq!(a.preset, "gang-drf");
        assert_eq!(a.preemption_grace, Duration::from_secs(90));
        assert_eq!(a.mig_cooldown, Duration::from_secs(600));
        assert_eq!(a.mig_configmap_namespace, "ns");
        assert_eq!(a.mig_configmap, "cm");
        assert_eq!(a.mig_reconfigure, "keep-instances");
        assert_eq!(a.bind_workers, 4);
        assert!(!a.leader_elect);
        assert_eq!(a.lease_namespace, "lns");
        assert_eq!(a.lease_name, "ln");
        assert_eq!(a.metrics_addr, "");
        assert_eq!(a.webhook_addr, ":9443");
        assert_eq!(a.tls_cert_file, PathBuf::from("/c"));
        assert_eq!(a.tls_key_file, PathBuf::from("/k"));
    }

    #[test]
    fn a_bare_leader_elect_is_true() {
        assert!(parse(&["--leader-elect"]).unwrap().leader_elect);
        assert!(parse(&["--leader-elect=true"]).unwrap().leader_elect);
    }

    #[test]
    fn bad_values_are_refused_with_the_reason() {
        let e = parse(&["--preemption-grace=30"]).unwrap_err();
        assert!(e.contains("invalid duration \"30\""), "{e}");
        let e = parse(&["--mig-cooldown=-1m"]).unwrap_err();
        assert!(e.contains("negative duration"), "{e}");
        let e = parse(&["--mig-reconfigure=always"]).unwrap_err();
        assert!(e.contains("want idle-nodes, keep-instances or off"), "{e}");
        assert!(parse(&["--kube-api-burst=-1"]).is_err());
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration("0"), Ok(Duration::ZERO));
        assert_eq!(go_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(go_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(go_duration("").is_err());
        assert!(go_duration("10 m").is_err());
    }
}
