//! A Kubernetes Node as the engine sees it (port of
//! go/internal/kube/node.go): the node to build from its allocatable
//! resources and labels, its GPUs from the NVIDIA device plugin's capacity
//! and GPU Feature Discovery's labels (MIG strategy mixed), each GPU's MIG
//! layout, and whether new work may go there. Pure: no API calls.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use partita_engine::cluster::{LINK_ALL, LINK_NONE, LINK_PAIRS, NodeSpec, parse_tier};
use partita_engine::gpu::{Layout, Model, lookup};

use super::migconfig::{Counts, GpuConfig, MigDeviceSpec, counts_of, expand_specs, pack_layouts};
use super::names::{
    LABEL_GPU_COUNT, LABEL_GPU_PRODUCT, LABEL_MIG_CONFIG, LABEL_MIG_CONFIG_STATE, LABEL_NVLINK,
    LABEL_TIER, MIG_STATE_FAILED, MIG_STATE_SUCCESS, RESOURCE_GPU, RESOURCE_MIG_PREFIX,
};

/// Node condition, taint effect and resource names of the core API
/// (k8s.io/api/core/v1: NodeReady, ConditionTrue,
/// TaintEffectPreferNoSchedule, ResourceCPU, ResourceMemory).
const CONDITION_READY: &str = "Ready";
const CONDITION_TRUE: &str = "True";
const TAINT_EFFECT_PREFER_NO_SCHEDULE: &str = "PreferNoSchedule";
const RESOURCE_CPU: &str = "cpu";
const RESOURCE_MEMORY: &str = "memory";
/// Taints with this key prefix are the NVIDIA ones GPU nodes carry for GPU
/// pods (the GPU Operator's nvidia.com/gpu:NoSchedule); Partita's pods are
/// GPU pods, so they never keep them out.
const NVIDIA_TAINT_PREFIX: &str = "nvidia.com/";
/// GFD's product name under MIG strategy single: "...-MIG-1g.10gb".
const SINGLE_STRATEGY_MARK: &str = "-MIG-";

/// A Kubernetes node as the engine will see it: the node to build, each
/// GPU's MIG state, and whether new work may go there.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeView {
    pub spec: NodeSpec,
    /// `gpus[i]` is GPU i: MIG off, or on with `layout` (start slices
    /// Partita derived from counts; the device plugin decides the physical
    /// instance a pod gets).
    pub gpus: Vec<GpuView>,
    /// No new work at all (not Ready, cordoned, a taint Partita does not
    /// tolerate); `reason` says which.
    pub unschedulable: bool,
    /// A MIG change is being applied (or awaits the device plugin's new
    /// capacity); every GPU of the node is cordoned meanwhile, since the
    /// MIG manager stops GPU clients while it works.
    pub mig_changing: bool,
    /// The MIG manager reported failure; GPUs stay cordoned until an
    /// operator fixes the node.
    pub mig_failed: bool,
    pub reason: String,
    /// The node's current nvidia.com/mig.config value.
    pub config: String,
}

/// One GPU of a `NodeView`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuView {
    pub mig: bool,
    pub layout: Layout,
}

impl NodeView {
    /// The configs of the GPUs, as mig-parted would write them.
    pub fn configs(&self) -> Vec<GpuConfig> {
        self.gpus
            .iter()
            .map(|g| GpuConfig {
                mig: g.mig,
                counts: counts_of(&g.layout),
            })
            .collect()
    }
}

/// The cluster-wide facts a node's translation needs.
#[derive(Debug, Clone, Default)]
pub struct NodeOptions {
    /// Partita's own mig-parted configs by name (from its ConfigMap). A
    /// node whose mig.config label names one is read from it; other nodes
    /// are read from the device plugin's capacity.
    pub configs: BTreeMap<String, Vec<MigDeviceSpec>>,
    /// Taint keys Partita ignores, besides the NVIDIA ones (nvidia.com/...)
    /// that GPU nodes carry for GPU pods.
    pub tolerated_taints: BTreeSet<String>,
}

/// Translates a node. It never fails: what cannot be read is reported
/// through `unschedulable`/`mig_failed` and `reason`, so that pods bound
/// there are still accounted for.
pub fn view_node(n: &Node, opt: &NodeOptions) -> NodeView {
    let labels = n.metadata.labels.clone().unwrap_or_default();
    let label = |k: &str| labels.get(k).map(String::as_str).unwrap_or("");
    let allocatable = n.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let mut v = NodeView {
        spec: NodeSpec {
            name: n.metadata.name.clone().unwrap_or_default(),
            cpu_milli: quantity_of(allocatable, RESOURCE_CPU, Scale::Milli),
            memory_mib: quantity_of(allocatable, RESOURCE_MEMORY, Scale::One) >> 20,
            labels: labels.clone(),
            ..NodeSpec::default()
        },
        config: label(LABEL_MIG_CONFIG).to_string(),
        ..NodeView::default()
    };
    // A missing tier label is reserved (parse_tier("")); a bad one leaves
    // the spec's default, as in Go.
    if let Ok(t) = parse_tier(label(LABEL_TIER)) {
        v.spec.tier = t.as_str().to_string();
    }
    let nvlink = label(LABEL_NVLINK);
    if [LINK_NONE, LINK_ALL, LINK_PAIRS].contains(&nvlink) {
        v.spec.nvlink = nvlink.to_string();
    }
    if let Some(why) = unschedulable(n, &opt.tolerated_taints) {
        v.unschedulable = true;
        v.reason = why;
    }
    read_gpus(n, &labels, opt, &mut v);
    v
}

/// Why no new pod may go to `n`, or None.
fn unschedulable(n: &Node, tolerated: &BTreeSet<String>) -> Option<String> {
    let spec = n.spec.as_ref();
    if spec.and_then(|s| s.unschedulable).unwrap_or(false) {
        return Some("node is cordoned".to_string());
    }
    // The last Ready condition counts, as in Go's loop.
    let mut ready = false;
    for c in n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
    {
        if c.type_ == CONDITION_READY {
            ready = c.status == CONDITION_TRUE;
        }
    }
    if !ready {
        return Some("node is not Ready".to_string());
    }
    for t in spec.and_then(|s| s.taints.as_deref()).unwrap_or_default() {
        if t.effect == TAINT_EFFECT_PREFER_NO_SCHEDULE
            || t.key.starts_with(NVIDIA_TAINT_PREFIX)
            || tolerated.contains(&t.key)
        {
            continue;
        }
        return Some(format!(
            "taint {}:{} is not tolerated (Partita does not evaluate pod tolerations)",
            t.key, t.effect
        ));
    }
    None
}

/// Fills the GPUs of `v` from the device plugin's capacity, the GFD labels
/// and, for a node on one of Partita's configs, that config.
fn read_gpus(n: &Node, labels: &BTreeMap<String, String>, opt: &NodeOptions, v: &mut NodeView) {
    let label = |k: &str| labels.get(k).map(String::as_str).unwrap_or("");
    let capacity = n.status.as_ref().and_then(|s| s.capacity.as_ref());
    let whole = quantity_of(capacity, RESOURCE_GPU, Scale::One);
    // MIG instances per profile, as strategy mixed advertises them.
    let mut counts = Counts::new();
    for (name, q) in capacity.into_iter().flatten() {
        if let Some(p) = name.strip_prefix(RESOURCE_MIG_PREFIX) {
            let c = quantity_value(q, Scale::One);
            if c > 0 {
                counts.insert(p.to_string(), c);
            }
        }
    }
    let product = label(LABEL_GPU_PRODUCT);
    if whole == 0 && counts.is_empty() && product.is_empty() {
        return; // a CPU node
    }
    if let Some((base, _)) = product.split_once(SINGLE_STRATEGY_MARK) {
        // GFD names the product "...-MIG-1g.10gb" under the single
        // strategy, where every GPU exposes one profile as nvidia.com/gpu.
        v.spec.gpu_model = lookup(base).name.clone();
        v.spec.gpus = to_i32(whole.max(1));
        v.mig_failed = true;
        v.reason = "MIG strategy single is not supported (use mixed)".to_string();
        v.gpus = vec![GpuView::default(); v.spec.gpus as usize];
        return;
    }
    let model = lookup(if product.is_empty() {
        "unknown"
    } else {
        product
    });
    v.spec.gpu_model = model.name.clone();
    // GFD's count includes the MIG GPUs; without it, the fewest GPUs that
    // hold the advertised instances.
    let total = match go_atoi(label(LABEL_GPU_COUNT)) {
        Some(c) if c >= whole => c,
        _ if !counts.is_empty() => whole + min_mig_gpus(&model, &counts),
        _ => whole,
    };
    v.spec.gpus = to_i32(total);
    v.gpus = vec![GpuView::default(); total.max(0) as usize];
    let whole = whole.max(0) as usize;
    if let Some(specs) = opt.configs.get(&v.config) {
        read_own_config(
            label(LABEL_MIG_CONFIG_STATE),
            &model,
            specs,
            whole,
            &counts,
            v,
        );
        return;
    }
    let st = label(LABEL_MIG_CONFIG_STATE);
    if !st.is_empty() && st != MIG_STATE_SUCCESS && !v.config.is_empty() {
        v.reason = format!("MIG config {} is {st}", v.config);
        if st == MIG_STATE_FAILED {
            v.mig_failed = true;
        } else {
            v.mig_changing = true;
        }
    }
    fill_from_capacity(&model, whole, &counts, v);
}

/// Spreads the MIG instances the device plugin advertises over the GPUs
/// that are not advertised whole: by convention the last ones (the device
/// plugin does not say which; only counts matter to the kubelet).
fn fill_from_capacity(model: &Model, whole: usize, counts: &Counts, v: &mut NodeView) {
    let mig_gpus = v.gpus.len().saturating_sub(whole);
    if mig_gpus == 0 {
        return;
    }
    if !model.mig {
        v.mig_failed = true;
        v.reason = format!(
            "{mig_gpus} GPUs of {} are not advertised and the model has no MIG",
            model.name
        );
        return;
    }
    match pack_layouts(model, counts, mig_gpus) {
        Ok(layouts) => {
            for (k, layout) in layouts.into_iter().enumerate() {
                v.gpus[whole + k] = GpuView { mig: true, layout };
            }
        }
        Err(e) => {
            v.mig_failed = true;
            v.reason = format!("MIG capacity: {e}");
        }
    }
}

/// Reads a node whose label names one of Partita's configs: the layouts
/// come from the config. Until the MIG manager says success and the device
/// plugin advertises exactly what the config holds, the change is in
/// flight and the node's GPUs are cordoned.
fn read_own_config(
    state: &str,
    model: &Model,
    specs: &[MigDeviceSpec],
    whole: usize,
    counts: &Counts,
    v: &mut NodeView,
) {
    let (want_whole, want_counts) = match layouts_of_config(model, specs, v) {
        Ok(want) => want,
        Err(e) => {
            v.mig_failed = true;
            v.reason = format!("MIG config {}: {e}", v.config);
            return;
        }
    };
    if state == MIG_STATE_FAILED {
        v.mig_failed = true;
        v.reason = format!("the MIG manager failed to apply {}", v.config);
    } else if state != MIG_STATE_SUCCESS {
        v.mig_changing = true;
        let st = if state.is_empty() {
            "not reported yet"
        } else {
            state
        };
        v.reason = format!("MIG config {} is {st}", v.config);
    } else if whole != want_whole || *counts != want_counts {
        v.mig_changing = true;
        v.reason = format!(
            "MIG config {} applied; waiting for the device plugin to advertise it",
            v.config
        );
    }
}

/// Sets the MIG GPUs of `v` from the config's entries and returns what the
/// device plugin should advertise once it is applied: the whole GPUs and
/// the instances per profile. The error is what is wrong with the config.
fn layouts_of_config(
    model: &Model,
    specs: &[MigDeviceSpec],
    v: &mut NodeView,
) -> Result<(usize, Counts), String> {
    let (gpus, named) = expand_specs(specs, v.gpus.len()).map_err(|e| e.to_string())?;
    if let Some(i) = named.iter().position(|ok| !ok) {
        return Err(format!("config names no setting for GPU {i}"));
    }
    let mut want_whole = 0;
    let mut want_counts = Counts::new();
    for (i, g) in gpus.iter().enumerate() {
        if !g.mig {
            want_whole += 1;
            continue;
        }
        let mut layouts = pack_layouts(model, &g.counts, 1).map_err(|e| format!("GPU {i}: {e}"))?;
        v.gpus[i] = GpuView {
            mig: true,
            layout: layouts.remove(0),
        };
        for (p, c) in &g.counts {
            if *c > 0 {
                *want_counts.entry(p.clone()).or_insert(0) += c;
            }
        }
    }
    Ok((want_whole, want_counts))
}

/// The fewest GPUs that hold the instances, for a node without the
/// nvidia.com/gpu.count label; 0 when even 64 do not.
fn min_mig_gpus(m: &Model, counts: &Counts) -> i64 {
    (1..=64)
        .find(|&k| pack_layouts(m, counts, k).is_ok())
        .map_or(0, |k| k as i64)
}

/// Go's strconv.Atoi: an optional sign and decimal digits.
fn go_atoi(s: &str) -> Option<i64> {
    s.parse().ok()
}

/// A GPU count as the engine's i32; counts beyond it are not real nodes.
fn to_i32(n: i64) -> i32 {
    n.clamp(i32::MIN as i64, i32::MAX as i64) as i32
}

/// The unit a quantity is read in: Go's Quantity.Value or MilliValue.
#[derive(Clone, Copy)]
pub(crate) enum Scale {
    One,
    Milli,
}

/// The named quantity of a resource list, 0 when absent (as Go's
/// ResourceList lookups give a zero Quantity).
pub(crate) fn quantity_of(
    list: Option<&BTreeMap<String, Quantity>>,
    name: &str,
    scale: Scale,
) -> i64 {
    list.and_then(|l| l.get(name))
        .map_or(0, |q| quantity_value(q, scale))
}

/// A Kubernetes quantity's value in `scale` units, rounded away from zero
/// as Go's Quantity.Value and MilliValue do ("100m" CPU is 1 whole, 100
/// milli). k8s-openapi keeps quantities as text; the API server has
/// validated them, so text that is not a quantity reads as 0 rather than
/// failing the node. Values beyond i64 saturate.
pub(crate) fn quantity_value(q: &Quantity, scale: Scale) -> i64 {
    let Some((negative, num, den)) = parse_quantity(&q.0) else {
        return 0;
    };
    let factor: u128 = match scale {
        Scale::One => 1,
        Scale::Milli => 1000,
    };
    let v = match num.checked_mul(factor) {
        Some(n) => n.div_ceil(den),
        None => u128::MAX,
    };
    let v = i64::try_from(v).unwrap_or(i64::MAX);
    if negative { -v } else { v }
}

/// The quantity grammar of k8s.io/apimachinery/pkg/api/resource:
/// `[+-]<digits>[.<digits>]<suffix>`, the suffix a binary SI one
/// (Ki..Ei), a decimal SI one (n, u, m, "", k, M, G, T, P, E) or a decimal
/// exponent (e3, E-2). The value is `num / den`; a value too large for
/// u128 saturates, one too small rounds to the smallest nonzero one.
pub(crate) fn parse_quantity(s: &str) -> Option<(bool, u128, u128)> {
    let (negative, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let end = rest
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(end);
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if int_part.is_empty() && frac_part.is_empty() || frac_part.contains('.') {
        return None;
    }
    let mut num: u128 = 0;
    for c in int_part.bytes().chain(frac_part.bytes()) {
        num = num.saturating_mul(10).saturating_add(u128::from(c - b'0'));
    }
    let pow10 = |e: u32| 10u128.checked_pow(e);
    let mut den = pow10(frac_part.len() as u32)?;
    let (mul, div): (u128, u128) = match suffix {
        "" => (1, 1),
        "n" => (1, 1_000_000_000),
        "u" => (1, 1_000_000),
        "m" => (1, 1_000),
        "k" => (1_000, 1),
        "M" => (1_000_000, 1),
        "G" => (1_000_000_000, 1),
        "T" => (1_000_000_000_000, 1),
        "P" => (1_000_000_000_000_000, 1),
        "E" => (1_000_000_000_000_000_000, 1),
        "Ki" => (1 << 10, 1),
        "Mi" => (1 << 20, 1),
        "Gi" => (1 << 30, 1),
        "Ti" => (1 << 40, 1),
        "Pi" => (1 << 50, 1),
        "Ei" => (1 << 60, 1),
        _ => {
            let exp = suffix.strip_prefix(['e', 'E'])?;
            let e: i32 = exp.parse().ok()?;
            // Beyond 10^38 u128 overflows: saturate either way.
            let p = pow10(e.unsigned_abs().min(38)).unwrap_or(u128::MAX);
            if e >= 0 { (p, 1) } else { (1, p) }
        }
    };
    num = num.saturating_mul(mul);
    den = den.saturating_mul(div);
    Some((negative, num, den))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::migconfig::{Devices, config_name, device_specs};
    use crate::k8s::names::{LABEL_MIG_STRATEGY, MIG_STATE_PENDING};
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec as CoreNodeSpec, NodeStatus, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// Builds fake Nodes for the pure translation tests (helpers_test.go's
    /// nodeBuilder); the behaviour against a real API server is tested
    /// elsewhere.
    struct NodeBuilder(Node);

    fn q(s: impl Into<String>) -> Quantity {
        Quantity(s.into())
    }

    /// A Ready H100 node with whole GPUs, as the device plugin and GFD
    /// describe it.
    fn gpu_node(name: &str, gpus: i64) -> NodeBuilder {
        let res: BTreeMap<String, Quantity> = [
            (RESOURCE_CPU.to_string(), q("64")),
            (RESOURCE_MEMORY.to_string(), q("512Gi")),
            (RESOURCE_GPU.to_string(), q(gpus.to_string())),
        ]
        .into();
        let labels: BTreeMap<String, String> = [
            (
                LABEL_GPU_PRODUCT.to_string(),
                "NVIDIA-H100-80GB-HBM3".to_string(),
            ),
            (LABEL_GPU_COUNT.to_string(), gpus.to_string()),
        ]
        .into();
        NodeBuilder(Node {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            spec: Some(CoreNodeSpec::default()),
            status: Some(NodeStatus {
                capacity: Some(res.clone()),
                allocatable: Some(res),
                conditions: Some(vec![NodeCondition {
                    type_: CONDITION_READY.to_string(),
                    status: CONDITION_TRUE.to_string(),
                    ..NodeCondition::default()
                }]),
                ..NodeStatus::default()
            }),
        })
    }

    impl NodeBuilder {
        fn status(&mut self) -> &mut NodeStatus {
            self.0.status.as_mut().unwrap()
        }

        /// Makes k of the node's GPUs MIG GPUs advertising the instances.
        fn mig(mut self, k: i64, instances: &[(&str, i64)]) -> Self {
            let whole = quantity_of(self.status().capacity.as_ref(), RESOURCE_GPU, Scale::One);
            let left = q((whole - k).to_string());
            let st = self.status();
            for list in [
                st.capacity.as_mut().unwrap(),
                st.allocatable.as_mut().unwrap(),
            ] {
                list.insert(RESOURCE_GPU.to_string(), left.clone());
                for (p, c) in instances {
                    list.insert(format!("{RESOURCE_MIG_PREFIX}{p}"), q(c.to_string()));
                }
            }
            self.label(LABEL_MIG_STRATEGY, "mixed")
        }

        fn label(mut self, k: &str, v: &str) -> Self {
            let labels = self.0.metadata.labels.as_mut().unwrap();
            labels.insert(k.to_string(), v.to_string());
            self
        }

        fn taint(mut self, key: &str) -> Self {
            let spec = self.0.spec.as_mut().unwrap();
            spec.taints.get_or_insert_default().push(Taint {
                key: key.to_string(),
                effect: "NoSchedule".to_string(),
                ..Taint::default()
            });
            self
        }

        fn cordoned(mut self) -> Self {
            self.0.spec.as_mut().unwrap().unschedulable = Some(true);
            self
        }

        fn obj(self) -> Node {
            self.0
        }
    }

    fn state_of(v: &NodeView) -> &'static str {
        if v.unschedulable {
            "unschedulable"
        } else if v.mig_changing {
            "changing"
        } else if v.mig_failed {
            "failed"
        } else {
            ""
        }
    }

    struct Case {
        name: &'static str,
        node: Node,
        opt: NodeOptions,
        want_model: &'static str,
        want_gpus: i32,
        /// Per GPU: "" for whole, else the layout ("mig:" for none).
        want_mig: Option<Vec<&'static str>>,
        /// "", unschedulable, changing, failed.
        want_state: &'static str,
    }

    fn case(name: &'static str, node: Node, want_model: &'static str, want_gpus: i32) -> Case {
        Case {
            name,
            node,
            opt: NodeOptions::default(),
            want_model,
            want_gpus,
            want_mig: None,
            want_state: "",
        }
    }

    // TestViewNodeReadsDevicePluginAndGFD: its ten cases.
    #[test]
    fn view_node_reads_device_plugin_and_gfd() {
        let all_whole = Some(vec![""; 8]);
        let cases = vec![
            Case {
                want_mig: all_whole.clone(),
                ..case("whole GPUs", gpu_node("n", 8).obj(), "H100-80GB", 8)
            },
            Case {
                want_mig: Some(vec![
                    "",
                    "",
                    "3g.40gb@0,3g.40gb@4",
                    "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3",
                ]),
                ..case(
                    "mixed strategy: two GPUs split, MIG GPUs last",
                    gpu_node("n", 4)
                        .mig(2, &[("3g.40gb", 2), ("1g.10gb", 4)])
                        .obj(),
                    "H100-80GB",
                    4,
                )
            },
            Case {
                want_mig: Some(vec!["mig:"]),
                ..case(
                    "MIG on with no instances",
                    gpu_node("n", 1).mig(1, &[]).obj(),
                    "H100-80GB",
                    1,
                )
            },
            Case {
                want_state: "failed",
                ..case(
                    "instances that cannot fit the GPUs",
                    gpu_node("n", 1).mig(1, &[("7g.80gb", 2)]).obj(),
                    "H100-80GB",
                    1,
                )
            },
            Case {
                want_state: "failed",
                ..case(
                    "single strategy is refused",
                    gpu_node("n", 7)
                        .label(LABEL_GPU_PRODUCT, "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb")
                        .obj(),
                    "A100-80GB",
                    7,
                )
            },
            Case {
                want_state: "unschedulable",
                ..case(
                    "cordoned",
                    gpu_node("n", 8).cordoned().obj(),
                    "H100-80GB",
                    8,
                )
            },
            Case {
                want_state: "unschedulable",
                ..case(
                    "a taint Partita does not know",
                    gpu_node("n", 8).taint("dedicated").obj(),
                    "H100-80GB",
                    8,
                )
            },
            Case {
                opt: NodeOptions {
                    tolerated_taints: ["dedicated".to_string()].into(),
                    ..NodeOptions::default()
                },
                want_mig: all_whole,
                ..case(
                    "the NVIDIA taint and tolerated ones are fine",
                    gpu_node("n", 8)
                        .taint("nvidia.com/gpu")
                        .taint("dedicated")
                        .obj(),
                    "H100-80GB",
                    8,
                )
            },
            Case {
                want_state: "changing",
                ..case(
                    "a foreign MIG config being applied",
                    gpu_node("n", 1)
                        .mig(1, &[])
                        .label(LABEL_MIG_CONFIG, "all-1g.10gb")
                        .label(LABEL_MIG_CONFIG_STATE, "pending")
                        .obj(),
                    "H100-80GB",
                    1,
                )
            },
            case(
                "a CPU node",
                {
                    let mut n = gpu_node("cpu", 0).obj();
                    n.metadata
                        .labels
                        .as_mut()
                        .unwrap()
                        .remove(LABEL_GPU_PRODUCT);
                    let st = n.status.as_mut().unwrap();
                    st.capacity.as_mut().unwrap().remove(RESOURCE_GPU);
                    n
                },
                "",
                0,
            ),
        ];
        assert_eq!(cases.len(), 10);
        for tc in cases {
            let name = tc.name;
            let v = view_node(&tc.node, &tc.opt);
            assert!(
                v.spec.gpus == tc.want_gpus
                    && (tc.want_model.is_empty() || v.spec.gpu_model == tc.want_model),
                "{name}: GPUs {} of {:?}, want {} of {:?}",
                v.spec.gpus,
                v.spec.gpu_model,
                tc.want_gpus,
                tc.want_model
            );
            assert_eq!(state_of(&v), tc.want_state, "{name}: state ({})", v.reason);
            let Some(want_mig) = tc.want_mig else {
                continue;
            };
            let got: Vec<String> = v
                .gpus
                .iter()
                .map(|g| match (g.mig, g.layout.to_string()) {
                    (false, _) => String::new(),
                    (true, l) if l.is_empty() => "mig:".to_string(),
                    (true, l) => l,
                })
                .collect();
            assert_eq!(got, want_mig, "{name}: GPUs");
        }
    }

    // The node's resources, tier, NVLink and the reasons' texts.
    #[test]
    fn view_node_reads_resources_and_says_why() {
        let v = view_node(&gpu_node("n", 8).obj(), &NodeOptions::default());
        assert_eq!(v.spec.name, "n");
        assert_eq!(v.spec.cpu_milli, 64_000);
        assert_eq!(v.spec.memory_mib, 512 * 1024);
        assert_eq!(v.spec.tier, "reserved");
        assert_eq!(v.spec.nvlink, "");
        assert_eq!(
            v.spec.labels.get(LABEL_GPU_COUNT).map(String::as_str),
            Some("8")
        );

        let n = gpu_node("n", 8)
            .label(LABEL_TIER, "spot")
            .label(LABEL_NVLINK, "pairs")
            .taint("dedicated")
            .obj();
        let v = view_node(&n, &NodeOptions::default());
        assert_eq!(
            (v.spec.tier.as_str(), v.spec.nvlink.as_str()),
            ("spot", "pairs")
        );
        assert_eq!(
            v.reason,
            "taint dedicated:NoSchedule is not tolerated (Partita does not evaluate pod tolerations)"
        );

        let n = gpu_node("n", 8)
            .label(LABEL_TIER, "cheap")
            .label(LABEL_NVLINK, "mesh")
            .obj();
        let v = view_node(&n, &NodeOptions::default());
        assert_eq!((v.spec.tier.as_str(), v.spec.nvlink.as_str()), ("", ""));

        let mut n = gpu_node("n", 8).obj();
        n.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].status = "False".to_string();
        assert_eq!(
            view_node(&n, &NodeOptions::default()).reason,
            "node is not Ready"
        );

        let n = gpu_node("n", 7)
            .label(LABEL_GPU_PRODUCT, "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb")
            .obj();
        let v = view_node(&n, &NodeOptions::default());
        assert_eq!(v.reason, "MIG strategy single is not supported (use mixed)");
        assert_eq!(v.gpus.len(), 7);
    }

    // Without GFD's count label, the MIG GPUs are the fewest that hold the
    // advertised instances.
    #[test]
    fn view_node_without_the_count_label() {
        let mut n = gpu_node("n", 4).mig(2, &[("1g.10gb", 8)]).obj();
        n.metadata.labels.as_mut().unwrap().remove(LABEL_GPU_COUNT);
        let v = view_node(&n, &NodeOptions::default());
        assert_eq!(v.spec.gpus, 4, "{}", v.reason);
        assert_eq!(state_of(&v), "");
    }

    // TestViewNodeOnPartitasConfig: its four subtests.
    #[test]
    fn view_node_on_partitas_config() {
        let gpus = vec![
            GpuConfig::default(),
            GpuConfig {
                mig: true,
                counts: [("3g.40gb".to_string(), 1), ("2g.20gb".to_string(), 2)].into(),
            },
        ];
        let name = config_name(&gpus);
        let opt = NodeOptions {
            configs: [(name.clone(), device_specs(&gpus))].into(),
            ..NodeOptions::default()
        };
        let base = || {
            gpu_node("n", 2)
                .mig(1, &[("3g.40gb", 1), ("2g.20gb", 2)])
                .label(LABEL_MIG_CONFIG, &name)
        };

        // applied and advertised
        let v = view_node(
            &base()
                .label(LABEL_MIG_CONFIG_STATE, MIG_STATE_SUCCESS)
                .obj(),
            &opt,
        );
        assert!(
            !v.mig_changing && !v.mig_failed,
            "node not ready: {}",
            v.reason
        );
        assert!(!v.gpus[0].mig, "GPUs {:?}", v.gpus);
        assert_eq!(
            v.gpus[1].layout.to_string(),
            "2g.20gb@0,2g.20gb@2,3g.40gb@4"
        );
        assert_eq!(v.configs(), gpus);

        // the MIG manager is still working
        let v = view_node(
            &base()
                .label(LABEL_MIG_CONFIG_STATE, MIG_STATE_PENDING)
                .obj(),
            &opt,
        );
        assert!(v.mig_changing, "pending config not reported as changing");
        assert_eq!(v.reason, format!("MIG config {name} is pending"));

        // success, but the device plugin still advertises the old layout
        let n = gpu_node("n", 2)
            .mig(1, &[("1g.10gb", 7)])
            .label(LABEL_MIG_CONFIG, &name)
            .label(LABEL_MIG_CONFIG_STATE, MIG_STATE_SUCCESS)
            .obj();
        let v = view_node(&n, &opt);
        assert!(
            v.mig_changing && v.reason.contains("device plugin"),
            "changing {} ({}), want waiting for the device plugin",
            v.mig_changing,
            v.reason
        );

        // failed
        let v = view_node(
            &base().label(LABEL_MIG_CONFIG_STATE, MIG_STATE_FAILED).obj(),
            &opt,
        );
        assert!(v.mig_failed, "failed config not reported");
        assert_eq!(v.reason, format!("the MIG manager failed to apply {name}"));

        // no state yet
        let v = view_node(&base().obj(), &opt);
        assert_eq!(v.reason, format!("MIG config {name} is not reported yet"));

        // a config that misses a GPU of the node (an entry for GPU 0 only;
        // device_specs would write a single group as "all")
        let mut only_first = device_specs(&gpus[..1]);
        only_first[0].devices = Devices::Indices(vec![0]);
        let short = NodeOptions {
            configs: [(name.clone(), only_first)].into(),
            ..NodeOptions::default()
        };
        let v = view_node(&base().obj(), &short);
        assert!(v.mig_failed);
        assert_eq!(
            v.reason,
            format!("MIG config {name}: config names no setting for GPU 1")
        );
    }

    // Go's Quantity.Value and MilliValue, rounded away from zero.
    #[test]
    fn quantities_read_as_go_does() {
        let cases: &[(&str, i64, i64)] = &[
            ("64", 64, 64_000),
            ("100m", 1, 100),
            ("1.5", 2, 1_500),
            ("512Gi", 512 << 30, (512i64 << 30) * 1000),
            ("2k", 2_000, 2_000_000),
            ("1e3", 1_000, 1_000_000),
            ("5E-1", 1, 500),
            ("1n", 1, 1),
            ("-2.5", -3, -2_500),
            (".5", 1, 500),
            ("0", 0, 0),
            ("x", 0, 0),
            ("1Zi", 0, 0),
        ];
        for (text, one, milli) in cases {
            assert_eq!(quantity_value(&q(*text), Scale::One), *one, "{text}");
            assert_eq!(quantity_value(&q(*text), Scale::Milli), *milli, "{text}");
        }
    }
}
