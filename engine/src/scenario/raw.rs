//! The raw types mirror the file (the Go build's raw.go). The strict
//! decoder (`decode.rs`, with unknown fields refused) fills them; `convert`
//! then turns them into the Scenario's types, applying defaults. Leaf values
//! with their own syntax (durations, CPU and memory quantities, whole
//! numbers) parse themselves and report their position.

use std::collections::BTreeMap;

use super::decode::{Decoder, Fatal, Struct, Target};
use super::duration::parse_duration;
use super::yaml::{INT, Kind, NodeId, Resolved, Tree, resolve};
use crate::quote::quote;

/// Defines a raw struct, its YAML field names (in the Go struct's order:
/// "known here" lists them so) and its decoding as a Go struct.
macro_rules! raw_struct {
    ($(#[$doc:meta])* $name:ident, $go:literal { $($field:ident: $ty:ty = $yaml:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq)]
        pub(crate) struct $name {
            $(pub $field: $ty,)*
        }

        impl $name {
            /// The YAML field names, in order.
            pub const FIELDS: &'static [&'static str] = &[$($yaml),*];
            /// The name the Go build's decoder gives the type.
            pub const GO_TYPE: &'static str = $go;
        }

        impl Target for $name {
            fn go_type(&self) -> String {
                $go.to_string()
            }
            fn mapping(&mut self, d: &mut Decoder, n: NodeId) -> Result<Option<bool>, Fatal> {
                d.mapping_struct(n, self).map(Some)
            }
        }

        impl Struct for $name {
            fn field_names(&self) -> &'static [&'static str] {
                Self::FIELDS
            }
            fn field(&mut self, i: usize) -> &mut dyn Target {
                let fields: Vec<&mut dyn Target> = vec![$(&mut self.$field),*];
                fields.into_iter().nth(i).expect("a field index from field_names")
            }
        }
    };
}

raw_struct!(
    /// The whole file.
    RawScenario, "scenario.rawScenario" {
        name: String = "name",
        duration: DurationField = "duration",
        seed: Whole = "seed",
        reserve: Whole = "production_reserve_gpus",
        nodes: Vec<RawNodeGroup> = "nodes",
        teams: Vec<RawTeam> = "teams",
        workloads: Vec<RawWorkload> = "workloads",
    }
);

raw_struct!(
    /// One entry of `nodes`.
    RawNodeGroup, "scenario.rawNodeGroup" {
        group: String = "group",
        count: Whole = "count",
        gpu: String = "gpu",
        gpus: Whole = "gpus",
        mig: bool = "mig",
        cpu: CpuField = "cpu",
        memory: MemField = "memory",
        tier: String = "tier",
        leaves: Vec<String> = "leaves",
        spine: String = "spine",
        block: String = "block",
        nvlink: String = "nvlink",
    }
);

raw_struct!(
    /// One entry of `teams`.
    RawTeam, "scenario.rawTeam" {
        name: String = "name",
        guaranteed_gpus: Whole = "guaranteed_gpus",
        burst_gpus: Whole = "burst_gpus",
        weight: f64 = "weight",
        classes: Vec<String> = "classes",
    }
);

raw_struct!(
    /// One entry of `workloads`.
    RawWorkload, "scenario.rawWorkload" {
        name: String = "name",
        team: String = "team",
        class: String = "class",
        profile: String = "profile",
        mix: BTreeMap<String, f64> = "mix",
        arrival: RawArrival = "arrival",
        duration: RawDist = "duration",
        replicas: Whole = "replicas",
        gang: RawGang = "gang",
        checkpoint_every: DurationField = "checkpoint_every",
    }
);

raw_struct!(
    /// A workload's `arrival`.
    RawArrival, "scenario.rawArrival" {
        process: String = "process",
        rate_per_hour: f64 = "rate_per_hour",
        file: String = "file",
        time_scale: f64 = "time_scale",
        at: Vec<DurationField> = "at",
    }
);

raw_struct!(
    /// A workload's `duration`.
    RawDist, "scenario.rawDist" {
        dist: String = "dist",
        mean: DurationField = "mean",
        sigma: f64 = "sigma",
        value: DurationField = "value",
        min: DurationField = "min",
        max: DurationField = "max",
    }
);

raw_struct!(
    /// A workload's `gang`.
    RawGang, "scenario.rawGang" {
        sizes: Vec<Whole> = "sizes",
        weights: Vec<f64> = "weights",
    }
);

/// Every raw type's YAML field names, by the type's Go name: what an
/// unknown field's error lists as "known here".
pub(crate) fn known_fields(go_type: &str) -> &'static [&'static str] {
    match go_type {
        RawScenario::GO_TYPE => RawScenario::FIELDS,
        RawNodeGroup::GO_TYPE => RawNodeGroup::FIELDS,
        RawTeam::GO_TYPE => RawTeam::FIELDS,
        RawWorkload::GO_TYPE => RawWorkload::FIELDS,
        RawArrival::GO_TYPE => RawArrival::FIELDS,
        RawDist::GO_TYPE => RawDist::FIELDS,
        RawGang::GO_TYPE => RawGang::FIELDS,
        _ => &[],
    }
}

/// Every raw type with its fields, for the check that docs/scenario.md
/// documents them all.
#[cfg(test)]
pub(crate) fn all_known_fields() -> Vec<(&'static str, &'static [&'static str])> {
    [
        RawScenario::GO_TYPE,
        RawNodeGroup::GO_TYPE,
        RawTeam::GO_TYPE,
        RawWorkload::GO_TYPE,
        RawArrival::GO_TYPE,
        RawDist::GO_TYPE,
        RawGang::GO_TYPE,
    ]
    .into_iter()
    .map(|t| (t, known_fields(t)))
    .collect()
}

/// A leaf value that does not parse, at its node.
fn leaf_err(tree: &Tree, n: NodeId, message: String) -> Fatal {
    let node = tree.node(n);
    Fatal::Leaf {
        line: node.line,
        column: node.column,
        message,
    }
}

/// The node's text, refusing lists and mappings.
fn scalar<'t>(tree: &'t Tree, n: NodeId, what: &str) -> Result<&'t str, Fatal> {
    let node = tree.node(n);
    match node.kind {
        Kind::Scalar => Ok(&node.value),
        kind => {
            let found = if kind == Kind::Sequence {
                "a list"
            } else {
                "a mapping"
            };
            Err(leaf_err(tree, n, format!("{found} is not {what}")))
        }
    }
}

/// An integer. yaml.v3 would truncate 2.5 into an int field; this refuses
/// it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Whole(pub i64);

impl Target for Whole {
    fn go_type(&self) -> String {
        "scenario.whole".into()
    }
    fn unmarshal_yaml(&mut self, tree: &Tree, n: NodeId) -> Option<Result<(), Fatal>> {
        Some((|| {
            scalar(tree, n, "a whole number")?;
            let node = tree.node(n);
            if tree.short_tag(n) != INT {
                return Err(leaf_err(
                    tree,
                    n,
                    format!("{} is not a whole number", quote(&node.value)),
                ));
            }
            // Go decodes the node again into an int64.
            let out_of_range = || leaf_err(tree, n, format!("{} is out of range", node.value));
            match resolve(&node.tag, &node.value) {
                Ok(Resolved::Int(v)) => self.0 = v,
                _ => return Err(out_of_range()),
            }
            Ok(())
        })())
    }
}

/// A Go duration ("90s", "2h30m"). Null leaves it unset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DurationField {
    pub nanos: i64,
    pub set: bool,
}

impl Target for DurationField {
    fn go_type(&self) -> String {
        "scenario.durationField".into()
    }
    fn unmarshal_yaml(&mut self, tree: &Tree, n: NodeId) -> Option<Result<(), Fatal>> {
        Some((|| {
            let s = scalar(tree, n, "a duration")?;
            let Some(d) = parse_duration(s) else {
                return Err(leaf_err(
                    tree,
                    n,
                    format!(
                        "{} is not a duration (Go syntax with a unit: 90s, 30m, 2h, 168h)",
                        quote(s)
                    ),
                ));
            };
            *self = DurationField {
                nanos: d,
                set: true,
            };
            Ok(())
        })())
    }
}

/// A CPU quantity in Kubernetes syntax: cores ("192", "1.5") or
/// millicores ("1500m"), kept in millicores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CpuField {
    pub milli: i64,
    pub set: bool,
}

impl Target for CpuField {
    fn go_type(&self) -> String {
        "scenario.cpuField".into()
    }
    fn unmarshal_yaml(&mut self, tree: &Tree, n: NodeId) -> Option<Result<(), Fatal>> {
        Some((|| {
            let s = scalar(tree, n, "a CPU quantity")?;
            // Millicores per unit.
            let (num, scale) = match s.strip_suffix('m') {
                Some(num) => (num, 1),
                None => (s, 1000),
            };
            let Some(milli) = exact(num, scale, 1) else {
                return Err(leaf_err(
                    tree,
                    n,
                    format!(
                        "{} is not a CPU quantity (cores such as 192 or 1.5, or millicores such as 1500m)",
                        quote(s)
                    ),
                ));
            };
            *self = CpuField { milli, set: true };
            Ok(())
        })())
    }
}

/// A memory quantity with a binary suffix (Ki, Mi, Gi, Ti), kept in MiB;
/// it must come to whole MiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MemField {
    pub mib: i64,
    pub set: bool,
}

/// KiB per unit of each accepted suffix.
const MEM_UNITS: [(&str, i64); 4] = [("Ki", 1), ("Mi", 1 << 10), ("Gi", 1 << 20), ("Ti", 1 << 30)];

impl Target for MemField {
    fn go_type(&self) -> String {
        "scenario.memField".into()
    }
    fn unmarshal_yaml(&mut self, tree: &Tree, n: NodeId) -> Option<Result<(), Fatal>> {
        Some((|| {
            let s = scalar(tree, n, "a memory quantity")?;
            for (suffix, kib) in MEM_UNITS {
                let Some(num) = s.strip_suffix(suffix) else {
                    continue;
                };
                let Some(mib) = exact(num, kib, 1 << 10) else {
                    return Err(leaf_err(
                        tree,
                        n,
                        format!("{} is not a whole number of MiB", quote(s)),
                    ));
                };
                *self = MemField { mib, set: true };
                return Ok(());
            }
            Err(leaf_err(
                tree,
                n,
                format!(
                    "{} needs a binary unit: Ki, Mi, Gi or Ti (such as 512Gi or 2Ti)",
                    quote(s)
                ),
            ))
        })())
    }
}

/// Bounds quantities so that sums over many nodes cannot overflow: 2^40
/// MiB is an exbibyte, 2^40 millicores a billion cores.
const MAX_QUANTITY: u128 = 1 << 40;

/// A plain non-negative decimal ("12", "1.5"; at most 19 characters)
/// times `mul / div`, when that is a whole number no larger than
/// MAX_QUANTITY. Exact: the decimal is read as an integer over a power of
/// ten (the Go build uses big.Rat).
fn exact(num: &str, mul: i64, div: i64) -> Option<i64> {
    if num.is_empty()
        || num.len() > 19
        || num.matches('.').count() > 1
        || num.starts_with('.')
        || num.ends_with('.')
        || !num.bytes().all(|c| c.is_ascii_digit() || c == b'.')
    {
        return None;
    }
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let digits: u128 = format!("{int}{frac}").parse().ok()?;
    let numerator = digits * mul as u128;
    let denominator = 10u128.pow(frac.len() as u32) * div as u128;
    if !numerator.is_multiple_of(denominator) || numerator / denominator > MAX_QUANTITY {
        return None;
    }
    i64::try_from(numerator / denominator).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_reads_decimals_exactly() {
        assert_eq!(exact("192", 1000, 1), Some(192_000));
        assert_eq!(exact("1.5", 1000, 1), Some(1500));
        assert_eq!(exact("0.0005", 1000, 1), None);
        assert_eq!(exact("1.5", 1 << 30, 1 << 10), Some(3 << 19));
        assert_eq!(exact("1.5", 1, 1 << 10), None);
        assert_eq!(exact("1099511627776", 1, 1), Some(1 << 40));
        assert_eq!(exact("1099511627777", 1, 1), None);
        assert_eq!(exact("9999999999999999999", 1 << 30, 1 << 10), None);
        for bad in [
            "",
            ".5",
            "5.",
            "1.2.3",
            "-1",
            "1e3",
            "+1",
            "12345678901234567890",
        ] {
            assert_eq!(exact(bad, 1, 1), None, "{bad:?}");
        }
    }
}
